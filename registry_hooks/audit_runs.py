"""Audit runs in MLflow: written through :class:`AuditRunWriter`, read back with
:func:`load_certificates`, and a gate decision mirrored through MLflow's own
``validate_evaluation_results``. The pipeline steps orchestrate; this module is where they
touch MLflow's tracking API.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Metric, ViewType
from mlflow.exceptions import MlflowException

from registry_hooks.connection import Registry, registry_errors
from verifier.certificate import Certificate

CERTIFICATE_ARTIFACT = "certificates/{name}.json"


@dataclass(frozen=True)
class StepMetric:
    """One point of an anytime curve: ``key`` at ``step``, ``elapsed_s`` after the run began."""

    key: str
    value: float
    elapsed_s: float
    step: int


class AuditRunWriter:
    """The active audit run: what the audit step logs, in the order it logs it."""

    def __init__(self, registry: Registry, run: Any, model_id: str | None) -> None:
        self.registry = registry
        self.run_id: str = run.info.run_id
        self.start_ms = int(run.info.start_time)
        self.artifact_uri: str = run.info.artifact_uri
        self.model_id = model_id

    def params(self, params: Mapping[str, str]) -> None:
        mlflow.log_params(dict(params))

    def document(self, document: dict[str, Any], path: str) -> None:
        """A JSON artifact."""
        mlflow.log_dict(document, path)

    def text(self, text: str, path: str) -> None:
        mlflow.log_text(text, path)

    def figure(self, figure: Any, path: str) -> None:
        mlflow.log_figure(figure, path)

    def file(self, source: Path, path: str) -> None:
        """Log ``source`` byte for byte as the artifact ``path``."""
        target = Path(path)
        with tempfile.TemporaryDirectory(prefix="certgate-artifact-") as scratch:
            copy = Path(scratch) / target.name
            shutil.copyfile(source, copy)
            mlflow.log_artifact(str(copy), str(target.parent) if str(target.parent) != "."
                                else None)

    def metrics(self, metrics: Mapping[str, float]) -> None:
        """Final metrics, linked to the logged model when there is one."""
        mlflow.log_metrics(dict(metrics), model_id=self.model_id)

    def step_metrics(self, points: list[StepMetric]) -> None:
        """An anytime curve as step metrics (timestamp = run start + elapsed time)."""
        if not points:
            return
        batch = [Metric(point.key, point.value, self.start_ms + int(1000 * point.elapsed_s),
                        point.step) for point in points]
        self.registry.client.log_batch(self.run_id, metrics=batch)

    def tag(self, key: str, value: str) -> None:
        mlflow.set_tag(key, value)


@contextmanager
def audit_run(registry: Registry, experiment: str, run_name: str, tags: Mapping[str, str],
              model_id: str | None) -> Iterator[AuditRunWriter]:
    """Open an audit run in ``experiment``; MLflow errors become :class:`RegistryError`."""
    with registry_errors(f"cannot log the audit run to {registry.tracking_uri}"):
        mlflow.set_experiment(experiment)
        with mlflow.start_run(run_name=run_name, tags=dict(tags)) as run:
            yield AuditRunWriter(registry, run, model_id)


def delete_run(registry: Registry, run_id: str) -> None:
    """Delete the run (MLflow's soft delete: no record to act on, gone at the next ``gc``)."""
    with registry_errors(f"cannot delete audit run {run_id}"):
        registry.client.delete_run(run_id)


def run_is_active(registry: Registry, run_id: str) -> bool:
    """Whether the run exists and is not deleted (a deleted run's artifacts go with the next
    ``mlflow gc``, and the experiment no longer lists it: it is no record to act on)."""
    with registry_errors(f"cannot read audit run {run_id}"):
        try:
            return registry.client.get_run(run_id).info.lifecycle_stage == "active"
        except MlflowException as error:
            if error.error_code == "RESOURCE_DOES_NOT_EXIST":
                return False
            raise


RUN_ID_PATTERN = re.compile(r"[0-9A-Za-z_-]+")
"""What a run id can look like (anything else in a tag names no run, so it is not active)."""
RUN_ID_BATCH = 100
"""Run ids per ``search_runs`` call of :func:`inactive_runs`."""


def active_experiment_ids(registry: Registry) -> list[str]:
    """Every active experiment's id (one call per thousand experiments)."""
    ids: list[str] = []
    page_token = None
    while True:
        page = registry.client.search_experiments(view_type=ViewType.ACTIVE_ONLY,
                                                  max_results=1000, page_token=page_token)
        ids.extend(experiment.experiment_id for experiment in page)
        page_token = page.token
        if not page_token:
            return ids


def inactive_runs(registry: Registry, run_ids: Collection[str]) -> set[str]:
    """The ids among ``run_ids`` of runs that are not active (deleted, garbage-collected, or
    in a deleted experiment): :func:`run_is_active` for all of them at once, in one call
    listing the active experiments and one ``search_runs`` per :data:`RUN_ID_BATCH` ids."""
    wanted = sorted({run_id for run_id in run_ids if RUN_ID_PATTERN.fullmatch(run_id)})
    active: set[str] = set()
    if not wanted:
        return set(run_ids)
    with registry_errors("cannot check the recorded audit runs"):
        experiments = active_experiment_ids(registry)
        for start in range(0, len(wanted) if experiments else 0, RUN_ID_BATCH):
            batch = wanted[start:start + RUN_ID_BATCH]
            listed = ", ".join(f"'{run_id}'" for run_id in batch)
            runs = registry.client.search_runs(
                experiments, f"attributes.run_id IN ({listed})",
                run_view_type=ViewType.ACTIVE_ONLY, max_results=len(batch))
            active.update(run.info.run_id for run in runs)
    return set(run_ids) - active


def run_artifact_uri(registry: Registry, run_id: str) -> str:
    """Where a run's artifacts live."""
    with registry_errors(f"cannot read audit run {run_id}"):
        return str(registry.client.get_run(run_id).info.artifact_uri)


def load_certificates(registry: Registry, run_id: str,
                      names: list[str]) -> dict[str, Certificate]:
    """The certificates an audit run logged, by audit name (audits without one are left
    out, so the gate reports them missing)."""
    with registry_errors(f"cannot read the certificates of run {run_id}"):
        present = {Path(item.path).name
                   for item in registry.client.list_artifacts(run_id, "certificates")}
        certificates: dict[str, Certificate] = {}
        for name in names:
            path = CERTIFICATE_ARTIFACT.format(name=name)
            if Path(path).name in present:
                document = mlflow.artifacts.load_dict(f"runs:/{run_id}/{path}")
                certificates[name] = Certificate.from_dict(document)
    return certificates


def validate_in_mlflow(metrics: Mapping[str, float],
                       thresholds: Mapping[str, tuple[float, bool]]) -> str:
    """Run ``metrics`` against ``thresholds`` (``key -> (threshold, greater_is_better)``)
    through ``mlflow.validate_evaluation_results``; returns ``"passed"`` or
    ``"failed: <MLflow's message>"``."""
    from mlflow.models import EvaluationResult, MetricThreshold
    from mlflow.models.evaluation.validation import ModelValidationFailedException

    checks = {key: MetricThreshold(threshold=threshold, greater_is_better=greater)
              for key, (threshold, greater) in thresholds.items()}
    try:
        mlflow.validate_evaluation_results(checks, EvaluationResult(dict(metrics), {}))
    except ModelValidationFailedException as error:
        return "failed: " + " ".join(str(error).split())
    return "passed"


def ensure_experiments(names: list[str], artifact_root: Path) -> None:
    """Experiments whose artifacts live under ``artifact_root/<name>`` (MLflow would otherwise
    put them under the current directory)."""
    client = mlflow.MlflowClient()
    for name in names:
        if client.get_experiment_by_name(name) is None:
            client.create_experiment(name, artifact_location=(artifact_root / name).as_uri())


def use_experiment(experiment: str) -> None:
    """Make ``experiment`` the active one (created when missing)."""
    mlflow.set_experiment(experiment)


@contextmanager
def training_run(experiment: str, run_name: str, params: Mapping[str, Any],
                 metrics: Mapping[str, float]) -> Iterator[None]:
    """A run recording how a model was trained (``params``, ``metrics``); models logged in the
    block (e.g. :func:`registry_hooks.certgate_model.log_model_with_population`) belong to it."""
    with registry_errors(f"cannot record the training run {run_name!r}"):
        mlflow.set_experiment(experiment)
        with mlflow.start_run(run_name=run_name):
            mlflow.log_params(dict(params))
            mlflow.log_metrics(dict(metrics))
            yield
