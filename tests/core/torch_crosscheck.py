#!/usr/bin/python3
"""Cross-check of aclnnCrossEntropyLossGrad against PyTorch's autograd, through the public C ABI (ctypes).

For random configurations the gradient of

    objective(x) = sum(gradLoss * (cross_entropy(x) + Z(x))) + sum(gradZloss * Z(x))

with respect to the logits x is taken by torch.autograd in float64, where cross_entropy is
torch.nn.functional.cross_entropy(weight, ignore_index, label_smoothing, reduction) and Z the z-loss
scale * logsumexp(x)^2 (masked; mean divides by the count of unmasked rows). The operator gets
logProb = log_softmax(x) and lseForZloss = logsumexp(x), rounded to the dtype.

The tolerance allows the rounding of those inputs (first order: exp(logProb) moves by |logProb| * u relative),
fp32 arithmetic and the one rounding of the output; everything else must agree.

usage: torch_crosscheck.py libascendcl.so libnnopbase.so libopapi_nn.so [configs] [seed]
Exit status 77 (ctest: skipped) only when torch cannot be imported.
"""
import ctypes
import math
import random
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except Exception as exc:  # noqa: BLE001 - any import failure means torch is unavailable
    print(f"SKIP: torch/numpy not importable: {exc}")
    sys.exit(77)

ACL_FLOAT, ACL_FLOAT16, ACL_INT32, ACL_INT64, ACL_BF16 = 0, 1, 3, 9, 27
ACL_FORMAT_ND = 2
H2D, D2H = 1, 2
TORCH_DTYPES = {ACL_FLOAT: torch.float32, ACL_FLOAT16: torch.float16, ACL_BF16: torch.bfloat16}
PRECISION = {ACL_FLOAT: 24, ACL_FLOAT16: 11, ACL_BF16: 8}
DENORM_MIN = {ACL_FLOAT: 2.0**-149, ACL_FLOAT16: 2.0**-24, ACL_BF16: 2.0**-133}
NAMES = {ACL_FLOAT: "FLOAT", ACL_FLOAT16: "FLOAT16", ACL_BF16: "BF16", ACL_INT32: "INT32", ACL_INT64: "INT64"}

vp = ctypes.c_void_p


class Acl:
    def __init__(self, paths):
        for p in paths:
            ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
        self.rt = ctypes.CDLL(paths[0])
        self.base = ctypes.CDLL(paths[1])
        self.nn = ctypes.CDLL(paths[2])
        rt, base, nn = self.rt, self.base, self.nn
        rt.aclInit.argtypes = [ctypes.c_char_p]
        rt.aclrtSetDevice.argtypes = [ctypes.c_int32]
        rt.aclrtCreateStream.argtypes = [ctypes.POINTER(vp)]
        rt.aclrtSynchronizeStream.argtypes = [vp]
        rt.aclrtMalloc.argtypes = [ctypes.POINTER(vp), ctypes.c_size_t, ctypes.c_int]
        rt.aclrtFree.argtypes = [vp]
        rt.aclrtMemcpy.argtypes = [vp, ctypes.c_size_t, vp, ctypes.c_size_t, ctypes.c_int]
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
        assert rt.aclInit(None) == 0
        assert rt.aclrtSetDevice(0) == 0
        self.stream = vp()
        assert rt.aclrtCreateStream(ctypes.byref(self.stream)) == 0
        self.allocations = []
        self.tensors = []

    def error(self):
        m = self.rt.aclGetRecentErrMsg()
        return m.decode() if m else ""

    def tensor(self, array, dtype, dims):
        """A contiguous tensor of dims over a device copy of array (a numpy array of the right element size)."""
        array = np.ascontiguousarray(array)
        size = max(array.nbytes, 1)
        dev = vp()
        assert self.rt.aclrtMalloc(ctypes.byref(dev), size, 0) == 0
        self.allocations.append(dev)
        if array.nbytes:
            assert self.rt.aclrtMemcpy(dev, size, array.ctypes.data, array.nbytes, H2D) == 0
        n = len(dims)
        dims_c = (ctypes.c_int64 * max(n, 1))(*dims)
        t = self.base.aclCreateTensor(dims_c, n, dtype, None, 0, ACL_FORMAT_ND, dims_c, n, dev)
        assert t, self.error()
        self.tensors.append(t)
        return t, dev, array.nbytes

    def download(self, dev, nbytes, np_dtype):
        out = np.empty(nbytes // np.dtype(np_dtype).itemsize, dtype=np_dtype)
        assert self.rt.aclrtMemcpy(out.ctypes.data, nbytes, dev, nbytes, D2H) == 0
        return out

    def release(self):
        for t in self.tensors:
            self.base.aclDestroyTensor(t)
        for d in self.allocations:
            self.rt.aclrtFree(d)
        self.tensors, self.allocations = [], []


def to_dtype_bits(values, dtype):
    """float64 tensor -> (numpy array of the dtype's bits, float64 tensor of the rounded values)."""
    rounded = values.to(TORCH_DTYPES[dtype])
    if dtype == ACL_FLOAT:
        bits = rounded.numpy().copy()
    else:
        bits = rounded.view(torch.int16).numpy().copy()
    return bits, rounded.double()


def from_dtype_bits(bits, dtype):
    if dtype == ACL_FLOAT:
        return torch.from_numpy(bits.astype(np.float32)).double()
    return torch.from_numpy(bits.astype(np.int16)).view(TORCH_DTYPES[dtype]).double()


def random_config(rng, index):
    dtype = [ACL_FLOAT, ACL_FLOAT, ACL_BF16, ACL_FLOAT16][index % 4]
    n = rng.randint(1, 16)
    c = rng.choice([1, 2, 3, 7, 16, 31, 64, 100, 1000]) if index % 9 else 4099
    cfg = {
        "dtype": dtype,
        "target": rng.choice([ACL_INT32, ACL_INT64]),
        "n": n,
        "c": c,
        "reduction": rng.choice(["none", "mean", "sum"]),
        "weight": rng.random() < 0.5,
        "ignore_index": rng.choice([-100, -1, rng.randrange(c)]),
        "ignore_rows": rng.random() < 0.6,
        "label_smoothing": rng.choice([0.0, 0.0, 1.0, rng.random()]),
        "zloss_scale": rng.choice([0.0, 0.0, 1e-4, 0.05, -0.02]),
        "grad_zloss": rng.random() < 0.5,
        "seed": rng.randrange(1 << 30),
    }
    return cfg


def run_config(acl, cfg):
    gen = torch.Generator().manual_seed(cfg["seed"])
    n, c, dtype = cfg["n"], cfg["c"], cfg["dtype"]
    u = 2.0 ** -PRECISION[dtype]
    red = cfg["reduction"]
    ii = cfg["ignore_index"]
    x = (torch.randn(n, c, generator=gen, dtype=torch.float64) * 3.0 + torch.rand(n, 1, generator=gen,
                                                                                  dtype=torch.float64) * 10.0)
    target = torch.randint(0, c, (n,), generator=gen)
    if cfg["ignore_rows"]:
        hit = torch.rand(n, generator=gen) < 0.3
        hit[0] = n > 1  # leave at least one row unmasked (torch's mean over nothing is NaN)
        target = torch.where(hit, torch.full_like(target, ii), target)
    mask = (target != ii)
    if not bool(mask.any()):
        target[0] = (ii + 1) % c if 0 <= ii < c else 0
        if c == 1 and ii == 0:
            return "skip"  # every row is necessarily ignored; covered by the gtest suite
        mask = (target != ii)
    weight = (torch.rand(c, generator=gen, dtype=torch.float64) * 1.9 + 0.1).float().double() if cfg["weight"] else None
    glen = n if red == "none" else 1
    gl_bits, gl = to_dtype_bits(torch.rand(glen, generator=gen, dtype=torch.float64) * 4 - 2, dtype)
    gz_bits, gz = to_dtype_bits(torch.rand(glen, generator=gen, dtype=torch.float64) * 4 - 2, dtype)
    use_gz = cfg["grad_zloss"]
    scale = cfg["zloss_scale"]
    ls = cfg["label_smoothing"]

    # ---- PyTorch: autograd of the objective in float64 ----
    xg = x.clone().requires_grad_(True)
    ce = F.cross_entropy(xg, target, weight=weight, ignore_index=ii, reduction=red, label_smoothing=ls)
    lse_x = torch.logsumexp(xg, dim=1)
    zrow = scale * lse_x ** 2 * mask.double()
    if red == "none":
        z = zrow
        gls, gzs = gl, gz
    else:
        z = zrow.sum()
        if red == "mean":
            z = z / mask.sum().double()
        gls, gzs = gl[0], gz[0]
    objective = (gls * (ce + z)).sum()
    if use_gz:
        objective = objective + (gzs * z).sum()
    (expected,) = torch.autograd.grad(objective, xg)

    # ---- the operator ----
    logp = torch.log_softmax(x, dim=1)
    lp_bits, lp = to_dtype_bits(logp, dtype)
    lse_bits, _ = to_dtype_bits(torch.logsumexp(x, dim=1), dtype)
    tgt = target.numpy().astype(np.int32 if cfg["target"] == ACL_INT32 else np.int64)
    gdims = [n] if red == "none" else []
    t_gl, _, _ = acl.tensor(gl_bits, dtype, gdims)
    t_lp, _, _ = acl.tensor(lp_bits, dtype, [n, c])
    t_tg, _, _ = acl.tensor(tgt, cfg["target"], [n])
    t_w = acl.tensor(weight.float().numpy(), ACL_FLOAT, [c])[0] if weight is not None else None
    t_gz = acl.tensor(gz_bits, dtype, gdims)[0] if use_gz else None
    t_lse = acl.tensor(lse_bits, dtype, [n])[0] if scale != 0.0 else None
    poison = np.full(lp_bits.shape, 0x7fa5a5a5 if dtype == ACL_FLOAT else 0x7d5a,
                     dtype=np.uint32 if dtype == ACL_FLOAT else np.uint16)
    if dtype == ACL_FLOAT:
        poison = poison.view(np.float32)
    t_out, d_out, out_bytes = acl.tensor(poison, dtype, [n, c])
    ws = ctypes.c_uint64(0)
    ex = vp()
    st = acl.nn.aclnnCrossEntropyLossGradGetWorkspaceSize(t_gl, t_lp, t_tg, t_w, t_gz, t_lse, red.encode(), ii, ls,
                                                          scale, t_out, ctypes.byref(ws), ctypes.byref(ex))
    if st != 0:
        return f"phase 1 returned {st}: {acl.error()}"
    wsp = vp()
    if ws.value:
        assert acl.rt.aclrtMalloc(ctypes.byref(wsp), ws.value, 0) == 0
        acl.allocations.append(wsp)
    st = acl.nn.aclnnCrossEntropyLossGrad(wsp, ws.value, ex, acl.stream)
    if st != 0:
        return f"phase 2 returned {st}: {acl.error()}"
    st = acl.rt.aclrtSynchronizeStream(acl.stream)
    if st != 0:
        return f"aclrtSynchronizeStream returned {st}: {acl.error()}"
    out_bits = acl.download(d_out, out_bytes, np.float32 if dtype == ACL_FLOAT else np.int16).reshape(n, c)
    got = from_dtype_bits(out_bits, dtype)

    # ---- tolerance: input rounding (first order), fp32 arithmetic, output rounding ----
    w = weight if weight is not None else torch.ones(c, dtype=torch.float64)
    m = mask.double()
    tcl = target.clamp(0, c - 1)
    if red == "mean":
        wsum = (w[tcl] * m).sum()
        nll = gl[0] * (1 - ls) / wsum * w[tcl] * m
        smooth = gl[0] * ls / c / wsum * m
        zc = 2 * scale * torch.logsumexp(x, 1) * m * (gl[0] + (gz[0] if use_gz else 0)) / m.sum()
    else:
        g = gl if red == "none" else gl[0].expand(n)
        h = (gz if red == "none" else gz[0].expand(n)) if use_gz else torch.zeros(n, dtype=torch.float64)
        nll = g * (1 - ls) * w[tcl] * m
        smooth = g * ls / c * m
        zc = 2 * scale * torch.logsumexp(x, 1) * m * (g + h)
    a = nll.abs() + smooth.abs() * w.abs().sum() + zc.abs()
    p = lp.exp()
    magnitude = p * a[:, None] + smooth.abs()[:, None] * w.abs()[None, :] + nll.abs()[:, None]
    input_error = p * a[:, None] * (lp.abs() * u * 1.01 + 2 * u)
    compute_error = 32 * 2.0 ** -24 * magnitude
    tol = 2 * (input_error + compute_error + u * (expected.abs() + input_error + compute_error)) + DENORM_MIN[dtype]
    diff = (got - expected).abs()
    bad = ~(diff <= tol)
    if bool(bad.any()):
        i, j = [int(v) for v in bad.nonzero()[0]]
        return (f"{int(bad.sum())} of {n * c} elements differ; first out[{i}][{j}] = {float(got[i, j])!r}, "
                f"torch {float(expected[i, j])!r}, tol {float(tol[i, j]):.3g} (target {int(target[i])})")
    return None


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 20240601
    torch.set_num_threads(1)
    acl = Acl(sys.argv[1:4])
    rng = random.Random(seed)
    failures = 0
    checked = 0
    for k in range(count):
        cfg = random_config(rng, k)
        problem = run_config(acl, cfg)
        acl.release()
        if problem == "skip":
            continue
        if problem is None:
            checked += 1
            continue
        failures += 1
        desc = " ".join(f"{key}={NAMES.get(v, v) if key in ('dtype', 'target') else v}" for key, v in cfg.items())
        print(f"FAIL config {k}: {desc}\n    {problem}")
    print(f"torch {torch.__version__}: {checked} configurations agree, {failures} differ (seed {seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
