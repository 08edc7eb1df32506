"""Outward rounding of float64 results: the one error model every sound bound in certgate uses.

**The model.** IEEE 754 ``+ − × ÷ √`` are correctly rounded (to nearest): the computed float
``s`` of a real result ``x`` is the float nearest ``x``. The float just below ``s`` is then
``<= x`` and the float just above is ``>= x``, in every range: at a power of two (where the
spacing changes), in the subnormal range (where the error is absolute, at most half of
``2⁻¹⁰⁷⁴``) and at overflow (``x`` beyond the largest float gives ``s = ±inf``, whose step
inwards is the largest finite float, still on the right side of ``x``). So one float step
outward (:func:`down`, :func:`up`) encloses the exact result of one operation, and a chain of
operations is enclosed by stepping after each one on monotone arguments. A NaN stays NaN.

**Sums and products of non-negative terms** (:func:`sum_lower`, :func:`sum_upper`). A float
evaluation of non-negative terms in which every term meets at most ``r`` roundings (a sum of
``n`` terms in any order: ``r = n − 1``; each product factor adds one) is within
``γ_r = r·u / (1 − r·u)`` of the exact value, relatively (Higham, *Accuracy and Stability of
Numerical Algorithms*, §3.1 and §4.2; ``u = 2⁻⁵³``). Scaling the computed value by
``1 ∓ 2·r·ε = 1 ∓ 4·r·u`` and stepping once more (the scaling is itself rounded) encloses the
exact value whenever ``r·u <= 3/8``: ``1/(1 + γ_r) = 1 − r·u >= 1 − 4·r·u`` and
``1/(1 − γ_r) = (1 − r·u)/(1 − 2·r·u) <= 1 + 4·r·u``. Beyond that the bounds are ``0`` and
``+inf``.

**Library functions** (:func:`widened_down`, :func:`widened_up`). ``exp``, ``log1p``, ``erf``
and ``ndtr`` are not correctly rounded; they are within a few units in the last place. Their
results are widened by a stated relative error
(:data:`~verifier.numerics.margins.FUNCTION_REL_MARGIN` covers a few thousand units) and then
stepped once.

**Relative margins** (:func:`scaled_down`, :func:`scaled_up`). A chain whose error a margin
already over-covers (:func:`relative_margin`) is scaled by ``1 ∓ margin`` without a step: the
margin absorbs the scaling's own rounding.

Tested against exact rational arithmetic (``fractions.Fraction``) in
``tests/test_numerics.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike

from verifier.numerics.error_free import two_sum
from verifier.numerics.margins import FUNCTION_REL_MARGIN

EPS = 2.0**-52
"""Machine epsilon of float64: the gap between 1.0 and the next float (twice the unit
roundoff ``u = 2⁻⁵³``)."""

SMALLEST_SUBNORMAL = math.ulp(0.0)
"""The smallest positive float64 (``2⁻¹⁰⁷⁴``): the float just above an exact zero."""

Scaled = TypeVar("Scaled", float, np.floating, np.ndarray)
"""What :func:`scaled_down` and :func:`scaled_up` scale: a float, a numpy scalar or an
array; the result has the same type."""

Margin = float | np.floating | np.ndarray
"""A relative margin: one value, or one per element of the values it scales."""

_MAX_ROUNDINGS = 3.0 / 8.0 / 2.0**-53
"""The largest rounding count ``r`` with ``r·u <= 3/8`` (see the module docstring)."""


def down(value: float) -> float:
    """The float just below ``value``: a lower bound of the exact result of one correctly
    rounded operation whose computed result is ``value`` (``-inf`` stays ``-inf``)."""
    return math.nextafter(value, -math.inf)


def up(value: float) -> float:
    """The float just above ``value``: an upper bound of the exact result of one correctly
    rounded operation whose computed result is ``value`` (``+inf`` stays ``+inf``)."""
    return math.nextafter(value, math.inf)


def down_array(values: ArrayLike) -> np.ndarray:
    """:func:`down` element-wise (float64 array of the same shape)."""
    with np.errstate(over="ignore"):
        return np.nextafter(np.asarray(values, dtype=np.float64), -np.inf)


def up_array(values: ArrayLike) -> np.ndarray:
    """:func:`up` element-wise (float64 array of the same shape)."""
    with np.errstate(over="ignore"):
        return np.nextafter(np.asarray(values, dtype=np.float64), np.inf)


def add_down(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """The largest float ``<= a + b`` (element-wise): the computed sum where it is exact (its
    TwoSum error is ``>= 0``), else one float below it. Exact sums, zero included, stay exact,
    so repeated accumulation does not drift. An overflowed or infinite sum steps as
    :func:`down_array` does."""
    with np.errstate(over="ignore", invalid="ignore"):
        total, error = two_sum(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
        exact = np.isfinite(total) & (error >= 0)
    return np.where(exact, total, down_array(total))


def add_up(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """The smallest float ``>= a + b`` (element-wise; see :func:`add_down`)."""
    with np.errstate(over="ignore", invalid="ignore"):
        total, error = two_sum(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
        exact = np.isfinite(total) & (error <= 0)
    return np.where(exact, total, up_array(total))


def mul_down(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """A float ``<= a·b`` (element-wise): the computed product stepped down, except an exact
    zero (a zero factor) stays zero."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        product = a * b
    return np.where((a == 0) | (b == 0), 0.0, down_array(product))


def mul_up(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """A float ``>= a·b`` (element-wise; see :func:`mul_down`)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        product = a * b
    return np.where((a == 0) | (b == 0), 0.0, up_array(product))


def relative_margin(operations: int) -> float:
    """Relative widening that absorbs the rounding of a chain of ``operations`` float
    operations on positive values (products, sums of non-negative terms, quotients; no
    cancellation, no underflow): ``max(FUNCTION_REL_MARGIN, 4·(operations + 1)·ε)``, which
    exceeds ``γ_(operations + 1)`` while it stays below 1/2 (for results above the
    subnormal range, where rounding error is relative)."""
    return max(FUNCTION_REL_MARGIN, 4.0 * (operations + 1) * EPS)


def underflow_allowance(multiplications: int | ArrayLike) -> np.ndarray:
    """The absolute error that underflow can add to a chain of ``multiplications`` float
    products of values in ``[0, 1]``: at most half of ``2⁻¹⁰⁷⁴`` per product, never grown by
    the later factors (each at most 1); counted as one whole ``2⁻¹⁰⁷⁴`` per product. Relative
    margins (:func:`relative_margin`) do not cover it: a product that underflows to 0 has no
    relative error bound. Far above the subnormal range it vanishes in the rounding of the
    bound it is added to."""
    return np.asarray(multiplications, dtype=np.float64) * SMALLEST_SUBNORMAL


def gamma(n: int) -> float:
    """Higham's ``γ_n = n·u / (1 − n·u)`` doubled (``2·n·ε`` over the same denominator, to
    cover the rounding of the bound itself): the error of an ``n``-term float dot product or
    sum, *with* cancellation, is at most ``γ_n`` times the sum of the terms' magnitudes."""
    return 2.0 * n * EPS / (1.0 - n * EPS)


def network_roundings(fan_ins: Sequence[int], inputs: int, groups: int) -> int:
    """The most roundings any real term meets when a bound of a network is evaluated in
    floating point (IBP, CROWN or alpha-CROWN, any order of summation): per affine map down
    to the input its fan-in plus 8 (the casts, the relaxation's product and intercept, the
    midpoint and radius), plus twice the input width, the one-hot groups and 16.
    ``fan_ins``: the fan-in of every map the bound passes through (a specification folded
    into the last map counts as one more map of the network's output width)."""
    return sum(fan_in + 8 for fan_in in fan_ins) + 2 * inputs + groups + 16


def network_rel_margin(roundings: int) -> float:
    """The relative margin of a network bound whose every real term meets at most
    ``roundings`` roundings (:func:`network_roundings`, plus a fold's count where coefficients
    are folded): ``2·gamma(roundings)``, i.e. ``8·r·u / (1 − 2·r·u)``. Higham's error of such
    an evaluation is at most ``γ_r = r·u / (1 − r·u)`` times the terms' magnitude; the
    margin is eight times that, which also covers the float evaluation of the magnitude
    itself and the few extra ``γ_r`` of a bound read at points (CROWN's linear bounds).
    Adult RQ4's 32 × 40 network: ``1.45e-12`` instead of the flat
    :data:`~verifier.numerics.margins.SOUNDNESS_REL_MARGIN` (``1e-9``), which stays the
    margin of networks with a folded layer whose roundings were not counted; folded
    coefficients that carry their count (:attr:`verifier.network.Layer.fold_roundings`) add it
    to ``roundings`` (:func:`verifier.bounds.affine._network_rel_margin`)."""
    if roundings * EPS >= 0.25:
        raise ValueError(f"{roundings} roundings: float64 is too coarse for a margin")
    return 2.0 * gamma(roundings)


def sum_lower(total: ArrayLike, roundings: int | ArrayLike) -> np.ndarray:
    """A lower bound of the exact value of non-negative terms whose float evaluation gave
    ``total``, every term having met at most ``roundings`` roundings (a sum of ``n`` terms in
    any order: ``n − 1``). Element-wise; ``0`` where ``roundings·u > 3/8``."""
    total = np.asarray(total, dtype=np.float64)
    count = np.asarray(roundings, dtype=np.float64)
    with np.errstate(over="ignore"):
        shrunk = down_array(total * (1.0 - 2.0 * count * EPS))
    return np.where(count <= _MAX_ROUNDINGS, np.maximum(shrunk, 0.0), 0.0)


def sum_upper(total: ArrayLike, roundings: int | ArrayLike) -> np.ndarray:
    """An upper bound of the exact value of non-negative terms whose float evaluation gave
    ``total`` (see :func:`sum_lower`). Element-wise; ``+inf`` where ``roundings·u > 3/8``.
    A zero ``total`` stays zero: a float sum of non-negative terms is zero only when every
    term is."""
    total = np.asarray(total, dtype=np.float64)
    count = np.asarray(roundings, dtype=np.float64)
    with np.errstate(over="ignore"):
        grown = up_array(total * (1.0 + 2.0 * count * EPS))
    return np.where(count <= _MAX_ROUNDINGS, np.where(total == 0, 0.0, grown), np.inf)


def scaled_down(values: Scaled, relative: Margin, out: np.ndarray | None = None) -> Scaled:
    """``values·(1 − relative)``, computed as written (no step afterwards): a lower bound of
    the real value a non-negative computed ``values`` stands for, when ``values`` is within
    ``relative`` of it, relatively, with room left for this scaling's own two roundings (the
    subtraction and the product, ``2u`` relative). :func:`relative_margin` leaves that room:
    it is at least ``8·(operations + 1)·u`` for an error of about ``(operations + 1)·u``.
    ``values`` keeps its type (a float stays a float, an array an array); ``relative`` may be
    an array of per-element margins. Where the margin does not leave that room, use
    :func:`widened_down`, which steps once more. ``out``: an array to write the result to
    (it may be ``values`` itself), as for a numpy ufunc."""
    if out is not None:
        return np.multiply(values, 1.0 - relative, out=out)
    return values * (1.0 - relative)


def scaled_up(values: Scaled, relative: Margin) -> Scaled:
    """``values·(1 + relative)``, computed as written: an upper bound of the real value a
    non-negative computed ``values`` stands for (see :func:`scaled_down`; the outward twin
    with a step is :func:`widened_up`)."""
    return values * (1.0 + relative)


def widened_down(values: ArrayLike, relative: float = FUNCTION_REL_MARGIN) -> np.ndarray:
    """A lower bound of the real value a computed ``values`` stands for, when ``values`` is
    within ``relative`` of it, relatively (a library function's error; any sign):
    ``values·(1 ∓ relative)`` stepped down once. Element-wise, float64. A zero steps too: a
    library function that underflows returns 0 for a real value that is not (``exp(-800)``),
    outside any relative error; callers that know a zero is exact keep it themselves."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        widened = np.where(values > 0, values * (1.0 - relative), values * (1.0 + relative))
    return down_array(widened)


def widened_up(values: ArrayLike, relative: float = FUNCTION_REL_MARGIN) -> np.ndarray:
    """An upper bound of the real value a computed ``values`` stands for, when ``values`` is
    within ``relative`` of it (see :func:`widened_down`). Element-wise, float64."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        widened = np.where(values > 0, values * (1.0 + relative), values * (1.0 - relative))
    return up_array(widened)


def outward_cast(
    lower: np.ndarray, upper: np.ndarray, dtype: type[np.floating]
) -> tuple[np.ndarray, np.ndarray]:
    """``lower``/``upper`` in the narrower float type ``dtype`` (float32 or float16), each
    rounded outward: ``low <= lower`` and ``high >= upper`` in the extended reals (a cast
    rounds to nearest, and one that landed inside is moved one step of ``dtype`` out; beyond
    its range the outer side becomes infinite). Every ``dtype`` value is a float64 value, so
    the comparisons are exact."""
    lower = np.asarray(lower, dtype=np.float64)
    upper = np.asarray(upper, dtype=np.float64)
    with np.errstate(over="ignore"):
        low, high = lower.astype(dtype), upper.astype(dtype)
    low = np.where(low.astype(np.float64) > lower, np.nextafter(low, dtype(-np.inf)), low)
    high = np.where(high.astype(np.float64) < upper, np.nextafter(high, dtype(np.inf)), high)
    return low, high
