#!/usr/bin/env bash
# Runs every fuzzer of a `fuzz` preset build for SECONDS each, starting from the seed corpus in fuzz/corpus/<name>.
# New inputs go to BUILD/fuzz-corpus/<name> (not into the repository); crashes to BUILD/fuzz-artifacts/.
# Usage: fuzz/run.sh BUILD_DIR SECONDS
set -euo pipefail
build=$1; seconds=$2
src=$(cd "$(dirname "$0")/.." && pwd)
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$src/fuzz/ubsan.supp"
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
# Small calls: one thread each, as phase 2 would plan them anyway, and predictable timing per input.
export OPENACLNN_NUM_THREADS=${OPENACLNN_NUM_THREADS:-2}
status=0
summary=()
reports=()  # the logs of failed runs, whose first report lines the summary repeats
for fuzzer in "$build"/fuzz/fuzz_*; do
    [ -x "$fuzzer" ] || continue
    name=$(basename "$fuzzer"); name=${name#fuzz_}
    work="$build/fuzz-corpus/$name"; artifacts="$build/fuzz-artifacts/$name/"
    rm -rf "$artifacts"; mkdir -p "$work" "$artifacts" "$src/fuzz/corpus/$name"
    echo "== fuzz_$name: ${seconds}s from fuzz/corpus/$name"
    # First every committed seed and regression input once, then fuzz for the time given.
    rc=0
    "$fuzzer" -runs=0 -rss_limit_mb=4096 "$src/fuzz/corpus/$name" > "$build/fuzz-$name-replay.log" 2>&1 || rc=$?
    tail -n 5 "$build/fuzz-$name-replay.log"
    if [ "$rc" -ne 0 ]; then
        status=1; summary+=("fuzz_$name: replay of fuzz/corpus/$name FAILED (exit $rc), log $build/fuzz-$name-replay.log")
        reports+=("$build/fuzz-$name-replay.log")
        continue
    fi
    "$fuzzer" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1 \
        -artifact_prefix="$artifacts" "$work" "$src/fuzz/corpus/$name" \
        > "$build/fuzz-$name.log" 2>&1 || rc=$?
    tail -n 25 "$build/fuzz-$name.log"
    if [ "$rc" -ne 0 ] || ls "$artifacts" | grep -q .; then
        status=1; summary+=("fuzz_$name: FAILED (exit $rc) after ${seconds}s, log $build/fuzz-$name.log")
        reports+=("$build/fuzz-$name.log")
        echo "fuzz_$name: crash inputs in $artifacts:"; ls -l "$artifacts"
    else
        summary+=("fuzz_$name: clean, $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$build/fuzz-$name.log" || echo 'done')")
    fi
done
# The summary comes last, so that a log cut to its last lines still says which fuzzer failed, why, and with what input.
for log in "${reports[@]}"; do
    echo "== from $log:"
    grep -m 1 -A 14 -E 'FUZZ VIOLATION|ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:|==[0-9]+== ?ERROR' \
        "$log" || tail -n 20 "$log"
done
echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
for input in "$build"/fuzz-artifacts/*/*; do
    [ -f "$input" ] || continue
    # Small enough to carry in a log: `base64 -d > input` and run the fuzzer on it to replay the failure.
    echo "crash input $input, $(stat -c %s "$input") bytes, base64: $(head -c 8192 "$input" | base64 -w 0)"
done
exit $status
