"""MLflow's side of the ``certgate`` model evaluator (entry point group
``mlflow.model_evaluator``; the class the entry point names is
:class:`certgate.evaluator.CertgateEvaluator`):

    mlflow.models.evaluate("models:/credit@candidate", data, model_type="classifier",
                           evaluators=["certgate"],
                           evaluator_config={"certgate": {"audits": [{"kind": …}, …]}})

:class:`CertifyingEvaluator` is everything MLflow about it: it checks the configuration keys,
names the evaluated model (``models:/<logged-model id>``, read back from MLflow, so the
certificates are those ``certgate run`` produces for it), asks its subclass's
:meth:`~CertifyingEvaluator.certify` for the certificates and their metrics, and logs into the
evaluation run every certificate (``certgate/<audit>.json``, also an evaluation artifact) and
the metrics, so ``mlflow.validate_evaluation_results`` thresholds apply to them. Which audits
run and how their metrics are named belongs to the caller (the audit step's), the way the
webhook receiver hands events to a callback: this package never imports the pipeline.
The certificates hold for every input of the population model; the evaluation data is the
data of their population-fidelity check (:mod:`verifier.audits.fidelity`): a population that
the evaluation data contradicts makes the certificate say so.

``evaluator_config`` keys: ``audits`` (required; configuration dicts as in a configuration's
``audits``), ``population`` (a population-model JSON file; default: the one the model ships),
``input_names`` (when the model records none), ``model_uri`` (when the evaluated model has no
logged-model id, e.g. a ``PyFuncModel`` built in memory).
"""

from __future__ import annotations

import time
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

import mlflow
import pandas as pd
from mlflow.entities import Metric
from mlflow.models import EvaluationResult
from mlflow.models.evaluation.artifacts import JsonEvaluationArtifact
from mlflow.models.evaluation.base import ModelEvaluator

from verifier.certificate import Certificate
from verifier.errors import CertgateInputError

CONFIG_KEYS = frozenset({"audits", "population", "input_names", "model_uri"})


@dataclass(frozen=True)
class Certified:
    """One audit's outcome as the evaluator logs it: the audit's name, its certificate and
    its metrics (finite values, named as the audit run names them)."""

    name: str
    certificate: Certificate
    metrics: dict[str, float]


class CertifyingEvaluator(ModelEvaluator):
    """Certified audits as an MLflow evaluator (see the module docstring); a subclass gives
    :meth:`certify`."""

    @classmethod
    def can_evaluate(cls, *, model_type: str, evaluator_config: dict[str, Any],
                     **kwargs: Any) -> bool:
        """Classifiers, when the configuration lists audits."""
        return model_type == "classifier" and bool((evaluator_config or {}).get("audits"))

    @abstractmethod
    def certify(self, model_uri: str, config: dict[str, Any], tracking_uri: str,
                data: EvaluationData) -> list[Certified]:
        """Certify the model ``model_uri`` (in the store ``tracking_uri``) as ``config``
        (``evaluator_config['certgate']``, keys checked) asks, in the order of its audits,
        checking each population against ``data``."""

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
        client = mlflow.MlflowClient()
        artifact_uri = mlflow.get_run(run_id).info.artifact_uri
        metrics: dict[str, float] = {}
        artifacts: dict[str, JsonEvaluationArtifact] = {}
        for outcome in self.certify(uri, config, mlflow.get_tracking_uri(),
                                    evaluation_data(dataset)):
            metrics.update({key: float(value) for key, value in outcome.metrics.items()})
            path = f"certgate/{outcome.name}.json"
            client.log_text(run_id, outcome.certificate.to_json(), path)
            artifacts[f"certgate_{outcome.name}"] = JsonEvaluationArtifact(
                uri=f"{artifact_uri}/{path}", content=outcome.certificate.to_dict())
        now = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric(key, value, now, 0)
                                          for key, value in metrics.items()])
        return EvaluationResult(metrics=metrics, artifacts=artifacts, run_id=run_id)


@dataclass(frozen=True)
class EvaluationData:
    """The features ``mlflow.models.evaluate`` was given, as a table with the dataset's
    column names, and how to name it in a certificate (``origin``)."""

    frame: pd.DataFrame
    origin: str


def evaluation_data(dataset: Any) -> EvaluationData:
    """The evaluation dataset's features (MLflow's ``EvaluationDataset``: a DataFrame, or an
    array with ``feature_names``) and its name and digest."""
    features = dataset.features_data
    frame = (features if isinstance(features, pd.DataFrame)
             else pd.DataFrame(features, columns=list(dataset.feature_names)))
    return EvaluationData(frame, f"mlflow.evaluate dataset {dataset.name} "
                                 f"(digest {dataset.hash})")


def _logged_model_uri(model: Any, model_id: str | None) -> str:
    """``models:/<logged-model id>`` of the evaluated model."""
    model_id = model_id or getattr(model, "model_id", None)
    if not model_id:
        raise CertgateInputError(
            "evaluator_config['certgate']: the evaluated model has no MLflow logged-model id; "
            "give 'model_uri' (e.g. models:/NAME/VERSION)")
    return f"models:/{model_id}"
