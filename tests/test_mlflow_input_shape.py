"""A pickled torch module that is not a plain ``Sequential`` — preprocessing in ``forward``,
e.g. standardisation — is converted through ``torch.export``, which needs the input shape.
The command line cannot pass ``input_shape=…``: the shape comes from the MLflow signature
(tensor or named columns), the input names the model records or the user gives
(``--input-names``, ``model.input_names``), or ``--input-shape``; without any, the error says
which of these to give. Oracle: the converted network's outputs equal the module's on random
inputs (the converter's own check), and the audit's certified interval holds the dense
Monte Carlo estimate of the same ratio."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
from mlflow.models import infer_signature

from pipeline_steps.cli import main
from verifier.population import (
    Discrete,
    Factor,
    Feature,
    PopulationModel,
    Product,
    Uniform,
    save_population,
)

COLUMNS = ["age", "income", "sex"]


class Standardised(torch.nn.Module):
    """``net((x − mean) / std)``: what a first real model often looks like."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.register_buffer("mean", torch.tensor([40.0, 50.0, 0.5]))
        self.register_buffer("std", torch.tensor([10.0, 20.0, 0.5]))
        self.net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(),
                                       torch.nn.Linear(8, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.std)


@pytest.fixture(scope="module")
def model() -> Standardised:
    return Standardised().eval()


@pytest.fixture(scope="module")
def population_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("shape") / "population.json"
    save_population(PopulationModel(
        features=[Feature(name="age", kind="continuous", domain=(20, 60)),
                  Feature(name="income", kind="continuous", domain=(0, 100)),
                  Feature(name="sex", kind="binary", domain=(0, 1))],
        distribution=Product(factors=[
            Factor(columns=["age"], distribution=Uniform(lower=20, upper=60)),
            Factor(columns=["income"], distribution=Uniform(lower=0, upper=100)),
            Factor(columns=["sex"], distribution=Discrete(values=[0, 1],
                                                          probabilities=[0.5, 0.5]))])), path)
    return path


def saved(model: Standardised, directory: Path, signature: str | None) -> Path:
    """``model`` saved as an MLflow pytorch model (pickle) with a ``signature`` of named
    columns, a tensor signature, or none."""
    rows = np.random.default_rng(0).uniform([20, 0, 0], [60, 100, 1], size=(5, 3))
    with torch.no_grad():
        outputs = model(torch.as_tensor(rows, dtype=torch.float32)).numpy()
    inferred = {"columns": infer_signature(pd.DataFrame(rows, columns=COLUMNS), outputs),
                "tensor": infer_signature(rows.astype(np.float32), outputs),
                None: None}[signature]
    mlflow.pytorch.save_model(model, str(directory), serialization_format="pickle",
                              signature=inferred, pip_requirements=["torch"])
    return directory


def parity(capsys: pytest.CaptureFixture[str], model_dir: Path, population: Path,
           *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["verify", "demographic-parity", "--model", str(model_dir), "--population",
                 str(population), "--protected", "sex", "--privileged", "1",
                 "--favorable-class", "1", "--gamma", "0.5", "--timeout", "20",
                 "--precision", "0.05", "--json", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def monte_carlo_ratio(model: Standardised, n: int = 400_000) -> tuple[float, float]:
    rng = np.random.default_rng(5)
    x = np.column_stack([rng.uniform(20, 60, n), rng.uniform(0, 100, n), rng.integers(0, 2, n)])
    with torch.no_grad():
        favourable = model(torch.as_tensor(x, dtype=torch.float32)).argmax(1).numpy() == 1
    women, men = favourable[x[:, 2] == 0], favourable[x[:, 2] == 1]
    ratio = women.mean() / men.mean()
    se = ratio * np.sqrt((1 - women.mean()) / (women.size * women.mean())
                         + (1 - men.mean()) / (men.size * men.mean()))
    return float(ratio), float(se)


@pytest.mark.parametrize("signature", ["columns", "tensor"])
def test_the_shape_comes_from_the_signature(
        model: Standardised, population_file: Path, tmp_path: Path, signature: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    model_dir = saved(model, tmp_path / "model", signature)
    names = () if signature == "columns" else ("--input-names", ",".join(COLUMNS))
    code, out, err = parity(capsys, model_dir, population_file, *names)
    assert code in (0, 1), err
    low, high = json.loads(out)["ratio"]
    ratio, se = monte_carlo_ratio(model)
    assert low - 4 * se <= ratio <= high + 4 * se


def test_without_a_signature_the_names_or_input_shape_give_it(
        model: Standardised, population_file: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    model_dir = saved(model, tmp_path / "model", None)
    code, out, err = parity(capsys, model_dir, population_file)
    assert code == 2
    message = json.loads(out)["error"]
    assert "input_shape=" not in message
    assert "--input-shape" in message and "--input-names" in message
    for extra in (("--input-names", ",".join(COLUMNS)),
                  ("--input-names", ",".join(COLUMNS), "--input-shape", "3")):
        code, out, err = parity(capsys, model_dir, population_file, *extra)
        assert code in (0, 1), err
    code, out, _ = parity(capsys, model_dir, population_file, "--input-names",
                          ",".join(COLUMNS), "--input-shape", "x")
    assert code == 2 and "--input-shape" in json.loads(out)["error"]


def test_the_python_api_takes_the_shape_from_the_input_names(
        model: Standardised, population_file: Path) -> None:
    import certgate

    (certificate,) = certgate.audit(
        model, population_file, [{"kind": "demographic_parity", "protected": "sex",
                                  "privileged": 1, "favorable_class": 1, "gamma": 0.5,
                                  "precision": 0.05, "timeout_s": 20}],
        input_names=COLUMNS)
    low, high = certificate.bounds["value"]
    ratio, se = monte_carlo_ratio(model)
    assert low - 4 * se <= ratio <= high + 4 * se
