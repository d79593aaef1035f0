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
for fuzzer in "$build"/fuzz/fuzz_*; do
    [ -x "$fuzzer" ] || continue
    name=$(basename "$fuzzer"); name=${name#fuzz_}
    work="$build/fuzz-corpus/$name"; artifacts="$build/fuzz-artifacts/$name/"
    rm -rf "$artifacts"; mkdir -p "$work" "$artifacts" "$src/fuzz/corpus/$name"
    echo "== fuzz_$name: ${seconds}s from fuzz/corpus/$name"
    # First every committed seed and regression input once, then fuzz for the time given.
    "$fuzzer" -runs=0 -rss_limit_mb=4096 "$src/fuzz/corpus/$name" || { status=1; continue; }
    "$fuzzer" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1 \
        -artifact_prefix="$artifacts" "$work" "$src/fuzz/corpus/$name" \
        > "$build/fuzz-$name.log" 2>&1 || status=1
    tail -n 25 "$build/fuzz-$name.log"
    if ls "$artifacts" | grep -q .; then
        # The harness's own account of a failed expectation (what was built, the library's message), which the
        # stack trace above pushes out of the last lines; the whole log stays in BUILD/fuzz-NAME.log.
        grep -A 30 'FUZZ VIOLATION' "$build/fuzz-$name.log" | head -n 60 || true
        echo "fuzz_$name: crash inputs in $artifacts:"; ls -l "$artifacts"; status=1
    fi
done
exit $status
