"""Pre-activation bounds of the last hidden layer carried from an enclosing box to the boxes
inside it.

A sound bound of a neuron's pre-activation over a box holds over every box inside it, so a
branch and bound can hand a parent's bounds of one layer to its children: intersected with
the children's own IBP bounds they cost nothing, and a child that skips CROWN's tightening of
that layer (``tighten`` of :func:`verifier.bounds.compute_bounds`) keeps bounds close to its
parent's CROWN bounds instead of IBP's. Only the last hidden layer is carried: the first
layer's bounds are exact intervals over a box (nothing to carry), the last hidden layer's
tightening is the one ``tighten`` can spare, and one layer keeps the record small (Adult-13
2×64: 64 neurons, 256 bytes a box in :data:`CARRIED_DTYPE`).
"""

from __future__ import annotations

import numpy as np

from verifier.arrays import Array, namespace
from verifier.bounds.affine import PreparedNetwork, _Affine, _prepare
from verifier.bounds.results import BoundsResult
from verifier.network import Network
from verifier.numerics import outward_cast

CARRIED_DTYPE = np.float16
"""The type carried bounds are kept in, each end rounded outward (:func:`carried_bounds`): a
branch and bound keeps them for every open box, and they are only ever intersected with a
box's own bounds, so a float16 end (2⁻¹¹ relative, infinite beyond ±65504) loses almost
nothing (Adult-13 2×64: each interval 0.036 % wider on average, every end of a 61,378-box
search within 1.3·10⁻⁴ relative of float32's) and halves the float32 record (docs/
decisions.md, 2026-11-30, "PV's open boxes after carried bounds")."""


def _carried_index(affines: list[_Affine]) -> int | None:
    """The lowered layer whose bounds are carried: the last hidden layer, when it has a kink
    and is not the first layer; None otherwise."""
    index = len(affines) - 2
    if index < 1 or affines[index].slope is None:
        return None
    return index


def carried_width(network: Network | PreparedNetwork) -> int:
    """How many neurons :func:`carried_bounds` holds per box for ``network`` (0 when no layer
    is carried: one hidden layer, or a last hidden layer without a kink)."""
    if isinstance(network, PreparedNetwork):
        _, affines = network.maps(False)
    else:
        _, affines = _prepare(network, use_torch=False)
    index = _carried_index(affines)
    return 0 if index is None else int(affines[index].weight.shape[0])


def carried_bounds(result: BoundsResult) -> np.ndarray:
    """The carried layer's sound pre-activation bounds of every box of ``result``, ``(B, 2,
    n)`` in :data:`CARRIED_DTYPE` (``[:, 0]`` lower, ``[:, 1]`` upper), each rounded outward
    from the float64 bound (:func:`~verifier.numerics.outward_cast`), so they bound the
    pre-activations wherever ``result``'s do; ``(B, 2, 0)`` when no layer is carried."""
    layers = len(result.network.layers)
    index = layers - 2
    batch = result.lower.shape[0]
    if index < 1 or index not in result.pre_lower:
        return np.zeros((batch, 2, 0), dtype=CARRIED_DTYPE)
    return np.stack(outward_cast(result.pre_lower[index], result.pre_upper[index],
                                 CARRIED_DTYPE), axis=1)


def _layer_carried(
    carried: Array | None, affines: list[_Affine]
) -> list[tuple[Array, Array] | None]:
    """Per layer but the last, the carried ``(lower, upper)`` bounds (``(B, n)``) at the
    carried layer and None elsewhere (all None without ``carried``)."""
    blocks: list[tuple[Array, Array] | None] = [None] * (len(affines) - 1)
    index = _carried_index(affines)
    if carried is not None and index is not None:
        blocks[index] = (carried[:, 0], carried[:, 1])
    return blocks


def _with_carried(
    z_lo: Array, z_hi: Array, carried: tuple[Array, Array] | None
) -> tuple[Array, Array]:
    """Pre-activation bounds intersected with carried ones (both enclose the pre-activation
    on the box); None leaves them as they are."""
    if carried is None:
        return z_lo, z_hi
    xp = namespace(z_lo)
    return xp.maximum(z_lo, carried[0]), xp.minimum(z_hi, carried[1])
