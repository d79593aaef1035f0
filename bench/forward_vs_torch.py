#!/usr/bin/python3
"""aclnnCrossEntropyLoss (through ctypes) against PyTorch's log_softmax(out=) + nll_loss with preallocated
outputs, same inputs, same thread count. Each round runs ours, then PyTorch; the speed-up printed is the median over
the rounds of PyTorch's time / ours in the same round (the machine's speed drifts between rounds). Target: >= 3x.
Usage: bench/forward_vs_torch.py [BUILD_DIR [N C] [repeats]] (BUILD_DIR defaults to build/ beside bench/)"""
import ctypes
import os
import statistics
import sys

import torch

import hugepages
from paired_rounds import paired_rounds

build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build")
n, c = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (4096, 32000)
repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 5
acl = ctypes.CDLL(build + "/src/libascendcl.so", mode=ctypes.RTLD_GLOBAL)
base = ctypes.CDLL(build + "/src/libnnopbase.so", mode=ctypes.RTLD_GLOBAL)
nn = ctypes.CDLL(build + "/src/libopapi_nn.so", mode=ctypes.RTLD_GLOBAL)
P = ctypes.c_void_p
I64P = ctypes.POINTER(ctypes.c_int64)
base.aclCreateTensor.restype = P
base.aclCreateTensor.argtypes = [I64P, ctypes.c_uint64, ctypes.c_int, I64P, ctypes.c_int64, ctypes.c_int, I64P,
                                 ctypes.c_uint64, P]
acl.aclrtCreateStream.argtypes = [ctypes.POINTER(P)]
acl.aclrtSynchronizeStream.argtypes = [P]
nn.aclnnCrossEntropyLossGetWorkspaceSize.argtypes = [P, P, P, ctypes.c_char_p, ctypes.c_int64, ctypes.c_double,
                                                     ctypes.c_double, ctypes.c_bool, P, P, P, P,
                                                     ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(P)]
nn.aclnnCrossEntropyLoss.argtypes = [P, ctypes.c_uint64, P, P]
assert acl.aclInit(None) == 0 and acl.aclrtSetDevice(0) == 0
stream = P()
assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0


def tensor(t, code):
    dims = (ctypes.c_int64 * max(1, t.dim()))(*t.shape)
    strides = (ctypes.c_int64 * max(1, t.dim()))(*t.stride())
    return base.aclCreateTensor(dims, t.dim(), code, strides, 0, 2, dims, t.dim(), P(t.data_ptr()))


torch.set_num_threads(int(os.environ.get("OPENACLNN_NUM_THREADS", len(os.sched_getaffinity(0)))))
x = hugepages.like(torch.randn(n, c) * 2)  # N x C tensors on transparent huge pages, as in the C++ benchmarks
t = torch.randint(0, c, (n,))
lp_ours, lp_torch = hugepages.empty((n, c), torch.float32), hugepages.empty((n, c), torch.float32)
loss, zloss, lse = torch.empty(()), torch.empty(()), torch.empty(n)
workspace = torch.empty(n * 64 + 4096, dtype=torch.uint8)
h = [tensor(x, 0), tensor(t, 9), tensor(loss, 0), tensor(lp_ours, 0), tensor(zloss, 0), tensor(lse, 0)]


def ours():
    ws, ex = ctypes.c_uint64(0), P()
    assert nn.aclnnCrossEntropyLossGetWorkspaceSize(h[0], h[1], None, b"mean", -100, 0.0, 0.0, False, h[2], h[3],
                                                    h[4], h[5], ctypes.byref(ws), ctypes.byref(ex)) == 0
    assert nn.aclnnCrossEntropyLoss(P(workspace.data_ptr()), ws, ex, stream) == 0
    assert acl.aclrtSynchronizeStream(stream) == 0


def theirs():
    torch.log_softmax(x, 1, out=lp_torch)
    return torch.nn.functional.nll_loss(lp_torch, t)


ours_s, torch_s, ratios = paired_rounds(ours, theirs, repeats, warm_up=False)
r = torch.nn.functional.nll_loss(lp_torch, t)
assert abs(loss.item() - r.item()) < 1e-4 * abs(r.item()), (loss.item(), r.item())
print("N=%d C=%d fp32, %d torch threads, medians of %d rounds: openaclnn %.1f ms, torch log_softmax+nll_loss %.1f ms; "
      "%.2fx faster (median of the rounds' ratios, range %.2f-%.2f)"
      % (n, c, torch.get_num_threads(), repeats, statistics.median(ours_s) * 1e3, statistics.median(torch_s) * 1e3,
         statistics.median(ratios), min(ratios), max(ratios)))
