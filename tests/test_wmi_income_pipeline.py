"""``certgate run --config configs/income_wmi.yaml`` end to end on a local sqlite MLflow store:
the income classifier of ``certgate demo``, audited under the population shipped with its
version (the default fit ``certgate population fit`` writes: a learned Bayesian network on
16-bin histograms), gets a decided monotonicity and noise-robustness audit, and each
certified interval contains a Monte Carlo estimate of the same probability ± 4 standard
errors. Exact WMI would list too many root regions on those histograms
(:data:`verifier.wmi.terms.MAX_ROOTS`), so both audits go through box branching."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from configs.schema import load_config
from pipeline_steps.demo import (
    CANDIDATE_ALIAS,
    MODEL_NAME,
    TRAINING_EXPERIMENT,
    create_experiments,
    register_variant,
)
from registry_hooks.certgate_model import load_model, load_population_model
from registry_hooks.connection import connect
from tests.mlflow_server import run_cli

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "income_wmi.yaml"
SAMPLES = 400_000


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A sqlite store holding the demo's unbiased classifier as ``income_classifier@candidate``
    with its population, and the network and population read back from that version."""
    workdir = tmp_path_factory.mktemp("income_wmi")
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    registry = connect(uri, uri)
    experiment = load_config(CONFIG).tracking.experiment
    create_experiments(workdir, [TRAINING_EXPERIMENT, experiment])
    version, _, _ = register_variant("unbiased", registry, workdir, lambda _: None)
    model_uri = f"models:/{MODEL_NAME}@{CANDIDATE_ALIAS}"
    loaded = load_model(model_uri, registry, workdir / "scratch")
    population, _ = load_population_model(loaded, None, workdir / "population")
    return {"uri": uri, "version": version, "network": loaded.network,
            "population": population, "local_dir": loaded.local_dir, "config": CONFIG}


def _predicted(network: Any, x: np.ndarray) -> np.ndarray:
    return np.argmax(network.evaluate(x), axis=1)


def _contains(interval: list[float], hits: np.ndarray) -> bool:
    estimate = float(hits.mean())
    error = float(np.sqrt(max(estimate * (1 - estimate), 1.0 / hits.size) / hits.size))
    return interval[0] - 4 * error <= estimate <= interval[1] + 4 * error


def test_income_wmi_config_decides_both_audits(store: dict[str, Any],
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["uri"])
    monkeypatch.delenv("CERTGATE_MODEL_URI", raising=False)
    code, out, err = run_cli(capsys, "run", "--config", str(store["config"]), "--no-progress",
                             "--json")
    assert code == 0, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["audit"]["model_version"] == store["version"]
    audits = summary["audit"]["audits"]
    assert set(audits) == {"monotone_in_hours", "robust_to_experience_noise"}
    for name, audit in audits.items():
        assert audit["verdict"] in ("satisfied", "violated"), (name, audit)
    assert summary["gate"]["outcome"] in ("passed", "failed")
    assert summary["gate"]["checks"]["monotone_in_hours"]["status"].startswith("proven")
    assert summary["gate"]["checks"]["robust_to_experience_noise"]["status"].startswith(
        "proven")

    network, population = store["network"], store["population"]
    rng = np.random.default_rng(7)
    x = population.sample(SAMPLES, rng)
    hpw = list(population.columns).index("hpw")
    yexp = list(population.columns).index("yexp")

    # monotonicity, use_prior: x from the population, x'.hpw an independent marginal draw,
    # pairs conditioned on x.hpw <= x'.hpw
    other = population.sample(SAMPLES, rng)[:, hpw]
    ordered = x[:, hpw] <= other
    shifted = x[ordered].copy()
    shifted[:, hpw] = other[ordered]
    before, after = _predicted(network, x[ordered]), _predicted(network, shifted)
    holds = ~((before == 1) & (after != 1))
    assert _contains(audits["monotone_in_hours"]["probability"], holds)

    # noise robustness: n ~ triangular(0, 0, 15) added to yexp
    noisy = x.copy()
    noisy[:, yexp] += rng.triangular(0.0, 0.0, 15.0, SAMPLES)
    same = _predicted(network, x) == _predicted(network, noisy)
    assert _contains(audits["robust_to_experience_noise"]["probability"], same)


def test_config_check_runs_the_preflight_on_a_local_mlflow_model_directory(
        store: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The version's downloaded MLflow directory with the population it ships: the example
    config's audits can run; a noise density on the discrete ``female`` column cannot."""
    document = yaml.safe_load(CONFIG.read_text())
    document["model"] = {"uri": str(store["local_dir"]), "population_uri": None}
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(document))
    code, out, err = run_cli(capsys, "config", "check", str(path))
    assert code == 0, err
    assert "can run: monotone_in_hours, robust_to_experience_noise (checked on model" in out
    document["audits"][1]["features"] = ["female"]
    path.write_text(yaml.safe_dump(document))
    code, out, err = run_cli(capsys, "config", "check", str(path))
    assert code == 2 and out == ""
    assert "audit 'robust_to_experience_noise'" in err and "'female'" in err
