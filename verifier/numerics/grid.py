"""The values ``offset + step·k`` of integer codes ``k`` on a grid, correctly rounded: a
population's coded columns (``verifier.population.schema``) meet the data's units here."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from verifier.numerics.error_free import two_product, two_sum

_SAFE_LOW, _SAFE_HIGH = 1e-280, 1e290
"""Magnitudes within which :func:`two_product` and :func:`two_sum` are error-free."""


def grid_values(codes: np.ndarray, step: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """float64 of ``codes``' shape (``(..., d)``): the values ``offset + step·k`` of codes ``k``
    of columns with steps and offsets ``(d,)``, each the float nearest to the real value, so
    exact whenever that value is a float (as every fitted grid's values are; ``offset +
    step * k`` in float arithmetic rounds twice and can miss them by an ulp). Where an
    error-free transformation shows the float product and sum exact, they are the value;
    elsewhere it is computed in rationals, once per distinct code. Steps are positive, so an
    infinite code stays as it is (the infinite value of its sign); columns with step 1 and
    offset 0 pass unchanged."""
    values = np.array(codes, dtype=np.float64)
    for column in np.flatnonzero((step != 1.0) | (offset != 0.0)):
        ends = values[..., column]
        finite = np.isfinite(ends)
        k = ends[finite]
        with np.errstate(over="ignore", invalid="ignore"):    # such entries are not `safe`
            product, product_error = two_product(np.full_like(k, step[column]), k)
            total, sum_error = two_sum(np.full_like(k, offset[column]), product)
        magnitudes = np.abs(np.stack([k, product, total]))
        safe = ((product == 0.0) | (np.abs(product) >= _SAFE_LOW)) \
            & (magnitudes <= _SAFE_HIGH).all(axis=0) \
            & (abs(float(step[column])) <= _SAFE_HIGH) & (abs(float(offset[column])) <= _SAFE_HIGH)
        exact = safe & (product_error == 0.0) & (sum_error == 0.0)
        rest, inverse = np.unique(k[~exact], return_inverse=True)
        if rest.size:
            k[~exact] = np.array([_nearest(Fraction(float(offset[column]))
                                           + Fraction(float(step[column])) * Fraction(code))
                                  for code in rest.tolist()])[inverse.reshape(-1)]
        k[exact] = total[exact]
        ends[finite] = k
    return values


def _nearest(value: Fraction) -> float:
    """The float nearest to ``value`` (infinite beyond the largest float)."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")
