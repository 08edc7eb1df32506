"""``torch.nn`` modules the IR exports to (:meth:`verifier.network.Network.to_torch`) that torch
does not have; kept out of :mod:`verifier.network`, which imports torch only when a torch view
is asked for (its numpy paths, the point enclosures and the model readers run without it)."""

from __future__ import annotations

import torch


class PerNeuronLeakyReLU(torch.nn.Module):
    """``x`` where ``x >= 0``, else ``slope[i]·x``: a LeakyReLU with one slope per neuron."""

    def __init__(self, slopes: tuple[float, ...]) -> None:
        super().__init__()
        self.register_buffer("slopes", torch.tensor(slopes, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x < 0, x * self.slopes.to(x.dtype), x)


class BinaryLogits(torch.nn.Module):
    """``(0, z)`` from a single logit ``z`` (``[batch, 1]`` to ``[batch, 2]``): the classifier
    view of a binary classifier (:meth:`verifier.network.Network.as_classifier`), with ``z``
    left exactly as the module before it computed it."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.zeros_like(z), z], dim=1)
