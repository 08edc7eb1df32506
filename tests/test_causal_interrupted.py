"""SIGINT or SIGTERM during ``certgate verify causal-fairness``: the run ends at once with the
shares it reached, says ``stopped_by: interrupted`` and gives only a verdict those shares
prove. Before, the first signal ended it with ``error: interrupted`` (exit 2) and the
partitions of the minutes spent were lost.

The audit is the thin-slab network of ``test_causal_judged_stop`` judged at a threshold
equal (to the float) to its exact biased share, so it refines until its budget; the signal
is sent from a thread once the command's handlers are installed and the engine has run for a
second. The shares it reports must contain the exact truths (``Fraction``), and the run must
end within seconds of the signal, not at its 300-s budget.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from signal_sender import interrupted_run
from test_causal_judged_stop import slab_network, slab_population, slab_truths

from tests.bound_oracles import contains

ENGINE_RUNS_S = 1.0


@pytest.mark.parametrize(("signum", "executor", "measure"), [
    (signal.SIGINT, "local", "uniform"), (signal.SIGTERM, "process", "population")])
def test_a_signal_ends_causal_fairness_with_its_shares(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], signum: int, executor: str,
        measure: str) -> None:
    network, population = tmp_path / "slab.json", tmp_path / "population.json"
    network.write_text(json.dumps(slab_network()))
    population.write_text(json.dumps(slab_population()))
    uniform, weighted = slab_truths()
    truth = uniform if measure == "uniform" else weighted
    payload = interrupted_run(
        ["verify", "causal-fairness", "--model", str(network), "--protected", "s",
         "--population", str(population), "--measure", measure,
         "--max-biased-share", repr(float(truth)), "--timeout", "300",
         "--executor", executor, "--workers", "2", "--json"], signum, ENGINE_RUNS_S, capsys)
    assert payload["partitions"] > 0
    assert contains(*payload["biased_fraction"], uniform)
    assert contains(*payload["biased_fraction_population"], weighted)
