"""No run loses its result to what it shows: a progress display that fails is dropped (the run
goes on and reports), every verb that shows progress takes ``--no-progress`` (as README says),
and with ``--json`` stdout holds exactly one JSON object even when a third-party library
writes to the process's stdout file descriptor (HiGHS's banner) or logs a traceback (torch
on a corrupt ``.pt2``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from strategies import random_network
from tqdm import tqdm

from pipeline_steps import progress
from pipeline_steps.cli import build_parser, main
from verifier.convert import save_network
from verifier.network import Layer, Network
from verifier.population import (
    Factor,
    Feature,
    PopulationModel,
    Product,
    Uniform,
    load_population,
    save_population,
)

ROOT = Path(__file__).resolve().parents[1]
CREDIT = ROOT / "examples" / "population_credit.json"


@pytest.fixture
def credit_network(tmp_path: Path) -> Path:
    population = load_population(CREDIT)
    network = random_network(np.random.default_rng(3), [population.dimension, 8, 2])
    network = Network(network.layers, list(population.columns), ["deny", "grant"])
    path = tmp_path / "credit.json"
    save_network(network, path)
    return path


@pytest.fixture
def linear(tmp_path: Path) -> dict[str, Path]:
    """A one-logit network a − b over two uniform columns (WMI verbs, closed forms)."""
    save_network(Network([Layer(np.array([[1.0, -1.0]]), np.array([0.0]))], ["a", "b"],
                         ["logit"]), tmp_path / "net.json")
    save_population(PopulationModel(
        features=[Feature(name="a", kind="continuous"), Feature(name="b", kind="continuous")],
        distribution=Product(factors=[
            Factor(columns=["a"], distribution=Uniform(lower=0, upper=1)),
            Factor(columns=["b"], distribution=Uniform(lower=0, upper=1))])),
        tmp_path / "pop.json")
    return {"net": tmp_path / "net.json", "pop": tmp_path / "pop.json"}


def parity_args(network: Path) -> list[str]:
    return ["verify", "demographic-parity", "--model", str(network), "--population",
            str(CREDIT), "--protected", "owns_home", "--privileged", "1",
            "--favorable-class", "1", "--gamma", "0.5", "--timeout", "5"]


def test_a_failing_progress_display_never_loses_the_result(
        credit_network: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """tqdm raising while it draws (as its own format does once ``n`` passes ``total``: it
    sets ``total`` to None) is dropped with one warning; the verdict is still printed."""

    def broken(*args: object, **kwargs: object) -> str:
        raise TypeError("unsupported format string passed to NoneType.__format__")

    monkeypatch.setattr(tqdm, "format_meter", staticmethod(broken))
    monkeypatch.setattr(progress, "TICK_S", 0.0)
    capsys.readouterr()
    code = main(parity_args(credit_network))
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    assert "verdict:" in captured.out and "ratio: [" in captured.out
    assert "Traceback" not in captured.err and "internal error" not in captured.err
    assert captured.err.count("progress display failed") == 1


def test_a_bar_past_its_total_still_draws(capsys: pytest.CaptureFixture[str]) -> None:
    """PV's last round ends after the budget: a bar counting seconds of the budget gets past
    its total, where tqdm drops the total; drawing it must not fail."""
    bar = progress.TimeProgress("parity", enabled=True, budget_s=1.0)
    bar.bar.update(3.0)
    bar.bar.refresh()
    bar.close()
    assert "progress display failed" not in capsys.readouterr().err


PROGRESS_VERBS = {
    ("verify", "demographic-parity"): ["--model", "m.json", "--population", "p.json",
                                       "--protected", "s", "--privileged", "1",
                                       "--favorable-class", "1", "--gamma", "0.8"],
    ("verify", "probability"): ["--model", "m.json", "--population", "p.json", "--spec", "s"],
    ("verify", "causal-fairness"): ["--model", "m.json", "--protected", "s"],
    ("verify", "monotonicity"): ["--model", "m.json", "--population", "p.json",
                                 "--feature", "x"],
    ("verify", "noise-robustness"): ["--model", "m.json", "--population", "p.json",
                                     "--features", "x", "--noise-uniform", "-1", "1"],
    ("verify", "equivalence"): ["--model", "m.json", "--population", "p.json",
                                "--surrogate", "t.pkl"],
    ("verify", "local-robustness"): ["--model", "m.json", "--population", "p.json",
                                     "--center", "0,0", "--epsilon", "0.1"],
    ("audit",): ["--config", "c.yaml"],
    ("run",): ["--config", "c.yaml"],
}


@pytest.mark.parametrize("verb", sorted(PROGRESS_VERBS), ids=" ".join)
def test_every_verb_that_shows_progress_takes_no_progress(verb: tuple[str, ...]) -> None:
    argv = [*verb, *PROGRESS_VERBS[verb], "--no-progress"]
    args = build_parser(argv).parse_args(argv)
    assert args.no_progress is True


def test_no_progress_hides_the_bar(credit_network: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "TICK_S", 0.0)
    capsys.readouterr()
    code = main([*parity_args(credit_network), "--no-progress"])
    captured = capsys.readouterr()
    assert code in (0, 1) and "verdict:" in captured.out
    assert "boxes" not in captured.err, captured.err


def certgate(*argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process (third-party libraries write to file descriptor 1 there)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pipeline_steps", *argv], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=240)


@pytest.mark.parametrize("verb", [["monotonicity", "--feature", "b"],
                                  ["local-robustness", "--center", "0.5,0.5", "--epsilon",
                                   "0.1"]], ids=lambda verb: verb[0])
def test_json_stdout_is_one_object_although_highs_prints_a_banner(
        linear: dict[str, Path], verb: list[str]) -> None:
    done = certgate("verify", verb[0], "--model", str(linear["net"]), "--population",
                    str(linear["pop"]), *verb[1:], "--json")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    assert 0.0 <= json.loads(lines[0])["probability"] <= 1.0


def test_a_corrupt_pt2_is_one_line_naming_the_file(linear: dict[str, Path],
                                                   tmp_path: Path) -> None:
    corrupt = tmp_path / "model.pt2"
    corrupt.write_bytes(b"PK\x03\x04 this is not an archive")
    done = certgate("verify", "monotonicity", "--model", str(corrupt), "--population",
                    str(linear["pop"]), "--feature", "b", "--json")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("certgate: error: ") and str(corrupt) in line
    assert "not a zip archive" in line or "not a torch.export archive" in line
    (out,) = done.stdout.splitlines()
    assert json.loads(out)["exit_code"] == 2


def _first_line_then_close(command: list[str]) -> tuple[int, str, str]:
    """Run ``command``, read one line of its stdout and close the pipe (as ``| head -1``
    does); ``(exit code, that line, stderr)``."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout is not None and child.stderr is not None
    line = child.stdout.readline().decode()
    child.stdout.close()
    error = child.stderr.read().decode()
    return child.wait(timeout=120), line, error


@pytest.mark.parametrize("verb", [("sample", "-n", "200000"), ("describe",)])
def test_a_reader_that_stops_early_ends_the_command_quietly(verb: tuple[str, ...]) -> None:
    """``certgate population sample … | head -1``: the reader closing stdout is no internal
    error (it was a traceback and exit 3); the command stops with SIGPIPE's code, 141."""
    code, line, error = _first_line_then_close(
        [sys.executable, "-m", "pipeline_steps", "population", verb[0], str(CREDIT), *verb[1:]])
    assert line.strip()
    assert "Traceback" not in error and "internal error" not in error
    assert code in (0, 141)
    if verb[0] == "sample":
        assert code == 141
