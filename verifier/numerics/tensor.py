"""Torch variants of the outward rounding (:mod:`verifier.numerics.rounding`) and the margin
rule of network bounds (:mod:`verifier.numerics.margins`), for the modules that compute on
tensors. Kept apart so that the float/numpy core imports no torch."""

from __future__ import annotations

from collections.abc import Callable

import torch

from verifier.numerics.margins import SOUNDNESS_ABS_MARGIN, SOUNDNESS_REL_MARGIN


def down_tensor(values: torch.Tensor) -> torch.Tensor:
    """The float just below each entry, in the tensor's own dtype (``-inf`` stays)."""
    return torch.nextafter(values, torch.full_like(values, -torch.inf))


def up_tensor(values: torch.Tensor) -> torch.Tensor:
    """The float just above each entry, in the tensor's own dtype (``+inf`` stays)."""
    return torch.nextafter(values, torch.full_like(values, torch.inf))


def magnitude_margin(magnitude: torch.Tensor, support: Callable[[], torch.Tensor],
                     relative: float = SOUNDNESS_REL_MARGIN) -> torch.Tensor:
    """The rounding margin of a sum whose real terms have absolute values adding up to at
    most ``magnitude`` (computed in float).

    ``relative·magnitude + SOUNDNESS_ABS_MARGIN`` in general; ``relative`` is
    ``SOUNDNESS_REL_MARGIN`` unless the caller counted the roundings
    (:func:`verifier.numerics.rounding.network_rel_margin`). Where
    ``magnitude`` is exactly zero in float, ``support()`` (same shape; only called then) says
    whether some real term may still be non-zero (e.g. a product that underflowed): then
    ``SOUNDNESS_ABS_MARGIN``, which dominates any such underflowed sum; only a structurally
    zero sum — every term exactly zero in real arithmetic — gets no margin, because its float
    evaluation is exact.
    """
    margin = relative * magnitude + SOUNDNESS_ABS_MARGIN
    zero = magnitude == 0
    if bool(zero.any()):
        absolute = torch.where(support(), torch.full_like(margin, SOUNDNESS_ABS_MARGIN),
                               torch.zeros_like(margin))
        margin = torch.where(zero, absolute, margin)
    return margin
