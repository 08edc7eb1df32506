"""One-hot columns as ``pandas.get_dummies`` writes them by default (``occ_A``, ``occ_B``, …,
bool or 0/1) are one categorical feature when they partition the rows (exactly one 1 in every
row), as ``NAME=VALUE`` columns are: fitted as separate binary columns, a Bayesian network
with at most three learned parents per node put 32 % of a seven-category group's mass on
rows with two occupations or none, points the model never sees, and proved a parity ratio of
0.6859 below 0.7 where the data's is 0.7072. Oracle: the data's own
frequencies, which a categorical feature's table reproduces exactly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from certgate.population_data import fit_population
from pipeline_steps.cli import main
from tests.parity_on_data import data_ratio, fit_default_population, verify_parity
from tests.test_binding import export_onnx

OCCUPATIONS = list("ABCDEFG")


def dummies_table(rows: int = 4000, seed: int = 7, drop_first: bool = False) -> pd.DataFrame:
    """sex and a seven-valued occupation (depending on sex), one-hot encoded by pandas'
    defaults (``sex_F``, ``occ_A``, …; bool columns; ``drop_first`` as pandas takes it), and
    an income."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], rows)
    women = np.array([0.1, 0.1, 0.15, 0.15, 0.2, 0.15, 0.15])
    men = np.array([0.3, 0.2, 0.15, 0.12, 0.1, 0.08, 0.05])
    occ = np.where(sex == "F", rng.choice(OCCUPATIONS, rows, p=women),
                   rng.choice(OCCUPATIONS, rows, p=men))
    frame = pd.DataFrame({"sex": sex, "occ": occ, "income": rng.lognormal(10, 0.5, rows)})
    return pd.get_dummies(frame, columns=["sex", "occ"], drop_first=drop_first)


def test_dummies_that_partition_the_rows_are_one_categorical_feature() -> None:
    frame = dummies_table()
    frame["has_car"] = np.arange(len(frame)) % 2 == 0        # has_car, has_house: not a
    frame["has_house"] = np.arange(len(frame)) % 3 == 0      # partition, they stay binary
    model = fit_population(frame, protected="sex_M")
    kinds = {f.name: (f.kind, f.column_names(), f.categories) for f in model.features}
    assert kinds["occ"] == ("categorical", [f"occ_{o}" for o in OCCUPATIONS], OCCUPATIONS)
    assert kinds["sex"] == ("categorical", ["sex_F", "sex_M"], ["F", "M"])
    assert kinds["has_car"][0] == kinds["has_house"][0] == "binary"
    assert list(model.columns) == list(frame.columns)
    drawn = model.sample(50_000, np.random.default_rng(0))
    occupation = [model.columns.index(f"occ_{o}") for o in OCCUPATIONS]
    assert (drawn[:, occupation].sum(axis=1) == 1).all()


def test_parity_over_pandas_dummies_holds_the_datas_ratio(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = dummies_table()
    data, population = fit_default_population(frame, tmp_path, "sex_M")
    names = list(frame.columns)
    model = torch.nn.Sequential(torch.nn.Linear(len(names), 1))
    with torch.no_grad():                                    # class 1 iff occupation A or G
        model[0].weight.zero_()
        for occupation in "AG":
            model[0].weight[0, names.index(f"occ_{occupation}")] = 1.0
        model[0].bias[:] = torch.tensor([-0.5])
    path = export_onnx(model.eval(), len(names), tmp_path / "net.onnx")
    payload = verify_parity(capsys, path, names, population, data, "sex_M", "1", 0.7)
    exact = data_ratio(frame["occ_A"] | frame["occ_G"], frame["sex_F"], frame["sex_M"])
    low, high = payload["ratio"]
    assert low <= exact <= high, (float(exact), payload["ratio"])
    assert payload["population_fidelity"]["status"] == "consistent"
    assert exact > 0.7 and payload["verdict"] == "satisfied"   # it was proven violated


def test_a_string_column_named_as_in_the_csv_gets_a_way_forward(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CSV says ``sex`` = ``Male``; the model reads ``sex=Female``, ``sex=Male``.
    ``--protected sex`` and ``privileged: Male`` are refused naming what to write instead:
    protect a one-hot column (its privileged value is then 1)."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"sex": rng.choice(["Female", "Male"], 300),
                          "income": rng.lognormal(10, 0.5, 300)})
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    population = tmp_path / "pop.json"
    assert main(["population", "fit", str(data), "--out", str(population), "--json"]) == 0
    capsys.readouterr()
    names = "sex=Female,sex=Male,income"
    path = export_onnx(torch.nn.Sequential(torch.nn.Linear(3, 2)).eval(), 3,
                       tmp_path / "net.onnx")
    common = ["verify", "demographic-parity", "--model", str(path), "--input-names", names,
              "--population", str(population), "--favorable-class", "1", "--gamma", "0.8",
              "--json"]
    assert main([*common, "--protected", "sex", "--privileged", "1"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "'sex' is one-hot encoded as sex=Female, sex=Male: name one of these" in error
    assert main([*common, "--protected", "sex", "--privileged", "Male"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "protected: sex=Male, privileged: 1" in error, error
    from verifier.audits.demographic_parity import DemographicParitySettings
    with pytest.raises(ValueError, match="protected: sex=Male, privileged: 1"):
        DemographicParitySettings(kind="demographic_parity", protected="sex",
                                  privileged="Male", favorable_class=1, gamma=0.8)
    for spelled, value in (("True", 1), ("false", 0)):
        with pytest.raises(ValueError, match=rf"binary, True 1 and False 0 \(protected: "
                                             rf"married, privileged: {value}\)"):
            DemographicParitySettings(kind="demographic_parity", protected="married",
                                      privileged=spelled, favorable_class=1, gamma=0.8)
