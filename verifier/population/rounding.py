"""Float64 error model of box probabilities and outward-rounded enclosures (DESIGN D2).

Every distribution computes a box probability as an :class:`Enclosure`: the float64 value
and a ``[lower, upper]`` interval that contains the exact real-arithmetic probability of the
model *as written in its JSON* (probabilities and weights normalised by their sum). The
intervals are built from per-term error bounds and propagated with outward-rounded interval
arithmetic:

* A normal CDF difference ``P(a <= X <= b)`` is computed on the tail side
  (``ndtr(zb) - ndtr(za)`` when ``zb <= 0``, ``ndtr(-za) - ndtr(-zb)`` when ``za >= 0``) so
  that tail probabilities keep their relative accuracy. Its error bound is
  ``(M + Z_ERROR_FACTOR * eps * z**2) * (t_a + t_b) + TINY`` where ``t_a``, ``t_b`` are the
  two subtracted CDF values and ``M`` is :data:`verifier.numerics.FUNCTION_REL_MARGIN`. The
  ``z**2`` term covers the rounding of the standardisation ``(x - mean) / std`` (relative
  error ``~3 eps`` in ``z``, which moves a tail value by a relative ``~z**2 * 3 eps``) and of
  ``exp(-z**2 / 2)`` inside ``erfc``; ``M = 1e-12`` covers the relative error of ``ndtr``
  itself (a few ``eps``) with a wide safety factor; ``TINY = 1e-300`` covers underflow
  (``|z| > 37``, where the CDF is below ``1e-300``). Near the mode (``|za|, |zb| <= 1``) the
  difference is ``(erf(zb/√2) − erf(za/√2)) / 2`` with error
  ``M (|erf(za/√2)| + |erf(zb/√2)|)``, so that narrow central intervals keep their relative
  accuracy too.
* Sums of given probabilities (discrete and categorical marginals) have relative error at
  most ``k * eps`` for ``k`` terms; differences of sorted cumulative sums carry the same bound
  relative to the two cumulative values.
* Products, weighted sums and sums of enclosures multiply (add) the lower ends and the upper
  ends and scale the results by ``1 ∓`` :func:`verifier.numerics.relative_margin` of the
  number of operations, which dominates the float rounding of the operations themselves
  (for results above the subnormal range; see docs/decisions.md, 2026-11-28, on why these
  are not stepped once more). A ratio (a conditional probability) is
  enclosed by :func:`verifier.numerics.probability_ratio`: one float step outward.

All ends are clipped to ``[0, 1]`` (a probability cannot leave it) and never NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import erf, ndtr

from verifier.numerics import (
    EPS,
    FUNCTION_REL_MARGIN,
    probability_ratio,
    relative_margin,
    scaled_down,
    scaled_up,
    underflow_allowance,
)

TINY = 1e-300
Z_ERROR_FACTOR = 16.0
Z2_CAP = 1e4
SQRT2 = float(np.sqrt(2.0))


@dataclass(frozen=True)
class Enclosure:
    """Float64 probability ``value`` with a sound ``[lower, upper]`` around the exact one.

    All three arrays share one shape; ``0 <= lower <= value <= upper <= 1`` element-wise.
    """

    value: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @staticmethod
    def from_error(value: np.ndarray, error: np.ndarray) -> Enclosure:
        """``value ± error``, clipped to ``[0, 1]``."""
        value = np.clip(value, 0.0, 1.0)
        return Enclosure(
            value, np.clip(value - error, 0.0, 1.0), np.clip(value + error, 0.0, 1.0)
        )

    @staticmethod
    def exact(value: np.ndarray) -> Enclosure:
        """A probability computed without rounding (indicator values 0 or 1)."""
        value = np.asarray(value, dtype=np.float64)
        return Enclosure(value, value, value)

    def zero_where(self, mask: np.ndarray) -> Enclosure:
        """The exact probability 0 where ``mask`` holds (e.g. empty boxes)."""
        return Enclosure(
            np.where(mask, 0.0, self.value),
            np.where(mask, 0.0, self.lower),
            np.where(mask, 0.0, self.upper),
        )

    def reshape(self, shape: tuple[int, ...]) -> Enclosure:
        return Enclosure(
            self.value.reshape(shape), self.lower.reshape(shape), self.upper.reshape(shape)
        )


def product(factors: Sequence[Enclosure]) -> Enclosure:
    """Enclosure of the product of independent probabilities (shapes broadcast). An upper
    end is 0 only where a factor's upper end is an exact 0; a product that underflows keeps
    a positive upper end (:func:`verifier.numerics.underflow_allowance`)."""
    value = lower = upper = np.float64(1.0)
    zero = np.False_
    for factor in factors:
        value = value * factor.value
        lower = lower * factor.lower
        upper = upper * factor.upper
        zero = zero | (factor.upper == 0)
    margin = relative_margin(len(factors))
    underflow = underflow_allowance(len(factors))
    return Enclosure(
        np.clip(value, 0.0, 1.0),
        np.clip(scaled_down(lower, margin) - underflow, 0.0, 1.0),
        np.clip(np.where(zero, 0.0, scaled_up(upper, margin) + underflow), 0.0, 1.0),
    )


def weighted_sum(weights: np.ndarray, parts: Enclosure) -> Enclosure:
    """``Σ_k weights[k] · parts[..., k]`` for non-negative weights (last axis summed); an
    upper end is 0 only where every term's is an exact 0 (products that underflow are
    covered by :func:`verifier.numerics.underflow_allowance`)."""
    margin = relative_margin(weights.size + 1)
    underflow = underflow_allowance(weights.size)
    value = parts.value @ weights
    lower = scaled_down(parts.lower @ weights, margin) - underflow
    zero = ~((parts.upper > 0) & (weights > 0)).any(axis=-1)
    upper = np.where(zero, 0.0, scaled_up(parts.upper @ weights, margin) + underflow)
    return Enclosure(np.clip(value, 0.0, 1.0), np.clip(lower, 0.0, 1.0), np.clip(upper, 0.0, 1.0))


def summed(parts: Enclosure, axis: int = -1) -> Enclosure:
    """Sum of the enclosures along ``axis`` (e.g. over the regimes of a Bayesian network)."""
    margin = relative_margin(parts.value.shape[axis] + 1)
    return Enclosure(
        np.clip(parts.value.sum(axis=axis), 0.0, 1.0),
        np.clip(scaled_down(parts.lower.sum(axis=axis), margin), 0.0, 1.0),
        np.clip(scaled_up(parts.upper.sum(axis=axis), margin), 0.0, 1.0),
    )


def ratio(numerator: Enclosure, denominator: Enclosure) -> Enclosure:
    """``numerator / denominator`` for a conditional probability (numerator <= denominator):
    the bounds by :func:`verifier.numerics.probability_ratio` (one float step outward per
    quotient). Where the denominator's lower end is not positive the upper end is 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(denominator.value > 0, numerator.value / denominator.value, 0.0)
    lower, upper = probability_ratio(numerator.lower, numerator.upper, denominator.lower,
                                     denominator.upper)
    return Enclosure(np.clip(value, 0.0, 1.0), lower, upper)


def _cdf_error(z: np.ndarray, tail_value: np.ndarray) -> np.ndarray:
    finite = np.isfinite(z)
    z2 = np.square(np.minimum(np.abs(np.where(finite, z, 0.0)), np.sqrt(Z2_CAP)))
    return np.where(finite, (FUNCTION_REL_MARGIN + Z_ERROR_FACTOR * EPS * z2) * tail_value, 0.0)


def normal_interval(
    a: np.ndarray, b: np.ndarray, mean: float | np.ndarray, std: float | np.ndarray
) -> Enclosure:
    """``P(a <= X <= b)`` for ``X ~ N(mean, std²)``, element-wise; ``a > b`` gives 0. Array
    parameters broadcast with the ends; every entry is bit for bit the one the scalar
    parameters give (each step is element-wise).

    ``a``/``b`` may be ±inf. The difference is taken on the tail side, so that tail
    probabilities keep their relative accuracy (see the module docstring for the bound).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    za = (a - mean) / std
    zb = (b - mean) / std
    left = zb <= 0.0
    right = za >= 0.0
    # tail side: left tail uses Φ(zb) − Φ(za); right tail uses Φ(−za) − Φ(−zb)
    big = np.where(right, ndtr(-za), ndtr(zb))
    small = np.where(right, ndtr(-zb), ndtr(za))
    middle = ~(left | right)
    # straddling 0: 1 − Φ(za) − Φ(−zb) keeps the accuracy of a probability close to one
    lower_tail = ndtr(za)
    upper_tail = ndtr(-zb)
    value = np.where(middle, (1.0 - lower_tail) - upper_tail, big - small)
    error = np.where(
        middle,
        _cdf_error(za, lower_tail) + _cdf_error(zb, upper_tail) + 4.0 * EPS,
        _cdf_error(np.where(right, za, zb), big) + _cdf_error(np.where(right, zb, za), small),
    ) + TINY
    # near the mode (|z| <= 1 at both ends) an erf difference keeps narrow intervals accurate
    central = (np.abs(za) <= 1.0) & (np.abs(zb) <= 1.0)
    if central.any():
        erf_a = erf(np.where(central, za, 0.0) / SQRT2)
        erf_b = erf(np.where(central, zb, 0.0) / SQRT2)
        value = np.where(central, 0.5 * (erf_b - erf_a), value)
        error = np.where(
            central,
            FUNCTION_REL_MARGIN * (np.abs(erf_a) + np.abs(erf_b)) + 4.0 * EPS * value + TINY,
            error,
        )
    empty = a > b
    value = np.where(empty, 0.0, value)
    enclosure = Enclosure.from_error(value, error)
    return enclosure.zero_where(empty)
