"""Binding a registered model to its population model, against a real ``mlflow server``.

A model logged with plain ``mlflow.pytorch.log_model`` records no input names. The audit must
never take the population model's column order for the network's: with a population whose
columns come in another order, that would certify the wrong network. Each unsafe case — an
unnamed model, a population with permuted columns, a renamed column, names given that disagree
with the model's — is one line on stderr, exit code 2, and leaves every alias and tag as it
was. With ``model.input_names`` the same model and the permuted population give the certified
interval of the correct binding (checked against dense Monte Carlo).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pytest
import torch
from mlflow_server import run_cli, write_server_config

from registry_hooks.certgate_model import log_model, pinned_requirements
from registry_hooks.connection import Registry, connect
from registry_hooks.tags import alias_version, version_tags
from verifier.population import population_from_json, save_population

pytest_plugins = ["mlflow_server"]

SEX_FIRST = ["sex", "age", "income", "debt_ratio", "housing_own", "housing_rent"]


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    return connect(mlflow_server.url)


def register_unnamed(registry: Registry, model: torch.nn.Module, name: str) -> str:
    """Log ``model`` as a new user would: plain ``mlflow.pytorch.log_model``, no names."""
    mlflow.set_tracking_uri(registry.tracking_uri)
    info = mlflow.pytorch.log_model(model.eval(), name="model", serialization_format="pickle",
                                    pip_requirements=pinned_requirements("pytorch"),
                                    registered_model_name=name)
    version = str(info.registered_model_version)
    registry.client.set_registered_model_alias(name, "candidate", version)
    return version


def population_file(population: Any, tmp_path: Path, order: list[str] | None) -> Path:
    document = population.to_json()
    if order is not None:
        document = {**document, "column_order": order}
    path = tmp_path / f"population_{uuid.uuid4().hex[:6]}.json"
    save_population(population_from_json(document), path)
    return path


def write_config(tmp_path: Path, tracking_uri: str, model: dict[str, Any]) -> Path:
    return write_server_config(tmp_path, tracking_uri, model)


def registry_state(registry: Registry, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """Every alias of the registered model and every tag of every version."""
    aliases = dict(registry.client.get_registered_model(name).aliases)
    tags = {f"{version.version}:{key}": value
            for version in registry.client.search_model_versions(f"name='{name}'")
            for key, value in version.tags.items()}
    return aliases, tags


def monte_carlo_ratio(model: torch.nn.Module, population: Any, n: int = 200_000
                      ) -> tuple[float, float]:
    """Dense Monte Carlo estimate of P[fav | sex=0] / P[fav | sex=1] in the network's own input
    order (sex is input 3) and its standard error (delta method)."""
    x = population.sample(n, np.random.default_rng(7))
    with torch.no_grad():
        favourable = model(torch.as_tensor(x, dtype=torch.float32)).argmax(1).numpy() == 1
    group = x[:, 3] == 1
    p0, p1 = favourable[~group].mean(), favourable[group].mean()
    ratio = p0 / p1
    se = ratio * np.sqrt((1 - p0) / ((~group).sum() * p0) + (1 - p1) / (group.sum() * p1))
    return float(ratio), float(se)


def assert_refused(registry: Registry, name: str, capsys: pytest.CaptureFixture[str],
                   config: Path, *expected: str) -> None:
    before = registry_state(registry, name)
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("certgate: error:")
    for fragment in expected:
        assert fragment in err, err
    assert registry_state(registry, name) == before
    assert alias_version(registry, name, "champion") is None


def test_unnamed_model_is_refused_and_named_by_config_gives_the_correct_interval(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"unnamed_{uuid.uuid4().hex[:8]}"
    version = register_unnamed(registry, credit_demo.fair, name)
    permuted = population_file(credit_demo.population, tmp_path, SEX_FIRST)
    in_order = population_file(credit_demo.population, tmp_path, None)
    uri = f"models:/{name}@candidate"
    for population in (permuted, in_order):
        config = write_config(tmp_path, registry.tracking_uri,
                              {"uri": uri, "population_uri": str(population)})
        assert_refused(registry, name, capsys, config, "records no input names",
                       "model.input_names", "--input-names")

    own_order = list(credit_demo.population.columns)
    config = write_config(tmp_path, registry.tracking_uri,
                          {"uri": uri, "population_uri": str(permuted),
                           "input_names": own_order})
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code == 0, (out, err)
    summary = json.loads(out.strip().splitlines()[-1])
    audit = summary["audit"]["audits"]["demographic_parity"]
    low, high = audit["ratio"]
    ratio, se = monte_carlo_ratio(credit_demo.fair, credit_demo.population)
    assert low - 4 * se <= ratio <= high + 4 * se
    assert alias_version(registry, name, "champion") == version


def test_renamed_and_disagreeing_columns_are_refused(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"renamed_{uuid.uuid4().hex[:8]}"
    salary = ["age", "salary", "debt_ratio", "sex", "housing_own", "housing_rent"]
    log_model(credit_demo.fair, credit_demo.population, input_names=salary,
                              registered_model_name=name, serialization_format="pickle",
                              alias="candidate", registry=registry)
    uri = f"models:/{name}@candidate"
    config = write_config(tmp_path, registry.tracking_uri, {"uri": uri})
    assert_refused(registry, name, capsys, config, "salary", "income",
                   "inputs missing from the population model [salary]")
    disagreeing = write_config(tmp_path, registry.tracking_uri,
                               {"uri": uri, "input_names": list(credit_demo.population.columns)})
    assert_refused(registry, name, capsys, disagreeing, "disagree with the names recorded")


def test_named_model_binds_a_permuted_population_by_name(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"named_{uuid.uuid4().hex[:8]}"
    log_model(credit_demo.fair, credit_demo.population,
                              registered_model_name=name, serialization_format="pickle",
                              alias="candidate", registry=registry)
    permuted = population_file(credit_demo.population, tmp_path, SEX_FIRST)
    config = write_config(tmp_path, registry.tracking_uri,
                          {"uri": f"models:/{name}@candidate", "population_uri": str(permuted)})
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code == 0, (out, err)
    low, high = json.loads(out.strip().splitlines()[-1])["audit"]["audits"][
        "demographic_parity"]["ratio"]
    ratio, se = monte_carlo_ratio(credit_demo.fair, credit_demo.population)
    assert low - 4 * se <= ratio <= high + 4 * se
    assert version_tags(registry, name, "1")["certgate.gate"] == "passed"


def test_names_from_an_mlflow_column_signature_bind_the_population(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd
    from mlflow.models import infer_signature

    name = f"signed_{uuid.uuid4().hex[:8]}"
    columns = list(credit_demo.population.columns)
    rows = pd.DataFrame(credit_demo.population.sample(20, 3), columns=columns)
    with torch.no_grad():
        logits = credit_demo.fair(torch.as_tensor(rows.to_numpy(), dtype=torch.float32)).numpy()
    mlflow.set_tracking_uri(registry.tracking_uri)
    info = mlflow.pytorch.log_model(credit_demo.fair.eval(), name="model",
                                    serialization_format="pickle",
                                    signature=infer_signature(rows, logits),
                                    pip_requirements=pinned_requirements("pytorch"),
                                    registered_model_name=name)
    registry.client.set_registered_model_alias(name, "candidate",
                                               str(info.registered_model_version))
    permuted = population_file(credit_demo.population, tmp_path, SEX_FIRST)
    config = write_config(tmp_path, registry.tracking_uri,
                          {"uri": f"models:/{name}@candidate", "population_uri": str(permuted)})
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code == 0, (out, err)
    low, high = json.loads(out.strip().splitlines()[-1])["audit"]["audits"][
        "demographic_parity"]["ratio"]
    ratio, se = monte_carlo_ratio(credit_demo.fair, credit_demo.population)
    assert low - 4 * se <= ratio <= high + 4 * se


def test_a_model_trained_without_the_protected_column_is_audited_for_parity(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Fairness through unawareness, as users build it: the demo's biased classifier with its
    `sex` input removed, logged with plain ``mlflow.pytorch.log_model``, named by
    ``model.input_names`` without `sex`. The population holds `sex` (the audit conditions on
    it); the run binds it with zero weights and certifies the ratio dense Monte Carlo gives."""
    columns = list(credit_demo.population.columns)
    sex = columns.index("sex")
    first = credit_demo.biased[0]
    with torch.no_grad():
        reduced = torch.nn.Linear(first.in_features - 1, first.out_features)
        reduced.weight.copy_(torch.cat([first.weight[:, :sex], first.weight[:, sex + 1:]], 1))
        reduced.bias.copy_(first.bias)
    unaware = torch.nn.Sequential(reduced, *list(credit_demo.biased)[1:]).eval()
    name = f"unaware_{uuid.uuid4().hex[:8]}"
    register_unnamed(registry, unaware, name)
    reads = [column for column in columns if column != "sex"]
    config = write_config(tmp_path, registry.tracking_uri,
                          {"uri": f"models:/{name}@candidate",
                           "population_uri": str(population_file(credit_demo.population,
                                                                 tmp_path, None)),
                           "input_names": reads})
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code in (0, 1), (out, err)
    audit = json.loads(out.strip().splitlines()[-1])["audit"]["audits"]["demographic_parity"]
    low, high = audit["ratio"]
    x = credit_demo.population.sample(200_000, np.random.default_rng(7))
    with torch.no_grad():
        favourable = unaware(torch.as_tensor(np.delete(x, sex, axis=1),
                                             dtype=torch.float32)).argmax(1).numpy() == 1
    group = x[:, sex] == 1
    p0, p1 = favourable[~group].mean(), favourable[group].mean()
    ratio = p0 / p1
    se = ratio * np.sqrt((1 - p0) / ((~group).sum() * p0) + (1 - p1) / (group.sum() * p1))
    assert low - 4 * se <= ratio <= high + 4 * se
    assert high - low < 1.0
