"""The population-fidelity step of the audit pipeline, and how its result is shown.

After the audits, :func:`check_certificates` resolves the data once
(:func:`pipeline_steps.fidelity_data.resolve_data`: ``fidelity.data``, then the population's
``fitted_from``, then the MLflow dataset of the version's source run) and records
:func:`verifier.audits.fidelity_check` on every certificate. The rest turns the
record into what each output shows: MLflow metrics (:func:`fidelity_metrics`) and tags
(:func:`fidelity_tags`), the ``--json`` summary (:func:`fidelity_summary`) and the human line
(:func:`fidelity_line`).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline_steps.fidelity_data import dropped_text, resolve_data, table_rows
from verifier.audits import fidelity_check, kind_module
from verifier.audits.fidelity import (
    DataRows,
    FidelityOptions,
    NoData,
    attach,
)
from verifier.certificate import Certificate

if TYPE_CHECKING:
    from configs.schema import CertgateConfig
    from registry_hooks.certgate_model import LoadedModel
    from registry_hooks.connection import Registry
    from verifier.network import Network

FIDELITY = "population_fidelity"


def options(config: CertgateConfig) -> FidelityOptions:
    """The check's options from the configuration's ``fidelity`` section."""
    section = config.fidelity
    return FidelityOptions(level=section.level, population_samples=section.population_samples,
                           seed=section.seed)


def pipeline_data(config: CertgateConfig, registry: Registry | None, loaded: LoadedModel,
                  population: Any, population_path: Path | None, names: list[str],
                  workdir: Path) -> DataRows | NoData:
    """The data rows for the configured model (the module docstring's order)."""

    def logged() -> DataRows | NoData:
        from registry_hooks.datasets import source_run_dataset

        if registry is None:
            return NoData("no tracking store to look up a logged dataset")
        table = source_run_dataset(registry, loaded.model_version, workdir)
        if isinstance(table, NoData):
            return table
        return table_rows(table.frame, table.path, names, table.source)

    return resolve_data(names, population, given=config.fidelity.data,
                        given_origin="fidelity.data", population_path=population_path,
                        mlflow_dataset=logged)


def check_certificates(audits: list[Any], certificates: dict[str, Certificate],
                       network: Network, population: Any, data: DataRows | NoData,
                       chosen: FidelityOptions, progress: bool = False) -> None:
    """Record the fidelity check on every audit's certificate; with ``progress``, each check
    that evaluates the model on the data rows is announced first (:func:`announce_check`)."""
    for settings in audits:
        certificate = certificates.get(settings.name)
        if certificate is not None:
            announce_check(settings, data, progress)
            attach(certificate, fidelity_check(settings, certificate, network, population,
                                               data, chosen))


def announce_check(settings: Any, data: DataRows | NoData, enabled: bool) -> None:
    """When ``enabled`` and the audit's kind checks its certificate on the data rows, say on
    stderr which table and how many rows the model is about to classify: the check runs
    after the audit's time budget and takes about half a minute on a million rows, so it is
    named before that silence, not only in the result."""
    if not enabled or not isinstance(data, DataRows) or not len(data.rows) \
            or isinstance(kind_module(settings.kind).EMPIRICAL_CHECK, str):
        return
    where = data.source.get("uri", "the data")
    print(f"{settings.name}: population fidelity: classifying {len(data.rows):,} data rows "
          f"of {where}...", file=sys.stderr, flush=True)


def status(certificate: Certificate | None) -> str | None:
    """The certificate's fidelity status (``None``: no check was attempted)."""
    if certificate is None:
        return None
    return certificate.population_fidelity.get("status")


def fidelity_metrics(name: str, certificate: Certificate) -> dict[str, float]:
    """``<audit>.population_fidelity.*`` metrics: ``contradicted`` and ``checked`` (0/1), the
    empirical interval's ends and estimate (finite values only)."""
    record = certificate.population_fidelity
    if not record:
        return {}
    prefix = f"{name}.{FIDELITY}"
    metrics = {f"{prefix}.contradicted": 1.0 if record["status"] == "contradicted" else 0.0,
               f"{prefix}.checked": 0.0 if record["status"] == "unchecked" else 1.0}
    empirical = record.get("empirical")
    if empirical:
        metrics[f"{prefix}.empirical_lower"] = float(empirical["interval"][0])
        metrics[f"{prefix}.empirical_upper"] = float(empirical["interval"][1])
        metrics[f"{prefix}.empirical_estimate"] = float(empirical["estimate"])
    return {key: value for key, value in metrics.items() if math.isfinite(value)}


def fidelity_tags(tag: Any, name: str, certificate: Certificate) -> dict[str, str]:
    """Model-version and run tags (``tag(audit, field)`` names them): the status, the
    population's assumptions and, when checked, the empirical interval."""
    record = certificate.population_fidelity
    if not record:
        return {}
    tags = {tag(name, FIDELITY): record["status"],
            tag(name, "population_assumptions"): record["assumptions"]["summary"][:500]}
    empirical = record.get("empirical")
    if empirical:
        low, high = empirical["interval"]
        tags[tag(name, f"{FIDELITY}_interval")] = f"[{low!r}, {high!r}]"
    return tags


def fidelity_summary(certificate: Certificate) -> dict[str, Any] | None:
    """The ``--json`` view: status, reason, assumptions, and when checked both intervals, the
    verdict the data's rows give by themselves (demographic parity) and the data's source."""
    record = certificate.population_fidelity
    if not record:
        return None
    summary: dict[str, Any] = {"status": record["status"], "reason": record["reason"],
                               "assumptions": record["assumptions"]}
    if "empirical" in record:
        summary.update(empirical=record["empirical"]["interval"],
                       estimate=record["empirical"]["estimate"],
                       certified=record["certified"], level=record["level"])
    if "data_verdict" in record:
        summary["data_verdict"] = record["data_verdict"]
    if "data" in record:
        summary["data"] = {key: record["data"][key] for key in ("origin", "uri", "sha256",
                                                              "rows_used", "rows_dropped",
                                                              "missing_values")
                           if key in record["data"]}
    return summary


def fidelity_line(certificate: Certificate) -> str | None:
    """One human line: ``population fidelity: contradicted — …; population: …``."""
    record = certificate.population_fidelity
    if not record:
        return None
    source = record.get("data", {})
    where = f" (data: {source['uri']}, {source['rows_used']} rows{dropped_text(source)})" \
        if "rows_used" in source else ""
    return (f"population fidelity: {record['status']}{where}: {record['reason']}; "
            f"population: {record['assumptions']['summary']}")
