"""One-hot columns spelled two ways: ``population fit`` encodes a raw string column as
``sex=F``, ``pandas.get_dummies`` as ``sex_F``. Found by a red team, through the CLI:

* a population fitted on the raw CSV for a model trained on ``get_dummies`` columns was refused
  listing both column lists, without saying that only the separator differs; the error now
  says it, names the pairs and how to refit, and the refit it names binds and certifies (the
  certified ratio holds the data's own, which a categorical table reproduces exactly);
* ``--privileged M`` was refused suggesting ``protected: sex=M`` where the column is
  ``sex_M``; the suggestion now names the column as the model's inputs spell it (read before
  the settings), and a configuration read before its model names both spellings.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from pipeline_steps.cli import main
from tests.parity_on_data import data_ratio, verify_parity
from tests.test_binding import export_onnx

OCCUPATIONS = list("ABC")


def raw_table(rows: int = 3000, seed: int = 3) -> pd.DataFrame:
    """sex (F/M) and an occupation that depends on it, as strings, and an income."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], rows)
    occ = np.where(sex == "F", rng.choice(OCCUPATIONS, rows, p=[0.2, 0.5, 0.3]),
                   rng.choice(OCCUPATIONS, rows, p=[0.4, 0.3, 0.3]))
    return pd.DataFrame({"sex": sex, "occ": occ, "income": rng.lognormal(10, 0.5, rows)})


def occupation_a_model(names: list[str], path: Path) -> Path:
    """A linear classifier on ``names``: class 1 iff the occupation is A (``occ_A``, or
    neither ``occ_B`` nor ``occ_C`` when ``drop_first`` dropped ``occ_A``)."""
    model = torch.nn.Sequential(torch.nn.Linear(len(names), 1))
    with torch.no_grad():
        model[0].weight.zero_()
        if "occ_A" in names:
            model[0].weight[0, names.index("occ_A")] = 1.0
            model[0].bias[:] = torch.tensor([-0.5])
        else:
            for other in ("occ_B", "occ_C"):
                model[0].weight[0, names.index(other)] = -1.0
            model[0].bias[:] = torch.tensor([0.5])
    return export_onnx(model.eval(), len(names), path)


def fit(capsys: pytest.CaptureFixture[str], frame: pd.DataFrame, folder: Path,
        name: str) -> tuple[Path, Path]:
    """``frame`` as ``folder/NAME.csv`` and ``population fit`` on it (defaults, protected
    ``sex``'s column) into ``folder/NAME.json``."""
    data, population = folder / f"{name}.csv", folder / f"{name}.json"
    frame.to_csv(data, index=False)
    protected = "sex_M" if "sex_M" in frame.columns else "sex"
    assert main(["population", "fit", str(data), "--out", str(population), "--protected",
                 protected, "--json"]) == 0
    capsys.readouterr()
    return data, population


def parity_error(capsys: pytest.CaptureFixture[str], model: Path, names: list[str],
                 population: Path, protected: str, privileged: str) -> str:
    """The error of ``verify demographic-parity --json``, which must exit 2."""
    capsys.readouterr()
    code = main(["verify", "demographic-parity", "--model", str(model), "--input-names",
                 ",".join(names), "--population", str(population), "--protected", protected,
                 "--privileged", privileged, "--favorable-class", "1", "--gamma", "0.8",
                 "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 2, payload
    return str(payload["error"])


@pytest.mark.parametrize("drop_first", [False, True])
def test_a_raw_fit_for_a_dummies_model_is_told_only_the_separator_differs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], drop_first: bool) -> None:
    raw = raw_table()
    dummies = pd.get_dummies(raw, columns=["sex", "occ"], drop_first=drop_first)
    names = list(dummies.columns)
    model = occupation_a_model(names, tmp_path / "net.onnx")
    _, raw_population = fit(capsys, raw, tmp_path, "raw")

    error = parity_error(capsys, model, names, raw_population, "sex_M", "1")
    missing = "sex_M, occ_B, occ_C" if drop_first else "sex_F, sex_M, occ_A, occ_B, occ_C"
    pairs = ("sex=F vs sex_F, sex=M vs sex_M, occ=A vs occ_A, occ=B vs occ_B, occ=C vs occ_C"
             if not drop_first else "sex=M vs sex_M, occ=B vs occ_B, occ=C vs occ_C")
    assert (f"only the separator differs: the population's columns use '=' where the model's "
            f"inputs use '_' ({pairs}); fit the population on the table encoded as the model "
            "was trained (the same pandas.get_dummies call, drop_first included") in error, error
    assert f"inputs missing from the population model [{missing}]" in error

    # the refit the error names binds, and certifies the data's own ratio
    data, population = fit(capsys, dummies, tmp_path, "dummies")
    payload = verify_parity(capsys, model, names, population, data, "sex_M", "1", 0.5)
    favourable = raw["occ"] == "A"
    exact = data_ratio(favourable, raw["sex"] == "F", raw["sex"] == "M")
    low, high = payload["ratio"]
    assert low <= exact <= high, (float(exact), payload["ratio"])
    assert payload["population_fidelity"]["status"] == "consistent"


def test_a_missing_input_that_is_no_respelling_gets_no_separator_hint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unread one-hot columns and missing one-hot inputs of another name are not called
    respellings."""
    raw = raw_table()
    _, population = fit(capsys, raw, tmp_path, "raw")
    model = export_onnx(torch.nn.Sequential(torch.nn.Linear(6, 1)).eval(), 6,
                        tmp_path / "net.onnx")
    error = parity_error(capsys, model, ["income", "sex=F", "sex=M", "job_A", "job_B", "job_C"],
                         population, "sex=M", "1")
    assert ("inputs missing from the population model [job_A, job_B, job_C], population "
            "columns the model does not read [occ=A, occ=B, occ=C]") in error, error
    assert "separator" not in error


def test_a_category_named_as_privileged_is_told_the_column_as_the_model_spells_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_table()
    dummies = pd.get_dummies(raw, columns=["sex", "occ"])
    names = list(dummies.columns)
    model = occupation_a_model(names, tmp_path / "net.onnx")
    _, population = fit(capsys, dummies, tmp_path, "dummies")
    for privileged in ("M", "m"):
        error = parity_error(capsys, model, names, population, "sex", privileged)
        assert (f"{privileged!r} names a category: protect its one-hot column instead "
                "(protected: sex_M, privileged: 1)") in error, error
        assert "sex=M" not in error
    error = parity_error(capsys, model, names, population, "sex", "Male")
    assert ("'Male' names a category: protect one of its one-hot columns instead "
            "(sex_F, sex_M), privileged: 1") in error, error

    # the population fitted on the raw table, for a model reading its columns: sex=M
    _, raw_population = fit(capsys, raw, tmp_path, "raw")
    raw_names = ["sex=F", "sex=M", "occ=A", "occ=B", "occ=C", "income"]
    raw_model = export_onnx(torch.nn.Sequential(torch.nn.Linear(6, 1)).eval(), 6,
                            tmp_path / "raw.onnx")
    error = parity_error(capsys, raw_model, raw_names, raw_population, "sex", "M")
    assert "protect its one-hot column instead (protected: sex=M, privileged: 1)" in error

    # a configuration is read before its model: both spellings, the model's to pick
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "model": {"uri": str(model)},
        "audits": [{"kind": "demographic_parity", "protected": "sex", "privileged": "M",
                    "favorable_class": 1, "gamma": 0.8}]}))
    code = main(["config", "check", str(config)])
    err = capsys.readouterr().err
    assert code == 2
    assert ("protect its one-hot column instead (protected: sex=M, privileged: 1; spelled as "
            "the model's input is: sex_M for pandas.get_dummies)") in err, err
