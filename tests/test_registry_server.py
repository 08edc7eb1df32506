"""Registry round trips against a real ``mlflow server``: log with the population model, load
back (pt2, pickle, ONNX; registry, run and local URIs), convert, same outputs; tags, aliases,
versions awaiting audit, the polling watcher; clear errors for missing models and
unreachable servers."""

from __future__ import annotations

import io
import time
import uuid
import warnings
from pathlib import Path

import mlflow
import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from registry_hooks.certgate_model import (
    load_model,
    load_population_model,
    log_model,
)
from registry_hooks.connection import Registry, RegistryError, RegistryUnreachableError, connect
from registry_hooks.dispatch import Dispatcher, registry_due_check
from registry_hooks.events import RegistryEvent
from registry_hooks.tags import (
    STATUS_AUDITED,
    STATUS_TAG,
    alias_version,
    move_alias,
    set_version_tags,
    version_tags,
    versions_awaiting_audit,
)
from registry_hooks.watcher import poll_once
from verifier.errors import CertgateInputError

pytest_plugins = ["mlflow_server"]


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    registry = connect(mlflow_server.url)
    mlflow.set_experiment("registry-tests")
    return registry


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def torch_outputs(model: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.as_tensor(x, dtype=torch.float32)).double().numpy()


def onnx_of(model: torch.nn.Module) -> onnx.ModelProto:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, 6),), buffer, dynamo=False,
                          input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    return onnx.load_from_string(buffer.getvalue())


@pytest.mark.parametrize("fmt", ["pt2", "pickle", "onnx"])
def test_log_register_load_convert_round_trip(fmt: str, registry: Registry, credit_demo,
                                              tmp_path: Path) -> None:
    name = unique(f"roundtrip_{fmt}")
    source = onnx_of(credit_demo.fair) if fmt == "onnx" else credit_demo.fair
    info = log_model(
        source, credit_demo.population, registered_model_name=name,
        serialization_format="pickle" if fmt == "pickle" else "pt2",
        alias="candidate", registry=registry,
    )
    assert str(info.registered_model_version) == "1"
    loaded = load_model(f"models:/{name}@candidate", registry, tmp_path)
    assert (loaded.name, loaded.version) == (name, "1")
    assert loaded.serialization == fmt
    assert loaded.flavor == ("onnx" if fmt == "onnx" else "pytorch")
    assert loaded.network.input_names == list(credit_demo.population.columns)
    assert loaded.model_id == info.model_id
    x = credit_demo.population.sample(500, 7)
    expected = torch_outputs(credit_demo.fair, x)
    np.testing.assert_allclose(loaded.network.evaluate(x), expected, rtol=1e-5, atol=1e-5)
    if fmt == "onnx":
        session = onnxruntime.InferenceSession(source.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        (ort_out,) = session.run(None, {"x": x.astype(np.float32)})
        np.testing.assert_allclose(loaded.network.evaluate(x), ort_out, rtol=1e-5, atol=1e-5)
    population, where = load_population_model(loaded, None, tmp_path)
    assert population == credit_demo.population
    assert "extra_files/population_model.json" in where


def test_other_uri_forms_load_the_same_network(registry: Registry, credit_demo,
                                               tmp_path: Path) -> None:
    name = unique("uris")
    with mlflow.start_run() as run:
        info = log_model(credit_demo.biased, credit_demo.population,
                                         registered_model_name=name,
                                         serialization_format="pickle")
    x = credit_demo.population.sample(200, 3)
    expected = torch_outputs(credit_demo.biased, x)
    uris = (f"models:/{name}/1", f"models:/{info.model_id}", f"runs:/{run.info.run_id}/model")
    for uri in uris:
        network = load_model(uri, registry, tmp_path / uri.replace("/", "_")).network
        np.testing.assert_allclose(network.evaluate(x), expected, rtol=1e-5, atol=1e-5)
    local = tmp_path / "local.json"
    from verifier.convert import save_network

    save_network(load_model(f"models:/{name}/1", registry, tmp_path / "again").network, local)
    from_file = load_model(str(local), None, tmp_path)
    assert from_file.flavor == "file"
    np.testing.assert_allclose(from_file.network.evaluate(x), expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(CertgateInputError, match="carries no population model"):
        load_population_model(from_file, None, tmp_path)
    population_json = tmp_path / "population.json"
    from verifier.population import save_population

    save_population(credit_demo.population, population_json)
    population, where = load_population_model(from_file, str(population_json), tmp_path)
    assert population == credit_demo.population and where == str(population_json)
    artifact = f"models:/{name}/1"
    population, _ = load_population_model(from_file, artifact, tmp_path / "artifact")
    assert population == credit_demo.population


def test_missing_models_and_unreachable_servers_are_one_line_errors(
        registry: Registry, tmp_path: Path, unreachable_tracking_uri: str) -> None:
    with pytest.raises(RegistryError, match=r"model models:/no_such_model@candidate not found"):
        load_model("models:/no_such_model@candidate", registry, tmp_path)
    with pytest.raises(CertgateInputError, match="malformed"):
        load_model("models:/", registry, tmp_path)
    with pytest.raises(CertgateInputError, match="model file not found"):
        load_model(str(tmp_path / "absent.onnx"), registry, tmp_path)
    url = unreachable_tracking_uri
    started = time.monotonic()
    with pytest.raises(RegistryUnreachableError) as caught:
        connect(url)
    assert time.monotonic() - started < 10
    assert url in str(caught.value) and "\n" not in str(caught.value)
    connect(registry.tracking_uri)


def test_tags_aliases_and_versions_awaiting_audit(registry: Registry, credit_demo) -> None:
    name = unique("tags")
    for _ in range(3):
        log_model(credit_demo.fair, credit_demo.population,
                                  registered_model_name=name, serialization_format="pickle")
    assert [v.version for v in versions_awaiting_audit(registry, [name])] == ["1", "2", "3"]
    set_version_tags(registry, name, "2", {STATUS_TAG: STATUS_AUDITED,
                                           "certgate.audit.config_hash": "abc",
                                           "certgate.dp.ratio_lower": 0.8125})
    assert version_tags(registry, name, "2")["certgate.dp.ratio_lower"] == "0.8125"
    assert [v.version for v in versions_awaiting_audit(registry, [name])] == ["1", "3"]
    assert [v.version for v in versions_awaiting_audit(registry, [name], "abc")] == ["1", "3"]
    assert [v.version for v in versions_awaiting_audit(registry, [name], "new")] == \
        ["1", "2", "3"]
    assert alias_version(registry, name, "champion") is None
    move_alias(registry, name, "champion", "3")
    assert alias_version(registry, name, "champion") == "3"


def test_watcher_picks_up_a_new_version_once(registry: Registry, credit_demo) -> None:
    name = unique("watched")
    handled: list[RegistryEvent] = []

    def audit(event: RegistryEvent) -> None:
        handled.append(event)
        set_version_tags(registry, event.name, event.version, {STATUS_TAG: STATUS_AUDITED})

    dispatcher = Dispatcher(audit, registry_due_check(registry))
    assert poll_once(registry, dispatcher, [name]) == []
    log_model(credit_demo.fair, credit_demo.population,
                              registered_model_name=name, serialization_format="pickle")
    assert [(e.name, e.version) for e in poll_once(registry, dispatcher, [name])] == [(name, "1")]
    assert poll_once(registry, dispatcher, [name]) == []
    fresh = Dispatcher(audit, registry_due_check(registry))
    assert poll_once(registry, fresh, [name]) == []
    assert len(handled) == 1
    alias_dispatcher = Dispatcher(audit, registry_due_check(registry), alias="candidate")
    log_model(credit_demo.fair, credit_demo.population,
                              registered_model_name=name, serialization_format="pickle",
                              alias="candidate", registry=registry)
    assert [e.version for e in poll_once(registry, alias_dispatcher, [name])] == ["2"]
    assert poll_once(registry, alias_dispatcher, [name]) == []
    assert [e.version for e in handled] == ["1", "2"]


def test_an_earlier_local_store_does_not_capture_the_servers_registry(
        registry: Registry, tmp_path: Path) -> None:
    """MLflow exports MLFLOW_REGISTRY_URI whenever a store is set: after a connection to a
    local store in the same process, connecting to the server must still register there."""
    local = connect(f"sqlite:///{tmp_path / 'local.db'}")
    assert local.registry_uri == local.tracking_uri
    again = connect(registry.tracking_uri)
    assert again.registry_uri == registry.tracking_uri
    name = unique("after_local")
    again.client.create_registered_model(name)
    assert registry.client.get_registered_model(name).name == name
    assert name not in [m.name for m in local.client.search_registered_models()]


def test_an_experiment_set_on_an_earlier_store_is_not_used_on_the_server(
        registry: Registry, tmp_path: Path) -> None:
    """``mlflow.set_experiment`` on a local store exports its id: after connecting to the
    server, logging a model must not look for that id there (it used to fail with 'No
    Experiment with id=1 exists')."""
    import mlflow

    connect(f"sqlite:///{tmp_path / 'local.db'}")
    mlflow.set_experiment("local-only")
    mlflow.set_experiment("local-only-second")  # an id the server does not have
    server = connect(registry.tracking_uri)
    with mlflow.start_run() as run:
        mlflow.log_param("where", "server")
    assert server.client.get_run(run.info.run_id).data.params["where"] == "server"
