"""The deploy step against a real ``mlflow server``: the self-correcting variant is registered,
loads back through ``models:/NAME@safe`` with plain ``mlflow.pyfunc`` (and over HTTP from
``mlflow models serve``), and gives exactly the in-memory SC-Net's outputs, which satisfy every
active constraint wherever some ordering of the classes can (checked against an enumeration of
all 3! orderings). Bad input is one line and registers nothing; ``certgate run`` deploys after
a passed gate only.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd
import pytest
import requests
import torch
import yaml

from pipeline_steps.cli import main
from pipeline_steps.deploy import DeployError, deploy_self_correcting
from registry_hooks.certgate_model import load_model, log_model
from registry_hooks.connection import Registry, RegistryError, connect
from registry_hooks.tags import alias_version, version_tags
from verifier.convert import save_network
from verifier.convert.torch_module import from_torch
from verifier.errors import CertgateInputError
from verifier.population import Discrete, Factor, Feature, PopulationModel, Product, save_population
from verifier.selfcorrect import SelfCorrectingNetwork, load_constraints

INPUT_COLUMNS = ["age", "income", "debt_ratio", "sex", "housing_own", "housing_rent"]


def frame_of(x: np.ndarray) -> pd.DataFrame:
    """Rows for a variant whose signature names its input columns."""
    return pd.DataFrame(x, columns=INPUT_COLUMNS)

pytest_plugins = ["mlflow_server"]

INCOME, DEBT = 1, 2
HIGH_INCOME, HEAVY_DEBT = 60.0, 0.7
# (precondition on a row, DNF of (a, b) literals meaning y_a < y_b), mirroring CONSTRAINTS
ORACLE = [
    (lambda x: x[:, INCOME] >= HIGH_INCOME, [[(0, 2), (1, 2)]]),
    (lambda x: x[:, DEBT] >= HEAVY_DEBT, [[(2, 0)], [(2, 1)]]),
    (lambda x: np.ones(len(x), dtype=bool), [[(0, 1)]]),
]
CONSTRAINTS = {
    "classes": ["reject", "review", "accept"],
    "constraints": [
        {"name": "high_income_is_accepted",
         "precondition": {"kind": "box", "lower": [None, HIGH_INCOME, None, None, None, None],
                          "upper": [None] * 6},
         "postcondition": [["reject < accept", "review < accept"]]},
        {"name": "heavy_debt_is_not_accepted",
         "precondition": {"kind": "box", "lower": [None, None, HEAVY_DEBT, None, None, None],
                          "upper": [None] * 6},
         "postcondition": [["accept < reject"], ["accept < review"]]},
        {"name": "review_outranks_reject", "precondition": {"kind": "always"},
         "postcondition": [["reject < review"]]},
    ],
}

CREDIT_CONSTRAINTS = {"classes": ["deny", "grant"], "constraints": [
    {"name": "wealthy_low_debt_granted",
     "precondition": {"kind": "box", "lower": [None, 100, None, None, None, None],
                      "upper": [None, None, 0.2, None, None, None]},
     "postcondition": [["deny < grant"]]}]}
"""One constraint on the demo's two-class credit classifiers (inputs as INPUT_COLUMNS)."""


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    return connect(mlflow_server.url)


@pytest.fixture(scope="module")
def population() -> Any:
    from mlflow_server import demo_module

    return demo_module("demo_credit").population_model()


@pytest.fixture(scope="module")
def mlp() -> torch.nn.Sequential:
    """A 6-16-3 ReLU classifier reading raw credit features (inputs scaled to ~unit range)."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        model[0].weight /= torch.tensor([40.0, 50.0, 0.5, 1.0, 1.0, 1.0])
    return model.eval()


@pytest.fixture(scope="module")
def constraints_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("deploy") / "constraints.yaml"
    path.write_text(yaml.safe_dump(CONSTRAINTS, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def source(registry: Registry, mlp: torch.nn.Sequential, population: Any) -> tuple[str, str]:
    name = f"mlp3_{uuid.uuid4().hex[:8]}"
    info = log_model(mlp, population, registered_model_name=name,
                                     serialization_format="pickle", alias="candidate",
                                     registry=registry)
    return name, str(info.registered_model_version)


def registered_versions(registry: Registry, name: str) -> list[str]:
    found = registry.client.search_model_versions(f"name='{name}'")
    return sorted(str(version.version) for version in found)


def satisfies(logits: np.ndarray, dnf: list[list[tuple[int, int]]]) -> np.ndarray:
    """Rows of ``logits`` where some disjunct's literals all hold strictly."""
    return np.any([np.all([logits[:, a] < logits[:, b] for a, b in disjunct], axis=0)
                   for disjunct in dnf], axis=0)


def satisfiable(active: tuple[bool, ...], classes: int = 3) -> bool:
    """Whether some strict ordering of the classes satisfies every active constraint."""
    for ranking in itertools.permutations(range(classes)):
        values = np.array([ranking], dtype=np.float64)
        if all(satisfies(values, dnf)[0] for on, (_, dnf) in zip(active, ORACLE, strict=True)
               if on):
            return True
    return False


def test_variant_serves_the_sc_net_and_satisfies_constraints(
        registry: Registry, source: tuple[str, str], mlp: torch.nn.Sequential, population: Any,
        constraints_file: Path, tmp_path: Path) -> None:
    name, version = source
    record = deploy_self_correcting(f"models:/{name}@candidate", constraints_file,
                                    registry=registry, workdir=tmp_path)
    assert (record.name, record.alias) == (name, "safe")
    assert int(record.version) == int(version) + 1
    assert record.uri == f"models:/{name}/{record.version}"
    assert alias_version(registry, name, "safe") == record.version
    assert alias_version(registry, name, "candidate") == version
    tags = version_tags(registry, name, record.version)
    assert tags["certgate.variant"] == "self-correcting"
    assert (tags["certgate.source_model"], tags["certgate.source_version"]) == (name, version)
    assert tags["certgate.selfcorrect.constraints"] == "3"

    served = mlflow.pyfunc.load_model(f"models:/{name}@safe")
    rng = np.random.default_rng(5)
    x = np.concatenate([population.sample(1500, rng),
                        rng.normal([40, 60, 0.6, 0.5, 0.5, 0.5], [20, 40, 0.4, 1, 1, 1],
                                   size=(500, 6))])
    with pytest.raises(mlflow.exceptions.MlflowException, match="missing inputs"):
        served.predict(x)
    frame = served.predict(frame_of(x))
    reordered = frame_of(x)[list(reversed(INPUT_COLUMNS))]
    pd.testing.assert_frame_equal(served.predict(reordered), frame)
    columns = ["logit_0", "logit_1", "logit_2"]
    assert list(frame.columns) == [*columns, "bottom", "predicted_class"]
    corrected, bottom = frame[columns].to_numpy(), frame["bottom"].to_numpy()

    reference = SelfCorrectingNetwork(mlp, load_constraints(constraints_file, num_classes=3))
    with torch.no_grad():      # the float32 source computes as served: float32 rows
        expected, expected_bottom = reference.forward_with_bottom(torch.from_numpy(x))
        raw = mlp(torch.from_numpy(x).float()).double().numpy()
    assert expected.dtype == torch.float32
    np.testing.assert_array_equal(corrected, expected.numpy())
    np.testing.assert_array_equal(bottom, expected_bottom.numpy())
    np.testing.assert_array_equal(frame["predicted_class"].to_numpy(), corrected.argmax(1))

    active = np.stack([pre(x) for pre, _ in ORACLE], axis=1)
    expected_bottom_oracle = np.array([not satisfiable(tuple(row)) for row in active])
    np.testing.assert_array_equal(bottom, expected_bottom_oracle)
    assert bottom.any() and not bottom.all()
    np.testing.assert_array_equal(corrected[bottom], raw[bottom])
    raw_violations = np.zeros(len(x), dtype=bool)
    for index, (_, dnf) in enumerate(ORACLE):
        on = active[:, index] & ~bottom
        assert satisfies(corrected[on], dnf).all()
        raw_violations |= on & ~satisfies(raw, dnf)
    assert raw_violations.sum() > 50
    assert (corrected[~raw_violations & ~bottom] == raw[~raw_violations & ~bottom]).all()


def test_variant_carries_constraints_population_signature_and_requirements(
        registry: Registry, source: tuple[str, str], population: Any, constraints_file: Path,
        tmp_path: Path) -> None:
    name, version = source
    target = f"{name}-selfcorrecting"
    record = deploy_self_correcting(f"models:/{name}/{version}", constraints_file,
                                    registry=registry, target_name=target, alias="guarded",
                                    workdir=tmp_path / "work")
    assert (record.name, record.version, record.alias) == (target, "1", "guarded")
    assert alias_version(registry, target, "guarded") == "1"
    local = Path(mlflow.artifacts.download_artifacts(f"models:/{target}/1",
                                                     dst_path=str(tmp_path / "variant")))
    shipped = load_constraints(local / "artifacts" / "constraints.yaml", num_classes=3)
    assert shipped.to_dict() == load_constraints(constraints_file, num_classes=3).to_dict()
    source_dir = Path(mlflow.artifacts.download_artifacts(f"models:/{name}/{version}",
                                                          dst_path=str(tmp_path / "source")))
    assert ((local / "artifacts" / "population_model.json").read_text()
            == (source_dir / "extra_files" / "population_model.json").read_text())
    info = mlflow.models.get_model_info(f"models:/{target}/1")
    assert info.metadata["certgate.population"] == "artifacts/population_model.json"
    assert info.metadata["certgate.input_names"] == ["age", "income", "debt_ratio", "sex",
                                                     "housing_own", "housing_rent"]
    assert info.signature.inputs.input_names() == INPUT_COLUMNS
    assert {spec["type"] for spec in info.signature.inputs.to_dict()} == {"double"}
    assert [spec["name"] for spec in info.signature.outputs.to_dict()] == [
        "logit_0", "logit_1", "logit_2", "bottom", "predicted_class"]
    assert (local / "input_example.json").is_file()
    requirements = (local / "requirements.txt").read_text().split()
    assert f"torch=={torch.__version__.split('+')[0]}" in requirements
    assert f"mlflow=={mlflow.__version__}" in requirements


def test_bad_inputs_register_nothing(registry: Registry, source: tuple[str, str],
                                     tmp_path: Path) -> None:
    name, _ = source
    before = registered_versions(registry, name)
    five = tmp_path / "five.yaml"
    five.write_text(yaml.safe_dump({"num_classes": 5, "constraints": [
        {"name": "c", "postcondition": [["0 < 4"]]}]}))
    with pytest.raises(DeployError, match="declares 5 classes but the model has 3") as error:
        deploy_self_correcting(f"models:/{name}@candidate", five, registry=registry,
                               workdir=tmp_path / "a")
    assert "\n" not in str(error.value)
    missing = f"missing_{uuid.uuid4().hex[:6]}"
    with pytest.raises(RegistryError, match=f"models:/{missing}/1 not found") as error:
        deploy_self_correcting(f"models:/{missing}/1", five, registry=registry,
                               target_name=f"{missing}_sc", workdir=tmp_path / "b")
    assert "\n" not in str(error.value)
    assert registered_versions(registry, name) == before
    assert registry.client.search_registered_models(f"name='{missing}_sc'") == []


def test_cli_wrap_registers_to_a_models_uri(
        registry: Registry, source: tuple[str, str], mlp: torch.nn.Sequential,
        constraints_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, version = source
    target = f"{name}_cli"
    capsys.readouterr()
    code = main(["selfcorrect", "wrap", "--model", f"models:/{name}/{version}",
                 "--constraints", str(constraints_file), "--out", f"models:/{target}",
                 "--tracking-uri", registry.tracking_uri, "--json"])
    out = capsys.readouterr().out
    assert code == 0
    registered = json.loads(out.strip().splitlines()[-1])["registered"]
    assert registered == {"name": target, "version": "1", "alias": "safe",
                          "uri": f"models:/{target}/1"}
    assert version_tags(registry, target, "1")["certgate.source_version"] == version

    code = main(["selfcorrect", "wrap", "--model", f"models:/{name}/{version}",
                 "--constraints", str(constraints_file), "--out", f"models:/{target}/3",
                 "--tracking-uri", registry.tracking_uri])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.count("\n") == 1 and "models:/NAME (no version or alias)" in captured.err
    assert registered_versions(registry, target) == ["1"]

    network_file = tmp_path / "mlp.json"
    save_network(from_torch(mlp), network_file)
    code = main(["selfcorrect", "wrap", "--model", str(network_file), "--constraints",
                 str(constraints_file), "--out", f"models:/{target}", "--alias", "fromfile",
                 "--tracking-uri", registry.tracking_uri])
    assert code == 0 and f"registered as models:/{target}/2" in capsys.readouterr().out
    tags = version_tags(registry, target, "2")
    assert tags["certgate.source_model"] == str(network_file)
    assert "certgate.source_version" not in tags
    x = np.random.default_rng(4).normal([40, 60, 0.6, 0.5, 0.5, 0.5], [20, 40, 0.4, 1, 1, 1],
                                        size=(200, 6))
    from_file = mlflow.pyfunc.load_model(f"models:/{target}@fromfile").predict(x)
    from_registry = mlflow.pyfunc.load_model(f"models:/{target}@safe").predict(frame_of(x))
    # the IR file holds float64 values and its variant computes in float64; the registered
    # float32 source's variant computes in float32, as the source does
    constraints = load_constraints(constraints_file, num_classes=3)
    for frame, module in ((from_file, from_torch(mlp).to_torch()), (from_registry, mlp)):
        with torch.no_grad():
            expected, bottom = SelfCorrectingNetwork(module, constraints).forward_with_bottom(
                torch.from_numpy(x))
        np.testing.assert_array_equal(frame[["logit_0", "logit_1", "logit_2"]].to_numpy(),
                                      expected.double().numpy())
        np.testing.assert_array_equal(frame["bottom"].to_numpy(), bottom.numpy())
    np.testing.assert_array_equal(from_file["bottom"], from_registry["bottom"])


def write_run_config(tmp_path: Path, tracking_uri: str, model_uri: str,
                     deploy: dict[str, Any]) -> Path:
    document = {
        "tracking": {"tracking_uri": tracking_uri, "experiment": f"exp_{uuid.uuid4().hex[:8]}"},
        "model": {"uri": model_uri},
        "validation": {"population_samples": 500},
        "audits": [{"kind": "demographic_parity", "protected": "sex", "privileged": 1,
                    "favorable_class": 1, "gamma": 0.8, "timeout_s": 60}],
        "deploy": deploy,
    }
    path = tmp_path / f"config_{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def credit_deploy(tmp_path: Path) -> tuple[str, str, dict[str, Any]]:
    """A fresh registered-model name, its variant's name and a ``deploy`` section wrapping it
    with the credit constraints."""
    constraints = tmp_path / "credit.yaml"
    constraints.write_text(yaml.safe_dump(CREDIT_CONSTRAINTS))
    name = f"credit_{uuid.uuid4().hex[:8]}"
    target = f"{name}-selfcorrecting"
    return name, target, {"constraints": str(constraints), "registered_model": target,
                          "alias": "safe"}


def test_hooks_watch_says_a_failed_gate_held_its_deploy_back(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name, target, deploy = credit_deploy(tmp_path)
    log_model(credit_demo.biased, credit_demo.population, registered_model_name=name,
              serialization_format="pickle", alias="candidate", registry=registry)
    config = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                              deploy)
    capsys.readouterr()
    code = main(["hooks", "watch", "--config", str(config), "--once"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "deploy: not done: the gate failed (a variant is deployed after a passed gate)" in out
    assert registry.client.search_registered_models(f"name='{target}'") == []


def test_certgate_run_deploys_only_after_a_passed_gate(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name, target, deploy = credit_deploy(tmp_path)
    for model in (credit_demo.biased, credit_demo.fair):
        log_model(model, credit_demo.population, registered_model_name=name,
                                  serialization_format="pickle", alias="candidate",
                                  registry=registry)
    config = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}/1", deploy)
    capsys.readouterr()
    code = main(["run", "--config", str(config), "--no-progress", "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert json.loads(out.strip().splitlines()[-1])["deploy"] is None
    assert "deploy: not done: the gate failed (a variant is deployed after a passed gate)" in err
    assert registry.client.search_registered_models(f"name='{target}'") == []

    config = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                              deploy)
    code = main(["run", "--config", str(config), "--no-progress", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["gate"]["outcome"] == "passed"
    assert f"registered as models:/{target}/1" in summary["deploy"]
    assert alias_version(registry, target, "safe") == "1"
    tags = version_tags(registry, target, "1")
    assert (tags["certgate.variant"], tags["certgate.source_model"],
            tags["certgate.source_version"]) == ("self-correcting", name, "2")
    served = mlflow.pyfunc.load_model(f"models:/{target}@safe")
    x = credit_demo.population.sample(400, np.random.default_rng(2))
    x[:200, 1], x[:200, 2] = 120.0, 0.1
    frame = served.predict(frame_of(x))
    assert (frame["logit_0"][:200] < frame["logit_1"][:200]).all()
    assert (frame["predicted_class"][:200] == 1).all()
    assert not frame["bottom"].any()


def test_a_pass_of_an_older_version_leaves_promotion_and_deploy_on_a_newer_passing_one(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A watcher reaching a version nobody audited, or an old version audited again, passes
    it: ``champion`` and ``safe`` stay with the newer version whose gate passed, and both the
    text and the JSON say so."""
    name, target, deploy = credit_deploy(tmp_path)
    for _ in range(2):
        log_model(credit_demo.fair, credit_demo.population, registered_model_name=name,
                  serialization_format="pickle", registry=registry)
    newer = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}/2", deploy)
    capsys.readouterr()
    assert main(["run", "--config", str(newer), "--no-progress"]) == 0
    assert alias_version(registry, name, "champion") == "2"
    assert alias_version(registry, target, "safe") == "1"

    older = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}/1", deploy)
    capsys.readouterr()
    code = main(["run", "--config", str(older), "--no-progress", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["gate"]["outcome"] == "passed"
    assert (summary["gate"]["promoted_alias"], summary["gate"]["promotion_kept_on"],
            summary["deploy"]) == (None, "2", None)
    assert f"alias 'champion' stays on models:/{name}/2" in err
    assert f"deploy: not done: models:/{name}/2, a newer version whose gate passed" in err
    assert alias_version(registry, name, "champion") == "2"
    assert version_tags(registry, name, "1")["certgate.gate"] == "passed"
    assert alias_version(registry, target, "safe") == "1"
    assert registered_versions(registry, target) == ["1"]


def test_certgate_run_deploys_a_file_naming_the_models_inputs(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Bounds written by input name resolve against the names the logged model carries: the
    variant is the positional file's (the same fingerprint, so the positional file reuses it),
    and a misspelt name stops the deploy naming the field and the near miss."""
    named = tmp_path / "named.yaml"
    named.write_text(yaml.safe_dump({"classes": ["deny", "grant"], "constraints": [
        {"name": "wealthy_low_debt_granted",
         "precondition": {"kind": "box", "lower": {"income": 100},
                          "upper": {"debt_ratio": 0.2}},
         "postcondition": [["deny < grant"]]}]}))
    positional = tmp_path / "positional.yaml"
    positional.write_text(yaml.safe_dump(CREDIT_CONSTRAINTS))
    name = f"named_{uuid.uuid4().hex[:8]}"
    target = f"{name}-selfcorrecting"
    log_model(credit_demo.fair, credit_demo.population, registered_model_name=name,
              serialization_format="pickle", alias="candidate", registry=registry)
    summaries = []
    for constraints in (named, positional):
        deploy = {"constraints": str(constraints), "registered_model": target, "alias": "safe"}
        config = write_run_config(tmp_path, registry.tracking_uri,
                                  f"models:/{name}@candidate", deploy)
        capsys.readouterr()
        assert main(["run", "--config", str(config), "--no-progress", "--json"]) == 0
        summaries.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
    assert f"registered as models:/{target}/1" in summaries[0]["deploy"]
    assert "reused" in summaries[1]["deploy"]
    assert registered_versions(registry, target) == ["1"]
    served = mlflow.pyfunc.load_model(f"models:/{target}@safe")
    x = credit_demo.population.sample(400, np.random.default_rng(2))
    x[:100, 1], x[:100, 2] = 100.0, 0.2  # on the box's closed corner
    x[100:200, 1], x[100:200, 2] = np.nextafter(100.0, 0), np.nextafter(0.2, 1)  # just outside
    frame = served.predict(frame_of(x))
    with torch.no_grad():
        expected, bottom = SelfCorrectingNetwork(
            credit_demo.fair, load_constraints(positional, num_classes=2)
        ).forward_with_bottom(torch.from_numpy(x))
    np.testing.assert_array_equal(frame[["logit_0", "logit_1"]].to_numpy(),
                                  expected.double().numpy())
    np.testing.assert_array_equal(frame["bottom"].to_numpy(), bottom.numpy())
    assert (frame["predicted_class"][:100] == 1).all()

    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text(named.read_text().replace("debt_ratio", "debt_ration"))
    with pytest.raises(DeployError, match=r"constraints\.0\.precondition\.box: Value error, "
                                          r"upper: unknown input 'debt_ration' \(did you mean "
                                          r"'debt_ratio'\?\)"):
        deploy_self_correcting(f"models:/{name}/1", misspelt, registry=registry,
                               target_name=target, workdir=tmp_path / "work")
    assert registered_versions(registry, target) == ["1"]


def test_certgate_run_refuses_a_misspelt_input_name_before_the_audit(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A constraint file naming the model's inputs, with no ``inputs:`` header, is resolved
    on the loaded model's names before the audit: a misspelt name exits 2 with nothing
    audited, gated or deployed (found by the deploy step, it stopped the run after the gate
    had moved the promotion alias)."""
    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text(yaml.safe_dump({"classes": ["deny", "grant"], "constraints": [
        {"name": "low_debt_granted", "precondition": {"kind": "box",
                                                      "upper": {"debt_ration": 0.2}},
         "postcondition": [["deny < grant"]]}]}))
    name = f"misspelt_{uuid.uuid4().hex[:8]}"
    log_model(credit_demo.fair, credit_demo.population, registered_model_name=name,
              serialization_format="pickle", alias="candidate", registry=registry)
    deploy = {"constraints": str(misspelt), "registered_model": f"{name}-sc", "alias": "safe"}
    config = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                              deploy)
    capsys.readouterr()
    code = main(["run", "--config", str(config), "--no-progress", "--json"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 2
    assert "deploy.constraints" in report["error"]
    assert "unknown input 'debt_ration' (did you mean 'debt_ratio'?)" in report["error"]
    tags = registry.client.get_model_version(name, "1").tags
    assert not any(key.startswith("certgate.gate") for key in tags), tags
    assert registry.client.search_registered_models(f"name='{name}-sc'") == []


def test_a_reused_audit_checks_the_deploy_files_input_names_before_the_gate(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An audit reused from an earlier run loads no model, so the deploy file's names are
    resolved on the input names its certificates recorded: a misspelt name exits 2 before
    the gate (checked by the deploy step, it stopped the run after the gate had moved the
    promotion alias); the correct name then gates and deploys on the same reused audit."""
    name = f"reused_{uuid.uuid4().hex[:8]}"
    log_model(credit_demo.fair, credit_demo.population, registered_model_name=name,
              serialization_format="pickle", alias="candidate", registry=registry)
    config = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                              None)
    capsys.readouterr()
    assert main(["audit", "--config", str(config), "--no-progress", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["reused"] is False

    document = yaml.safe_load(config.read_text())
    rules = {"classes": ["deny", "grant"], "constraints": [
        {"name": "low_debt_granted", "precondition": {"kind": "box",
                                                      "upper": {"debt_ration": 0.2}},
         "postcondition": [["deny < grant"]]}]}
    constraints = tmp_path / "named.yaml"
    constraints.write_text(yaml.safe_dump(rules))
    document["deploy"] = {"constraints": str(constraints), "registered_model": f"{name}-sc",
                          "alias": "safe"}
    config.write_text(yaml.safe_dump(document))
    code = main(["run", "--config", str(config), "--no-progress", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 2
    assert "deploy.constraints" in report["error"]
    assert "unknown input 'debt_ration' (did you mean 'debt_ratio'?)" in report["error"]
    tags = registry.client.get_model_version(name, "1").tags
    assert not any(key.startswith("certgate.gate") for key in tags), tags
    assert alias_version(registry, name, "champion") is None
    assert registry.client.search_registered_models(f"name='{name}-sc'") == []

    constraints.write_text(yaml.safe_dump(rules).replace("debt_ration", "debt_ratio"))
    assert main(["run", "--config", str(config), "--no-progress", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["audit"]["reused"] is True
    assert f"registered as models:/{name}-sc/1" in summary["deploy"]
    assert alias_version(registry, name, "champion") == "1"


def test_a_deploy_file_naming_a_population_column_the_model_does_not_read_stops_before_the_gate(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A population fitted on the whole table holds the label, which binding appends to the
    network with zero weights; the variant reads the model's own inputs only, so a deploy
    file naming the label is refused before the gate, on a fresh audit and on a reused one
    (both passed it and the deploy step refused it after ``champion`` had moved)."""
    base = credit_demo.population
    wide = PopulationModel(
        features=[*base.features, Feature(name="label", kind="binary")],
        distribution=Product(factors=[*base.distribution.factors, Factor(
            columns=["label"], distribution=Discrete(values=[0, 1],
                                                     probabilities=[0.5, 0.5]))]))
    population = tmp_path / "wide.json"
    save_population(wide, population)
    name = f"label_{uuid.uuid4().hex[:8]}"
    log_model(credit_demo.fair, credit_demo.population, registered_model_name=name,
              serialization_format="pickle", alias="candidate", registry=registry)
    labelled = tmp_path / "labelled.yaml"
    labelled.write_text(yaml.safe_dump({"classes": ["deny", "grant"], "constraints": [
        {"name": "labelled_granted", "precondition": {"kind": "box", "lower": {"label": 1}},
         "postcondition": [["deny < grant"]]}]}))
    config = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                              {"constraints": str(labelled), "registered_model": f"{name}-sc",
                               "alias": "safe"})
    document = yaml.safe_load(config.read_text())
    document["model"]["population_uri"] = str(population)
    config.write_text(yaml.safe_dump(document))
    capsys.readouterr()
    for verb in ("run", "audit-then-run"):
        if verb == "audit-then-run":
            without = {**document, "deploy": None}
            plain = tmp_path / "plain.yaml"
            plain.write_text(yaml.safe_dump(without))
            assert main(["audit", "--config", str(plain), "--no-progress", "--json"]) == 0
            assert json.loads(capsys.readouterr().out)["reused"] is False
        code = main(["run", "--config", str(config), "--no-progress", "--json"])
        report = json.loads(capsys.readouterr().out)
        assert code == 2, verb
        assert "unknown input 'label'" in report["error"], verb
        tags = registry.client.get_model_version(name, "1").tags
        assert not any(key.startswith("certgate.gate") for key in tags), (verb, tags)
        assert alias_version(registry, name, "champion") is None, verb


def test_abstain_variant_appends_an_abstain_column(
        registry: Registry, source: tuple[str, str], mlp: torch.nn.Sequential, population: Any,
        constraints_file: Path, tmp_path: Path) -> None:
    name, version = source
    target = f"{name}_abstain"
    record = deploy_self_correcting(f"models:/{name}/{version}", constraints_file,
                                    registry=registry, target_name=target, alias=None,
                                    on_bottom="abstain", workdir=tmp_path)
    assert record.alias is None and "alias" not in str(record)
    assert registry.client.get_registered_model(target).aliases == {}
    assert version_tags(registry, target, record.version)["certgate.selfcorrect.on_bottom"] \
        == "abstain"
    x = population.sample(600, np.random.default_rng(8))
    frame = mlflow.pyfunc.load_model(record.uri).predict(frame_of(x))
    assert list(frame.columns) == ["logit_0", "logit_1", "logit_2", "logit_3", "bottom",
                                   "predicted_class"]
    active = np.stack([pre(x) for pre, _ in ORACLE], axis=1)
    expected_bottom = np.array([not satisfiable(tuple(row)) for row in active])
    np.testing.assert_array_equal(frame["bottom"].to_numpy(), expected_bottom)
    assert expected_bottom.any()
    np.testing.assert_array_equal(frame["predicted_class"].to_numpy() == 3, expected_bottom)


def test_served_over_http_returns_corrected_logits_and_bottom_flags(
        registry: Registry, source: tuple[str, str], mlp: torch.nn.Sequential, population: Any,
        constraints_file: Path, tmp_path: Path) -> None:
    from mlflow_server import free_port

    name, version = source
    target = f"{name}_served"
    deploy_self_correcting(f"models:/{name}/{version}", constraints_file, registry=registry,
                           target_name=target, workdir=tmp_path)
    port = free_port()
    # the scoring server runs ``uvicorn`` from PATH: put this interpreter's scripts first
    scripts = str(Path(sys.executable).parent)
    environment = {**os.environ, "MLFLOW_TRACKING_URI": registry.tracking_uri,
                   "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "models", "serve", "-m", f"models:/{target}@safe",
         "--env-manager", "local", "--host", "127.0.0.1", "--port", str(port)],
        env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "model server did not answer /ping"
            try:
                if requests.get(f"{url}/ping", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.5)
        x = population.sample(300, np.random.default_rng(9))
        reordered = list(reversed(INPUT_COLUMNS))
        split = {"columns": reordered, "data": frame_of(x)[reordered].to_numpy().tolist()}
        response = requests.post(f"{url}/invocations", json={"dataframe_split": split},
                                 timeout=60)
        assert response.status_code == 200, response.text
        predictions = response.json()["predictions"]
        reference = SelfCorrectingNetwork(mlp, load_constraints(constraints_file,
                                                                num_classes=3))
        with torch.no_grad():
            expected, bottom = reference.forward_with_bottom(torch.from_numpy(x))
        served = np.array([[row[f"logit_{i}"] for i in range(3)] for row in predictions])
        np.testing.assert_array_equal(served, expected.numpy())
        assert [row["bottom"] for row in predictions] == bottom.tolist()
        assert bottom.any()
        assert [row["predicted_class"] for row in predictions] == \
            expected.argmax(1).tolist()
        narrow = requests.post(f"{url}/invocations", json={"dataframe_split": {
            "columns": INPUT_COLUMNS[:5], "data": x[:, :5].tolist()}}, timeout=60)
        assert narrow.status_code == 400 and "housing_rent" in narrow.text
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
        log.close()


def test_rerunning_reuses_the_variant_and_a_failed_reaudit_withdraws_the_aliases(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Deploy is idempotent: ``certgate run`` again on the audited version registers no second
    variant for the same source version and constraints (it points the alias at the one there
    is). A re-audit that fails takes ``champion`` off the version and ``safe`` off its variant,
    says so, and points neither anywhere else."""
    constraints = tmp_path / "credit.yaml"
    constraints.write_text(yaml.safe_dump({"classes": ["deny", "grant"], "constraints": [
        {"name": "wealthy_low_debt_granted",
         "precondition": {"kind": "box", "lower": [None, 100, None, None, None, None],
                          "upper": [None, None, 0.2, None, None, None]},
         "postcondition": [["deny < grant"]]}]}))
    name = f"again_{uuid.uuid4().hex[:8]}"
    target = f"{name}-selfcorrecting"
    deploy = {"constraints": str(constraints), "registered_model": target, "alias": "safe"}
    log_model(credit_demo.fair, credit_demo.population, registered_model_name=name,
              serialization_format="pickle", registry=registry)
    log_model(credit_demo.fair, credit_demo.population,
                              registered_model_name=name, serialization_format="pickle",
                              alias="candidate", registry=registry)
    config = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                              deploy)
    summaries = []
    for _ in range(2):
        capsys.readouterr()
        code = main(["run", "--config", str(config), "--no-progress", "--json"])
        assert code == 0
        summaries.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
    assert f"registered as models:/{target}/1" in summaries[0]["deploy"]
    assert f"models:/{target}/1" in summaries[1]["deploy"] and "reused" in summaries[1]["deploy"]
    assert registered_versions(registry, target) == ["1"]
    assert (alias_version(registry, name, "champion"), alias_version(registry, target, "safe")
            ) == ("2", "1")
    # another source version is another variant (a newer one: a pass of the older version
    # leaves the promotion and the deploy on version 2)
    log_model(credit_demo.fair, credit_demo.population, registered_model_name=name,
              serialization_format="pickle", alias="candidate", registry=registry)
    capsys.readouterr()
    assert main(["run", "--config", str(config), "--no-progress", "--json"]) == 0
    assert registered_versions(registry, target) == ["1", "2"]
    assert version_tags(registry, target, "2")["certgate.source_version"] == "3"
    registry.client.set_registered_model_alias(name, "candidate", "2")
    registry.client.set_registered_model_alias(name, "champion", "2")
    registry.client.set_registered_model_alias(target, "safe", "1")

    strict = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                              deploy)
    document = yaml.safe_load(strict.read_text())
    document["audits"][0].update(gamma=0.999, timeout_s=0.5)
    strict.write_text(yaml.safe_dump(document))
    capsys.readouterr()
    code = main(["run", "--config", str(strict), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1
    assert "alias 'champion' removed from models:/" + name + "/2" in out
    assert "alias 'safe' removed from models:/" + target + "/1" in out
    assert alias_version(registry, name, "champion") is None
    assert alias_version(registry, target, "safe") is None
    assert alias_version(registry, name, "candidate") == "2", "other aliases stay"
    tags = version_tags(registry, name, "2")
    assert tags["certgate.gate"] == "failed"
    assert "champion" in tags["certgate.gate.withdrawn_aliases"]
    assert registered_versions(registry, target) == ["1", "2"], "nothing new is deployed"


def test_a_single_logit_variant_names_its_classes_by_index(
        registry: Registry, credit_demo, tmp_path: Path) -> None:
    """README: the variant's outputs are ``logit_<class>``; a one-logit model's classes are 0
    and 1, never ``logit_y0 <= 0``."""
    single = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    name = f"single_{uuid.uuid4().hex[:8]}"
    info = log_model(single.eval(), credit_demo.population,
                                     registered_model_name=name,
                                     serialization_format="pickle", registry=registry)
    constraints = tmp_path / "binary.yaml"
    constraints.write_text(yaml.safe_dump({"num_classes": 2, "constraints": [
        {"name": "c", "postcondition": [["0 < 1"]]}]}))
    record = deploy_self_correcting(f"models:/{name}/{info.registered_model_version}",
                                    constraints, registry=registry, workdir=tmp_path)
    outputs = mlflow.models.get_model_info(record.uri).signature.outputs.input_names()
    assert outputs == ["logit_0", "logit_1", "bottom", "predicted_class"]


def test_malformed_constraints_stop_run_before_the_audit_or_keep_its_results(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A constraints file that cannot be read (an unknown class, broken YAML) is refused
    before anything runs, naming ``deploy.constraints``; one that does not fit the model (its
    width), found only once the model is wrapped, ends the run with exit code 2 and a JSON
    object that still carries the audit and the gate, whose alias move happened. Both used to
    be found after the gate had moved ``champion``, with ``{"error": …}`` alone on stdout."""
    name = f"badcons_{uuid.uuid4().hex[:8]}"
    log_model(credit_demo.fair, credit_demo.population, registered_model_name=name,
              serialization_format="pickle", alias="candidate", registry=registry)
    rule = {"name": "r", "precondition": {"kind": "box", "lower": [None, 100] + [None] * 4,
                                          "upper": [None] * 6},
            "postcondition": [["deny < granted"]]}
    unknown_class = tmp_path / "unknown_class.yaml"
    unknown_class.write_text(yaml.safe_dump({"classes": ["deny", "grant"],
                                             "constraints": [rule]}))
    broken = tmp_path / "broken.yaml"
    broken.write_text("classes: [deny, grant]\nconstraints:\n  - name: r\n   precondition: 1\n")
    for path in (unknown_class, broken):
        config = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                                  {"constraints": str(path), "alias": "safe"})
        capsys.readouterr()
        code = main(["run", "--config", str(config), "--no-progress", "--json"])
        captured = capsys.readouterr()
        error = json.loads(captured.out)
        assert code == 2 and error["error"].startswith(f"deploy.constraints: {path}"), error
        assert alias_version(registry, name, "champion") is None
        assert "certgate.audit.status" not in version_tags(registry, name, "1")

    narrow = tmp_path / "narrow.yaml"
    narrow.write_text(yaml.safe_dump({"classes": ["deny", "grant"], "input_size": 5,
                                      "constraints": [{**rule, "postcondition": [
                                          ["deny < grant"]], "precondition": {
                                          "kind": "box", "lower": [None, 100, None, None, None],
                                          "upper": [None] * 5}}]}))
    config = write_run_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                              {"constraints": str(narrow), "alias": "safe"})
    code = main(["run", "--config", str(config), "--no-progress", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 2 and summary["exit_code"] == 2, summary
    assert summary["error"].startswith("deploy: constraints")
    assert "the constraints read 5 inputs but the model has 6" in summary["error"]
    assert summary["gate"]["outcome"] == "passed" and summary["deploy"] is None
    assert summary["gate"]["promoted_alias"] == "champion"
    assert alias_version(registry, name, "champion") == "1"
    assert alias_version(registry, name, "safe") is None


def test_the_variant_loads_with_the_pytorch_flavour_as_the_sc_net(
        registry: Registry, source: tuple[str, str], mlp: torch.nn.Sequential, population: Any,
        constraints_file: Path, tmp_path: Path) -> None:
    """A registered variant was pyfunc only: ``mlflow.pytorch.load_model`` refused it ("does
    not have the pytorch flavor"). It now loads as a module whose outputs (and ⊥ flags through
    ``forward_with_bottom``) equal the in-memory SC-Net's, while ``mlflow.pyfunc.load_model``
    keeps its columns."""
    name, version = source
    target = f"{name}-torch"
    record = deploy_self_correcting(f"models:/{name}/{version}", constraints_file,
                                    registry=registry, target_name=target, workdir=tmp_path)
    module = mlflow.pytorch.load_model(f"models:/{target}@safe")
    rng = np.random.default_rng(8)
    x = np.concatenate([population.sample(800, rng),
                        rng.normal([40, 60, 0.6, 0.5, 0.5, 0.5], [20, 40, 0.4, 1, 1, 1],
                                   size=(200, 6))])
    reference = SelfCorrectingNetwork(mlp, load_constraints(constraints_file, num_classes=3))
    with torch.no_grad():
        expected, expected_bottom = reference.forward_with_bottom(torch.from_numpy(x))
        logits = module(torch.from_numpy(x))
        with_bottom = module.forward_with_bottom(torch.from_numpy(x))
    np.testing.assert_array_equal(logits.numpy(), expected.numpy())
    np.testing.assert_array_equal(with_bottom[1].numpy(), expected_bottom.numpy())
    assert expected_bottom.any()

    served = mlflow.pyfunc.load_model(record.uri)
    frame = served.predict(frame_of(x))
    assert list(frame.columns) == ["logit_0", "logit_1", "logit_2", "bottom",
                                   "predicted_class"]
    np.testing.assert_array_equal(frame[["logit_0", "logit_1", "logit_2"]].to_numpy(),
                                  expected.numpy())
    flavors = mlflow.models.get_model_info(record.uri).flavors
    assert flavors["python_function"]["loader_module"] == "mlflow.pyfunc.loaders.code_model"
    assert set(flavors) == {"python_function", "pytorch"}
    with pytest.raises(CertgateInputError, match="is a self-correcting variant registered by "
                       "the deploy step"):
        load_model(record.uri, registry, tmp_path / "audit")


TIE_CONSTRAINTS = {"num_classes": 5, "constraints": [
    {"name": "large_x0_ranks_4_over_2",
     "precondition": {"kind": "box", "lower": [2.0, None], "upper": [None, None]},
     "postcondition": [["2 < 4"]]},
    {"name": "low_x1_ranks_0_over_1_or_3",
     "precondition": {"kind": "box", "lower": [None, None], "upper": [None, -1.0]},
     "postcondition": [["1 < 0"], ["3 < 0"]]},
]}
# (precondition on a row, DNF of (a, b) literals meaning y_a < y_b), mirroring TIE_CONSTRAINTS
TIE_ORACLE = [
    (lambda x: x[:, 0] >= 2.0, [[(2, 4)]]),
    (lambda x: x[:, 1] <= -1.0, [[(1, 0)], [(3, 0)]]),
]


def tie_model(dtype: torch.dtype = torch.float32) -> torch.nn.Sequential:
    """Five logits of two inputs with float32 ties that float64 resolves: ``h`` holds the
    positive and negative parts of ``x0`` and ``x1`` (exactly), ``y0 = x0``, ``y1 = x0 +
    2⁻³⁰·x1`` (equal to ``y0`` in float32 wherever ``|x0| ≥ 1/32`` or so, above it in float64
    for ``x1 > 0``), ``y2 = x0/2 − 1``, ``y3 = x0 + 2⁻²⁴·x1`` (equal to ``y0`` in float32
    for ``x0 ≥ 1`` and ``|x1| < 1``, rounding either way near ``x0 ∈ [1/2, 1)``),
    ``y4 = −|x0| − |x1|``: for ``x0 > −2`` the top class is 0, 1 or 3."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 4, dtype=dtype), torch.nn.ReLU(),
                                torch.nn.Linear(4, 5, dtype=dtype))
    small, smaller = 2.0 ** -24, 2.0 ** -30
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[1, 0], [-1, 0], [0, 1], [0, -1]]))
        model[0].bias.zero_()
        model[2].weight.copy_(torch.tensor([[1, -1, 0, 0], [1, -1, smaller, -smaller],
                                            [0.5, -0.5, 0, 0], [1, -1, small, -small],
                                            [-1, -1, -1, -1]]))
        model[2].bias.copy_(torch.tensor([0, 0, -1, 0, 0]))
    return model.eval()


def tie_rows() -> np.ndarray:
    """A float32 grid through the ties: x0 on sixteenths in [−4, 4] and a few large values,
    x1 on quarters in [−2, 2]."""
    first = np.concatenate([np.arange(-64, 65) / 16, [0.75 + 2.0 ** -24, 1000.0, 2.0 ** 20,
                                                     -(2.0 ** 20)]])
    second = np.arange(-8, 9) / 4
    return np.array(list(itertools.product(first, second)), dtype=np.float32)


@pytest.mark.parametrize("serialization", ["pickle", "pt2"])
def test_a_float32_source_keeps_its_float32_class_wherever_it_complies(
        registry: Registry, serialization: str, tmp_path: Path) -> None:
    """The red-team's deploy case: a float32 5-class model logged with plain
    ``mlflow.pytorch.log_model`` (no names, no certgate metadata). The variant computed the
    network in float64, so where the float32 logits tie its class differed from the source's
    on rows where no constraint is active. Now its logits on every row whose source logits
    already comply are the source's (served by MLflow's own pyfunc), bit for bit, and its
    class the source's (ties: the lowest index, as the source's argmax); every active
    constraint holds strictly on every row (oracle: the literals evaluated on the served
    float32 logits); a float32 batch is accepted, and the tensor signature is float32."""
    model = tie_model()
    rows = tie_rows()
    name = f"ties_{serialization}_{uuid.uuid4().hex[:8]}"
    extra = {"input_example": rows[:4]} if serialization == "pt2" else {}
    with mlflow.start_run():
        info = mlflow.pytorch.log_model(model, name="model", registered_model_name=name,
                                        serialization_format=serialization, **extra)
    constraints = tmp_path / "ties.yaml"
    constraints.write_text(yaml.safe_dump(TIE_CONSTRAINTS))
    record = deploy_self_correcting(f"models:/{name}/{info.registered_model_version}",
                                    constraints, registry=registry, workdir=tmp_path)

    source = np.asarray(mlflow.pyfunc.load_model(f"models:/{name}/1").predict(rows))
    assert source.dtype == np.float32
    served = mlflow.pyfunc.load_model(record.uri)
    spec = served.metadata.signature.inputs.inputs[0]
    assert (spec.type, spec.shape) == (np.dtype(np.float32), (-1, 2))
    frame = served.predict(rows)
    logits = frame[[f"logit_{k}" for k in range(5)]].to_numpy()
    classes, bottom = frame["predicted_class"].to_numpy(), frame["bottom"].to_numpy()

    active = np.stack([pre(rows) for pre, _ in TIE_ORACLE], axis=1)
    complies = np.ones(len(rows), dtype=bool)
    for index, (_, dnf) in enumerate(TIE_ORACLE):
        complies &= ~active[:, index] | satisfies(source, dnf)
        holds = satisfies(logits, dnf)
        assert holds[active[:, index]].all()
    assert not bottom.any()
    np.testing.assert_array_equal(logits[complies], source[complies].astype(np.float64))
    np.testing.assert_array_equal(classes[complies], source[complies].argmax(axis=1))
    np.testing.assert_array_equal(classes, logits.argmax(axis=1))
    np.testing.assert_array_equal(logits.astype(np.float32), logits)  # corrected in float32
    assert (~complies).sum() > 100

    with torch.no_grad():      # what a float64 recomputation would have served
        float64_classes = model.double()(torch.from_numpy(rows.astype(np.float64))).argmax(1)
    flipped = complies & (float64_classes.numpy() != source.argmax(axis=1))
    assert flipped.sum() > 50
    unconstrained = ~active.any(axis=1)
    assert (flipped & unconstrained).sum() > 50
    with pytest.raises(mlflow.exceptions.MlflowException, match="dtype"):
        served.predict(rows.astype(np.float64))
    assert mlflow.pytorch.load_model(record.uri)(torch.from_numpy(rows)).dtype == torch.float32


def test_a_float64_source_keeps_its_float64_variant(registry: Registry, tmp_path: Path
                                                    ) -> None:
    """A float64 source is computed in float64 as before: the variant equals the in-memory
    SC-Net of the float64 module bit for bit, and its tensor signature is float64."""
    model = tie_model(torch.float64)
    rows = tie_rows().astype(np.float64)
    name = f"ties64_{uuid.uuid4().hex[:8]}"
    with mlflow.start_run():
        info = mlflow.pytorch.log_model(model, name="model", registered_model_name=name,
                                        serialization_format="pickle")
    constraints = tmp_path / "ties.yaml"
    constraints.write_text(yaml.safe_dump(TIE_CONSTRAINTS))
    record = deploy_self_correcting(f"models:/{name}/{info.registered_model_version}",
                                    constraints, registry=registry, workdir=tmp_path)
    served = mlflow.pyfunc.load_model(record.uri)
    spec = served.metadata.signature.inputs.inputs[0]
    assert (spec.type, spec.shape) == (np.dtype(np.float64), (-1, 2))
    frame = served.predict(rows)
    reference = SelfCorrectingNetwork(model, load_constraints(constraints, num_classes=5))
    with torch.no_grad():
        expected, bottom = reference.forward_with_bottom(torch.from_numpy(rows))
    assert expected.dtype == torch.float64
    np.testing.assert_array_equal(frame[[f"logit_{k}" for k in range(5)]].to_numpy(),
                                  expected.numpy())
    np.testing.assert_array_equal(frame["bottom"].to_numpy(), bottom.numpy())


def test_a_float32_onnx_source_gets_a_float32_variant(registry: Registry, tmp_path: Path
                                                      ) -> None:
    """An ONNX source (float32 input) is computed in float32 too: float32 tensor signature,
    float32 logits, every active constraint strict. Its network runs on torch, not
    onnxruntime: on this model (sums of at most four exact terms) the two agree, so compliant
    rows keep the source's logits and class as MLflow's ONNX pyfunc serves them; in general
    the last bits may differ (README)."""
    import onnx

    model = tie_model()
    rows = tie_rows()
    exported = tmp_path / "ties.onnx"
    torch.onnx.export(model, (torch.from_numpy(rows[:2]),), str(exported), dynamo=False,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    name = f"ties_onnx_{uuid.uuid4().hex[:8]}"
    with mlflow.start_run():
        info = mlflow.onnx.log_model(onnx.load(str(exported)), name="model",
                                     registered_model_name=name)
    constraints = tmp_path / "ties.yaml"
    constraints.write_text(yaml.safe_dump(TIE_CONSTRAINTS))
    record = deploy_self_correcting(f"models:/{name}/{info.registered_model_version}",
                                    constraints, registry=registry, workdir=tmp_path)
    source = np.asarray(mlflow.pyfunc.load_model(f"models:/{name}/1").predict(
        {"x": rows})["y"])
    served = mlflow.pyfunc.load_model(record.uri)
    spec = served.metadata.signature.inputs.inputs[0]
    assert (spec.type, spec.shape) == (np.dtype(np.float32), (-1, 2))
    frame = served.predict(rows)
    logits = frame[[f"logit_{k}" for k in range(5)]].to_numpy()
    np.testing.assert_array_equal(logits.astype(np.float32), logits)
    active = np.stack([pre(rows) for pre, _ in TIE_ORACLE], axis=1)
    complies = np.ones(len(rows), dtype=bool)
    for index, (_, dnf) in enumerate(TIE_ORACLE):
        complies &= ~active[:, index] | satisfies(source, dnf)
        assert satisfies(logits, dnf)[active[:, index]].all()
    np.testing.assert_array_equal(logits[complies], source[complies].astype(np.float64))
    np.testing.assert_array_equal(frame["predicted_class"].to_numpy()[complies],
                                  source[complies].argmax(axis=1))


def ulp_tie_rows() -> np.ndarray:
    """:func:`tie_rows` and rows one float32 ulp either side of its x0 values in [−4, 4]
    (where ``y1`` and ``y3`` round onto ``y0`` or off it)."""
    centre = (np.arange(-64, 65) / 16).astype(np.float32)
    first = np.concatenate([np.nextafter(centre, np.float32(np.inf)),
                            np.nextafter(centre, np.float32(-np.inf))])
    second = (np.arange(-8, 9) / 4).astype(np.float32)
    near = np.array(list(itertools.product(first, second)), dtype=np.float32)
    return np.concatenate([tie_rows(), near])


def write_tie_file(kind: str, directory: Path) -> tuple[Path, np.ndarray]:
    """The float32 tie model as a local file, ``onnx`` (plain ``torch.onnx.export``) or
    ``torchscript`` (``torch.jit.save``), and its logits on :func:`ulp_tie_rows` as its own
    runtime computes them (onnxruntime, torch), in one batch."""
    import onnxruntime

    model, rows = tie_model(), ulp_tie_rows()
    if kind == "onnx":
        path = directory / "ties.onnx"
        torch.onnx.export(model, (torch.from_numpy(rows[:2]),), str(path), dynamo=False,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return path, session.run(None, {"x": rows})[0]
    path = directory / "ties.ts"
    torch.jit.save(torch.jit.script(model), str(path))
    with torch.no_grad():
        return path, torch.jit.load(str(path))(torch.from_numpy(rows)).numpy()


def assert_serves_the_source(rows: np.ndarray, source: np.ndarray, logits: np.ndarray,
                             classes: np.ndarray, bottom: np.ndarray) -> None:
    """The float32 source's logits and class, bit for bit, on every row whose source logits
    already satisfy every constraint active there; every active constraint holds on the served
    logits (the literals of TIE_ORACLE evaluated on them); many complying rows are ones where
    a float64 recomputation would have changed the class."""
    assert source.dtype == np.float32
    assert logits.dtype == np.float32
    active = np.stack([pre(rows) for pre, _ in TIE_ORACLE], axis=1)
    complies = np.ones(len(rows), dtype=bool)
    for index, (_, dnf) in enumerate(TIE_ORACLE):
        complies &= ~active[:, index] | satisfies(source, dnf)
        assert satisfies(logits, dnf)[active[:, index]].all()
    assert not bottom.any()
    np.testing.assert_array_equal(logits[complies], source[complies])
    np.testing.assert_array_equal(classes[complies], source[complies].argmax(axis=1))
    np.testing.assert_array_equal(classes, logits.argmax(axis=1))
    with torch.no_grad():
        float64_classes = tie_model().double()(torch.from_numpy(rows.astype(np.float64)))
    flipped = complies & ~active.any(axis=1) & (
        float64_classes.argmax(1).numpy() != source.argmax(axis=1))
    assert flipped.sum() > 50


@pytest.mark.parametrize("kind", ["onnx", "torchscript"])
def test_a_local_float32_file_registers_a_float32_variant(
        registry: Registry, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """The twelfth red-team's case: a float32 model given as a local file got a variant
    computed in float64. Wrapped to ``models:/NAME`` it is now computed in float32, as the
    file's own runtime computes it: the file is read as float32, the variant's tensor
    signature is float32, and MLflow's pyfunc serves the source's logits and class bit for bit
    wherever no constraint changes them, rows one ulp from a tie included."""
    path, source = write_tie_file(kind, tmp_path)
    rows = ulp_tie_rows()
    assert load_model(str(path), None, tmp_path / "read").dtype == "float32"
    constraints = tmp_path / "ties.yaml"
    constraints.write_text(yaml.safe_dump(TIE_CONSTRAINTS))
    target = f"ties_file_{kind}_{uuid.uuid4().hex[:8]}"
    code = main(["selfcorrect", "wrap", "--model", str(path), "--constraints",
                 str(constraints), "--out", f"models:/{target}",
                 "--tracking-uri", registry.tracking_uri])
    assert code == 0, capsys.readouterr().err
    served = mlflow.pyfunc.load_model(f"models:/{target}@safe")
    spec = served.metadata.signature.inputs.inputs[0]
    assert (spec.type, spec.shape) == (np.dtype(np.float32), (-1, 2))
    frame = served.predict(rows)
    logits = frame[[f"logit_{k}" for k in range(5)]].to_numpy()
    np.testing.assert_array_equal(logits.astype(np.float32), logits)
    assert_serves_the_source(rows, source, logits.astype(np.float32),
                             frame["predicted_class"].to_numpy(), frame["bottom"].to_numpy())


@pytest.mark.parametrize("kind", ["onnx", "torchscript"])
def test_a_local_float32_file_wraps_to_a_float32_directory(
        kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``selfcorrect wrap --out DIR`` of a local float32 file: the TorchScript SC-Net
    (``torch.jit.load``) computes the network in float32 and returns the source's logits bit
    for bit wherever no constraint changes them. (The ONNX exporter cannot express this
    layer's control flow, float32 or float64: no ``model.onnx`` is written.)"""
    path, source = write_tie_file(kind, tmp_path)
    rows = ulp_tie_rows()
    constraints = tmp_path / "ties.yaml"
    constraints.write_text(yaml.safe_dump(TIE_CONSTRAINTS))
    out = tmp_path / "wrapped"
    code = main(["selfcorrect", "wrap", "--model", str(path), "--constraints",
                 str(constraints), "--out", str(out), "--json"])
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["written"]["model.pt"] == str(out / "model.pt")
    with torch.no_grad():
        logits, bottom = torch.jit.load(str(out / "model.pt")).forward_with_bottom(
            torch.from_numpy(rows))
    assert_serves_the_source(rows, source, logits.numpy(), logits.argmax(1).numpy(),
                             bottom.numpy())


def test_a_torch_files_dtype_is_its_parameters(tmp_path: Path) -> None:
    """A state dict and a ``torch.export`` archive are read as the dtype of their parameters;
    a JSON network file as float64, the dtype its reader reads."""
    single = torch.nn.Linear(2, 3)
    for dtype in (torch.float32, torch.float64):
        state = tmp_path / f"state_{dtype}.pt"
        torch.save(single.to(dtype).state_dict(), state)
        assert load_model(str(state), None, tmp_path).dtype == str(dtype).removeprefix("torch.")
    exported = tmp_path / "ties.pt2"
    torch.export.save(torch.export.export(tie_model(), (torch.zeros(2, 2),)), str(exported))
    assert load_model(str(exported), None, tmp_path).dtype == "float32"
    network_file = tmp_path / "ties.json"
    save_network(from_torch(tie_model()), network_file)
    assert load_model(str(network_file), None, tmp_path).dtype == "float64"


def test_a_file_rewritten_while_read_is_refused_and_a_float64_onnx_file_is_float64(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A float32 ONNX file replaced by a float64 export after its network was read, before
    its dtype is read, is refused rather than described by the two versions; the float64
    file, read whole, is float64."""
    import verifier.convert

    path, _ = write_tie_file("onnx", tmp_path)
    wide = tmp_path / "wide.onnx"
    torch.onnx.export(tie_model(torch.float64), (torch.zeros(2, 2, dtype=torch.float64),),
                      str(wide), dynamo=False, input_names=["x"], output_names=["y"])
    read = verifier.convert.load_network

    def read_then_rewrite(source: Any) -> Any:
        network = read(source)
        path.write_bytes(wide.read_bytes())
        return network

    monkeypatch.setattr(verifier.convert, "load_network", read_then_rewrite)
    with pytest.raises(CertgateInputError, match="changed while it was read"):
        load_model(str(path), None, tmp_path)
    monkeypatch.undo()
    assert load_model(str(path), None, tmp_path).dtype == "float64"
