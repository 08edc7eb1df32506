"""PV against independent oracles: closed forms, exhaustive enumeration, dense Monte Carlo.

The box masses here are written out in the tests (closed-form products of normal CDFs,
uniform volumes, discrete pmfs), independently of ``verifier.population``.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from scipy.special import ndtr
from strategies import random_network

from verifier.errors import CertgateInputError
from verifier.network import Layer, Network
from verifier.pv import InputDomain, PVSettings, verify
from verifier.pv import settings as pv_settings
from verifier.pv.engine import ProbabilityBranchAndBound
from verifier.pv.settings import (
    BATCH_PER_WORKER,
    DEEP_POOL_ROUNDS,
    IN_PROCESS_BATCH,
    MIN_BATCH_PER_WORKER,
    POOL_ROUND_SHARE,
    available_memory,
)
from verifier.spec import (
    Names,
    SpecError,
    demographic_parity,
    parse_event,
    specification_from_dict,
)


def normal_masses(mean: np.ndarray, std: np.ndarray):
    def masses(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = np.prod(ndtr((hi - mean) / std) - ndtr((lo - mean) / std), axis=1)
        return p * (1 - 1e-12), np.minimum(p * (1 + 1e-12), 1.0)

    return masses


def uniform_masses(low: np.ndarray, high: np.ndarray):
    volume = np.prod(high - low)

    def masses(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        width = np.clip(np.minimum(hi, high) - np.maximum(lo, low), 0.0, None)
        p = np.prod(width, axis=1) / volume
        return p * (1 - 1e-12), np.minimum(p * (1 + 1e-12), 1.0)

    return masses


def discrete_masses(values: list[np.ndarray], pmfs: list[np.ndarray]):
    """Independent discrete columns: column i takes values[i] with probabilities pmfs[i]."""

    def masses(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = np.ones(lo.shape[0])
        for i, (vals, pmf) in enumerate(zip(values, pmfs, strict=True)):
            inside = (vals[None, :] >= lo[:, i : i + 1]) & (vals[None, :] <= hi[:, i : i + 1])
            p = p * (inside * pmf[None, :]).sum(axis=1)
        return p * (1 - 1e-12), np.minimum(p * (1 + 1e-12), 1.0)

    return masses


def unbounded(dim: int) -> InputDomain:
    return InputDomain(np.full(dim, -np.inf), np.full(dim, np.inf), np.zeros(dim, dtype=bool))


def linear_threshold_network(weights: np.ndarray, threshold: float) -> Network:
    """Outputs (no, yes) with yes − no = weights·x − threshold."""
    weight = np.vstack([np.zeros_like(weights), weights])
    return Network([Layer(weight, np.array([0.0, -threshold]), "none")],
                   [f"x{i}" for i in range(weights.size)], ["no", "yes"])


@pytest.mark.parametrize(("seed", "dim", "width"),
                         [(0, 1, 1e-4), (1, 2, 2e-3), (2, 2, 2e-3), (3, 3, 1e-2), (4, 3, 1e-2)])
def test_linear_threshold_under_gaussians_matches_closed_form(
    seed: int, dim: int, width: float
) -> None:
    """P[w·x > t] = 1 − Φ((t − w·μ)/‖w∘σ‖) for independent Gaussians on all of R^dim; the
    required width grows with the dimension (boxes must cover a (dim−1)-surface)."""
    rng = np.random.default_rng(seed)
    weights, mean = rng.normal(size=dim), rng.normal(size=dim)
    std = rng.uniform(0.5, 3.0, size=dim)
    threshold = float(rng.normal())
    network = linear_threshold_network(weights, threshold)
    names = Names.of(network.input_names, network.output_names)
    spec = specification_from_dict({"probabilities": {"p": {"event": "y.yes > y.no"}}}, names)
    result = verify(network, spec, normal_masses(mean, std), unbounded(dim),
                    PVSettings(timeout_s=30, precision=width))
    exact = 1.0 - ndtr((threshold - weights @ mean) / np.sqrt((weights**2 * std**2).sum()))
    low, high = result.probabilities["p"]
    assert low <= exact <= high
    assert high - low <= width
    assert result.stopped_by == "precision"


def test_relu_network_on_small_discrete_space_matches_enumeration() -> None:
    rng = np.random.default_rng(1)
    network = random_network(rng, [3, 6, 5, 2])
    values = [np.arange(4.0), np.arange(-2.0, 3.0), np.array([0.0, 1.0])]
    pmfs = [rng.dirichlet(np.ones(v.size)) for v in values]
    names = Names.of(network.input_names, network.output_names)
    spec = specification_from_dict(
        {"probabilities": {"p": {"event": "y[1] > y[0]", "given": "x[0] >= 1"}}}, names
    )
    domain = InputDomain(np.array([0.0, -2.0, 0.0]), np.array([3.0, 2.0, 1.0]),
                         np.ones(3, dtype=bool))
    result = verify(network, spec, discrete_masses(values, pmfs), domain,
                    PVSettings(timeout_s=30, precision=1e-9))
    joint = condition = 0.0
    for point in itertools.product(*values):
        weight = np.prod([pmf[list(v).index(x)] for pmf, v, x in zip(pmfs, values, point,
                                                                        strict=True)])
        out = network.evaluate(np.array(point))
        if point[0] >= 1:
            condition += weight
            joint += weight * (out[1] > out[0])
    exact = joint / condition
    low, high = result.probabilities["p"]
    assert low <= exact <= high
    assert high - low <= 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_continuous_relu_network_contains_dense_monte_carlo(seed: int) -> None:
    rng = np.random.default_rng(10 + seed)
    network = random_network(rng, [2, 8, 8, 2])
    mean, std = rng.normal(size=2), rng.uniform(0.5, 1.5, size=2)
    names = Names.of(network.input_names, network.output_names)
    spec = specification_from_dict(
        {"probabilities": {"p": {"event": "y[1] > y[0] and x[0] <= 0.5"}}}, names
    )
    result = verify(network, spec, normal_masses(mean, std), unbounded(2),
                    PVSettings(timeout_s=20, precision=5e-3))
    samples = mean + std * rng.standard_normal(size=(1_000_000, 2))
    out = network.evaluate(samples)
    hits = (out[:, 1] > out[:, 0]) & (samples[:, 0] <= 0.5)
    estimate, error = hits.mean(), hits.std() / np.sqrt(hits.size)
    low, high = result.probabilities["p"]
    assert low - 4 * error <= estimate <= high + 4 * error


def test_uniform_box_violation_probability_contains_monte_carlo() -> None:
    rng = np.random.default_rng(4)
    network = random_network(rng, [3, 10, 10, 3])
    low_corner, high_corner = -np.ones(3), np.array([1.0, 0.5, 2.0])
    names = Names.of(network.input_names, network.output_names)
    spec = specification_from_dict(
        {"probabilities": {"v": {"event": "y[0] >= y[1] and y[0] >= y[2]"}}}, names
    )
    domain = InputDomain(low_corner, high_corner, np.zeros(3, dtype=bool))
    result = verify(network, spec, uniform_masses(low_corner, high_corner), domain,
                    PVSettings(timeout_s=20, precision=1e-2))
    samples = rng.uniform(low_corner, high_corner, size=(1_000_000, 3))
    out = network.evaluate(samples)
    hits = (out[:, 0] >= out[:, 1]) & (out[:, 0] >= out[:, 2])
    error = hits.std() / np.sqrt(hits.size)
    low, high = result.probabilities["v"]
    assert low - 4 * error <= hits.mean() <= high + 4 * error


def _sex_shift_network(shift: float) -> Network:
    """yes − no = x0 + shift·sex − 0.5: favourable outcome depends on sex by ``shift``."""
    return Network([Layer(np.array([[0.0, 0.0], [1.0, shift]]), np.array([0.0, -0.5]), "none")],
                   ["score", "sex"], ["no", "yes"])


SCORE_MEAN = 0.3


def _sex_score_masses(p_sex: np.ndarray):
    """Box masses of (score ~ N(SCORE_MEAN, 1), sex ∈ {0, 1} with ``p_sex``), independent."""
    def masses(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        score = ndtr(hi[:, 0] - SCORE_MEAN) - ndtr(lo[:, 0] - SCORE_MEAN)
        sex = ((lo[:, 1] <= 0) & (hi[:, 1] >= 0)) * p_sex[0] + (
            (lo[:, 1] <= 1) & (hi[:, 1] >= 1)) * p_sex[1]
        p = score * sex
        return p * (1 - 1e-12), np.minimum(p * (1 + 1e-12), 1.0)

    return masses


@pytest.mark.parametrize(("shift", "gamma", "verdict"), [
    (0.0, 0.85, "satisfied"),   # ratio exactly 1
    (0.6, 0.85, "violated"),    # the privileged group is favoured strongly
    (0.1, 0.85, "satisfied"),
])
def test_demographic_parity_verdicts_match_closed_form(shift: float, gamma: float,
                                                       verdict: str) -> None:
    network = _sex_shift_network(shift)
    names = Names.of(network.input_names, network.output_names)
    spec = demographic_parity(names, protected="sex", privileged=1.0, favorable_class=1,
                              gamma=gamma)
    domain = InputDomain(np.array([-np.inf, 0.0]), np.array([np.inf, 1.0]),
                         np.array([False, True]))
    result = verify(network, spec, _sex_score_masses(np.array([0.4, 0.6])), domain,
                    PVSettings(timeout_s=30))
    female = 1 - ndtr(0.5 - SCORE_MEAN)
    male = 1 - ndtr(0.5 - shift - SCORE_MEAN)
    exact_ratio = female / male
    assert result.verdict == verdict
    low, high = result.value
    assert low <= exact_ratio <= high
    assert result.probabilities["p_unprivileged"][0] <= female <= result.probabilities[
        "p_unprivileged"][1]


def test_anytime_intervals_are_nested_and_timeout_is_unknown() -> None:
    rng = np.random.default_rng(2)
    network = random_network(rng, [3, 12, 12, 2])
    names = Names.of(network.input_names, network.output_names)
    spec = specification_from_dict(
        {"probabilities": {"p": {"event": "y[1] > y[0]"}}, "expression": "p",
         "comparison": ">", "threshold": 0.0},
        names,
    )
    seen = []
    result = verify(network, spec, normal_masses(np.zeros(3), np.ones(3)), unbounded(3),
                    PVSettings(max_boxes=5000, timeout_s=None),
                    progress=lambda p: seen.append(p.probabilities["p"]))
    lows, highs = np.array([s[0] for s in seen]), np.array([s[1] for s in seen])
    assert np.all(np.diff(lows) >= 0) and np.all(np.diff(highs) <= 0)
    samples = rng.standard_normal(size=(400_000, 3))
    out = network.evaluate(samples)
    estimate = (out[:, 1] > out[:, 0]).mean()
    if result.verdict == "unknown":
        assert result.stopped_by == "max_boxes"
    assert seen[-1][0] - 0.01 <= estimate <= seen[-1][1] + 0.01


def test_one_hot_groups_are_split_by_category() -> None:
    rng = np.random.default_rng(8)
    network = random_network(rng, [4, 6, 2])
    probs = np.array([0.2, 0.5, 0.3])

    def masses(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        onehot = np.eye(3)
        inside = np.all((onehot[None] >= lo[:, None, :3]) & (onehot[None] <= hi[:, None, :3]),
                        axis=2)
        cat = (inside * probs).sum(axis=1)
        cont = ndtr(hi[:, 3]) - ndtr(lo[:, 3])
        p = cat * cont
        return p * (1 - 1e-12), np.minimum(p * (1 + 1e-12), 1.0)

    domain = InputDomain(np.array([0, 0, 0, -np.inf]), np.array([1, 1, 1, np.inf]),
                         np.array([True, True, True, False]), groups=((0, 1, 2),))
    names = Names.of(network.input_names, network.output_names)
    spec = specification_from_dict({"probabilities": {"p": {"event": "y[1] > y[0]"}}}, names)
    result = verify(network, spec, masses, domain, PVSettings(timeout_s=20, precision=2e-3))
    samples = rng.standard_normal(size=1_000_000)
    cats = rng.choice(3, size=samples.size, p=probs)
    x = np.column_stack([np.eye(3)[cats], samples])
    out = network.evaluate(x)
    hits = out[:, 1] > out[:, 0]
    error = hits.std() / np.sqrt(hits.size)
    low, high = result.probabilities["p"]
    assert low - 4 * error <= hits.mean() <= high + 4 * error


def test_quoted_names_reach_columns_that_are_not_identifiers() -> None:
    names = Names.of(["hours-per-week", "sex=Male", "age"], ["no", "yes"])
    quoted = parse_event('x["hours-per-week"] - 2 * x["sex=Male"] >= 40 and y["yes"] > y[0]',
                         names)
    indexed = parse_event("x[0] - 2 * x[1] >= 40 and y[1] > y[0]", names)
    assert quoted == indexed
    assert parse_event('x["age"] < 30', names) == parse_event("x.age < 30", names)
    with pytest.raises(SpecError, match="unknown input 'hours'"):
        parse_event('x["hours"] > 1', names)
    with pytest.raises(SpecError, match="integer index"):
        parse_event("x[True] > 1", names)
    spec = demographic_parity(names, protected="sex=Male", privileged=1, favorable_class=1,
                              gamma=0.8)
    assert spec.probabilities["p_privileged"].condition == parse_event("x[1] == 1", names)


def test_bad_specifications_are_clear_errors() -> None:
    names = Names.of(["age", "sex"], ["no", "yes"])
    with pytest.raises(SpecError, match="unknown feature or output 'income'"):
        specification_from_dict({"probabilities": {"p": {"event": "income > 3"}}}, names)
    with pytest.raises(SpecError, match="gamma"):
        demographic_parity(names, protected="sex", privileged=1, favorable_class=1, gamma=1.5)
    with pytest.raises(SpecError, match="protected feature 'race'"):
        demographic_parity(names, protected="race", privileged=1, favorable_class=1, gamma=0.8)
    with pytest.raises(SpecError, match="linear"):
        specification_from_dict({"probabilities": {"p": {"event": "age * sex > 3"}}}, names)
    with pytest.raises(SpecError, match="unknown probability 'q'"):
        specification_from_dict(
            {"probabilities": {"p": {"event": "age > 3"}}, "expression": "p / q"}, names
        )
    network = linear_threshold_network(np.ones(3), 0.0)
    spec = specification_from_dict({"probabilities": {"p": {"event": "yes > no"}}},
                                   Names.of(network.input_names, network.output_names))
    with pytest.raises(CertgateInputError, match="2 columns"):
        verify(network, spec, normal_masses(np.zeros(2), np.ones(2)), unbounded(2))


def test_a_round_refines_the_given_batch_or_a_share_of_the_pool_per_worker() -> None:
    assert PVSettings().round_size(0) == PVSettings().round_size(10**7) == IN_PROCESS_BATCH
    assert (IN_PROCESS_BATCH, BATCH_PER_WORKER, MIN_BATCH_PER_WORKER) == (1024, 2048, 128)
    assert POOL_ROUND_SHARE == 16
    assert PVSettings(executor="process", workers=3).round_size(0) == 3 * MIN_BATCH_PER_WORKER
    assert PVSettings(executor="dask", workers=2).round_size(10**7) == 2 * BATCH_PER_WORKER
    assert PVSettings(executor="process", workers=3, batch_size=100).round_size(10**7) == 100
    with pytest.raises(CertgateInputError, match="batch_size"):
        PVSettings(batch_size=0)


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_a_pools_round_takes_a_share_of_the_open_boxes_between_its_bounds(workers: int) -> None:
    """The stated rule, at every pool size around its corners: a round never refines more
    than a :data:`POOL_ROUND_SHARE`-th of the open boxes (rounded up) once the pool holds
    more than its smallest round that many times, never fewer boxes than the smallest round
    (or the whole pool), never more than the largest, and it never shrinks as the pool
    grows."""
    settings = PVSettings(executor="process", workers=workers)
    smallest, largest = MIN_BATCH_PER_WORKER * workers, BATCH_PER_WORKER * workers
    corners = {smallest * POOL_ROUND_SHARE, largest * POOL_ROUND_SHARE}
    sizes = sorted({0, 1, 2, 10**7} | {c + d for c in corners for d in (-17, -1, 0, 1, 17)})
    rounds = [settings.round_size(open_boxes) for open_boxes in sizes]
    assert rounds == sorted(rounds)
    for open_boxes, size in zip(sizes, rounds, strict=True):
        assert smallest <= size <= largest
        assert size in (smallest, largest) or size == -(-open_boxes // POOL_ROUND_SHARE)
        if open_boxes > smallest * POOL_ROUND_SHARE:
            assert size * POOL_ROUND_SHARE < open_boxes + POOL_ROUND_SHARE


def _pool_run(settings: PVSettings, tick: float) -> list[tuple[int, int, tuple[float, float]]]:
    """(boxes, open boxes, interval) of every report of a run on a 3-input network under
    standard normal inputs (no threshold: no verdict ends it) whose clock advances ``tick``
    seconds at every reading."""
    network = random_network(np.random.default_rng(5), [3, 8, 2])
    names = Names.of(network.input_names, network.output_names)
    spec = specification_from_dict(
        {"probabilities": {"p": {"event": "y[1] > y[0]"}}, "expression": "p"}, names)
    readings = itertools.count()
    reports: list[tuple[int, int, tuple[float, float]]] = []
    engine = ProbabilityBranchAndBound(
        network, spec, normal_masses(np.zeros(3), np.ones(3)), unbounded(3), settings,
        clock=lambda: tick * next(readings))
    engine.run(lambda p: reports.append((p.boxes, p.open_boxes, tuple(p.value))))
    return reports


def test_a_pools_rounds_follow_the_open_boxes_and_never_the_clock() -> None:
    """On a pool (one worker: the batches run in this process), with one round in flight,
    every round refines ``min(open, round_size(open))`` of the boxes open before it (every
    chosen box is split in two here); and with the default rounds in flight, two runs whose
    clocks read 1 ms and 1 s apart (no budget, no credit: nothing else reads a time) refine
    the same boxes and report the same intervals."""
    one = PVSettings(timeout_s=None, max_boxes=60_000, executor="process", workers=1,
                     linear_credit=False, rounds_in_flight=1)
    reports = _pool_run(one, 1e-3)
    chosen = [(after[0] - before[0]) // 2 for before, after in itertools.pairwise(reports)]
    assert chosen == [min(before[1], one.round_size(before[1])) for before in reports[:-1]]
    assert max(chosen) > MIN_BATCH_PER_WORKER
    default = PVSettings(timeout_s=None, max_boxes=60_000, executor="process", workers=1,
                         linear_credit=False)
    assert max(open_boxes for _, open_boxes, _ in reports) >= DEEP_POOL_ROUNDS * \
        default.round_size(0)
    assert _pool_run(default, 1e-3) == _pool_run(default, 1.0)


def test_pools_keep_two_rounds_in_flight_once_the_pool_is_deep() -> None:
    deep = DEEP_POOL_ROUNDS * 2 * MIN_BATCH_PER_WORKER
    assert PVSettings().rounds_ahead(10 * deep) == 1
    pool = PVSettings(executor="process", workers=2)
    assert pool.rounds_ahead(deep - 1) == 1
    assert pool.rounds_ahead(deep) == 2
    assert PVSettings(executor="dask", workers=2).rounds_ahead(deep) == 2
    given = PVSettings(executor="process", workers=2, batch_size=512)
    assert given.rounds_ahead(DEEP_POOL_ROUNDS * 512 - 1) == 1
    assert given.rounds_ahead(DEEP_POOL_ROUNDS * 512) == 2
    assert PVSettings(executor="process", rounds_in_flight=1).rounds_ahead(10 * deep) == 1
    assert PVSettings(rounds_in_flight=3).rounds_ahead(0) == 3
    with pytest.raises(CertgateInputError, match="rounds_in_flight"):
        PVSettings(rounds_in_flight=0)


def test_open_box_limit_stops_with_the_bounds_reached() -> None:
    """A run whose open boxes reach ``max_open_boxes`` stops there, verdict unknown, with
    an interval around a dense Monte Carlo estimate and the open boxes at the limit."""
    rng = np.random.default_rng(2)
    network = random_network(rng, [3, 12, 12, 2])
    samples = rng.standard_normal(size=(400_000, 3))
    out = network.evaluate(samples)
    estimate = (out[:, 1] > out[:, 0]).mean()
    names = Names.of(network.input_names, network.output_names)
    spec = specification_from_dict(
        {"probabilities": {"p": {"event": "y[1] > y[0]"}}, "expression": "p",
         "comparison": ">", "threshold": float(estimate)},
        names,
    )
    seen = []
    result = verify(network, spec, normal_masses(np.zeros(3), np.ones(3)), unbounded(3),
                    PVSettings(timeout_s=None, batch_size=16, max_open_boxes=64),
                    progress=lambda p: seen.append(p.open_boxes))
    assert result.stopped_by == "max_open_boxes"
    assert result.verdict == "unknown"
    assert seen[-1] >= 64 > max(seen[:-1])
    low, high = result.value
    assert low - 0.01 <= estimate <= high + 0.01


def test_open_box_limit_defaults_to_a_share_of_the_available_memory(monkeypatch) -> None:
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert 0 < available_memory() <= physical
    monkeypatch.setattr(pv_settings, "available_memory", lambda: 8 * 10**9)
    assert PVSettings().open_box_limit(4_000) == 10**6
    assert PVSettings(max_open_boxes=7).open_box_limit(4_000) == 7
    with pytest.raises(CertgateInputError, match="max_open_boxes"):
        PVSettings(max_open_boxes=0)


def test_a_number_with_a_leading_zero_is_told_to_drop_it_not_to_be_octal() -> None:
    """``dept == 010`` (a code as a CSV writes it, read as 10) was refused with Python's
    advice to use an ``0o`` prefix, which would read ``0o10`` as 8."""
    names = Names.of(["dept", "score"], ["no", "yes"])
    with pytest.raises(SpecError, match=r"a number with a leading zero: write it without "
                                        r"\(010 is 10"):
        parse_event("x.dept == 010", names)
    assert parse_event("x.dept == 10", names) == parse_event("x[0] == 10", names)
