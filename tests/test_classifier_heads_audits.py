"""A single-output network is a binary classifier (class 1 iff its logit is > 0) and a
classifier head changes no class, in every audit kind and through every front door: the
Python API, ``certgate verify`` and ``certgate run`` (a ``pt2`` model logged with
``mlflow.pytorch.log_model`` into a local sqlite store), and the MLflow evaluator. The reference
is the same classifier written with two outputs ``(0, z)`` and no head; demographic parity of a
single-logit network is also checked against Monte Carlo. An event on output values through a
head is refused naming the head."""

from __future__ import annotations

import json
import tomllib
import warnings
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

import certgate
from pipeline_steps.cli import main
from tests.test_api import certificate_of_run, threshold_module, without_clock
from tests.test_front_doors import CASES, population
from verifier.convert import save_network
from verifier.convert.torch_module import from_torch
from verifier.network import Layer, Network
from verifier.population import load_population, save_population

ROOT = Path(__file__).resolve().parents[1]
CREDIT = ROOT / "examples" / "population_credit.json"
COMPARED = ("audit", "verdict", "bounds", "settings", "algorithm")
NAMES = ["x", "s"]


def single_logit(head: torch.nn.Module | None = None) -> torch.nn.Sequential:
    """``z = x + 0.5 s − 0.75``, the logit of :func:`tests.test_api.threshold_module`."""
    layer = torch.nn.Linear(2, 1).double()
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 0.5]], dtype=torch.float64))
        layer.bias.copy_(torch.tensor([-0.75], dtype=torch.float64))
    return torch.nn.Sequential(layer, *([head] if head is not None else [])).eval()


def with_head(head: torch.nn.Module) -> torch.nn.Sequential:
    """The two-output threshold model followed by ``head``."""
    return torch.nn.Sequential(*threshold_module(), head).eval()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The twins saved the ways users save them, and the reference as JSON."""
    root = tmp_path_factory.mktemp("heads")
    example = torch.zeros(2, 2, dtype=torch.float64)
    paths = {"root": root, "reference": root / "reference.json",
             "logit": root / "logit.ts.pt", "sigmoid": root / "sigmoid.pt2",
             "softmax": root / "softmax.onnx", "log_softmax": root / "log_softmax.ts.pt"}
    save_network(from_torch(threshold_module(), NAMES), paths["reference"])
    torch.jit.save(torch.jit.script(single_logit()), str(paths["logit"]))
    torch.export.save(torch.export.export(single_logit(torch.nn.Sigmoid()), (example,),
                                          dynamic_shapes=({0: torch.export.Dim.AUTO},)),
                      str(paths["sigmoid"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(with_head(torch.nn.Softmax(dim=1)), (example,), str(paths["softmax"]),
                          dynamo=False, input_names=["x"], output_names=["p"],
                          dynamic_axes={"x": {0: "N"}, "p": {0: "N"}})
    torch.jit.save(torch.jit.script(with_head(torch.nn.LogSoftmax(dim=1))),
                   str(paths["log_softmax"]))
    for kind in ("binary", "uniform"):
        save_population(population(kind), root / f"{kind}.json")
    return paths


TWINS = ("logit", "sigmoid", "softmax", "log_softmax")


def verify_json(capsys: pytest.CaptureFixture[str], arguments: list[str]) -> dict[str, Any]:
    """``certgate verify ARGUMENTS`` (with ``--json``) run in process: its JSON object, less
    the time it took and any provenance naming the files read (checked to name ``--model``);
    the run must not be an input error (exit 0 or 1)."""
    capsys.readouterr()
    code = main(["verify", *arguments])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    payload = json.loads(captured.out)
    payload.pop("elapsed_s", None)
    provenance = payload.pop("provenance")
    assert provenance["model"] == arguments[arguments.index("--model") + 1]
    return payload


@pytest.mark.parametrize(("population_kind", "verb", "settings", "options"), CASES,
                         ids=[f"{case[2]['kind']}-{index}" for index, case in enumerate(CASES)])
def test_every_kind_certifies_the_twins_like_the_reference(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str], population_kind: str,
        verb: str, settings: dict[str, Any], options: list[str]) -> None:
    pop = files["root"] / f"{population_kind}.json"
    [reference] = certgate.audit(str(files["reference"]), str(pop), settings)
    expected = without_clock(reference.to_dict())
    for twin in TWINS:
        [certificate] = certgate.audit(str(files[twin]), str(pop), settings, input_names=NAMES)
        got = without_clock(certificate.to_dict())
        for field in COMPARED:
            assert got[field] == expected[field], (twin, field)
    payloads = []
    for model in (files["reference"], files["logit"], files["softmax"]):
        payloads.append(verify_json(capsys, [
            verb, "--model", str(model), "--input-names", ",".join(NAMES), "--population",
            str(pop), *options, "--json"]))
    assert payloads[1] == payloads[0] and payloads[2] == payloads[0]


def test_demographic_parity_of_a_single_logit_contains_monte_carlo(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command of the issue: a TorchScript single-logit model on the credit population."""
    pop = load_population(CREDIT)
    torch.manual_seed(3)
    module = torch.nn.Sequential(torch.nn.Linear(7, 8), torch.nn.ReLU(),
                                 torch.nn.Linear(8, 1)).double().eval()
    with torch.no_grad():
        module[0].weight.mul_(torch.tensor([0.05, 0.02, 0.3, 1.0, 1.0, 1.0, 1.0],
                                           dtype=torch.float64))
    path = tmp_path / "logit.ts.pt"
    torch.jit.save(torch.jit.script(module), str(path))
    last = from_torch(module).layers
    twin = Network([last[0], Layer(np.vstack([np.zeros((1, 8)), last[1].weight]),
                                   np.concatenate([[0.0], last[1].bias]))], list(pop.columns))
    twin_path = tmp_path / "twin.json"
    save_network(twin, twin_path)
    options = ["--population", str(CREDIT), "--protected", "owns_home", "--privileged", "1",
               "--favorable-class", "1", "--gamma", "0.8", "--timeout", "60", "--precision",
               "0.02", "--json"]
    results = []
    for model, names in ((path, ["--input-names", ",".join(pop.columns)]), (twin_path, [])):
        results.append(verify_json(capsys, ["demographic-parity", "--model", str(model),
                                            *names, *options]))
    assert results[0] == results[1]
    samples = pop.sample(400_000, np.random.default_rng(1))
    with torch.no_grad():
        granted = module(torch.from_numpy(samples)).numpy()[:, 0] > 0
    home = samples[:, list(pop.columns).index("owns_home")] == 1
    for name, group in (("p_privileged", home), ("p_unprivileged", ~home)):
        hits = granted[group]
        error = hits.std() / np.sqrt(hits.size)
        low, high = results[0]["probabilities"][name]
        assert low - 4 * error <= hits.mean() <= high + 4 * error


def test_probability_spec_reads_logits_for_orders_and_refuses_values(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pop = str(files["root"] / "binary.json")
    order = tmp_path / "order.yaml"
    order.write_text("probabilities:\n  p: {event: 'y[1] > y[0]', given: 'x.s >= 1'}\n"
                     "comparison: '>'\nthreshold: 0.5\n")
    payloads = []
    for model in (files["reference"], files["softmax"]):
        payloads.append(verify_json(capsys, [
            "probability", "--model", str(model), "--input-names", "x,s", "--population", pop,
            "--spec", str(order), "--precision", "0.01", "--json"]))
    assert payloads[0] == payloads[1]
    value = tmp_path / "value.yaml"
    value.write_text("probabilities:\n  p: {event: 'y[1] > 0.7'}\n")
    code = main(["verify", "probability", "--model", str(files["softmax"]), "--input-names",
                 "x,s", "--population", pop, "--spec", str(value)])
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1
    assert "softmax head" in error and "P[y[1] > 0.7]" in error


def test_output_value_monotonicity_reads_a_sigmoid_and_refuses_a_softmax(
        files: dict[str, Path]) -> None:
    from verifier.audits import MonotonicitySettings, run_audit
    from verifier.convert import load_network
    from verifier.errors import CertgateInputError

    pop = load_population(files["root"] / "uniform.json")
    settings = MonotonicitySettings(kind="monotonicity", feature="x", min_probability=0.9)
    logit = load_network(files["logit"]).renamed(NAMES)
    sigmoid = load_network(files["sigmoid"]).renamed(NAMES)
    plain = run_audit(settings, logit, pop, output=0)
    through = run_audit(settings, sigmoid, pop, output=0)
    assert through.bounds == plain.bounds and through.verdict == plain.verdict
    softmax = load_network(files["softmax"]).renamed(NAMES)
    with pytest.raises(CertgateInputError, match=r"softmax head.*output-value form"):
        run_audit(settings, softmax, pop, output=1)


def test_selfcorrect_wrap_orders_the_logits(files: dict[str, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    constraints = tmp_path / "constraints.yaml"
    constraints.write_text(
        "num_classes: 2\nconstraints:\n  - name: c\n    precondition: {kind: box, "
        "lower: [null, null], upper: [null, 0.5]}\n    postcondition: [[y1 < y0]]\n")
    outputs = {}
    for twin in ("reference", "softmax", "logit"):
        out = tmp_path / twin
        code = main(["selfcorrect", "wrap", "--model", str(files[twin]), "--constraints",
                     str(constraints), "--out", str(out), "--json"])
        assert code == 0, capsys.readouterr().err
        capsys.readouterr()
        module = torch.jit.load(str(out / "model.pt"))
        points = torch.from_numpy(np.random.default_rng(0).uniform(size=(200, 2)))
        with torch.no_grad():
            outputs[twin] = module(points)
    for twin in ("softmax", "logit"):
        for got, expected in zip(outputs[twin], outputs["reference"], strict=True):
            assert torch.equal(got, expected), twin


@pytest.fixture(scope="module")
def store(files: dict[str, Path]) -> dict[str, Any]:
    """A sigmoid-headed single-logit model (float32: its weights are exact there) logged as
    ``pt2`` with its population and registered in a local sqlite store; the certgate evaluator
    registered from the entry point pyproject.toml declares."""
    import mlflow
    from mlflow.models.evaluation.evaluator_registry import _model_evaluation_registry

    from registry_hooks.certgate_model import log_model

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    value = declared["mlflow.model_evaluator"]["certgate"]
    _model_evaluation_registry.register(
        "certgate", EntryPoint("certgate", value, "mlflow.model_evaluator").load())
    uri = f"sqlite:///{files['root'] / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    mlflow.set_experiment("heads")
    with mlflow.start_run():
        log_model(single_logit(torch.nn.Sigmoid()).float(),
                                  population("binary"), registered_model_name="headed",
                                  input_names=NAMES, serialization_format="pt2")
    return {"uri": uri, "model": "models:/headed/1", "root": files["root"]}


@pytest.mark.parametrize("index", [0, 1], ids=["demographic_parity", "causal_fairness"])
def test_pipeline_and_evaluator_on_a_logged_pt2_sigmoid_model(
        store: dict[str, Any], files: dict[str, Path], capsys: pytest.CaptureFixture[str],
        index: int) -> None:
    import mlflow

    _, _, settings, _ = CASES[index]
    audit = {"name": "checked", **settings}
    [reference] = certgate.audit(str(files["reference"]), str(files["root"] / "binary.json"),
                                 audit)
    expected = without_clock(reference.to_dict())
    logged = without_clock(certificate_of_run(store["uri"], "heads-run", {"uri": store["model"]},
                                              audit, store["root"], f"run{index}", capsys))
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.uniform(0, 1, 20), "s": rng.integers(0, 2, 20)})
    data["label"] = (data["x"] + 0.5 * data["s"] > 0.75).astype(int)
    mlflow.set_tracking_uri(store["uri"])
    with mlflow.start_run() as run:
        mlflow.models.evaluate(store["model"], data, targets="label", model_type="classifier",
                               evaluators=["certgate"],
                               evaluator_config={"certgate": {"audits": [audit]}})
    evaluated = without_clock(json.loads(mlflow.artifacts.load_text(
        mlflow.get_run(run.info.run_id).info.artifact_uri + "/certgate/checked.json")))
    for field in COMPARED:
        assert logged[field] == expected[field], field
        assert evaluated[field] == expected[field], field


def test_class_events_of_a_single_logit_in_a_python_specification(
        files: dict[str, Path]) -> None:
    """Class events over the classifier view's outputs run on that view: the class
    probabilities of ``x + 0.5 s > 0.75`` under uniform inputs contain the exact 1/2 and
    equal the reference's; class events over the single output itself are refused."""
    from verifier.audits import run_specification
    from verifier.convert import load_network
    from verifier.pv import PVSettings
    from verifier.spec import Names, SpecError, class_distribution

    pop = load_population(files["root"] / "uniform.json")
    logit = load_network(files["logit"]).renamed(NAMES)
    reference = load_network(files["reference"])
    settings = PVSettings(timeout_s=60, precision=0.01)
    spec = class_distribution(Names.of(NAMES, logit.as_classifier().output_names))
    got = run_specification(logit, pop, spec, settings)
    expected = run_specification(reference, pop, spec, settings)
    assert got.bounds == expected.bounds
    for name in ("p_class_0", "p_class_1"):
        low, high = got.bounds[name]
        assert low <= 0.5 <= high and high - low <= 0.01
    with pytest.raises(SpecError, match=r"'y0' is a single output.*as_classifier"):
        class_distribution(Names.of(NAMES, logit.output_names))
