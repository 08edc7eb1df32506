"""The ``certgate`` MLflow model evaluator, the class the ``mlflow.model_evaluator`` entry
point names: :class:`registry_hooks.evaluator.CertifyingEvaluator` (everything MLflow: the
configuration keys, the evaluated model's URI, logging) with the audits of
:func:`certgate.audit` and the metrics the audit step logs
(:func:`pipeline_steps.audit.headline_metrics`), so an evaluation run holds the certificates
and metric names of ``certgate run``'s audit runs.
"""

from __future__ import annotations

from typing import Any

from certgate.api import audit, audit_settings
from registry_hooks.evaluator import Certified, CertifyingEvaluator, EvaluationData


class CertgateEvaluator(CertifyingEvaluator):
    """Certified audits as an MLflow evaluator (see :mod:`registry_hooks.evaluator`)."""

    def certify(self, model_uri: str, config: dict[str, Any], tracking_uri: str,
                data: EvaluationData) -> list[Certified]:
        """:func:`certgate.audit` on ``model_uri`` with the configuration's audits, each with
        the audit run's metrics, the evaluation data checking the population."""
        # MLflow imports every registered evaluator whenever it evaluates any model: the audit
        # step (torch, the report's plotting) is imported only when certgate evaluates.
        from pipeline_steps.audit import headline_metrics

        settings = audit_settings(config["audits"])
        certificates = audit(model_uri, config.get("population"), settings,
                             input_names=config.get("input_names"), tracking_uri=tracking_uri,
                             data=data.frame, data_origin=data.origin)
        return [Certified(item.name, certificate, headline_metrics(item, certificate))
                for item, certificate in zip(settings, certificates, strict=True)]
