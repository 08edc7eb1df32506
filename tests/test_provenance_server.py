"""What an audit run records, against a real ``mlflow server``: the population model as an
artifact whose sha256 every certificate carries; result tags replaced as a whole, so a second
gate with a narrower configuration leaves no stale verdict; a corrupt model in the registry is
one line and exit code 2 with nothing written."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import mlflow
import pytest
from mlflow_server import run_cli, write_server_config

from registry_hooks.certgate_model import log_model
from registry_hooks.connection import Registry, connect
from registry_hooks.tags import alias_version, version_tags
from verifier.certificate import Certificate

pytest_plugins = ["mlflow_server"]

PARITY = {"kind": "demographic_parity", "protected": "sex", "privileged": 1,
          "favorable_class": 1, "gamma": 0.8, "timeout_s": 60}


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    return connect(mlflow_server.url)


def write_config(tmp_path: Path, tracking_uri: str, model_uri: str,
                 audits: list[dict[str, Any]]) -> Path:
    return write_server_config(tmp_path, tracking_uri, {"uri": model_uri}, audits, samples=300)


def test_population_artifact_hash_and_no_stale_tags(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"prov_{uuid.uuid4().hex[:8]}"
    info = log_model(credit_demo.fair, credit_demo.population,
                                     registered_model_name=name, serialization_format="pickle",
                                     alias="candidate", registry=registry)
    version = str(info.registered_model_version)
    uri = f"models:/{name}@candidate"
    strict = {**PARITY, "name": "parity_strict", "gamma": 0.999, "timeout_s": 0.5}
    wide = write_config(tmp_path, registry.tracking_uri, uri, [PARITY, strict])
    code, out, err = run_cli(capsys, "run", "--config", str(wide), "--no-progress", "--json")
    assert code == 1, (out, err)
    tags = version_tags(registry, name, version)
    assert tags["certgate.gate"] == "failed"
    assert tags["certgate.parity_strict.verdict"] == "unknown"

    run_id = tags["certgate.audit.run_id"]
    mlflow.set_tracking_uri(registry.tracking_uri)
    local = mlflow.artifacts.download_artifacts(
        f"runs:/{run_id}/population/population_model.json", dst_path=str(tmp_path / "dl"))
    digest = hashlib.sha256(Path(local).read_bytes()).hexdigest()
    shipped = mlflow.artifacts.download_artifacts(
        f"models:/{name}/{version}", dst_path=str(tmp_path / "model"))
    assert digest == hashlib.sha256(
        (Path(shipped) / "extra_files" / "population_model.json").read_bytes()).hexdigest()
    for audit in ("demographic_parity", "parity_strict"):
        certificate = Certificate.from_dict(mlflow.artifacts.load_dict(
            f"runs:/{run_id}/certificates/{audit}.json"))
        assert certificate.provenance["population_sha256"] == digest
        # a registered version is named by name and version, not by a digest of its files
        assert (certificate.provenance["model_name"],
                certificate.provenance["model_version"]) == (name, version)
        assert "model_sha256" not in certificate.provenance
        assert certificate.provenance["population_artifact"] == "population/population_model.json"
        assert certificate.provenance["input_names"] == list(credit_demo.population.columns)
        assert "smear-longest-edge splitting" in certificate.algorithm
    assert registry.client.get_run(run_id).data.params["population_sha256"] == digest

    narrow = write_config(tmp_path, registry.tracking_uri, uri, [PARITY])
    code, out, err = run_cli(capsys, "run", "--config", str(narrow), "--no-progress", "--json")
    assert code == 0, (out, err)
    tags = version_tags(registry, name, version)
    assert tags["certgate.gate"] == "passed"
    assert not [key for key in tags if key.startswith("certgate.parity_strict.")]
    assert tags["certgate.demographic_parity.verdict"] == "satisfied"
    assert alias_version(registry, name, "champion") == version


def test_corrupt_registered_model_is_one_line_and_writes_nothing(
        registry: Registry, credit_demo, mlflow_server, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"corrupt_{uuid.uuid4().hex[:8]}"
    info = log_model(credit_demo.fair, credit_demo.population,
                                     registered_model_name=name, serialization_format="pt2",
                                     alias="candidate", registry=registry)
    stored = [path for path in (mlflow_server.root / "artifacts").rglob("model.pt2")
              if info.model_id in str(path)]
    assert len(stored) == 1
    data = stored[0].read_bytes()
    stored[0].write_bytes(data[: len(data) // 3])
    version = str(info.registered_model_version)
    before = version_tags(registry, name, version)
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate", [PARITY])
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and "cannot read the model files" in err
    assert "Traceback" not in err
    assert json.loads(out) == {"error": err.removeprefix("certgate: error: ").strip(),
                               "exit_code": 2}  # --json: the error as one object on stdout
    assert version_tags(registry, name, version) == before
    assert alias_version(registry, name, "champion") is None
