"""Exact WMI keeps its deadline in every phase of the solver (:mod:`verifier.wmi.engine`):
the roots the deadline leaves unprepared are bounded together by the query's mass bound
(:func:`verifier.wmi.roots.roots_mass_bound`), in work that does not grow with their number,
and the interval returned at any point of the run is a sound unknown verdict.

Oracles: the roots' exact masses in ``fractions.Fraction`` (histogram pieces carry constant
weights, so a root's mass is its box volume times that constant), and dense Monte Carlo
(400 000 samples, ± 4 standard errors) for intervals cut at a deadline; the deadline is
placed deterministically by an injected clock that advances one second per reading."""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction

import numpy as np
import pytest

from tests.test_wmi_root_limit import histograms, network
from verifier.network import Layer, Network
from verifier.population import Factor, Feature, Mixture, PopulationModel, Product, Uniform
from verifier.population.distributions import TruncatedNormal
from verifier.wmi.engine import Query, solve
from verifier.wmi.properties.local_robustness import local_robustness_queries
from verifier.wmi.properties.monotonicity import monotonicity_queries
from verifier.wmi.roots import roots_mass_bound

SAMPLES = 400_000


class TickClock:
    """A clock that advances one second each time it is read: a deadline ``k`` seconds
    away passes after ``k`` readings, whatever the machine's load."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def inside(result: object, hits: np.ndarray) -> None:
    estimate = float(hits.mean())
    error = math.sqrt(max(estimate * (1 - estimate), 1 / hits.size) / hits.size)
    assert result.probability_lower - 4 * error <= estimate  # type: ignore[attr-defined]
    assert estimate <= result.probability_upper + 4 * error  # type: ignore[attr-defined]


def monotonicity_hits(net: Network, prior: PopulationModel, seed: int,
                      feature: int = 0) -> np.ndarray:
    """Monte Carlo of monotonicity in column ``feature`` with population pairs (``x′_i`` an
    independent draw of the column's marginal): the pairs with ``x_i < x′_i`` that keep
    class 1."""
    rng = np.random.default_rng(seed)
    x = prior.sample(SAMPLES, rng)
    other = prior.sample(SAMPLES, rng)[:, feature]
    ordered = x[:, feature] < other
    moved = x[ordered].copy()
    moved[:, feature] = other[ordered]
    return ~((net.classify(x[ordered]) == 1) & (net.classify(moved) != 1))


def exact_root_masses(query: Query) -> Fraction:
    """``Σ_roots`` volume × weight in Fractions, for roots with constant weights."""
    total = Fraction(0)
    for root in query.roots:
        (value,) = root.weight.values()
        volume = math.prod((Fraction(hi) - Fraction(lo) for lo, hi in
                            zip(root.lower, root.upper, strict=True)), start=Fraction(1))
        total += volume * Fraction(value)
    return total


@pytest.mark.parametrize("epsilon", [0.7, 3.3, 100.0])
def test_the_mass_bound_holds_the_roots_exact_mass(epsilon: float) -> None:
    """On histogram pieces (constant weights) cut by an ε-box the bound is at least the
    roots' exact mass and within 1e-12 of it (box_bound is exact on constants but for its
    rounding allowance)."""
    queries, _ = local_robustness_queries(network(), histograms(7), [5.1, 8.0, 12.9],
                                          epsilon, expected_class=1)
    for query in queries:
        exact = exact_root_masses(query)
        assert exact <= Fraction(query.mass_bound) <= exact * (1 + Fraction(1, 10**12))


def test_the_mass_bound_holds_monotonicity_roots() -> None:
    """Monotonicity's roots carry the order row ``x_0 <= x′_0``: their boxes' exact mass
    (above the polytopes' own) stays below the bound."""
    (query,) = monotonicity_queries(network(), histograms(5), 0, use_prior=True)
    assert query.roots[0].A.shape[0] == 1
    assert exact_root_masses(query) <= Fraction(query.mass_bound)


def test_factors_sharing_a_coordinate_give_no_bound() -> None:
    from verifier.wmi.encode import WeightFactor, WeightPiece
    from verifier.wmi.polynomial import constant

    piece = WeightPiece(np.zeros(1), np.ones(1), constant(1.0, 1))
    assert roots_mass_bound([WeightFactor([0], [piece]), WeightFactor([0], [piece])],
                            np.zeros(1), np.ones(1)) == math.inf


def test_roots_left_at_the_deadline_cost_no_work_per_root() -> None:
    """20 736 roots (three 12-bin histograms and the copy's 12 pieces) and no time left:
    bounding each unprepared root on its own took 1.7 CPU s; bounded together it takes no
    measurable time. The verdict is unknown ([0, 1], timed out), never exact."""
    queries = monotonicity_queries(network(), histograms(12), 0, use_prior=True)
    assert sum(len(query.roots) for query in queries) == 12 ** 4
    started = time.process_time()
    result = solve(queries, timeout_s=0.0)
    assert time.process_time() - started < 0.25
    assert result.timed_out and not result.exact
    assert (result.probability_lower, result.probability_upper) == (0.0, 1.0)


def test_a_deadline_anywhere_in_the_run_keeps_sound_bounds() -> None:
    """81 roots (three 3-bin histograms and the copy's 3 pieces; a complete run reads the
    clock 1 058 times). The injected clock puts the deadline while roots are prepared (20, 60
    readings) or while their cells are enumerated (300, 800): every interval reached holds
    Monte Carlo, is marked timed out, and contains the intervals of the longer runs."""
    net, prior = network(), histograms(3)
    queries = monotonicity_queries(net, prior, 0, use_prior=True)
    hits = monotonicity_hits(net, prior, 3)
    results = [solve(queries, timeout_s=float(budget), clock=TickClock())
               for budget in (20, 60, 300, 800)]
    complete = solve(queries)
    assert all(result.timed_out and not result.exact for result in results)
    assert not complete.timed_out
    assert complete.probability_upper - complete.probability_lower < 1e-9
    for result in [*results, complete]:
        inside(result, hits)
    for earlier, later in itertools.pairwise([*results, complete]):
        assert earlier.probability_lower <= later.probability_lower
        assert later.probability_upper <= earlier.probability_upper


def mixed_prior() -> PopulationModel:
    """``a`` an 8-bin histogram on [0, 8], ``b`` a truncated normal (a non-polynomial
    density: its roots are refined through envelopes)."""
    edges = np.linspace(0.0, 8.0, 9)
    masses = np.arange(1, 9, dtype=np.float64)
    masses /= masses.sum()
    return PopulationModel(
        features=[Feature(name="a", kind="continuous", domain=(0.0, 8.0)),
                  Feature(name="b", kind="continuous", domain=(-3.0, 3.0))],
        distribution=Product(factors=[
            Factor(columns=["a"], distribution=Mixture(
                weights=masses.tolist(),
                components=[Uniform(lower=float(lo), upper=float(hi))
                            for lo, hi in itertools.pairwise(edges)])),
            Factor(columns=["b"], distribution=TruncatedNormal(mean=0.5, std=1.0,
                                                               lower=-3.0, upper=3.0))]))


MIXED_NETWORK = Network([Layer(np.array([[1.0, 1.0], [1.0, -1.0]]), np.array([-4.0, -1.0]),
                               "relu"),
                         Layer(np.array([[1.0, -1.0]]), np.array([-0.5]))])


@pytest.mark.parametrize("budget", [3, 6, 30])
def test_envelope_roots_left_at_the_deadline_keep_sound_bounds(budget: int) -> None:
    """Local robustness under a histogram × truncated normal prior (8 envelope roots); the
    deadline after 3, 6 or 30 clock readings leaves roots unprepared or cells unrefined:
    the interval holds Monte Carlo and is marked timed out."""
    net, prior = MIXED_NETWORK, mixed_prior()
    centre, epsilon = np.array([4.0, 0.0]), 3.5
    queries, label = local_robustness_queries(net, prior, centre, epsilon)
    assert all(query.envelopes for query in queries)
    result = solve(queries, timeout_s=float(budget), clock=TickClock())
    assert result.timed_out and not result.exact
    x = prior.sample(4 * SAMPLES, np.random.default_rng(4))
    x = x[np.all(np.abs(x - centre) <= epsilon, axis=1)]
    inside(result, net.classify(x) == label)


def test_refined_roots_left_at_the_deadline_keep_sound_bounds() -> None:
    """Monotonicity in the truncated-normal column of a network whose class 1 falls as it
    grows: every root carries the order row, so its total goes to the envelope refiner
    (whose lower ends the unprepared roots' bound subtracts). Deadlines while the 8 roots
    are prepared (4 readings), enumerated and refined (120, 400): each interval holds Monte
    Carlo (0.839) and contains the next."""
    prior = mixed_prior()
    net = Network([Layer(np.array([[1.0, 1.0], [1.0, -1.0]]), np.array([-4.0, -1.0]), "relu"),
                   Layer(np.array([[-1.0, 1.0]]), np.array([0.5]))])
    (query,) = monotonicity_queries(net, prior, 1, use_prior=True)
    assert query.envelopes and query.roots[0].A.shape[0] == 1
    results = [solve([query], timeout_s=float(budget), clock=TickClock())
               for budget in (4, 120, 400)]
    hits = monotonicity_hits(net, prior, 5, feature=1)
    for result in results:
        assert result.timed_out and not result.exact
        inside(result, hits)
    for earlier, later in itertools.pairwise(results):
        assert earlier.probability_lower <= later.probability_lower
        assert later.probability_upper <= earlier.probability_upper
    assert results[-1].probability_upper - results[-1].probability_lower < 0.2


def test_a_root_whose_regions_the_prefix_prunes_still_stops() -> None:
    """One root (uniform columns) and a network that never predicts class 1, cut into many
    linear regions by 8 ReLUs: monotonicity's prefix cell (the first copy predicts class 1)
    prunes every region, so no region ever reaches the solver, which read the clock only
    between regions and finished the root whatever the deadline. The clock is now read
    before each region: 5 readings end the run, timed out, with an interval that holds the
    true probability 1 (no pair can lose class 1)."""
    rng = np.random.default_rng(7)
    first = rng.normal(size=(8, 2))
    net = Network([Layer(first, -first @ np.array([0.5, 0.5]), "relu"),
                   Layer(np.full((1, 8), 0.01), np.array([-100.0]))])
    prior = PopulationModel(
        features=[Feature(name=m, kind="continuous", domain=(0.0, 1.0)) for m in "uv"],
        distribution=Product(factors=[Factor(columns=[m], distribution=Uniform(lower=0.0,
                                                                               upper=1.0))
                                      for m in "uv"]))
    queries = monotonicity_queries(net, prior, 0, use_prior=True)
    assert sum(len(query.roots) for query in queries) == 1
    complete = solve(queries)
    assert complete.regions == 0 and complete.probability_lower == 1.0
    result = solve(queries, timeout_s=5.0, clock=TickClock())
    assert result.timed_out and not result.exact
    assert result.probability_lower <= 1.0 == result.probability_upper
