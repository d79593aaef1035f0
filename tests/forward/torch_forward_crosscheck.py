#!/usr/bin/python3
"""aclnnCrossEntropyLoss against PyTorch through the C ABI (ctypes), over random configurations: loss, logProb
and lse against torch.nn.functional.cross_entropy (+ z-loss) / log_softmax / logsumexp in float64; then the round
trip: aclnnCrossEntropyLossGrad applied to the forward's logProb and lse equals torch autograd's gradient of the
same loss. Usage: torch_forward_crosscheck.py LIBASCENDCL LIBNNOPBASE LIBOPAPI_NN. Exit 77 when torch is missing."""
import ctypes
import random
import sys

try:
    import torch
except ImportError:
    print("torch is not importable: skipped")
    sys.exit(77)

acl = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
base = ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL)
nn = ctypes.CDLL(sys.argv[3], mode=ctypes.RTLD_GLOBAL)
P = ctypes.c_void_p
I64P = ctypes.POINTER(ctypes.c_int64)
base.aclCreateTensor.restype = P
base.aclCreateTensor.argtypes = [I64P, ctypes.c_uint64, ctypes.c_int, I64P, ctypes.c_int64, ctypes.c_int, I64P,
                                 ctypes.c_uint64, P]
base.aclDestroyTensor.argtypes = [P]
acl.aclGetRecentErrMsg.restype = ctypes.c_char_p
acl.aclrtCreateStream.argtypes = [ctypes.POINTER(P)]
acl.aclrtSynchronizeStream.argtypes = [P]
acl.aclrtMalloc.argtypes = [ctypes.POINTER(P), ctypes.c_size_t, ctypes.c_int]
acl.aclrtFree.argtypes = [P]
nn.aclnnCrossEntropyLossGetWorkspaceSize.argtypes = [P, P, P, ctypes.c_char_p, ctypes.c_int64, ctypes.c_double,
                                                     ctypes.c_double, ctypes.c_bool, P, P, P, P,
                                                     ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(P)]
nn.aclnnCrossEntropyLoss.argtypes = [P, ctypes.c_uint64, P, P]
nn.aclnnCrossEntropyLossGradGetWorkspaceSize.argtypes = [P, P, P, P, P, P, ctypes.c_char_p, ctypes.c_int64,
                                                         ctypes.c_double, ctypes.c_double, P,
                                                         ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(P)]
nn.aclnnCrossEntropyLossGrad.argtypes = [P, ctypes.c_uint64, P, P]

assert acl.aclInit(None) == 0 and acl.aclrtSetDevice(0) == 0
stream = P()
assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0
CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 27, torch.int64: 9, torch.int32: 3}


def acl_tensor(t):
    dims = (ctypes.c_int64 * max(1, t.dim()))(*t.shape)
    strides = (ctypes.c_int64 * max(1, t.dim()))(*t.stride())
    return base.aclCreateTensor(dims, t.dim(), CODES[t.dtype], strides, 0, 2, dims, t.dim(), P(t.data_ptr()))


def phase(first, second, args):
    ws, ex = ctypes.c_uint64(0), P()
    status = first(*args, ctypes.byref(ws), ctypes.byref(ex))
    if status != 0:
        raise RuntimeError("phase 1: %d %s" % (status, acl.aclGetRecentErrMsg()))
    work = P()
    if ws.value:
        assert acl.aclrtMalloc(ctypes.byref(work), ws.value, 0) == 0
    assert second(work, ws, ex, stream) == 0
    sync = acl.aclrtSynchronizeStream(stream)
    if ws.value:
        acl.aclrtFree(work)
    return sync


def forward(x, t, w, reduction, ignore, ls, scale, return_zloss):
    n, c = x.shape
    shape = (n,) if reduction == "none" else ()
    loss = torch.full(shape, 7.0, dtype=x.dtype)
    logp = torch.full((n, c), 7.0, dtype=x.dtype)
    zloss = torch.full(shape, 7.0, dtype=x.dtype)
    lse = torch.full((n,), 7.0, dtype=x.dtype)
    h = [acl_tensor(v) if v is not None else None for v in (x, t, w, loss, logp, zloss, lse)]
    sync = phase(nn.aclnnCrossEntropyLossGetWorkspaceSize, nn.aclnnCrossEntropyLoss,
                 [h[0], h[1], h[2], reduction.encode(), ignore, ls, scale, return_zloss, h[3], h[4], h[5], h[6]])
    assert sync == 0, sync
    for v in h:
        if v is not None:
            base.aclDestroyTensor(v)
    return loss, logp, zloss, lse


def grad(g, logp, t, w, lse, reduction, ignore, ls, scale):
    out = torch.full(logp.shape, 7.0, dtype=logp.dtype)
    h = [acl_tensor(v) if v is not None else None for v in (g, logp, t, w, None, lse, out)]
    sync = phase(nn.aclnnCrossEntropyLossGradGetWorkspaceSize, nn.aclnnCrossEntropyLossGrad,
                 [h[0], h[1], h[2], h[3], None, h[5] if scale != 0 else None, reduction.encode(), ignore, ls, scale,
                  h[6]])
    assert sync == 0, sync
    return out


def torch_loss(x, t, w, reduction, ignore, ls, scale):
    ce = torch.nn.functional.cross_entropy(x, t.long(), weight=w, reduction=reduction, ignore_index=ignore,
                                           label_smoothing=ls)
    lse = torch.logsumexp(x, 1)
    mask = (t != ignore).double()
    z = scale * lse * lse * mask
    if reduction == "mean":
        z = z.sum() / mask.sum()
    elif reduction == "sum":
        z = z.sum()
    return (ce + z) if scale != 0 else ce, z, lse


EPS = {torch.float32: 2.0 ** -23, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}
failures = 0
checks = 0


def check(name, got, want, scale_of_terms, dtype, cfg):
    global failures, checks
    checks += 1
    got = got.double()
    tol = 64 * 2.0 ** -24 * scale_of_terms + EPS[dtype] * want.abs()
    bad = ~((got - want).abs() <= tol) & ~(torch.isnan(got) & torch.isnan(want))
    if bad.any():
        failures += 1
        k = bad.nonzero()[0].tolist()
        print("FAIL %s at %s: got %r want %r (tol %r) %s" % (name, k, got[tuple(k)].item(), want[tuple(k)].item(),
                                                             tol[tuple(k)].item() if tol.dim() else tol.item(), cfg))


rng = random.Random(2024)
torch.manual_seed(2024)
for case in range(120):
    dtype = rng.choice([torch.float32, torch.float16, torch.bfloat16])
    n = rng.choice([1, 2, 5, 16, 33])
    c = rng.choice([1, 2, 3, 15, 16, 17, 100, 1000])
    reduction = rng.choice(["none", "mean", "sum"])
    ignore = rng.choice([-100, -1, 0, c - 1])
    ls = rng.choice([0.0, 0.0, 0.1, 0.7])
    scale = rng.choice([0.0, 0.0, 1e-3, 0.3])
    use_w = rng.random() < 0.5
    tdtype = rng.choice([torch.int64, torch.int32])
    x = (torch.randn(n, c, dtype=torch.float64) * rng.choice([0.5, 3.0]) + rng.uniform(-5, 5)).to(dtype)
    t = torch.randint(0, c, (n,), dtype=tdtype)
    t[torch.rand(n) < 0.2] = ignore
    if (t == ignore).all() and reduction == "mean":
        t[0] = 0 if ignore != 0 else c - 1 if c > 1 else t[0]
    w = (torch.rand(c, dtype=torch.float32) * 1.5 + 0.25) if use_w else None
    cfg = dict(case=case, dtype=str(dtype), n=n, c=c, reduction=reduction, ignore=ignore, ls=ls, scale=scale,
               weight=use_w, target=str(tdtype))
    loss, logp, zloss, lse = forward(x, t, w, reduction, ignore, ls, scale, True)
    xd = x.double()
    wd = w.double() if w is not None else None
    want_loss, want_z, want_lse = torch_loss(xd, t, wd, reduction, ignore, ls, scale)
    terms = (xd.abs().max() + want_lse.abs().max() + 1) * ((wd.abs().max() if wd is not None else 1.0)) * 4 + \
        abs(scale) * (want_lse.abs().max() + 1) ** 2
    check("loss", loss, want_loss, terms, dtype, cfg)
    check("zloss", zloss, want_z, terms, dtype, cfg)
    check("logProb", logp, torch.log_softmax(xd, 1), xd.abs() + want_lse.abs()[:, None] + 1, dtype, cfg)
    check("lse", lse, want_lse, want_lse.abs() + 1, dtype, cfg)

    # Round trip: the gradient op on the forward's own outputs against autograd of the same loss.
    if (t == ignore).all() and reduction == "mean":
        continue
    g = (torch.rand(n if reduction == "none" else (), dtype=torch.float64) + 0.5).to(dtype)
    out = grad(g, logp, t, w, lse, reduction, ignore, ls, scale)
    xr = x.double().requires_grad_()
    total, _, _ = torch_loss(xr, t, wd, reduction, ignore, ls, scale)
    (total * g.double()).sum().backward()
    want_grad = xr.grad
    gscale = (g.double().abs().max() * (1 + ((wd.abs().max()) if wd is not None else 1.0)) *
              (1 + 2 * abs(scale) * (want_lse.abs().max() + 1)))
    # The gradient is computed from logProb and lse as stored in dtype: their rounding enters p = exp(logProb).
    err = EPS[dtype] * (xd.abs().max() + want_lse.abs().max() + 1) * gscale
    diff = (out.double() - want_grad).abs().max().item()
    checks += 1
    if not diff <= float(err) + 1e-6:
        failures += 1
        print("FAIL roundtrip: max |grad - autograd| = %g > %g %s" % (diff, float(err), cfg))

print("%d checks, %d failures" % (checks, failures))
sys.exit(1 if failures else 0)
