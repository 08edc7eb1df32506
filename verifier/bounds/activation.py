"""The one activation family the propagators see, in one place: a monotone one-kink
activation ``z ↦ z`` for ``z >= 0``, ``slope·z`` below (ReLU: slope 0; LeakyReLU: its slope;
a lowered Hardtanh is two of them, see :meth:`verifier.network.Network.lowered`).

Everything the bound methods need of it lives here: its interval image (IBP,
:func:`_activate_interval`), CROWN's linear relaxation (:func:`_relax`), how a linear form
passes backward through that relaxation (:func:`_through_relaxation`, shared by CROWN and
alpha-CROWN), the range of lower slopes alpha-CROWN may choose (:func:`_alpha_slopes`) and
when its output is exactly zero (:func:`_dead`). Every bound method reaches the
activation only through these functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from verifier.arrays import Array, namespace

LowerSlopes = Literal["adaptive", "left"]
LOWER_SLOPES: tuple[str, ...] = ("adaptive", "left")
"""CROWN's lower-slope rules for unstable neurons (:func:`_relax`): ``adaptive`` (1 when
``u >= −l``, else the left slope: the smaller-area relaxation of the one neuron) and ``left``
(always the left piece's slope, 0 for a ReLU). On deep networks with wide intermediate
intervals ``left`` keeps a neuron's loose negative lower bound from flowing into the next
layer's lower relaxation, where ``adaptive``'s slope 1 passes it on: see
:func:`verifier.causal.analysis.lower_slopes_for` for where it is used."""


def _activate_interval(
    lo: Array, hi: Array, slope: Array | None
) -> tuple[Array, Array]:
    """Interval image of a monotone one-kink activation (identity when ``slope`` is None)."""
    if slope is None:
        return lo, hi
    # a slope times an infinite bound is still infinite (slopes are > 0) or 0 (slope 0): never NaN
    return _leaky(lo, slope), _leaky(hi, slope)


def _leaky(z: Array, slope: Array) -> Array:
    """``z`` where ``z >= 0`` else ``slope·z``; ``0·(−∞)`` is taken as 0."""
    xp = namespace(z)
    scaled = xp.where(slope == 0.0, xp.zeros_like(z), z * slope)
    return xp.where(z < 0, scaled, z)


@dataclass
class _Relaxation:
    """Per box and neuron of one kink layer: lower slope, upper slope and upper intercept.

    ``slope·z`` (through the origin) is a lower bound and ``upper_slope·z + upper_intercept``
    an upper bound of the activation on ``[l, u]``; both are exact on stable neurons.
    ``slope_bound`` bounds every lower slope alpha-CROWN may choose and the upper slope
    (used for magnitudes).
    """

    lower_slope: Array
    upper_slope: Array
    upper_intercept: Array
    slope_bound: Array

    @cached_property
    def stacked(self) -> Array:
        """``(B, 3, n)``: lower slope, upper slope and upper intercept side by side, so that
        one gather of a box's rows serves all three (:mod:`verifier.bounds.backward`)."""
        return namespace(self.lower_slope).stack(
            [self.lower_slope, self.upper_slope, self.upper_intercept], axis=1)


def _relax(lo: Array, hi: Array, slope: Array,
           lower: LowerSlopes = "adaptive") -> _Relaxation:
    """CROWN's linear relaxation of a one-kink activation with left slope ``slope``.

    Unstable neurons get the chord through ``(l, slope·l)`` and ``(u, u)`` as upper bound and,
    by ``lower`` (:data:`LOWER_SLOPES`), the adaptive lower slope (1 when ``u >= -l``, else
    ``slope``) or the left piece's own slope ``slope`` (0 for a ReLU). Every lower slope in
    ``[slope, 1]`` is a sound lower bound of the activation through the origin, so both rules
    are sound. Bounds must be finite; the chord is computed on halved values where ``u − l``
    would overflow.
    """
    xp = namespace(lo)
    unstable = (lo < 0) & (hi > 0)
    active = lo >= 0
    slope = xp.broadcast_to(slope, lo.shape)
    stable_slope = xp.where(active, xp.ones_like(lo), slope)
    width = hi - lo
    rise = hi - slope * lo
    overflow = ~xp.isfinite(width) | ~xp.isfinite(rise)
    if bool(overflow.any()):
        width = xp.where(overflow, hi * 0.5 - lo * 0.5, width)
        rise = xp.where(overflow, hi * 0.5 - (slope * 0.5) * lo, rise)
    width = xp.where(unstable, width, xp.ones_like(lo))
    chord = xp.where(unstable, rise / width, stable_slope)
    intercept = xp.where(unstable, hi * (1.0 - chord), xp.zeros_like(lo))
    adaptive = xp.where(hi >= -lo, xp.ones_like(lo), slope)
    chosen = slope if lower == "left" else adaptive
    lower_slope = xp.where(unstable, chosen, stable_slope)
    steepest = xp.maximum(xp.maximum(chord, lower_slope), xp.ones_like(lo))
    slope_bound = xp.where(unstable, steepest, stable_slope)
    return _Relaxation(lower_slope, chord, intercept, slope_bound)


def _through_relaxation(
    coeffs: Array, const: Array, lower_slope: Array,
    upper_slope: Array, upper_intercept: Array, *, in_place: bool = False,
) -> tuple[Array, Array]:
    """A lower bound ``coeffs·σ(z) + const`` (rows over the last axis) as a lower bound in
    ``z``: a non-negative coefficient takes the lower relaxation, a negative one the upper
    relaxation and its intercept. ``lower_slope``/``upper_slope``/``upper_intercept`` are
    those of :class:`_Relaxation`, gathered or broadcast to each row. Returns the new
    ``(coeffs, const)``. (By clamped parts, the same products as a select, which took 4× as
    long on one thread.) ``in_place``: ``coeffs`` may be overwritten and the products are
    written into the parts' own buffers (no autograd through them): the same operations on
    the same values, with half the fresh tensors (a third less CPU on 2,048 × 787 rows)."""
    xp = namespace(coeffs)
    if not in_place:
        negative = xp.clip(coeffs, max=0.0)
        const = const + xp.sum(negative * upper_intercept, axis=-1)
        return xp.clip(coeffs, min=0.0) * lower_slope + negative * upper_slope, const
    positive = xp.clip(coeffs, min=0.0)
    xp.multiply(positive, lower_slope, out=positive)
    negative = xp.clip(coeffs, max=0.0, out=coeffs)
    product = negative * upper_intercept
    const = const + xp.sum(product, axis=-1)
    xp.multiply(negative, upper_slope, out=product)
    return xp.add(positive, product, out=positive), const


def _alpha_slopes(candidate: Array, slope: Array) -> Array:
    """``candidate`` lower slopes projected onto ``[slope, 1]``, where every lower slope
    gives a sound relaxation of the activation with left slope ``slope``."""
    xp = namespace(candidate)
    return xp.maximum(xp.clip(candidate, max=1.0), slope)


def _dead(z_hi: Array, slope: Array) -> Array:
    """Neurons whose output is exactly zero in real arithmetic: slope 0 and a sound upper
    bound ``z_hi <= 0`` of the pre-activation (structural, never a float that rounded to 0)."""
    return (slope == 0) & (z_hi <= 0)
