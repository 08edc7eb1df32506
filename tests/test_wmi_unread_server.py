"""The README's flow on a whole table, against a real ``mlflow server``: ``certgate population
fit`` on a raw CSV with its defaults (the label is fitted too, and becomes a parent of two
inputs), a classifier logged with plain ``mlflow.pytorch.log_model``, and ``certgate verify
equivalence`` against a scikit-learn tree. The label's two values made 31,250 terms and the
audit was refused (a tree cannot be box-branched); summed out, the 15,625 combinations of
the inputs give the exact finite sum, checked against the population's own box
probabilities (variable elimination) summed in ``Fraction`` over every point.
"""

from __future__ import annotations

import json
import pickle
import uuid
from fractions import Fraction
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
from mlflow_server import run_cli
from sklearn.tree import DecisionTreeClassifier

from registry_hooks.certgate_model import pinned_requirements
from registry_hooks.connection import Registry, connect
from verifier.population import load_population

pytest_plugins = ["mlflow_server"]

VALUES = 25


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    return connect(mlflow_server.url)


def table() -> pd.DataFrame:
    """Three integer inputs of 25 values and a label that depends on two of them."""
    rng = np.random.default_rng(0)
    a, b, c = (rng.integers(0, VALUES, 4000) for _ in range(3))
    label = ((a + b + rng.integers(0, 10, 4000)) > 28).astype(int)
    return pd.DataFrame({"a": a, "b": b, "c": c, "label": label})


def classifier() -> torch.nn.Module:
    """Class 1 iff ``a − b + c/2 − 1/4 > 0`` (never a tie on integers)."""
    layer = torch.nn.Linear(3, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[0.0, 0.0, 0.0], [1.0, -1.0, 0.5]]))
        layer.bias.copy_(torch.tensor([0.0, -0.25]))
    return torch.nn.Sequential(layer).eval()


def test_equivalence_on_a_whole_table_fit_gets_its_exact_finite_sum(
        registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    frame = table()
    frame.to_csv(tmp_path / "data.csv", index=False)
    code, out, err = run_cli(capsys, "population", "fit", str(tmp_path / "data.csv"), "--out",
                             str(tmp_path / "population.json"))
    assert code == 0, (out, err)
    name = f"whole_{uuid.uuid4().hex[:8]}"
    mlflow.set_tracking_uri(registry.tracking_uri)
    info = mlflow.pytorch.log_model(classifier(), name="model", serialization_format="pickle",
                                    pip_requirements=pinned_requirements("pytorch"),
                                    registered_model_name=name)
    inputs = frame[["a", "b", "c"]]
    tree = DecisionTreeClassifier(max_depth=4, random_state=0).fit(
        inputs, (inputs["a"] - inputs["b"] + inputs["c"] / 3 > 2).astype(int))
    with open(tmp_path / "tree.pkl", "wb") as handle:
        pickle.dump(tree, handle)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", registry.tracking_uri)
    code, out, err = run_cli(
        capsys, "verify", "equivalence", "--model",
        f"models:/{name}/{info.registered_model_version}", "--input-names", "a,b,c",
        "--population", str(tmp_path / "population.json"), "--surrogate",
        str(tmp_path / "tree.pkl"), "--no-progress", "--json")
    assert code == 0, (out, err)
    document = json.loads(out)
    assert document["proven"] is True
    assert document["method"] == "finite sum over the prior's points"
    low, high = document["probability_interval"]
    assert high - low < 1e-9

    population = load_population(tmp_path / "population.json")
    assert list(population.columns) == ["a", "b", "c", "label"]
    grid = np.array(np.meshgrid(*[np.arange(VALUES)] * 3, indexing="ij")).reshape(3, -1).T
    points = grid.astype(float)
    boxes_lo = np.hstack([points, np.full((len(points), 1), -np.inf)])
    boxes_hi = np.hstack([points, np.full((len(points), 1), np.inf)])
    mass_low, mass_high = population.prob_boxes_interval(boxes_lo, boxes_hi)
    assert sum(map(Fraction, mass_low)) <= 1 <= sum(map(Fraction, mass_high))  # every point
    net_class = (2 * grid[:, 0] - 2 * grid[:, 1] + grid[:, 2]) * 4 > 2  # a − b + c/2 > 1/4
    tree_class = tree.predict(pd.DataFrame(points, columns=["a", "b", "c"])) == 1
    agree = net_class == tree_class
    oracle_low = sum((Fraction(float(m)) for m in mass_low[agree]), Fraction(0))
    oracle_high = sum((Fraction(float(m)) for m in mass_high[agree]), Fraction(0))
    assert Fraction(low) <= oracle_high and oracle_low <= Fraction(high)
    assert 0.05 < low < 0.95
