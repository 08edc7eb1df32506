"""The ``certgate`` CLI: JSON outputs, and bad input as one line on stderr with exit code 2."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from strategies import random_network

from pipeline_steps.cli import main
from pipeline_steps.cli.inputs import read_certified
from verifier.bounds import crown
from verifier.convert import load_network, save_network
from verifier.errors import CertgateInputError
from verifier.network import Network
from verifier.population import load_population

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CREDIT = EXAMPLES / "population_credit.json"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def credit_network(tmp_path: Path) -> Path:
    population = load_population(CREDIT)
    network = random_network(np.random.default_rng(3), [population.dimension, 8, 2])
    network = Network(network.layers, list(population.columns), ["deny", "grant"])
    path = tmp_path / "credit.json"
    save_network(network, path)
    return path


def test_bounds_json_matches_the_library(capsys, tmp_path: Path) -> None:
    network = random_network(np.random.default_rng(0), [3, 6, 2])
    path = tmp_path / "net.json"
    save_network(network, path)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps([[-1.0, 1.0]]))
    code, out, _ = _run(capsys, "bounds", "--model", str(path), "--lower=-1,-1,-inf",
                        "--upper", "1,1,0", "--spec", str(spec), "--json")
    assert code == 0
    payload = json.loads(out)
    expected = crown(network, np.array([[-1, -1, -np.inf]]), np.array([[1, 1, 0.0]]),
                     np.array([[-1.0, 1.0]]))
    assert payload["method"] == "crown"
    assert payload["lower"][0] == pytest.approx(expected.lower[0, 0], rel=0, abs=0)
    assert set(payload) == {"lower", "upper", "method", "elapsed_s"}


def test_linear_credit_and_selection_can_be_chosen_and_are_recorded(
    capsys, credit_network: Path
) -> None:
    from verifier.audits import demographic_parity_audit
    from verifier.pv import PVSettings

    code, out, _ = _run(
        capsys, "verify", "demographic-parity", "--model", str(credit_network),
        "--population", str(CREDIT), "--protected", "owns_home", "--privileged", "1",
        "--favorable-class", "1", "--gamma", "0.5", "--timeout", "5", "--no-linear-credit",
        "--selection", "mass", "--json",
    )
    payload = json.loads(out)
    assert code == (0 if payload["verdict"] == "satisfied" else 1)
    for credit, selection in ((True, "directed"), (False, "mass")):
        certificate = demographic_parity_audit(
            load_network(credit_network), load_population(CREDIT), protected="owns_home",
            privileged=1.0, favorable_class=1, gamma=0.5,
            settings=PVSettings(timeout_s=2.0, linear_credit=credit, selection=selection),
        )
        assert certificate.settings["linear_credit"] is credit
        assert certificate.settings["selection"] == selection


def test_open_box_limit_stops_the_audit_with_its_bounds(capsys, credit_network: Path) -> None:
    arguments = ("verify", "demographic-parity", "--model", str(credit_network),
                 "--population", str(CREDIT), "--protected", "owns_home", "--privileged", "1",
                 "--favorable-class", "1", "--gamma", "0.5", "--timeout", "20",
                 "--batch-size", "4", "--json")
    code, out, _ = _run(capsys, *arguments, "--max-open-boxes", "8")
    payload = json.loads(out)
    assert code == 1
    assert payload["verdict"] == "unknown" and payload["stopped_by"] == "max_open_boxes"
    code, _, err = _run(capsys, *arguments, "--max-open-boxes", "0")
    assert code == 2 and "max_open_boxes must be positive" in err


def test_demographic_parity_json_contains_monte_carlo(capsys, credit_network: Path) -> None:
    code, out, _ = _run(
        capsys, "verify", "demographic-parity", "--model", str(credit_network),
        "--population", str(CREDIT), "--protected", "owns_home", "--privileged", "1",
        "--favorable-class", "1", "--gamma", "0.5", "--timeout", "20", "--precision", "0.01",
        "--json",
    )
    payload = json.loads(out)
    assert {"verdict", "ratio", "probabilities", "elapsed_s", "boxes"} <= set(payload)
    assert code == (0 if payload["verdict"] == "satisfied" else 1)
    population = load_population(CREDIT)
    network = load_network(credit_network)
    samples = population.sample(400_000, np.random.default_rng(1))
    granted = network.classify(samples) == 1
    home = samples[:, list(population.columns).index("owns_home")] == 1
    for name, group in (("p_privileged", home), ("p_unprivileged", ~home)):
        hits = granted[group]
        error = hits.std() / np.sqrt(hits.size)
        low, high = payload["probabilities"][name]
        assert low - 4 * error <= hits.mean() <= high + 4 * error


def test_a_parity_certificate_names_the_bytes_it_certified(
    capsys, credit_network: Path
) -> None:
    code, out, _ = _run(
        capsys, "verify", "demographic-parity", "--model", str(credit_network),
        "--population", str(CREDIT), "--protected", "owns_home", "--privileged", "1",
        "--favorable-class", "1", "--gamma", "0.5", "--timeout", "2", "--json",
    )
    assert code in (0, 1)
    assert json.loads(out)["provenance"] == {
        "model": str(credit_network),
        "model_sha256": hashlib.sha256(credit_network.read_bytes()).hexdigest(),
        "population": str(CREDIT),
        "population_sha256": hashlib.sha256(CREDIT.read_bytes()).hexdigest(),
    }


def test_a_file_rewritten_while_it_is_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "population.json"
    path.write_text(CREDIT.read_text())

    def read_then_rewrite() -> object:
        population = load_population(path)
        path.write_text(CREDIT.read_text() + "\n")
        return population

    with pytest.raises(CertgateInputError, match=r"--population .* changed while it was read"):
        read_certified(str(path), "--population", read_then_rewrite)
    assert read_certified(str(tmp_path), "--model", lambda: 1) == (1, {"model": str(tmp_path)})
    assert read_certified("models:/credit@champion", "--model", lambda: 2) == (
        2, {"model": "models:/credit@champion"})


def test_probability_spec_file(capsys, credit_network: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "probabilities:\n"
        "  p: {event: 'y.grant > y.deny', given: 'x.age >= 30'}\n"
        "expression: p\ncomparison: '>='\nthreshold: 0.0\n"
    )
    code, out, _ = _run(capsys, "verify", "probability", "--model", str(credit_network),
                        "--population", str(CREDIT), "--spec", str(spec), "--json")
    payload = json.loads(out)
    assert code == 0 and payload["verdict"] == "satisfied"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--protected", "race"], "protected feature 'race'"),
        (["--protected", "owns_home", "--gamma", "1.5"], "gamma must lie in (0, 1]"),
        (["--protected", "dependants", "--privileged", "42"], "probability 0"),
    ],
)
def test_demographic_parity_bad_input(capsys, credit_network: Path, args, message) -> None:
    base = {"--protected": "owns_home", "--privileged": "1", "--gamma": "0.8"}
    pairs = dict(zip(args[::2], args[1::2], strict=True))
    merged = {**base, **pairs}
    argv = ["verify", "demographic-parity", "--model", str(credit_network), "--population",
            str(CREDIT), "--favorable-class", "1", "--timeout", "5"]
    for key, value in merged.items():
        argv += [key, value]
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_unknown_event_names_are_exit_2(capsys, credit_network: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("probabilities:\n  p: {event: 'y.grant > y.deny and salary > 3'}\n")
    code, _, err = _run(capsys, "verify", "probability", "--model", str(credit_network),
                        "--population", str(CREDIT), "--spec", str(spec))
    assert code == 2 and "unknown feature or output 'salary'" in err


def test_population_that_does_not_match_the_network(capsys, tmp_path: Path) -> None:
    network = random_network(np.random.default_rng(0), [3, 4, 2])
    path = tmp_path / "small.json"
    save_network(network, path)
    code, _, err = _run(capsys, "verify", "demographic-parity", "--model", str(path),
                        "--population", str(CREDIT), "--protected", "owns_home",
                        "--privileged", "1", "--favorable-class", "1", "--gamma", "0.8")
    assert code == 2
    assert "columns" in err and "3 inputs" in err and err.count("\n") == 1


def test_malformed_population_model(capsys, credit_network: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    document = json.loads(CREDIT.read_text())
    document["distribution"]["factors"][0]["distribution"]["std"] = -1.0
    broken.write_text(json.dumps(document))
    code, _, err = _run(capsys, "verify", "demographic-parity", "--model", str(credit_network),
                        "--population", str(broken), "--protected", "owns_home",
                        "--privileged", "1", "--favorable-class", "1", "--gamma", "0.8")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_onnx_with_unsupported_op(capsys, tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Tanh", ["x"], ["y"], name="squash")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
    )
    path = tmp_path / "tanh.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    code, _, err = _run(capsys, "bounds", "--model", str(path), "--lower", "0,0",
                        "--upper", "1,1")
    assert code == 2
    assert "Tanh" in err and "squash" in err and err.count("\n") == 1


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    with pytest.raises(CertgateInputError, match="not found"):
        main(["--debug", "bounds", "--model", str(tmp_path / "missing.onnx"), "--lower", "0",
              "--upper", "1"])


def test_an_onnx_certificate_names_its_external_weights(capsys, tmp_path: Path) -> None:
    """Plain ``torch.onnx.export`` writes tensors above a few hundred bytes to
    ``model.onnx.data`` beside the model: the certificate names that file's sha256 as well as
    the model file's (before, the weights could change under the same recorded digest), and a
    rewrite of it during the read is refused."""
    import contextlib
    import io

    import torch

    population = load_population(CREDIT)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(population.dimension, 64), torch.nn.ReLU(),
                                 torch.nn.Linear(64, 2)).eval()
    model = tmp_path / "credit.onnx"
    with contextlib.redirect_stdout(io.StringIO()):
        torch.onnx.export(module, (torch.zeros(2, population.dimension),), str(model))
    weights = tmp_path / "credit.onnx.data"
    assert weights.stat().st_size >= 64 * population.dimension * 4  # the first weight
    code, out, err = _run(
        capsys, "verify", "demographic-parity", "--model", str(model),
        "--input-names", ",".join(population.columns), "--population", str(CREDIT),
        "--protected", "owns_home", "--privileged", "1", "--favorable-class", "1",
        "--gamma", "0.5", "--timeout", "2", "--json",
    )
    assert code in (0, 1), err
    provenance = json.loads(out)["provenance"]
    assert provenance["model_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert provenance["model_external_data_sha256"] == {
        weights.name: hashlib.sha256(weights.read_bytes()).hexdigest()}

    from registry_hooks.certgate_model import load_model

    loaded = load_model(str(model), None, tmp_path)
    assert loaded.sha256 == provenance["model_sha256"]
    assert loaded.external_data_sha256 == provenance["model_external_data_sha256"]

    def read_then_rewrite() -> object:
        network = load_network(model)
        weights.write_bytes(weights.read_bytes()[::-1])
        return network

    with pytest.raises(CertgateInputError, match=r"--model .* changed while it was read"):
        read_certified(str(model), "--model", read_then_rewrite)
