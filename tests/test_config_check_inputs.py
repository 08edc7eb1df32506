"""``certgate config check`` checks every audit's inputs against what it can load — a local
network file or MLflow model directory, a local population file, or a registry model on a
reachable tracking server — as ``certgate run`` would before any audit starts, and says
plainly what it could not check. A misspelt protected column (``sex=male`` for the
population's ``sex=Male``), a privileged value the population never takes, and a population
whose columns are not the model's are refused (exit 2, one line naming the audit or the
columns), not reported "valid"."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.causal_nets import threshold_network
from tests.mlflow_server import run_cli
from verifier.convert import save_network
from verifier.population import (
    Categorical,
    Factor,
    Feature,
    PopulationModel,
    Product,
    Uniform,
    save_population,
)

pytest_plugins = ["mlflow_server"]

PARITY = {"kind": "demographic_parity", "name": "parity", "protected": "sex=Male",
          "privileged": 1, "favorable_class": 1, "gamma": 0.8}


def population(columns: tuple[str, str, str]) -> PopulationModel:
    """``x`` uniform on [0, 1] and a one-hot pair (the columns ``population fit`` writes)."""
    x, first, second = columns
    return PopulationModel(
        features=[Feature(name=x, kind="continuous", domain=(0, 1)),
                  Feature(name="sex", kind="categorical", columns=[first, second],
                          categories=[first.partition("=")[2], second.partition("=")[2]])],
        distribution=Product(factors=[
            Factor(columns=[x], distribution=Uniform(lower=0, upper=1)),
            Factor(columns=[first, second], distribution=Categorical(probabilities=[0.4, 0.6]))]))


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    names = ["x", "sex=Female", "sex=Male"]
    save_network(threshold_network([1.0, 0.5, -0.5], -0.5, names), tmp_path / "model.json")
    save_population(population(("x", "sex=Female", "sex=Male")), tmp_path / "pop.json")
    save_population(population(("age", "sex=Female", "sex=Male")), tmp_path / "other.json")
    return {"root": tmp_path, "model": tmp_path / "model.json", "pop": tmp_path / "pop.json",
            "other": tmp_path / "other.json"}


def config(root: Path, model: str, population_uri: str | None, *audits: dict[str, Any],
           tracking_uri: str | None = None) -> str:
    document: dict[str, Any] = {"model": {"uri": model, "population_uri": population_uri},
                                "audits": list(audits)}
    if tracking_uri is not None:
        document["tracking"] = {"tracking_uri": tracking_uri}
    path = root / f"config_{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def refused(capsys: pytest.CaptureFixture[str], path: str) -> str:
    code, out, err = run_cli(capsys, "config", "check", path)
    assert code == 2 and out == "", out
    (line,) = err.strip().splitlines()
    return line


def test_a_correct_configuration_is_checked_on_the_files(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = config(files["root"], str(files["model"]), str(files["pop"]), PARITY)
    code, out, _ = run_cli(capsys, "config", "check", "--json", path)
    assert code == 0
    assert json.loads(out)["preflight"]["checked"] == ["parity"]


def test_a_misspelt_protected_column_is_refused_with_the_spelling_it_has(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(capsys, config(files["root"], str(files["model"]), str(files["pop"]),
                                  {**PARITY, "protected": "sex=male"}))
    assert "audit 'parity'" in line and "'sex=male'" in line and "'sex=Male'" in line


def test_a_privileged_value_the_population_never_takes_is_refused(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(capsys, config(files["root"], str(files["model"]), str(files["pop"]),
                                  {**PARITY, "privileged": 2}))
    assert "audit 'parity'" in line and "sex=Male = 2" in line and "probability 0" in line


def test_a_population_of_other_columns_than_the_model_is_refused(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(capsys, config(files["root"], str(files["model"]), str(files["other"]),
                                  PARITY))
    assert "missing from the population model [x]" in line and "[age]" in line


def test_a_configuration_without_pre_checked_kinds_still_binds_the_files(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    causal = {"kind": "causal_fairness", "name": "fair", "protected": ["sex=Female", "sex=Male"],
              "protected_kind": "one_hot", "max_biased_share": 0.1}
    line = refused(capsys, config(files["root"], str(files["model"]), str(files["other"]),
                                  causal))
    assert "missing from the population model [x]" in line and "[age]" in line


def test_an_unreachable_registry_is_reported_as_not_checked(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str],
        unreachable_tracking_uri: str) -> None:
    path = config(files["root"], "models:/loan@candidate", None, PARITY,
                  tracking_uri=unreachable_tracking_uri)
    code, out, _ = run_cli(capsys, "config", "check", path)
    assert code == 0
    assert "not checked: parity:" in out and unreachable_tracking_uri in out


def test_a_registry_model_on_a_reachable_server_is_loaded_and_checked(
        mlflow_server, credit_demo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from registry_hooks.certgate_model import log_model
    from registry_hooks.connection import connect

    name = f"check_{uuid.uuid4().hex[:8]}"
    log_model(credit_demo.fair, credit_demo.population,
                              registered_model_name=name, serialization_format="pickle",
                              alias="candidate", registry=connect(mlflow_server.url))
    audit = {**PARITY, "protected": "sex"}
    fine = config(tmp_path, f"models:/{name}@candidate", None, audit,
                  tracking_uri=mlflow_server.url)
    code, out, _ = run_cli(capsys, "config", "check", fine)
    assert code == 0 and "can run: parity (checked on model" in out
    line = refused(capsys, config(tmp_path, f"models:/{name}@candidate", None,
                                  {**audit, "protected": "Sex"}, tracking_uri=mlflow_server.url))
    assert "'Sex'" in line and "'sex'" in line


def test_a_causal_audit_may_name_a_categorical_feature_alone(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # `protected: sex` is the population's feature `sex` (sex=Female, sex=Male): the causal
    # audit reads it as the group; the pre-flight used to refuse it as a missing input
    causal = {"kind": "causal_fairness", "name": "causal", "protected": "sex",
              "max_biased_share": 0.05}
    code, out, _ = run_cli(capsys, "config", "check", "--json",
                           config(files["root"], str(files["model"]), str(files["pop"]), causal))
    assert code == 0 and json.loads(out)["preflight"]["checked"] == ["causal"]
    line = refused(capsys, config(files["root"], str(files["model"]), str(files["pop"]),
                                  {**causal, "protected": "sexx"}))
    assert "audit 'causal'" in line and "'sexx'" in line
