"""Exact oracles the bound-propagation tests share: a specification evaluated in `Fraction`
at a point, and an interval check that never rounds the exact value."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from verifier.exact_arith import exact_outputs
from verifier.network import Network


def exact_spec(network: Network, spec: np.ndarray, point: np.ndarray | list[float]
               ) -> list[Fraction]:
    """``spec @ network(point)`` in exact rational arithmetic, one value per spec row."""
    outputs = exact_outputs(network, point)
    return [sum((Fraction(float(c)) * y for c, y in zip(row, outputs, strict=True)),
                Fraction(0)) for row in spec]


def contains(lower: float, upper: float, value: Fraction) -> bool:
    """``lower <= value <= upper`` compared exactly (infinite ends hold everything)."""
    return (lower == -np.inf or Fraction(lower) <= value) and (
        upper == np.inf or value <= Fraction(upper))
