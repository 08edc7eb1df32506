"""Monotonicity on a density piece 1e-12 wide beside one 1000 wide: the float enumeration
integrates its cells (Qhull works in the cells' own scaled coordinates), the certified
interval stays box branching's, and a result left unproven says why, in text and ``--json``.

Oracle (closed form, independent of the density): ``x``, ``x′`` and ``y`` are i.i.d. with a
continuous density and the class is ``1[x − y > 0]``; decreasing monotonicity in ``x`` is
violated on pairs ``x′ < x`` exactly when ``y`` lies between them, so the probability is
``1 − P(y is the middle one | x′ < x) = 2/3`` on any such density."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline_steps.cli import main
from verifier.audits.exact_probability import undecided_because
from verifier.convert import save_network
from verifier.network import Layer, Network
from verifier.population import Factor, Feature, PopulationModel, Product, save_population
from verifier.population.piecewise import Leaf, PiecewiseDensity
from verifier.wmi.engine import WMIResult

TWO_THIRDS = 2.0 / 3.0


def _files(tmp_path: Path, width: float) -> list[str]:
    net = Network([Layer(np.array([[1.0, -1.0]]), np.array([0.0]))], ["x", "y"], ["logit"])
    save_network(net, tmp_path / "net.json")
    pieces = PiecewiseDensity(leaves=[
        Leaf(lower=[0.0], upper=[width], constant=0.5 / width),
        Leaf(lower=[width], upper=[1000.0], constant=0.5 / (1000.0 - width))])
    population = PopulationModel(
        features=[Feature(name="x", kind="continuous"), Feature(name="y", kind="continuous")],
        distribution=Product(factors=[Factor(columns=["x"], distribution=pieces),
                                      Factor(columns=["y"], distribution=pieces)]))
    save_population(population, tmp_path / "population.json")
    return ["verify", "monotonicity", "--model", str(tmp_path / "net.json"), "--population",
            str(tmp_path / "population.json"), "--feature", "x", "--decreasing", "--use-prior",
            "--no-progress"]


@pytest.mark.parametrize("width", [1e-6, 1e-12])
def test_thin_pieces_are_integrated_and_the_reason_is_stated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], width: float) -> None:
    argv = _files(tmp_path, width)
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # before: at 1e-12 Qhull found every cell flat, so the float value was 0 in [0, 0.933]
    assert doc["probability"] == pytest.approx(TWO_THIRDS, abs=1e-9)
    assert doc["float_interval"][0] <= TWO_THIRDS <= doc["float_interval"][1]
    assert "cells_bounded" not in doc
    # a float value proves nothing: the certified interval is [0, 1], and says why
    assert doc["probability_interval"] == [0.0, 1.0] and doc["proven"] is False
    assert doc["undecided_because"] == (
        "region enumeration computes in float64, which proves no interval; box branching did "
        "not run: no minimum probability to prove against")
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"not proven: {doc['undecided_because']}\n" in text


def test_the_certified_interval_is_box_branchings_and_holds_the_closed_form(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _files(tmp_path, 1e-12)
    main([*argv, "--min-probability", "0.5", "--timeout", "4", "--json"])
    doc = json.loads(capsys.readouterr().out)
    low, high = doc["probability_interval"]
    assert low <= TWO_THIRDS <= high
    assert doc["probability"] == pytest.approx(TWO_THIRDS, abs=1e-9)
    if doc["verdict"] == "unknown":  # box branching did not close it in 4 s
        assert doc["undecided_because"].startswith(
            "region enumeration computes in float64, which proves no interval; box branching "
            "stopped at the time budget after ")
    else:
        assert doc["verdict"] == "satisfied" and low >= 0.5 and "undecided_because" not in doc


def _result(**extra: object) -> WMIResult:
    return WMIResult(probability=0.0, violation_probability=1.0, total_mass=1.0,
                     violation_mass=0.0, regions=1, integrals=3, lps=3, elapsed_s=0.0,
                     probability_lower=0.0, probability_upper=0.9, exact=False,
                     extra=dict(extra))


def test_bounded_cells_and_a_refused_or_skipped_proof_are_named() -> None:
    assert undecided_because(_result(cells_bounded=3, proof_refused="a lower normaliser of 0")) \
        == ("region enumeration computes in float64, which proves no interval; 3 cells too thin "
            "for float64 (interior not proven or not triangulated) only bounded, not "
            "integrated, which widens the float interval too; box branching refused the "
            "prior: a lower normaliser of 0")
    assert undecided_because(_result(cells_bounded=1, proof_skipped="no time budget")).endswith(
        "1 cell too thin for float64 (interior not proven or not triangulated) only bounded, "
        "not integrated, which widens the float interval too; box branching did not run: no "
        "time budget")
    proven = _result()
    proven.proven = True
    assert undecided_because(proven) is None
    finished = _result()
    finished.proof = WMIResult(probability=0.7, violation_probability=0.3, total_mass=1.0,
                               violation_mass=0.3, regions=0, integrals=0, lps=0,
                               elapsed_s=0.0, probability_lower=0.6, probability_upper=0.8,
                               proven=True, extra={"boxes": 10})
    assert undecided_because(finished) is None
