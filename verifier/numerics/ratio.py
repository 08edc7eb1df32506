"""Sound enclosures of quotients of non-negative intervals: conditional probabilities
``P[E | C] = P[E ∧ C] / P[C]``, their ``a / (a + b)`` form, and ratios of rates.

One error model (:mod:`verifier.numerics.rounding`): each quotient and each sum is one
correctly rounded operation, stepped one float outward. (A second model, a relative widening
by ``1e-12`` of the quotient, was used for box probabilities: 4,500 times looser, and unsound
where the quotient falls in the subnormal range, where rounding error is absolute; see
docs/decisions.md, 2026-11-28.)
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from verifier.numerics.rounding import down_array, up_array


def nonnegative_quotient(
    num_lo: ArrayLike, num_hi: ArrayLike, den_lo: ArrayLike, den_hi: ArrayLike,
    ceiling: float = math.inf,
) -> tuple[np.ndarray, np.ndarray]:
    """Enclosure ``(low, high)`` of ``n / d`` over ``n ∈ [num_lo, num_hi]``,
    ``d ∈ [den_lo, den_hi]`` (all ends ``>= 0``; element-wise, broadcast, float64), for a
    quotient known to lie in ``[0, ceiling]``.

    Guarantee: every real ``n / d`` with ``d > 0`` in those intervals lies in
    ``[low, high]``. ``low = num_lo / den_hi`` and ``high = num_hi / den_lo``, each stepped
    one float outward and clipped to ``[0, ceiling]``; where ``den_lo <= 0`` the quotient is
    unbounded above (``high = ceiling``), and where ``den_hi <= 0`` it is undefined
    (``low = 0``). A zero numerator over a positive denominator is exactly 0 (no step: a
    fair-everywhere share is ``[0, 0]``). Never NaN.
    """
    num_lo, num_hi = np.asarray(num_lo, np.float64), np.asarray(num_hi, np.float64)
    den_lo, den_hi = np.asarray(den_lo, np.float64), np.asarray(den_hi, np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        low = np.where(den_hi > 0, down_array(num_lo / den_hi), 0.0)
        high = np.where(den_lo > 0, up_array(num_hi / den_lo), ceiling)
    low = np.clip(np.where(np.isnan(low), 0.0, low), 0.0, ceiling)
    high = np.clip(np.where(np.isnan(high), ceiling, high), 0.0, ceiling)
    high = np.where((num_hi == 0) & (den_lo > 0), 0.0, high)  # 0 / d is exactly 0
    return low, high


def probability_ratio(
    num_lo: ArrayLike, num_hi: ArrayLike, den_lo: ArrayLike, den_hi: ArrayLike,
) -> tuple[np.ndarray, np.ndarray]:
    """Enclosure of a conditional probability ``n / d`` (``0 <= n <= d``) from enclosures of
    ``n`` and ``d``: :func:`nonnegative_quotient` clipped to ``[0, 1]`` (``high = 1`` where
    ``d`` may be 0)."""
    return nonnegative_quotient(num_lo, num_hi, den_lo, den_hi, ceiling=1.0)


def share_interval(a_lo: float, a_hi: float, b_lo: float, b_hi: float) -> tuple[float, float]:
    """Enclosure of ``a / (a + b)`` over ``a ∈ [a_lo, a_hi]``, ``b ∈ [b_lo, b_hi]`` (all
    ``>= 0``): ``P[E | C]`` from ``a = P[E ∧ C]`` and ``b = P[¬E ∧ C]``; see
    :func:`share_intervals`."""
    low, high = share_intervals(a_lo, a_hi, b_lo, b_hi)
    return float(low), float(high)


def share_intervals(
    a_lo: ArrayLike, a_hi: ArrayLike, b_lo: ArrayLike, b_hi: ArrayLike,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`share_interval` element-wise (broadcast, float64): the same operations on
    each element, so the same bits as one call per element.

    The quotient increases in ``a`` and decreases in ``b``, so its ends are
    ``a_lo / (a_lo + b_hi)`` and ``a_hi / (a_hi + b_lo)``, which keeps the correlation that
    dividing independent intervals of ``P[E ∧ C]`` and ``P[C]`` would lose. The sums are
    stepped outward (up in the lower end's denominator, down in the upper end's), then
    :func:`probability_ratio`.
    """
    a_lo, a_hi = np.asarray(a_lo, np.float64), np.asarray(a_hi, np.float64)
    b_lo, b_hi = np.asarray(b_lo, np.float64), np.asarray(b_hi, np.float64)
    low_den = up_array(a_lo + b_hi)
    high_den = down_array(a_hi + b_lo)
    return probability_ratio(a_lo, a_hi, high_den, low_den)
