"""A causal audit judged against a threshold refines on while the interval its verdict reads
still holds the threshold, however narrow: a network biased only in a slab of width 6e-4
(protected value 2 or 3 against 0 or 1) stopped at the default ``target_width`` with the
uniform share in [0, 0.0039] and verdict ``unknown`` after a tenth of a second of a minute's
budget, and under ``--measure population`` it stopped on the *uniform* interval's width
while the population share it judged was [0, 0.1035]. The truths are exact (closed form in
``Fraction`` from the network's float constants)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from pipeline_steps.cli import main
from tests.bound_oracles import contains


def _layer(weight: list[list[float]], bias: list[float], activation: str = "relu",
           **extra: float) -> dict:
    return {"weight": weight, "bias": bias, "activation": activation, **extra}


def slab_network() -> dict:
    """Class 1 (``yes``) iff ``s >= 2`` and ``tri(x2) > 0.0002 + 0.001·(x1 − 0.3 + 0.01·x3)``,
    ``tri`` the triangle of height 0.0005 on ``[0.5, 0.501]``; class 0 elsewhere."""
    return {"inputs": ["s", "x1", "x2", "x3"], "outputs": ["no", "yes"], "layers": [
        _layer([[0, 0, 1, 0], [0, 0, 1, 0], [0, 0, 1, 0], [1, 0, 0, 0], [1, 0, 0, 0],
                [0, 1, 0, 0], [0, 0, 0, 1]], [-0.5, -0.5005, -0.501, -2, 0, -0.3, 0]),
        _layer([[1, -2, 1, -0.0005, 0.0005, 0, 0], [0, 0, 0, 0, 0, 1, 0.01]], [-0.001, 0]),
        _layer([[1, 0], [0, 1]], [0, 0], "leaky_relu", negative_slope=0.25),
        _layer([[0, 0], [1, -0.001]], [0, -0.0002], "none")]}


def slab_population() -> dict:
    """``s`` on 0–3, ``x1`` uniform on a 1e-4-wide interval, ``x2`` uniform on [−2, 2] with an
    atom of weight 0.1 inside the biased slab, ``x3`` uniform on 0–4."""
    return {"format": "certgate.population/v1", "features": [
        {"name": "s", "kind": "integer", "domain": [0, 3]},
        {"name": "x1", "kind": "continuous", "domain": [0.3, 0.3001]},
        {"name": "x2", "kind": "continuous", "domain": [-2, 2]},
        {"name": "x3", "kind": "integer", "domain": [0, 4]}],
        "distribution": {"kind": "product", "factors": [
            {"columns": ["s"], "distribution": {"kind": "discrete", "values": [0, 1, 2, 3],
                                                "probabilities": [0.4, 0.3, 0.2, 0.1]}},
            {"columns": ["x1"], "distribution": {"kind": "uniform", "lower": 0.3,
                                                 "upper": 0.3001}},
            {"columns": ["x2"], "distribution": {"kind": "mixture", "weights": [0.9, 0.1],
                                                 "components": [
                {"kind": "uniform", "lower": -2, "upper": 2},
                {"kind": "point", "value": 0.5004}]}},
            {"columns": ["x3"], "distribution": {"kind": "discrete", "values": [0, 1, 2, 3, 4],
                                                 "probabilities": [0.2] * 5}}]}}


def slab_truths() -> tuple[Fraction, Fraction]:
    """The uniform and the population biased shares, exactly. A point is biased iff
    ``tri(x2) > k``, ``k = 0.0002 + 0.001·(x1 − 0.3 + 0.01·x3)`` (every constant the float
    the network holds): ``x2`` in ``(a + k, 2b − a − k)``, of length ``2(b − a) − 2k``,
    linear in ``x1`` and ``x3``, so its mean is its value at their means. The atom at
    0.5004 has ``tri = 0.5004 − a > k`` for every ``x1``, ``x3``: always biased."""
    a, b = Fraction(0.5), Fraction(0.5005)
    mean_x1 = (Fraction(0.3) + Fraction(0.3001)) / 2
    k = Fraction(0.0002) + Fraction(0.001) * (mean_x1 - Fraction(0.3) + Fraction(0.01) * 2)
    assert Fraction(0.5004) - a > Fraction(0.0002) + Fraction(0.001) * (
        Fraction(0.3001) - Fraction(0.3) + Fraction(0.01) * 4)
    uniform = (2 * (b - a) - 2 * k) / 4
    atom = Fraction(0.1) / (Fraction(0.9) + Fraction(0.1))
    return uniform, atom + (1 - atom) * uniform


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("slab")
    network, population = folder / "slab.json", folder / "population.json"
    network.write_text(json.dumps(slab_network()))
    population.write_text(json.dumps(slab_population()))
    return network, population


@pytest.mark.parametrize(("measure", "offset", "verdict"), [
    ("uniform", Fraction(5, 10**6), "satisfied"), ("uniform", Fraction(-5, 10**6), "violated"),
    ("population", Fraction(5, 10**6), "satisfied"),
    ("population", Fraction(-5, 10**6), "violated")])
def test_a_threshold_inside_a_narrow_interval_is_refined_to_a_verdict(
        files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], measure: str,
        offset: Fraction, verdict: str) -> None:
    network, population = files
    uniform, weighted = slab_truths()
    truth = uniform if measure == "uniform" else weighted
    threshold = float(truth + offset)
    code = main(["verify", "causal-fairness", "--model", str(network), "--protected", "s",
                 "--population", str(population), "--measure", measure,
                 "--max-biased-share", repr(threshold), "--timeout", "120", "--json",
                 "--no-progress"])
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == verdict and code == (0 if verdict == "satisfied" else 1)
    assert contains(*payload["biased_fraction"], uniform)
    assert contains(*payload["biased_fraction_population"], weighted)
