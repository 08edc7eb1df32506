"""Demographic parity of a model that does not read the protected attribute (fairness through
unawareness, the commonest way a model is made "fair"): the population holds the protected
column, the model's inputs do not, and the audit must still run and certify the parity the
data's dependence implies. Oracle: on an all-discrete table fitted cell by cell, the population's
rates are the rows' rates, computed here in ``Fraction``."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline_steps.cli import main
from verifier.audits.binding import bind
from verifier.convert import save_network
from verifier.network import Layer, Network
from verifier.population import load_population


def _table(path: Path) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    sex = rng.choice(["F", "M"], 3000, p=[0.4, 0.6])
    shift = np.where(sex == "M", 1, 0)
    x = np.minimum(rng.poisson(1.2 + shift), 5)
    z = rng.integers(0, 3, 3000)
    frame = pd.DataFrame({"sex": sex, "x": x, "z": z})
    frame.to_csv(path, index=False)
    return frame


def _unaware_network(path: Path) -> Path:
    """Class 1 iff x >= 2 (logit x - 1.5, read from x only; sex and z are not inputs)."""
    save_network(Network([Layer(np.array([[1.0, 0.0]]), np.array([-1.5]))], ["x", "z"],
                         ["logit"]), path)
    return path


def _exact_ratio(frame: pd.DataFrame) -> Fraction:
    granted = frame["x"] >= 2
    female = frame["sex"] == "F"
    rate_f = Fraction(int((granted & female).sum()), int(female.sum()))
    rate_m = Fraction(int((granted & ~female).sum()), int((~female).sum()))
    return rate_f / rate_m


def test_an_unread_protected_column_binds_with_zero_weights(tmp_path: Path) -> None:
    frame = _table(tmp_path / "t.csv")
    assert main(["population", "fit", str(tmp_path / "t.csv"), "--out",
                 str(tmp_path / "p.json"), "--protected", "sex"]) == 0
    population = load_population(tmp_path / "p.json")
    network = Network([Layer(np.array([[1.0, 0.0]]), np.array([-1.5]))], ["x", "z"], ["y"])
    bound, ordered = bind(network, population, None, "net.json")
    assert list(bound.input_names) == list(ordered.columns)
    assert set(bound.input_names) == {"x", "z", "sex=F", "sex=M"}
    points = np.array(ordered.sample(2000, 0))
    read = [bound.input_names.index(name) for name in ("x", "z")]
    logits = points @ bound.layers[0].weight.T + bound.layers[0].bias
    np.testing.assert_array_equal(logits[:, 0], points[:, read[0]] - 1.5)
    assert _exact_ratio(frame) > 0


@pytest.mark.parametrize("with_model", [False, True])
def test_parity_of_an_unaware_model_is_certified_around_the_rows_ratio(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], with_model: bool) -> None:
    frame = _table(tmp_path / "t.csv")
    network = _unaware_network(tmp_path / "net.json")
    fit = ["population", "fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "p.json"),
           "--protected", "sex"]
    assert main([*fit, *(["--model", str(network)] if with_model else [])]) == 0
    capsys.readouterr()
    exact = _exact_ratio(frame)
    for gamma, verdict in ((float(exact) - 0.01, "satisfied"), (float(exact) + 0.01, "violated")):
        code = main(["verify", "demographic-parity", "--model", str(network), "--population",
                     str(tmp_path / "p.json"), "--protected", "sex=M", "--privileged", "1",
                     "--favorable-class", "1", "--gamma", str(gamma), "--timeout", "60",
                     "--json", "--no-progress"])
        result = json.loads(capsys.readouterr().out)
        assert code == (0 if verdict == "satisfied" else 1), result
        assert result["verdict"] == verdict
        low, high = result["ratio"]
        assert Fraction(low) <= exact <= Fraction(high)
