"""Box branching's uniform measure keeps the deadline while it lists the values of positive
probability: under a fitted Bayesian network each listing batch is an enclosure call, and a
wide integer column (a count or an amount over millions of integers) needs hundreds of them;
``verify monotonicity --timeout 60`` on a 200k-row table ran 5 minutes there."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from certgate.population_data import fit_population
from verifier.network import Layer, Network
from verifier.wmi import monotonicity
from verifier.wmi.measures import positive_values

BUDGET_S = 1.0
"""The run's time budget."""
SLACK_S = 1.0
"""What a run may take past it: one listing batch, PV's stop and the result's assembly."""


def test_the_listing_of_a_wide_integer_column_stops_at_the_deadline() -> None:
    """3,000,000 integers of ``count`` are 367 enclosure calls of about 25 ms (over 9 s);
    the run ends within the slack of its 1-s budget, timed out, with the only interval it
    proved, [0, 1], which holds any probability, and says where the time ran out."""
    rng = np.random.default_rng(0)
    rows = 400
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], rows),
                          "count": rng.integers(0, 3_000_000, rows),
                          "x": rng.normal(0.0, 1.0, rows)})
    population = fit_population(frame, protected="sex")
    # class 1 iff x + 1e-6·count > 0 (columns sex=F, sex=M, count, x)
    network = Network([
        Layer(np.array([[0.0, 0.0, 1e-6, 1.0], [0.0, 0.0, -1e-6, -1.0]]), np.zeros(2), "relu"),
        Layer(np.array([[1.0, -1.0], [-1.0, 1.0]]), np.zeros(2)),
    ])
    started = time.perf_counter()
    result = monotonicity(network, population, list(population.columns).index("x"),
                          stop_at=0.95, timeout_s=BUDGET_S, prove=True)
    elapsed = time.perf_counter() - started
    assert elapsed <= BUDGET_S + SLACK_S, elapsed
    assert result.timed_out and result.proven
    assert (result.probability_lower, result.probability_upper) == (0.0, 1.0)
    assert "uniform measure" in result.extra["setup_timed_out"]


class _CountedCalls:
    """A population that counts its interval-mass calls (every other attribute is its
    own)."""

    def __init__(self, population) -> None:
        self.population = population
        self.calls = 0

    def prob_boxes_interval(self, lower: np.ndarray, upper: np.ndarray):
        self.calls += 1
        return self.population.prob_boxes_interval(lower, upper)

    def __getattr__(self, name: str):
        return getattr(self.population, name)


def test_the_values_of_every_column_are_listed_in_one_pass() -> None:
    """The uniform measure lists the values of positive probability of every one-hot column
    and integer column; one enclosure call per column cost 0.4–1.7 s on a 200k-row table's
    fitted network, more than a 60-s budget over its one-hot columns. Listed together, the
    values are each column's own listing's (a point box's enclosure is its own whatever the
    batch), from one call for all of them."""
    rng = np.random.default_rng(3)
    rows = 600
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], rows),
                          "region": rng.choice(["north", "south", "east", "west"], rows),
                          "kids": rng.integers(0, 6, rows),
                          "x": rng.normal(0.0, 1.0, rows)})
    frame.loc[frame["region"] == "east", "kids"] = 0
    population = fit_population(frame, protected="sex")
    columns = list(population.columns)
    ranges = [(columns.index(name), 1.0, 1.0) for name in columns if "=" in name]
    ranges.append((columns.index("kids"), -3.0, 12.0))
    alone = [positive_values(population, [query])[0] for query in ranges]
    counted = _CountedCalls(population)
    together = positive_values(counted, ranges)
    assert counted.calls == 1
    assert len(together) == len(ranges)
    for one, many in zip(alone, together, strict=True):
        assert np.array_equal(one, many)
    assert np.array_equal(together[-1], np.arange(6.0))
