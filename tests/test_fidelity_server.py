"""The population-fidelity check through ``certgate run`` against a real ``mlflow server``:
the data is the dataset logged (``mlflow.log_input``) with the model version's source run;
the independent population proves parity, the data contradicts it, and the gate fails
(``population_contradicted: warn``: warns), never moving the alias; the check is in the
certificate, the metrics, the version's tags and the report. A logged dataset whose file
changed afterwards is not used, and the certificate says why."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from fidelity_cases import PARITY, proxy_frame, proxy_model
from mlflow_server import run_cli, write_server_config

from certgate.population_data import fit_population
from registry_hooks.certgate_model import log_model
from registry_hooks.connection import Registry, connect
from registry_hooks.tags import alias_version, version_tags
from verifier.certificate import Certificate
from verifier.population import save_population

pytest_plugins = ["mlflow_server"]


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    return connect(mlflow_server.url)


def register(registry: Registry, tmp_path: Path) -> tuple[str, str, Path]:
    """A model trained (as far as MLflow knows) on a CSV logged as the run's dataset, with
    an independent-product population fitted to it; returns name, version, CSV path."""
    frame = proxy_frame(2000, 0.9, seed=11)
    csv = tmp_path / f"train_{uuid.uuid4().hex[:6]}.csv"
    frame.to_csv(csv, index=False)
    name = f"fidelity_{uuid.uuid4().hex[:8]}"
    mlflow.set_experiment(f"train_{name}")
    with mlflow.start_run():
        dataset = mlflow.data.from_pandas(pd.read_csv(csv), source=str(csv), name="train")
        mlflow.log_input(dataset, context="training")
        independent = fit_population(frame, structure="independent")
        info = log_model(proxy_model(), independent,
                                         registered_model_name=name,
                                         serialization_format="pickle", alias="candidate",
                                         registry=registry)
    return name, str(info.registered_model_version), csv


def test_logged_dataset_contradicts_the_population_and_the_gate_fails(
        registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, version, csv = register(registry, tmp_path)
    model = {"uri": f"models:/{name}@candidate"}
    config = write_server_config(tmp_path, registry.tracking_uri, model, [PARITY], samples=300)
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code == 1, (out, err)
    document = json.loads(out)
    audit = document["audit"]["audits"]["demographic_parity"]
    assert audit["verdict"] == "satisfied"
    fidelity = audit["population_fidelity"]
    assert fidelity["status"] == "contradicted"
    assert fidelity["data"]["origin"] == "mlflow dataset" and fidelity["data"]["uri"] == str(csv)
    assert fidelity["assumptions"]["structure"] == "independent"
    assert document["gate"]["outcome"] == "failed"
    assert document["gate"]["checks"]["demographic_parity"]["status"] == "contradicted"

    tags = version_tags(registry, name, version)
    assert tags["certgate.demographic_parity.population_fidelity"] == "contradicted"
    assert tags["certgate.demographic_parity.population_assumptions"] == "independent features"
    assert tags["certgate.gate"] == "failed"
    assert alias_version(registry, name, "champion") is None
    run_id = tags["certgate.audit.run_id"]
    run = registry.client.get_run(run_id)
    assert run.data.metrics["demographic_parity.population_fidelity.contradicted"] == 1.0
    upper = run.data.metrics["demographic_parity.population_fidelity.empirical_upper"]
    assert upper < run.data.metrics["demographic_parity.ratio_lower"]
    assert run.data.tags["certgate.demographic_parity.population_fidelity"] == "contradicted"
    certificate = Certificate.from_dict(mlflow.artifacts.load_dict(
        f"runs:/{run_id}/certificates/demographic_parity.json"))
    assert certificate.population_fidelity["status"] == "contradicted"
    html = mlflow.artifacts.load_text(f"runs:/{run_id}/report/report.html")
    assert "Population fidelity" in html and "independent features" in html
    assert "population contradicted by the data" in html

    warn = write_server_config(tmp_path, registry.tracking_uri, model, [PARITY], samples=300,
                               gate={"population_contradicted": "warn"})
    code, out, err = run_cli(capsys, "run", "--config", str(warn), "--no-progress", "--json")
    assert code == 0, (out, err)
    assert json.loads(out)["gate"]["outcome"] == "warned"
    assert alias_version(registry, name, "champion") is None


def test_a_changed_dataset_file_is_said_not_used(
        registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, version, csv = register(registry, tmp_path)
    csv.write_text(csv.read_text().replace("\n1,", "\n0,", 3))
    config = write_server_config(tmp_path, registry.tracking_uri,
                                 {"uri": f"models:/{name}/{version}"}, [PARITY], samples=300)
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code == 0, (out, err)
    fidelity = json.loads(out)["audit"]["audits"]["demographic_parity"]["population_fidelity"]
    assert fidelity["status"] == "unchecked"
    assert "is not the logged dataset" in fidelity["reason"]
    assert version_tags(registry, name, version)[
        "certgate.demographic_parity.population_fidelity"] == "unchecked"


def test_verify_reads_the_logged_dataset_of_a_registered_model(
        registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    name, version, csv = register(registry, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", registry.tracking_uri)
    population = save_population(fit_population(pd.read_csv(csv), structure="independent"),
                                 tmp_path / "population.json")
    code, out, err = run_cli(
        capsys, "verify", "demographic-parity", "--model", f"models:/{name}/{version}",
        "--population", str(population), "--protected", "sex", "--privileged", "1",
        "--favorable-class", "1", "--gamma", "0.8", "--timeout", "30", "--json")
    fidelity = json.loads(out)["population_fidelity"]
    assert fidelity["status"] == "contradicted", (out, err)
    assert fidelity["data"]["origin"] == "mlflow dataset" and fidelity["data"]["uri"] == str(csv)
    assert code == 1


def test_an_unchecked_population_follows_the_population_unchecked_policy(
        registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, version, csv = register(registry, tmp_path)
    csv.write_text(csv.read_text().replace("\n1,", "\n0,", 3))
    model = {"uri": f"models:/{name}/{version}"}

    def gate_under(policy: str | None) -> tuple[int, dict]:
        gate = {} if policy is None else {"gate": {"population_unchecked": policy}}
        config = write_server_config(tmp_path, registry.tracking_uri, model, [PARITY],
                                     samples=300, **gate)
        code, out, _ = run_cli(capsys, "run", "--config", str(config), "--no-progress",
                                 "--json")
        return code, json.loads(out)["gate"]

    code, gate = gate_under("fail")
    check = gate["checks"]["demographic_parity"]
    assert code == 1 and gate["outcome"] == "failed" and check["status"] == "unchecked"
    reason = gate["reasons"]["failing"][0]
    assert reason.startswith("demographic_parity: proven ")
    assert "population_unchecked: fail" in reason and "is not the logged dataset" in reason
    tags = version_tags(registry, name, version)
    assert tags["certgate.gate"] == "failed" and "is not the logged dataset" in tags[
        "certgate.gate.reasons"]
    assert alias_version(registry, name, "champion") is None

    code, gate = gate_under("warn")
    assert code == 0 and gate["outcome"] == "warned"
    assert gate["checks"]["demographic_parity"]["status"] == "unchecked_warn"
    assert "is not the logged dataset" in gate["reasons"]["warning"][0]
    assert not gate["reasons"]["passing"]
    assert alias_version(registry, name, "champion") is None

    code, gate = gate_under(None)
    assert code == 0 and gate["outcome"] == "passed"
    assert gate["checks"]["demographic_parity"]["status"] == "proven_pass"
    assert alias_version(registry, name, "champion") == version


def test_run_announces_the_check_on_stderr_and_keeps_stdout_one_object(
        registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``certgate run`` shows progress on stderr under ``--json`` too: the fidelity check,
    which classifies every data row after the audits' budgets, is named there before it
    runs (table and row count); stdout stays the one JSON object."""
    name, _, csv = register(registry, tmp_path)
    config = write_server_config(tmp_path, registry.tracking_uri,
                                 {"uri": f"models:/{name}@candidate"}, [PARITY], samples=300)
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--json")
    assert code == 1, (out, err)
    assert json.loads(out)["audit"]["audits"]["demographic_parity"]["population_fidelity"][
        "data"]["rows_used"] == 2000
    assert (f"demographic_parity: population fidelity: classifying 2,000 data rows of "
            f"{csv}...") in err
