"""End-to-end tests of the openaclnn command-line tool, run by ctest.

Every test drives the installed-style binary on small .npy files, many of them written by NumPy itself (including
Fortran-order, big-endian and version 2.0/3.0 files), and compares the tool's outputs with an independent float64
NumPy transcription of the operators' formulas (not with the tool's own output).

usage: python3 test_cli.py OPENACLNN_BINARY [unittest arguments, e.g. GradTest]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

import numpy as np

BINARY = None  # set in main

# ---- the independent reference (float64, the spec's formulas) ----------------------------------------------------


def ref_grad(lp, t, w=None, g=1.0, reduction="mean", ignore=-100, ls=0.0, scale=0.0, lse=None, gz=None):
    """The gradient of aclnnCrossEntropyLossGrad's spec, term by term, in float64."""
    lp = np.asarray(lp, dtype=np.float64)
    n, c = lp.shape
    p = np.exp(lp)
    t = np.asarray(t, dtype=np.int64)
    w = np.ones(c) if w is None else np.asarray(w, dtype=np.float64)
    mask = (t != ignore).astype(np.float64)
    tc = np.where(t != ignore, t, 0)
    wt = w[tc]
    g = np.broadcast_to(np.asarray(g, dtype=np.float64).reshape(-1) if reduction == "none"
                        else np.asarray(g, dtype=np.float64).reshape(()), (n,))
    out = np.zeros((n, c))
    total = float(np.sum(wt * mask))
    if reduction == "mean" and total == 0.0:
        pass  # DESIGN.md: a mean over zero total weight gives zeros
    else:
        denom = total if reduction == "mean" else 1.0
        loss_out_grad = g * (1.0 - ls) / denom * mask
        nll = loss_out_grad * wt
        out += p * nll[:, None]
        out[np.arange(n), tc] -= nll
        smooth = g / denom * ls / c * mask
        sg = smooth[:, None] * w[None, :]
        out += p * sg.sum(1, keepdims=True) - sg
    if scale != 0.0:
        gzv = g + (0.0 if gz is None else np.broadcast_to(np.asarray(gz, dtype=np.float64).reshape(-1)
                                                          if reduction == "none" else
                                                          np.asarray(gz, dtype=np.float64).reshape(()), (n,)))
        zl = gzv / mask.sum() if reduction == "mean" else gzv
        lse_grad = 2.0 * scale * np.asarray(lse, dtype=np.float64) * mask * zl
        out += p * lse_grad[:, None]
    return out


def ref_row_scale(lp, t, w=None, g=1.0, reduction="mean", ignore=-100, ls=0.0):
    """The size of each row's terms: errors of an fp32 computation are a few epsilons of this."""
    n, c = lp.shape
    t = np.asarray(t)
    w = np.ones(c) if w is None else np.asarray(w, dtype=np.float64)
    mask = t != ignore
    wt = w[np.where(mask, t, 0)]
    g = np.abs(np.broadcast_to(np.asarray(g, dtype=np.float64).reshape(-1) if reduction == "none"
                               else np.asarray(g, dtype=np.float64).reshape(()), (n,)))
    denom = max(float(np.sum(wt * mask)), 1e-300) if reduction == "mean" else 1.0
    return (2 * g * wt / denom + g * ls / c / denom * (np.abs(w).sum() + np.abs(w).max())) * mask + 1e-30


def ref_forward(x, t, w=None, reduction="mean", ignore=-100, ls=0.0, scale=0.0):
    """PyTorch's cross_entropy(weight, ignore_index, label_smoothing) plus scale * lse^2, in float64."""
    x = np.asarray(x, dtype=np.float64)
    n, c = x.shape
    m = x.max(1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0]
    lp = x - lse[:, None]
    t = np.asarray(t, dtype=np.int64)
    w = np.ones(c) if w is None else np.asarray(w, dtype=np.float64)
    mask = t != ignore
    tc = np.where(mask, t, 0)
    wt = w[tc] * mask
    nll = -lp[np.arange(n), tc] * wt
    smooth = -(lp * w[None, :]).sum(1) * mask
    per_row = (1 - ls) * nll + ls / c * smooth
    z = scale * lse ** 2 * mask
    if reduction == "none":
        loss, zloss = per_row + z, z
    elif reduction == "sum":
        loss, zloss = per_row.sum() + z.sum(), z.sum()
    else:
        zl = z.sum() / mask.sum()
        loss, zloss = per_row.sum() / wt.sum() + zl, zl
    return loss, lp, lse, zloss


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(1, keepdims=True))


def to_bf16_bits(a):
    """float64 -> bf16 bit patterns, round to nearest even (via float32: exact enough for test inputs, which are
    generated as float32 first)."""
    f = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (f + np.uint64(0x7FFF) + ((f >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    return rounded.astype(np.uint16)


def from_bf16_bits(b):
    b = np.asarray(b, dtype=np.uint32)
    return (b.reshape(-1) << np.uint32(16)).view(np.float32).reshape(b.shape)


# ---- running the tool ---------------------------------------------------------------------------------------


def run(*args, env=None):
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run([BINARY] + [str(a) for a in args], capture_output=True, text=True, env=full_env,
                          timeout=600)


class CliTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="openaclnn-cli-")
        self.rng = np.random.default_rng(int.from_bytes(self.id().encode()[-4:], "little"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def save(self, name, array):
        p = self.path(name)
        np.save(p, array)
        return p

    def write_bytes(self, name, data):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def ok(self, *args, env=None):
        r = run(*args, env=env)
        self.assertEqual(r.returncode, 0, f"openaclnn {' '.join(map(str, args))}\nstdout:\n{r.stdout}\n"
                                          f"stderr:\n{r.stderr}")
        return r

    def bad_input(self, *args, mentions=None):
        """The run must fail with status 2 and exactly one line on stderr that names `mentions`."""
        r = run(*args)
        self.assertEqual(r.returncode, 2, f"args {args}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, f"expected one error line, got:\n{r.stderr}")
        self.assertIn("error:", lines[0])
        if mentions is not None:
            self.assertIn(mentions, lines[0])
        return lines[0]

    def problem(self, n=6, c=11, dtype=np.float32):
        x = self.rng.standard_normal((n, c)) * 2
        lp = log_softmax(x).astype(dtype)
        t = self.rng.integers(0, c, size=n)
        return x, lp, t

    def assert_close_to_ref(self, got, ref, scale, rtol, label):
        got = np.asarray(got, dtype=np.float64)
        err = np.abs(got - ref)
        allowed = rtol * np.abs(ref) + 16 * 2.0 ** -23 * scale[:, None] + 6e-8
        bad = np.argwhere(~(err <= allowed))
        self.assertEqual(len(bad), 0, f"{label}: {len(bad)} elements off, first {bad[:5].tolist()}; "
                                      f"max err {err.max()}")

    def assert_no_debris(self, keep=()):
        """No temporary or partial output files left behind in the test directory."""
        for name in os.listdir(self.dir):
            self.assertNotIn(".tmp-", name, f"temporary file left behind: {name}")
            if name not in keep:
                self.assertTrue(name.endswith(".npy") or name.endswith(".svg"), name)


# ---- grad ---------------------------------------------------------------------------------------------------


class GradTest(CliTestCase):
    CASES = [
        dict(reduction="mean"),
        dict(reduction="sum"),
        dict(reduction="none"),
        dict(reduction="mean", weight=True),
        dict(reduction="mean", weight=True, ignore=True, ls=0.1),
        dict(reduction="none", weight=True, ls=0.3, ignore=True),
        dict(reduction="sum", ls=1.0),
        dict(reduction="mean", zloss=1e-2),
        dict(reduction="none", zloss=0.5, weight=True, grad_zloss=True),
        dict(reduction="mean", ignore=True, int32=True, ignore_index=7),
        dict(reduction="mean", all_ignored=True),
    ]

    def run_case(self, case, dtype_name):
        n, c = 7, 13
        x, lp64, t = self.problem(n, c, np.float64)
        lp32 = lp64.astype(np.float32)
        ignore_index = case.get("ignore_index", -100)
        if case.get("ignore"):
            t[[1, 4]] = ignore_index
        if case.get("all_ignored"):
            t[:] = ignore_index
        if case.get("int32"):
            t = t.astype(np.int32)
        args = ["grad", "--target", self.save("t.npy", t), "--reduction", case["reduction"],
                "--ignore-index", ignore_index, "-o", self.path("out.npy")]
        w = None
        if case.get("weight"):
            w = self.rng.uniform(0.2, 2.0, c).astype(np.float32)
            args += ["--weight", self.save("w.npy", w)]
        ls = case.get("ls", 0.0)
        args += ["--label-smoothing", ls]
        g = self.rng.uniform(0.5, 1.5, n) if case["reduction"] == "none" else np.array(0.75)
        scale = case.get("zloss", 0.0)
        lse = gz = None
        if scale:
            lse = (x.max(1) + 1.0)
            gz = self.rng.uniform(-1, 1, n) if case["reduction"] == "none" else np.array(0.25)
        # Inputs in the compute dtype, and the values the reference sees (the same rounded values).
        if dtype_name == "bf16":
            conv = lambda a: to_bf16_bits(np.asarray(a, dtype=np.float32))
            back = lambda a: from_bf16_bits(a).astype(np.float64)
            args += ["--dtype", "bf16"]
        else:
            npdt = np.float32 if dtype_name == "float32" else np.float16
            conv = lambda a: np.asarray(a).astype(npdt)
            back = lambda a: a.astype(np.float64)
        lp_in, g_in = conv(lp32), conv(g)
        args += ["--log-prob", self.save("lp.npy", lp_in), "--grad", self.save("g.npy", g_in)]
        lse_in = gz_in = None
        if scale:
            lse_in = conv(lse)
            args += ["--zloss-scale", scale, "--lse", self.save("lse.npy", lse_in)]
            if case.get("grad_zloss"):
                gz_in = conv(gz)
                args += ["--grad-zloss", self.save("gz.npy", gz_in)]
        self.ok(*args)
        out = np.load(self.path("out.npy"))
        self.assertEqual(out.shape, (n, c))
        ref = ref_grad(back(lp_in), t, w, back(g_in), case["reduction"], ignore_index, ls, scale,
                       None if lse_in is None else back(lse_in), None if gz_in is None else back(gz_in))
        scale_rows = ref_row_scale(lp64, t, w, back(g_in), case["reduction"], ignore_index, ls) + (
            np.abs(2 * scale * back(lse_in) * 2) if scale else 0)
        if dtype_name == "bf16":
            self.assertEqual(out.dtype, np.uint16)
            self.assert_close_to_ref(from_bf16_bits(out), ref, scale_rows, 2.0 ** -8 + 1e-6, f"bf16 {case}")
        elif dtype_name == "float16":
            self.assertEqual(out.dtype, np.float16)
            self.assert_close_to_ref(out, ref, scale_rows, 2.0 ** -11 + 1e-6, f"fp16 {case}")
        else:
            self.assertEqual(out.dtype, np.float32)
            self.assert_close_to_ref(out, ref, scale_rows, 1e-6, f"fp32 {case}")
        if case.get("all_ignored"):
            self.assertTrue(np.all(out == 0))

    def test_float32(self):
        for case in self.CASES:
            with self.subTest(case=case):
                self.run_case(case, "float32")

    def test_float16(self):
        for case in self.CASES[:6]:
            with self.subTest(case=case):
                self.run_case(case, "float16")

    def test_bf16_as_uint16_bits(self):
        for case in self.CASES[:6]:
            with self.subTest(case=case):
                self.run_case(case, "bf16")

    def test_grad_value_and_defaults(self):
        x, lp, t = self.problem()
        self.ok("grad", "--log-prob", self.save("lp.npy", lp), "--target", self.save("t.npy", t), "--grad-value",
                2.5, "-o", self.path("out.npy"))
        ref = ref_grad(lp, t, g=2.5)
        self.assert_close_to_ref(np.load(self.path("out.npy")), ref, ref_row_scale(lp, t, g=2.5), 1e-6, "grad-value")

    def test_float64_input_with_dtype(self):
        x, lp, t = self.problem(dtype=np.float64)
        self.ok("grad", "--log-prob", self.save("lp.npy", lp), "--target", self.save("t.npy", t), "--dtype",
                "float32", "-o", self.path("out.npy"))
        out = np.load(self.path("out.npy"))
        self.assertEqual(out.dtype, np.float32)
        ref = ref_grad(lp.astype(np.float32), t)
        self.assert_close_to_ref(out, ref, ref_row_scale(lp, t), 1e-6, "float64 -> float32")


# ---- .npy files as NumPy writes them ------------------------------------------------------------------------


class NpyFormatsTest(CliTestCase):
    def grad_bytes(self, lp_path, t_path, *extra):
        out = self.path("out.npy")
        self.ok("grad", "--log-prob", lp_path, "--target", t_path, "-o", out, *extra)
        with open(out, "rb") as f:
            return f.read()

    def test_fortran_order_is_transposed(self):
        x, lp, t = self.problem(5, 9)
        ref = self.grad_bytes(self.save("c.npy", lp), self.save("t.npy", t))
        fortran = np.asfortranarray(lp)
        p = self.save("f.npy", fortran)
        with open(p, "rb") as f:
            self.assertIn(b"'fortran_order': True", f.read(128))
        self.assertEqual(self.grad_bytes(p, self.path("t.npy")), ref)

    def test_big_endian_is_converted(self):
        x, lp, t = self.problem(5, 9)
        ref = self.grad_bytes(self.save("c.npy", lp), self.save("t.npy", t))
        be_lp = self.save("be.npy", lp.astype(">f4"))
        be_t = self.save("bet.npy", t.astype(">i8"))
        with open(be_lp, "rb") as f:
            self.assertIn(b"'>f4'", f.read(128))
        self.assertEqual(self.grad_bytes(be_lp, be_t), ref)
        # Big-endian and Fortran order together, and a big-endian int32 target.
        both = self.save("bef.npy", np.asfortranarray(lp.astype(">f4")))
        self.assertEqual(self.grad_bytes(both, self.save("bet32.npy", t.astype(">i4"))), ref)

    def test_big_endian_float16_and_weight(self):
        x, lp, t = self.problem(4, 6, np.float16)
        w = self.rng.uniform(0.5, 1.5, 6).astype(np.float32)
        ref = self.grad_bytes(self.save("c.npy", lp), self.save("t.npy", t), "--weight", self.save("w.npy", w))
        got = self.grad_bytes(self.save("be.npy", lp.astype(">f2")), self.path("t.npy"), "--weight",
                              self.save("bew.npy", w.astype(">f4")))
        self.assertEqual(got, ref)

    def test_format_versions_2_and_3(self):
        x, lp, t = self.problem(3, 8)
        ref = self.grad_bytes(self.save("c.npy", lp), self.save("t.npy", t))
        for version in [(1, 0), (2, 0), (3, 0)]:
            p = self.path(f"v{version[0]}.npy")
            with open(p, "wb") as f:
                np.lib.format.write_array(f, lp, version=version)
            with open(p, "rb") as f:
                self.assertEqual(f.read(8)[6], version[0])
            self.assertEqual(self.grad_bytes(p, self.path("t.npy")), ref, f"version {version}")

    def test_small_integer_targets_are_widened(self):
        x, lp, t = self.problem(5, 9)
        ref = self.grad_bytes(self.save("c.npy", lp), self.save("t.npy", t))
        for dt in [np.uint8, np.int16, np.uint16, np.uint32, ">u8"]:
            self.assertEqual(self.grad_bytes(self.path("c.npy"), self.save("tt.npy", t.astype(dt))), ref, str(dt))

    def test_outputs_read_back_by_numpy(self):
        x, lp, t = self.problem(5, 9)
        self.grad_bytes(self.save("c.npy", lp), self.save("t.npy", t))
        out = np.load(self.path("out.npy"))
        self.assertEqual(out.dtype, np.float32)
        self.assertTrue(out.flags.c_contiguous)
        with open(self.path("out.npy"), "rb") as f:
            head = f.read(128)
        header_len = int.from_bytes(head[8:10], "little")
        self.assertEqual((10 + header_len) % 64, 0)


# ---- check --------------------------------------------------------------------------------------------------


class CheckTest(CliTestCase):
    def setup_problem(self, dtype=np.float32, n=6, c=11):
        x, lp, t = self.problem(n, c, dtype)
        t[2] = -100
        self.lp = self.save("lp.npy", lp)
        self.t = self.save("t.npy", t)
        self.ok("grad", "--log-prob", self.lp, "--target", self.t, "--reduction", "sum", "-o", self.path("g.npy"))
        return np.load(self.path("g.npy")), lp, t

    def check(self, expected, *extra):
        return run("check", "--log-prob", self.lp, "--target", self.t, "--reduction", "sum", "--expected",
                   self.save("expected.npy", expected), *extra)

    def test_golden_matches(self):
        golden, lp, t = self.setup_problem()
        r = self.check(golden)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("MATCH", r.stdout)
        self.assertIn("compared:   66 elements", r.stdout)
        self.assertRegex(r.stdout, r"mismatches: 0")

    def test_independent_float64_reference_matches(self):
        # An "NPU dump" computed independently (float64 formula, rounded to float32) must pass.
        golden, lp, t = self.setup_problem()
        ref = ref_grad(lp, t, reduction="sum").astype(np.float32)
        r = self.check(ref)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_perturbed_element_fails_with_its_position(self):
        golden, lp, t = self.setup_problem()
        bad = golden.copy()
        bad[4, 7] *= 1.01
        r = self.check(bad)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("MISMATCH", r.stdout)
        self.assertRegex(r.stdout, r"mismatches: 1 ")
        self.assertRegex(r.stdout, r"max abs error: \S+ at \(4, 7\)")
        self.assertRegex(r.stdout, r"\n\s+4\s+7\s.*MISMATCH")

    def test_tiny_difference_within_tolerance_and_override(self):
        golden, lp, t = self.setup_problem()
        near = golden.copy()
        near[1, 1] = np.nextafter(near[1, 1], np.float32(np.inf))  # one ulp
        self.assertEqual(self.check(near).returncode, 0)
        bad = golden.copy()
        bad[3, 2] *= 1.01
        self.assertEqual(self.check(bad).returncode, 1)
        r = self.check(bad, "--rtol", "0.02", "--atol", "0")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("from --rtol", r.stdout)
        self.assertIn("(from --atol)", r.stdout)
        self.assertEqual(self.check(near, "--rtol", "0", "--atol", "0").returncode, 1)

    def test_nan_and_inf_are_counted(self):
        golden, lp, t = self.setup_problem()
        bad = golden.copy()
        bad[0, 0] = np.nan
        bad[5, 3] = np.inf
        r = self.check(bad)
        self.assertEqual(r.returncode, 1)
        self.assertIn("NaN:        expected 1, golden 0", r.stdout)
        self.assertIn("Inf:        expected 1, golden 0", r.stdout)
        self.assertRegex(r.stdout, r"mismatches: 2 ")

    def test_float16_tolerance_is_one_ulp(self):
        golden, lp, t = self.setup_problem(np.float16)
        self.assertEqual(golden.dtype, np.float16)
        one_ulp = golden.copy()
        one_ulp[2, 5] = np.nextafter(golden[2, 5], np.float16(np.inf))
        one_ulp[0, 1] = np.nextafter(golden[0, 1], np.float16(-np.inf))
        r = self.check(one_ulp)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("rtol 0.001", r.stdout)
        three_ulp = golden.copy()
        v = golden[1, 4]
        for _ in range(3):
            v = np.nextafter(v, np.float16(np.inf))
        three_ulp[1, 4] = v
        r = self.check(three_ulp)
        self.assertEqual(r.returncode, 1, r.stdout)
        # A float32 dump of a float16 problem is compared by value.
        self.assertEqual(self.check(golden.astype(np.float32)).returncode, 0)

    def test_bf16(self):
        x, lp, t = self.problem(5, 7)
        self.lp = self.save("lp.npy", to_bf16_bits(lp))
        self.t = self.save("t.npy", t)
        self.ok("grad", "--log-prob", self.lp, "--target", self.t, "--reduction", "sum", "--dtype", "bf16", "-o",
                self.path("g.npy"))
        golden = np.load(self.path("g.npy"))
        r = self.check(golden, "--dtype", "bf16")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("rtol 0.008", r.stdout)
        bad = golden.copy()
        bad[3, 3] = to_bf16_bits(from_bf16_bits(bad[3, 3]) * 1.05)
        self.assertEqual(self.check(bad, "--dtype", "bf16").returncode, 1)

    def test_shape_mismatch_is_bad_input(self):
        golden, lp, t = self.setup_problem()
        self.bad_input("check", "--log-prob", self.lp, "--target", self.t, "--reduction", "sum", "--expected",
                       self.save("e.npy", golden[:, :5]), mentions="--expected")

    def test_writes_golden_with_o(self):
        golden, lp, t = self.setup_problem()
        r = self.check(golden, "-o", self.path("golden2.npy"))
        self.assertEqual(r.returncode, 0)
        np.testing.assert_array_equal(np.load(self.path("golden2.npy")), golden)


# ---- bad input: one line, status 2, no output -----------------------------------------------------------------


class BadInputTest(CliTestCase):
    def setUp(self):
        super().setUp()
        x, lp, t = self.problem(4, 6)
        self.lp = self.save("lp.npy", lp)
        self.t = self.save("t.npy", t)
        with open(self.lp, "rb") as f:
            self.raw = f.read()
        self.out = self.path("out.npy")

    def grad_fails(self, lp_path=None, t_path=None, *extra, mentions=None):
        line = self.bad_input("grad", "--log-prob", lp_path or self.lp, "--target", t_path or self.t, "-o",
                              self.out, *extra, mentions=mentions)
        self.assertFalse(os.path.exists(self.out), "an output was written despite the error")
        self.assert_no_debris()
        return line

    def test_malformed_files(self):
        header_len = int.from_bytes(self.raw[8:10], "little")
        cases = {
            "truncated.npy": (self.raw[:-5], "truncated"),
            "short.npy": (self.raw[:7], "not a .npy file"),
            "empty.npy": (b"", "not a .npy file"),
            "magic.npy": (b"\x93NUMPZ" + self.raw[6:], "magic"),
            "version.npy": (self.raw[:6] + b"\x04\x00" + self.raw[8:], "version 4.0"),
            "header.npy": (self.raw[:10] + b"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 6),".ljust(
                header_len) + self.raw[10 + header_len:], "malformed"),
            "trailing.npy": (self.raw + b"\0\0\0\0", "unexpected bytes"),
            "header_len.npy": (self.raw[:8] + (60000).to_bytes(2, "little") + self.raw[10:], "truncated"),
            "text.npy": (b"this is not numpy at all", "not a .npy file"),
        }
        for name, (data, why) in cases.items():
            with self.subTest(file=name):
                p = self.write_bytes(name, data)
                line = self.grad_fails(p, mentions=name)
                self.assertIn("--log-prob", line)
                self.assertIn(why, line)

    def test_unsupported_dtypes(self):
        cases = {
            "complex.npy": np.zeros((4, 6), np.complex64),
            "object.npy": None,
            "struct.npy": np.zeros((4, 6), dtype=[("a", "<f4"), ("b", "<i4")]),
            "strings.npy": np.array([["a"] * 6] * 4),
            "f64.npy": np.zeros((4, 6)),
            "u16.npy": np.zeros((4, 6), np.uint16),
            "int.npy": np.zeros((4, 6), np.int32),
        }
        for name, arr in cases.items():
            with self.subTest(file=name):
                if arr is None:
                    np.save(self.path(name), np.array([[None] * 6] * 4, dtype=object), allow_pickle=True)
                    p = self.path(name)
                else:
                    p = self.save(name, arr)
                self.grad_fails(p, mentions=name)

    def test_shape_and_value_errors(self):
        x, lp, t = self.problem(4, 6)
        self.grad_fails(self.save("lp3.npy", lp[None]), mentions="--log-prob")
        self.grad_fails(None, self.save("t5.npy", np.arange(5)), mentions="--target")
        self.grad_fails(None, self.save("tf.npy", t.astype(np.float32)), mentions="--target")
        line = self.grad_fails(None, self.save("tr.npy", np.array([0, 1, 6, 2])), mentions="--target")
        self.assertIn("row 2", line)
        self.grad_fails(None, None, "--weight", self.save("w.npy", np.ones(5, np.float32)), mentions="--weight")
        self.grad_fails(None, None, "--reduction", "none", "--grad", self.save("g.npy", np.ones(3, np.float32)),
                        mentions="--grad")
        self.grad_fails(None, None, "--reduction", "mean", "--grad", self.save("g2.npy", np.ones(4, np.float32)),
                        mentions="--grad")
        self.grad_fails(None, None, "--zloss-scale", "0.1", mentions="--lse")
        self.grad_fails(None, None, "--dtype", "float8", mentions="--dtype")

    def test_bad_arguments(self):
        self.grad_fails(None, None, "--label-smoothing", "abc", mentions="--label-smoothing")
        self.grad_fails(None, None, "--label-smoothing", "1.5", mentions="--label-smoothing")
        self.grad_fails(None, None, "--reduction", "avg", mentions="--reduction")
        self.grad_fails(None, None, "--ignore-index", "1.5", mentions="--ignore-index")
        self.grad_fails(None, None, "--bogus", mentions="--bogus")
        self.grad_fails(None, None, "--grad-value", "nan", mentions="--grad-value")
        self.grad_fails(self.path("missing.npy"), mentions="missing.npy")
        self.grad_fails(self.dir, mentions="--log-prob")
        self.bad_input("grad", "--target", self.t, "-o", self.out, mentions="--log-prob")
        self.bad_input("grad", "--log-prob", self.lp, "--target", self.t, mentions="-o")
        self.bad_input("grad", "--log-prob", self.lp, "--target", self.t, "-o", "/nonexistent/dir/out.npy",
                       mentions="-o")
        self.bad_input("grad", "--log-prob", self.lp, "--log-prob", self.lp, mentions="--log-prob")
        self.bad_input("grad", "stray", mentions="stray")
        self.bad_input("bench", "--shapes", "10by10", mentions="--shapes")
        self.bad_input("bench", "--variants", "fancy", mentions="--variants")
        self.bad_input("bench", "--threads", "0", mentions="--threads")
        self.bad_input("forward", "--input", self.lp, mentions="--target")
        r = run("frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command", r.stderr)
        self.assertEqual(run().returncode, 2)

    def test_failure_keeps_existing_output(self):
        with open(self.out, "wb") as f:
            f.write(b"previous contents")
        self.bad_input("grad", "--log-prob", self.write_bytes("bad.npy", self.raw[:-1]), "--target", self.t, "-o",
                       self.out, mentions="bad.npy")
        with open(self.out, "rb") as f:
            self.assertEqual(f.read(), b"previous contents")
        self.assert_no_debris(keep=("out.npy",))


# ---- forward --------------------------------------------------------------------------------------------------


class ForwardTest(CliTestCase):
    def run_forward(self, dtype_name, reduction, weight=False, ls=0.0, scale=0.0, ignore=False):
        n, c = 6, 9
        x = self.rng.standard_normal((n, c)) * 3
        t = self.rng.integers(0, c, n)
        if ignore:
            t[3] = -100
        args = ["forward", "--target", self.save("t.npy", t), "--reduction", reduction, "--label-smoothing", ls,
                "--zloss-scale", scale, "-o", self.path("fw")]
        w = None
        if weight:
            w = self.rng.uniform(0.3, 2.0, c).astype(np.float32)
            args += ["--weight", self.save("w.npy", w)]
        if dtype_name == "bf16":
            x_in = to_bf16_bits(x.astype(np.float32))
            x_vals = from_bf16_bits(x_in).astype(np.float64)
            args += ["--dtype", "bf16"]
            load = lambda p: from_bf16_bits(np.load(p)).astype(np.float64)
            rtol = 2.0 ** -8
        else:
            npdt = np.float32 if dtype_name == "float32" else np.float16
            x_in = x.astype(npdt)
            x_vals = x_in.astype(np.float64)
            load = lambda p: np.load(p).astype(np.float64)
            rtol = 2e-6 if dtype_name == "float32" else 2.0 ** -11
        args += ["--input", self.save("x.npy", x_in)]
        self.ok(*args)
        loss, lp, lse, zloss = ref_forward(x_vals, t, w, reduction, -100, ls, scale)
        got_lp = load(self.path("fw.log_prob.npy"))
        got_lse = load(self.path("fw.lse.npy"))
        got_loss = load(self.path("fw.loss.npy"))
        self.assertEqual(got_loss.shape, () if reduction != "none" else (n,))
        mag = np.abs(x_vals).max() + np.abs(lse).max()
        np.testing.assert_allclose(got_lp, lp, rtol=rtol, atol=4 * rtol * mag)
        np.testing.assert_allclose(got_lse, lse, rtol=rtol, atol=1e-6)
        np.testing.assert_allclose(got_loss, loss, rtol=4 * rtol, atol=1e-5)
        if scale:
            np.testing.assert_allclose(load(self.path("fw.zloss.npy")), zloss, rtol=4 * rtol, atol=1e-6)
        else:
            self.assertFalse(os.path.exists(self.path("fw.zloss.npy")))
        return t, w

    def test_forward_matches_reference(self):
        for dtype_name in ["float32", "float16", "bf16"]:
            for reduction in ["mean", "sum", "none"]:
                with self.subTest(dtype=dtype_name, reduction=reduction):
                    self.run_forward(dtype_name, reduction)
        with self.subTest("weighted, smoothed, ignored"):
            self.run_forward("float32", "mean", weight=True, ls=0.2, ignore=True)
        with self.subTest("z-loss"):
            self.run_forward("float32", "mean", scale=0.01)
            self.run_forward("float32", "none", scale=0.01, weight=True)

    def test_round_trip_forward_then_grad(self):
        t, w = self.run_forward("float32", "mean", weight=True, ls=0.1, scale=0.02)
        self.ok("grad", "--log-prob", self.path("fw.log_prob.npy"), "--target", self.path("t.npy"), "--weight",
                self.path("w.npy"), "--label-smoothing", 0.1, "--zloss-scale", 0.02, "--lse",
                self.path("fw.lse.npy"), "-o", self.path("g.npy"))
        # The gradient of the forward loss with respect to the logits, by central differences in float64.
        x = np.load(self.path("x.npy")).astype(np.float64)
        h = 1e-6
        fd = np.zeros_like(x)
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                xp, xm = x.copy(), x.copy()
                xp[i, j] += h
                xm[i, j] -= h
                fd[i, j] = (ref_forward(xp, t, w, "mean", -100, 0.1, 0.02)[0] -
                            ref_forward(xm, t, w, "mean", -100, 0.1, 0.02)[0]) / (2 * h)
        np.testing.assert_allclose(np.load(self.path("g.npy")), fd, rtol=1e-4, atol=1e-6)

    def test_explicit_outputs_and_all_or_nothing(self):
        x = self.rng.standard_normal((3, 4)).astype(np.float32)
        t = np.array([0, 3, 1])
        self.ok("forward", "--input", self.save("x.npy", x), "--target", self.save("t.npy", t), "--loss-out",
                self.path("loss.npy"), "--reduction", "none")
        self.assertEqual(sorted(os.listdir(self.dir)), ["loss.npy", "t.npy", "x.npy"])
        self.bad_input("forward", "--input", self.path("x.npy"), "--target", self.save("bad.npy", np.array([0, 9, 1])),
                       "-o", self.path("fw"), mentions="--target")
        self.assertFalse(any(n.startswith("fw") for n in os.listdir(self.dir)))
        self.assert_no_debris()


# ---- help, info, bench ------------------------------------------------------------------------------------------


class HelpInfoBenchTest(CliTestCase):
    def test_help(self):
        r = self.ok("--help")
        for cmd in ["grad", "forward", "check", "bench", "info"]:
            self.assertIn(cmd, r.stdout)
            h = self.ok(cmd, "--help")
            self.assertTrue(h.stdout.startswith("usage: openaclnn " + cmd), h.stdout[:80])
            self.assertEqual(self.ok("help", cmd).stdout, h.stdout)
        self.assertIn("bf16", self.ok("grad", "--help").stdout)
        self.assertIn("rtol", self.ok("check", "--help").stdout)
        self.assertRegex(self.ok("--version").stdout, r"^openaclnn \d+\.\d+\.\d+")

    def test_info(self):
        r = self.ok("info")
        self.assertRegex(r.stdout, r"openaclnn \d+\.\d+\.\d+")
        self.assertIn("simd features", r.stdout)
        self.assertIn("threads:", r.stdout)
        self.assertIn("kernel", r.stdout)
        # The sanitizers the build was configured with (tests/cli/CMakeLists.txt passes them, ';' written as ','),
        # printed whole: "address,undefined" is one value, not cut at its separator.
        sanitize = os.environ.get("OPENACLNN_EXPECT_SANITIZE")
        if sanitize is not None:
            self.assertRegex(r.stdout, r"\n  sanitizers    " + re.escape(sanitize or "none") + r"\n")
        r = self.ok("info", "--no-probe", env={"OPENACLNN_NUM_THREADS": "3", "OPENACLNN_MAX_ISA": "scalar"})
        self.assertIn("3 (from OPENACLNN_NUM_THREADS)", r.stdout)
        self.assertIn("OPENACLNN_MAX_ISA      scalar", r.stdout)

    def test_bench_table_json_and_plot(self):
        r = self.ok("bench", "--shapes", "8x100,2x3000", "--dtypes", "float32,bf16", "--variants", "all",
                    "--threads", "1,2", "--repeats", "2", "--json", "--plot", self.path("bench.svg"))
        doc = json.loads(r.stdout)
        self.assertEqual(len(doc["results"]), 2 * 2 * 4 * 2)
        for row in doc["results"]:
            self.assertGreater(row["op_seconds_median"], 0)
            self.assertGreater(row["copy_gbps"], 0)
            self.assertLess(abs(row["op_over_copy"] / (row["op_seconds_median"] / row["copy_seconds_median"]) - 1), 1e-4)
            self.assertEqual(row["bytes"], 2 * row["n"] * row["c"] * (4 if row["dtype"] == "float32" else 2))
        self.assertEqual({row["threads"] for row in doc["results"]}, {1, 2})
        self.assertIn("[32/32]", r.stderr)  # progress
        root = ET.parse(self.path("bench.svg")).getroot()
        texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
        for word in ["GB/s", "8x100", "2x3000", "copy", "plain", "weighted", "smoothed", "zloss", "bf16"]:
            self.assertIn(word, texts)
        rects = list(root.iter("{http://www.w3.org/2000/svg}rect"))
        self.assertGreater(len(rects), 40)
        r = self.ok("bench", "--shapes", "4x50", "--repeats", "1")
        self.assertRegex(r.stdout, r"4x50\s+float32\s+plain")
        self.assertIn("op/copy", r.stdout)


class InstallTest(CliTestCase):
    """`cmake --install` puts bin/openaclnn beside lib64/ and it runs from there, whatever the build tree."""

    def test_installed_tool_runs(self):
        build_dir = os.environ.get("OPENACLNN_BUILD_DIR")
        if not build_dir:
            self.skipTest("OPENACLNN_BUILD_DIR not set")
        prefix = self.path("prefix")
        r = subprocess.run(["cmake", "--install", build_dir, "--prefix", prefix], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        tool = os.path.join(prefix, "bin", "openaclnn")
        self.assertTrue(os.access(tool, os.X_OK))
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        ldd = subprocess.run(["ldd", tool], capture_output=True, text=True, env=env).stdout
        # The linker keeps only the libraries the tool calls into (libopapi_math may be dropped as unneeded).
        for lib in ["libascendcl", "libnnopbase", "libopapi_nn", "libopapi_math"]:
            line = next((l for l in ldd.splitlines() if lib in l), None)
            if line is None and lib == "libopapi_math":
                continue
            self.assertIsNotNone(line, f"{lib} not linked:\n{ldd}")
            self.assertIn(os.path.realpath(os.path.join(prefix, "lib64")), os.path.realpath(line.split("=>")[1].split()[0]))
        r = subprocess.run([tool, "--version"], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        x, lp, t = self.problem(3, 5)
        r = subprocess.run([tool, "grad", "--log-prob", self.save("lp.npy", lp), "--target", self.save("t.npy", t),
                            "-o", self.path("g.npy")], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_close_to_ref(np.load(self.path("g.npy")), ref_grad(lp, t), ref_row_scale(lp, t), 1e-6, "installed")
        r = subprocess.run([tool, "info", "--no-probe"], capture_output=True, text=True, env=env)
        self.assertIn(os.path.realpath(os.path.join(prefix, "lib64")), r.stdout)


def main():
    global BINARY
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    BINARY = os.path.abspath(sys.argv[1])
    unittest.main(argv=[sys.argv[0]] + sys.argv[2:], verbosity=2)


if __name__ == "__main__":
    main()
