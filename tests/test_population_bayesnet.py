"""Bayesian networks: exact enumeration of small discrete networks, Monte Carlo for continuous
ones, latent nodes, and the validation of CPT partitions."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from verifier.population import (
    BayesianNetwork,
    BayesNode,
    Categorical,
    CPTRow,
    Discrete,
    Mixture,
    Normal,
    Uniform,
    distribution_from_json,
)
from verifier.wmi.terms import TooManyTerms, prior_terms

INF = np.inf


def random_discrete_network(seed: int, dyadic: bool = False
                            ) -> tuple[BayesianNetwork, list[dict]]:
    """A random network of integer nodes (values 0..k-1) and one-hot categorical nodes, some
    latent, with CPT rows that cut each parent's range into consecutive intervals;
    ``dyadic``: every probability a multiple of 1/1024 (each row sums to 1 exactly, so the
    tables are the exact distribution a ``Fraction`` oracle reads)."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(2, 6))
    specs: list[dict] = []
    nodes = []
    for index in range(count):
        name = f"v{index}"
        categorical = bool(rng.random() < 0.35)
        k = int(rng.integers(2, 4))
        latent = bool(rng.random() < 0.3) and index < count - 1
        candidates = list(range(index))
        parents = sorted(rng.choice(candidates, size=min(len(candidates), int(rng.integers(0, 3))),
                                    replace=False).tolist()) if candidates else []
        pieces = {}
        for p in parents:
            size = specs[p]["k"]
            cut = int(rng.integers(0, size))
            if cut == 0 or rng.random() < 0.2:
                pieces[p] = [None]
            else:
                low_end = None if rng.random() < 0.5 else 0.0
                high_end = None if rng.random() < 0.5 else float(size - 1)
                pieces[p] = [(low_end, float(cut - 1)), (float(cut), high_end)]
        rows = []
        tables = []
        for combination in itertools.product(*(pieces[p] for p in parents)):
            condition = {f"v{p}": piece for p, piece in zip(parents, combination, strict=True)
                         if piece is not None}
            probabilities = rng.dirichlet(np.ones(k))
            if rng.random() < 0.3:
                probabilities[int(rng.integers(0, k))] = 0.0
                probabilities /= probabilities.sum()
            if dyadic:
                probabilities = rng.multinomial(1024, probabilities) / 1024
            probabilities_list = probabilities.tolist()
            distribution = (Categorical(probabilities=probabilities_list) if categorical
                            else Discrete(values=list(range(k)), probabilities=probabilities_list))
            rows.append(CPTRow(condition=condition, distribution=distribution))
            tables.append((condition, probabilities))
        columns = [f"{name}_{j}" for j in range(k)] if categorical and not latent else None
        nodes.append(BayesNode(name=name, parents=[f"v{p}" for p in parents], latent=latent,
                               columns=columns, cpt=rows))
        specs.append({"k": k, "categorical": categorical, "latent": latent, "tables": tables})
    if all(spec["latent"] for spec in specs):
        specs[-1]["latent"] = False
    return BayesianNetwork(nodes=nodes), specs


def joint_table(specs: list[dict], number: type = float) -> list[tuple[tuple[int, ...], Any]]:
    """Every value combination with its probability (brute force over the chain rule), each
    table entry read as a ``number`` (``Fraction``: the exact product of the floats)."""
    table = []
    for values in itertools.product(*(range(spec["k"]) for spec in specs)):
        probability = number(1)
        for index, spec in enumerate(specs):
            matching = [
                probs for condition, probs in spec["tables"]
                if all((lo is None or values[int(p[1:])] >= lo) and
                       (hi is None or values[int(p[1:])] <= hi)
                       for p, (lo, hi) in condition.items())
            ]
            assert len(matching) == 1
            probability *= number(matching[0][values[index]])
        table.append((values, probability))
    return table


def observed_vector(specs: list[dict], values: tuple[int, ...]) -> np.ndarray:
    parts = []
    for spec, value in zip(specs, values, strict=True):
        if spec["latent"]:
            continue
        parts.append(np.eye(spec["k"])[value] if spec["categorical"] else [float(value)])
    return np.concatenate(parts)


def enumerated_points(specs: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Every value combination as an observed input vector, with its probability."""
    table = joint_table(specs)
    points = np.array([observed_vector(specs, values) for values, _ in table])
    return points, np.array([p for _, p in table])


@given(st.integers(0, 2**32 - 1))
def test_box_probabilities_equal_enumeration_of_the_joint_table(seed: int) -> None:
    network, specs = random_discrete_network(seed)
    points, weights = enumerated_points(specs)
    rng = np.random.default_rng(seed)
    ends = np.array([-INF, -0.5, 0.0, 0.5, 1.0, 2.0, INF])
    lo = rng.choice(ends, size=(64, network.dimension))
    hi = np.maximum(lo, rng.choice(ends, size=(64, network.dimension)))
    lo[0], hi[0] = -INF, INF
    inside = ((points[None] >= lo[:, None]) & (points[None] <= hi[:, None])).all(axis=2)
    expected = inside.astype(float) @ weights
    np.testing.assert_allclose(network.prob_boxes(lo, hi), expected, rtol=1e-12, atol=1e-15)
    lower, upper = network.prob_boxes_interval(lo, hi)
    oracle_rounding = 1e-14 * expected + 1e-16  # the float64 sum of the joint table itself
    assert (lower <= expected + oracle_rounding).all()
    assert (expected - oracle_rounding <= upper).all()


def latent_mixture_network() -> BayesianNetwork:
    return BayesianNetwork(nodes=[
        BayesNode(name="z", latent=True, cpt=[
            CPTRow(distribution=Discrete(values=[0, 1], probabilities=[0.3, 0.7]))]),
        BayesNode(name="x", parents=["z"], cpt=[
            CPTRow(condition={"z": (0, 0)}, distribution=Normal(mean=-2.0, std=1.0)),
            CPTRow(condition={"z": (1, 1)}, distribution=Normal(mean=3.0, std=0.5))]),
    ])


def test_latent_node_is_integrated_out_like_a_mixture() -> None:
    network = latent_mixture_network()
    mixture = Mixture(weights=[0.3, 0.7], components=[Normal(mean=-2.0, std=1.0),
                                                        Normal(mean=3.0, std=0.5)])
    assert network.column_names() == ("x",)
    rng = np.random.default_rng(0)
    lo = rng.normal(0, 3, size=(500, 1))
    hi = lo + rng.exponential(2, size=(500, 1))
    np.testing.assert_allclose(network.prob_boxes(lo, hi), mixture.prob_boxes(lo, hi),
                               rtol=1e-14, atol=1e-17)


def continuous_network() -> BayesianNetwork:
    """Continuous parents with step dependencies, a latent categorical and a one-hot child."""
    return BayesianNetwork(nodes=[
        BayesNode(name="g", latent=True, cpt=[CPTRow(distribution=Categorical(
            probabilities=[0.2, 0.5, 0.3]))]),
        BayesNode(name="u", parents=["g"], cpt=[
            CPTRow(condition={"g": (0, 1)}, distribution=Normal(mean=0.0, std=1.0)),
            CPTRow(condition={"g": (2, 2)}, distribution=Uniform(lower=1.0, upper=4.0))]),
        BayesNode(name="c", parents=["u"], columns=["c0", "c1"], cpt=[
            CPTRow(condition={"u": (None, 0.5)},
                   distribution=Categorical(probabilities=[0.8, 0.2])),
            CPTRow(condition={"u": (0.5, None)},
                   distribution=Categorical(probabilities=[0.3, 0.7]))]),
        BayesNode(name="w", parents=["u", "c"], cpt=[
            CPTRow(condition={"u": (None, 1.0), "c": (0, 0)},
                   distribution=Normal(mean=1.0, std=2.0)),
            CPTRow(condition={"u": (1.0, None), "c": (0, 0)},
                   distribution=Normal(mean=-1.0, std=0.5)),
            CPTRow(condition={"c": (1, 1)}, distribution=Uniform(lower=-3.0, upper=3.0))]),
    ])


def test_continuous_network_agrees_with_a_million_samples() -> None:
    network = continuous_network()
    assert network.column_names() == ("u", "c0", "c1", "w")
    n = 1_000_000
    samples = network.sample(n, np.random.default_rng(2024))
    lo = np.array([[-INF, -INF, -INF, -INF], [0.0, 0, 1, -INF], [-1.0, 1, 0, 0.0],
                   [0.5, 0, 0, -1.0], [2.0, 0, 1, -INF], [-INF, -INF, -INF, 1.5]])
    hi = np.array([[0.5, INF, INF, INF], [1.0, 0, 1, 0.5], [1.5, 1, 0, 2.0],
                   [3.0, 1, 1, 1.0], [INF, 0, 1, 2.5], [0.0, INF, INF, INF]])
    probabilities = network.prob_boxes(lo, hi)
    inside = ((samples[:, None, :] >= lo[None]) & (samples[:, None, :] <= hi[None])).all(axis=2)
    frequencies = inside.mean(axis=0)
    error = np.sqrt(probabilities * (1 - probabilities) / n)
    assert (np.abs(frequencies - probabilities) <= 4 * error).all(), (frequencies, probabilities)


def test_regimes_are_pruned_structurally() -> None:
    network = continuous_network()
    # 1 · 2 · 2 · 3 = 12 row combinations. Dropped: u normal with c's "u <= 0.5" and w's
    # "u >= 1" (empty); u uniform on [1, 4] with c's "u <= 0.5" (two combinations: no mass);
    # u uniform with c's "u >= 0.5" and w's "u <= 1" (the single point u = 1, no mass).
    assert network.regime_count == 7


def node(name, parents, rows, **extra):
    return {"name": name, "parents": parents, "cpt": rows, **extra}


BINARY = {"kind": "discrete", "values": [0, 1], "probabilities": [0.5, 0.5]}
NORMAL = {"kind": "normal", "mean": 0.0, "std": 1.0}


def network(*nodes) -> dict:
    return {"kind": "bayesian_network", "nodes": list(nodes)}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (network(node("s", [], [{"distribution": BINARY}]),
                 node("x", ["s"], [{"condition": {"s": [0, 0]}, "distribution": NORMAL}])),
         r"node 'x': the region s = 1 is not covered"),
        (network(node("s", [], [{"distribution": BINARY}]),
                 node("x", ["s"], [{"condition": {"s": [0, 1]}, "distribution": NORMAL},
                                   {"condition": {"s": [1, 1]}, "distribution": NORMAL}])),
         r"node 'x': CPT rows \[0, 1\] overlap on the region s = 1"),
        (network(node("u", [], [{"distribution": NORMAL}]),
                 node("x", ["u"], [{"condition": {"u": [None, 0]}, "distribution": NORMAL},
                                   {"condition": {"u": [1, None]}, "distribution": NORMAL}])),
         r"node 'x': the region u in \(0, 1\) is not covered"),
        (network(node("u", [], [{"distribution": NORMAL}]),
                 node("x", ["u"], [{"condition": {"u": [None, 1]}, "distribution": NORMAL},
                                   {"condition": {"u": [0, None]}, "distribution": NORMAL}])),
         r"node 'x': CPT rows \[0, 1\] overlap on the region u in \(0, 1\)"),
        (network(node("x", ["s"], [{"distribution": NORMAL}]),
                 node("s", [], [{"distribution": BINARY}])),
         "not defined before it"),
        (network(node("s", [], [{"distribution": BINARY}]),
                 node("x", [], [{"condition": {"s": [0, 0]}, "distribution": NORMAL}])),
         "conditions on non-parents"),
        (network(node("x", [], [{"distribution": NORMAL}, {"distribution": NORMAL}])),
         r"overlap on the region the whole space"),
        (network(node("z", [], [{"distribution": NORMAL}], latent=True, columns=["a"])),
         "latent and cannot occupy columns"),
        (network(node("z", [], [{"distribution": {"kind": "categorical",
                                                  "probabilities": [0.5, 0.5]}}])),
         "occupies 1 columns but its values need 2"),
        (network(node("x", [], [{"distribution": {
            "kind": "product", "factors": [{"columns": ["a"], "distribution": NORMAL}]}}])),
         "not a 1-D distribution"),
        (network(node("x", [], [{"distribution": NORMAL}]),
                 node("x", [], [{"distribution": NORMAL}])),
         "used twice"),
        (network(node("s", [], [{"distribution": BINARY}]),
                 node("x", ["s"], [{"condition": {"s": [1, 0]}, "distribution": NORMAL}])),
         "condition on 's' is empty"),
    ],
)
def test_invalid_networks_name_node_and_region(document: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        distribution_from_json(document)


def test_shared_endpoints_are_fine_for_continuous_parents_and_gaps_without_mass() -> None:
    shared = network(
        node("u", [], [{"distribution": NORMAL}]),
        node("x", ["u"], [{"condition": {"u": [None, 0.0]}, "distribution": NORMAL},
                          {"condition": {"u": [0.0, None]}, "distribution": NORMAL}]),
    )
    integer_gap = network(
        node("s", [], [{"distribution": BINARY}]),
        node("x", ["s"], [{"condition": {"s": [None, 0]}, "distribution": NORMAL},
                          {"condition": {"s": [1, None]}, "distribution": NORMAL}]),
    )
    for document in (shared, integer_gap):
        model = distribution_from_json(document)
        total = model.prob_boxes(np.full(2, -INF), np.full(2, INF))[0]
        assert total == pytest.approx(1.0, abs=1e-15)


def test_a_parent_with_atoms_and_a_density_is_enclosed_on_both_sides_of_a_cut() -> None:
    """Parent ``x``: half a point mass at 5, half N(0, 1); its child reads ``x <= 0`` / ``x >= 0``.
    The gap cells around the cut at 0 have open ends there; the enclosure must contain the
    closed form ``P(x ∈ [lo, hi]) · P(y ∈ box_y | side)`` summed over the sides."""
    from scipy.stats import norm

    x = Mixture(weights=[0.5, 0.5], components=[
        Discrete(values=[5.0], probabilities=[1.0]), Normal(mean=0.0, std=1.0)])
    network = BayesianNetwork(nodes=[
        BayesNode(name="x", cpt=[CPTRow(distribution=x)]),
        BayesNode(name="y", parents=["x"], cpt=[
            CPTRow(condition={"x": (None, 0.0)},
                   distribution=Discrete(values=[0, 1], probabilities=[0.2, 0.8])),
            CPTRow(condition={"x": (0.0, None)},
                   distribution=Discrete(values=[0, 1], probabilities=[0.6, 0.4])),
        ]),
    ])
    boxes = [((-1.0, 1.0), (1.0, 1.0)), ((0.0, 6.0), (0.0, 0.0)), ((-INF, 0.0), (0.0, 1.0)),
             ((-2.0, 5.0), (1.0, 1.0))]
    lo = np.array([[b[0][0], b[1][0]] for b in boxes])
    hi = np.array([[b[0][1], b[1][1]] for b in boxes])
    lower, upper = network.prob_boxes_interval(lo, hi)
    for index, ((a, b), (c, d)) in enumerate(boxes):
        left = 0.5 * (norm.cdf(min(b, 0.0)) - norm.cdf(a)) if a < 0.0 else 0.0
        right = 0.5 * (norm.cdf(b) - norm.cdf(max(a, 0.0))) if b > 0.0 else 0.0
        right += 0.5 if a <= 5.0 <= b else 0.0
        y_left = sum(p for v, p in ((0, 0.2), (1, 0.8)) if c <= v <= d)
        y_right = sum(p for v, p in ((0, 0.6), (1, 0.4)) if c <= v <= d)
        expected = left * y_left + right * y_right
        assert lower[index] - 1e-12 <= expected <= upper[index] + 1e-12
        assert upper[index] - lower[index] < 1e-9


@given(st.integers(0, 2**32 - 1))
def test_point_probabilities_equal_the_joint_table(seed: int) -> None:
    """Single points take the chain-rule path (networks without latent nodes) or variable
    elimination (with them); both must give every point of the joint table its probability,
    and points off the support probability 0."""
    network, specs = random_discrete_network(seed)
    table = joint_table(specs)
    observed: dict[tuple, float] = {}
    for values, probability in table:
        key = tuple(observed_vector(specs, values))
        observed[key] = observed.get(key, 0.0) + probability
    points = np.array(list(observed))
    expected = np.array(list(observed.values()))
    lower, upper = network.prob_boxes_interval(points, points)
    oracle_rounding = 1e-14 * expected + 1e-16
    assert (lower <= expected + oracle_rounding).all()
    assert (expected - oracle_rounding <= upper).all()
    off = points.copy()
    integer_columns = [c for c, flag in enumerate(network.integer_columns()) if flag]
    off[:, integer_columns[0]] = 7.0  # no node takes the value 7
    assert (network.prob_boxes_interval(off, off)[1] == 0.0).all()


def support_of_table(specs: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The exact support hull: per observed node, the values of positive probability in the
    joint table (a categorical node's columns by the one-hot hull rule)."""
    charged = [p > 0 for _, p in joint_table(specs)]
    values = [v for (v, _), keep in zip(joint_table(specs), charged, strict=True) if keep]
    lows, highs = [], []
    for index, spec in enumerate(specs):
        if spec["latent"]:
            continue
        seen = sorted({v[index] for v in values})
        if spec["categorical"]:
            hot = np.isin(np.arange(spec["k"]), seen)
            lows.append(np.where(hot & (len(seen) == 1), 1.0, 0.0))
            highs.append(hot.astype(float))
        else:
            lows.append([float(seen[0])])
            highs.append([float(seen[-1])])
    return np.concatenate(lows), np.concatenate(highs)


@given(st.integers(0, 2**32 - 1))
def test_support_is_the_hull_of_the_positive_points_of_the_joint_table(seed: int) -> None:
    network, specs = random_discrete_network(seed)
    lower, upper = network.support()
    expected_lower, expected_upper = support_of_table(specs)
    np.testing.assert_array_equal(lower, expected_lower)
    np.testing.assert_array_equal(upper, expected_upper)


def test_continuous_support_is_the_hull_of_the_positive_regimes() -> None:
    network = continuous_network()
    plan = network._plan
    hulls = {}
    for u, node in enumerate(network.nodes):
        if node.categorical:
            continue
        parts = [node.cpt[r].distribution.support_in(a, b) for r, a, b in zip(
            plan.regime_rows[:, u], plan.regime_lo[:, u], plan.regime_hi[:, u], strict=True)]
        parts = [part for part in parts if part is not None]
        hulls[node.name] = (min(p[0] for p in parts), max(p[1] for p in parts))
    lower, upper = network.support()
    names = network.column_names()
    for name, (low, high) in hulls.items():
        assert (lower[names.index(name)], upper[names.index(name)]) == (low, high)


def binary_chain(length: int) -> tuple[BayesianNetwork, list[dict]]:
    """``v0 → v1 → …``: binary nodes, each row's probabilities depending on the parent."""
    rng = np.random.default_rng(length)
    nodes, specs = [], []
    for index in range(length):
        parents = [f"v{index - 1}"] if index else []
        pieces = [(None, 0.0), (1.0, None)] if index else [None]
        rows, tables = [], []
        for piece in pieces:
            condition = {parents[0]: piece} if piece is not None else {}
            probabilities = rng.dirichlet(np.ones(2))
            rows.append(CPTRow(condition=condition,
                               distribution=Discrete(values=[0, 1],
                                                     probabilities=probabilities.tolist())))
            tables.append((condition, probabilities))
        nodes.append(BayesNode(name=f"v{index}", parents=parents, cpt=rows))
        specs.append({"k": 2, "categorical": False, "latent": False, "tables": tables})
    return BayesianNetwork(nodes=nodes), specs


def test_a_network_with_more_regimes_than_can_be_listed_loads_and_answers_exactly() -> None:
    # 2^17 row combinations: more than the regime enumeration lists, which only weighted
    # model integration needs (it refuses the prior, naming why).
    network, specs = binary_chain(18)
    rng = np.random.default_rng(7)
    lo = rng.choice([-INF, 0.0, 1.0], size=(32, 18))
    hi = np.maximum(lo, rng.choice([0.0, 1.0, INF], size=(32, 18)))
    lo[0], hi[0] = -INF, INF
    points = np.array(list(itertools.product((0.0, 1.0), repeat=18)))
    weights = np.ones(len(points))
    for index, spec in enumerate(specs):
        (_, first), (_, second) = spec["tables"] if index else (spec["tables"][0],) * 2
        parent = points[:, index - 1] if index else np.zeros(len(points))
        table = np.where(parent[:, None] == 0, first[None, :], second[None, :])
        weights *= table[np.arange(len(points)), points[:, index].astype(int)]
    inside = ((points[None] >= lo[:, None]) & (points[None] <= hi[:, None])).all(axis=2)
    expected = inside.astype(float) @ weights
    lower, upper = network.prob_boxes_interval(lo, hi)
    rounding = 1e-13 * expected + 1e-16  # the float64 sum of the 2^18 products itself
    assert (lower <= expected + rounding).all() and (expected - rounding <= upper).all()
    np.testing.assert_allclose(network.prob_boxes(lo, hi), expected, rtol=1e-11, atol=1e-15)
    np.testing.assert_array_equal(network.support()[0], np.zeros(18))
    np.testing.assert_array_equal(network.support()[1], np.ones(18))
    with pytest.raises(ValueError, match="regimes"):
        network.regime_count  # noqa: B018


def test_weighted_model_integration_refuses_a_network_whose_regimes_cannot_be_listed() -> None:
    network, _ = binary_chain(18)
    with pytest.raises(TooManyTerms, match="regimes cannot be listed"):
        prior_terms(network)
