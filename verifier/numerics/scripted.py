"""The outward rounding of :mod:`verifier.numerics.tensor` on torch tensors alone, in the
form TorchScript compiles: the self-correcting layer is saved as a script that loads with
``torch.jit.load`` without certgate, and a script cannot hold the array-generic functions
(they pick numpy or torch at run time). :mod:`verifier.numerics.tensor` calls these for
torch tensors, so the two give the same bits."""

from __future__ import annotations

import torch


def down_scripted(values: torch.Tensor) -> torch.Tensor:
    """The float just below each entry, in the tensor's own dtype (``-inf`` stays)."""
    return torch.nextafter(values, torch.full_like(values, -torch.inf))


def up_scripted(values: torch.Tensor) -> torch.Tensor:
    """The float just above each entry, in the tensor's own dtype (``+inf`` stays)."""
    return torch.nextafter(values, torch.full_like(values, torch.inf))
