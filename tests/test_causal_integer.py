"""Integer inputs, declared domains and chosen protected values, against brute force over every
integer point."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from verifier.causal import CausalSettings, build_problem, certify_causal_fairness
from verifier.causal.enumeration import ENUMERATION_WORK
from verifier.causal.partition import initial_partition, split_candidates, uniform_share
from verifier.causal.problem import CausalInputError
from verifier.convert import load_classifier
from verifier.network import Layer, Network

FAIRQUANT = Path("/work/shared/benchmarks/fairquant")


def _logit_network(seed: int, inputs: int, hidden: int, scale: np.ndarray) -> Network:
    """A random single-logit ReLU network over raw integer-coded inputs."""
    rng = np.random.default_rng(seed)
    first = rng.normal(size=(hidden, inputs)) / scale[None, :]
    last = rng.normal(size=(1, hidden))
    return Network([Layer(first, rng.normal(size=hidden), "relu"),
                    Layer(last, rng.normal(size=1) * 0.3, "none")])


def _brute_force(network: Network, low: np.ndarray, high: np.ndarray, protected: int,
                 values: list[float]) -> float:
    """Share of the integer points (protected input excluded) that two of ``values`` classify
    differently."""
    grids = [np.arange(low[i], high[i] + 1) if i != protected else np.array([0.0])
             for i in range(len(low))]
    points = np.array(list(itertools.product(*grids)), dtype=float)
    classes = []
    for value in values:
        rows = points.copy()
        rows[:, protected] = value
        classes.append(network.evaluate(rows)[:, 0] > 0)
    stacked = np.stack(classes, axis=1)
    return float((stacked.min(axis=1) != stacked.max(axis=1)).mean())


def _assert_integer_witnesses(network: Network, certificate, protected: int) -> None:
    view = network.as_classifier()
    for witness in certificate.details["witnesses"]:
        a, b = np.array(witness["x"]), np.array(witness["x_other"])
        assert np.array_equal(a, np.round(a)) and np.array_equal(b, np.round(b))
        others = [i for i in range(a.size) if i != protected]
        assert np.array_equal(a[others], b[others])
        assert view.classify(np.stack([a, b])).tolist() == witness["classes"]


@pytest.mark.parametrize("work", [0, ENUMERATION_WORK], ids=["partitioned", "enumerated"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_integer_shares_match_brute_force(seed: int, work: int) -> None:
    low = np.array([0.0, 0.0, 0.0, 0.0])
    high = np.array([6.0, 1.0, 3.0, 9.0])
    network = _logit_network(seed, 4, 6, np.maximum(high, 1.0))
    exact = _brute_force(network, low, high, 1, [0.0, 1.0])
    problem = build_problem(network, ["x1"], domain=(low, high), integer_inputs="all")
    certificate = certify_causal_fairness(problem, CausalSettings(timeout_s=60.0,
                                                                  enumeration_work=work))
    assert ("enumerated" in certificate.details) == (work > 0)
    lower, upper = certificate.bounds["biased_share"]
    assert lower <= exact + 1e-12 and exact <= upper + 1e-12
    # finitely many points: the refinement ends at single points, so the share is exact
    assert certificate.details["partition_counts"]["refining"] == 0
    assert upper - lower == pytest.approx(0.0, abs=1e-12)
    _assert_integer_witnesses(network, certificate, 1)
    shares = certificate.details["certified_shares"]
    assert shares["fair"] <= 1.0 - exact + 1e-12 and shares["biased_everywhere"] <= exact + 1e-12
    assert shares["decided"] <= shares["fair"] + shares["biased_everywhere"]
    assert shares["decided"] == pytest.approx(1.0, abs=1e-12), "single points are decided"


@pytest.mark.parametrize("work", [0, ENUMERATION_WORK], ids=["partitioned", "enumerated"])
def test_protected_values_compare_only_the_values_given(work: int) -> None:
    low, high = np.array([0.0, 0.0, 0.0]), np.array([5.0, 4.0, 7.0])
    network = _logit_network(7, 3, 5, np.maximum(high, 1.0))
    every = _brute_force(network, low, high, 1, [0.0, 1.0, 2.0, 3.0, 4.0])
    ends = _brute_force(network, low, high, 1, [0.0, 4.0])
    for values, exact in ((None, every), ([0.0, 4.0], ends)):
        problem = build_problem(network, ["x1"], domain=(low, high), integer_inputs="all",
                                protected_values=values)
        certificate = certify_causal_fairness(problem, CausalSettings(timeout_s=60.0,
                                                                      enumeration_work=work))
        lower, upper = certificate.bounds["biased_share"]
        assert lower - 1e-12 <= exact <= upper + 1e-12
        assert upper - lower == pytest.approx(0.0, abs=1e-12)
        _assert_integer_witnesses(network, certificate, 1)


def test_integer_partitions_split_between_integers() -> None:
    network = _logit_network(4, 3, 3, np.ones(3))
    problem = build_problem(network, ["x2"], domain={"x0": (0.0, 5.0), "x1": (-2.5, 2.5)},
                            integer_inputs=["x0"], query={"x0": (0.5, 5.0)})
    lower, upper = initial_partition(problem)
    assert lower[0, 0] == 1.0 and upper[0, 0] == 5.0  # the query's integers 1..5
    assert problem.query_fraction() == pytest.approx(5 / 6)
    child_lo, child_hi, _ = split_candidates(problem, lower, upper, 0.0)
    assert child_hi[0, 0, 0, 0] == 3.0 and child_lo[0, 0, 1, 0] == 4.0
    assert uniform_share(problem, child_lo[0, 0], child_hi[0, 0]).tolist() == [0.6, 0.4]
    assert child_hi[0, 1, 0, 1] == 0.0 and child_lo[0, 1, 1, 1] == 0.0  # continuous x1


def test_bad_domains_and_values() -> None:
    network = _logit_network(5, 3, 3, np.ones(3))
    with pytest.raises(CausalInputError, match=r"'x0' is \[2\.0, 1\.0\]"):
        build_problem(network, ["x2"], domain={"x0": (2.0, 1.0)})
    with pytest.raises(CausalInputError, match="holds no integer"):
        build_problem(network, ["x2"], domain={"x0": (0.2, 0.8)}, integer_inputs="all")
    with pytest.raises(CausalInputError, match="not an integer in its domain"):
        build_problem(network, ["x2"], domain={"x2": (0.0, 3.0)}, integer_inputs="all",
                      protected_values=[0.0, 1.5])
    with pytest.raises(CausalInputError, match="at least two different values"):
        build_problem(network, ["x2"], protected_values=[0.5, 0.5])
    with pytest.raises(CausalInputError, match="integer input 'z'"):
        build_problem(network, ["x2"], integer_inputs=["z"])


def test_one_hot_protected_values_pick_categories() -> None:
    rng = np.random.default_rng(6)
    network = Network([Layer(rng.normal(size=(4, 4)), rng.normal(size=4), "relu"),
                       Layer(rng.normal(size=(1, 4)), np.zeros(1), "none")])
    problem = build_problem(network, ["x1", "x2", "x3"], protected_kind="one_hot",
                            protected_values=["x3", "x1"])
    assert problem.protected_cells[:, 0].tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    with pytest.raises(CausalInputError, match="'x0' is not an input of the one-hot"):
        build_problem(network, ["x1", "x2", "x3"], protected_kind="one_hot",
                      protected_values=["x0", "x1"])
    with pytest.raises(CausalInputError, match=r"two different values, got \['x2'\]"):
        build_problem(network, ["x1", "x2", "x3"], protected_kind="one_hot",
                      protected_values=["x2", "x2"])


@pytest.mark.skipif(not FAIRQUANT.is_dir(), reason="FairQuant benchmark folder not present")
@pytest.mark.parametrize("work", [0, ENUMERATION_WORK], ids=["partitioned", "enumerated"])
def test_fairquant_compas_1_matches_brute_force_over_all_624_points(work: int) -> None:
    network, domain = load_classifier(FAIRQUANT / "compas-1.nnet", nnet_normalises_inputs=False)
    assert domain is not None
    last = network.layers[-1]
    raw = Network([*network.layers[:-1], Layer(last.weight[1:], last.bias[1:], "none")])
    exact = _brute_force(raw, domain[0], domain[1], 3, [0.0, 1.0])
    assert exact == pytest.approx(17 / 624)
    problem = build_problem(network, ["x3"], domain=domain, integer_inputs="all")
    certificate = certify_causal_fairness(problem, CausalSettings(timeout_s=60.0,
                                                                  enumeration_work=work))
    assert ("enumerated" in certificate.details) == (work > 0)
    lower, upper = certificate.bounds["biased_share"]
    assert lower == pytest.approx(exact, abs=1e-12) and upper == pytest.approx(exact, abs=1e-12)
    _assert_integer_witnesses(network, certificate, 3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_class_pruning_keeps_the_exact_checks_verdict(seed: int) -> None:
    # three-valued one-hot protected feature: pruning class pairs that the bounds rule out
    # must give the same verdict as running every MILP, with no more MILPs
    from verifier.bounds import compute_bounds, pairwise_difference_spec
    from verifier.causal.analysis import possible_classes
    from verifier.causal.exact_check import check_partition
    from verifier.causal.partition import with_protected

    rng = np.random.default_rng(seed)
    network = Network([Layer(rng.normal(size=(6, 5)), rng.normal(size=6), "relu"),
                       Layer(rng.normal(size=(3, 6)), rng.normal(size=3), "none")])
    problem = build_problem(network, ["x2", "x3", "x4"], protected_kind="one_hot")
    for width in (1.0, 0.3, 0.1):
        lower = np.array([[0.2, 0.1, 0.0, 0.0, 0.0]])
        upper = lower.copy()
        upper[0, :2] += width
        boxes = with_protected(problem, lower, upper, problem.protected_cells)
        result = compute_bounds(problem.network, *boxes, pairwise_difference_spec(3), "crown")
        cells = [({k: v[c] for k, v in result.pre_lower.items()},
                  {k: v[c] for k, v in result.pre_upper.items()}) for c in range(3)]
        possible = possible_classes(result.upper, 1, 3, 3)[0]
        full = check_partition(problem, lower[0], upper[0], cells)
        pruned = check_partition(problem, lower[0], upper[0], cells, possible=possible)
        assert pruned.status == full.status and pruned.solved <= full.solved
