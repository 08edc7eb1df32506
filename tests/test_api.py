"""``import certgate``: ``certgate.audit`` gives the certificate ``certgate run`` logs for the
same model, population model and audit settings (every audit kind; the certificate is read
back from the run's artifacts in a local sqlite MLflow store), from a model file, a torch
module or a local MLflow model directory; bad input names the field; ``import certgate``
imports neither torch nor MLflow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

import certgate
from pipeline_steps.cli import main
from tests.test_front_doors import CASES, population
from verifier.convert import save_network
from verifier.errors import CertgateInputError
from verifier.population import save_population

ROOT = Path(__file__).resolve().parents[1]
COMPARED = ("audit", "verdict", "bounds", "details", "settings", "algorithm")
"""Everything but cost (time spent), provenance (filled in by the pipeline from the registry)
and the creation time; in ``details`` the clock readings of the bounds' history are left out
(the bounds reached, in order, are compared)."""


def without_clock(certificate: dict[str, Any]) -> dict[str, Any]:
    details = dict(certificate["details"])
    if "history" in details:
        details["history"] = [bounds for _, bounds in details["history"]]
    return {**certificate, "details": details}


def threshold_module() -> torch.nn.Sequential:
    """Class 1 iff x + 0.5 s > 0.75, as a torch module (tests.causal_nets builds the same)."""
    layer = torch.nn.Linear(2, 2).double()
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 0.5]], dtype=torch.float64))
        layer.bias.copy_(torch.tensor([0.0, -0.75], dtype=torch.float64))
    return torch.nn.Sequential(layer)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from verifier.convert.torch_module import from_torch

    root = tmp_path_factory.mktemp("api")
    save_network(from_torch(threshold_module(), ["x", "s"]), root / "model.json")
    for kind in ("binary", "uniform"):
        save_population(population(kind), root / f"{kind}.json")
    return {"root": root, "model": root / "model.json", "binary": root / "binary.json",
            "uniform": root / "uniform.json"}


def certificate_of_run(store: str, experiment: str, model: dict[str, str],
                       audit: dict[str, Any], root: Path, tag: str,
                       capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """The certificate ``certgate run`` logs for one ``audit`` (with its ``name``) on
    ``model`` (the config's ``model`` section), fetched back from its MLflow run."""
    import mlflow

    config = root / f"{tag}.yaml"
    config.write_text(yaml.safe_dump({
        "tracking": {"tracking_uri": store, "experiment": experiment},
        "model": model,
        "validation": {"population_samples": 200},
        "audits": [audit],
        "gate": {"promote_alias": None},
    }))
    capsys.readouterr()
    code = main(["run", "--config", str(config), "--no-progress", "--force", "--json"])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    run_id = json.loads(out)["audit"]["run_id"]
    mlflow.set_tracking_uri(store)
    path = mlflow.artifacts.download_artifacts(
        run_id=run_id, artifact_path=f"certificates/{audit['name']}.json",
        dst_path=str(root / tag))
    return json.loads(Path(path).read_text())


def logged_certificate(files: dict[str, Path], population_file: Path,
                       settings: dict[str, Any], capsys: pytest.CaptureFixture[str],
                       tag: str) -> dict[str, Any]:
    """The certificate ``certgate run`` logs for ``settings`` on the test model."""
    return certificate_of_run(
        f"sqlite:///{files['root'] / 'mlflow.db'}", "api",
        {"uri": str(files["model"]), "population_uri": str(population_file)},
        {"name": "checked", **settings}, files["root"], tag, capsys)


@pytest.mark.parametrize(("population_kind", "verb", "settings", "options"), CASES,
                         ids=[f"{case[2]['kind']}-{index}" for index, case in enumerate(CASES)])
def test_audit_gives_the_certificate_run_logs(files: dict[str, Path],
                                              capsys: pytest.CaptureFixture[str],
                                              population_kind: str, verb: str,
                                              settings: dict[str, Any],
                                              options: list[str]) -> None:
    population_file = files[population_kind]
    tag = f"{settings['kind']}-{population_kind}-{abs(hash(json.dumps(settings))) % 10**6}"
    logged = logged_certificate(files, population_file, settings, capsys, tag)
    [from_file] = certgate.audit(str(files["model"]), str(population_file),
                                 [{"name": "checked", **settings}])
    api, run = without_clock(from_file.to_dict()), without_clock(logged)
    for field in COMPARED:
        assert api[field] == run[field], field


def test_torch_module_and_settings_objects(files: dict[str, Path]) -> None:
    from verifier.audits import DemographicParitySettings

    settings = {"kind": "demographic_parity", "protected": "s", "privileged": 1,
                "favorable_class": 1, "gamma": 0.3, "precision": 0.01, "timeout_s": 120}
    [from_dict] = certgate.audit(str(files["model"]), certgate.load_population(files["binary"]),
                                 settings)
    [from_module] = certgate.audit(threshold_module(), files["binary"],
                                   [DemographicParitySettings(**settings)],
                                   input_names=["x", "s"])
    assert from_module.verdict == from_dict.verdict
    assert from_module.bounds == from_dict.bounds


@pytest.mark.parametrize(("audits", "message"), [
    ([], "give at least one audit"),
    ({"kind": "monotonicity", "feature": "x", "min_probability": 2}, "min_probability"),
    ([{"kind": "monotonicity", "feature": "x", "min_probability": 0.5},
      {"kind": "monotonicity", "feature": "s", "min_probability": 0.5}],
     "names ['monotonicity'] repeat"),
    ({"kind": "monotonicity", "feature": "nope", "min_probability": 0.5}, "nope"),
])
def test_bad_audits_name_the_field(files: dict[str, Path], audits: Any, message: str) -> None:
    with pytest.raises(CertgateInputError) as raised:
        certgate.audit(str(files["model"]), files["uniform"], audits)
    assert message in str(raised.value)


def test_model_must_be_a_model(files: dict[str, Path]) -> None:
    with pytest.raises(CertgateInputError, match="model: expected a torch module"):
        certgate.audit(42, files["uniform"], {"kind": "monotonicity", "feature": "x",
                                                         "min_probability": 0.5})
    with pytest.raises(CertgateInputError, match="population: give a population model"):
        certgate.audit(str(files["model"]), None, {"kind": "monotonicity", "feature": "x",
                                                         "min_probability": 0.5})


def test_fit_population_matches_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd

    from tests.test_population_fit_cli import mixed_table

    frame = mixed_table(300, seed=4)
    frame.to_csv(tmp_path / "data.csv", index=False)
    assert main(["population", "fit", str(tmp_path / "data.csv"), "--out",
                 str(tmp_path / "cli.json"), "--domain", "score=0:1", "--json"]) == 0
    api = certgate.fit_population(pd.read_csv(tmp_path / "data.csv"),
                                  domains={"score": (0, 1)})
    cli = certgate.load_population(tmp_path / "cli.json")
    assert cli.fitted_from is not None and cli.fitted_from.rows == 300
    assert api.model_dump() == cli.model_copy(update={"fitted_from": None}).model_dump()


def test_import_certgate_is_light() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import sys, certgate; print(sorted(m for m in ('torch', "
         "'mlflow', 'scipy', 'pandas') if m in sys.modules))"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True, timeout=120)
    assert result.stdout.strip() == "[]"


def register_threshold_model(store: str, experiment: str, name: str) -> None:
    """Register the threshold model with its population (binary ``s``) as ``name`` version 1
    in the local store ``store``, inside a run of ``experiment``."""
    import mlflow

    from registry_hooks.certgate_model import log_model

    mlflow.set_tracking_uri(store)
    mlflow.set_registry_uri(store)
    mlflow.set_experiment(experiment)
    with mlflow.start_run():
        log_model(threshold_module(), population("binary"),
                                  registered_model_name=name, serialization_format="pickle")


def test_registered_model_with_its_shipped_population(files: dict[str, Path]) -> None:
    """A ``models:/`` URI in a local sqlite store, with the population model it ships: the
    same certificate as from the files."""
    store = f"sqlite:///{files['root'] / 'registry.db'}"
    register_threshold_model(store, "api-registry", "api_threshold")
    settings = {"kind": "causal_fairness", "protected": ["s"], "max_biased_share": 0.6,
                "max_unstable": 4, "timeout_s": 120, "target_width": 0.01}
    [registered] = certgate.audit("models:/api_threshold/1", None, settings,
                                  tracking_uri=store)
    [local] = certgate.audit(str(files["model"]), files["binary"], settings)
    assert registered.verdict == local.verdict and registered.bounds == local.bounds


def test_verify_reads_registry_uris_and_mlflow_directories_like_run(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``certgate verify --model`` takes what ``certgate run`` takes: a ``models:/`` URI on
    MLFLOW_TRACKING_URI and a local MLflow model directory give the file's certificate."""
    import mlflow

    store = f"sqlite:///{files['root'] / 'verify.db'}"
    register_threshold_model(store, "verify-registry", "verify_threshold")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    directory = Path(mlflow.artifacts.download_artifacts(
        "models:/verify_threshold/1", dst_path=str(files["root"] / "downloaded")))
    options = ["--population", str(files["binary"]), "--protected", "s", "--privileged", "1",
               "--favorable-class", "1", "--gamma", "0.3", "--precision", "0.01",
               "--timeout", "120", "--json"]
    results = []
    for model in (str(files["model"]), "models:/verify_threshold/1",
                  "models:/verify_threshold@champion", str(directory)):
        if model.endswith("@champion"):
            mlflow.MlflowClient(store).set_registered_model_alias(
                "verify_threshold", "champion", "1")
        code = main(["verify", "demographic-parity", "--model", model, *options])
        result = json.loads(capsys.readouterr().out)
        results.append((code, result["verdict"], result["ratio"], result["probabilities"]))
    assert all(result == results[0] for result in results[1:]), results
    assert main(["verify", "demographic-parity", "--model", "models:/absent/1",
                 *options]) == 2
    assert "absent" in json.loads(capsys.readouterr().out)["error"]
