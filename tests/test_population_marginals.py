"""1-D marginals and the one-hot categorical against closed forms and 50-digit arithmetic."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from verifier.population import (
    Categorical,
    Discrete,
    DiscretisedNormal,
    Normal,
    PointMass,
    TruncatedNormal,
    Uniform,
    distribution_from_json,
)
from verifier.population.rounding import normal_interval

mpmath.mp.dps = 50
INF = math.inf


def exact_normal(a: float, b: float, mean: float, std: float) -> mpmath.mpf:
    """``P(a <= X <= b)`` computed with 700 significant digits (the oracle), enough for the
    difference of two CDF values that agree to 650 digits (intervals down to 1e-600 wide)."""
    if a > b:
        return mpmath.mpf(0)
    with mpmath.workdps(700):
        return +_exact_normal(a, b, mean, std)


def _exact_normal(a: float, b: float, mean: float, std: float) -> mpmath.mpf:
    def standardised(x: float) -> mpmath.mpf:
        if math.isinf(x):
            return mpmath.mpf(x)
        z = (mpmath.mpf(x) - mpmath.mpf(mean)) / mpmath.mpf(std)
        # beyond |z| = 1000 the tails are below 1e-217000, far under float64's smallest number
        return max(min(z, mpmath.mpf(1000)), mpmath.mpf(-1000))

    za, zb = standardised(a), standardised(b)
    if za >= 0:  # right tail: difference of survival values, no cancellation
        return mpmath.ncdf(-za) - mpmath.ncdf(-zb)
    return mpmath.ncdf(zb) - mpmath.ncdf(za)


def assert_encloses(result, exact: mpmath.mpf, rel: float = 1e-12) -> None:
    value, lower, upper = (float(np.asarray(x).reshape(-1)[0]) for x in
                           (result.value, result.lower, result.upper))
    assert lower <= exact <= upper, (lower, float(exact), upper)
    assert abs(value - float(exact)) <= rel * float(exact) + 1e-300


def scalar(a: float) -> np.ndarray:
    return np.array([a], dtype=np.float64)


@pytest.mark.parametrize(
    ("a", "b"),
    [(-1.0, 1.0), (-INF, 0.3), (2.0, INF), (-INF, INF), (8.0, 8.5), (-40.0, -37.0), (37.5, 38.0),
     (-8.5, -8.0), (0.0, 1e-9), (-1e-9, 1e-9), (-1e300, 1e300), (3.0, 3.0), (1.0, -1.0)],
)
def test_normal_interval_tail_accuracy_against_mpmath(a: float, b: float) -> None:
    result = normal_interval(scalar(a), scalar(b), 0.0, 1.0)
    assert_encloses(result, exact_normal(a, b, 0.0, 1.0))


@given(
    st.floats(-60, 60), st.floats(0, 30), st.sampled_from([1.0, 1e-3, 1e-9]),
    st.floats(-1e3, 1e3), st.floats(1e-3, 1e3),
)
def test_normal_interval_enclosure_contains_exact_value(start, width, scale, mean, std) -> None:
    """Always sound; relatively accurate unless the interval is so narrow (in standard
    deviations) that the CDF difference cancels."""
    width *= scale
    a, b = mean + start * std, mean + (start + width) * std
    result = normal_interval(scalar(a), scalar(b), mean, std)
    exact = exact_normal(a, b, mean, std)
    assert float(result.lower[0]) <= exact <= float(result.upper[0])
    if width >= 1e-2 and exact > 1e-290:
        assert abs(float(result.value[0]) - float(exact)) <= 1e-11 * float(exact)


def test_normal_accepts_variance_and_matches_std_parameterisation() -> None:
    by_variance = Normal(mean=38.5816, variance=186.0614)
    by_std = Normal(mean=38.5816, std=math.sqrt(186.0614))
    lo, hi = np.array([[18.0], [-INF]]), np.array([[60.0], [30.0]])
    np.testing.assert_allclose(by_variance.prob_boxes(lo, hi), by_std.prob_boxes(lo, hi),
                               rtol=1e-15)
    for row in range(2):
        exact = exact_normal(lo[row, 0], hi[row, 0], 38.5816, math.sqrt(186.0614))
        assert by_variance.prob_boxes(lo[row], hi[row])[0] == pytest.approx(float(exact), 1e-13)


def test_truncated_normal_closed_form_and_far_tail_truncation() -> None:
    dist = TruncatedNormal(mean=1.0, std=2.0, lower=-1.0, upper=4.0)
    normaliser = exact_normal(-1.0, 4.0, 1.0, 2.0)
    for a, b in [(-INF, 0.0), (0.5, 2.5), (3.0, INF), (-5.0, -2.0), (-INF, INF)]:
        exact = exact_normal(max(a, -1.0), min(b, 4.0), 1.0, 2.0) / normaliser
        assert_encloses(dist.interval(scalar(a), scalar(b)), exact, rel=1e-12)
    tail = TruncatedNormal(mean=0.0, std=1.0, lower=30.0)
    exact = exact_normal(30.0, 30.1, 0.0, 1.0) / exact_normal(30.0, INF, 0.0, 1.0)
    assert_encloses(tail.interval(scalar(30.0), scalar(30.1)), exact, rel=1e-11)


def test_truncation_with_no_representable_mass_is_rejected() -> None:
    with pytest.raises(ValidationError, match="too small to represent"):
        TruncatedNormal(mean=0.0, std=1.0, lower=60.0, upper=61.0)


def test_uniform_volumes() -> None:
    dist = Uniform(lower=-2.0, upper=6.0)
    lo = np.array([[-INF], [0.0], [5.0], [7.0], [1.0], [-3.0]])
    hi = np.array([[INF], [2.0], [9.0], [8.0], [1.0], [-2.0]])
    np.testing.assert_array_equal(dist.prob_boxes(lo, hi), [1.0, 0.25, 0.125, 0.0, 0.0, 0.0])
    lower, upper = dist.prob_boxes_interval(lo, hi)
    assert (lower <= [1.0, 0.25, 0.125, 0.0, 0.0, 0.0]).all()
    assert (upper >= [1.0, 0.25, 0.125, 0.0, 0.0, 0.0]).all()


def test_discrete_sums_probabilities_of_values_inside() -> None:
    values = [3.0, -1.0, 0.5, 2.0]
    probabilities = [0.1, 0.2, 0.3, 0.4]
    dist = Discrete(values=values, probabilities=probabilities)
    rng = np.random.default_rng(0)
    lo = rng.choice([-INF, -1.0, 0.0, 0.5, 2.0, 2.5], size=200)
    hi = rng.choice([INF, -1.0, 0.5, 1.0, 2.0, 3.0], size=200)
    expected = [sum(p for v, p in zip(values, probabilities, strict=True) if a <= v <= b)
                for a, b in zip(lo, hi, strict=True)]
    np.testing.assert_allclose(dist.prob_boxes(lo[:, None], hi[:, None]), expected,
                               rtol=1e-15, atol=1e-16)


def test_discretised_normal_equals_sum_of_rounded_cells() -> None:
    dist = DiscretisedNormal(mean=2.3, std=1.7, lower=-1, upper=7)
    cells = {k: exact_normal(k - 0.5, k + 0.5, 2.3, 1.7) for k in range(-1, 8)}
    total = sum(cells.values())
    for a, b in [(-INF, INF), (0.2, 3.0), (2.0, 2.0), (2.1, 2.9), (-10.0, 0.0), (6.5, 100.0)]:
        exact = sum(p for k, p in cells.items() if a <= k <= b) / total
        result = dist.interval(scalar(a), scalar(b))
        if exact == 0:
            assert float(result.value[0]) == 0.0 and float(result.upper[0]) == 0.0
        else:
            assert_encloses(result, exact, rel=1e-12)
    samples = dist.sample(20000, 1)[:, 0]
    assert set(np.unique(samples)) <= set(range(-1, 8))


def test_point_mass_is_exact() -> None:
    dist = PointMass(value=2.0)
    np.testing.assert_array_equal(
        dist.prob_boxes([[2.0], [2.5], [-INF]], [[2.0], [3.0], [1.0]]), [1.0, 0.0, 0.0]
    )


def test_categorical_one_hot_boxes_by_enumeration() -> None:
    probabilities = [0.1, 0.2, 0.3, 0.4]
    dist = Categorical(probabilities=probabilities)
    corners = [(-INF, 0.0), (0.0, 0.0), (0.0, 1.0), (1.0, 1.0), (0.5, INF), (0.2, 0.7)]
    boxes = list(itertools.product(corners, repeat=4))
    lo = np.array([[c[0] for c in box] for box in boxes])
    hi = np.array([[c[1] for c in box] for box in boxes])
    unit = np.eye(4)
    expected = [sum(p for j, p in enumerate(probabilities)
                    if ((lo[i] <= unit[j]) & (unit[j] <= hi[i])).all()) for i in range(len(boxes))]
    np.testing.assert_allclose(dist.prob_boxes(lo, hi), expected, rtol=1e-15, atol=0)
    samples = dist.sample(1000, 0)
    assert (samples.sum(axis=1) == 1).all()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "normal", "mean": 0, "std": 1, "variance": 1}, "exactly one"),
        ({"kind": "normal", "mean": 0, "std": 0}, "positive"),
        ({"kind": "normal", "mean": math.nan, "std": 1}, "finite"),
        ({"kind": "uniform", "lower": 1, "upper": 1}, "lower < upper"),
        ({"kind": "discrete", "values": [0, 1], "probabilities": [0.5, 0.6]}, "sum to 1"),
        ({"kind": "discrete", "values": [0, 0], "probabilities": [0.5, 0.5]}, "distinct"),
        ({"kind": "discrete", "values": [0], "probabilities": [0.5, 0.5]}, "1 values"),
        ({"kind": "categorical", "probabilities": [1.0]}, "at least 2"),
        ({"kind": "truncated_normal", "mean": 0, "std": 1, "lower": 2, "upper": 1},
         "lower < upper"),
        ({"kind": "discretised_normal", "mean": 0, "std": 1, "lower": 3, "upper": 1},
         "lower <= upper"),
        ({"kind": "gamma", "shape": 1}, "kind"),
    ],
)
def test_invalid_marginals_name_the_problem(data: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        distribution_from_json(data)


def test_boxes_with_lo_above_hi_have_probability_zero_and_nan_is_rejected() -> None:
    dist = Normal(mean=0.0, std=1.0)
    assert dist.prob_boxes([[1.0]], [[0.0]])[0] == 0.0
    with pytest.raises(ValueError, match="NaN"):
        dist.prob_boxes([[math.nan]], [[0.0]])
    with pytest.raises(ValueError, match="shape"):
        dist.prob_boxes([[0.0, 1.0]], [[1.0, 2.0]])
