"""Exact oracles the bound-propagation and PV tests share: a specification evaluated in
`Fraction` at a point, a ReLU network evaluated in `Fraction` apart from certgate's exact
arithmetic, and an interval check that never rounds the exact value."""

from __future__ import annotations

from collections.abc import Sequence
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


def rational_outputs(network: Network, point: Sequence[int | float | Fraction]
                     ) -> list[Fraction]:
    """The outputs of a network of affine layers with ReLU or no activation at ``point``, in
    exact rational arithmetic, written apart from :mod:`verifier.exact_arith` (an oracle for
    the code that module serves)."""
    values = [Fraction(v) for v in point]
    for layer in network.layers:
        assert layer.activation in ("relu", "none"), layer.activation
        values = [sum((Fraction(float(w)) * v for w, v in zip(row, values, strict=True)),
                      Fraction(float(b)))
                  for row, b in zip(layer.weight, layer.bias, strict=True)]
        if layer.activation == "relu":
            values = [max(Fraction(0), v) for v in values]
    return values


def contains(lower: float, upper: float, value: Fraction) -> bool:
    """``lower <= value <= upper`` compared exactly (infinite ends hold everything; ends read
    from JSON are read as the floats they print)."""
    lower, upper = float(lower), float(upper)
    return (lower == -np.inf or Fraction(lower) <= value) and (
        upper == np.inf or value <= Fraction(upper))
