"""Paired timing for the PyTorch comparisons (bench/compare_pytorch.py, bench/forward_vs_torch.py).

The machine's speed drifts by tens of percent over seconds, so each round times ours and then theirs, moments apart,
and the ratio is taken within the round: the median of those ratios is the speed-up.
"""
import time


def interleaved_rounds(fns, rounds, warm_up=True):
    """Optionally one warm-up call of each function, then `rounds` rounds calling every function of fns in turn.
    Returns one list of times (seconds) per function, the k-th entries of the lists from the same round."""
    if warm_up:
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(rounds):
        for fn, t in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    return times


def round_ratios(num, den):
    """The ratios num[k] / den[k] of two lists of times from the same rounds."""
    return [a / b for a, b in zip(num, den)]


def paired_rounds(ours, theirs, rounds, warm_up=True):
    """Optionally one warm-up call of each, then `rounds` rounds of ours() and theirs() in turn. Returns the lists of
    our times, their times (seconds) and the rounds' ratios theirs / ours."""
    t_ours, t_theirs = interleaved_rounds([ours, theirs], rounds, warm_up)
    return t_ours, t_theirs, round_ratios(t_theirs, t_ours)
