"""The corner credit of PV's linear pieces: the box it credits lies inside the open box and
holds the piece's excess above its threshold at every point, checked in exact rational
arithmetic; a closed form on one uniform column; PV with it keeps dense Monte Carlo inside
its intervals."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import random_network
from test_pv_executors import instance

from verifier.audits import demographic_parity_audit
from verifier.audits.probability import spec_network
from verifier.network import Network
from verifier.population import BayesianNetwork, BayesNode, CPTRow, Discrete, Normal
from verifier.population.model import PopulationModel
from verifier.population.schema import Feature
from verifier.pv import PVSettings, credit, population_domain
from verifier.pv.credit import corner_boxes
from verifier.pv.engine import ProbabilityBranchAndBound
from verifier.spec import Names, demographic_parity


def _exact_minimum_gain(c: float, lo: float, hi: float, new_lo: float, new_hi: float
                        ) -> Fraction:
    """``min_{[new_lo, new_hi]} c·x − min_{[lo, hi]} c·x`` in rational arithmetic."""
    c_, a, b = Fraction(c), Fraction(lo), Fraction(hi)
    a2, b2 = Fraction(new_lo), Fraction(new_hi)
    return min(c_ * a2, c_ * b2) - min(c_ * a, c_ * b)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 8), st.floats(1e-6, 2.0))
def test_a_corner_box_holds_the_excess_above_its_threshold_in_exact_arithmetic(
        seed: int, columns: int, share: float) -> None:
    rng = np.random.default_rng(seed)
    rows = 16
    scale = 10.0 ** rng.uniform(-3, 4, (rows, columns + 3))
    lo = rng.normal(0, 1, (rows, columns + 3)) * scale
    hi = lo + rng.exponential(1.0, (rows, columns + 3)) * scale
    hi[:, :2] = np.where(rng.random((rows, 2)) < 0.3, lo[:, :2], hi[:, :2])  # flat sides
    coefficients = rng.normal(0, 1, (rows, columns + 3)) * np.where(
        rng.random((rows, columns + 3)) < 0.2, 0.0, 10.0 ** rng.uniform(-4, 3, (rows, columns + 3)))
    grouped = np.zeros(columns + 3, dtype=bool)
    grouped[-3:] = True  # a one-hot group of three, every category allowed
    lo[:, -3:], hi[:, -3:] = 0.0, 1.0
    reach = (np.abs(coefficients) * (hi - lo))[:, ~grouped].sum(axis=1)
    threshold = reach * share * rng.uniform(0.0, 1.2, rows)
    new_lo, new_hi, found = corner_boxes(lo, hi, coefficients, threshold, grouped)
    for row in np.flatnonzero(found):
        assert (new_lo[row] >= lo[row]).all() and (new_hi[row] <= hi[row]).all()
        assert (new_lo[row] <= new_hi[row]).all()
        assert (new_lo[row, grouped] == 0.0).all() and (new_hi[row, grouped] == 1.0).all()
        gain = sum((_exact_minimum_gain(float(coefficients[row, i]), float(lo[row, i]),
                                        float(hi[row, i]), float(new_lo[row, i]),
                                        float(new_hi[row, i]))
                    for i in np.flatnonzero(~grouped)), Fraction(0))
        assert gain > Fraction(float(threshold[row]))
    # a threshold no corner can pass, or none at all, finds nothing
    beyond = corner_boxes(lo, hi, coefficients, reach * 1.0001 + 1e-300, grouped)[2]
    assert not beyond.any()
    assert not corner_boxes(lo, hi, coefficients, np.full(rows, np.inf), grouped)[2].any()


def test_one_uniform_column_gives_the_closed_form_corner() -> None:
    """``x ∈ [0, 1]``, ``c = ±2``, ``τ = 0.6``: ``2x > 0.6`` on ``(0.3, 1]`` (``c > 0``),
    ``−2x − (−2) > 0.6`` on ``[0, 0.7)`` (``c < 0``); the corner is that interval less a
    relative 1e-6 of the threshold."""
    lo, hi = np.zeros((2, 1)), np.ones((2, 1))
    coefficients = np.array([[2.0], [-2.0]])
    new_lo, new_hi, found = corner_boxes(lo, hi, coefficients, np.full(2, 0.6),
                                         np.zeros(1, dtype=bool))
    assert found.all()
    assert 0.3 < new_lo[0, 0] < 0.3 + 1e-6 and new_hi[0, 0] == 1.0
    assert new_lo[1, 0] == 0.0 and 0.7 - 1e-6 < new_hi[1, 0] < 0.7


def test_water_filling_keeps_a_narrow_column_whole() -> None:
    """Reaches 10 and 0.1 against τ 5: the wide column alone is cut, to half its side."""
    lo, hi = np.zeros((1, 2)), np.array([[10.0, 0.1]])
    new_lo, new_hi, found = corner_boxes(lo, hi, np.ones((1, 2)), np.array([5.0]),
                                         np.zeros(2, dtype=bool))
    assert found[0]
    assert new_hi[0, 1] - new_lo[0, 1] == 0.1
    assert 4.99 < new_hi[0, 0] - new_lo[0, 0] < 5.0


def _population() -> PopulationModel:
    """``s`` binary; ``x`` normal with its mean set by ``s``; ``y`` and ``z`` normal with
    means set by the sign of ``x`` (three correlated continuous columns)."""
    def by_sign(means: tuple[float, float]) -> list[CPTRow]:
        return [CPTRow(condition={"x": (None, 0.0)}, distribution=Normal(mean=means[0], std=1.0)),
                CPTRow(condition={"x": (0.0, None)}, distribution=Normal(mean=means[1], std=1.0))]
    nodes = [
        BayesNode(name="s", cpt=[CPTRow(distribution=Discrete(values=[0.0, 1.0],
                                                              probabilities=[0.6, 0.4]))]),
        BayesNode(name="x", parents=["s"], cpt=[
            CPTRow(condition={"s": (0.0, 0.0)}, distribution=Normal(mean=0.0, std=1.0)),
            CPTRow(condition={"s": (1.0, 1.0)}, distribution=Normal(mean=-0.7, std=1.0))]),
        BayesNode(name="y", parents=["x"], cpt=by_sign((-0.5, 0.6))),
        BayesNode(name="z", parents=["x"], cpt=by_sign((0.4, -0.3))),
    ]
    features = [Feature(name="s", kind="binary"),
                *(Feature(name=n, kind="continuous") for n in "xyz")]
    return PopulationModel(features=features, distribution=BayesianNetwork(nodes=nodes))


def _draws(count: int, seed: int) -> np.ndarray:
    """``count`` draws of :func:`_population`, written apart from its code."""
    rng = np.random.default_rng(seed)
    s = (rng.random(count) < 0.4).astype(np.float64)
    x = rng.normal(np.where(s == 1, -0.7, 0.0), 1.0)
    y = rng.normal(np.where(x <= 0, -0.5, 0.6), 1.0)
    z = rng.normal(np.where(x <= 0, 0.4, -0.3), 1.0)
    return np.stack([s, x, y, z], axis=1)


def test_pv_with_the_corner_credit_keeps_dense_monte_carlo_inside(
        monkeypatch: pytest.MonkeyPatch) -> None:
    found = []

    def counted(*args: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        result = corner_boxes(*args)
        found.append(int(result[2].sum()))
        return result

    monkeypatch.setattr(credit, "corner_boxes", counted)
    population = _population()
    names = ["s", "x", "y", "z"]
    network = Network(random_network(np.random.default_rng(3), [4, 12, 12, 2]).layers,
                      names, ["no", "yes"])
    spec = demographic_parity(Names.of(names, ["no", "yes"]), protected="s", privileged=0,
                              favorable_class=1, gamma=0.8)
    masses, domain = population_domain(population)
    engine = ProbabilityBranchAndBound(spec_network(network, spec), spec, masses, domain,
                                       PVSettings(timeout_s=None, max_open_boxes=4000),
                                       population.prob_excess_lower)
    result = engine.run()
    draws = torch.tensor(_draws(1_000_000, seed=11))
    logits = draws
    with torch.no_grad():
        for layer in network.layers:
            logits = logits @ torch.tensor(layer.weight).T + torch.tensor(layer.bias)
            if layer.activation == "relu":
                logits = torch.relu(logits)
    logits, draws = logits.numpy(), draws.numpy()
    favourable = logits[:, 1] > logits[:, 0]
    group = draws[:, 0] == 1
    for name, rows in (("p_unprivileged", group), ("p_privileged", ~group)):
        rate = favourable[rows].mean()
        error = 5.0 * np.sqrt(max(rate * (1 - rate), 1e-6) / rows.sum())
        low, high = result.probabilities[name]
        assert low <= rate + error and rate - error <= high, (name, low, rate, high)
    assert result.boxes > 100
    assert sum(found) > 100  # the corners were credited on this run


def test_pv_with_the_corner_credit_holds_the_exact_rates_of_a_discrete_population() -> None:
    """The executors' instance (hours 0–299 and age 18–89 integers, a 3-category job): every
    one of its 129,600 points enumerated with its mass (the population's, a float within
    1e-9 of the exact one) and its class (every margin above 8e-6, far beyond float error);
    PV's intervals, a few 1e-5 wide, hold the exact rates."""
    network, population = instance()
    masses, _ = population_domain(population)
    sex, job, hours, age = np.meshgrid([0.0, 1.0], np.arange(3), np.arange(300.0),
                                       np.arange(18.0, 90.0), indexing="ij")
    points = np.zeros((sex.size, 6))
    points[:, 0], points[:, 4], points[:, 5] = sex.ravel(), hours.ravel(), age.ravel()
    points[np.arange(sex.size), 1 + job.ravel()] = 1.0
    mass = masses(points, points)[0]
    margin = np.diff(network.evaluate(points), axis=1)[:, 0]
    assert np.abs(margin).min() > 1e-6
    exact = {}
    for name, rows in (("p_unprivileged", points[:, 0] == 0), ("p_privileged", points[:, 0] == 1)):
        exact[name] = (mass * rows * (margin > 0)).sum() / (mass * rows).sum()
    gamma = exact["p_unprivileged"] - exact["p_privileged"]
    certificate = demographic_parity_audit(
        network, population, protected="sex", privileged=1, favorable_class=1, gamma=gamma,
        form="difference", settings=PVSettings(timeout_s=None, max_boxes=3000))
    for name, rate in exact.items():
        low, high = certificate.bounds[name]
        assert low - 1e-9 <= rate <= high + 1e-9, (name, low, rate, high)
        assert high - low < 1e-3  # the corners credit nearly all of each box
