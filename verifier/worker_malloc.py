"""How a local pool's worker keeps the memory its tasks free (glibc's ``mallopt``).

A PV task allocates and frees the same large temporaries every time (the boxes' corners, the
bounds, the excess bound's tables). With glibc's defaults a worker returned them to the
system between tasks — blocks above the dynamic mmap threshold as mappings of their own,
the heap's free top above the trim threshold — and faulted every page in (and zeroed it)
again at the next task: on Adult-13 1×16, 1.4 million minor faults and a fifth of the
workers' CPU in the kernel in 30 s, against 8 % in one process, whose long-lived pool of
open boxes keeps its heap from being trimmed (docs/decisions.md, 2026-11-29, "A pool's
workers keep the memory their tasks free"). Fixed thresholds keep such blocks in the heap
for the next task; a worker's resident memory stays at its largest task's.

Only the workers certgate starts get this — the process pool's (its initializer,
:class:`verifier.executor.ProcessPool`) and a local Dask cluster's (:data:`MALLOC_ENVIRON`):
the caller's process is the user's, and so are the workers of a cluster reached by its
address.
It changes where memory comes from, never a value computed.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameters (``malloc.h``)."""
MMAP_THRESHOLD = 32 << 20
"""Blocks below this size come from the heap (glibc's largest dynamic mmap threshold on
64-bit systems, ``DEFAULT_MMAP_THRESHOLD_MAX``)."""
TRIM_THRESHOLD = 128 << 20
"""Free memory at the heap's top beyond which it is returned to the system."""
MALLOC_ENVIRON = {"MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD,
                  "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD}
"""The same two settings as the environment variables glibc reads when a process starts: a
local Dask cluster's workers, spawned by its nannies, start with them
(:class:`verifier.executor.DaskExecutor`)."""


def keep_freed_memory() -> bool:
    """Set this process's malloc to keep freed blocks below :data:`MMAP_THRESHOLD` in its heap
    and to trim the heap only beyond :data:`TRIM_THRESHOLD` of free memory at its top.
    Whether both settings were taken: False where the C library has no ``mallopt`` (not
    glibc; nothing changed) or refuses a value (that value keeps its default)."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
