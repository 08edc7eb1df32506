"""Soundness and exactness of IBP, CROWN and alpha-CROWN against independent oracles.

Oracles: dense sampling (every sampled output lies inside the bounds), exact enumeration of
activation patterns with one LP each (the certified bounds contain the true optimum), and
vertex enumeration on boxes where the network is affine (CROWN is exact there).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linprog
from strategies import assert_status_holds_at, networks, random_network

from verifier.bounds import (
    LOWER_SLOPES,
    METHODS,
    alpha_crown,
    compute_bounds,
    crown,
    ibp,
)
from verifier.bounds.activation import _relax
from verifier.errors import CertgateInputError
from verifier.network import Layer, Network, compose, min_feature_transform
from verifier.numerics import SOUNDNESS_ABS_MARGIN, SOUNDNESS_REL_MARGIN

SLACK = 1e-9  # sampled values are computed in float64 too: allow their own rounding


def _boxes(rng: np.random.Generator, count: int, dim: int, scale: float) -> tuple:
    centre = rng.normal(size=(count, dim))
    radius = rng.uniform(0.0, scale, size=(count, dim))
    return centre - radius, centre + radius


def _samples(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray, per_box: int) -> np.ndarray:
    """Uniform points plus all box corners (up to 4 dims), shape (B, P, d)."""
    unit = rng.uniform(size=(lo.shape[0], per_box, lo.shape[1]))
    uniform = lo[:, None, :] + (hi - lo)[:, None, :] * unit
    if lo.shape[1] <= 4:
        corners = np.array(list(itertools.product([0.0, 1.0], repeat=lo.shape[1])))
        vertex = lo[:, None, :] + (hi - lo)[:, None, :] * corners[None]
        uniform = np.concatenate([uniform, vertex], axis=1)
    return uniform


def _spec_values(network: Network, points: np.ndarray, spec: np.ndarray) -> np.ndarray:
    batch, count, dim = points.shape
    outputs = network.evaluate(points.reshape(-1, dim)).reshape(batch, count, -1)
    return outputs @ spec.T


@given(network=networks(), seed=st.integers(0, 2**31 - 1), scale=st.sampled_from([1e-3, 0.3, 2.0]))
def test_all_methods_contain_sampled_outputs(network: Network, seed: int, scale: float) -> None:
    rng = np.random.default_rng(seed)
    lo, hi = _boxes(rng, 6, network.input_size, scale)
    spec = rng.normal(size=(3, network.output_size))
    values = _spec_values(network, _samples(rng, lo, hi, 200), spec)
    for method, rule in itertools.product(METHODS, LOWER_SLOPES):
        result = compute_bounds(network, lo, hi, spec, method, alpha_steps=5, lower_slopes=rule)
        assert np.all(values.min(axis=1) >= result.lower - SLACK), (method, rule)
        assert np.all(values.max(axis=1) <= result.upper + SLACK), (method, rule)


@given(network=networks(), seed=st.integers(0, 2**31 - 1))
def test_crown_never_looser_than_ibp_and_alpha_never_looser_than_crown(
    network: Network, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    lo, hi = _boxes(rng, 8, network.input_size, 1.0)
    interval = ibp(network, lo, hi)
    linear = crown(network, lo, hi)
    optimised = alpha_crown(network, lo, hi, steps=5)
    assert np.all(linear.lower >= interval.lower)
    assert np.all(linear.upper <= interval.upper)
    assert np.all(optimised.lower >= linear.lower)
    assert np.all(optimised.upper <= linear.upper)
    left = compute_bounds(network, lo, hi, None, "crown", lower_slopes="left")
    assert np.all(left.lower >= interval.lower)
    assert np.all(left.upper <= interval.upper)


@given(network=networks(), seed=st.integers(0, 2**31 - 1))
def test_activation_status_agrees_with_sampled_pre_activations(network: Network, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lo, hi = _boxes(rng, 4, network.input_size, 0.5)
    points = _samples(rng, lo, hi, 100)
    for rule in LOWER_SLOPES:
        assert_status_holds_at(compute_bounds(network, lo, hi, None, "crown", lower_slopes=rule),
                               points)


def _exact_extremes(network: Network, lo: np.ndarray, hi: np.ndarray, row: np.ndarray) -> tuple:
    """min and max of ``row · net(x)`` over the box by one LP per activation pattern."""
    layers = network.lowered().layers
    hidden = layers[:-1]
    assert all(layer.activation == "relu" for layer in hidden)
    sizes = [layer.out_features for layer in hidden]
    best_min, best_max = np.inf, -np.inf
    dim = network.input_size
    for pattern in itertools.product([0, 1], repeat=sum(sizes)):
        # affine map of x under this pattern, plus the constraints that make it this pattern
        weight, bias = np.eye(dim), np.zeros(dim)
        a_ub, b_ub = [], []
        offset = 0
        for layer, size in zip(hidden, sizes, strict=True):
            z_weight, z_bias = layer.weight @ weight, layer.weight @ bias + layer.bias
            active = np.array(pattern[offset : offset + size], dtype=bool)
            offset += size
            # active: z >= 0  ->  -z <= 0 ; inactive: z <= 0
            sign = np.where(active, -1.0, 1.0)
            a_ub.append(sign[:, None] * z_weight)
            b_ub.append(-sign * z_bias)
            weight, bias = z_weight * active[:, None], z_bias * active
        out_weight = layers[-1].weight @ weight
        out_bias = layers[-1].weight @ bias + layers[-1].bias
        objective = row @ out_weight
        constant = row @ out_bias
        bounds = list(zip(lo, hi, strict=True))
        a = np.vstack(a_ub)
        b = np.concatenate(b_ub)
        low = linprog(objective, A_ub=a, b_ub=b, bounds=bounds, method="highs")
        if low.status == 2:  # infeasible pattern
            continue
        high = linprog(-objective, A_ub=a, b_ub=b, bounds=bounds, method="highs")
        best_min = min(best_min, low.fun + constant)
        best_max = max(best_max, -high.fun + constant)
    return best_min, best_max


@pytest.mark.parametrize("seed", range(6))
def test_bounds_contain_exact_extremes_from_pattern_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    network = random_network(rng, [2, 3, 3, 2])
    lo, hi = _boxes(rng, 1, 2, 1.5)
    row = rng.normal(size=2)
    exact_min, exact_max = _exact_extremes(network, lo[0], hi[0], row)
    for method, rule in itertools.product(METHODS, LOWER_SLOPES):
        result = compute_bounds(network, lo, hi, row[None, :], method, lower_slopes=rule)
        tolerance = 1e-7 * (1 + abs(exact_min) + abs(exact_max))  # LP solver tolerance
        assert result.lower[0, 0] <= exact_min + tolerance, (method, rule)
        assert result.upper[0, 0] >= exact_max - tolerance, (method, rule)


@given(network=networks(), seed=st.integers(0, 2**31 - 1))
def test_point_boxes_give_the_point_value(network: Network, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(5, network.input_size))
    value = network.evaluate(x)
    result = crown(network, x, x)
    margin = 1e-6 * (1.0 + np.abs(value))
    assert np.all(np.abs(result.lower - value) <= margin)
    assert np.all(np.abs(result.upper - value) <= margin)


def test_crown_is_exact_where_every_relu_is_stable() -> None:
    rng = np.random.default_rng(7)
    network = random_network(rng, [3, 6, 6, 2])
    centres = rng.normal(size=(200, 3))
    lo, hi = centres - 1e-3, centres + 1e-3
    result = crown(network, lo, hi)
    stable = result.unstable_count() == 0
    assert stable.sum() > 100
    corners = np.array(list(itertools.product([0.0, 1.0], repeat=3)))
    for b in np.flatnonzero(stable)[:50]:
        vertices = lo[b] + (hi[b] - lo[b]) * corners
        values = network.evaluate(vertices)
        scale = (SOUNDNESS_REL_MARGIN * 1e3 * (1 + np.abs(values).max())
                 + SOUNDNESS_ABS_MARGIN * 1e3)
        assert np.allclose(result.lower[b], values.min(axis=0), atol=scale, rtol=0)
        assert np.allclose(result.upper[b], values.max(axis=0), atol=scale, rtol=0)


@given(network=networks(), seed=st.integers(0, 2**31 - 1))
def test_infinite_coordinates_are_sound_and_never_nan(network: Network, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lo, hi = _boxes(rng, 6, network.input_size, 1.0)
    infinite = rng.uniform(size=lo.shape) < 0.4
    lo = np.where(infinite & (rng.uniform(size=lo.shape) < 0.5), -np.inf, lo)
    hi = np.where(infinite & (rng.uniform(size=lo.shape) < 0.5), np.inf, hi)
    finite_lo = np.where(np.isinf(lo), -1e4, lo)
    finite_hi = np.where(np.isinf(hi), 1e4, hi)
    points = _samples(rng, finite_lo, finite_hi, 200)
    values = _spec_values(network, points, np.eye(network.output_size))
    for method in METHODS:
        result = compute_bounds(network, lo, hi, None, method, alpha_steps=3)
        assert not np.isnan(result.lower).any() and not np.isnan(result.upper).any()
        assert np.all(values.min(axis=1) >= result.lower - SLACK)
        assert np.all(values.max(axis=1) <= result.upper + SLACK)


def test_unread_infinite_coordinates_do_not_spoil_the_bound() -> None:
    rng = np.random.default_rng(3)
    network = random_network(rng, [3, 5, 2])
    weight = network.layers[0].weight.copy()
    weight[:, 2] = 0.0
    network = Network([Layer(weight, network.layers[0].bias, "relu"), network.layers[1]])
    lo, hi = _boxes(rng, 4, 3, 0.5)
    finite = crown(network, lo, hi)
    lo[:, 2], hi[:, 2] = -np.inf, np.inf
    unbounded = crown(network, lo, hi)
    assert np.all(np.isfinite(unbounded.lower))
    np.testing.assert_array_equal(unbounded.lower, finite.lower)
    np.testing.assert_array_equal(unbounded.upper, finite.upper)


def test_mixed_batch_gives_the_same_bounds_as_separate_batches() -> None:
    rng = np.random.default_rng(11)
    network = random_network(rng, [2, 8, 8, 2])
    lo, hi = _boxes(rng, 4, 2, 0.5)
    lo[1, 0] = -np.inf
    together = crown(network, lo, hi)
    finite_rows = [0, 2, 3]
    alone = crown(network, lo[finite_rows], hi[finite_rows])
    np.testing.assert_allclose(together.lower[finite_rows], alone.lower, rtol=0, atol=1e-12)
    infinite_alone = crown(network, lo[[1]], hi[[1]])
    np.testing.assert_array_equal(together.lower[1], infinite_alone.lower[0])


def test_per_box_specification_matrices() -> None:
    rng = np.random.default_rng(5)
    network = random_network(rng, [3, 6, 3])
    lo, hi = _boxes(rng, 5, 3, 0.3)
    spec = rng.normal(size=(5, 2, 3))
    joint = crown(network, lo, hi, spec)
    for b in range(5):
        single = crown(network, lo[[b]], hi[[b]], spec[b])
        np.testing.assert_allclose(joint.lower[b], single.lower[0], rtol=0, atol=1e-12)


def test_bad_boxes_are_rejected_with_clear_errors() -> None:
    network = random_network(np.random.default_rng(0), [2, 3, 2])
    with pytest.raises(CertgateInputError, match="empty box"):
        crown(network, np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))
    with pytest.raises(CertgateInputError, match="3 coordinates"):
        crown(network, np.zeros((1, 3)), np.ones((1, 3)))
    with pytest.raises(CertgateInputError, match="NaN"):
        crown(network, np.array([[np.nan, 0.0]]), np.ones((1, 2)))
    with pytest.raises(CertgateInputError, match="specification"):
        crown(network, np.zeros((1, 2)), np.ones((1, 2)), np.ones((1, 5)))
    with pytest.raises(CertgateInputError, match="unknown bound method"):
        compute_bounds(network, np.zeros((1, 2)), np.ones((1, 2)), None, "deeppoly")  # type: ignore[arg-type]
    with pytest.raises(CertgateInputError, match="unknown lower-slope rule"):
        compute_bounds(network, np.zeros((1, 2)), np.ones((1, 2)), None, "crown",
                       lower_slopes="parallel")  # type: ignore[arg-type]


def test_the_left_rule_gives_unstable_neurons_the_left_slope() -> None:
    """``_relax``'s lower slopes: ``adaptive`` takes 1 where ``u >= −l`` and the left slope
    otherwise; ``left`` takes the left slope on every unstable neuron; stable neurons keep
    their exact slope (1 active, the left slope inactive) under both; the upper line is the
    same chord."""
    lo = torch.tensor([[-1.0, -3.0, 0.5, -2.0]], dtype=torch.float64)
    hi = torch.tensor([[2.0, 1.0, 1.0, -1.0]], dtype=torch.float64)
    for left in (0.0, 0.1):
        slope = torch.full((4,), left, dtype=torch.float64)
        adaptive = _relax(lo, hi, slope, "adaptive")
        flat = _relax(lo, hi, slope, "left")
        assert adaptive.lower_slope.tolist() == [[1.0, left, 1.0, left]]
        assert flat.lower_slope.tolist() == [[left, left, 1.0, left]]
        assert torch.equal(adaptive.upper_slope, flat.upper_slope)
        assert torch.equal(adaptive.upper_intercept, flat.upper_intercept)


def test_outputs_behind_dead_relus_are_exact_zero() -> None:
    """Both outputs clamped to 0 by an output ReLU: y1 − y0 is exactly 0, with no margin, so
    a strict comparison y1 > y0 is decidable (false) there."""
    network = Network([
        Layer(np.array([[1.0], [2.0]]), np.array([-5.0, -6.0]), "relu"),
        Layer(np.array([[1.0, 0.5], [0.3, 1.0]]), np.array([0.0, 0.0]), "relu"),
    ])
    lower, upper = np.array([[-1.0]]), np.array([[1.0]])
    for method in METHODS:
        result = compute_bounds(network, lower, upper, np.array([[-1.0, 1.0]]), method)
        assert result.lower[0, 0] == 0.0 and result.upper[0, 0] == 0.0, method


def test_columns_passed_through_but_never_used_are_not_read() -> None:
    """A pre-processing layer passes column 2 through; nothing after it uses it. An infinite
    column 2 must not push the box out of CROWN."""
    rng = np.random.default_rng(9)
    classifier = random_network(rng, [3, 5, 2])
    weight = classifier.layers[0].weight.copy()
    weight[:, 2] = 0.0
    classifier = Network([Layer(weight, classifier.layers[0].bias, "relu"), classifier.layers[1]])
    network = compose(min_feature_transform(["a", "b", "c"], "b", "a"), classifier)
    assert network.read_inputs().tolist() == [True, True, False]
    lo, hi = _boxes(rng, 3, 3, 0.5)
    finite = crown(network, lo, hi)
    lo[:, 2], hi[:, 2] = -np.inf, np.inf
    unbounded = crown(network, lo, hi)
    np.testing.assert_array_equal(unbounded.lower, finite.lower)
    assert unbounded.sensitivity is not None and np.isfinite(unbounded.lower).all()
