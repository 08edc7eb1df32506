"""A stop requested during exact WMI (:mod:`verifier.stop_request`: the first SIGINT or
SIGTERM of a ``verify`` WMI verb) ends it as its deadline would: the solver reads every
deadline on a :func:`~verifier.stop_request.stoppable` clock. Before, the engine ignored the
request and the first signal ended the command with ``error: interrupted`` (exit 2), the
enumeration lost.

Oracles: the run stopped at clock reading ``k`` gives the same bits as the run whose
deadline passes at that reading (``test_wmi_deadline``'s sound-interval tests hold for it),
and dense Monte Carlo (400 000 pairs, ± 4 standard errors) lies in every interval; the
command's interval holds a Monte Carlo of its own uniform pairs."""

from __future__ import annotations

import math
import signal
from pathlib import Path

import numpy as np
import pytest
from signal_sender import interrupted_run

from tests.test_wmi_deadline import TickClock, inside, monotonicity_hits
from tests.test_wmi_root_limit import histograms, network
from verifier.convert import save_network
from verifier.population import save_population
from verifier.stop_request import request_stop, withdraw_stop
from verifier.wmi.engine import solve
from verifier.wmi.properties.monotonicity import monotonicity_queries

SAMPLES = 400_000


class StopAt(TickClock):
    """A :class:`TickClock` that requests a stop at its ``k``-th reading."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def __call__(self) -> float:
        now = super().__call__()
        if now >= self.k:
            request_stop()
        return now


@pytest.mark.parametrize("reading", [20, 60, 300, 800])
def test_a_stop_anywhere_in_the_run_ends_it_as_the_deadline_does(reading: int) -> None:
    """81 roots (three 3-bin histograms); a complete run reads the clock 1 058 times. A stop
    requested at reading ``k`` (no deadline) and a deadline ``k`` readings after the start
    end the run at the same reading: the same interval, timed out, holding Monte Carlo."""
    net, prior = network(), histograms(3)
    queries = monotonicity_queries(net, prior, 0, use_prior=True)
    try:
        stopped = solve(queries, clock=StopAt(reading))
    finally:
        withdraw_stop()
    at_deadline = solve(queries, timeout_s=float(reading), clock=TickClock())
    assert stopped.timed_out and not stopped.exact
    assert (stopped.probability_lower, stopped.probability_upper) == (
        at_deadline.probability_lower, at_deadline.probability_upper)
    inside(stopped, monotonicity_hits(net, prior, 3))


def _uniform_monotonicity(seed: int) -> tuple[float, float]:
    """Monte Carlo of monotonicity in ``a`` with uniform pairs on the box ``[0, 16]³``
    (the command's default): the share of ordered pairs (``a < a′``) that keep class 1, and
    its standard error."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 16.0, size=(SAMPLES, 3))
    other = rng.uniform(0.0, 16.0, size=SAMPLES)
    ordered = x[:, 0] < other
    moved = x[ordered].copy()
    moved[:, 0] = other[ordered]
    net = network()
    hits = ~((net.classify(x[ordered]) == 1) & (net.classify(moved) != 1))
    estimate = float(hits.mean())
    return estimate, math.sqrt(max(estimate * (1 - estimate), 1 / hits.size) / hits.size)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_a_wmi_verb_with_its_interval(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], signum: int) -> None:
    """``verify monotonicity`` at a threshold equal to the float probability runs to its
    120-s budget; the signal, sent once the command's handler is installed and the engine
    has run 3 s (in the float enumeration or in the box branching that proves it, by the
    machine's speed), ends it within seconds with its interval and ``stopped_by:
    interrupted``."""
    model, population = tmp_path / "net.json", tmp_path / "population.json"
    save_network(network(), model)
    save_population(histograms(6), population)
    payload = interrupted_run(
        ["verify", "monotonicity", "--model", str(model), "--population", str(population),
         "--feature", "a", "--min-probability", "0.9360761", "--timeout", "120", "--json"],
        signum, 3.0, capsys)
    estimate, error = _uniform_monotonicity(11)
    low, high = payload["probability_interval"]
    assert low - 4 * error <= estimate <= high + 4 * error, (low, high, estimate)
