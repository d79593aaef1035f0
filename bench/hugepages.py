"""Tensors on transparent huge pages, for the PyTorch comparisons (bench/compare_pytorch.py, bench/forward_vs_torch.py).

torch.empty takes big buffers from malloc, whose pages are 4 KiB unless the system's THP mode is "always" (it is
"madvise" on the benchmark machine). Page-sized hardware prefetch and a TLB miss every 4 KiB then weigh on every
streaming pass, ours and PyTorch's alike, and differently in each. The Google Benchmark programs allocate through
aclrtMalloc, which asks for huge pages (MADV_HUGEPAGE); these helpers give the Python comparisons the same memory,
for both sides: private anonymous mappings (shared ones are not eligible) advised MADV_HUGEPAGE, the tensor starting
on a 2 MiB boundary.
"""
import mmap

import torch

HUGE_PAGE = 2 << 20


def empty(shape, dtype):
    """An uninitialised tensor of `shape` and `dtype` on memory advised MADV_HUGEPAGE, 2 MiB aligned. The tensor
    holds the mapping: it is unmapped when the last tensor on it goes."""
    count = 1
    for size in shape:
        count *= size
    nbytes = max(1, count * torch.empty((), dtype=dtype).element_size())
    mapping = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mapping.madvise(mmap.MADV_HUGEPAGE)
    address = torch.frombuffer(mapping, dtype=torch.uint8, count=1).data_ptr()
    offset = -address % HUGE_PAGE
    return torch.frombuffer(mapping, dtype=dtype, count=count, offset=offset).view(shape)


def like(tensor):
    """empty() holding a copy of `tensor`."""
    result = empty(tuple(tensor.shape), tensor.dtype)
    result.copy_(tensor)
    return result
