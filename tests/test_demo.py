"""``certgate demo`` end to end (one run, in a subprocess, on a fresh working directory), and
the income data generator of paper 002 §V checked against its definition (closed forms)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm

from configs.schema import load_config
from pipeline_steps.cli import main
from pipeline_steps.demo import (
    INPUT_COLUMNS,
    MARKER,
    MODEL_NAME,
    prepare_workdir,
    train_classifier,
)
from pipeline_steps.income_data import generate_income_data
from verifier.errors import CertgateInputError

ROOT = Path(__file__).resolve().parents[1]
GAMMA = 0.8
MONTE_CARLO_ROWS = 200_000


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One ``certgate demo --json`` run from an empty current directory (``stdout`` holds
    what a person reads, which ``--json`` sends to stderr)."""
    base = tmp_path_factory.mktemp("demo")
    workdir, cwd = base / "work", base / "cwd"
    cwd.mkdir()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("MLFLOW_", "CERTGATE_"))}
    env["PYTHONPATH"] = str(ROOT)
    completed = subprocess.run(
        [sys.executable, "-m", "pipeline_steps", "demo", "--workdir", str(workdir), "--json"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.strip().splitlines()
    assert len(lines) == 1, completed.stdout  # --json: one object; the narration is on stderr
    return {"summary": json.loads(lines[0]), "stdout": completed.stderr, "workdir": workdir,
            "cwd": cwd}


def _version(summary: dict[str, Any], variant: str) -> dict[str, Any]:
    (found,) = [v for v in summary["versions"] if v["variant"] == variant]
    return found


def test_biased_version_fails_the_gate_with_a_proven_violation(demo_run: dict[str, Any]) -> None:
    biased = _version(demo_run["summary"], "biased")
    parity = biased["audits"]["demographic_parity"]
    assert parity["verdict"] == "violated"
    low, high = parity["ratio"]
    assert 0.0 <= low <= high <= GAMMA
    assert biased["gate"] == "failed"
    assert biased["promoted_alias"] is None
    assert any("proven to violate" in reason for reason in biased["gate_reasons"]["failing"])
    assert biased["gate_reasons"]["passing"] == []


def test_unbiased_version_passes_and_holds_champion(demo_run: dict[str, Any]) -> None:
    summary = demo_run["summary"]
    unbiased = _version(summary, "unbiased")
    parity = unbiased["audits"]["demographic_parity"]
    assert parity["verdict"] == "satisfied"
    low, high = parity["ratio"]
    assert GAMMA < low <= high
    assert unbiased["gate"] == "passed"
    assert unbiased["promoted_alias"] == "champion"
    assert summary["aliases"]["champion"] == unbiased["version"]
    assert summary["aliases"]["candidate"] == unbiased["version"]
    assert unbiased["version"] != _version(summary, "biased")["version"]


def test_self_correcting_variant_is_registered_as_safe(demo_run: dict[str, Any]) -> None:
    from mlflow import MlflowClient

    summary = demo_run["summary"]
    deployed = summary["deployed"]
    unbiased = _version(summary, "unbiased")
    assert deployed["alias"] == "safe"
    assert summary["aliases"]["safe"] == deployed["version"]
    assert deployed["source"] == f"models:/{MODEL_NAME}/{unbiased['version']}"
    client = MlflowClient(summary["tracking_uri"], summary["tracking_uri"])
    tags = client.get_model_version(MODEL_NAME, deployed["version"]).tags
    assert tags["certgate.variant"] == "self-correcting"
    assert tags["certgate.source_version"] == unbiased["version"]
    gates = {v["version"]: client.get_model_version(MODEL_NAME, v["version"]).tags["certgate.gate"]
             for v in summary["versions"]}
    assert gates == {_version(summary, "biased")["version"]: "failed",
                     unbiased["version"]: "passed"}


def test_certified_ratios_enclose_a_monte_carlo_estimate(demo_run: dict[str, Any],
                                                         tmp_path: Path) -> None:
    """Independent oracle: sample each version's shipped population model densely, run its
    network, and estimate the parity ratio; the certified interval must contain it (up to
    five standard errors of the estimate)."""
    from registry_hooks.certgate_model import load_model, load_population_model
    from registry_hooks.connection import connect

    summary = demo_run["summary"]
    registry = connect(summary["tracking_uri"])
    for version in summary["versions"]:
        loaded = load_model(f"models:/{MODEL_NAME}/{version['version']}", registry, tmp_path)
        population, _ = load_population_model(loaded, None, tmp_path)
        rows = population.sample(MONTE_CARLO_ROWS, np.random.default_rng(7))
        high = loaded.network.evaluate(rows).argmax(axis=1) == 1
        women = rows[:, INPUT_COLUMNS.index("female")] == 1
        p_women, p_men = high[women].mean(), high[~women].mean()
        ratio = p_women / p_men
        error = ratio * math.sqrt(p_women * (1 - p_women) / women.sum() / p_women**2
                                  + p_men * (1 - p_men) / (~women).sum() / p_men**2)
        low, upper = version["audits"]["demographic_parity"]["ratio"]
        assert low - 5 * error <= ratio <= upper + 5 * error, (version["variant"], ratio)


def test_output_names_versions_numbers_and_where_to_look(demo_run: dict[str, Any]) -> None:
    stdout, summary = demo_run["stdout"], demo_run["summary"]
    biased, unbiased = _version(summary, "biased"), _version(summary, "unbiased")
    assert f"gate for version {biased['version']}: FAILED" in stdout
    assert f"gate for version {unbiased['version']}: PASSED" in stdout
    for version in (biased, unbiased):
        low, high = version["audits"]["demographic_parity"]["ratio"]
        assert f"certified ratio in [{low:.4f}, {high:.4f}]" in stdout
    assert f"mlflow ui --backend-store-uri {summary['tracking_uri']}" in stdout
    assert summary["tracking_uri"] == f"sqlite:///{demo_run['workdir'] / 'mlflow.db'}"


def test_every_file_is_written_under_the_workdir(demo_run: dict[str, Any]) -> None:
    workdir = demo_run["workdir"]
    assert list(demo_run["cwd"].iterdir()) == []
    assert {"mlflow.db", "artifacts", "data", "reports", "config.yaml", MARKER} <= {
        entry.name for entry in workdir.iterdir()}
    assert len(list((workdir / "reports").glob("*.html"))) == 2
    config = load_config(workdir / "config.yaml")
    assert config.tracking.tracking_uri == demo_run["summary"]["tracking_uri"]
    assert config.deploy is not None and config.deploy.constraints.is_file()


def test_demo_refuses_a_foreign_non_empty_workdir(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    keep = tmp_path / "notes.txt"
    keep.write_text("mine", encoding="utf-8")
    with pytest.raises(CertgateInputError, match="not created by certgate demo"):
        prepare_workdir(tmp_path)
    assert main(["demo", "--workdir", str(tmp_path)]) == 2
    assert "not created by certgate demo" in capsys.readouterr().err
    assert [entry.name for entry in tmp_path.iterdir()] == ["notes.txt"]


def test_prepare_workdir_clears_only_what_a_demo_wrote(tmp_path: Path) -> None:
    (tmp_path / MARKER).write_text("", encoding="utf-8")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "old.csv").write_text("x", encoding="utf-8")
    (tmp_path / "mlflow.db").write_text("old", encoding="utf-8")
    (tmp_path / "keep.txt").write_text("mine", encoding="utf-8")
    assert prepare_workdir(tmp_path) == tmp_path.resolve()
    assert sorted(entry.name for entry in tmp_path.iterdir()) == [MARKER, "keep.txt"]


# ------------------------------------------------------------------------------ classifier


def test_classifier_never_reads_the_protected_attribute() -> None:
    frame = generate_income_data(2000, variant="biased", seed=4)
    model = train_classifier(frame, steps=20)
    assert np.all(model[0].weight.detach().numpy()[:, 0] == 0.0)
    import torch

    rows = torch.tensor(frame[list(INPUT_COLUMNS)].to_numpy(dtype=np.float32))
    flipped = rows.clone()
    flipped[:, 0] = 1.0 - flipped[:, 0]
    with torch.no_grad():
        assert torch.equal(model(rows), model(flipped))


# ------------------------------------------------------------------------------ generator

ROWS = 200_000


@pytest.fixture(scope="module")
def unbiased() -> Any:
    return generate_income_data(ROWS, variant="unbiased", seed=11)


@pytest.fixture(scope="module")
def biased() -> Any:
    return generate_income_data(ROWS, variant="biased", seed=11)


def _clipped_normal_mean(mean: float, std: float, low: float, high: float) -> float:
    """E[clip(N(mean, std), low, high)] in closed form."""
    a, b = (low - mean) / std, (high - mean) / std
    return (low * norm.cdf(a) + high * norm.sf(b) + mean * (norm.cdf(b) - norm.cdf(a))
            + std * (norm.pdf(a) - norm.pdf(b)))


def _close(sample: np.ndarray, expected: float, std: float) -> bool:
    """The sample mean lies within five standard errors of ``expected``."""
    return abs(float(sample.mean()) - expected) <= 5 * std / math.sqrt(len(sample))


def _wage_base(frame: Any) -> np.ndarray:
    return (500.0 * frame["yexp"].to_numpy() + 30000.0) / 1920.0


def test_generator_marginals_match_table_iv(unbiased: Any) -> None:
    assert list(unbiased.columns) == ["female", "hpw", "yexp", "hw", "income", "y"]
    assert set(unbiased["female"].unique()) == {0, 1}
    assert _close(unbiased["female"].to_numpy(), 0.5, 0.5)
    hpw, yexp = unbiased["hpw"].to_numpy(), unbiased["yexp"].to_numpy()
    assert hpw.min() >= 10.0 and hpw.max() <= 60.0
    assert _close(hpw, 5.0 * _clipped_normal_mean(7.0, 1.0, 2.0, 12.0), 5.0)
    assert abs(hpw.std() - 5.0) < 0.05
    assert yexp.min() >= 0.0 and yexp.max() <= 55.0
    assert _close(yexp, _clipped_normal_mean(20.0, 7.0, 0.0, 55.0), 7.0)
    at_zero = (yexp == 0.0).astype(float)
    expected_zero = norm.cdf(-20.0 / 7.0)
    assert _close(at_zero, expected_zero, math.sqrt(expected_zero * (1 - expected_zero)))


def test_unbiased_wage_and_label_follow_the_definition(unbiased: Any) -> None:
    factor = unbiased["hw"].to_numpy() / _wage_base(unbiased)
    assert _close(factor, 1.0, 0.02)
    assert abs(factor.std() - 0.02) < 0.001
    women = unbiased["female"].to_numpy() == 1
    assert _close(factor[women], 1.0, 0.02) and _close(factor[~women], 1.0, 0.02)
    income = 48.0 * unbiased["hpw"].to_numpy() * unbiased["hw"].to_numpy()
    np.testing.assert_allclose(unbiased["income"].to_numpy(), income, rtol=1e-12)
    assert np.array_equal(unbiased["y"].to_numpy(), (income > 35000.0).astype(np.int64))


def test_biased_wage_gap_is_ten_percent_each_way(biased: Any, unbiased: Any) -> None:
    for column in ("female", "hpw", "yexp"):
        assert np.array_equal(biased[column].to_numpy(), unbiased[column].to_numpy())
    factor = biased["hw"].to_numpy() / _wage_base(biased)
    women = biased["female"].to_numpy() == 1
    # N(1, .02) * (1 ∓ N(.1, .02)): mean 1 ∓ 0.1, variance (1 + .02²)(m² + .02²) - m²
    for group, mean in ((women, 0.9), (~women, 1.1)):
        std = math.sqrt((1 + 0.02**2) * (mean**2 + 0.02**2) - mean**2)
        assert _close(factor[group], mean, std)
        assert abs(factor[group].std() - std) < 0.001
    income = 48.0 * biased["hpw"].to_numpy() * biased["hw"].to_numpy()
    assert np.array_equal(biased["y"].to_numpy(), (income > 35000.0).astype(np.int64))
    rate_women, rate_men = biased["y"][women].mean(), biased["y"][~women].mean()
    assert rate_women / rate_men < 0.5
    fair_women = unbiased["y"][women].mean() / unbiased["y"][~women].mean()
    assert abs(fair_women - 1.0) < 0.03


def test_generator_is_seeded() -> None:
    first = generate_income_data(500, variant="biased", seed=3)
    assert first.equals(generate_income_data(500, variant="biased", seed=3))
    assert not first.equals(generate_income_data(500, variant="biased", seed=4))


@pytest.mark.parametrize(("rows", "variant", "message"), [
    (0, "biased", "rows must be at least 1"),
    (10, "fair", "variant must be one of biased, unbiased"),
])
def test_generator_rejects_bad_input(rows: int, variant: Any, message: str) -> None:
    with pytest.raises(CertgateInputError, match=message):
        generate_income_data(rows, variant=variant)
