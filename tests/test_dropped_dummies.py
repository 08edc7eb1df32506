"""Dummies written with ``pandas.get_dummies(..., drop_first=True)`` (``occ_B`` … ``occ_G``;
the first category ``A`` has no column: it is the row of zeros) hold at most one 1 in every
row. Fitted as separate binary columns, a Bayesian network with at most three learned parents
per node put mass on rows with two occupations at once, points the data never holds, and a
model granting occupations A or G was proven fair, ratio [0.87400, 0.87400], where the data's
ratio is 0.7072. Oracle: the data's own frequencies, which a categorical feature fitted per
protected group reproduces exactly, and the data's exact ratio (fractions)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from certgate.population_data import dropped_column, fit_population
from pipeline_steps.cli import main
from tests.parity_on_data import data_ratio, fit_default_population, verify_parity
from tests.test_binding import export_onnx
from tests.test_pandas_dummies import OCCUPATIONS, dummies_table


def dropped_table(rows: int = 4000, seed: int = 7) -> pd.DataFrame:
    """sex and a seven-valued occupation depending on sex, one-hot encoded by pandas with the
    first category dropped (``sex_M``, ``occ_B`` … ``occ_G``; bool), and an income."""
    return dummies_table(rows, seed, drop_first=True)


def test_dummies_with_the_first_dropped_are_a_group_with_the_zeros_as_a_category() -> None:
    frame = dropped_table()
    frame["has_car"] = np.arange(len(frame)) % 2 == 0        # has_car, has_house: both 1 on
    frame["has_house"] = np.arange(len(frame)) % 3 == 0      # some rows, they stay binary
    model = fit_population(frame, protected="sex_M")
    kinds = {f.name: (f.kind, f.column_names()) for f in model.features}
    listed = [f"occ_{o}" for o in OCCUPATIONS[1:]]
    assert kinds["occ"] == ("categorical", [dropped_column("occ"), *listed])
    assert kinds["sex_M"][0] == "binary"                     # one column: a plain binary
    assert kinds["has_car"][0] == kinds["has_house"][0] == "binary"
    drawn = model.sample(100_000, np.random.default_rng(0))
    columns = list(model.columns)
    listed_at = [columns.index(name) for name in listed]
    assert (drawn[:, listed_at].sum(axis=1) <= 1).all()      # never two occupations at once
    none = drawn[:, listed_at].sum(axis=1) == 0
    assert (drawn[:, columns.index(dropped_column("occ"))] == none).all()
    men = drawn[:, columns.index("sex_M")] == 1
    for group, data_group in ((men, frame["sex_M"]), (~men, ~frame["sex_M"])):
        share = frame.loc[data_group, listed].sum(axis=1).eq(0).mean()
        drawn_share = none[group].mean()
        error = 4 * np.sqrt(share * (1 - share) / group.sum())
        assert abs(drawn_share - share) <= error, (drawn_share, share)


def test_parity_over_dropped_dummies_holds_the_datas_ratio(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = dropped_table()
    names = list(frame.columns)
    model = torch.nn.Sequential(torch.nn.Linear(len(names), 1))
    with torch.no_grad():                      # class 1 iff occupation A (no column) or G
        model[0].weight.zero_()
        for occupation in "BCDEF":
            model[0].weight[0, names.index(f"occ_{occupation}")] = -1.0
        model[0].weight[0, names.index("occ_G")] = 1.0
        model[0].bias[:] = torch.tensor([0.5])
    path = export_onnx(model.eval(), len(names), tmp_path / "net.onnx")
    data, population = fit_default_population(frame, tmp_path, "sex_M", "--model", str(path),
                                              "--input-names", ",".join(names))
    payload = verify_parity(capsys, path, names, population, data, "sex_M", "1", 0.8)
    listed = frame[[f"occ_{o}" for o in "BCDEFG"]]
    granted = (listed.sum(axis=1) == 0) | frame["occ_G"]
    exact = data_ratio(granted, ~frame["sex_M"], frame["sex_M"])
    low, high = payload["ratio"]
    assert low <= exact <= high, (float(exact), payload["ratio"])
    assert payload["population_fidelity"]["status"] == "consistent"
    assert exact < 0.8 and payload["verdict"] == "violated"   # it was proven satisfied


def test_a_raw_table_for_a_model_trained_on_dummies_says_how_to_encode_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The model reads ``sex_M``, ``occ_B`` …; the CSV holds the raw strings ``sex``,
    ``occ``: the fit (and the fidelity check's data) name get_dummies' encoding as the way."""
    frame = dropped_table(500)
    names = list(frame.columns)
    raw = tmp_path / "raw.csv"
    rng = np.random.default_rng(0)
    pd.DataFrame({"income": frame["income"], "sex": np.where(frame["sex_M"], "M", "F"),
                  "occ": rng.choice(OCCUPATIONS, len(frame))}).to_csv(raw, index=False)
    path = export_onnx(torch.nn.Sequential(torch.nn.Linear(len(names), 1)).eval(), len(names),
                       tmp_path / "net.onnx")
    assert main(["population", "fit", str(raw), "--out", str(tmp_path / "pop.json"),
                 "--model", str(path), "--input-names", ",".join(names), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "string column(s) 'occ', 'sex' as pandas.get_dummies does" in error, error
    encoded = tmp_path / "encoded.csv"
    frame.to_csv(encoded, index=False)
    population = tmp_path / "pop.json"
    assert main(["population", "fit", str(encoded), "--out", str(population), "--json"]) == 0
    capsys.readouterr()
    assert main(["verify", "demographic-parity", "--model", str(path), "--input-names",
                 ",".join(names), "--population", str(population), "--protected", "sex_M",
                 "--privileged", "1", "--favorable-class", "1", "--gamma", "0.8",
                 "--timeout", "5", "--data", str(raw), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "as pandas.get_dummies does" in error, error


def test_binding_reads_the_dropped_column_with_zero_weights_and_needs_names() -> None:
    """The bound network is the model at every value of the dropped column (exactly); a model
    without input names cannot be bound to a wider population, and is told to name them."""
    from verifier.audits.binding import BindingError, bind
    from verifier.network import Layer, Network

    frame = dropped_table(800)
    population = fit_population(frame, protected="sex_M")
    names = list(frame.columns)
    rng = np.random.default_rng(1)
    layers = [Layer(rng.normal(size=(5, len(names))), rng.normal(size=5), "relu"),
              Layer(rng.normal(size=(2, 5)), rng.normal(size=2))]
    network, bound = bind(Network(layers, names), population, None, "net")
    assert list(network.input_names) == [*names, dropped_column("occ")]
    assert list(bound.columns) == list(network.input_names)
    first = network.layers[0]           # in real arithmetic the model at any value of it
    assert (first.weight[:, :-1] == layers[0].weight).all() and (first.weight[:, -1] == 0).all()
    assert (first.weight_magnitude[:, -1] == 0).all() and (first.bias == layers[0].bias).all()
    assert network.layers[1:] == layers[1:]
    with pytest.raises(BindingError, match="records no input names"):
        bind(Network(layers), population, None, "net")


def test_name_value_dummies_with_the_first_dropped_are_a_group_too() -> None:
    """``get_dummies(..., prefix_sep="=", drop_first=True)``: ``occ=B`` … ``occ=G`` were
    grouped by name and refused (rows of zeros are not one-hot); they are the group led by
    ``occ=(dropped)``, whose draws reproduce the data's share of the dropped category."""
    frame = dropped_table().rename(columns=lambda c: c.replace("_", "=", 1))
    model = fit_population(frame, protected="sex=M")
    listed = [f"occ={o}" for o in OCCUPATIONS[1:]]
    occupation = next(f for f in model.features if f.name == "occ")
    assert occupation.column_names() == [dropped_column("occ", "="), *listed]
    drawn = model.sample(100_000, np.random.default_rng(0))
    columns = list(model.columns)
    none = drawn[:, [columns.index(c) for c in listed]].sum(axis=1) == 0
    assert (drawn[:, columns.index("occ=(dropped)")] == none).all()
    share = frame[listed].sum(axis=1).eq(0).mean()
    assert abs(none.mean() - share) <= 4 * np.sqrt(share * (1 - share) / len(drawn))
