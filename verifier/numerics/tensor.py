"""Array variants of the outward rounding (:mod:`verifier.numerics.rounding`) and the margin
rule of network bounds (:mod:`verifier.numerics.margins`), for the modules that compute on
arrays: each takes a torch tensor or a numpy array and computes in its namespace
(:func:`verifier.arrays.namespace`), the same IEEE operations on both, so the result has the
same bits. Importing this module imports no torch; a numpy argument never loads it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from verifier.arrays import Array, is_numpy, namespace
from verifier.numerics.margins import SOUNDNESS_ABS_MARGIN, SOUNDNESS_REL_MARGIN


def down_tensor(values: Array) -> Array:
    """The float just below each entry, in the array's own dtype (``-inf`` stays)."""
    if not is_numpy(values):
        from verifier.numerics.scripted import down_scripted  # a tensor: torch is loaded

        return down_scripted(values)
    return np.nextafter(values, np.full_like(values, -np.inf))


def up_tensor(values: Array) -> Array:
    """The float just above each entry, in the array's own dtype (``+inf`` stays)."""
    if not is_numpy(values):
        from verifier.numerics.scripted import up_scripted  # a tensor: torch is loaded

        return up_scripted(values)
    return np.nextafter(values, np.full_like(values, np.inf))


def magnitude_margin(magnitude: Array, support: Callable[[], Array],
                     relative: float = SOUNDNESS_REL_MARGIN) -> Array:
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
    xp = namespace(magnitude)
    margin = relative * magnitude + SOUNDNESS_ABS_MARGIN
    zero = magnitude == 0
    if bool(zero.any()):
        absolute = xp.where(support(), xp.full_like(margin, SOUNDNESS_ABS_MARGIN),
                            xp.zeros_like(margin))
        margin = xp.where(zero, absolute, margin)
    return margin
