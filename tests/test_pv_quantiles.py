"""PV's marginal quantile tables and the cuts of unbounded sides: every unbounded column's
table computed in one mass call per step, and the cuts of a round's one-sided intervals in one
mass call, are bit for bit the column's or interval's own (the cut points PV splits unbounded
sides at; soundness never depends on them, the boxes do)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_population_bayesnet import continuous_network

from verifier.population import BayesianNetwork, BayesNode, CPTRow, Discrete, Normal
from verifier.pv import population_domain
from verifier.pv.quantiles import QUANTILE_LEVELS, MarginalQuantiles


def _column_alone(quantiles: MarginalQuantiles, column: int) -> np.ndarray:
    """One column's table by its own bracket doubling and bisection, one level set per call."""
    levels = QUANTILE_LEVELS
    low, high = np.full(levels.size, -1.0), np.full(levels.size, 1.0)
    for _ in range(64):
        below = quantiles.cdf(column, low) > levels
        above = quantiles.cdf(column, high) < levels
        if not (below.any() or above.any()):
            break
        low[below] *= 2.0
        high[above] *= 2.0
    for _ in range(60):
        middle = (low + high) * 0.5
        take_high = quantiles.cdf(column, middle) >= levels
        high = np.where(take_high, middle, high)
        low = np.where(take_high, low, middle)
    return np.maximum.accumulate(high)


def _normal_network(seed: int) -> BayesianNetwork:
    """A binary root and two normal children whose rows depend on it, on different scales."""
    rng = np.random.default_rng(seed)
    share = float(rng.uniform(0.1, 0.9))

    def child(name: str, parents: list[str], scale: float) -> BayesNode:
        return BayesNode(name=name, parents=parents, cpt=[
            CPTRow(condition={"s": (value, value)}, distribution=Normal(
                mean=float(rng.normal(0.0, scale)), std=float(rng.uniform(0.1, 2.0) * scale)))
            for value in (0, 1)])

    return BayesianNetwork(nodes=[
        BayesNode(name="s", cpt=[CPTRow(distribution=Discrete(
            values=[0.0, 1.0], probabilities=[share, 1.0 - share]))]),
        child("x", ["s"], 1.0), child("y", ["s"], float(10.0 ** rng.integers(-2, 5))),
    ])


def _assert_tables_are_each_columns_own(network: BayesianNetwork) -> None:
    masses, domain = population_domain(network)
    quantiles = MarginalQuantiles(masses, domain)
    assert quantiles.values
    for column, table in quantiles.values.items():
        alone = _column_alone(quantiles, column)
        assert np.array_equal(table.view(np.int64), alone.view(np.int64))
        assert np.all(np.diff(table) >= 0)
        # the bisection keeps the upper bracket: each entry's upper CDF reaches its level
        reached = quantiles.cdf(column, table) >= QUANTILE_LEVELS
        assert reached[np.isfinite(table)].all()


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_quantile_tables_of_all_columns_at_once_are_each_columns_own(seed: int) -> None:
    _assert_tables_are_each_columns_own(_normal_network(seed))


def test_quantile_tables_with_a_latent_node_and_a_one_hot_child() -> None:
    _assert_tables_are_each_columns_own(continuous_network())


def _cut_alone(quantiles: MarginalQuantiles, column: int, lower: float, upper: float) -> float:
    """One interval's cut by its own mass call: the median for two infinite sides, else the
    quantile halving the marginal mass on the unbounded side (a step past the end if that
    quantile does not lie beyond it)."""
    table, levels = quantiles.values[column], QUANTILE_LEVELS
    if not np.isfinite(lower) and not np.isfinite(upper):
        return float(table[np.searchsorted(levels, 0.5)])
    if np.isfinite(lower):
        level = (quantiles.cdf(column, np.array([lower]))[0] + 1.0) * 0.5
        cut = table[min(int(np.searchsorted(levels, level)), table.size - 1)]
        return float(cut) if cut > lower else lower + max(1.0, abs(lower))
    level = quantiles.cdf(column, np.array([upper]))[0] * 0.5
    cut = table[max(int(np.searchsorted(levels, level, side="right")) - 1, 0)]
    return float(cut) if cut < upper else upper - max(1.0, abs(upper))


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_split_points_of_all_columns_at_once_are_each_intervals_own(seed: int) -> None:
    """Cuts of intervals on every unbounded column, with one or two infinite sides, computed
    together are bit for bit each one's own, and lie strictly inside their interval."""
    masses, domain = population_domain(_normal_network(seed))
    quantiles = MarginalQuantiles(masses, domain)
    rng = np.random.default_rng(seed)
    count = 40
    columns = rng.choice(np.array(sorted(quantiles.values)), size=count)
    ends = rng.normal(0.0, 5.0, size=count) * 10.0 ** rng.integers(-2, 4, size=count)
    side = rng.integers(0, 3, size=count)
    lower = np.where(side == 0, ends, -np.inf)  # side 0: [end, ∞), 1: (-∞, end], 2: both
    upper = np.where(side == 1, ends, np.inf)
    cuts = quantiles.split_points(columns, lower, upper)
    alone = np.array([_cut_alone(quantiles, int(c), a, b)
                      for c, a, b in zip(columns, lower, upper, strict=True)])
    assert np.array_equal(cuts.view(np.int64), alone.view(np.int64))
    assert np.all((cuts > lower) & (cuts < upper))
