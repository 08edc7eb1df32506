"""The ``certgate`` MLflow model evaluator (entry point group ``mlflow.model_evaluator``):

    mlflow.models.evaluate("models:/credit@candidate", data, model_type="classifier",
                           evaluators=["certgate"],
                           evaluator_config={"certgate": {"audits": [{"kind": …}, …]}})

runs :func:`certgate.audit` on the evaluated model (read back from MLflow by its logged-model
id, so the certificates are those ``certgate run`` produces for it) and logs, into the
evaluation run, every certificate (``certgate/<audit>.json``) and the certified metrics under
the names the audit runs use (``<audit>.<label>_lower``/``_upper``,
``<audit>.proven_pass``/``_fail``, ``<audit>.elapsed_s``, …), so
``mlflow.validate_evaluation_results`` thresholds apply to them.
The evaluation data is not used: certificates hold for every input of the population model
(the population-fidelity check reads the population's ``fitted_from`` table, as
:func:`certgate.audit` does).

``evaluator_config`` keys: ``audits`` (required; configuration dicts as in a configuration's
``audits``), ``population`` (a population-model JSON file; default: the one the model ships),
``input_names`` (when the model records none), ``model_uri`` (when the evaluated model has no
logged-model id, e.g. a ``PyFuncModel`` built in memory).

This module is MLflow code by nature (it subclasses MLflow's ``ModelEvaluator``); MLflow
imports it only when it looks up its evaluators.
"""

from __future__ import annotations

import math
import time
from typing import Any

import mlflow
from mlflow.entities import Metric
from mlflow.models import EvaluationResult
from mlflow.models.evaluation.artifacts import JsonEvaluationArtifact
from mlflow.models.evaluation.base import ModelEvaluator

from certgate.api import audit, audit_settings
from pipeline_steps.fidelity_step import fidelity_metrics
from verifier.errors import CertgateInputError

CONFIG_KEYS = frozenset({"audits", "population", "input_names", "model_uri"})


def certified_metrics(settings: Any, certificate: Any) -> dict[str, float]:
    """The metrics of one certificate, named as the audit run names them: every certified
    bound (the gated quantity under its requirement's label), the proof flag, the cost and
    the population-fidelity check's metrics; infinite values left out."""
    requirement = settings.requirement
    metrics: dict[str, float] = {}
    for quantity, (low, high) in certificate.bounds.items():
        label = requirement.label if quantity == requirement.quantity else quantity
        metrics[f"{settings.name}.{label}_lower"] = float(low)
        metrics[f"{settings.name}.{label}_upper"] = float(high)
    for flag, value in certificate.proof_flags().items():
        metrics[f"{settings.name}.{flag}"] = value
    for key, value in certificate.cost.items():
        metrics[f"{settings.name}.{key}"] = float(value)
    metrics.update(fidelity_metrics(settings.name, certificate))
    return {key: value for key, value in metrics.items() if math.isfinite(value)}


class CertgateEvaluator(ModelEvaluator):
    """Certified audits as an MLflow evaluator (see the module docstring)."""

    @classmethod
    def can_evaluate(cls, *, model_type: str, evaluator_config: dict[str, Any],
                     **kwargs: Any) -> bool:
        """Classifiers, when the configuration lists audits."""
        return model_type == "classifier" and bool((evaluator_config or {}).get("audits"))

    def evaluate(self, *, model_type: str, dataset: Any, run_id: str,
                 evaluator_config: dict[str, Any], model: Any = None, extra_metrics: Any = None,
                 custom_artifacts: Any = None, predictions: Any = None,
                 **kwargs: Any) -> EvaluationResult:
        """Certify the model, log the metrics and certificates into ``run_id``."""
        config = dict(evaluator_config or {})
        unknown = sorted(set(config) - CONFIG_KEYS)
        if unknown:
            raise CertgateInputError(f"evaluator_config['certgate']: unknown keys {unknown}; "
                                     f"known: {sorted(CONFIG_KEYS)}")
        uri = config.get("model_uri") or _logged_model_uri(model, kwargs.get("model_id"))
        settings = audit_settings(config["audits"])
        certificates = audit(uri, config.get("population"), settings,
                             input_names=config.get("input_names"),
                             tracking_uri=mlflow.get_tracking_uri())
        client = mlflow.MlflowClient()
        metrics: dict[str, float] = {}
        artifacts: dict[str, JsonEvaluationArtifact] = {}
        for item, certificate in zip(settings, certificates, strict=True):
            metrics.update(certified_metrics(item, certificate))
            path = f"certgate/{item.name}.json"
            client.log_text(run_id, certificate.to_json(), path)
            artifacts[f"certgate_{item.name}"] = JsonEvaluationArtifact(
                uri=mlflow.get_run(run_id).info.artifact_uri + "/" + path,
                content=certificate.to_dict())
        now = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric(key, value, now, 0)
                                          for key, value in metrics.items()])
        return EvaluationResult(metrics=metrics, artifacts=artifacts, run_id=run_id)


def _logged_model_uri(model: Any, model_id: str | None) -> str:
    """``models:/<logged-model id>`` of the evaluated model."""
    model_id = model_id or getattr(model, "model_id", None)
    if not model_id:
        raise CertgateInputError(
            "evaluator_config['certgate']: the evaluated model has no MLflow logged-model id; "
            "give 'model_uri' (e.g. models:/NAME/VERSION)")
    return f"models:/{model_id}"
