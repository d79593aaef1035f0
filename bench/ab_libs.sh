#!/usr/bin/env bash
# Interleaved comparison of builds of libopapi_nn under one grad_bench binary.
#
#   bench/ab_libs.sh [-r ROUNDS] [-f FILTER] [-b GRAD_BENCH] LIBDIR LIBDIR...
#
# Each LIBDIR holds a libopapi_nn.so* (a build's src/ folder, or a copy of it). Every round runs grad_bench once per
# library (LD_LIBRARY_PATH=LIBDIR), in turn, starting one library later than the round before, with
# --benchmark_repetitions=3, and keeps each benchmark's median. Use as many rounds as libraries, or a multiple, so
# that each library runs first equally often. The summary gives, per benchmark and library, the median over rounds
# of the op time and of x copy, and for every library after the first the median (and range) over rounds of its op
# time divided by the first library's op time in the same round. The machine's speed drifts by tens of percent over
# minutes, and the copy's speed drifts differently from the kernels': the paired ratio of op times, taken within
# each round, is the figure to compare.
set -euo pipefail

usage() {
    echo "usage: $0 [-r ROUNDS] [-f FILTER] [-b GRAD_BENCH] LIBDIR LIBDIR..." >&2
    exit 2
}

rounds=6
filter='^grad/4096x32000/'
bench=build/bench/grad_bench
while getopts "r:f:b:" opt; do
    case "$opt" in
        r) rounds=$OPTARG ;;
        f) filter=$OPTARG ;;
        b) bench=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || usage
for dir in "$@"; do
    if ! ls "$dir"/libopapi_nn.so* > /dev/null 2>&1; then
        echo "$dir: no libopapi_nn.so* there" >&2
        exit 2
    fi
done

results=$(mktemp)
trap 'rm -f "$results"' EXIT
libs=("$@")
for round in $(seq "$rounds"); do
    # The order rotates from round to round: the library run first in a round read about 10% slower than the same
    # library run after it (three libraries, two of them the same build, 3 rounds), so a fixed order favours the
    # later ones.
    for step in $(seq 0 $((${#libs[@]} - 1))); do
        index=$(((round - 1 + step) % ${#libs[@]}))
        dir=${libs[$index]}
        # One line per benchmark: round, library index, name, op time, its unit (ms; small_call sets us), x copy.
        LD_LIBRARY_PATH="$dir" "$bench" --benchmark_filter="$filter" --benchmark_repetitions=3 \
            --benchmark_report_aggregates_only=true --benchmark_time_unit=ms 2>/dev/null |
            awk -v round="$round" -v lib="$index" '/_median / {
                    name = $1; sub(/\/min_time.*/, "", name)
                    x = ""; for (i = 1; i <= NF; ++i) if ($i ~ /^x_copy=/) { x = $i; sub(/x_copy=/, "", x) }
                    print round, lib, name, $2, $3, x }' >> "$results"
    done
    echo "round $round of $rounds done" >&2
done

if [ ! -s "$results" ]; then
    echo "no benchmark matched '$filter' (or $bench did not run)" >&2
    exit 1
fi

python3 - "$results" "$@" <<'EOF'
import collections
import statistics
import sys

path, libs = sys.argv[1], sys.argv[2:]
op = collections.defaultdict(dict)      # (name, lib) -> {round: ms}
xcopy = collections.defaultdict(list)   # (name, lib) -> [x copy]
unit = {}                              # name -> time unit
names = []
with open(path) as f:
    for line in f:
        rnd, lib, name, ms, unit[name], *rest = line.split()  # rows without a copy (small_call) have no x copy
        x = rest[0] if rest else ""
        if name not in names:
            names.append(name)
        op[(name, int(lib))][int(rnd)] = float(ms)
        if x:
            xcopy[(name, int(lib))].append(float(x))

for name in names:
    print(name)
    base = op[(name, 0)]
    for lib, label in enumerate(libs):
        times = op[(name, lib)]
        line = "  %-40s op %8.3f %s  x copy %5.2f" % (label[-40:], statistics.median(times.values()), unit[name],
                                                   statistics.median(xcopy[(name, lib)] or [float("nan")]))
        if lib > 0:
            paired = sorted(times[r] / base[r] for r in times if r in base)
            line += "  op / first: %.3f (%.3f-%.3f, %d rounds)" % (
                statistics.median(paired), paired[0], paired[-1], len(paired))
        print(line)
EOF
