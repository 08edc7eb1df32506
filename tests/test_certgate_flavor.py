"""``registry_hooks.save_model`` and ``load_model`` are symmetric, as an MLflow flavour's are:
a model saved to a directory loads back as the same function (the IR evaluated against the
torch module / ONNX graph on seeded random inputs, float64 against float32 tolerance), with
the same population model (its JSON, byte for byte through the loader's hash) and the input
names and domain it was saved with. ``log_model`` writes the same layout (its round trip
through a real tracking server is tested in ``tests/test_registry_server.py``)."""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from registry_hooks import fetch_population, load_model, log_model_with_population, save_model
from verifier.errors import CertgateInputError
from verifier.population import (
    Factor,
    Feature,
    PopulationModel,
    Product,
    Uniform,
    save_population,
)

NAMES = ["age", "income", "debt"]


def population() -> PopulationModel:
    return PopulationModel(
        features=[Feature(name=name, kind="continuous", domain=(0, 1)) for name in NAMES],
        distribution=Product(factors=[Factor(columns=[name], distribution=Uniform(lower=0,
                                                                                   upper=1))
                                      for name in NAMES]))


def module() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))


@pytest.mark.parametrize("serialization_format", ["pt2", "pickle"])
def test_saved_model_loads_back_as_itself(tmp_path: Path, serialization_format: str) -> None:
    net, people = module(), population()
    target = tmp_path / "saved"
    save_model(net, target, people, serialization_format=serialization_format,
               input_domain={"age": (0.0, 1.0)})
    loaded = load_model(str(target), None, tmp_path / "work")
    assert loaded.flavor == "pytorch" and loaded.serialization == serialization_format
    assert list(loaded.network.input_names) == NAMES
    assert loaded.input_domain() == {"age": (0.0, 1.0)}
    points = np.random.default_rng(0).uniform(size=(64, 3))
    with torch.no_grad():
        expected = net(torch.as_tensor(points, dtype=torch.float32)).numpy()
    assert np.allclose(loaded.network.evaluate(points), expected, atol=1e-5)

    written = tmp_path / "population.json"
    save_population(people, written)
    artifact = fetch_population(loaded, None, tmp_path / "work")
    assert artifact.sha256 == hashlib.sha256(written.read_bytes()).hexdigest()
    assert list(artifact.model.columns) == NAMES


def test_saved_onnx_model_loads_back(tmp_path: Path) -> None:
    import onnx

    net = module()
    exported = tmp_path / "net.onnx"
    torch.onnx.export(net, (torch.zeros(1, 3),), str(exported), dynamo=False,
                      input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    save_model(onnx.load(str(exported)), tmp_path / "saved", population())
    loaded = load_model(str(tmp_path / "saved"), None, tmp_path / "work")
    assert loaded.flavor == "onnx" and list(loaded.network.input_names) == NAMES
    points = np.random.default_rng(1).uniform(size=(32, 3))
    with torch.no_grad():
        expected = net(torch.as_tensor(points, dtype=torch.float32)).numpy()
    assert np.allclose(loaded.network.evaluate(points), expected, atol=1e-5)


def test_save_refuses_what_it_cannot_store(tmp_path: Path) -> None:
    with pytest.raises(CertgateInputError, match="cannot log a dict"):
        save_model({"weights": []}, tmp_path / "saved", population())


def test_the_old_name_warns_and_names_the_new_one() -> None:
    with warnings.catch_warnings(record=True) as caught, \
            pytest.raises(CertgateInputError, match="alias needs"):
        warnings.simplefilter("always")
        log_model_with_population(module(), population(), alias="champion")
    assert any("registry_hooks.log_model" in str(item.message) for item in caught)
