"""Linear credit: CROWN's linear bounds hold pointwise (exact rational values), the
population's excess bound never exceeds the exact probability (brute-force enumeration of
random Bayesian networks, closed forms), and PV with linear credit keeps the exact answer
inside every interval."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import pytest
from adult_engine import needs_census
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import norm
from strategies import random_network
from test_population_bayesnet import enumerated_points, random_discrete_network

from benchmarks.adult_instances import (
    VARIABLES,
    encode,
    enumerate_points,
    fit_population,
    load_census,
)
from verifier.bounds import compute_bounds
from verifier.exact_arith import exact_outputs
from verifier.numerics import EPS
from verifier.population import BayesianNetwork, BayesNode, Categorical, CPTRow, Discrete, Normal
from verifier.population.excess import ExcessBounds
from verifier.population.model import PopulationModel
from verifier.population.schema import Feature


def _box_minimum(coefficients: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 groups: list[list[int]]) -> float:
    """``min_box(c·x)`` as the linear bounds define it: intervals, and allowed categories of
    each one-hot group (a category fits when its column may be 1 and the others 0)."""
    grouped = {c for group in groups for c in group}
    free = [c for c in range(lo.size) if c not in grouped]
    total = float(np.minimum(coefficients[free] * lo[free], coefficients[free] * hi[free]).sum())
    for group in groups:
        allowed = Categorical.category_mask(lo[None, group], hi[None, group])[0]
        if allowed.any():  # else the box holds no point
            total += float(coefficients[np.array(group)[allowed]].min())
    return total


def _exact_dot(a: np.ndarray, x: np.ndarray) -> Fraction:
    return sum((Fraction(float(c)) * Fraction(float(v)) for c, v in zip(a, x, strict=True)),
               Fraction(0))


def _exact_excess(coefficients: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  groups: list[list[int]]) -> Fraction:
    """``c·x − min_box(c·x)`` in rational arithmetic (the float one can round across ``τ``)."""
    grouped = {c for group in groups for c in group}
    total = _exact_dot(coefficients, x)
    for column in range(lo.size):
        if column not in grouped:
            total -= min(Fraction(float(coefficients[column])) * Fraction(float(lo[column])),
                         Fraction(float(coefficients[column])) * Fraction(float(hi[column])))
    for group in groups:
        allowed = Categorical.category_mask(lo[None, group], hi[None, group])[0]
        total -= min(Fraction(float(coefficients[c])) for c in np.array(group)[allowed])
    return total


# ------------------------------------------------------------------ linear bounds


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_linear_bounds_hold_at_every_sampled_point_in_exact_arithmetic(
    seed: int, grouped: bool
) -> None:
    rng = np.random.default_rng(seed)
    inputs = 5
    network = random_network(rng, [inputs, int(rng.integers(2, 7)), int(rng.integers(2, 5)), 2])
    groups = [[0, 1, 2]] if grouped else []
    lo = rng.uniform(-2.0, 0.0, size=(6, inputs))
    hi = lo + rng.uniform(0.0, 2.0, size=(6, inputs))
    if grouped:
        lo[:, :3] = 0.0
        hi[:, :3] = 1.0
        hi[:3, 0] = 0.0  # some boxes allow two categories only
    spec = np.array([[-1.0, 1.0], [1.0, 0.5]])
    result = compute_bounds(network, lo, hi, spec, "crown", groups=groups)
    linear = result.linear
    assert linear is not None
    for b in range(lo.shape[0]):
        points = rng.uniform(lo[b], hi[b], size=(25, inputs))
        if grouped:
            allowed = np.flatnonzero(Categorical.category_mask(lo[b:b + 1, :3], hi[b:b + 1, :3])[0])
            points[:, :3] = 0.0
            points[np.arange(25), rng.choice(allowed, 25)] = 1.0
        points = np.vstack([points, lo[b], hi[b]]) if not grouped else points
        for s in range(spec.shape[0]):
            a_low = linear.lower_coefficients[b, s]
            a_up = linear.upper_coefficients[b, s]
            low_min = Fraction(_box_minimum(a_low, lo[b], hi[b], groups))
            up_max = -Fraction(_box_minimum(-a_up, lo[b], hi[b], groups))
            for x in points:
                outputs = exact_outputs(network, x)
                value = sum(Fraction(float(c)) * y for c, y in zip(spec[s], outputs, strict=True))
                a_low_x = _exact_dot(a_low, x)
                a_up_x = _exact_dot(a_up, x)
                assert Fraction(linear.lower_value[b, s]) + a_low_x - low_min <= value
                assert value <= Fraction(linear.upper_value[b, s]) + a_up_x - up_max


def test_linear_bounds_are_crowns_before_the_ibp_intersection() -> None:
    rng = np.random.default_rng(3)
    network = random_network(rng, [3, 8, 2])
    lo = rng.uniform(-1.0, 0.0, size=(20, 3))
    hi = lo + rng.uniform(0.0, 1.0, size=(20, 3))
    result = compute_bounds(network, lo, hi, np.array([[-1.0, 1.0]]), "crown")
    assert result.linear is not None
    assert (result.lower[:, 0] >= result.linear.lower_value[:, 0]).all()
    assert (result.upper[:, 0] <= result.linear.upper_value[:, 0]).all()
    ibp = compute_bounds(network, lo, hi, np.array([[-1.0, 1.0]]), "ibp")
    assert ibp.linear is None


# ------------------------------------------------------------------ excess bounds


def _random_boxes(rng: np.random.Generator, specs: list[dict], count: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Boxes over the observed columns: integer columns cut inside their range, one-hot
    columns forced to 0 or left free."""
    lows, highs = [], []
    for spec in specs:
        if spec["latent"]:
            continue
        if spec["categorical"]:
            lo = np.zeros((count, spec["k"]))
            hi = (rng.random((count, spec["k"])) < 0.75).astype(float)
        else:
            ends = rng.integers(0, spec["k"], size=(count, 2)).astype(float)
            lo, hi = ends.min(axis=1, keepdims=True), ends.max(axis=1, keepdims=True)
            wide = rng.random(count) < 0.3
            lo[wide], hi[wide] = 0.0, spec["k"] - 1.0
        lows.append(lo)
        highs.append(hi)
    return np.hstack(lows), np.hstack(highs)


def _groups(specs: list[dict]) -> list[list[int]]:
    groups, offset = [], 0
    for spec in specs:
        if spec["latent"]:
            continue
        width = spec["k"] if spec["categorical"] else 1
        if spec["categorical"]:
            groups.append(list(range(offset, offset + width)))
        offset += width
    return groups


class _TailCases(NamedTuple):
    """24 random boxes with linear coefficients, and per box the enumerated points inside
    (``inside``), their float excess and a threshold at a random quantile of it."""

    lo: np.ndarray
    hi: np.ndarray
    coefficients: np.ndarray
    groups: list
    threshold: np.ndarray
    inside: list[np.ndarray]
    excess: list[np.ndarray]


def _tail_cases(rng: np.random.Generator, specs: list[dict], points: np.ndarray) -> _TailCases:
    lo, hi = _random_boxes(rng, specs, 24)
    coefficients = rng.normal(size=lo.shape) * rng.choice([0.0, 1.0], size=lo.shape, p=[0.2, 0.8])
    groups = _groups(specs)
    threshold = np.zeros(lo.shape[0])
    insides, excesses = [], []
    for b in range(lo.shape[0]):
        inside = np.flatnonzero(((points >= lo[b]) & (points <= hi[b])).all(axis=1))
        excess = points[inside] @ coefficients[b] - _box_minimum(coefficients[b], lo[b], hi[b],
                                                                groups)
        threshold[b] = float(np.quantile(excess, rng.uniform(0.0, 0.9))) if excess.size else 1.0
        threshold[b] = max(threshold[b], 1e-3)
        insides.append(inside)
        excesses.append(excess)
    return _TailCases(lo, hi, coefficients, groups, threshold, insides, excesses)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_excess_bound_never_exceeds_the_exact_probability(seed: int) -> None:
    network, specs = random_discrete_network(seed)
    points, weights = enumerated_points(specs)
    rng = np.random.default_rng(seed)
    lo, hi, coefficients, groups, threshold, insides, _ = _tail_cases(rng, specs, points)
    exact = np.zeros(lo.shape[0])
    for b, inside in enumerate(insides):
        exact[b] = sum(weights[i] for i in inside
                       if _exact_excess(coefficients[b], points[i], lo[b], hi[b], groups)
                       > Fraction(threshold[b]))
    bound = network.excess_lower(lo, hi, coefficients, threshold)
    assert (bound >= 0.0).all()
    assert (bound <= exact * (1.0 + 1e-12) + 1e-300).all()


def _independent_roots(rng: np.random.Generator, count: int, start: int
                       ) -> tuple[list[BayesNode], list[dict]]:
    """``count`` parentless nodes that no node reads (one cell each), integer or one-hot,
    with random rows, and their specs in the format of ``random_discrete_network``."""
    nodes, specs = [], []
    for index in range(start, start + count):
        k = int(rng.integers(2, 6))
        categorical = bool(rng.random() < 0.3)
        probabilities = rng.dirichlet(np.ones(k))
        if rng.random() < 0.3:
            probabilities[int(rng.integers(0, k))] = 0.0
            probabilities /= probabilities.sum()
        listed = probabilities.tolist()
        distribution = (Categorical(probabilities=listed) if categorical
                        else Discrete(values=list(range(k)), probabilities=listed))
        nodes.append(BayesNode(name=f"v{index}", cpt=[CPTRow(distribution=distribution)],
                               columns=[f"v{index}_{j}" for j in range(k)] if categorical
                               else None))
        specs.append({"k": k, "categorical": categorical, "latent": False,
                      "tables": [({}, probabilities)]})
    return nodes, specs


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_nodes_of_one_cell_binned_together_never_exceed_the_exact_probability(
    seed: int,
) -> None:
    """A random network with two or three more roots no node reads, whose factors are one entry
    per box (``scalar_nodes``, binned together on a finer grid): the bound stays below the
    exact tail probability of every box, and is never below the bound with each of those
    nodes binned alone (beyond the relative margins' 1e-9: the two read a node's mass by
    different sums, each a proven lower end)."""
    network, specs = random_discrete_network(seed)
    rng = np.random.default_rng(seed)
    extra, extra_specs = _independent_roots(rng, int(rng.integers(2, 4)), len(specs))
    network = BayesianNetwork(nodes=[*network.nodes, *extra])
    specs = [*specs, *extra_specs]
    assert len(network._excess.scalar_nodes) >= len(extra)
    points, weights = enumerated_points(specs)
    lo, hi, coefficients, groups, threshold, insides, excesses = _tail_cases(rng, specs, points)
    exact = np.zeros(lo.shape[0])
    for b, (inside, excess) in enumerate(zip(insides, excesses, strict=True)):
        # each point's side in floats where a rounding margin of the dot product, the box
        # minimum and their difference proves it (d columns), in Fractions otherwise
        scale = float(np.abs(coefficients[b]) @ np.maximum(np.abs(lo[b]), np.abs(hi[b])))
        margin = 4.0 * (lo.shape[1] + 2) * EPS * scale
        above = excess > threshold[b] + margin
        for i in np.flatnonzero(np.abs(excess - threshold[b]) <= margin):
            above[i] = _exact_excess(coefficients[b], points[inside[i]], lo[b], hi[b],
                                     groups) > Fraction(threshold[b])
        exact[b] = math.fsum(weights[inside[above]])
    bound = network.excess_lower(lo, hi, coefficients, threshold)
    assert (bound >= 0.0).all()
    assert (bound <= exact * (1.0 + 1e-12) + 1e-300).all()
    network._excess.__dict__["scalar_nodes"] = ()
    separate = network.excess_lower(lo, hi, coefficients, threshold)
    assert (bound >= separate * (1.0 - 1e-9)).all()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_boxes_holding_none_of_an_integer_nodes_values_get_zero(seed: int) -> None:
    """Every box cut to a gap between two values of one integer column holds no point: its
    bound is 0, also when that node takes its parents in and no box of a chunk holds any of
    its values (no (box, value) pair to bin)."""
    network, specs = random_discrete_network(seed)
    assume(network._excess.taken_in)
    points, _ = enumerated_points(specs)
    rng = np.random.default_rng(seed)
    lo, hi, coefficients, _, threshold, _, _ = _tail_cases(rng, specs, points)
    observed = [spec for spec in specs if not spec["latent"]]
    starts = np.cumsum([0] + [spec["k"] if spec["categorical"] else 1 for spec in observed])
    for spec, column in zip(observed, starts[:-1], strict=True):
        if spec["categorical"]:
            continue
        cut_lo, cut_hi = lo.copy(), hi.copy()
        cut_lo[:, column] = np.floor(lo[:, column]) + 0.25
        cut_hi[:, column] = cut_lo[:, column] + 0.5
        bound = network.excess_lower(cut_lo, cut_hi, coefficients, threshold)
        assert bound.tolist() == [0.0] * lo.shape[0]


def test_two_independent_nodes_binned_together_on_a_finer_grid_give_the_exact_tail() -> None:
    """x, y uniform on 0..9, τ = 9.5, 12 bins of h ≈ 9.5/12: on the grid of h/2 the fine
    bins ⌊2.526·x⌋ + ⌊2.526·y⌋ reach 24 for every pair with x + y ≥ 10 and for none below,
    so the bound is the exact 0.45, where one bin of h lost per node left pairs with
    x + y = 10 out."""
    pair = BayesianNetwork(nodes=[_uniform_integers("x", 10), _uniform_integers("y", 10)])
    assert pair._excess.scalar_nodes == (0, 1)
    lo, hi = np.array([[0.0, 0.0]]), np.array([[9.0, 9.0]])
    bound = pair.excess_lower(lo, hi, np.array([[1.0, 1.0]]), np.array([9.5]))[0]
    assert 0.45 * (1.0 - 1e-9) <= bound <= 0.45
    pair._excess.__dict__["scalar_nodes"] = ()
    separate = pair.excess_lower(lo, hi, np.array([[1.0, 1.0]]), np.array([9.5]))[0]
    assert separate < 0.45 * (1.0 - 1e-3)


def _uniform_integers(name: str, count: int) -> BayesNode:
    return BayesNode(name=name, cpt=[CPTRow(distribution=Discrete(
        values=list(range(count)), probabilities=[1.0 / count] * count))])


def test_excess_bound_is_exact_for_one_node_and_close_for_a_sum_of_two() -> None:
    single = BayesianNetwork(nodes=[_uniform_integers("x", 10)])
    lo, hi = np.array([[0.0]]), np.array([[9.0]])
    bound = single.excess_lower(lo, hi, np.array([[1.0]]), np.array([4.5]))[0]
    assert 0.5 * (1.0 - 1e-9) <= bound <= 0.5  # P(x >= 5), every such x in the top bin
    pair = BayesianNetwork(nodes=[_uniform_integers("x", 10), _uniform_integers("y", 10)])
    lo, hi = np.array([[0.0, 0.0]]), np.array([[9.0, 9.0]])
    bound = pair.excess_lower(lo, hi, np.array([[1.0, 1.0]]), np.array([9.5]))[0]
    # exact P(x + y >= 10) = 0.45; rounding each term down to a bin of width 9.5/16 loses
    # less than 1.2 in total, so every pair with x + y >= 12 (probability 0.28) is counted
    assert 0.28 * (1.0 - 1e-9) <= bound <= 0.45


def test_a_node_whose_values_cannot_be_listed_counts_as_zero_excess() -> None:
    network = BayesianNetwork(nodes=[
        _uniform_integers("x", 10),
        BayesNode(name="y", cpt=[CPTRow(distribution=Normal(mean=0.0, std=1.0))]),
    ])
    lo, hi = np.array([[0.0, -1.0]]), np.array([[9.0, 1.0]])
    threshold = 6.5
    bound = network.excess_lower(lo, hi, np.array([[1.0, 1.0]]), np.array([threshold]))[0]
    # exact: Σ_x P(x) P(y ∈ [−1, 1], x + y + 1 > τ)
    exact = sum(0.1 * max(0.0, norm.cdf(1.0) - norm.cdf(max(-1.0, threshold - 1.0 - x)))
                for x in range(10))
    in_box = norm.cdf(1.0) - norm.cdf(-1.0)
    assert bound <= exact
    assert bound >= 0.3 * in_box * (1.0 - 1e-9)  # x >= 7 alone passes τ


def test_excess_bound_is_zero_where_nothing_can_be_bounded() -> None:
    network = BayesianNetwork(nodes=[_uniform_integers("x", 10)])
    lo = np.array([[0.0], [0.0], [-np.inf], [0.0]])
    hi = np.array([[9.0], [9.0], [9.0], [9.0]])
    coefficients = np.array([[1.0], [np.nan], [1.0], [1.0]])
    threshold = np.array([np.inf, 1.0, 1.0, 20.0])  # unknown, NaN, infinite box, out of reach
    assert network.excess_lower(lo, hi, coefficients, threshold).tolist() == [0.0] * 4


def test_population_model_orders_columns_and_answers_zero_without_support() -> None:
    network = BayesianNetwork(nodes=[_uniform_integers("a", 4), _uniform_integers("b", 4)])
    model = PopulationModel(features=[Feature(name="b", kind="integer", domain=(0, 3)),
                                      Feature(name="a", kind="integer", domain=(0, 3))],
                            distribution=network)
    lo, hi = np.array([[0.0, 0.0]]), np.array([[3.0, 3.0]])
    # model order (b, a): weight only on b; b > 2.5 means b = 3
    bound = model.prob_excess_lower(lo, hi, np.array([[1.0, 0.0]]), np.array([2.5]))[0]
    assert 0.25 * (1.0 - 1e-9) <= bound <= 0.25
    empty = model.prob_excess_lower(np.array([[1.0, 0.0]]), np.array([[0.0, 3.0]]),
                                    np.array([[1.0, 1.0]]), np.array([0.5]))
    assert empty.tolist() == [0.0]


@pytest.mark.parametrize("coefficient", [2.0, -2.0])
def test_excess_bound_reads_the_box_minimum_on_either_side(coefficient: float) -> None:
    network = BayesianNetwork(nodes=[_uniform_integers("x", 10)])
    lo, hi = np.array([[2.0]]), np.array([[7.0]])
    bound = network.excess_lower(lo, hi, np.array([[coefficient]]), np.array([5.0]))[0]
    # excess 2·(x − 2) or 2·(7 − x) > 5 holds for 3 of the box's 6 values
    assert 0.3 * (1.0 - 1e-9) <= bound <= 0.3


def _parent_and_child(values: int) -> BayesianNetwork:
    """A categorical parent ``p`` (uniform over ``values`` categories, each its own cell) and
    an integer child ``y`` uniform over ``0..values−1`` whatever the parent."""
    parent = BayesNode(name="p", columns=[f"p_{j}" for j in range(values)], cpt=[
        CPTRow(distribution=Categorical(probabilities=[1.0 / values] * values))])
    rows = [CPTRow(condition={"p": (float(j), float(j))}, distribution=Discrete(
        values=list(range(values)), probabilities=[1.0 / values] * values))
        for j in range(values)]
    return BayesianNetwork(nodes=[parent, BayesNode(name="y", parents=["p"], cpt=rows)])


def test_a_child_reads_its_single_valued_parents_excess_in_its_own_bins() -> None:
    network = _parent_and_child(10)
    bounds = network._excess
    assert bounds.taken_in == {1: (0,)}
    lo, hi = np.zeros((1, 11)), np.array([[1.0] * 10 + [9.0]])
    coefficients = np.array([[*range(10), 1.0]])  # excess p + y
    bound = network.excess_lower(lo, hi, coefficients, np.array([9.5]))[0]
    exact = sum(1 for a in range(10) for b in range(10) if a + b > 9.5) / 100.0  # 0.45
    # integer sums: p + y > 9.5 means p + y ≥ 10 ≥ 12 bins of 9.5/12, so the pair's one bin
    # loses nothing; bins per node lose the pairs whose two remainders add up (0.43 left)
    assert exact * (1.0 - 1e-9) <= bound <= exact
    bounds.__dict__["taken_in"] = {}  # the same bound with one bin lost per node
    separate = network.excess_lower(lo, hi, coefficients, np.array([9.5]))[0]
    assert separate <= 0.43


@needs_census
@pytest.mark.parametrize("k", [4, 5])
def test_excess_bound_with_joint_bins_never_exceeds_the_exact_probability_on_adult(
    k: int,
) -> None:
    """Adult-k's fitted network, whose hours-per-week node takes in education (and marital
    status at k = 5), against every point of its population: the exact tail probability of
    the excess, each point's side decided in floats where a proven rounding margin allows
    and in Fractions otherwise. The oracle's point probabilities are within a relative
    1e-14 of the real ones (``enumerate_points``) and summed exactly (``math.fsum``)."""
    population = fit_population(*encode(load_census(), VARIABLES[:k]))
    network = population.distribution
    assert "hours-per-week" in {network.nodes[u].name for u in network._excess.taken_in}
    columns = list(population.columns)
    groups = [[columns.index(c) for c in node.observed_columns()]
              for node in network.nodes if node.categorical]
    points, weights = enumerate_points(population)
    rng = np.random.default_rng(k)
    count = 16
    pairs = rng.integers(0, points.shape[0], size=(count, 2))
    lo = np.minimum(points[pairs[:, 0]], points[pairs[:, 1]])
    hi = np.maximum(points[pairs[:, 0]], points[pairs[:, 1]])
    for group in groups:  # some one-hot groups left free
        hi[rng.random(count) < 0.5, group[0]:group[-1] + 1] = 1.0
    integers = [c for c in range(len(columns)) if not any(c in g for g in groups)]
    for c in integers:  # some integer columns widened to their whole range
        wide = rng.random(count) < 0.5
        lo[wide, c], hi[wide, c] = points[:, c].min(), points[:, c].max()
    coefficients = rng.normal(size=lo.shape)
    threshold = np.ones(count)
    exact = np.zeros(count)
    for b in range(count):
        inside = ((points >= lo[b]) & (points <= hi[b])).all(axis=1)
        x, w = points[inside], weights[inside]
        excess = x @ coefficients[b] - _box_minimum(coefficients[b], lo[b], hi[b], groups)
        threshold[b] = max(float(np.quantile(excess, rng.uniform(0.1, 0.9))), 1e-3)
        # |float − real| ≤ γ_{d+2}·Σ|c_j|·max(|lo_j|, |hi_j|) for the dot product, the box
        # minimum and their difference (d columns); within that, decide in Fractions
        scale = float(np.abs(coefficients[b]) @ np.maximum(np.abs(lo[b]), np.abs(hi[b])))
        margin = 4.0 * (lo.shape[1] + 2) * EPS * scale
        above = excess > threshold[b] + margin
        for i in np.flatnonzero(np.abs(excess - threshold[b]) <= margin):
            above[i] = _exact_excess(coefficients[b], x[i], lo[b], hi[b], groups) > Fraction(
                threshold[b])
        exact[b] = math.fsum(w[above])
    bound = population.prob_excess_lower(lo, hi, coefficients, threshold)
    assert (bound >= 0.0).all()
    assert (bound <= exact * (1.0 + 2e-14)).all()
    assert (bound > 0.0).sum() >= count // 4  # the test reaches boxes the bound credits


def _dense_binned_table(bounds: ExcessBounds, u: int, lo: np.ndarray, hi: np.ndarray,
                        coefficients: np.ndarray, width: np.ndarray, bins: int,
                        kept: dict[int, tuple[np.ndarray, np.ndarray]]) -> np.ndarray | None:
    """Node ``u``'s binned table the plain way: every (box, parent cells, value) entry
    binned, and each (box, parent cells, cell)'s weights added one value after another, in
    the order of the values; None when no entry reaches a bin."""
    listed = bounds.listed[u]
    parents = bounds.elimination.factors[u].variables[:-1]
    taken = bounds.taken_in[u]
    inside, own = bounds._excess(u, lo, hi, coefficients)
    batch = lo.shape[0]
    total = own.reshape(batch, *([1] * len(parents)), -1)
    for axis, p in enumerate(parents):
        if p in taken:
            per_cell = bounds._excess(p, lo, hi, coefficients)[1][
                :, np.argmax(bounds.listed[p].member, axis=1)]
            if p in kept:
                per_cell = np.take_along_axis(per_cell, kept[p][0], axis=1)
            shape = [batch] + [1] * (len(parents) + 1)
            shape[axis + 1] = per_cell.shape[1]
            total = total + per_cell.reshape(shape)
    quotient = total / width.reshape(batch, *([1] * (total.ndim - 1)))
    level = np.minimum(np.floor(quotient * (1.0 - (4.0 + 2.0 * len(taken)) * EPS)), bins)
    if not (level > 0).any():
        return None
    row_of = bounds._rows(u, kept, batch)
    weights = listed.probability_lower[:, None, :] * listed.member[None, :, :]
    weights = np.concatenate([weights, np.zeros_like(weights[:1])])
    chosen = weights[row_of]  # (B, parent cells…, cells, values)
    if u in kept:
        index, real = kept[u]
        chosen = np.stack([chosen[b][..., index[b], :] * real[b][:, None]
                           for b in range(batch)])
    level = np.broadcast_to(level, (*row_of.shape, inside.shape[1])).astype(np.int64)
    table = np.zeros((*chosen.shape[:-1], bins + 1))
    for entry in np.ndindex(*row_of.shape):
        for cell in range(chosen.shape[-2]):
            for value in np.flatnonzero(inside[entry[0]]):
                table[(*entry, cell, level[(*entry, value)])] += chosen[(*entry, cell, value)]
    return table


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_node_taking_in_parents_bins_only_held_values_into_the_plain_table_bit_for_bit(
    seed: int,
) -> None:
    """The binned table of a node that takes in parents, built from the (box, value) pairs
    each box holds, equals the plain per-entry sum over every value in value order, bit for
    bit (signed zeros included), and is skipped exactly when no entry reaches a bin."""
    network, specs = random_discrete_network(seed)
    bounds = network._excess
    assume(bounds.taken_in)
    rng = np.random.default_rng(seed)
    lo, hi = _random_boxes(rng, specs, 12)
    coefficients = rng.normal(size=lo.shape)
    width = rng.uniform(0.05, 1.0, size=lo.shape[0])
    kept = bounds._kept(bounds._reached_cells(lo, hi))
    for u in bounds.taken_in:
        found = bounds._bins(u, bounds._excesses(lo, hi, coefficients), width, 12, kept)
        plain = _dense_binned_table(bounds, u, lo, hi, coefficients, width, 12, kept)
        assert (found is None) == (plain is None)
        if found is not None:
            table = bounds._binned_table(u, found, 12, kept)
            assert table.shape == plain.shape
            assert np.array_equal(table.view(np.int64), plain.view(np.int64))
