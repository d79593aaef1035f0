#!/usr/bin/python3
"""aclnnCrossEntropyLossGrad (through the C ABI, ctypes) against PyTorch's composed backward, same shapes.

PyTorch side (torch 1.13, CPU, torch.set_num_threads(2)), every output preallocated (out= variants), mean
reduction, ignore_index -100:
  plain / weighted:   nll_loss_backward(out=buf); _log_softmax_backward_data(buf, logp, out=out)
  smoothed+weighted:  nll_loss_backward(out=buf); buf *= 1 - eps; buf -= eps / C * g / W * weight (broadcast);
                      _log_softmax_backward_data(out=out)          (what cross_entropy(label_smoothing) does)
  zloss:              plain, then out += exp(logp) * (2 * scale * lse * gz / N)[:, None]   (torch.exp(out=tmp))
PyTorch 1.13 has no CPU nll_loss_backward for fp16: those rows print n/a.
Ours: phase 1 + phase 2 + aclrtSynchronizeStream on the same torch-owned memory (OPENACLNN_NUM_THREADS=2), the
aclTensor descriptors made once per row (as the torch tensors are), the calls through ctypes (a few microseconds
each: a 1 x 10 call takes about 5 us here).
The N x C tensors of both sides lie on transparent huge pages (bench/hugepages.py), as in the C++ benchmarks.
Each row runs one warm-up of each side, then --reps rounds (more for short calls, see Rounds) of ours, PyTorch's and
a copy of the same bytes (out.copy_(logProb), PyTorch's own copy, 2 threads) in turn: the times are medians, and each
ratio is the median over the rounds of the ratio of two times in the same round. Columns: our time, PyTorch's, the
speed-up (PyTorch / ours), the copy's time, x copy (ours / copy) and PyTorch / copy, which is the speed-up a kernel
running exactly at the copy's speed would show. copy_ writes through the caches; a kernel that streams its output
(ours, for large outputs) can run somewhat faster than it, so that figure is a guide to what is reachable against
PyTorch on the machine, not a hard limit.

usage: /usr/bin/python3 bench/compare_pytorch.py [--build build] [--filter 4096x32000] [--reps 5]
"""
import argparse
import ctypes
import os
import re
import statistics
import sys
import time

os.environ.setdefault("OPENACLNN_NUM_THREADS", "2")
import torch  # noqa: E402

import hugepages  # noqa: E402
from paired_rounds import interleaved_rounds, round_ratios  # noqa: E402

torch.set_num_threads(2)

ACL_FLOAT, ACL_FLOAT16, ACL_INT64, ACL_BF16 = 0, 1, 9, 27
ACL_FORMAT_ND = 2
DTYPES = [("fp32", ACL_FLOAT, torch.float32), ("fp16", ACL_FLOAT16, torch.float16), ("bf16", ACL_BF16, torch.bfloat16)]
SHAPES = [(4096, 32000), (8192, 50257), (2048, 128256), (1, 152064), (65536, 1000), (16384, 10)]
VARIANTS = ["plain", "weighted", "smoothed+weighted", "zloss"]
EPS, ZSCALE = 0.1, 1e-4
vp = ctypes.c_void_p


class Op:
    def __init__(self, build):
        libs = [os.path.join(build, "src", name) for name in ("libascendcl.so", "libnnopbase.so", "libopapi_nn.so")]
        for p in libs:
            ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
        self.rt, self.base, self.nn = (ctypes.CDLL(p) for p in libs)
        rt, base, nn = self.rt, self.base, self.nn
        rt.aclInit.argtypes = [ctypes.c_char_p]
        rt.aclrtCreateStream.argtypes = [ctypes.POINTER(vp)]
        rt.aclrtSynchronizeStream.argtypes = [vp]
        rt.aclrtMalloc.argtypes = [ctypes.POINTER(vp), ctypes.c_size_t, ctypes.c_int]
        rt.aclrtFree.argtypes = [vp]
        rt.aclGetRecentErrMsg.restype = ctypes.c_char_p
        base.aclCreateTensor.restype = vp
        base.aclCreateTensor.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64, ctypes.c_int,
                                         ctypes.POINTER(ctypes.c_int64), ctypes.c_int64, ctypes.c_int,
                                         ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64, vp]
        base.aclDestroyTensor.argtypes = [vp]
        nn.aclnnCrossEntropyLossGradGetWorkspaceSize.restype = ctypes.c_int32
        nn.aclnnCrossEntropyLossGradGetWorkspaceSize.argtypes = [
            vp, vp, vp, vp, vp, vp, ctypes.c_char_p, ctypes.c_int64, ctypes.c_double, ctypes.c_double, vp,
            ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(vp)]
        nn.aclnnCrossEntropyLossGrad.restype = ctypes.c_int32
        nn.aclnnCrossEntropyLossGrad.argtypes = [vp, ctypes.c_uint64, vp, vp]
        assert rt.aclInit(None) == 0 and rt.aclrtSetDevice(0) == 0
        self.stream = vp()
        assert rt.aclrtCreateStream(ctypes.byref(self.stream)) == 0
        self.workspace, self.workspace_size = vp(), 0

    def tensor(self, t, acl_dtype):
        dims = (ctypes.c_int64 * max(1, t.dim()))(*t.shape)
        return self.base.aclCreateTensor(dims, t.dim(), acl_dtype, None, 0, ACL_FORMAT_ND, dims, t.dim(),
                                         vp(t.data_ptr()))

    def bind(self, acl_dtype, grad_loss, logp, target, weight, grad_zloss, lse, smoothing, scale, out):
        """The tensor descriptors of one call, made once (as PyTorch's tensors are); returns the call (phase 1, phase
        2, synchronise) and the function that destroys them."""
        ts = [self.tensor(grad_loss, acl_dtype), self.tensor(logp, acl_dtype), self.tensor(target, ACL_INT64),
              self.tensor(weight, ACL_FLOAT) if weight is not None else None,
              self.tensor(grad_zloss, acl_dtype) if grad_zloss is not None else None,
              self.tensor(lse, acl_dtype) if lse is not None else None, self.tensor(out, acl_dtype)]
        size, executor = ctypes.c_uint64(), vp()
        phase1, phase2, sync = (self.nn.aclnnCrossEntropyLossGradGetWorkspaceSize, self.nn.aclnnCrossEntropyLossGrad,
                                self.rt.aclrtSynchronizeStream)

        def call():
            status = phase1(ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], b"mean", -100, smoothing, scale, ts[6],
                            ctypes.byref(size), ctypes.byref(executor))
            if status != 0:
                raise RuntimeError(f"phase 1: {status} {self.rt.aclGetRecentErrMsg()}")
            if size.value > self.workspace_size:
                if self.workspace:
                    self.rt.aclrtFree(self.workspace)
                assert self.rt.aclrtMalloc(ctypes.byref(self.workspace), size.value, 0) == 0
                self.workspace_size = size.value
            assert phase2(self.workspace, size.value, executor, self.stream) == 0
            assert sync(self.stream) == 0

        def release():
            for t in ts:
                if t:
                    self.base.aclDestroyTensor(t)

        return call, release


def Rounds(ours, theirs, reps):
    """reps rounds, or more for short calls (up to 200, about 0.2 s of both): one round of a call of some
    microseconds is mostly noise."""
    t0 = time.perf_counter()
    ours()
    theirs()
    pair = time.perf_counter() - t0
    return max(reps, min(200, int(0.2 / pair)))


def cpu_description():
    """The CPU as /proc/cpuinfo names it, with its family and model (as grad_bench's context: bench_common.h)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return "unknown"
    name = fields.get("model name", "unknown")
    return f"{name}, family {fields['cpu family']} model {fields.get('model', '?')}" if "cpu family" in fields else name


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--filter", default=".")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    op = Op(args.build)
    print(f"# cpu: {cpu_description()}")
    print(f"{'shape':>14} {'dtype':>5} {'variant':>18} {'ours ms':>9} {'torch ms':>9} {'speed-up':>8} "
          f"{'copy ms':>9} {'x copy':>7} {'torch/copy':>10}")
    for n, c in SHAPES:
        for dname, acl_dtype, tdtype in DTYPES:
            if not re.search(args.filter, f"{n}x{c}/{dname}"):
                continue
            gen = torch.Generator().manual_seed(1)
            logp = hugepages.like((torch.randn(n, c, generator=gen) * 2.0).log_softmax(1).to(tdtype))
            target = torch.randint(0, c, (n,), generator=gen, dtype=torch.int64)
            weight = 0.5 + torch.rand(c, generator=gen)
            out, buf, tmp = (hugepages.empty((n, c), tdtype) for _ in range(3))
            g = torch.ones((), dtype=tdtype)
            gz = torch.ones((), dtype=tdtype)
            lse = torch.full((n,), float(torch.log(torch.tensor(float(c)))), dtype=tdtype)
            for variant in VARIANTS:
                w = weight if variant in ("weighted", "smoothed+weighted") else None
                w_torch = w.to(tdtype) if w is not None else None  # PyTorch wants the weight in the input's dtype
                total_weight = (w[target].sum() if w is not None else torch.tensor(float(n))).to(tdtype)
                smoothing = EPS if variant == "smoothed+weighted" else 0.0
                scale = ZSCALE if variant == "zloss" else 0.0
                wrow = (EPS / c / float(total_weight) * weight).to(tdtype)[None, :]
                zcoef = (2 * ZSCALE * lse.float() / n).to(tdtype)[:, None]

                ours, release = op.bind(acl_dtype, g, logp, target, w, gz if scale else None,
                                        lse if scale else None, smoothing, scale, out)

                def composed():
                    torch.ops.aten.nll_loss_backward.grad_input(g, logp, target, w_torch, 1, -100, total_weight,
                                                                grad_input=buf)
                    if variant == "smoothed+weighted":
                        buf.mul_(1.0 - EPS)
                        buf.sub_(wrow)
                    torch._log_softmax_backward_data(buf, logp, 1, tdtype, out=out)
                    if variant == "zloss":
                        torch.exp(logp, out=tmp)
                        tmp.mul_(zcoef)
                        out.add_(tmp)

                def copy():
                    out.copy_(logp)

                torch_ms, speedup, ceiling = f"{'n/a':>9}", f"{'n/a':>8}", f"{'n/a':>10}"
                try:
                    composed()
                    fns = [ours, composed, copy]
                except RuntimeError as exc:  # e.g. an op without a CPU kernel for this dtype
                    fns = [ours, copy]
                    print(f"  (PyTorch: {str(exc).splitlines()[0]})", file=sys.stderr)
                times = interleaved_rounds(fns, Rounds(ours, fns[1], args.reps))
                times_ours, times_copy = times[0], times[-1]
                if len(fns) == 3:
                    torch_ms = f"{statistics.median(times[1]) * 1e3:9.3g}"
                    speedup = f"{statistics.median(round_ratios(times[1], times_ours)):7.2f}x"
                    ceiling = f"{statistics.median(round_ratios(times[1], times_copy)):9.2f}x"
                x_copy = statistics.median(round_ratios(times_ours, times_copy))
                release()
                print(f"{n:>6}x{c:<7} {dname:>5} {variant:>18} {statistics.median(times_ours) * 1e3:9.3g} {torch_ms} "
                      f"{speedup} {statistics.median(times_copy) * 1e3:9.3g} {x_copy:7.2f} {ceiling}", flush=True)
            del logp, out, buf, tmp


if __name__ == "__main__":
    main()
