"""A column on a 0.75 grid with a negative offset through the user's flow against a real
``mlflow server``: CSV → ``population fit`` (defaults) → a torch model logged with it
(``pickle`` and ``pt2``) and the CSV as its dataset → ``certgate run --config``: the domain
check and the expectation suite pass on the data's values, the fidelity check reads the data
(consistent), the certified ratio contains dense Monte Carlo of the torch model at the
population's values, and a config naming a privileged value off the coded column's grid is
an input error naming the column and the value."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
from mlflow_server import run_cli, write_server_config
from small_training import train_classifier

from registry_hooks.certgate_model import log_model
from registry_hooks.connection import Registry, connect
from verifier.population import load_population

pytest_plugins = ["mlflow_server"]

RATING = [-0.5, 0.25, 1.0, 1.75, 2.5]          # offset −0.5, step 0.75


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    return connect(mlflow_server.url)


def _frame(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, rows)
    rating = np.where(sex == 1, rng.choice(RATING, rows, p=[0.1, 0.2, 0.2, 0.3, 0.2]),
                      rng.choice(RATING, rows, p=[0.3, 0.3, 0.2, 0.1, 0.1]))
    level = rng.integers(0, 3, rows)
    return pd.DataFrame({"sex": sex, "rating": rating, "level": level})


def _model(frame: pd.DataFrame) -> torch.nn.Sequential:
    inputs = torch.tensor(frame.to_numpy(np.float32))
    labels = torch.tensor(((frame.rating + 0.4 * frame.level) >= 1.4).astype(int).to_numpy())
    return train_classifier(inputs, labels)


@pytest.mark.parametrize("serialization", ["pickle", "pt2"])
def test_a_grid_column_through_certgate_run(registry: Registry, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str],
                                            serialization: str) -> None:
    frame = _frame(1500, seed=3)
    csv = tmp_path / "train.csv"
    frame.to_csv(csv, index=False)
    population_path = tmp_path / "population.json"
    code, out, err = run_cli(capsys, "population", "fit", str(csv), "--out",
                             str(population_path), "--protected", "sex", "--json")
    assert code == 0, err
    coded = {f["name"]: (f["step"], f["offset"]) for f in json.loads(out)["features"]
             if "step" in f}
    assert coded == {"rating": (0.75, -0.5)}
    population = load_population(population_path)
    model = _model(frame)
    name = f"grid_{uuid.uuid4().hex[:8]}"
    mlflow.set_experiment(f"train_{name}")
    with mlflow.start_run():
        mlflow.log_input(mlflow.data.from_pandas(pd.read_csv(csv), source=str(csv),
                                                 name="train"), context="training")
        log_model(model, population, registered_model_name=name,
                  serialization_format=serialization, alias="candidate", registry=registry,
                  input_domain={"rating": (-0.5, 2.5), "level": (0, 2)})
    parity = {"kind": "demographic_parity", "protected": "sex", "privileged": 1,
              "favorable_class": 1, "gamma": 0.5, "timeout_s": 60,
              "qualified": "x.rating >= 0.25"}
    config = write_server_config(tmp_path, registry.tracking_uri,
                                 {"uri": f"models:/{name}@candidate"}, [parity], samples=500)
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code in (0, 1), (out, err)
    document = json.loads(out)
    audit = document["audit"]["audits"]["demographic_parity"]
    assert audit["population_fidelity"]["status"] == "consistent", audit["population_fidelity"]
    assert audit["population_fidelity"]["data"]["rows_used"] == 1500

    drawn = population.sample(200_000, np.random.default_rng(5))
    assert set(np.unique(drawn[:, 1]).tolist()) <= set(RATING)
    with torch.no_grad():
        granted = model(torch.as_tensor(drawn, dtype=torch.float32)).argmax(1).numpy() == 1
    qualified = drawn[:, 1] >= 0.25
    privileged = drawn[:, 0] == 1
    rates, errors = [], []
    for members in (~privileged & qualified, privileged & qualified):
        hits = granted[members]
        rates.append(hits.mean())
        errors.append(hits.std() / np.sqrt(hits.size))
    ratio = rates[0] / rates[1]
    error = ratio * np.hypot(errors[0] / rates[0], errors[1] / rates[1])
    low, high = audit["ratio"]
    assert low - 5 * error <= ratio <= high + 5 * error, (low, high, ratio)

    refused = write_server_config(tmp_path, registry.tracking_uri,
                                  {"uri": f"models:/{name}@candidate"},
                                  [{**parity, "protected": "rating", "privileged": 1.1,
                                    "qualified": None}])
    code, out, err = run_cli(capsys, "run", "--config", str(refused), "--no-progress",
                             "--json")
    assert code == 2, (out, err)
    assert "1.1 is not a value of the coded column 'rating'" in err
    assert isinstance(json.loads(out), dict)
