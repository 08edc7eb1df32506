"""The ``--json`` contract of every ``certgate`` verb: stdout is exactly one JSON object, on
success and on error (``{"error": ..., "exit_code": 2}``), and everything else goes to stderr.

Error paths cover every verb the parser has (a new verb is covered automatically): a usage
error and a domain error (a missing input file). Success paths cover every verb that runs
without a registered model; ``audit`` and ``run`` use a local sqlite MLflow store, whose
"View run" lines must not reach stdout.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from strategies import random_network

from pipeline_steps.cli import _leaf_parsers, build_parser, main
from tests.causal_nets import threshold_network, threshold_population
from verifier.convert import save_network
from verifier.network import Network
from verifier.population import (
    Factor,
    Feature,
    PopulationModel,
    Product,
    Uniform,
    save_population,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
VERBS = sorted(parser.prog.removeprefix("certgate ") for parser in _leaf_parsers(build_parser()))


def one_object(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    """Run ``argv``; stdout must be exactly one JSON object on one line."""
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) == 1, out
    document = json.loads(lines[0])
    assert isinstance(document, dict)
    return code, document


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("json_contract")
    save_network(threshold_network([1.0, 0.5], -0.75, ["x", "s"]), root / "model.json")
    save_population(threshold_population(),
        root / "population.json")
    save_population(PopulationModel(
        features=[Feature(name="x", kind="continuous", domain=(0, 1)),
                  Feature(name="s", kind="continuous", domain=(0, 1))],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Uniform(lower=0, upper=1)),
            Factor(columns=["s"], distribution=Uniform(lower=0, upper=1))])),
        root / "uniform.json")
    three = random_network(np.random.default_rng(0), [2, 4, 3])
    save_network(Network(three.layers, ["x0", "x1"], ["low", "medium", "high"]),
                 root / "three_classes.json")
    (root / "spec.yaml").write_text(
        "probabilities:\n  p: {event: 'y.y1 > y.y0'}\nexpression: p\ncomparison: '>='\n"
        "threshold: 0.0\n")
    (root / "table.csv").write_text("x,s\n0.1,0\n0.5,1\n0.9,1\n0.3,0\n")
    np.save(root / "inputs.npy", np.array([[-1.2, 0.0], [0.5, 0.7]]))
    np.save(root / "logits.npy", np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    (root / "config.yaml").write_text(yaml.safe_dump({
        "tracking": {"tracking_uri": f"sqlite:///{root / 'mlflow.db'}",
                     "experiment": "json-contract"},
        "model": {"uri": str(root / "model.json"),
                  "population_uri": str(root / "uniform.json")},
        "validation": {"population_samples": 200},
        "audits": [{"name": "mono", "kind": "monotonicity", "feature": "x",
                    "min_probability": 0.9}],
        "gate": {"promote_alias": None},
    }))
    return {"root": root}


def success_argv(verb: str, root: Path) -> list[str] | None:
    """A succeeding command line for ``verb`` on files, or ``None`` when it needs a
    registered model (see :data:`REGISTRY_VERBS`) or minutes of work (``demo``, covered by
    tests/test_demo.py) or serves until interrupted (``hooks serve``, covered by
    tests/test_pipeline_server.py)."""
    model, population = str(root / "model.json"), str(root / "population.json")
    audit_common = ["--model", model, "--population", population]
    continuous = ["--model", model, "--population", str(root / "uniform.json")]
    table: dict[str, list[str]] = {
        "bounds": ["--model", model, "--lower", "0,0", "--upper", "1,1"],
        "verify demographic-parity": [*audit_common, "--protected", "s", "--privileged", "1",
                                      "--favorable-class", "1", "--gamma", "0.3",
                                      "--precision", "0.05"],
        "verify probability": [*audit_common, "--spec", str(root / "spec.yaml"),
                               "--precision", "0.05"],
        "verify causal-fairness": [*audit_common, "--protected", "s",
                                   "--max-biased-share", "0.6", "--target-width", "0.05"],
        "verify monotonicity": [*continuous, "--feature", "x", "--min-probability", "0.9"],
        "verify noise-robustness": [*continuous, "--features", "x", "--noise-uniform", "0",
                                    "0.1", "--min-probability", "0.5"],
        "verify equivalence": [*continuous, "--surrogate", model],
        "verify local-robustness": [*continuous, "--center", "0.5,0.5", "--epsilon", "0.2",
                                    "--min-probability", "0.5"],
        "population validate": [population, "--model", model],
        "population describe": [population],
        "population sample": [population, "-n", "3", "--seed", "1"],
        "population fit": [str(root / "table.csv"), "--out", str(root / "fitted.json"),
                           "--model", model],
        "population schema": [],
        "selfcorrect apply": ["--constraints", str(EXAMPLES / "constraints_toy.yaml"),
                              "--inputs", str(root / "inputs.npy"),
                              "--logits", str(root / "logits.npy")],
        "selfcorrect describe": ["--constraints", str(EXAMPLES / "constraints_toy.yaml")],
        "selfcorrect wrap": ["--model", str(root / "three_classes.json"), "--constraints",
                             str(EXAMPLES / "constraints_toy.yaml"), "--out",
                             str(root / "wrapped")],
        "config schema": [],
        "config check": [str(root / "config.yaml")],
        "audit": ["--config", str(root / "config.yaml"), "--no-progress", "--force"],
        "run": ["--config", str(root / "config.yaml"), "--no-progress", "--force"],
    }
    if verb not in table:
        return None
    return [*verb.split(), *table[verb], "--json"]


ERROR_ARGV: dict[str, list[str]] = {
    "bounds": ["--model", "MISSING.json", "--lower", "0", "--upper", "1"],
    "verify demographic-parity": ["--model", "MISSING.json", "--population", "MISSING.json",
                                  "--protected", "s", "--privileged", "1",
                                  "--favorable-class", "1", "--gamma", "0.3"],
    "verify probability": ["--model", "MISSING.json", "--population", "MISSING.json",
                           "--spec", "MISSING.yaml"],
    "verify causal-fairness": ["--model", "MISSING.json", "--protected", "s"],
    "verify monotonicity": ["--model", "MISSING.json", "--population", "MISSING.json",
                            "--feature", "x"],
    "verify noise-robustness": ["--model", "MISSING.json", "--population", "MISSING.json",
                                "--features", "x", "--noise-uniform", "0", "1"],
    "verify equivalence": ["--model", "MISSING.json", "--population", "MISSING.json",
                           "--surrogate", "MISSING.json"],
    "verify local-robustness": ["--model", "MISSING.json", "--population", "MISSING.json",
                                "--center", "0,0", "--epsilon", "0.1"],
    "population validate": ["MISSING.json"],
    "population describe": ["MISSING.json"],
    "population sample": ["MISSING.json", "-n", "2"],
    "population fit": ["MISSING.csv", "--out", "out.json"],
    "population schema": ["--no-such-option"],
    "selfcorrect apply": ["--constraints", "MISSING.yaml", "--inputs", "MISSING.npy",
                          "--logits", "MISSING.npy"],
    "selfcorrect wrap": ["--model", "MISSING.json", "--constraints", "MISSING.yaml",
                         "--out", "OUT"],
    "selfcorrect describe": ["--constraints", "MISSING.yaml"],
    "config schema": ["--no-such-option"],
    "config check": ["MISSING.yaml"],
    "audit": ["--config", "MISSING.yaml"],
    "gate": ["--config", "MISSING.yaml"],
    "run": ["--config", "MISSING.yaml"],
    "hooks serve": ["--config", "MISSING.yaml", "--port", "0", "--secret", "s"],
    "hooks watch": ["--config", "MISSING.yaml", "--once"],
    "demo": ["--no-such-option"],
}


def test_every_verb_has_an_error_case() -> None:
    assert set(ERROR_ARGV) == set(VERBS)


@pytest.mark.parametrize("verb", VERBS)
def test_usage_error_is_one_json_object(capsys: pytest.CaptureFixture[str], verb: str) -> None:
    code, document = one_object(capsys, [*verb.split(), "--no-such-option", "--json"])
    assert code == 2 and document["exit_code"] == 2
    assert ("unrecognized arguments: --no-such-option" in document["error"]
            or "the following arguments are required" in document["error"])


@pytest.mark.parametrize("verb", VERBS)
def test_bad_input_is_one_json_object(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch, verb: str) -> None:
    monkeypatch.chdir(tmp_path)
    code, document = one_object(capsys, [*verb.split(), *ERROR_ARGV[verb], "--json"])
    assert code == 2 and document == {"error": document["error"], "exit_code": 2}
    assert "MISSING" in document["error"] or "--no-such-option" in document["error"]


@pytest.mark.parametrize("verb", [verb for verb in VERBS if success_argv(verb, Path()) is not None])
def test_success_is_one_json_object(capsys: pytest.CaptureFixture[str],
                                    files: dict[str, Path], verb: str) -> None:
    argv = success_argv(verb, files["root"])
    assert argv is not None
    code, document = one_object(capsys, argv)
    assert code in (0, 1), document
    assert "error" not in document
    assert document != {"exit_code": code}, "the verb said nothing about its result"


REGISTRY_VERBS = ("gate", "hooks watch", "selfcorrect wrap into the registry")


@pytest.fixture(scope="module")
def registry(files: dict[str, Path]) -> dict[str, Any]:
    """A model registered in a local sqlite store (with its population model), audited once,
    and a configuration naming it."""
    import mlflow

    from registry_hooks.certgate_model import log_model
    from tests.test_api import threshold_module

    root = files["root"]
    store = f"sqlite:///{root / 'registry.db'}"
    mlflow.set_tracking_uri(store)
    mlflow.set_registry_uri(store)
    mlflow.set_experiment("json-contract-registry")
    uniform = PopulationModel.model_validate_json((root / "uniform.json").read_text())
    with mlflow.start_run():
        log_model(threshold_module(), uniform,
                                  registered_model_name="contract",
                                  serialization_format="pickle")
    config = root / "registry.yaml"
    config.write_text(yaml.safe_dump({
        "tracking": {"tracking_uri": store, "experiment": "json-contract-registry"},
        "model": {"uri": "models:/contract/1"},
        "validation": {"population_samples": 200},
        "audits": [{"name": "mono", "kind": "monotonicity", "feature": "x",
                    "min_probability": 0.9}],
        "gate": {"promote_alias": None},
    }))
    assert main(["audit", "--config", str(config), "--no-progress"]) == 0
    return {"store": store, "config": str(config)}


@pytest.mark.parametrize("verb", REGISTRY_VERBS)
def test_registry_verbs_print_one_object(capsys: pytest.CaptureFixture[str],
                                         files: dict[str, Path], registry: dict[str, Any],
                                         verb: str) -> None:
    argv = {
        "gate": ["gate", "--config", registry["config"]],
        "hooks watch": ["hooks", "watch", "--config", registry["config"], "--once"],
        "selfcorrect wrap into the registry": [
            "selfcorrect", "wrap", "--model", str(files["root"] / "three_classes.json"),
            "--constraints", str(EXAMPLES / "constraints_toy.yaml"),
            "--out", "models:/contract_safe", "--tracking-uri", registry["store"]],
    }[verb]
    code, document = one_object(capsys, [*argv, "--json"])
    assert code in (0, 1) and "error" not in document, document
    assert document != {"exit_code": code}


def test_json_before_the_verb(capsys: pytest.CaptureFixture[str]) -> None:
    code, document = one_object(capsys, ["--json", "config", "check", "MISSING.yaml"])
    assert code == 2 and "MISSING.yaml" in document["error"]


def test_human_text_is_unchanged_without_json(capsys: pytest.CaptureFixture[str],
                                              files: dict[str, Path]) -> None:
    assert main(["config", "check", str(files["root"] / "config.yaml")]) == 0
    captured = capsys.readouterr()
    assert "valid (1 audit(s): mono" in captured.out and not captured.out.startswith("{")


@pytest.mark.parametrize(("options", "level"), [
    ([], "WARNING"), (["-v"], "INFO"), (["-vv"], "DEBUG"), (["-q"], "ERROR"),
    (["--log-level", "debug"], "DEBUG"), (["-q", "--log-level", "info"], "INFO"),
])
def test_log_level_options(options: list[str], level: str) -> None:
    from pipeline_steps.cli import output

    args = build_parser().parse_args([*options, "config", "schema"])
    assert output.log_level(args.log_level, args.verbose, args.quiet) == level


@pytest.mark.parametrize(("preset", "asked", "expected"), [
    (None, False, "warning"), ("info", False, "info"), ("info", True, "error"),
])
def test_dask_logs_at_the_commands_level(monkeypatch: pytest.MonkeyPatch,
                                         preset: str | None, asked: bool,
                                         expected: str) -> None:
    """Dask's ``distributed`` reads its loggers' level from the environment when imported
    (by a Dask executor, and in a local cluster's workers): it follows the command's level,
    unless the environment already names one and no option asked for a level; its own
    default, INFO, wrote ~40 lines on every local-cluster run."""
    from pipeline_steps.cli import output

    for name in (output.DASK_LOG_LEVEL, "MLFLOW_LOGGING_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    mlflow_logger = logging.getLogger("mlflow")
    monkeypatch.setattr(mlflow_logger, "level", mlflow_logger.level)
    if preset is not None:
        monkeypatch.setenv(output.DASK_LOG_LEVEL, preset)
    output.configure_logging("ERROR" if asked else "WARNING", asked=asked)
    assert os.environ[output.DASK_LOG_LEVEL] == expected
