"""Keep freed memory in the process, so that a loop's large temporary arrays do not fault their pages in again.

glibc's ``malloc`` serves a block above ``M_MMAP_THRESHOLD`` (128 KiB at
start; it grows to the size of the largest block freed so far, up to
32 MiB) with a fresh ``mmap``, and gives the top of the heap back to the
kernel when more than ``M_TRIM_THRESHOLD`` of it is free.  Either way, the
next array of that size starts on pages the kernel must fault in, one by
one.  A packet loop that builds arrays of some hundreds of KiB per round
(a round's frames and values: 2,048 frames x 256 bytes is 512 KiB) then
pays those faults every round; on this machine's virtual CPUs they cost
about as much as the numpy work on those arrays (``bench/model.py``
measures the model both ways).  :func:`retain_freed_memory` sets both
thresholds (``mallopt(3)``) so such blocks come from and return to the
heap; the heap then stays at its high-water mark.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1          # <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's upper bound for M_MMAP_THRESHOLD on 64-bit


def retain_freed_memory(trim: int = 256 << 20, mmap_threshold: int = MMAP_THRESHOLD_MAX) -> bool:
    """Serve blocks up to ``mmap_threshold`` bytes from the heap and keep up to ``trim`` bytes of freed
    heap; True when the C library took both settings (glibc), False where it has no ``mallopt``."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_TRIM_THRESHOLD, trim)) and bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold))
