"""Keep freed memory in the process for reuse: large CPU tensors then cost no page faults.

glibc's ``malloc`` serves every block larger than 32 MiB with a fresh ``mmap`` and hands it back
to the kernel on ``free``, so each such tensor pays a page fault per 4 KiB page, with the kernel
zeroing each page, every time it is allocated. A training step at long horizons allocates
many: Informer's improved recipe at ETTm1 720 builds ``[224, 4, 768, 48]`` attention weights
(132 MB) several times a step, and on the 2-core VM the project measures on
(benchmarks/README.md, "Allocator") its step took 7.4-7.8 s with glibc's defaults against 3.8 s
with freed memory kept for reuse, results bit-identical. Serving every block from the heap and
trimming it only past 2 GiB of free space is what ``MALLOC_MMAP_MAX_=0`` and
``MALLOC_TRIM_THRESHOLD_`` in the environment do at start-up; :func:`reuse_freed_memory` does the
same from a running process (``mallopt``). The cost is memory: the process keeps its peak until it
exits, as jemalloc and tcmalloc (PyTorch's own advice for CPU training) do, and glibc's aligned
allocations reuse a freed block only once the heap holds a little more than it, so the heap grows
for a few steps before it settles. That ETTm1 720 run held 4.4 GB against 2.6 GB, steady over the
epoch; a LogSparse run at weather 192, 2.5 GB against 2.1 GB.

The ``forecast`` console script calls it as it starts. It changes the whole process's allocator,
so the library never calls it for you: call it in a script or notebook that trains on the CPU.
"""

from __future__ import annotations

import ctypes
import logging
import platform

__all__ = ["reuse_freed_memory"]

log = logging.getLogger(__name__)

# mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_TRIM_THRESHOLD = 2**31 - 1  # bytes: mallopt takes an int; free space at the heap's top past 2 GiB is returned


def reuse_freed_memory() -> bool:
    """Tell glibc's ``malloc`` to serve every block from its heap and keep freed blocks for reuse;
    returns whether it did (False, changing nothing, where the C library is not glibc)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the C library the process runs on
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
    log.debug("glibc malloc %s freed memory for reuse", "keeps" if done else "could not be told to keep")
    return done
