#!/usr/bin/env bash
# The operator's output bits on 64-bit Arm against x86-64's: the determinism probe of core_grad_random_test (15
# configs: every dtype and reduction, weights, label smoothing and z-loss; each checked against the float64 reference
# inside the probe) prints one hash of the output per config. It runs natively here, then under user-mode QEMU at
# every Arm ISA cap and at SVE vector lengths of 128, 512 and 2048 bits; every run must print the native run's hashes.
#
#   tests/arm64/same_bits.sh NATIVE_BUILD ARM64_BUILD QEMU...
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 NATIVE_BUILD ARM64_BUILD QEMU..." >&2; exit 2; }
native=$1/tests/core/core_grad_random_test
arm=$2/tests/core/core_grad_random_test
shift 2
export OMP_NUM_THREADS=1 OPENACLNN_NUM_THREADS=1  # (QEMU 7.2: see the arm64 test preset)
expected=$(OPENACLNN_MAX_ISA= "$native" --probe determinism 0)
[ -n "$expected" ] || { echo "native probe: no hashes" >&2; exit 1; }
failed=0
for run in "max best" "max sve2" "max sve" "max neon" "max scalar" \
           "max,sve-default-vector-length=16 best" "max,sve-default-vector-length=256 best"; do
    read -r cpu cap <<< "$run"
    got=$(OPENACLNN_MAX_ISA=$cap "$@" -cpu "$cpu" "$arm" --probe determinism 0) || { echo "FAIL $run: probe failed"; failed=1; continue; }
    if [ "$got" = "$expected" ]; then
        echo "same bits: -cpu $cpu, OPENACLNN_MAX_ISA=$cap"
    else
        echo "FAIL: -cpu $cpu, OPENACLNN_MAX_ISA=$cap: other bits than x86-64's"
        diff <(echo "$expected") <(echo "$got") || true
        failed=1
    fi
done
exit $failed
