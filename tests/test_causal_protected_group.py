"""A protected categorical feature named by part of its one-hot group, through
``certgate verify causal-fairness`` with a fitted population.

``--protected sex=Male`` (how demographic parity names the group) of a table whose ``sex``
column holds ``Female``/``Male`` used to vary ``sex=Male`` alone and leave ``sex=Female`` a
free input: the certified biased share was about half the real one. Pandas' ``drop_first``
dummies ``race_B, race_C`` (``race_(dropped)`` holding A) compared B with C only, and a model
treating A apart from B and C was certified with a biased share of 0. Oracle: every point of
the finite grid classified at every category in ``Fraction`` arithmetic.
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import certgate
from pipeline_steps.cli.causal_cmd import add_causal_parser, run
from verifier.convert import save_network
from verifier.errors import CertgateInputError
from verifier.network import Layer, Network
from verifier.population import save_population

KIDS = range(4)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    verbs = parser.add_subparsers(dest="verb", required=True)
    add_causal_parser(verbs)
    return parser.parse_args(["causal-fairness", *argv])


def _score_network(weights: dict[str, float], bias: float, names: list[str]) -> Network:
    """Class 1 iff ``w·x + b > 0``, through two ReLUs."""
    w = np.array([weights.get(name, 0.0) for name in names])
    hidden = Layer(np.stack([w, -w]), np.array([bias, -bias]), "relu")
    return Network([hidden, Layer(np.array([[0.0, 1.0], [1.0, 0.0]]), np.zeros(2), "none")],
                   input_names=names)


def _exact_biased_share(weights: dict[str, float], bias: float,
                        categories: list[dict[str, float]]) -> Fraction:
    """Share of ``kids`` values (uniform) whose class differs between two categories."""
    def cls(point: dict[str, float]) -> int:
        score = sum((Fraction(weights.get(k, 0.0)) * Fraction(v) for k, v in point.items()),
                    Fraction(bias))
        return int(score > 0)

    biased = sum(len({cls({"kids": kids, **cat}) for cat in categories}) > 1 for kids in KIDS)
    return Fraction(biased, len(KIDS))


def _case(tmp_path: Path, frame: pd.DataFrame, network: Network) -> tuple[str, str]:
    population = certgate.fit_population(frame, structure="independent")
    pop_path, net_path = tmp_path / "population.json", tmp_path / "net.json"
    save_population(population, pop_path)
    save_network(network, net_path)
    return str(net_path), str(pop_path)


def _shares(capsys, model: str, population: str, protected: str) -> list[float]:
    run(_parse(["--model", model, "--population", population, "--protected", protected,
                "--json", "--timeout", "30"]))
    return json.loads(capsys.readouterr().out)["biased_fraction"]


def test_one_column_of_a_two_category_group_is_the_group(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"sex": rng.choice(["Female", "Male"], 400),
                          "kids": rng.integers(0, 4, 400)})
    weights, bias = {"sex=Male": 2.0, "kids": 1.0}, -2.5   # Female: kids >= 3, Male: >= 1
    model, population = _case(tmp_path, frame, _score_network(
        weights, bias, ["sex=Female", "sex=Male", "kids"]))
    exact = _exact_biased_share(weights, bias, [{"sex=Female": 1, "sex=Male": 0},
                                                {"sex=Female": 0, "sex=Male": 1}])
    assert exact == Fraction(1, 2)
    for protected in ("sex=Male", "sex=Female", "sex=Female,sex=Male"):
        low, high = _shares(capsys, model, population, protected)
        assert low <= exact <= high and high - low < 1e-9, (protected, low, high)
    [certificate] = certgate.audit(model, population, [{
        "kind": "causal_fairness", "protected": "sex=Male", "max_biased_share": 0.6}])
    assert certificate.verdict == "satisfied" and certificate.bounds["biased_share"] == (0.5, 0.5)
    assert "depends on sex=Female, sex=Male" in certificate.details["expression"]


def test_drop_first_dummies_compare_the_dropped_category(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(1)
    race = rng.choice(["A", "B", "C"], 600)
    frame = pd.get_dummies(pd.DataFrame({"race": race, "kids": rng.integers(0, 4, 600)}),
                           columns=["race"], drop_first=True, dtype=int)
    weights, bias = {"race_B": 2.0, "race_C": 2.0, "kids": 1.0}, -2.5   # A apart from B, C
    model, population = _case(tmp_path, frame, _score_network(
        weights, bias, ["kids", "race_B", "race_C"]))
    exact = _exact_biased_share(weights, bias, [{"race_B": 0, "race_C": 0},
                                                {"race_B": 1, "race_C": 0},
                                                {"race_B": 0, "race_C": 1}])
    assert exact == Fraction(1, 2)
    low, high = _shares(capsys, model, population, "race_B,race_C")
    assert low <= exact <= high and high - low < 1e-9, (low, high)
    # the categories to compare are still the user's to choose: B against C holds no bias
    run(_parse(["--model", model, "--population", population, "--protected", "race_B,race_C",
                "--protected-values", "race_B,race_C", "--json"]))
    assert json.loads(capsys.readouterr().out)["biased_fraction"] == [0.0, 0.0]


@pytest.mark.parametrize(("protected", "message"), [
    ("race=A", "part of the one-hot group"),
    ("race=A,kids", "mix columns of the one-hot group"),
])
def test_ambiguous_parts_of_a_group_are_refused(tmp_path: Path, protected: str,
                                                message: str) -> None:
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"race": rng.choice(["A", "B", "C"], 300),
                          "kids": rng.integers(0, 4, 300)})
    model, population = _case(tmp_path, frame, _score_network(
        {"race=A": 1.0, "kids": 1.0}, -2.5, ["race=A", "race=B", "race=C", "kids"]))
    with pytest.raises(CertgateInputError, match=message):
        run(_parse(["--model", model, "--population", population, "--protected", protected]))


def test_a_categorical_feature_named_alone_is_its_group(tmp_path: Path, capsys) -> None:
    # `--protected race` names the population's feature `race` (columns race=A, race=B,
    # race=C): it is the whole group, as its columns listed are; it used to be refused,
    # asking for every column (a raw COMPAS race has six, one with a space in its name).
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"race": rng.choice(["A", "B", "C"], 600),
                          "kids": rng.integers(0, 4, 600)})
    names = ["race=A", "race=B", "race=C", "kids"]
    weights, bias = {"race=A": 2.0, "race=B": 1.0, "kids": 1.0}, -2.5   # A >= 1, B >= 2, C >= 3
    model, population = _case(tmp_path, frame, _score_network(weights, bias, names))
    exact = _exact_biased_share(weights, bias, [{"race=A": 1, "race=B": 0, "race=C": 0},
                                                {"race=A": 0, "race=B": 1, "race=C": 0},
                                                {"race=A": 0, "race=B": 0, "race=C": 1}])
    assert exact == Fraction(1, 2)
    for protected in ("race", "race=A,race=B,race=C"):
        low, high = _shares(capsys, model, population, protected)
        assert low <= exact <= high and high - low < 1e-9, (protected, low, high)
    [certificate] = certgate.audit(model, population, [{
        "kind": "causal_fairness", "protected": "race", "max_biased_share": 0.6,
        "protected_values": ["race=B", "race=C"]}])   # B against C: kids = 2 only
    assert certificate.bounds["biased_share"] == (0.25, 0.25)
    assert "depends on race=A, race=B, race=C" in certificate.details["expression"]
