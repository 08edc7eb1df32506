"""The ``certgate`` MLflow evaluator against a real local MLflow store (sqlite): a registered
model evaluated with ``mlflow.models.evaluate(..., evaluators=["certgate"])`` gets the
certificate ``certgate run`` logs for the same model and settings, the certified metrics
under the audit run's names (so ``mlflow.validate_evaluation_results`` thresholds decide on
them), and the certificate as an artifact of the evaluation run.

The evaluator is registered from the entry point pyproject.toml declares, by importing the
class it names, the way MLflow's ``register_entrypoints`` registers installed ones (the shared
environment's installed metadata may predate the entry point)."""

from __future__ import annotations

import itertools
import json
import re
import tomllib
from fractions import Fraction
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.test_api import certificate_of_run, register_threshold_model, without_clock

ROOT = Path(__file__).resolve().parents[1]
SETTINGS: dict[str, Any] = {
    "name": "dp", "kind": "demographic_parity", "protected": "s", "privileged": 1,
    "favorable_class": 1, "gamma": 0.3, "timeout_s": 120, "precision": 0.01}
COMPARED = ("audit", "verdict", "bounds", "details", "settings", "algorithm")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from mlflow.models.evaluation.evaluator_registry import _model_evaluation_registry

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    value = declared["mlflow.model_evaluator"]["certgate"]
    evaluator = EntryPoint("certgate", value, "mlflow.model_evaluator").load()
    _model_evaluation_registry.register("certgate", evaluator)

    root = tmp_path_factory.mktemp("evaluator")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    register_threshold_model(uri, "evaluator", "evaluated")
    return {"root": root, "uri": uri, "model": "models:/evaluated/1"}


def evaluation_table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.uniform(0, 1, 20), "s": rng.integers(0, 2, 20)})
    data["label"] = (data["x"] + 0.5 * data["s"] > 0.75).astype(int)
    return data


def evaluate(store: dict[str, Any], config: dict[str, Any]) -> Any:
    import mlflow

    data = evaluation_table()
    with mlflow.start_run() as run:
        result = mlflow.models.evaluate(store["model"], data, targets="label",
                                        model_type="classifier", evaluators=["certgate"],
                                        evaluator_config={"certgate": config})
    return run.info.run_id, result


def run_certificate(store: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict:
    """The certificate ``certgate run`` logs for the registered model."""
    return certificate_of_run(store["uri"], "evaluator-run", {"uri": store["model"]},
                              SETTINGS, store["root"], "run", capsys)


def test_evaluate_logs_the_certificate_certgate_run_logs(
        store: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    import mlflow
    from mlflow.models import MetricThreshold

    run_id, result = evaluate(store, {"audits": [SETTINGS]})
    logged = json.loads(mlflow.artifacts.load_text(
        mlflow.get_run(run_id).info.artifact_uri + "/certgate/dp.json"))
    expected = run_certificate(store, capsys)
    evaluated, reference = without_clock(logged), without_clock(expected)
    for field in COMPARED:
        assert evaluated[field] == reference[field], field

    low, high = expected["bounds"]["value"]  # the gated quantity, labelled "ratio"
    assert result.metrics["dp.ratio_lower"] == low and result.metrics["dp.ratio_upper"] == high
    assert result.metrics["dp.proven_pass"] == (1.0 if expected["verdict"] == "satisfied"
                                                else 0.0)
    assert result.metrics["dp.proven_fail"] == (1.0 if expected["verdict"] == "violated"
                                                else 0.0)
    assert mlflow.get_run(run_id).data.metrics["dp.ratio_lower"] == low

    mlflow.validate_evaluation_results(
        {"dp.ratio_lower": MetricThreshold(threshold=low - 1e-3, greater_is_better=True)},
        result)
    with pytest.raises(mlflow.models.evaluation.validation.ModelValidationFailedException):
        mlflow.validate_evaluation_results(
            {"dp.ratio_lower": MetricThreshold(threshold=high + 1e-3, greater_is_better=True)},
            result)


def test_logged_metrics_are_the_audit_runs(
        store: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """The evaluation run holds the final metrics ``certgate run``'s audit run logs for the
    same model and settings: the same names and values but the wall time, and the
    population-fidelity metrics of the evaluation data."""
    import mlflow

    run_id, result = evaluate(store, {"audits": [SETTINGS]})
    evaluated = mlflow.get_run(run_id).data.metrics
    run_certificate(store, capsys)
    [audit_run] = mlflow.search_runs(experiment_names=["evaluator-run"], max_results=1,
                                     order_by=["attributes.start_time DESC"],
                                     output_format="list")
    audited = {key: value for key, value in audit_run.data.metrics.items()
               if not key.startswith("dp.anytime.")}
    assert evaluated == result.metrics
    # the evaluation data makes the population-fidelity check possible (the audit run had no
    # data): its metrics come on top, every other one is the audit run's
    fidelity = "dp.population_fidelity."
    assert set(audited) <= set(evaluated)
    assert {key for key in set(evaluated) - set(audited) if not key.startswith(fidelity)} == set()
    assert "dp.ratio_lower" in evaluated and "dp.proven_pass" in evaluated
    for key, value in audited.items():
        if key != "dp.elapsed_s" and not key.startswith(fidelity):
            assert value == evaluated[key], key


def test_unknown_config_key_is_named(store: dict[str, Any]) -> None:
    from verifier.errors import CertgateInputError

    with pytest.raises(CertgateInputError, match=r"unknown keys \['audit'\]"):
        evaluate(store, {"audits": [SETTINGS], "audit": []})


def test_the_evaluation_data_checks_the_population(store: dict[str, Any]) -> None:
    """The certificate's population-fidelity record reads the data given to
    ``mlflow.models.evaluate``: its rows, its name, and the model's parity on them (oracle:
    the threshold rule x + 0.5 s > 0.75 applied to the table directly)."""
    import mlflow

    run_id, _ = evaluate(store, {"audits": [SETTINGS]})
    logged = json.loads(mlflow.artifacts.load_text(
        mlflow.get_run(run_id).info.artifact_uri + "/certgate/dp.json"))
    record = logged["population_fidelity"]
    assert record["status"] in ("consistent", "contradicted")
    assert record["data"]["origin"].startswith("mlflow.evaluate dataset")
    assert record["data"]["rows_used"] == 20
    data = evaluation_table()
    favourable = data["x"] + 0.5 * data["s"] > 0.75
    for label, group in (("p_unprivileged", 0), ("p_privileged", 1)):
        rows = data["s"] == group
        assert record["empirical"][label]["rows"] == int(rows.sum())
        assert record["empirical"][label]["estimate"] == pytest.approx(
            float(favourable[rows].mean()), abs=1e-12)


def test_a_model_logged_without_names_is_named_in_the_evaluators_config(
        store: dict[str, Any], tmp_path: Path) -> None:
    """A plain ``mlflow.pytorch.log_model`` (pt2, a numpy example: no column names) evaluated
    with ``evaluators=["certgate"]``: the refusal names the evaluator's own key (it named only
    the configuration's and the command line's), and that key binds the model, giving the
    metrics of the same network logged with its names."""
    import mlflow
    import mlflow.pytorch

    from tests.test_api import threshold_module
    from tests.test_front_doors import population
    from verifier.errors import CertgateInputError
    from verifier.population import save_population

    with mlflow.start_run():
        mlflow.pytorch.log_model(threshold_module().float(), name="model",
                                 input_example=np.zeros((2, 2), dtype=np.float32),
                                 registered_model_name="evaluated_unnamed")
    save_population(population("binary"), tmp_path / "population.json")
    unnamed = {**store, "model": "models:/evaluated_unnamed/1"}
    config = {"audits": [SETTINGS], "population": str(tmp_path / "population.json")}
    with pytest.raises(CertgateInputError,
                       match=r"evaluator_config\['certgate'\]\['input_names'\]"):
        evaluate(unnamed, config)
    _, named = evaluate(unnamed, {**config, "input_names": ["x", "s"]})
    _, shipped = evaluate(store, config)
    for key in ("dp.ratio_lower", "dp.ratio_upper", "dp.proven_pass"):
        assert named.metrics[key] == shipped.metrics[key], key


TIE_WEIGHTS = [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [-1.0, 0.0, 0.0]]
TIE_BIASES = [0.0, 0.0, 3.0]
"""Logits ``(x, y + s, 3 − x)`` on ``x, y ∈ {0..3}``, ``s ∈ {0, 1}``: many exact ties."""


def _tie_class(point: tuple[int, int, int]) -> int:
    """The class in ``Fraction``: the first largest logit (torch's and numpy's argmax)."""
    logits = [sum((Fraction(w) * v for w, v in zip(row, point, strict=True)), Fraction(b))
              for row, b in zip(TIE_WEIGHTS, TIE_BIASES, strict=True)]
    return logits.index(max(logits))


def test_the_readme_gates_on_proven_pass_which_a_bound_at_a_strict_threshold_cannot_pass(
        store: dict[str, Any]) -> None:
    """A finite causal query's biased share is enumerated exactly: 1/4 here (Fraction
    oracle), so at ``max_biased_share: 0.25`` the strict requirement is proven violated while
    ``cf.biased_share_upper`` equals the threshold and passes MLflow's non-strict
    ``MetricThreshold``. The README's evaluator example gated on a bound that way
    (``dp.ratio_lower`` against γ); it now gates on ``proven_pass``, which fails here."""
    import mlflow
    import torch
    from mlflow.models import MetricThreshold
    from mlflow.models.evaluation.validation import ModelValidationFailedException

    from registry_hooks.certgate_model import log_model
    from verifier.population import PopulationModel

    example = re.search(r"mlflow\.validate_evaluation_results\(\s*\{\"dp\.(\w+)\": "
                        r"MetricThreshold\(threshold=(\w+), greater_is_better=True\)\}",
                        (ROOT / "README.md").read_text())
    assert example is not None and example.groups() == ("proven_pass", "1")

    biased = [(x, y) for x, y in itertools.product(range(4), repeat=2)
              if _tie_class((x, y, 0)) != _tie_class((x, y, 1))]
    assert Fraction(len(biased), 16) == Fraction(1, 4)

    layer = torch.nn.Linear(3, 3).double()
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(TIE_WEIGHTS, dtype=torch.float64))
        layer.bias.copy_(torch.tensor(TIE_BIASES, dtype=torch.float64))
    values = {"x": [0.0, 1.0, 2.0, 3.0], "y": [0.0, 1.0, 2.0, 3.0], "s": [0.0, 1.0]}
    population = PopulationModel.from_json({
        "format": "certgate.population/v1",
        "features": [{"name": "x", "kind": "integer", "domain": [0, 3]},
                     {"name": "y", "kind": "integer", "domain": [0, 3]},
                     {"name": "s", "kind": "binary"}],
        "distribution": {"kind": "product", "factors": [
            {"columns": [name], "distribution": {
                "kind": "discrete", "values": points,
                "probabilities": [1.0 / len(points)] * len(points)}}
            for name, points in values.items()]}})
    mlflow.set_experiment("evaluator")
    with mlflow.start_run():
        log_model(torch.nn.Sequential(layer), population, registered_model_name="ties",
                  serialization_format="pickle")
    data = pd.DataFrame(list(itertools.product(*values.values())), columns=list(values))
    data["label"] = [_tie_class(tuple(int(v) for v in row)) for row in data.to_numpy()]
    audit = {"name": "cf", "kind": "causal_fairness", "protected": ["s"],
             "max_biased_share": 0.25, "timeout_s": 60}
    with mlflow.start_run():
        result = mlflow.models.evaluate("models:/ties/1", data, targets="label",
                                        model_type="classifier", evaluators=["certgate"],
                                        evaluator_config={"certgate": {"audits": [audit]}})
    assert result.metrics["cf.biased_share_lower"] == result.metrics["cf.biased_share_upper"]
    assert Fraction(result.metrics["cf.biased_share_upper"]) == Fraction(1, 4)
    assert (result.metrics["cf.proven_pass"], result.metrics["cf.proven_fail"]) == (0.0, 1.0)
    mlflow.validate_evaluation_results(
        {"cf.biased_share_upper": MetricThreshold(threshold=0.25, greater_is_better=False)},
        result)
    with pytest.raises(ModelValidationFailedException, match=r"cf\.proven_pass"):
        mlflow.validate_evaluation_results(
            {"cf.proven_pass": MetricThreshold(threshold=1, greater_is_better=True)}, result)
