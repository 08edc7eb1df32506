"""Slope bounds along one input (:mod:`verifier.jacobian_bounds`) and the monotone-box proof
built on them (:mod:`verifier.wmi.monotone_slopes`).

Oracles: exact evaluation in ``fractions.Fraction`` of random dyadic networks (weights in
quarters, so the Fractions are the networks' real values): for pairs inside a box that differ
in one input, the exact output difference lies within the slope bounds times the step; the
bounds contain every finite-difference slope on random small float networks (hypothesis);
a box the proof accepts holds no violating pair among many sampled (and, on a grid, every)
pairs, under the class rule with ties to the lowest index and a single logit's ``z > 0``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import networks
from verifier.errors import CertgateInputError
from verifier.jacobian_bounds import input_slope_bounds
from verifier.network import Layer, Network
from verifier.wmi.monotone_slopes import MonotoneBoxes, margin_rows


def dyadic(seed: int, sizes: list[int], activation: str = "relu") -> Network:
    rng = np.random.default_rng(seed)
    layers = []
    for index in range(len(sizes) - 1):
        last = index == len(sizes) - 2
        layers.append(Layer(rng.integers(-8, 9, size=(sizes[index + 1], sizes[index])) / 4,
                            rng.integers(-8, 9, size=sizes[index + 1]) / 4,
                            "none" if last else activation, negative_slope=0.25))
    return Network(layers)


def exact_outputs(net: Network, point: list[Fraction]) -> list[Fraction]:
    values = point
    for layer in net.layers:
        values = [sum((Fraction(w) * v for w, v in zip(row, values, strict=True)),
                      Fraction(b)) for row, b in zip(layer.weight, layer.bias, strict=True)]
        if layer.activation == "relu":
            values = [max(v, Fraction(0)) for v in values]
        elif layer.activation == "leaky_relu":
            values = [v if v >= 0 else Fraction(layer.negative_slope) * v  # type: ignore[arg-type]
                      for v in values]
    return values


def exact_class(net: Network, point: list[Fraction]) -> int:
    """Argmax with ties to the lowest index; one output: class 1 iff ``z > 0``."""
    values = exact_outputs(net, point)
    if len(values) == 1:
        return int(values[0] > 0)
    return max(range(len(values)), key=lambda k: (values[k], -k))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("activation", ["relu", "leaky_relu"])
def test_exact_differences_lie_within_the_slope_bounds(seed: int, activation: str) -> None:
    net = dyadic(seed, [3, 5, 4, 3], activation)
    rng = np.random.default_rng(seed)
    centre = rng.integers(-8, 9, size=3) / 4
    radius = rng.integers(1, 5, size=3) / 4
    lo, hi = centre - radius, centre + radius
    feature = seed % 3
    spec = margin_rows(3, seed % 3)
    lower, upper = input_slope_bounds(net, lo[None], hi[None], feature, spec)
    assert np.all(lower <= upper)
    for _ in range(40):
        x = [Fraction(int(v)) / 16 for v in rng.integers(lo * 16, hi * 16 + 1)]
        a, b = sorted(Fraction(int(v)) / 16 for v in
                      rng.integers(lo[feature] * 16, hi[feature] * 16 + 1, size=2))
        if a == b:
            continue
        first, second = list(x), list(x)
        first[feature], second[feature] = a, b
        difference = [sum(Fraction(c) * (p - q) for c, p, q in zip(
            row, exact_outputs(net, second), exact_outputs(net, first), strict=True))
            for row in spec]
        for r, d in enumerate(difference):
            assert Fraction(lower[0, r]) * (b - a) <= d <= Fraction(upper[0, r]) * (b - a)


@settings(max_examples=60, deadline=None)
@given(net=networks(), seed=st.integers(0, 2**32 - 1), width=st.floats(0.01, 3.0))
def test_slope_bounds_contain_finite_difference_slopes(net: Network, seed: int,
                                                       width: float) -> None:
    rng = np.random.default_rng(seed)
    n = net.input_size
    lo = rng.normal(size=n)
    hi = lo + width * rng.uniform(0.1, 1.0, size=n)
    feature = int(rng.integers(n))
    spec = np.eye(net.output_size)
    view = net.lowered()
    lower, upper = input_slope_bounds(view, lo[None], hi[None], feature, spec)
    x = rng.uniform(lo, hi, size=(200, n))
    step = rng.uniform(0.0, 1.0, size=200) * (hi[feature] - x[:, feature])
    moved = x.copy()
    moved[:, feature] += step
    keep = step > 1e-6
    slopes = (view.evaluate(moved) - view.evaluate(x))[keep] / step[keep, None]
    slack = 1e-6 * (1.0 + np.abs(view.evaluate(x)[keep]).max(initial=0.0)) / step[keep, None]
    assert np.all(slopes >= lower - slack) and np.all(slopes <= upper + slack)


def test_a_feature_the_outputs_do_not_read_has_slope_exactly_zero() -> None:
    net = Network([Layer(np.array([[1.0, 0.0], [2.0, 0.0]]), np.zeros(2), "relu"),
                   Layer(np.array([[1.0, -1.0]]), np.zeros(1))])
    lower, upper = input_slope_bounds(net, np.array([[-1.0, -5.0]]), np.array([[1.0, 5.0]]),
                                      1, np.eye(1))
    assert lower[0, 0] == 0.0 and upper[0, 0] == 0.0


def test_one_hot_features_and_bad_columns_are_refused() -> None:
    net = dyadic(0, [3, 4, 2])
    with pytest.raises(CertgateInputError, match="one-hot"):
        input_slope_bounds(net, np.zeros((1, 3)), np.ones((1, 3)), 1, np.eye(2),
                           groups=[[1, 2]])
    with pytest.raises(CertgateInputError, match="outside"):
        input_slope_bounds(net, np.zeros((1, 3)), np.ones((1, 3)), 3, np.eye(2))


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("outputs", [1, 2, 3])
def test_an_accepted_box_holds_no_violating_pair(seed: int, outputs: int) -> None:
    """Exact classes (ties to the lowest index, a single logit: class 1 iff z > 0) on every
    pair of a grid in each box the proof accepts, increasing and decreasing."""
    net = dyadic(seed, [2, 3, outputs])
    view = net.as_classifier().lowered()
    rng = np.random.default_rng(seed)
    favourable = int(rng.integers(view.output_size))
    rows = margin_rows(view.output_size, favourable)
    grid = [Fraction(k, 4) for k in range(-8, 9)]
    for decreasing in (False, True):
        proof = MonotoneBoxes(view, 0, rows, decreasing=decreasing)
        for _ in range(6):
            a, b, c = sorted(rng.choice(len(grid), size=3, replace=False))
            y = int(rng.integers(len(grid) - 2))
            # z = (x0, x1, t): x0 in [grid[a], grid[b]], t in [grid[b], grid[c]], x1 in 2 steps
            lo = np.array([float(grid[a]), float(grid[y]), float(grid[b])])
            hi = np.array([float(grid[b]), float(grid[y + 2]), float(grid[c])])
            if not proof(lo[None], hi[None])[0]:
                continue
            for x0 in grid[a:b + 1]:
                for t in grid[b:c + 1]:
                    for x1 in grid[y:y + 3]:
                        first, second = (x0, t) if not decreasing else (t, x0)
                        if first == second:
                            continue
                        before = exact_class(net, [first, x1])
                        after = exact_class(net, [second, x1])
                        assert not (before == favourable and after != favourable), (
                            seed, decreasing, first, second, x1)


def test_a_monotone_network_is_proven_on_a_whole_box() -> None:
    """z = relu(x0) + x1 is non-decreasing in x0 everywhere: the root box is accepted for
    class 1 increasing, and refused decreasing (a pair crossing 0 from above turns it 0)."""
    net = Network([Layer(np.eye(2), np.zeros(2), "relu"),
                   Layer(np.array([[1.0, 1.0]]), np.array([-0.5]))])
    view = net.as_classifier().lowered()
    rows = margin_rows(2, 1)
    lo, hi = np.array([[-2.0, 0.0, -2.0]]), np.array([[2.0, 1.0, 2.0]])
    assert MonotoneBoxes(view, 0, rows, decreasing=False)(lo, hi)[0]
    assert not MonotoneBoxes(view, 0, rows, decreasing=True)(lo, hi)[0]


def test_the_proof_is_asked_only_every_few_batches_while_it_rarely_succeeds() -> None:
    """z = |x0| − 0.5 (two ReLUs) changes slope sign on every box straddling 0: nothing is
    proven there, so after RECENT_BOXES boxes only every PROBE_EVERY-th batch is tried (the
    others answer "nothing proven", which claims nothing); a batch that proves brings it back."""
    from verifier.wmi import monotone_slopes

    net = Network([Layer(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.zeros(2), "relu"),
                   Layer(np.array([[1.0, 1.0]]), np.array([-0.5]))])
    asked: list[int] = []

    class Counted(MonotoneBoxes):
        def _proven(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
            asked.append(lo.shape[0])
            return super()._proven(lo, hi)

    proof = Counted(net.as_classifier().lowered(), 0, margin_rows(2, 1), decreasing=False)
    straddling = np.tile([[-1.0, 0.0, -1.0]], (monotone_slopes.RECENT_BOXES, 1)), \
        np.tile([[1.0, 1.0, 1.0]], (monotone_slopes.RECENT_BOXES, 1))
    assert not proof(*straddling).any()
    for _ in range(2 * monotone_slopes.PROBE_EVERY - 1):
        assert not proof(*straddling).any()
    assert len(asked) == 3  # the first call, then calls 8 and 16
    positive = np.tile([[0.5, 0.0, 0.5]], (4096, 1)), np.tile([[1.0, 1.0, 1.0]], (4096, 1))
    for _ in range(monotone_slopes.PROBE_EVERY):
        proof(*positive)
    assert proof(*positive).all() and len(asked) == 5  # call 24 proves; call 25 is asked
