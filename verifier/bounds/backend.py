"""Which arrays the propagators compute on: numpy or torch (the same code,
:mod:`verifier.arrays`).

``import torch`` costs about a CPU second; a causal-fairness run on a small network bounds
all its partitions in a fraction of that. So ``auto`` takes torch only for alpha-CROWN
(autograd) and in processes that already imported it (the self-correcting layer, models
loaded from torch files, tests, pool workers forked from such a process: there using it
costs nothing and keeps their bounds the bits they were), and numpy everywhere else. No
batch is large enough to import torch for: on one thread numpy's CROWN took 0.42–0.92 of
torch's CPU time on every network and batch measured, 16 to 2,048 boxes of 20-6-4-1 up to
5-50×6-5 (docs/decisions.md). PV asks for torch explicitly: over a two-minute run its
sustained batches of thousands of boxes spent 46 s of system time in numpy's allocations
against 19 s on torch (Adult-13 1×16 on 2 workers: 2.06M boxes on numpy, 2.18M on torch).
"""

from __future__ import annotations

from typing import Literal

from verifier.arrays import torch_loaded

Backend = Literal["auto", "numpy", "torch"]
BACKENDS: tuple[str, ...] = ("auto", "numpy", "torch")


def _use_torch(backend: Backend, method: str) -> bool:
    """Whether a call of ``method`` computes on torch (``backend`` ``auto``: see the module
    docstring)."""
    if backend != "auto":
        return backend == "torch"
    return method == "alpha-crown" or torch_loaded()
