"""The audit step's parts that need no registry: certifying on each executor, and what gets
logged (metrics, step metrics, version tags)."""

from __future__ import annotations

import math

from configs.schema import parse_config
from pipeline_steps.audit import (
    certify_all,
    headline_metrics,
    history_metrics,
    version_result_tags,
)
from verifier.certificate import Certificate
from verifier.convert.torch_module import from_torch

pytest_plugins = ["mlflow_server"]

AUDIT = {"kind": "demographic_parity", "name": "dp", "protected": "sex", "privileged": 1,
         "favorable_class": 1, "gamma": 0.8, "timeout_s": 60}


def config(executor: str = "local"):
    return parse_config({"model": {"uri": "models:/m/1"}, "audits": [AUDIT],
                         "executor": executor})


def certificate() -> Certificate:
    return Certificate(
        audit="demographic_parity", verdict="unknown",
        bounds={"value": (0.5, math.inf), "p_unprivileged": (0.2, 0.4),
                "p_privileged": (0.0, 0.4)},
        details={"history": [[0.25, [0.0, math.inf]], [1.5, [0.5, 9.0]]]},
        cost={"elapsed_s": 2.0, "boxes": 64, "iterations": 3},
    )


def test_headline_metrics_name_every_finite_bound() -> None:
    settings = config().audits[0]
    metrics = headline_metrics(settings, certificate())
    assert metrics == {
        "dp.ratio_lower": 0.5, "dp.p_unprivileged_lower": 0.2, "dp.p_unprivileged_upper": 0.4,
        "dp.p_privileged_lower": 0.0, "dp.p_privileged_upper": 0.4, "dp.proven_pass": 0.0,
        "dp.proven_fail": 0.0, "dp.elapsed_s": 2.0, "dp.boxes": 64.0, "dp.iterations": 3.0,
    }


def test_proof_flags_say_which_way_the_proof_went() -> None:
    """A model proven to violate is not "proven": ``proven_pass`` is 1 only for a proven pass,
    ``proven_fail`` only for a proven violation, and no flag reads 1 for both."""
    settings = config().audits[0]
    flags = {}
    for verdict, bounds in (("satisfied", (0.85, 0.9)), ("violated", (0.2, 0.7)),
                            ("unknown", (0.5, 0.9))):
        metrics = headline_metrics(settings, Certificate(
            audit="demographic_parity", verdict=verdict, bounds={"value": bounds}))
        flags[verdict] = {key: value for key, value in metrics.items()
                          if key.startswith("dp.proven")}
    assert flags == {"satisfied": {"dp.proven_pass": 1.0, "dp.proven_fail": 0.0},
                     "violated": {"dp.proven_pass": 0.0, "dp.proven_fail": 1.0},
                     "unknown": {"dp.proven_pass": 0.0, "dp.proven_fail": 0.0}}


def test_history_becomes_step_metrics() -> None:
    settings = config().audits[0]
    metrics = history_metrics(settings, certificate())
    assert [(m.key, m.value, m.elapsed_s, m.step) for m in metrics] == [
        ("dp.anytime.ratio_lower", 0.0, 0.25, 0),
        ("dp.anytime.ratio_lower", 0.5, 1.5, 1),
        ("dp.anytime.ratio_upper", 9.0, 1.5, 1),
    ]


def test_version_tags_round_trip_the_bounds() -> None:
    settings = config().audits[0]
    tags = version_result_tags(settings, certificate())
    assert tags["certgate.dp.verdict"] == "unknown"
    assert float(tags["certgate.dp.ratio_lower"]) == 0.5
    assert float(tags["certgate.dp.ratio_upper"]) == math.inf
    assert tags["certgate.dp.requirement"] == "ratio > 0.8"


def test_process_executor_certifies_like_the_local_one(credit_demo) -> None:
    network = from_torch(credit_demo.biased, list(credit_demo.population.columns))
    local = certify_all(config("local"), network, credit_demo.population, progress=False)
    pooled = certify_all(config("process"), network, credit_demo.population, progress=False)
    assert local["dp"].verdict == pooled["dp"].verdict == "violated"
    assert local["dp"].bounds == pooled["dp"].bounds
