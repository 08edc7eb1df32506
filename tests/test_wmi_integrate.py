"""Exact integration: Grundmann–Möller simplex rules and polytope triangulation vs exact
rational formulas and closed forms (paper 002, Example 2)."""

from fractions import Fraction
from math import factorial

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.spatial import ConvexHull

from verifier.wmi.integrate import integrate_simplices
from verifier.wmi.polynomial import compiled, substitute_affine
from verifier.wmi.polytope import box_constraints, make_polytope, triangulate


def standard_simplex_monomial(exponents: tuple[int, ...]) -> Fraction:
    """∫ over {t >= 0, Σ t <= 1} of Π t_i^a_i = Π a_i! / (|a| + D)! (Dirichlet integral)."""
    numerator = 1
    for a in exponents:
        numerator *= factorial(a)
    return Fraction(numerator, factorial(sum(exponents) + len(exponents)))


def exact_simplex_integral(poly: dict, simplex: np.ndarray) -> float:
    """Substitute x = v0 + V t and integrate each monomial over the standard simplex."""
    origin, edges = simplex[0], (simplex[1:] - simplex[0]).T
    pulled = substitute_affine(poly, edges, origin)
    jacobian = abs(np.linalg.det(edges))
    total = sum(Fraction(coef) * standard_simplex_monomial(exps) for exps, coef in pulled.items())
    return float(total) * jacobian


@given(st.integers(1, 4), st.integers(0, 6), st.integers(0, 10_000))
def test_simplex_rule_is_exact(dimension: int, degree: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    simplex = rng.normal(size=(dimension + 1, dimension))
    poly = {}
    for _ in range(3):
        exps = rng.multinomial(degree, np.ones(dimension) / dimension)
        poly[tuple(int(e) for e in exps)] = float(rng.normal())
    expected = exact_simplex_integral(poly, simplex)
    got = integrate_simplices(simplex[None], *compiled(poly, dimension))
    scale = max(1.0, abs(expected))
    assert abs(got - expected) <= 1e-9 * scale


def test_standard_simplex_monomials_match_dirichlet() -> None:
    simplex = np.vstack([np.zeros(3), np.eye(3)])[None]
    for exps in [(0, 0, 0), (1, 0, 0), (2, 1, 0), (3, 3, 1), (0, 4, 2)]:
        got = integrate_simplices(simplex, *compiled({exps: 1.0}, 3))
        assert got == pytest.approx(float(standard_simplex_monomial(exps)), rel=1e-12)


def _integral(A: np.ndarray, b: np.ndarray, poly: dict) -> float:
    polytope = make_polytope(A, b)
    assert polytope is not None
    return integrate_simplices(triangulate(polytope), *compiled(poly, A.shape[1]))


def test_paper_example_2() -> None:
    """Δ = unit square, w = ITE(x+y<=1; x; 1)·ITE(A; 1; y): WMI = 13/24, P(A|Δ) = 4/13."""
    A, b = box_constraints(np.zeros(2), np.ones(2))
    below = (np.vstack([A, [[1.0, 1.0]]]), np.append(b, 1.0))
    above = (np.vstack([A, [[-1.0, -1.0]]]), np.append(b, -1.0))
    mu1 = _integral(*below, {(1, 0): 1.0})
    mu2 = _integral(*below, {(1, 1): 1.0})
    mu3 = _integral(*above, {(0, 1): 1.0})
    total = mu1 + mu2 + mu3
    assert abs(total - 13 / 24) < 1e-12
    assert abs(mu1 / total - 4 / 13) < 1e-12
    assert abs(mu2 + mu3 - 3 / 8) < 1e-12


@given(st.integers(2, 4), st.integers(0, 10_000))
def test_triangulated_volume_matches_convex_hull(dimension: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    A, b = box_constraints(-np.ones(dimension), np.ones(dimension))
    cuts = rng.normal(size=(4, dimension))
    A, b = np.vstack([A, cuts]), np.concatenate([b, rng.uniform(0.2, 1.0, size=4)])
    polytope = make_polytope(A, b)
    assert polytope is not None
    simplices = triangulate(polytope)
    volume = integrate_simplices(simplices, *compiled({(0,) * dimension: 1.0}, dimension))
    assert volume == pytest.approx(ConvexHull(simplices.reshape(-1, dimension)).volume,
                                   rel=1e-9)


def test_empty_and_flat_polytopes_are_none() -> None:
    A, b = box_constraints(np.zeros(2), np.ones(2))
    assert make_polytope(np.vstack([A, [[1.0, 0.0]]]), np.append(b, -0.5)) is None
    flat = np.vstack([A, [[1.0, 0.0], [-1.0, 0.0]]])
    assert make_polytope(flat, np.append(b, [0.5, -0.5])) is None


def test_one_dimensional_polynomial() -> None:
    A, b = box_constraints(np.array([-1.0]), np.array([2.0]))
    assert _integral(A, b, {(3,): 1.0, (0,): 2.0}) == pytest.approx((16 - 1) / 4 + 6, rel=1e-12)
