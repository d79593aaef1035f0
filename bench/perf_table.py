#!/usr/bin/python3
"""The README's gradient performance table from one run of each benchmark, side by side.

    build/bench/grad_bench --benchmark_filter='^grad/' --benchmark_repetitions=3 \
        --benchmark_report_aggregates_only=true --benchmark_out=grad.json --benchmark_out_format=json
    /usr/bin/python3 bench/compare_pytorch.py --build build > torch.txt
    /usr/bin/python3 bench/perf_table.py grad.json torch.txt

Prints the CPU each run names, then one markdown row per benchmark row (median of the repetitions): op time, GB/s of
the op and of the copy, x copy (op time / copy time in the same run), and from torch.txt where it has the row
PyTorch's time, the speed-up and PyTorch / copy (the speed-up a kernel at the copy's speed would show; n/a where
PyTorch has no kernel for the dtype, or torch.txt predates that column).
"""
import json
import re
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        run = json.load(f)
    rows = run["benchmarks"]
    torch = {}
    torch_cpu = "unknown"
    with open(sys.argv[2]) as f:
        for line in f:
            if line.startswith("# cpu:"):
                torch_cpu = line.split(":", 1)[1].strip()
            m = re.match(r"\s*(\d+)x(\d+)\s+(\w+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)(?:\s+\S+\s+\S+\s+(\S+))?", line)
            if m:
                torch[(f"{m[1]}x{m[2]}", m[3], m[4])] = (m[6], m[7], m[8] or "n/a")
    print(f"grad_bench on: {run.get('context', {}).get('cpu', 'unknown')}; compare_pytorch.py on: {torch_cpu}")
    print()
    print("| shape | dtype | variant | op time | GB/s | copy GB/s | x copy | PyTorch ms | speed-up vs PyTorch | "
          "PyTorch / copy |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        if row.get("aggregate_name") != "median" or not row["run_name"].startswith("grad/"):
            continue
        shape, dtype, variant = row["run_name"].split("/")[1:4]
        ms = row["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[row["time_unit"]]
        torch_ms, speedup, ceiling = torch.get((shape, dtype, variant), ("n/a", "n/a", "n/a"))
        print(f"| {shape} | {dtype} | {variant} | {ms:.3g} ms | {row['GB/s']:.1f} | {row['copy_GB/s']:.1f} | "
              f"{row['x_copy']:.2f} | {torch_ms} | {speedup} | {ceiling} |")


if __name__ == "__main__":
    main()
