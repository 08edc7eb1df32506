"""Error-free transformations: the exact rounding error of one float64 sum or product.

``two_sum`` (Knuth's TwoSum) and ``two_product`` (Veltkamp–Dekker TwoProduct) return the
computed result and its exact error, ``a + b = total + error`` and ``a·b = product + error``
in real arithmetic, so that a caller can tell an exact operation from a rounded one and round
only the latter (:func:`verifier.numerics.rounding.add_down`) or carry the errors along
(:func:`verifier.exact_arith.linear_form_bounds`).
"""

from __future__ import annotations

import numpy as np

_SPLITTER = 134217729.0  # 2**27 + 1


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scaled = _SPLITTER * a
    high = scaled - (scaled - a)
    return high, a - high


def two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a·b = product + error`` exactly for finite operands whose product neither overflows
    nor falls below ~1e-280 in magnitude (and operands below ~1e290, so that Veltkamp
    splitting does not overflow)."""
    product = a * b
    a_high, a_low = _split(a)
    b_high, b_low = _split(b)
    error = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
    return product, error


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a + b = total + error`` exactly, for finite operands whose sum does not overflow
    (otherwise ``error`` is NaN or infinite)."""
    total = a + b
    virtual = total - a
    error = (a - (total - virtual)) + (b - virtual)
    return total, error
