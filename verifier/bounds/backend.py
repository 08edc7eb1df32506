"""Which arrays the propagators compute on: numpy or torch (the same code,
:mod:`verifier.arrays`).

``import torch`` costs about a CPU second; a causal-fairness run on a small network bounds
all its partitions in a fraction of that. So the numpy backend serves every call that does
not need torch, and torch serves alpha-CROWN (autograd), processes that already imported
it (PV, ACAS Xu, the self-correcting layer: using it then costs nothing) and batches large
enough for torch's kernels to pay for the import (:data:`TORCH_WORK`; docs/decisions.md).
"""

from __future__ import annotations

from typing import Literal

from verifier.arrays import torch_loaded
from verifier.network import Network

Backend = Literal["auto", "numpy", "torch"]
BACKENDS: tuple[str, ...] = ("auto", "numpy", "torch")

TORCH_WORK = 1 << 40
"""Multiply-adds of one IBP pass over a batch (boxes × the network's weights) from which
``auto`` imports torch for it."""


def _use_torch(backend: Backend, method: str, network: Network, batch: int) -> bool:
    """Whether a call of ``method`` on ``batch`` boxes of ``network`` computes on torch."""
    if backend != "auto":
        return backend == "torch"
    if method == "alpha-crown" or torch_loaded():
        return True
    weights = sum(layer.weight.size for layer in network.layers)
    return batch * weights >= TORCH_WORK
