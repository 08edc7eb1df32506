"""Piecewise-constant and piecewise-polynomial densities: exact integrals and validation."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from scipy.integrate import dblquad

from verifier.population import Leaf, PiecewiseDensity

INF = np.inf


def test_one_dimensional_polynomial_matches_the_antiderivative() -> None:
    density = PiecewiseDensity(leaves=[Leaf(lower=[0.0], upper=[3.0], polynomial=[([2], 1 / 9)])])
    a = np.array([-INF, 0.5, 1.0, 2.5, 4.0, -1.0])
    b = np.array([1.0, 2.0, INF, 2.5, 5.0, 0.0])
    clipped_a, clipped_b = np.clip(a, 0, 3), np.clip(b, 0, 3)
    expected = np.where(clipped_b > clipped_a, (clipped_b**3 - clipped_a**3) / 27, 0.0)
    np.testing.assert_allclose(density.prob_boxes(a[:, None], b[:, None]), expected,
                               rtol=1e-14, atol=1e-16)
    lower, upper = density.prob_boxes_interval(a[:, None], b[:, None])
    assert (lower <= expected).all() and (expected <= upper).all()


def two_dimensional() -> PiecewiseDensity:
    # leaf 1: constant 0.25 on [0,1]x[0,2] (mass 0.5); leaf 2: 0.1 (x + y) on [1,2]x[0,2]
    # with mass 0.1 (∫_1^2 x dx · 2 + 1 · ∫_0^2 y dy) = 0.1 (3 + 2) = 0.5
    return PiecewiseDensity(columns=["x", "y"], leaves=[
        Leaf(lower=[0.0, 0.0], upper=[1.0, 2.0], constant=0.25),
        Leaf(lower=[1.0, 0.0], upper=[2.0, 2.0], polynomial=[([1, 0], 0.1), ([0, 1], 0.1)]),
    ])


def reference_density(x: float, y: float) -> float:
    if 0 <= x <= 1 and 0 <= y <= 2:
        return 0.25
    if 1 < x <= 2 and 0 <= y <= 2:
        return 0.1 * (x + y)
    return 0.0


def test_two_dimensional_boxes_match_numerical_integration() -> None:
    density = two_dimensional()
    rng = np.random.default_rng(4)
    lo = rng.uniform(-0.5, 2.0, size=(12, 2))
    hi = lo + rng.uniform(0.1, 1.5, size=(12, 2))
    values = density.prob_boxes(lo, hi)
    for box in range(lo.shape[0]):
        x0, x1 = max(lo[box, 0], 0.0), min(hi[box, 0], 2.0)
        y0, y1 = max(lo[box, 1], 0.0), min(hi[box, 1], 2.0)
        if x1 <= x0 or y1 <= y0:
            assert values[box] == 0.0
            continue
        pieces = [(x0, min(x1, 1.0)), (max(x0, 1.0), x1)]
        expected = sum(
            dblquad(lambda y, x: reference_density(x, y), a, b, y0, y1, epsabs=1e-13)[0]
            for a, b in pieces if b > a
        )
        assert values[box] == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_overlapping_leaves_add_up() -> None:
    density = PiecewiseDensity(leaves=[
        Leaf(lower=[0.0], upper=[2.0], constant=0.25),
        Leaf(lower=[1.0], upper=[2.0], constant=0.5),
    ])
    np.testing.assert_allclose(density.prob_boxes([[0.0], [1.0], [1.5]], [[1.0], [2.0], [INF]]),
                               [0.25, 0.75, 0.375], rtol=1e-15)


@pytest.mark.parametrize(
    ("leaves", "message"),
    [
        ([{"lower": [0], "upper": [1], "constant": 0.5}], r"integrates to 0\.5, not 1"),
        ([{"lower": [0], "upper": [1], "constant": -1.0},
          {"lower": [1], "upper": [2], "constant": 2.0}],
         "constant density must be finite and >= 0"),
        ([{"lower": [0], "upper": [2], "polynomial": [[[1], 1.0], [[0], -0.5]]}],
         r"leaf 0: the polynomial density is negative"),
        ([{"lower": [0], "upper": [INF], "constant": 1.0}], "finite"),
        ([{"lower": [0], "upper": [1]}], "exactly one of 'constant' and 'polynomial'"),
        ([{"lower": [0], "upper": [1], "polynomial": [[[1, 0], 2.0]]}], "must be 1 non-negative"),
        ([{"lower": [1], "upper": [1], "constant": 1.0}], "lower < upper"),
        ([{"lower": [0], "upper": [1], "constant": 1.0},
          {"lower": [0, 0], "upper": [1, 1], "constant": 1.0}], "differ in dimension"),
    ],
)
def test_invalid_densities_name_the_problem(leaves: list, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PiecewiseDensity.model_validate({"leaves": leaves})


def test_polynomial_leaf_sampling_follows_the_density() -> None:
    density = PiecewiseDensity(leaves=[Leaf(lower=[0.0], upper=[3.0], polynomial=[([2], 1 / 9)])])
    samples = density.sample(100_000, np.random.default_rng(8))[:, 0]
    assert samples.min() >= 0.0 and samples.max() <= 3.0
    # E[X] = ∫ x · x² / 9 dx over [0, 3] = 81 / 36 = 2.25; Var = 27/5 − 2.25² = 0.3375
    assert abs(samples.mean() - 2.25) <= 4 * np.sqrt(0.3375 / samples.size)
