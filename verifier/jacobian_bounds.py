"""Sound bounds of a piecewise-linear network's partial derivative in one input over boxes.

For a box ``[lo, hi]`` and an input column ``feature``, :func:`input_slope_bounds` encloses
the slope of ``spec @ net(x)`` along ``feature`` (forward-mode differentiation in interval
arithmetic): the first layer's derivative is its weight column, exact; a ReLU or leaky-ReLU
neuron multiplies the derivative reaching it by ``1`` when it is stably active on the box
(pre-activation lower bound ``>= 0``), by its negative slope ``s`` when stably inactive
(upper bound ``<= 0``), and by the interval ``[min(s, 1), max(s, 1)]`` when unstable; an
affine layer maps the interval by the centre-free form ``W⁺·d_lo + W⁻·d_hi``. The
pre-activation bounds are :func:`verifier.bounds.compute_bounds`' (sound, rounded).

Guarantee (a mean-value theorem for continuous piecewise-linear maps): for every box ``b``
and every pair ``x``, ``x′`` in the box that differ only in column ``feature`` with
``x_feature < x′_feature``, and every spec row ``r``, in real arithmetic::

    lower[b, r]·(x′_f − x_f) <= (spec @ net(x′) − spec @ net(x))[r] <= upper[b, r]·(x′_f − x_f)

The segment from ``x`` to ``x′`` lies in the box; along it the network is continuous and
piecewise linear, and the slope of each linear piece is a product of the layers' weights and,
per neuron, ``1`` or ``s`` as its side of the kink on that piece — a value the interval chain
contains. So the difference, the integral of those slopes, lies between the interval's ends
times the length. With one-hot ``groups`` the pre-activation bounds hold over the one-hot
points of a box, so the guarantee needs ``x`` (and with it the whole segment, which moves
only ``feature``) to be such a point; ``feature`` is then outside every group.

Floating point: every affine step is widened outward by ``SOUNDNESS_REL_MARGIN × magnitude +
SOUNDNESS_ABS_MARGIN`` (:mod:`verifier.numerics.margins`), the rule of
:mod:`verifier.bounds`, with the magnitude ``|W|·max(|d_lo|, |d_hi|)`` taken from the layers'
``weight_magnitude`` (the unfolded factors, so it also covers a folded layer's own rounding);
then stepped outward once (:func:`verifier.numerics.down_array` / ``up_array``). The margin
is skipped only where the derivative is zero structurally — no path of non-zero weights
(magnitudes) runs from ``feature`` to the row — decided on booleans, never because a float
rounded to zero. Products of an interval by the activation slopes use the numerics core's
directed products.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verifier.bounds import compute_bounds
from verifier.errors import CertgateInputError
from verifier.network import Layer, Network
from verifier.numerics import (
    SOUNDNESS_ABS_MARGIN,
    SOUNDNESS_REL_MARGIN,
    down_array,
    mul_down,
    mul_up,
    up_array,
)

KINKS = ("relu", "leaky_relu")


def _affine(d_lo: np.ndarray, d_hi: np.ndarray, reach: np.ndarray, weight: np.ndarray,
            magnitude: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``weight @ d`` for every ``d`` in ``[d_lo, d_hi]`` (rows are boxes), widened by the
    margin rule, and which outputs the feature reaches (``reach``: booleans of the inputs).

    A sum whose every term is ``>= 0`` in real arithmetic (decided on signs: a coefficient
    whose sign its rounding cannot flip, ``|w| > SOUNDNESS_REL_MARGIN·magnitude``, times an
    end of known sign, or an exactly zero derivative) is ``>= 0``, so its lower end is
    clipped at 0 after widening (and an all-``<= 0`` sum's upper end at 0): a slope that is
    0 only through a neuron that may switch off keeps its sign."""
    positive, negative = np.maximum(weight, 0.0), np.minimum(weight, 0.0)
    low = d_lo @ positive.T + d_hi @ negative.T
    high = d_hi @ positive.T + d_lo @ negative.T
    size = np.maximum(np.abs(d_lo), np.abs(d_hi)) @ magnitude.T
    reached = reach @ (magnitude > 0.0).T
    margin = np.where(reached, SOUNDNESS_REL_MARGIN * size + SOUNDNESS_ABS_MARGIN, 0.0)
    low = np.where(reached, down_array(low - margin), 0.0)
    high = np.where(reached, up_array(high + margin), 0.0)
    sure = np.abs(weight) > SOUNDNESS_REL_MARGIN * magnitude
    up_sign = (sure & (weight > 0.0)).astype(np.float64).T
    down_sign = (sure & (weight < 0.0)).astype(np.float64).T
    unsure = ((magnitude > 0.0) & ~sure).astype(np.float64).T
    moving = ((d_lo != 0.0) | (d_hi != 0.0)).astype(np.float64) @ unsure
    below, above = (d_lo < 0.0).astype(np.float64), (d_hi > 0.0).astype(np.float64)
    non_negative = (moving + below @ up_sign + above @ down_sign) == 0.0
    non_positive = (moving + above @ up_sign + below @ down_sign) == 0.0
    return np.where(non_negative, np.maximum(low, 0.0), low), \
        np.where(non_positive, np.minimum(high, 0.0), high), reached


def _activated(g_lo: np.ndarray, g_hi: np.ndarray, pre_lo: np.ndarray, pre_hi: np.ndarray,
               slope: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The derivative after a (leaky) ReLU: ``g`` times the neuron's slope set on the box
    (``{1}`` active, ``{s}`` inactive, ``[min(s, 1), max(s, 1)]`` unstable)."""
    active, inactive = pre_lo >= 0.0, pre_hi <= 0.0
    a = np.where(active, 1.0, np.where(inactive, slope, np.minimum(slope, 1.0)))
    b = np.where(active, 1.0, np.where(inactive, slope, np.maximum(slope, 1.0)))
    lows = [mul_down(g, t) for g in (g_lo, g_hi) for t in (a, b)]
    highs = [mul_up(g, t) for g in (g_lo, g_hi) for t in (a, b)]
    return np.minimum.reduce(lows), np.maximum.reduce(highs)


def input_slope_bounds(network: Network, lo: np.ndarray, hi: np.ndarray, feature: int,
                       spec: np.ndarray, *, groups: Sequence[Sequence[int]] = (),
                       method: str = "crown") -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ``∂(spec @ network(x)) / ∂x_feature`` over each box (module docstring for
    the guarantee).

    Args:
        network: a headless piecewise-linear network (activations ``none``, ``relu``,
            ``leaky_relu``, ``hardtanh``; it is lowered here).
        lo, hi: ``[n_boxes, n_in]`` float64 boxes (``lo <= hi``; infinite ends allowed:
            every neuron they reach is then unstable).
        feature: the input column differentiated along (outside every one-hot group).
        spec: ``[n_specs, n_out]`` float64 rows.
        groups: one-hot groups of input columns (see the module docstring).
        method: the pre-activation bound method of :func:`verifier.bounds.compute_bounds`.

    Returns:
        ``lower``, ``upper``: ``[n_boxes, n_specs]`` float64, never NaN.

    Raises:
        CertgateInputError: ``feature`` is out of range or in a one-hot group.
    """
    if not 0 <= feature < network.input_size:
        raise CertgateInputError(f"input {feature} is outside 0..{network.input_size - 1}")
    if any(feature in group for group in groups):
        raise CertgateInputError(f"input {feature} belongs to a one-hot group")
    lo, hi = np.atleast_2d(np.asarray(lo, np.float64)), np.atleast_2d(np.asarray(hi, np.float64))
    spec = np.atleast_2d(np.asarray(spec, np.float64))
    bounded = compute_bounds(network, lo, hi, method=method, groups=groups)  # type: ignore[arg-type]
    layers: list[Layer] = bounded.network.layers
    boxes = lo.shape[0]
    d_lo = np.zeros((boxes, network.input_size))
    d_lo[:, feature] = 1.0
    d_hi = d_lo.copy()
    reach = d_lo > 0.0
    folded = layers[-1].activation == "none"  # the spec folds into a final affine layer
    for index, layer in enumerate(layers):
        weight, magnitude = layer.weight, layer.weight_magnitude
        assert magnitude is not None
        if folded and index == len(layers) - 1:
            weight, magnitude = spec @ weight, np.abs(spec) @ magnitude
        d_lo, d_hi, reach = _affine(d_lo, d_hi, reach, weight, magnitude)
        if layer.activation in KINKS:
            d_lo, d_hi = _activated(d_lo, d_hi, bounded.pre_lower[index],
                                    bounded.pre_upper[index], layer.negative_slope_effective)
        elif layer.activation != "none":
            raise CertgateInputError(f"layer {index}: activation {layer.activation!r} is not "
                                     "piecewise linear after lowering")
    if not folded:
        d_lo, d_hi, _ = _affine(d_lo, d_hi, reach, spec, np.abs(spec))
    return d_lo, d_hi
