"""WMI properties by box branching (:mod:`verifier.wmi.branching`), for priors whose discrete
value combinations exact WMI cannot enumerate.

Oracles: exact enumeration of every point (and every pair) in ``fractions.Fraction`` on small
integer-histogram populations, networks with dyadic weights evaluated exactly with the class
rule (argmax, ties to the lowest index); and on an Adult-like population (a 50 000-value
histogram with an atom at 0, which exact WMI refuses to expand), dense Monte Carlo the
certified interval must contain.
"""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction

import numpy as np
import pytest

from verifier.network import Layer, Network
from verifier.population import (
    Categorical,
    Discrete,
    Factor,
    Feature,
    IntegerHistogram,
    PopulationModel,
    Product,
)
from verifier.wmi import branched, local_robustness, monotonicity, noise_robustness
from verifier.wmi.encode import WMIInputError
from verifier.wmi.measures import ColumnMarginal, strict_order_probability

# ----------------------------------------------------------------------------- small, exact

A_BINS, A_PROBS = [(0, 2), (3, 3), (4, 7)], [0.25, 0.5, 0.25]
B_BINS, B_PROBS = [(0, 5), (6, 9)], [0.5, 0.5]
C_PROBS = [0.25, 0.25, 0.5]


def small_population() -> PopulationModel:
    """a, b integer histograms; c a one-hot categorical of three categories."""
    return PopulationModel(
        features=[Feature(name="a", kind="integer", domain=(0, 7)),
                  Feature(name="b", kind="integer", domain=(0, 9)),
                  Feature(name="c", kind="categorical", columns=["c0", "c1", "c2"],
                          categories=["0", "1", "2"])],
        distribution=Product(factors=[
            Factor(columns=["a"], distribution=IntegerHistogram(bins=A_BINS,
                                                                probabilities=A_PROBS)),
            Factor(columns=["b"], distribution=IntegerHistogram(bins=B_BINS,
                                                                probabilities=B_PROBS)),
            Factor(columns=["c0", "c1", "c2"], distribution=Categorical(
                probabilities=C_PROBS))]))


def histogram_points(bins: list[tuple[int, int]], probs: list[float]
                     ) -> dict[int, Fraction]:
    return {v: Fraction(p) / (last - first + 1)
            for (first, last), p in zip(bins, probs, strict=True)
            for v in range(first, last + 1)}


def small_points(uniform: bool = False) -> list[tuple[tuple[int, ...], Fraction]]:
    """Every point of :func:`small_population` with its exact probability (``uniform``: the
    uniform prior over the values of positive probability)."""
    a, b = histogram_points(A_BINS, A_PROBS), histogram_points(B_BINS, B_PROBS)
    points = []
    for (va, pa), (vb, pb), (k, pc) in itertools.product(
            a.items(), b.items(), enumerate(Fraction(p) for p in C_PROBS)):
        weight = Fraction(1, len(a) * len(b) * 3) if uniform else pa * pb * pc
        onehot = tuple(int(j == k) for j in range(3))
        points.append(((va, vb, *onehot), weight))
    return points


def dyadic_network(seed: int, inputs: int = 5, hidden: int = 6) -> Network:
    """Weights in quarters, so exact evaluation in Fractions is the network's real value."""
    rng = np.random.default_rng(seed)
    first = rng.integers(-8, 9, size=(hidden, inputs)) / 4
    bias = rng.integers(-16, 17, size=hidden) / 4
    second = rng.integers(-8, 9, size=(2, hidden)) / 4
    return Network([Layer(first, bias, "relu"), Layer(second, np.zeros(2))],
                   input_names=["a", "b", "c0", "c1", "c2"])


def exact_class(net: Network, point: tuple[float, ...]) -> int:
    values = [Fraction(v) for v in point]
    for layer in net.layers:
        values = [sum((Fraction(w) * v for w, v in zip(row, values, strict=True)),
                      Fraction(b)) for row, b in zip(layer.weight, layer.bias, strict=True)]
        if layer.activation == "relu":
            values = [max(v, Fraction(0)) for v in values]
    return max(range(len(values)), key=lambda k: (values[k], -k))


ENGINE = {"stop_at": None, "executor": None, "bound_method": "crown",
          "deadline": math.inf, "tolerance": 1e-12}


def contains(result: object, exact: Fraction) -> None:
    low, high = result.probability_lower, result.probability_upper  # type: ignore[attr-defined]
    assert Fraction(low) <= exact <= Fraction(high), (low, float(exact), high)
    assert high - low < 1e-9
    assert not result.exact  # type: ignore[attr-defined]


@pytest.mark.parametrize(("seed", "use_prior", "decreasing"),
                         [(0, True, False), (1, True, True), (2, False, False)])
def test_monotonicity_by_branching_matches_enumeration(seed: int, use_prior: bool,
                                                       decreasing: bool) -> None:
    net, prior = dyadic_network(seed), small_population()
    points = small_points(uniform=not use_prior)
    marginal: dict[int, Fraction] = {}
    for point, weight in points:
        marginal[point[0]] = marginal.get(point[0], Fraction(0)) + weight
    classes = {point: exact_class(net, point) for point, _ in points}
    holds = total = Fraction(0)
    for point, weight in points:
        for value, other in marginal.items():
            if not (value < point[0] if decreasing else value > point[0]):
                continue
            moved = (value, *point[1:])
            pair = weight * other
            total += pair
            if not (classes[point] == 1 and exact_class(net, moved) != 1):
                holds += pair
    result = branched.monotonicity(net, prior, 0, decreasing=decreasing, favorable_class=1,
                                   output=None, use_prior=use_prior, engine=ENGINE)
    contains(result, holds / total)
    assert result.extra["method"] == "box branching (PV)"
    # every column is discrete: exact WMI has nothing to integrate, so the public function
    # branches too
    public = monotonicity(net, prior, 0, decreasing=decreasing, use_prior=use_prior)
    contains(public, holds / total)


@pytest.mark.parametrize("seed", [3, 4])
def test_noise_robustness_by_branching_matches_enumeration(seed: int) -> None:
    net, prior = dyadic_network(seed), small_population()
    noise = Discrete(values=[-1, 0, 2], probabilities=[0.25, 0.5, 0.25])
    shifts = list(zip([-1, 0, 2], [Fraction(1, 4), Fraction(1, 2), Fraction(1, 4)],
                      strict=True))
    agree = Fraction(0)
    for point, weight in small_points():
        for shift, p in shifts:
            moved = (point[0], point[1] + shift, *point[2:])
            agree += weight * p * (exact_class(net, point) == exact_class(net, moved))
    result = branched.noise_robustness(net, prior, noise, [1], engine=ENGINE)
    contains(result, agree)


def test_local_robustness_and_equivalence_by_branching_match_enumeration() -> None:
    net, other, prior = dyadic_network(5), dyadic_network(6), small_population()
    centre, epsilon = np.array([3.0, 5.0, 0.0, 0.0, 1.0]), 2.5
    label = exact_class(net, tuple(centre))
    inside = [(p, w) for p, w in small_points()
              if all(abs(v - c) <= epsilon for v, c in zip(p, centre, strict=True))]
    mass = sum(w for _, w in inside)
    robust = sum(w for p, w in inside if exact_class(net, p) == label) / mass
    result = branched.local_robustness(net, prior, centre - epsilon, centre + epsilon, label,
                                       engine=ENGINE)
    contains(result, robust)
    same = sum(w for p, w in small_points() if exact_class(net, p) == exact_class(other, p))
    whole = np.full(5, np.inf)
    contains(branched.equivalence(net, other, prior, -whole, whole, engine=ENGINE), same)


def test_equivalence_of_models_of_other_sizes_names_each_size() -> None:
    prior, whole = small_population(), np.full(5, np.inf)
    with pytest.raises(WMIInputError, match=r"prior has 5 columns, the models \(in the order "
                       r"given\) 5, 4 inputs"):
        branched.equivalence(dyadic_network(5), Network([Layer(np.ones((2, 4)), np.zeros(2))]),
                             prior, -whole, whole, engine=ENGINE)


def test_the_tie_probability_is_enclosed_on_runs_of_a_wide_histogram() -> None:
    """``P(X < X′) = (1 − Σ p_v²) / 2`` for a 50 000-value histogram with an atom, by the
    closed form of the bins (uniform inside each)."""
    prior = adult_like()
    low, high = strict_order_probability(ColumnMarginal(prior, 3))
    tie = sum(Fraction(p) ** 2 / (last - first + 1)
              for (first, last), p in zip(GAIN_BINS, GAIN_PROBS, strict=True))
    truth = (1 - tie) / 2
    assert Fraction(low) <= truth <= Fraction(high)
    assert high - low < 1e-8


# ------------------------------------------------------------------ Adult-like, Monte Carlo

GAIN_BINS, GAIN_PROBS = [(0, 0), (1, 4999), (5000, 49999)], [0.875, 0.0625, 0.0625]


def adult_like() -> PopulationModel:
    """age, education, hours (histograms with atoms), capital gain (50 000 values: exact WMI
    would need more than 20 000 terms) and sex (one-hot)."""
    def histogram(name: str, bins: list[tuple[int, int]], probs: list[float]) -> Factor:
        return Factor(columns=[name], distribution=IntegerHistogram(bins=bins,
                                                                    probabilities=probs))

    return PopulationModel(
        features=[Feature(name="age", kind="integer", domain=(17, 90)),
                  Feature(name="education", kind="integer", domain=(1, 16)),
                  Feature(name="hours", kind="integer", domain=(1, 99)),
                  Feature(name="gain", kind="integer", domain=(0, 49999)),
                  Feature(name="sex", kind="categorical", columns=["female", "male"],
                          categories=["female", "male"])],
        distribution=Product(factors=[
            histogram("age", [(17, 29), (30, 49), (50, 90)], [0.25, 0.5, 0.25]),
            histogram("education", [(1, 8), (9, 9), (10, 16)], [0.25, 0.375, 0.375]),
            histogram("hours", [(1, 39), (40, 40), (41, 99)], [0.25, 0.5, 0.25]),
            histogram("gain", GAIN_BINS, GAIN_PROBS),
            Factor(columns=["female", "male"],
                   distribution=Categorical(probabilities=[0.375, 0.625]))]))


def adult_network(seed: int) -> Network:
    """A random 6-16-2 ReLU classifier on scaled inputs, positive for about a quarter of
    the population."""
    rng = np.random.default_rng(seed)
    scale = np.array([1 / 40, 1 / 8, 1 / 40, 1 / 10_000, 1.0, 1.0])
    first = rng.normal(size=(16, 6)) * scale
    first[:, 1] = np.abs(first[:, 1])
    second = rng.normal(size=(2, 16))
    net = Network([Layer(first, rng.normal(size=16), "relu"), Layer(second, np.zeros(2))],
                  input_names=["age", "education", "hours", "gain", "female", "male"])
    sample = adult_like().sample(20_000, 0)
    logits = net.evaluate(sample)
    shift = np.quantile(logits[:, 1] - logits[:, 0], 0.75)
    return Network([net.layers[0], Layer(second, np.array([0.0, -shift]))],
                   input_names=net.input_names)


def mc_monotonicity(net: Network, prior: PopulationModel, feature: int, samples: int
                    ) -> tuple[float, float]:
    rng = np.random.default_rng(11)
    x = prior.sample(samples, rng)
    other = prior.sample(samples, rng)[:, feature]
    ordered = x[:, feature] < other
    moved = x[ordered].copy()
    moved[:, feature] = other[ordered]
    before, after = net.classify(x[ordered]), net.classify(moved)
    holds = ~((before == 1) & (after != 1))
    estimate = float(holds.mean())
    return estimate, math.sqrt(max(estimate * (1 - estimate), 1 / holds.size) / holds.size)


def inside(result: object, estimate: float, error: float) -> None:
    assert result.probability_lower - 4 * error <= estimate  # type: ignore[attr-defined]
    assert estimate <= result.probability_upper + 4 * error  # type: ignore[attr-defined]


def test_monotonicity_on_a_wide_histogram_branches_and_contains_monte_carlo() -> None:
    net, prior = adult_like_pair()
    result = monotonicity(net, prior, 1, use_prior=True, timeout_s=20)
    assert result.extra["method"] == "box branching (PV)" and not result.exact
    inside(result, *mc_monotonicity(net, prior, 1, 400_000))


def adult_like_pair() -> tuple[Network, PopulationModel]:
    return adult_network(0), adult_like()


def test_noise_and_local_robustness_on_a_wide_histogram_contain_monte_carlo() -> None:
    net, prior = adult_like_pair()
    noise = Discrete(values=[0, 5, 10], probabilities=[0.5, 0.25, 0.25])
    result = noise_robustness(net, prior, noise, [2], timeout_s=15)
    assert result.extra["method"] == "box branching (PV)"
    rng = np.random.default_rng(3)
    x = prior.sample(400_000, rng)
    shifted = x.copy()
    shifted[:, 2] += rng.choice([0, 5, 10], p=[0.5, 0.25, 0.25], size=x.shape[0])
    agree = net.classify(x) == net.classify(shifted)
    estimate = float(agree.mean())
    inside(result, estimate, math.sqrt(estimate * (1 - estimate) / agree.size))
    centre = np.array([40.0, 10.0, 40.0, 0.0, 0.0, 1.0])
    result = local_robustness(net, prior, centre, 1.0, timeout_s=10)
    assert result.extra["expected_class"] == net.classify(centre[None])[0]
    # the ε-box of radius 1 around an integer point holds 3 × 3 × 3 × 2 × 2 points: every
    # one is decided, so the interval closes up to rounding
    assert result.extra["method"] == "box branching (PV)"
    assert result.probability_upper - result.probability_lower < 1e-9


def test_a_budget_ends_branching_with_bounds_that_contain_monte_carlo() -> None:
    """A 2-second budget cannot close the interval of monotonicity in hours to 1e-12: the
    run stops within the budget (plus 3 s allowed for the process start-up and the last
    round) with the certified interval reached."""
    net, prior = adult_like_pair()
    started = time.perf_counter()
    result = monotonicity(net, prior, 2, use_prior=True, timeout_s=2.0, tolerance=1e-12)
    elapsed = time.perf_counter() - started
    assert result.timed_out and not result.stopped_early
    assert elapsed < 2.0 + 3.0
    assert result.probability_upper - result.probability_lower > 1e-12  # not closed
    inside(result, *mc_monotonicity(net, prior, 2, 400_000))


# ------------------------------------------------------------------- exact WMI's deadline


def test_exact_wmi_stops_at_its_deadline_in_every_phase() -> None:
    """8000 prior terms (three 20-value integer columns and a uniform one): building the
    queries and preparing the roots took 33 s against a 0.5-s budget before every phase
    checked the deadline. Now the run ends within the budget plus 2.5 s (the expansion into
    terms, bounded by 20 000, is the one phase that does not stop) with bounds that hold
    Monte Carlo."""
    from verifier.population import Uniform
    from verifier.wmi import equivalence

    names = ["k0", "k1", "k2"]
    prior = PopulationModel(
        features=[*(Feature(name=m, kind="integer", domain=(0, 19)) for m in names),
                  Feature(name="x", kind="continuous", domain=(0, 1))],
        distribution=Product(factors=[
            *(Factor(columns=[m], distribution=Discrete(values=list(range(20)),
                                                        probabilities=[0.05] * 20))
              for m in names),
            Factor(columns=["x"], distribution=Uniform(lower=0, upper=1))]))

    def net(seed: int) -> Network:
        rng = np.random.default_rng(seed)
        return Network([Layer(rng.normal(size=(6, 4)) * [0.1, 0.1, 0.1, 1.0],
                              rng.normal(size=6), "relu"),
                        Layer(rng.normal(size=(2, 6)), np.zeros(2))])

    first, second = net(1), net(2)
    started = time.perf_counter()
    result = equivalence(first, second, prior, timeout_s=1.5)
    elapsed = time.perf_counter() - started
    assert result.timed_out and not result.exact
    assert elapsed < 1.5 + 2.5
    x = prior.sample(400_000, 5)
    agree = first.classify(x) == second.classify(x)
    estimate = float(agree.mean())
    inside(result, estimate, math.sqrt(estimate * (1 - estimate) / agree.size))


def test_listing_the_roots_of_histogram_pieces_stops_at_the_deadline() -> None:
    """Three continuous columns, each a 40-bin histogram (a mixture of uniforms), and
    monotonicity's copy of the first: one query lists 40⁴ combinations of pieces, which alone
    took minutes (the demo's default fit: 192 s against a 120-s budget). The run now ends
    within the budget plus 2.5 s, with the uninformative interval [0, 1] when no root was
    listed in time."""
    from verifier.population import Mixture, Uniform

    def histogram(name: str) -> Factor:
        edges = np.linspace(0.0, 1.0, 41)
        return Factor(columns=[name], distribution=Mixture(
            weights=[1 / 40] * 40,
            components=[Uniform(lower=float(a), upper=float(b))
                        for a, b in itertools.pairwise(edges)]))

    prior = PopulationModel(
        features=[Feature(name=m, kind="continuous", domain=(0, 1)) for m in "uvw"],
        distribution=Product(factors=[histogram(m) for m in "uvw"]))
    rng = np.random.default_rng(0)
    net = Network([Layer(rng.normal(size=(4, 3)), rng.normal(size=4), "relu"),
                   Layer(rng.normal(size=(2, 4)), np.zeros(2))])
    started = time.perf_counter()
    result = monotonicity(net, prior, 0, use_prior=True, timeout_s=1.0)
    assert time.perf_counter() - started < 1.0 + 2.5
    assert result.timed_out and not result.exact
    assert result.probability_lower <= result.probability_upper


def test_the_command_line_reports_a_branched_audit_as_one_json_object(
        tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    """``certgate verify local-robustness --json`` on an all-discrete population: one JSON
    object naming the method and the boxes, the interval containing the exact value."""
    import json
    from pathlib import Path

    from pipeline_steps.cli import main
    from verifier.convert import save_network
    from verifier.population import save_population

    root = Path(str(tmp_path))
    net = dyadic_network(5)
    save_network(net, root / "net.json")
    save_population(small_population(), root / "pop.json")
    centre = (3.0, 5.0, 0.0, 0.0, 1.0)
    label = exact_class(net, centre)
    inside = [(p, w) for p, w in small_points()
              if all(abs(v - c) <= 2.5 for v, c in zip(p, centre, strict=True))]
    robust = sum(w for p, w in inside if exact_class(net, p) == label) / sum(
        w for _, w in inside)
    capsys.readouterr()
    code = main(["verify", "local-robustness", "--model", str(root / "net.json"),
                 "--population", str(root / "pop.json"), "--center", "3,5,0,0,1",
                 "--epsilon", "2.5", "--json", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    document = json.loads(out)
    assert document["method"] == "box branching (PV)" and document["boxes"] > 0
    low, high = document["probability_interval"]
    assert Fraction(low) <= robust <= Fraction(high) and document["expected_class"] == label
