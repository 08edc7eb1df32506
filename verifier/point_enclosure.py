"""Rigorous float64 enclosures of a network's outputs at points, tight enough to decide the
class of a point through deep networks without rational arithmetic.

**Why not the box bounds.** :func:`verifier.bounds.compute_bounds` on a point box widens every
layer by ``SOUNDNESS_REL_MARGIN·magnitude`` (``1e-9``: it covers any network up to about
10⁵ neurons and folded coefficients), and interval propagation multiplies each layer's
width by the active part of ``|W|``. On Libra's Adult RQ4 network (32 layers of 40 ReLUs)
that grows a ``1e-9`` margin into an output width of about 10 units, while the float
outputs are within ``1e-15`` of the exact ones: almost no point is decided.

**The enclosure.** Each layer's values lie in float intervals ``[lo, hi]`` (a point at the
input: ``lo = hi = x``). The affine step is taken in midpoint-radius form: for a float
midpoint ``m`` and a radius ``ρ`` rounded upward with ``[lo, hi] ⊆ [m − ρ, m + ρ]``, the real
``W·x + b`` of every ``x`` in the interval is within

    ``|W|·ρ + γ_{n+1}·(|W|·|m| + |b|) + (3n + 2)·2⁻¹⁰⁷⁴``

of the computed ``fl(W·m + b)`` (Higham, *Accuracy and Stability of Numerical Algorithms*
§3.1: an ``(n + 1)``-term sum of products evaluated in any order, fused multiply-adds
included, errs by at most ``γ_{n+1}`` of its terms' magnitudes; the last term covers the
absolute error of products that underflow, in the three products computed). Both
magnitudes are float sums of non-negative terms, bounded upward by
:func:`~verifier.numerics.sum_upper`; every addition of the radius rounds upward. The
activation is monotone (ReLU, LeakyReLU with slopes in ``[0, 1]``, hardtanh, none), so it maps
the interval's ends, rounded outward (:func:`~verifier.numerics.mul_down`/``mul_up`` for a
leak's product; ``max``/``clip`` are exact). The width grows with the same ``|W|`` factor as
interval propagation, but from ``γ_41 ≈ 10⁻¹⁴`` per layer rather than ``10⁻⁹``.

Guarantee: for every row ``i`` and output ``k`` the network's real-arithmetic output at
``points[i]`` lies in ``[lower[i, k], upper[i, k]]`` when the IR holds the model's own
coefficients (not :attr:`~verifier.network.Network.folded`: a folded coefficient is a rounded
stand-in whose error this enclosure does not carry). An overflow gives infinite or NaN ends,
which decide nothing. Tested against exact rational evaluation
(:func:`verifier.exact_arith.exact_outputs`) in ``tests/test_point_enclosure.py``.
"""

from __future__ import annotations

import numpy as np

from verifier.network import Layer, Network, NetworkError
from verifier.numerics import (
    add_down,
    add_up,
    gamma,
    mul_down,
    mul_up,
    sum_upper,
    underflow_allowance,
)


def enclose_outputs(network: Network, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)``, each ``[n_points, n_out]`` float64: a rigorous enclosure of the
    network's real outputs at every row of ``points`` ``[n_points, n_in]`` (see the module
    docstring for the guarantee).

    Raises:
        NetworkError: the network has a head (not piecewise linear), or is folded.
    """
    if network.head != "none":
        raise NetworkError(
            f"a point enclosure reads the outputs of a piecewise-linear network, but this one "
            f"ends in a {network.head} head; enclose its logits() or as_classifier() view"
        )
    if network.folded:
        raise NetworkError(
            "the network holds folded coefficients, whose rounding a point enclosure does not "
            "carry; bound it with verifier.bounds.compute_bounds instead"
        )
    lower = np.array(np.atleast_2d(points), dtype=np.float64)
    upper = lower.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for layer in network.layers:
            lower, upper = _affine(layer, lower, upper)
            lower, upper = _activation(layer, lower, upper)
    return lower, upper


def _affine(layer: Layer, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The enclosure of ``W·x + b`` over ``x ∈ [lower, upper]`` (midpoint-radius, above)."""
    width = layer.in_features
    magnitude = np.abs(layer.weight).T
    middle = 0.5 * lower + 0.5 * upper
    radius = np.maximum(add_up(upper, -middle), add_up(middle, -lower))
    centre = middle @ layer.weight.T + layer.bias
    spread = sum_upper(radius @ magnitude, width)
    rounding = mul_up(gamma(width + 1),
                      sum_upper(np.abs(middle) @ magnitude + np.abs(layer.bias), width + 1))
    total = add_up(add_up(spread, rounding), underflow_allowance(3 * width + 2))
    low, high = add_down(centre, -total), add_up(centre, total)
    # an overflow (inf − inf) leaves NaN: such an end bounds nothing
    return np.where(np.isnan(low), -np.inf, low), np.where(np.isnan(high), np.inf, high)


def _activation(layer: Layer, lower: np.ndarray, upper: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """The monotone activation applied to both ends, rounded outward."""
    if layer.activation == "none":
        return lower, upper
    if layer.activation == "hardtanh":
        return (np.clip(lower, layer.min_val, layer.max_val),
                np.clip(upper, layer.min_val, layer.max_val))
    slope = layer.negative_slope_effective
    return (np.where(lower >= 0.0, lower, mul_down(slope, lower)),
            np.where(upper >= 0.0, upper, mul_up(slope, upper)))
