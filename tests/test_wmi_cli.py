"""The WMI verify verbs end to end on small files (closed-form answers)."""

import argparse
import hashlib
import json
import pickle
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier

from pipeline_steps.cli.wmi_cmd import add_wmi_parsers
from verifier.convert import save_network
from verifier.errors import CertgateInputError
from verifier.network import Layer, Network
from verifier.population import (
    Discrete,
    Factor,
    Feature,
    Normal,
    PopulationModel,
    Product,
    Uniform,
    save_population,
)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    net = Network([Layer(np.array([[1.0, -1.0]]), np.array([0.0]))], ["a", "b"], ["logit"])
    save_network(net, tmp_path / "net.json")
    prior = PopulationModel(
        features=[Feature(name="a", kind="continuous"),
                  Feature(name="b", kind="continuous")],
        distribution=Product(factors=[
            Factor(columns=["a"], distribution=Uniform(lower=0, upper=1)),
            Factor(columns=["b"], distribution=Uniform(lower=0, upper=1))]))
    save_population(prior, tmp_path / "pop.json")
    x = np.random.default_rng(0).uniform(0, 1, size=(300, 2))
    tree = DecisionTreeClassifier(max_depth=1).fit(x, (x[:, 0] > 0.3).astype(int))
    with open(tmp_path / "tree.pkl", "wb") as handle:
        pickle.dump(tree, handle)
    return {"net": tmp_path / "net.json", "pop": tmp_path / "pop.json",
            "tree": tmp_path / "tree.pkl", "threshold": float(tree.tree_.threshold[0])}


def run(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, dict]:
    parser = argparse.ArgumentParser()
    add_wmi_parsers(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(argv)
    code = args.func(args)
    return code, json.loads(capsys.readouterr().out)


def test_monotonicity_cli(files: dict, capsys: pytest.CaptureFixture) -> None:
    code, doc = run(["monotonicity", "--model", str(files["net"]), "--population",
                     str(files["pop"]), "--feature", "b", "--json", "--min-probability", "0.9"],
                    capsys)
    # region enumeration computes in float64: reported, not proven; the verdict is box
    # branching's proof of the truth 2/3 (a − b loses class 1 where b <= a < b′)
    assert code == 1 and doc["verdict"] == "violated" and doc["proven"] is False
    low, high = doc["probability_interval"]
    assert low <= 2 / 3 <= high < 0.9
    assert set(doc) >= {"probability", "float_interval", "regions", "integrals", "elapsed_s"}
    assert doc["probability"] <= 2 / 3 + 1e-12
    assert doc["float_interval"][1] < 0.9
    code, doc = run(["monotonicity", "--model", str(files["net"]), "--population",
                     str(files["pop"]), "--feature", "a", "--json", "--min-probability", "0.9"],
                    capsys)
    assert code == 0 and doc["verdict"] == "satisfied"
    assert doc["probability"] == pytest.approx(1.0, abs=1e-12)
    assert doc["probability_interval"][0] >= 0.9 and doc["probability_interval"][1] == 1.0
    assert doc["float_interval"][0] > 0.9


def test_noise_and_local_robustness_cli(files: dict, capsys: pytest.CaptureFixture) -> None:
    # a + n with n uniform on [0, 1]: class 1 = {a >= b} can only be gained, on
    # {0 < b - a <= n}: E_n[n - n²/2] = 1/2 - 1/6 = 1/3
    code, doc = run(["noise-robustness", "--model", str(files["net"]), "--population",
                     str(files["pop"]), "--features", "a", "--noise-uniform", "0", "1",
                     "--json"], capsys)
    assert code == 0 and doc["probability"] == pytest.approx(2 / 3, abs=1e-12)
    code, doc = run(["local-robustness", "--model", str(files["net"]), "--population",
                     str(files["pop"]), "--center", "0.5,0.5", "--epsilon", "0.5",
                     "--expected-class", "1", "--json"], capsys)
    assert doc["probability"] == pytest.approx(0.5, abs=1e-12)


def test_equivalence_cli_with_tree(files: dict, capsys: pytest.CaptureFixture) -> None:
    code, doc = run(["equivalence", "--model", str(files["net"]), "--population",
                     str(files["pop"]), "--surrogate", str(files["tree"]), "--json"], capsys)
    assert code == 0
    # disagreement: the tree (a > t) and the net (a >= b) differ on two triangles
    t = files["threshold"]
    assert doc["probability"] == pytest.approx(1 - (t**2 + (1 - t) ** 2) / 2, abs=1e-12)


def test_equivalence_reads_the_surrogate_on_the_models_own_inputs(
        files: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A population with a column the model does not read (a label, fitted from the whole
    table) binds the network with that column appended at zero weights; the surrogate, fitted
    on the model's own inputs, is read the same way: the closed form of the two-column
    population (it was refused: "the models read different numbers of inputs: [2, 3]")."""
    wide = PopulationModel(
        features=[Feature(name=name, kind="continuous") for name in ("a", "label", "b")],
        distribution=Product(factors=[
            Factor(columns=[name], distribution=Uniform(lower=0, upper=1))
            for name in ("a", "label", "b")]))
    save_population(wide, tmp_path / "wide.json")
    anonymous = Network([Layer(np.array([[1.0, -1.0]]), np.array([0.0]))], ["x[0]", "x[1]"],
                        ["logit"])
    save_network(anonymous, tmp_path / "anonymous.json")
    t = files["threshold"]
    expected = {files["tree"]: 1 - (t**2 + (1 - t) ** 2) / 2, tmp_path / "anonymous.json": 1.0}
    for surrogate, probability in expected.items():
        code, doc = run(["equivalence", "--model", str(files["net"]), "--population",
                         str(tmp_path / "wide.json"), "--surrogate", str(surrogate), "--json"],
                        capsys)
        assert code == 0
        assert doc["probability"] == pytest.approx(probability, abs=1e-12)
    three = DecisionTreeClassifier(max_depth=1).fit(np.eye(3), [0, 1, 1])
    with open(tmp_path / "three.pkl", "wb") as handle:
        pickle.dump(three, handle)
    with pytest.raises(CertgateInputError, match=r"--surrogate .*three.pkl: it reads 3 "
                                                 r"inputs, the model 2 \(a, b\)"):
        run(["equivalence", "--model", str(files["net"]), "--population",
             str(tmp_path / "wide.json"), "--surrogate", str(tmp_path / "three.pkl")], capsys)


def test_bad_feature_is_refused(files: dict, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(CertgateInputError, match="--feature"):
        run(["monotonicity", "--model", str(files["net"]), "--population",
             str(files["pop"]), "--feature", "zzz"], capsys)


def test_a_surrogate_with_other_input_names_is_refused(files: dict, tmp_path,
                                                       capsys: pytest.CaptureFixture) -> None:
    swapped = Network([Layer(np.array([[1.0, -1.0]]), np.array([0.0]))], ["b", "a"], ["logit"])
    save_network(swapped, tmp_path / "swapped.json")
    with pytest.raises(CertgateInputError, match=r"input names \(b, a\) are not the model's"):
        run(["equivalence", "--model", str(files["net"]), "--population", str(files["pop"]),
             "--surrogate", str(tmp_path / "swapped.json"), "--json"], capsys)


def test_json_stdout_is_one_object_and_holds_the_thin_cell(tmp_path: Path) -> None:
    """Issue 33's reproducer through a fresh ``certgate`` process: stdout is exactly one JSON
    object (HiGHS's banner goes to stderr) and the interval holds the closed form
    0.9601224 (x ~ N(5e-10, (1e-10)²), class 0 on |x − 5e-10| <= 5e-12)."""
    import os
    import subprocess
    import sys

    from scipy.stats import norm

    net = Network([Layer(np.array([[1.0], [-1.0]]), np.array([-5e-10, 5e-10]), "relu"),
                   Layer(np.array([[1.0, 1.0]]), np.array([-5e-12]))], ["x"], ["logit"])
    save_network(net, tmp_path / "thin.json")
    save_population(PopulationModel(features=[Feature(name="x", kind="continuous")],
                                    distribution=Normal(mean=5e-10, std=1e-10)),
                    tmp_path / "pop.json")
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-m", "pipeline_steps", "verify", "local-robustness", "--model",
         str(tmp_path / "thin.json"), "--population", str(tmp_path / "pop.json"),
         "--center", "2e-10", "--epsilon", "1e-9", "--json"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)},
        check=False, timeout=300)
    document = json.loads(result.stdout)
    # the ball reaches 7 and 13 standard deviations: P(ball) = 1 − 1.3e-12
    truth = 1 - (2 * norm.cdf(0.05) - 1) / (norm.cdf(7) - norm.cdf(-13))
    low, high = document["probability_interval"]
    assert result.returncode == 0
    assert low <= truth - 1e-9 and truth + 1e-9 <= high


def _monotonicity_in_b_exact() -> Fraction:
    """P(class 1 at (a, b) ⇒ class 1 at (a, b′) | b < b′) for a, b, b′ independent and uniform
    on {0, 1, 2, 3} and class 1 iff a − b − 1/2 > 0, by enumeration in ``Fraction``."""
    values = range(4)
    pairs = [(a, b, c) for a in values for b in values for c in values if b < c]
    kept = sum(not (a - b - Fraction(1, 2) > 0 and not a - c - Fraction(1, 2) > 0)
               for a, b, c in pairs)
    return Fraction(kept, len(pairs))


def test_a_box_branching_result_is_printed_as_its_interval(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # box branching computes no value: the human line used to lead with "probability 0" (the
    # interval's lower end) where the truth is far from 0, which read as an estimate
    quarter = Discrete(values=[0.0, 1.0, 2.0, 3.0], probabilities=[0.25] * 4)
    prior = PopulationModel(
        features=[Feature(name="a", kind="integer", domain=(0, 3)),
                  Feature(name="b", kind="integer", domain=(0, 3))],
        distribution=Product(factors=[Factor(columns=["a"], distribution=quarter),
                                      Factor(columns=["b"], distribution=quarter)]))
    net = Network([Layer(np.array([[1.0, -1.0]]), np.array([-0.5]))], ["a", "b"], ["logit"])
    save_network(net, tmp_path / "net.json")
    save_population(prior, tmp_path / "pop.json")
    parser = argparse.ArgumentParser()
    add_wmi_parsers(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(["monotonicity", "--model", str(tmp_path / "net.json"),
                              "--population", str(tmp_path / "pop.json"), "--feature", "b",
                              "--use-prior", "--min-probability", "0.5", "--timeout", "30"])
    args.func(args)
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("probability certified in ["), line
    assert "boxes (box branching (PV))" in line
    low, high = (float(end) for end in line.split("[", 1)[1].split("]", 1)[0].split(", "))
    assert low <= _monotonicity_in_b_exact() <= high and low > 0.5, (low, high)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_wmi_verb_names_the_bytes_it_certified(files: dict, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    """Each verb's ``--json`` provenance (and its certificate's) names every file it read by
    path and by the sha256 ``hashlib`` gives of its bytes: model, population, the noise file
    and the surrogate (a network file or a scikit-learn pickle)."""
    noise = PopulationModel(features=[Feature(name="n", kind="continuous")],
                            distribution=Product(factors=[
                                Factor(columns=["n"], distribution=Uniform(lower=0, upper=1))]))
    save_population(noise, tmp_path / "noise.json")
    base = ["--model", str(files["net"]), "--population", str(files["pop"]), "--json"]
    named = {"model": str(files["net"]), "model_sha256": _digest(files["net"]),
             "population": str(files["pop"]), "population_sha256": _digest(files["pop"])}
    noise_file = {"noise": str(tmp_path / "noise.json"),
                  "noise_sha256": _digest(tmp_path / "noise.json")}
    cases = [
        (["monotonicity", "--feature", "a"], named),
        (["noise-robustness", "--features", "a", "--noise-uniform", "0", "1"], named),
        (["noise-robustness", "--features", "a", "--noise", str(tmp_path / "noise.json")],
         {**named, **noise_file}),
        (["local-robustness", "--center", "0.5,0.5", "--epsilon", "0.5"], named),
        (["equivalence", "--surrogate", str(files["tree"])],
         {**named, "surrogate": str(files["tree"]), "surrogate_sha256": _digest(files["tree"])}),
        (["equivalence", "--surrogate", str(files["net"])],
         {**named, "surrogate": str(files["net"]), "surrogate_sha256": _digest(files["net"])}),
    ]
    for verb, expected in cases:
        code, doc = run([*verb, *base], capsys)
        assert code == 0
        assert doc["provenance"] == expected, verb
    # the noise-file run's probability is the closed form of the --noise-uniform run: 2/3
    code, doc = run([*cases[2][0], *base], capsys)
    assert doc["probability"] == pytest.approx(2 / 3, abs=1e-12)


@pytest.mark.parametrize("option", ["--surrogate", "--model", "--population"])
def test_a_wmi_input_rewritten_while_it_is_read_is_refused(
        files: dict, tmp_path: Path, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch, option: str) -> None:
    """A file whose bytes change between the two digests of its read names no bytes the
    certificate could name: the verb refuses it, naming the option and the file."""
    import pipeline_steps.cli.wmi_cmd as wmi_cmd
    import verifier.population as population_module

    surrogate = tmp_path / "surrogate.pkl"
    surrogate.write_bytes(files["tree"].read_bytes())
    target = {"--surrogate": surrogate, "--model": files["net"],
              "--population": files["pop"]}[option]

    def rewriting(read: Any) -> Any:
        def wrapper(path: Any, *rest: Any, **keywords: Any) -> Any:
            value = read(path, *rest, **keywords)
            if str(path) == str(target):
                target.write_bytes(target.read_bytes() + b"\n")
            return value
        return wrapper

    monkeypatch.setattr(wmi_cmd, "_load_model", rewriting(wmi_cmd._load_model))
    monkeypatch.setattr(population_module, "load_population",
                        rewriting(population_module.load_population))
    with pytest.raises(CertgateInputError, match=rf"^{option} {target} changed while it was "
                                                 "read; run again once it is written$"):
        run(["equivalence", "--model", str(files["net"]), "--population", str(files["pop"]),
             "--surrogate", str(surrogate), "--json"], capsys)


def test_an_enumeration_cut_by_the_time_budget_is_not_printed_as_the_probability(
        files: dict, capsys: pytest.CaptureFixture) -> None:
    """The truth is 2/3 (test_monotonicity_cli). A budget that ends before the first region
    used to print ``probability 0, certified in [0, 1]`` with nothing saying that 0 is only
    the mass counted before the cut."""
    parser = argparse.ArgumentParser()
    add_wmi_parsers(parser.add_subparsers(dest="verb"))
    argv = ["monotonicity", "--model", str(files["net"]), "--population", str(files["pop"]),
            "--feature", "b"]
    args = parser.parse_args([*argv, "--timeout", "1e-9"])
    args.func(args)
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("probability 0 (the mass counted before the time budget cut the "
                           "enumeration), certified in [0, 1]"), line
    _, doc = run([*argv, "--timeout", "1e-9", "--json"], capsys)
    assert doc["timed_out"] is True and doc["probability_interval"] == [0.0, 1.0]
    _, doc = run([*argv, "--timeout", "30", "--json"], capsys)
    assert doc["timed_out"] is False and doc["probability"] == pytest.approx(2 / 3, abs=1e-12)


@pytest.mark.parametrize(("args", "message"), [
    (["monotonicity", "--feature", "b", "--favorable-class", "2"],
     r"favorable_class 2 is out of range: the model has 2 classes \(0\.\.1\)"),
    (["monotonicity", "--feature", "b", "--output-index", "1"],
     r"--output-index 1 is out of range: the model has 1 output \(0\.\.0\)"),
    (["local-robustness", "--center", "0.5,0.5", "--epsilon", "0.1", "--expected-class", "3"],
     r"expected_class 3 is out of range: the model has 2 classes \(0\.\.1\)"),
])
def test_a_class_or_output_the_model_lacks_is_an_input_error(
        files: dict, args: list[str], message: str) -> None:
    """A class beyond the head was an IndexError deep in the encoder (monotonicity: exit 3,
    "internal error"), and local robustness certified ``P(class = 3)`` of a 2-class model
    as [0, 1]: each names its option now, as demographic parity does."""
    parser = argparse.ArgumentParser()
    add_wmi_parsers(parser.add_subparsers(dest="verb"))
    parsed = parser.parse_args([args[0], "--model", str(files["net"]), "--population",
                                str(files["pop"]), "--json", *args[1:]])
    with pytest.raises(CertgateInputError, match=message):
        parsed.func(parsed)
