"""Exact integration of polynomials over simplices and convex polytopes.

On a simplex the Grundmann–Möller rule of degree ``2s + 1`` is exact for every polynomial of
degree at most ``2s + 1`` (Grundmann & Möller, SIAM J. Numer. Anal. 15, 1978), so the only error
is float64 rounding. Constants use the volume, linear polynomials the value at the centroid
(both exact). A polytope is triangulated (:mod:`verifier.wmi.polytope`) and the simplex
integrals are summed.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np

from verifier.wmi.polynomial import evaluate
from verifier.wmi.polytope import simplex_volumes


def _compositions(total: int, parts: int) -> list[tuple[int, ...]]:
    """All tuples of ``parts`` non-negative integers summing to ``total``."""
    result = []
    for cuts in itertools.combinations(range(total + parts - 1), parts - 1):
        bounds = (-1, *cuts, total + parts - 1)
        result.append(tuple(bounds[i + 1] - bounds[i] - 1 for i in range(parts)))
    return result


@lru_cache(maxsize=64)
def grundmann_moller(dimension: int, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """Barycentric points ``(Q, D + 1)`` and weights ``(Q,)`` summing to 1: the integral over
    a simplex is ``volume · Σ w_q f(point_q)``, exact for total degree <= ``degree``."""
    s = max(0, degree) // 2
    order = 2 * s + 1
    points, weights = [], []
    for i in range(s + 1):
        denominator = order + dimension - 2 * i
        weight = ((-1) ** i * (2.0 ** (-2 * s)) * denominator**order
                  / (math.factorial(i) * math.factorial(order + dimension - i)))
        for beta in _compositions(s - i, dimension + 1):
            points.append([(2 * b + 1) / denominator for b in beta])
            weights.append(weight)
    weight_array = np.array(weights)
    return np.array(points), weight_array / weight_array.sum()


def integrate_simplices(
    simplices: np.ndarray, exponents: np.ndarray, coefficients: np.ndarray
) -> float:
    """``Σ_s ∫_{simplex s} p`` for simplices ``(S, D + 1, D)`` and a compiled polynomial."""
    if simplices.shape[0] == 0:
        return 0.0
    volumes = simplex_volumes(simplices)
    poly_degree = int(exponents.sum(axis=1).max())
    if poly_degree == 0:
        return float(coefficients.sum() * volumes.sum())
    if poly_degree == 1:
        centroids = simplices.mean(axis=1)
        return float(volumes @ evaluate(exponents, coefficients, centroids))
    bary, weights = grundmann_moller(simplices.shape[2], poly_degree)
    nodes = np.einsum("qv,svd->sqd", bary, simplices)
    values = evaluate(exponents, coefficients, nodes)
    return float(volumes @ (values @ weights))
