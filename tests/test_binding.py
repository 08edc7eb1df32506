"""Explicit binding of network inputs to population columns (:mod:`verifier.audits.binding`)
and the CLI's ``--input-names``: an ONNX export that names its inputs only by position is
refused without names, and with them certifies the interval dense Monte Carlo agrees with."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline_steps.cli import main
from verifier.audits.binding import BindingError, anonymous_inputs, bind, parse_input_names
from verifier.network import Layer, Network
from verifier.population import load_population, population_from_json

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CREDIT = EXAMPLES / "population_credit.json"


def small_network(names: list[str] | None = None) -> Network:
    layer = Layer(np.array([[1.0, -1.0, 0.5], [0.0, 1.0, -1.0]]), np.zeros(2))
    return Network([layer], names or [], ["a", "b"])


def test_positional_names_are_anonymous() -> None:
    assert anonymous_inputs(small_network())
    assert anonymous_inputs(small_network(["x[0]", "x[1]", "x[2]"]))
    assert anonymous_inputs(small_network(["input.1[0]", "input.1[1]", "input.1[2]"]))
    assert not anonymous_inputs(small_network(["age", "income", "sex"]))
    assert not anonymous_inputs(small_network(["x[0]", "y[1]", "x[2]"]))
    assert not anonymous_inputs(small_network(["x1", "x0", "x2"]))


def test_input_names_option_is_parsed_strictly() -> None:
    assert parse_input_names(" a, b ,c") == ["a", "b", "c"]
    assert parse_input_names(None) is None
    with pytest.raises(BindingError, match="non-empty"):
        parse_input_names("a,,b")
    with pytest.raises(BindingError, match="more than once"):
        parse_input_names("a,b,a")


def test_binding_refuses_unnamed_disagreeing_and_renamed() -> None:
    population = load_population(CREDIT)
    columns = list(population.columns)
    network = Network([Layer(np.ones((2, len(columns))), np.zeros(2))], [], [])
    with pytest.raises(BindingError, match="records no input names"):
        bind(network, population, None, "m.onnx")
    named = Network(network.layers, columns, [])
    other = [columns[1], columns[0], *columns[2:]]
    with pytest.raises(BindingError, match="disagree with the names recorded"):
        bind(named, population, other, "m.onnx")
    renamed = ["salary" if name == "income" else name for name in columns]
    with pytest.raises(BindingError, match=r"missing from the population model \[salary\]"):
        bind(network, population, renamed, "m.onnx")
    with pytest.raises(BindingError, match="2 input names given"):
        bind(network, population, columns[:2], "m.onnx")


def test_a_permuted_population_is_reordered_to_the_network() -> None:
    population = load_population(CREDIT)
    columns = list(population.columns)
    permuted_order = [columns[3], *columns[:3], *columns[4:]]
    permuted = population_from_json({**population.to_json(), "column_order": permuted_order})
    network = Network([Layer(np.ones((2, len(columns))), np.zeros(2))], columns, [])
    _, bound = bind(network, permuted, None, "m")
    assert list(bound.columns) == columns
    rng = np.random.default_rng(0)
    low, high = population.support()
    span = np.where(np.isfinite(high - low), high - low, 10.0)
    lower = np.where(np.isfinite(low), low, -5.0) + rng.uniform(0, 0.5, (50, len(columns))) * span
    upper = lower + rng.uniform(0, 0.6, (50, len(columns))) * span
    np.testing.assert_array_equal(bound.prob_boxes(lower, upper),
                                  population.prob_boxes(lower, upper))


def export_onnx(model: torch.nn.Module, width: int, path: Path) -> Path:
    torch.onnx.export(model, (torch.zeros(1, width),), str(path), input_names=["x"],
                      output_names=["logits"], dynamo=False)
    return path


def test_unnamed_onnx_needs_input_names_then_agrees_with_monte_carlo(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    population = load_population(CREDIT)
    columns = list(population.columns)
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(len(columns), 8), torch.nn.ReLU(),
                                torch.nn.Linear(8, 2)).eval()
    path = export_onnx(model, len(columns), tmp_path / "loan.onnx")
    argv = ["verify", "demographic-parity", "--model", str(path), "--population", str(CREDIT),
            "--protected", "owns_home", "--privileged", "1", "--favorable-class", "1",
            "--gamma", "0.5", "--timeout", "20", "--precision", "0.01", "--json"]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "records no input names" in err and "--input-names" in err
    assert err.count("\n") == 1

    code = main([*argv, "--input-names", ",".join(columns)])
    payload = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    samples = population.sample(400_000, np.random.default_rng(2))
    with torch.no_grad():
        granted = model(torch.as_tensor(samples, dtype=torch.float32)).argmax(1).numpy() == 1
    home = samples[:, columns.index("owns_home")] == 1
    for name, group in (("p_privileged", home), ("p_unprivileged", ~home)):
        hits = granted[group]
        error = hits.std() / np.sqrt(hits.size)
        low, high = payload["probabilities"][name]
        assert low - 4 * error <= hits.mean() <= high + 4 * error


def test_corrupt_model_files_are_one_line_and_exit_2(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 2)).eval()
    good = export_onnx(model, 3, tmp_path / "good.onnx")
    torch.save(model, tmp_path / "good.pt")
    for source, target in ((good, "bad.onnx"), (tmp_path / "good.pt", "bad.pt")):
        data = source.read_bytes()
        (tmp_path / target).write_bytes(data[: len(data) // 2])
    (tmp_path / "bad.pt2").write_bytes(b"\x00" * 64)
    for name in ("bad.onnx", "bad.pt", "bad.pt2"):
        code = main(["bounds", "--model", str(tmp_path / name), "--lower", "0,0,0",
                     "--upper", "1,1,1"])
        err = capsys.readouterr().err
        assert code == 2, name
        assert err.count("\n") == 1 and name in err and "Traceback" not in err


def test_metadata_names_that_disagree_with_the_signature_are_refused(tmp_path: Path) -> None:
    import mlflow
    import pandas as pd
    from mlflow.models import infer_signature

    from registry_hooks.certgate_model import load_model, pinned_requirements
    from verifier.errors import CertgateInputError

    model = torch.nn.Sequential(torch.nn.Linear(3, 2)).eval()
    rows = pd.DataFrame(np.zeros((2, 3)), columns=["a", "b", "c"])
    with torch.no_grad():
        outputs = model(torch.zeros(2, 3)).numpy()
    for names, directory in ((["a", "c", "b"], "disagree"), (["a", "b", "c"], "agree")):
        mlflow.pytorch.save_model(model, str(tmp_path / directory),
                                  serialization_format="pickle",
                                  signature=infer_signature(rows, outputs),
                                  metadata={"certgate.input_names": names},
                                  pip_requirements=pinned_requirements("pytorch"))
    with pytest.raises(CertgateInputError, match=r"\(a, c, b\) disagrees with its MLflow "
                                                  r"signature \(a, b, c\)"):
        load_model(str(tmp_path / "disagree"), None, tmp_path / "work")
    loaded = load_model(str(tmp_path / "agree"), None, tmp_path / "work")
    assert list(loaded.network.input_names) == ["a", "b", "c"]


def test_named_inputs_the_population_lacks_are_named_not_counted() -> None:
    """A category column whose values are digits (a capped count written as 0, 1, 2) is read
    from a CSV as a number, so the population holds one numeric column where the model reads
    its one-hot columns: the refusal names the differing columns on both sides, not only the
    two counts (with 100 columns, counts leave the user to diff the lists)."""
    import pandas as pd

    from certgate.population_data import fit_population

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], 400),
                          "delinq": rng.choice([0, 1, 2], 400),
                          "income": rng.normal(50.0, 10.0, 400)})
    population = fit_population(frame, structure="independent")
    names = ["sex=F", "sex=M", "delinq=0", "delinq=1", "delinq=2", "income"]
    network = Network([Layer(np.ones((1, len(names))), np.zeros(1))], [], [])
    with pytest.raises(BindingError) as refused:
        bind(network, population, names, "m.onnx")
    message = str(refused.value)
    assert "missing from the population model [delinq=0, delinq=1, delinq=2]" in message
    assert "the model does not read [delinq]" in message
    assert "'delinq' is a numeric column of the population" in message
