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
