#!/usr/bin/env bash
# examples/cross_entropy_loss_example.cpp built with CANN's g++ recipe against `make install`'s layout; its printed
# loss, logProb and lse must match PyTorch's for the same inputs. The example fills its outputs with 7.0 before the
# call, so the values come from the operator.
# Usage: check_forward_example.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1; build=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
g++ -std=c++11 -I"$prefix/include" -I"$prefix/include/aclnn" "$src/examples/cross_entropy_loss_example.cpp" \
    -L"$prefix/lib64" -lascendcl -lnnopbase -lopapi_math -lopapi_nn -o "$work/example" 2>"$work/gxx.log" \
    || { cat "$work/gxx.log"; exit 1; }
LD_LIBRARY_PATH="$prefix/lib64" "$work/example" >"$work/out.txt"
cat "$work/out.txt"
/usr/bin/python3 - "$work/out.txt" <<'PY'
import re, sys
try:
    import torch
except ImportError:
    print("torch is not importable: skipped"); sys.exit(77)
text = open(sys.argv[1]).read()
x = torch.tensor([[0.5, 1.0, -1.5], [2.0, 0.0, 1.0]], dtype=torch.float64)
t = torch.tensor([0, 2])
want = {"loss": [torch.nn.functional.cross_entropy(x, t, weight=torch.ones(3, dtype=torch.float64)).item()],
        "logProb": torch.log_softmax(x, 1).flatten().tolist(),
        "lseForZloss": torch.logsumexp(x, 1).tolist()}
for name, values in want.items():
    got = [float(v) for v in re.findall(r"^%s(?:\[\d+\])? is: (\S+)$" % name, text, re.M)]
    if len(got) != len(values):
        print("FAIL: %s: %d values printed, expected %d" % (name, len(got), len(values))); sys.exit(1)
    for k, (g, w) in enumerate(zip(got, values)):
        if abs(g - w) > 1e-6 + 1e-6 * abs(w):  # printed with %f: 6 decimals
            print("FAIL: %s[%d] printed %r, PyTorch gives %r" % (name, k, g, w)); sys.exit(1)
print("example matches PyTorch: loss, 6 logProb values, 2 lse values")
PY
