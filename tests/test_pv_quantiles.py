"""PV's marginal quantile tables: every unbounded column's table computed in one mass call per
step is bit for bit the table of the column alone, and holds its levels (the cut points PV
splits unbounded sides at; soundness never depends on them, the boxes do)."""

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
