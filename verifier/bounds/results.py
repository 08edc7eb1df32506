"""What the bound propagators return: :class:`BoundsResult` and CROWN's :class:`LinearBounds`.

The method names (:data:`METHODS`) and the activation status codes (:data:`ACTIVE`,
:data:`UNSTABLE`, :data:`INACTIVE`) that callers read from a result live here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from verifier.network import Network

Method = Literal["ibp", "crown", "alpha-crown"]
METHODS: tuple[str, ...] = ("ibp", "crown", "alpha-crown")

ACTIVE, UNSTABLE, INACTIVE = 1, 0, -1


def pack_signs(signs: np.ndarray) -> np.ndarray:
    """Kink signs ``(B, N)`` in {−1, 0, 1} as two bit masks (positive, negative), ``(B, 2⌈N/8⌉)``
    uint8: a PV pool keeps one row per open box, the causal engine one per pending partition
    and protected cell (a quarter of the int8 size; all zero bytes mean nothing known)."""
    return np.concatenate(
        [np.packbits(signs > 0, axis=1), np.packbits(signs < 0, axis=1)], axis=1
    )


def unpack_signs(packed: np.ndarray, width: int) -> np.ndarray:
    """The int8 ``(B, width)`` signs of :func:`pack_signs`."""
    half = packed.shape[1] // 2
    positive = np.unpackbits(packed[:, :half], axis=1, count=width).astype(np.int8)
    negative = np.unpackbits(packed[:, half:], axis=1, count=width).astype(np.int8)
    return positive - negative


@dataclass
class LinearBounds:
    """CROWN's final linear bounds of ``C·net(x)`` on each box, as pointwise functions.

    For every box ``b``, row ``s`` and every ``x`` in the box (for a one-hot group of the
    bounding, every one-hot point of it), in real arithmetic::

        lower_value + A_l·x − min_box(A_l·x)  <=  (C·net(x))_s
        (C·net(x))_s  <=  upper_value + A_u·x − max_box(A_u·x)

    with ``A_l = lower_coefficients[b, s]``, ``A_u = upper_coefficients[b, s]`` (float
    numbers, taken exactly) and the extremes over the box's intervals and, for a usable
    one-hot group, over its allowed categories (the concretisation CROWN itself did).
    ``lower_value``/``upper_value`` are CROWN's bounds *before* they are intersected with
    IBP's (``−∞``/``+∞`` and zero coefficients where CROWN did not bound the row). Why this
    holds despite float coefficients: the margin of the row (:mod:`verifier.bounds`) dominates
    both the rounding of the concretisation and ``|A_float − A_real|·|x|`` at any point of
    the box, since both are at most ``γ_n`` times the row's magnitude, which is computed with
    ``max(|lo|, |hi|)`` over the box.
    """

    lower_coefficients: np.ndarray
    lower_value: np.ndarray
    upper_coefficients: np.ndarray
    upper_value: np.ndarray


@dataclass
class BoundsResult:
    """Bounds of ``C·net(x)`` over each box, and the pre-activation bounds of every kink layer.

    ``lower``/``upper`` have shape ``(B, S)``. ``pre_lower[k]``/``pre_upper[k]`` bound the
    pre-activations of the ``k``-th layer of ``network`` (the lowered network actually
    bounded) for every layer index in ``kink_layers`` (input columns no output depends on are
    set to 0 before bounding, so the pre-activations of neurons that only such columns feed
    are not meaningful; every output bound is). ``sensitivity`` (CROWN methods only;
    shape ``(B, S, inputs)``) holds ``|A_lower| + |A_upper|``, the absolute input coefficients
    of the final linear bounds: times an input's width, how much of the gap that input drives
    (zero for boxes bounded by IBP only); ``linear`` holds CROWN's final linear bounds
    themselves (:class:`LinearBounds`); ``tighten_s`` the CPU seconds CROWN spent tightening
    hidden layers' pre-activation bounds (0 for IBP).
    """

    lower: np.ndarray
    upper: np.ndarray
    method: str
    network: Network
    pre_lower: dict[int, np.ndarray] = field(default_factory=dict)
    pre_upper: dict[int, np.ndarray] = field(default_factory=dict)
    elapsed_s: float = 0.0
    sensitivity: np.ndarray | None = None
    linear: LinearBounds | None = None
    tighten_s: float = 0.0

    @property
    def lower_coefficients(self) -> np.ndarray | None:
        """``A_lower``, signed (``(B, S, inputs)``; CROWN methods only)."""
        return None if self.linear is None else self.linear.lower_coefficients

    @property
    def kink_layers(self) -> list[int]:
        """Indices (in ``network.layers``) of layers with a ReLU/LeakyReLU activation."""
        return sorted(self.pre_lower)

    def activation_status(self, layer: int) -> np.ndarray:
        """Per box and neuron of kink layer ``layer``: ``1`` stable active (``l >= 0``),
        ``-1`` stable inactive (``u <= 0``), ``0`` unstable."""
        lower, upper = self.pre_lower[layer], self.pre_upper[layer]
        status = np.zeros(lower.shape, dtype=np.int8)
        status[upper <= 0.0] = INACTIVE
        status[lower >= 0.0] = ACTIVE
        return status

    def signs(self) -> np.ndarray:
        """:meth:`activation_status` of every kink layer side by side, ``(B, N)`` int8 over
        the ``N`` kink neurons in layer order: what :func:`compute_bounds` accepts as
        ``known_signs`` for boxes inside these ones."""
        if not self.pre_lower:
            return np.zeros((self.lower.shape[0], 0), dtype=np.int8)
        return np.concatenate(
            [self.activation_status(layer) for layer in self.kink_layers], axis=1
        )

    def unstable_count(self) -> np.ndarray:
        """Number of unstable neurons per box, over all kink layers."""
        total = np.zeros(self.lower.shape[0], dtype=np.int64)
        for layer in self.kink_layers:
            total += (self.activation_status(layer) == UNSTABLE).sum(axis=1)
        return total
