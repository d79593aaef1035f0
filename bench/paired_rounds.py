"""Paired timing for the PyTorch comparisons (bench/compare_pytorch.py, bench/forward_vs_torch.py).

The machine's speed drifts by tens of percent over seconds, so each round times ours and then theirs, moments apart,
and the ratio is taken within the round: the median of those ratios is the speed-up.
"""
import time


def paired_rounds(ours, theirs, rounds, warm_up=True):
    """Optionally one warm-up call of each, then `rounds` rounds of ours() and theirs() in turn. Returns the lists of
    our times, their times (seconds) and the rounds' ratios theirs / ours."""
    if warm_up:
        ours()
        theirs()
    t_ours, t_theirs, ratios = [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        ours()
        t1 = time.perf_counter()
        theirs()
        t2 = time.perf_counter()
        t_ours.append(t1 - t0)
        t_theirs.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
    return t_ours, t_theirs, ratios
