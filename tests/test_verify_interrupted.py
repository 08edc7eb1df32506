"""SIGINT or SIGTERM during a long PV run of ``certgate verify demographic-parity``: the run
ends with the bounds it reached, says ``interrupted`` and gives only a verdict those bounds
prove. Before, the first signal ended it with ``error: interrupted`` (exit 2) and the bounds
of the minutes spent were lost.

The command runs as a real process on the credit demo's fair classifier (exported to ONNX)
and population, at a threshold equal to the Monte Carlo ratio, so it cannot decide within
its budget; the signal is sent once the progress bar shows boxes bounded. The interval it
reports must contain the Monte Carlo ratio (200,000 draws, 5 standard errors).
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_pipeline_server import monte_carlo_ratio

from verifier.population import save_population

pytest_plugins = ["mlflow_server"]

ROOT = Path(__file__).resolve().parent.parent
NAMES = "age,income,debt_ratio,sex,housing_own,housing_rent"


def _wait_for(stream: int, marker: bytes, timeout_s: float) -> bytes:
    """What ``stream`` gives until ``marker`` appears in it (fails after ``timeout_s``)."""
    seen = b""
    deadline = time.monotonic() + timeout_s
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} on stderr within {timeout_s} s: {seen[-2000:]!r}"
        ready, _, _ = select.select([stream], [], [], left)
        if ready:
            chunk = os.read(stream, 65536)
            assert chunk, f"the command ended before {marker!r}: {seen[-2000:]!r}"
            seen += chunk
    return seen


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_pv_with_its_bounds(credit_demo, tmp_path: Path, signum: int) -> None:
    model = tmp_path / "fair.onnx"
    torch.onnx.export(credit_demo.fair.eval(), torch.zeros(1, 6), model, dynamo=False,
                      input_names=["x"])
    population = tmp_path / "population.json"
    save_population(credit_demo.population, population)
    ratio, se = monte_carlo_ratio(credit_demo.fair, credit_demo.population)
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline_steps", "verify", "demographic-parity",
         "--model", str(model), "--population", str(population), "--input-names", NAMES,
         "--protected", "sex", "--privileged", "1", "--favorable-class", "1",
         "--gamma", repr(min(ratio, 1.0)), "--timeout", "300"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert process.stdout is not None and process.stderr is not None
    try:
        _wait_for(process.stderr.fileno(), b" boxes", 120.0)
        time.sleep(1.0)
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    text = out.decode()
    assert process.returncode == 1, (text, err.decode()[-2000:])
    verdict = re.search(r"verdict: (\w+) \((\w+), (\d+) boxes", text)
    assert verdict is not None, text
    assert verdict.group(1) == "unknown" and verdict.group(2) == "interrupted"
    assert int(verdict.group(3)) > 0
    interval = re.search(r"ratio: \[([-\d.e+]+), ([-\d.e+]+)\]", text)
    assert interval is not None, text
    low, high = float(interval.group(1)), float(interval.group(2))
    assert low <= ratio + 5 * se and ratio - 5 * se <= high, (low, high, ratio, se)
    assert f"{signal.Signals(signum).name}: stopping with the bounds reached" in err.decode()
