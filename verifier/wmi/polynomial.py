"""Polynomials as ``dict[exponent tuple, coefficient]`` and their affine substitution.

This is the representation of :class:`verifier.population.Leaf` polynomials (a list of
``[exponents, coefficient]`` pairs) keyed by exponent tuple so that products and substitutions
collect like terms exactly as in real arithmetic (up to float64 rounding of the coefficients).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verifier.numerics import EPS, scaled_up

Polynomial = dict[tuple[int, ...], float]


def constant(value: float, dimension: int) -> Polynomial:
    """The constant polynomial ``value`` in ``dimension`` variables."""
    return {(0,) * dimension: float(value)}


def multiply(first: Polynomial, second: Polynomial) -> Polynomial:
    """The product, like terms collected; zero coefficients are dropped."""
    result: Polynomial = {}
    for exps_a, coef_a in first.items():
        for exps_b, coef_b in second.items():
            key = tuple(a + b for a, b in zip(exps_a, exps_b, strict=True))
            result[key] = result.get(key, 0.0) + coef_a * coef_b
    return {key: value for key, value in result.items() if value != 0.0}


def degree(poly: Polynomial) -> int:
    """Total degree (0 for the zero polynomial)."""
    return max((sum(exps) for exps in poly), default=0)


def substitute_affine(poly: Polynomial, matrix: np.ndarray, offset: np.ndarray) -> Polynomial:
    """``p(M z + c)`` as a polynomial in ``z``: ``poly`` has ``m`` variables, ``matrix`` is
    ``(m, D)`` and ``offset`` ``(m,)``; the result has ``D`` variables."""
    matrix = np.asarray(matrix, dtype=np.float64)
    offset = np.asarray(offset, dtype=np.float64)
    width = matrix.shape[1]
    linear: list[Polynomial] = []
    for row, shift in zip(matrix, offset, strict=True):
        form = {tuple(int(k == j) for k in range(width)): float(v)
                for j, v in enumerate(row) if v != 0.0}
        if shift != 0.0:
            form[(0,) * width] = form.get((0,) * width, 0.0) + float(shift)
        linear.append(form)
    powers: dict[tuple[int, int], Polynomial] = {}

    def power(variable: int, exponent: int) -> Polynomial:
        if (variable, exponent) not in powers:
            base = constant(1.0, width)
            for _ in range(exponent):
                base = multiply(base, linear[variable])
            powers[(variable, exponent)] = base
        return powers[(variable, exponent)]

    result: Polynomial = {}
    for exps, coef in poly.items():
        term = constant(coef, width)
        for variable, exponent in enumerate(exps):
            if exponent:
                term = multiply(term, power(variable, exponent))
        for key, value in term.items():
            result[key] = result.get(key, 0.0) + value
    return {key: value for key, value in result.items() if value != 0.0}


def embed(poly: Polynomial, positions: list[int], dimension: int) -> Polynomial:
    """Re-index a polynomial on ``len(positions)`` variables as one on ``dimension`` variables,
    variable ``i`` becoming variable ``positions[i]``."""
    result: Polynomial = {}
    for exps, coef in poly.items():
        key = [0] * dimension
        for position, exponent in zip(positions, exps, strict=True):
            key[position] += exponent
        result[tuple(key)] = result.get(tuple(key), 0.0) + coef
    return result


def compiled(poly: Polynomial, dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """``(exponents (T, D) int, coefficients (T,))``; the zero polynomial gives one zero term."""
    if not poly:
        return np.zeros((1, dimension), dtype=np.int64), np.zeros(1)
    exps = np.array(list(poly), dtype=np.int64).reshape(-1, dimension)
    return exps, np.array(list(poly.values()), dtype=np.float64)


def evaluate(exponents: np.ndarray, coefficients: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Values at points of shape ``(..., D)``."""
    monomials = np.prod(points[..., None, :] ** exponents, axis=-1)
    return monomials @ coefficients


def box_integral(poly: Polynomial, lower: np.ndarray, upper: np.ndarray,
                 skip: Sequence[int] = ()) -> float:
    """``∫ poly`` over the box ``[lower, upper]``, coordinates ``skip`` left out (the
    polynomial's factor in them read as 1): the closed form per monomial,
    ``Σ_t c_t Π_j (upper_j^{e_tj+1} − lower_j^{e_tj+1}) / (e_tj + 1)``, in float64 (not
    rounded outward; callers that need an enclosure widen it)."""
    keep = [j for j in range(lower.size) if j not in skip]
    total = 0.0
    for exponents, coefficient in poly.items():
        value = coefficient
        for j in keep:
            e = exponents[j] + 1
            value *= (upper[j] ** e - lower[j] ** e) / e
        total += value
    return total


def box_bound(exponents: np.ndarray, coefficients: np.ndarray, lower: np.ndarray,
              upper: np.ndarray, volume: float = np.inf) -> float:
    """An upper bound on ``∫_S |p|`` for a compiled polynomial over a set ``S`` inside the
    finite box ``[lower, upper]`` of volume at most ``volume`` (default the box's):
    ``vol · Σ_t |c_t| Π_j max(|lower_j|, |upper_j|)^{e_tj}``, widened by a relative bound on
    its float rounding."""
    reach = np.maximum(np.abs(lower), np.abs(upper))
    volume = min(volume, float(np.prod(upper - lower)))
    peak = float(np.abs(coefficients) @ np.prod(reach[None, :] ** exponents, axis=1))
    operations = exponents.shape[0] + int(exponents.sum()) + 2 * lower.size + 4
    return scaled_up(volume * peak, 4.0 * operations * EPS)
