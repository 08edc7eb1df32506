"""Options taking numbers read negative numbers as a user types them (``-inf``, ``-1e3``,
``-.5``, ``-1,0``) through the real command-line parser, and options stay options."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from pipeline_steps.cli import CertgateParser, _leaf_parsers, build_parser, main
from verifier.convert import save_network
from verifier.network import Layer, Network
from verifier.population import Factor, Feature, PopulationModel, Product, Uniform, save_population

MODEL = ["--model", "m.json", "--population", "p.json"]

CASES = [
    (["bounds", "--model", "m.json", "--lower", "-1,-1e3,-inf", "--upper", "1,1,1"],
     "lower", "-1,-1e3,-inf"),
    (["bounds", "--model", "m.json", "--lower", "-2,-2", "--upper", "-1.5e-3,-.5"],
     "upper", "-1.5e-3,-.5"),
    (["verify", "demographic-parity", *MODEL, "--protected", "sex", "--privileged", "-1",
      "--favorable-class", "1", "--gamma", "0.8"], "privileged", "-1"),
    (["verify", "demographic-parity", *MODEL, "--protected", "sex", "--privileged", "1",
      "--favorable-class", "-1", "--gamma", "-0.8"], "favorable_class", -1),
    (["verify", "demographic-parity", *MODEL, "--protected", "sex", "--privileged", "1",
      "--favorable-class", "1", "--gamma", "-8e-1"], "gamma", -0.8),
    (["verify", "demographic-parity", *MODEL, "--protected", "sex", "--privileged", "1",
      "--favorable-class", "1", "--gamma", "0.8", "--precision", "-1e-3"],
     "precision", -1e-3),
    (["verify", "causal-fairness", "--model", "m.json", "--protected", "sex",
      "--split-value", "-1e3"], "split_value", -1000.0),
    (["verify", "causal-fairness", "--model", "m.json", "--protected", "sex",
      "--lower-edge", "-.25"], "lower_edge", -0.25),
    (["verify", "causal-fairness", "--model", "m.json", "--protected", "sex",
      "--protected-values", "-1,0,1"], "protected_values", "-1,0,1"),
    (["verify", "causal-fairness", "--model", "m.json", "--protected", "sex",
      "--max-biased-share", "-1E-2"], "max_biased_share", -0.01),
    (["verify", "noise-robustness", *MODEL, "--features", "a", "--noise-uniform", "-inf", "1"],
     "noise_uniform", [-math.inf, 1.0]),
    (["verify", "noise-robustness", *MODEL, "--features", "a", "--noise-uniform", "-1e3",
      "-1e2"], "noise_uniform", [-1000.0, -100.0]),
    (["verify", "noise-robustness", *MODEL, "--features", "a", "--noise-triangular", "-1e3",
      "-1", "-.5"], "noise_triangular", [-1000.0, -1.0, -0.5]),
    (["verify", "local-robustness", *MODEL, "--center", "-1,-2.5e-3", "--epsilon", "-1e-9"],
     "center", "-1,-2.5e-3"),
    (["verify", "local-robustness", *MODEL, "--center", "0,0", "--epsilon", "-1e-9"],
     "epsilon", -1e-9),
    (["verify", "local-robustness", *MODEL, "--center", "0,0", "--epsilon", "1",
      "--expected-class", "-1", "--min-probability", "-INF", "--timeout", "-Infinity"],
     "min_probability", -math.inf),
    (["verify", "monotonicity", *MODEL, "--feature", "a", "--output-index", "-1"],
     "output_index", -1),
    (["population", "fit", "d.csv", "--out", "o.json", "--domain", "x=-1e3:-1",
      "--bins", "x=-5,-1"], "domain", ["x=-1e3:-1"]),
    (["population", "sample", "p.json", "-n", "-3"], "n", -3),
    (["hooks", "watch", "--config", "c.yaml", "--interval", "-1e3"], "interval", -1000.0),
]


@pytest.mark.parametrize(("argv", "dest", "expected"), CASES,
                         ids=[f"{argv[1]}-{dest}" for argv, dest, _ in CASES])
def test_a_negative_number_is_the_options_value(argv: list[str], dest: str,
                                                expected: object) -> None:
    args = build_parser(argv).parse_args(argv)
    assert getattr(args, dest) == expected


@pytest.mark.parametrize("argv", [
    ["-v", "bounds", "--model", "m", "--lower", "0", "--upper", "1"],
    ["bounds", "--model", "m", "--lower", "0", "--upper", "1", "-h"],
    ["population", "sample", "p.json", "-n", "5"],
])
def test_short_options_are_still_options(argv: list[str]) -> None:
    if "-h" in argv:
        with pytest.raises(SystemExit):
            build_parser(argv).parse_args(argv)
        return
    args = build_parser(argv).parse_args(argv)
    assert args.verbose == 1 or args.n == 5


@pytest.mark.parametrize("word", ["-inf", "-1e3", "-x", "--lower"])
def test_a_word_that_is_no_number_is_still_read_as_an_option(word: str) -> None:
    argv = ["verify", "noise-robustness", *MODEL, "--features", "a", "--noise-uniform", word,
            "1"]
    if word in ("-inf", "-1e3"):
        assert build_parser(argv).parse_args(argv).noise_uniform[1] == 1.0
        return
    with pytest.raises(Exception, match="expected 2 arguments"):
        build_parser(argv).parse_args(argv)


def test_every_command_parser_reads_negative_numbers() -> None:
    # subcommand parsers inherit the parser class: a verb added later needs nothing of its own
    leaves = _leaf_parsers(build_parser())
    assert len(leaves) > 20
    assert all(isinstance(leaf, CertgateParser) for leaf in leaves)


def _network(tmp_path: Path) -> Path:
    net = Network([Layer(np.array([[1.0, -1.0]]), np.array([0.0]))], ["a", "b"], ["logit"])
    path = tmp_path / "net.json"
    save_network(net, path)
    return path


def _population(tmp_path: Path) -> Path:
    population = PopulationModel(
        features=[Feature(name="a", kind="continuous"), Feature(name="b", kind="continuous")],
        distribution=Product(factors=[
            Factor(columns=["a"], distribution=Uniform(lower=0, upper=1)),
            Factor(columns=["b"], distribution=Uniform(lower=0, upper=1))]))
    path = tmp_path / "population.json"
    save_population(population, path)
    return path


def test_bounds_on_a_negative_corner_end_to_end(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # a − b over [-1e3, -1] × [-2, -.5] is exactly [-999.5, 1]; the bounds enclose it, rounded
    # outwards
    code = main(["bounds", "--model", str(_network(tmp_path)), "--lower", "-1e3,-2",
                 "--upper", "-1,-.5", "--method", "ibp", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert -999.5 - 1e-9 <= doc["lower"][0] <= -999.5
    assert 1.0 <= doc["upper"][0] <= 1.0 + 1e-9


def test_infinite_uniform_noise_is_refused_by_name(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "noise-robustness", "--model", str(_network(tmp_path)),
                 "--population", str(_population(tmp_path)), "--features", "a",
                 "--noise-uniform", "-inf", "1", "--json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 2 and doc["exit_code"] == 2
    assert doc["error"].startswith("--noise-uniform:") and "finite" in doc["error"]
