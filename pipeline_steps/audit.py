"""The audit step: load → check → certify → log → tag.

1. Connect to the tracking store and resolve the model URI. A registered version already
   audited under the same configuration fingerprint is not audited again (its recorded
   certificates are returned) unless ``force`` is set.
2. Load the model as the IR and its population model (:mod:`registry_hooks.certgate_model`).
3. Validate (:mod:`pipeline_steps.validation`): the exact domain check, then
   great-expectations on population samples and the optional audit dataset. Nothing is
   written to the registry or the tracking store before these pass. A registered version's
   recorded audit is looked for again (another process may have recorded it meanwhile: it is
   reused), then the version is claimed (:func:`registry_hooks.claims.claim_version`:
   ``certgate.audit.status=running`` and a lease for the audits' budget); a live claim of
   another process is never doubled (:class:`~registry_hooks.claims.AuditInProgressError`,
   unless ``force``), an expired one is taken over and said so
   (:attr:`AuditOutcome.took_over`).
4. Certify every configured audit on the configured executor, with a progress bar on stderr
   for in-process runs; then check each certificate's population model against data
   (:mod:`pipeline_steps.fidelity_step`; the data is resolved before any audit runs).
5. Log one MLflow run per audit: parameters, final certified bounds and costs as metrics
   (linked to the logged model), the anytime bounds as step metrics, each certificate
   (``certificates/<audit>.json``), the validation results, the convergence plots and the
   self-contained HTML report; certificates listing biased regions and witnesses (causal
   fairness) also as CSV (``certificates/<audit>.regions.csv``, ``.witnesses.csv``); then
   tag the model version (``certgate.<audit>.<field>``, ``certgate.audit.*``). When the
   registry fails here, after the audits finished, their certificates are written to local
   files and :class:`AuditNotRecorded` carries them: the bounds are never lost to an upload.

A claim is watched while the engines run (:func:`~registry_hooks.lease_watch.watching`: once
it is lost, the engine is asked to stop), checked again (:func:`~registry_hooks.claims.
lost_to`) after the certification, before the run is logged, and once more before the
version's tags are written: a claim that another process's lease replaced meanwhile (a claim
race lost after its settle window, an expired lease taken over, ``--force``), or whose
version another audit recorded meanwhile, records nothing, deletes its run if it logged one
and raises :class:`~registry_hooks.claims.ClaimLostError` naming the audit the version was
left to: a version's audit is recorded once.

A :class:`~registry_hooks.stopping.StopGuard` (``hooks``) stops the step at its safe points:
before the claim, around the certification and before the version's tags, which begin the
commit (:meth:`~registry_hooks.stopping.StopGuard.commit`, held until the event's gate and
deploy end). A stop after the claim hands the version back
(:func:`~registry_hooks.claims.hand_back`) and deletes a run already logged.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from configs.schema import AuditSettings, CertgateConfig
from pipeline_steps.audit_inputs import check_audits, check_deploy_constraints
from pipeline_steps.fidelity_step import (
    check_certificates,
    fidelity_metrics,
    fidelity_summary,
    fidelity_tags,
    options,
    pipeline_data,
)
from pipeline_steps.gate import decide
from pipeline_steps.progress import SafeBar, audit_progress
from pipeline_steps.report import (
    AuditSection,
    ReportData,
    convergence_figure,
    figure_png,
    render_report,
)
from pipeline_steps.tables import detail_tables
from pipeline_steps.validation import ValidationReport, validate_audit_inputs
from registry_hooks.audit_runs import (
    CERTIFICATE_ARTIFACT,
    StepMetric,
    audit_run,
    delete_run,
    load_certificates,
    run_artifact_uri,
    run_is_active,
)
from registry_hooks.certgate_model import (
    LoadedModel,
    PopulationArtifact,
    fetch_population,
    load_model,
)
from registry_hooks.claims import (
    Claim,
    ClaimLostError,
    abandon_claim,
    claim_version,
    end_claim,
    hand_back,
    left_running,
    lost_to,
)
from registry_hooks.connection import Registry, RegistryError, connect
from registry_hooks.lease_watch import WATCH_S, watching
from registry_hooks.stopping import AuditInterrupted, StopGuard
from registry_hooks.tags import (
    CONFIG_HASH_TAG,
    RUN_ID_TAG,
    STATUS_AUDITED,
    STATUS_TAG,
    audit_tag,
    is_due,
    replace_result_tags,
    version_tags,
)
from registry_hooks.uris import parse_model_uri, resolve_version
from verifier.audits import kind_module, run_audit
from verifier.audits.binding import bind
from verifier.certificate import Certificate, to_jsonable
from verifier.executor import make_executor
from verifier.network import Network
from verifier.pv import PVProgress

REPORT_ARTIFACT = "report/report.html"
FIGURE_ARTIFACT = "report/{name}_convergence.png"
VALIDATION_ARTIFACT = "validation/results.json"
CONFIG_ARTIFACT = "config/audit_config.json"
POPULATION_ARTIFACT = "population/population_model.json"
DETAIL_TABLE_ARTIFACT = "certificates/{name}.{table}.csv"

ProgressCallback = Callable[[PVProgress], None]


@dataclass
class AuditOutcome:
    """What the audit step produced for one model."""

    model_uri: str
    model_name: str | None
    model_version: str | None
    run_id: str | None
    certificates: dict[str, Certificate]
    fingerprint: str
    reused: bool = False
    validation: ValidationReport | None = None
    report_uri: str | None = None
    report_path: Path | None = None
    artifact_uri: str | None = None
    elapsed_s: float = 0.0
    tags: dict[str, str] = field(default_factory=dict)
    took_over: str | None = None
    """The abandoned audit this one took over."""
    report_error: str | None = None
    """Why the local copy of the report (``report_dir``) was not written, if it was not."""
    recording_error: str | None = None
    """Why the finished audit is not recorded in the registry (:class:`AuditNotRecorded`)."""
    local_certificates: dict[str, Path] = field(default_factory=dict)
    """The local files of the certificates an unrecorded audit keeps, by audit name."""


class AuditNotRecorded(RegistryError):
    """The audits finished but the registry failed while they were being recorded (an
    artifact upload or a tag answered HTTP 500, the server went away): :attr:`outcome` holds
    their certificates (:attr:`AuditOutcome.recording_error` this message, ``run_id``
    ``None``) and the local files they were written to, so the bounds are not lost. Nothing
    is recorded on the version, so the gate does not trust them and nothing is promoted."""

    def __init__(self, message: str, outcome: AuditOutcome) -> None:
        super().__init__(message)
        outcome.recording_error = message
        self.outcome = outcome


# ------------------------------------------------------------------------------ certifying


def certify(settings: AuditSettings, network: Network, population: Any,
            progress: ProgressCallback | None = None) -> Certificate:
    """Run one configured audit (:func:`verifier.audits.run_audit`; picklable: the executor
    may run it in another process)."""
    return run_audit(settings, network, population, None, progress)


Anytime = list[tuple[float, tuple[float, float]]]
"""Anytime bounds ``(elapsed_s, (lower, upper))`` of an audit's gated quantity."""


def certify_all(config: CertgateConfig, network: Network, population: Any,
                progress: bool) -> dict[str, Certificate]:
    """Every configured audit's certificate (:func:`certify_observed` without the observed
    bounds)."""
    return certify_observed(config, network, population, progress)[0]


def certify_observed(config: CertgateConfig, network: Network, population: Any, progress: bool
                     ) -> tuple[dict[str, Certificate], dict[str, Anytime]]:
    """Every configured audit's certificate, and the anytime bounds of its gated quantity
    that its progress bar observed and its certificate does not record (causal fairness
    under the uniform measure, run in-process: :mod:`pipeline_steps.progress`).

    Audits whose kind spreads its own work over the executor (its ``engine_options`` are not
    ``None``: PV bounds its batches of boxes there, so one audit uses every worker) run here,
    one after another; the other audits run on the executor in parallel, with a bar counting
    the audits finished (their engines report nothing across processes). With the local
    executor every audit runs here, one after another, with a progress bar in its kind's
    unit of work."""
    certificates: dict[str, Certificate] = {}
    observed: dict[str, Anytime] = {}
    own = {settings.name: kind_module(settings.kind).engine_options(config.executor,
                                                                    config.workers)
           for settings in config.audits}
    parallel = [] if config.executor == "local" else [
        settings for settings in config.audits if own[settings.name] is None
    ]
    for settings in config.audits:
        if settings in parallel:
            continue
        bar = audit_progress(settings, progress)
        try:
            extra = own[settings.name]
            if extra is None:
                extra = bar.engine_options()
            certificates[settings.name] = run_audit(
                settings, network, population, None, bar.callback, **extra
            )
            bar.finish(certificates[settings.name])
        finally:
            bar.close()
        if bar.quantity == settings.requirement.quantity and bar.observed():
            observed[settings.name] = bar.observed()
    ordered = [settings.name for settings in config.audits]
    if not parallel:
        return {name: certificates[name] for name in ordered}, observed
    executor = make_executor(config.executor, config.workers)
    finished = SafeBar(desc=f"audits on {config.executor}", unit=" audits",
                       total=len(parallel), file=sys.stderr, disable=not progress,
                       dynamic_ncols=True)
    try:
        futures = {settings.name: executor.submit(certify, settings, network, population)
                   for settings in parallel}
        for name, future in futures.items():
            certificates[name] = future.result()
            if progress:
                finished.write(f"{name}: {certificates[name].verdict}", file=sys.stderr)
            finished.update(1)
    finally:
        finished.close()
        executor.shutdown()
    return {name: certificates[name] for name in ordered}, observed


# ------------------------------------------------------------------------------ logging


def headline_metrics(settings: AuditSettings, certificate: Certificate) -> dict[str, float]:
    """Final metrics of one audit: its certified shares (``details["certified_shares"]``,
    causal fairness: ``<audit>.certified_shares.fair`` …), every certified bound, the proof
    flag and the cost."""
    requirement = settings.requirement
    metrics: dict[str, float] = {
        f"{settings.name}.certified_shares.{key}": float(value)
        for key, value in certificate.details.get("certified_shares", {}).items()
    }
    for quantity, (low, high) in certificate.bounds.items():
        label = requirement.label if quantity == requirement.quantity else quantity
        metrics[f"{settings.name}.{label}_lower"] = low
        metrics[f"{settings.name}.{label}_upper"] = high
    for flag, value in certificate.proof_flags().items():
        metrics[f"{settings.name}.{flag}"] = value
    for key, value in certificate.cost.items():
        metrics[f"{settings.name}.{key}"] = float(value)
    metrics.update(fidelity_metrics(settings.name, certificate))
    return {key: value for key, value in metrics.items() if math.isfinite(value)}


def history_metrics(settings: AuditSettings, certificate: Certificate,
                    observed: Anytime | None = None) -> list[StepMetric]:
    """The anytime bounds of ``details["history"]`` (else the ``observed`` ones,
    :func:`certify_observed`) as step metrics (step = report index, at the elapsed time of the
    report); infinite bounds are left out."""
    label = settings.requirement.label
    metrics = []
    history = certificate.details.get("history") or observed or []
    for step, (elapsed, (low, high)) in enumerate(history):
        for side, value in (("lower", low), ("upper", high)):
            if math.isfinite(float(value)):
                metrics.append(StepMetric(f"{settings.name}.anytime.{label}_{side}",
                                          float(value), float(elapsed), step))
    return metrics


def version_result_tags(settings: AuditSettings, certificate: Certificate) -> dict[str, str]:
    """``certgate.<audit>.<field>`` tags for the model version."""
    requirement = settings.requirement
    low, high = certificate.bounds[requirement.quantity]
    return {
        audit_tag(settings.name, "verdict"): certificate.verdict,
        audit_tag(settings.name, f"{requirement.label}_lower"): repr(float(low)),
        audit_tag(settings.name, f"{requirement.label}_upper"): repr(float(high)),
        audit_tag(settings.name, "requirement"): requirement.describe(),
        audit_tag(settings.name, "elapsed_s"): f"{certificate.cost.get('elapsed_s', 0.0):.3f}",
        **fidelity_tags(audit_tag, settings.name, certificate),
    }


def _flat_params(config: CertgateConfig) -> dict[str, str]:
    params: dict[str, str] = {"executor": config.executor,
                              "population_samples": str(config.validation.population_samples)}
    for settings in config.audits:
        for key, value in settings.model_dump(mode="json").items():
            params[f"{settings.name}.{key}"] = str(value)
    return params


def build_report(config: CertgateConfig, loaded: LoadedModel, run_id: str | None,
                 certificates: dict[str, Certificate], validation: ValidationReport,
                 figures: dict[str, bytes]) -> str:
    """The HTML report of this audit run, including the gate's verdict on these
    certificates under the configured policy."""
    preview = decide(list(config.audits), certificates, config.gate)
    sections = []
    for settings, check in zip(config.audits, preview.checks, strict=True):
        sections.append(AuditSection(
            settings.name, settings.model_dump(mode="json"), settings.requirement,
            certificates[settings.name], check.status, figures.get(settings.name),
        ))
    data = ReportData(
        loaded.uri, loaded.name, loaded.version, run_id, sections,
        domain_checks=[check.to_dict() for check in validation.domain_checks],
        data_validation=validation.data_results,
        gate_preview=preview.summary(),
    )
    return render_report(data)


def provenance(loaded: LoadedModel, population: PopulationArtifact,
               network: Network, model_inputs: int) -> dict[str, Any]:
    """What a certificate of this audit is about: the model (its URI; a registered version's
    name and version; a local model file's sha256, and its external data files' for an ONNX
    model), the population model (logged as :data:`POPULATION_ARTIFACT`, with its sha256),
    the bound input names and, of these, the model's own (the first ``model_inputs``; binding
    appends the population's columns the model does not read)."""
    return {
        "model_uri": loaded.uri,
        "model_name": loaded.name,
        "model_version": loaded.version,
        **({"model_sha256": loaded.sha256} if loaded.sha256 is not None else {}),
        **({"model_external_data_sha256": loaded.external_data_sha256}
           if loaded.external_data_sha256 else {}),
        "population_source": population.source,
        "population_artifact": POPULATION_ARTIFACT,
        "population_sha256": population.sha256,
        "input_names": list(network.input_names),
        "model_input_names": list(network.input_names)[:model_inputs],
    }


def log_audit_run(config: CertgateConfig, registry: Registry, loaded: LoadedModel,
                  population: PopulationArtifact, validation: ValidationReport,
                  certificates: dict[str, Certificate],
                  report_dir: Path | None = None,
                  observed: dict[str, Anytime] | None = None,
                  guard: StopGuard | None = None) -> AuditOutcome:
    """Write the audit run and its artifacts (see the module docstring); with ``report_dir``
    also keep a local copy of the HTML report there. ``observed``: anytime bounds the
    certificates do not record (:func:`certify_observed`), for the step metrics and charts.
    The version's tags are returned in :attr:`AuditOutcome.tags`, not written (the caller
    commits them, :func:`audit_model`); ``guard`` learns the run's id as it opens."""
    observed = observed or {}
    fingerprint = config.audit_fingerprint()
    run_name = (f"audit {loaded.name} v{loaded.version}" if loaded.name
                else f"audit {Path(loaded.uri).name}")
    run_tags = {"certgate.model_uri": loaded.uri, "certgate.audit.config_hash": fingerprint}
    if loaded.name is not None:
        run_tags.update({"certgate.model_name": loaded.name,
                         "certgate.model_version": str(loaded.version)})
    with audit_run(registry, config.tracking.experiment, run_name, run_tags,
                   loaded.model_id) as run:
        if guard is not None:
            guard.logged(run.run_id)
        run.file(population.path, POPULATION_ARTIFACT)
        run.params({"model_uri": loaded.uri, "population": population.source,
                    "population_sha256": population.sha256,
                    "flavor": f"{loaded.flavor}/{loaded.serialization}",
                    **_flat_params(config)})
        run.document(config.model_dump(mode="json"), CONFIG_ARTIFACT)
        run.document(validation.to_dict(), VALIDATION_ARTIFACT)
        figures: dict[str, bytes] = {}
        for settings in config.audits:
            certificate = certificates[settings.name]
            run.metrics(headline_metrics(settings, certificate))
            run.step_metrics(history_metrics(settings, certificate,
                                             observed.get(settings.name)))
            run.document(certificate.to_dict(), CERTIFICATE_ARTIFACT.format(name=settings.name))
            for table, text in detail_tables(certificate, loaded.network.input_names).items():
                run.text(text, DETAIL_TABLE_ARTIFACT.format(name=settings.name, table=table))
            figure = convergence_figure(settings.name, settings.requirement, certificate,
                                        observed.get(settings.name))
            run.figure(figure, FIGURE_ARTIFACT.format(name=settings.name))
            figures[settings.name] = figure_png(figure)
            run.tag(audit_tag(settings.name, "verdict"), certificate.verdict)
            for key, value in fidelity_tags(audit_tag, settings.name, certificate).items():
                run.tag(key, value)
        html = build_report(config, loaded, run.run_id, certificates, validation, figures)
        run.text(html, REPORT_ARTIFACT)
        run_id, artifact_uri = run.run_id, run.artifact_uri
    report_path, report_error = None, None
    if report_dir is not None:
        report_path, report_error = local_report_copy(report_dir, run_id, html)
    tags: dict[str, str] = {}
    for settings in config.audits:
        tags.update(version_result_tags(settings, certificates[settings.name]))
    tags.update({STATUS_TAG: STATUS_AUDITED, RUN_ID_TAG: run_id, CONFIG_HASH_TAG: fingerprint})
    return AuditOutcome(
        loaded.uri, loaded.name, loaded.version, run_id, certificates, fingerprint,
        validation=validation, report_uri=f"{artifact_uri}/{REPORT_ARTIFACT}",
        report_path=report_path, artifact_uri=artifact_uri, tags=tags, report_error=report_error,
    )


def write_local(path: Path, text: str) -> str | None:
    """Write ``text`` to ``path`` (its directory made if missing): ``None``, or why the file
    system refused it (read-only, full, a file in the directory's place), with no partial
    file left."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        return str(error.strerror or error)
    return None


def local_report_copy(report_dir: Path, run_id: str, html: str) -> tuple[Path | None,
                                                                        str | None]:
    """Write ``report_dir/report-RUN_ID.html``: its path, or ``None`` and why it could not be
    written (a read-only or full file system, a file in the directory's place). The report
    is an artifact of the run already logged, so a local copy that fails costs the audit
    nothing: the reason is said on stderr and in the outcome, and no partial file stays."""
    path = report_dir / f"report-{run_id}.html"
    refused = write_local(path, html)
    if refused is not None:
        reason = (f"cannot write a local copy of the report in {report_dir} "
                  f"({refused}); the run's artifact holds it")
        print(f"certgate: warning: {reason}", file=sys.stderr)
        return None, reason
    return path, None


def unrecorded_audit(loaded: LoadedModel, certificates: dict[str, Certificate],
                     fingerprint: str, report_dir: Path | None, cause: RegistryError,
                     elapsed_s: float) -> AuditNotRecorded:
    """The error of finished audits the registry failed to record (``cause``), after writing
    each certificate as its run's artifact would hold it (``Certificate.to_json``) to
    ``certificate-AUDIT-STAMP-PID.json`` in ``report_dir`` (else a new directory in the
    system's temporary directory, which nothing removes): the message names the files, or
    says why the file system refused them (the outcome's certificates still carry the
    bounds for the output)."""
    directory = report_dir
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="certgate-certificates-"))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    kept: dict[str, Path] = {}
    refused: list[str] = []
    for name, certificate in certificates.items():
        path = directory / f"certificate-{name}-{stamp}-{os.getpid()}.json"
        why = write_local(path, certificate.to_json())
        if why is None:
            kept[name] = path
        else:
            refused.append(f"{name}: cannot write {path} ({why})")
    where = "; ".join([*(str(path) for path in kept.values()), *refused])
    outcome = AuditOutcome(loaded.uri, loaded.name, loaded.version, None, certificates,
                           fingerprint, elapsed_s=elapsed_s, local_certificates=kept)
    return AuditNotRecorded(
        f"{cause}; the audit finished but is not recorded in the registry, so the gate did "
        f"not run and nothing was promoted; its certificates: {where}", outcome)


# ------------------------------------------------------------------------------ the step


def previous_audit(config: CertgateConfig, registry: Registry,
                   model_uri: str) -> AuditOutcome | None:
    """The recorded audit of the version ``model_uri`` names under this configuration, if it
    exists and its run is not deleted (then nothing needs to run; a deleted run is audited
    again)."""
    reference = parse_model_uri(model_uri)
    if not reference.in_registry:
        return None
    version = resolve_version(registry, reference)
    fingerprint = config.audit_fingerprint()
    tags = version_tags(registry, version.name, str(version.version))
    if is_due(tags, fingerprint) or tags.get(STATUS_TAG) != STATUS_AUDITED:
        return None
    run_id = tags[RUN_ID_TAG]
    if not run_is_active(registry, run_id):
        return None
    names = [settings.name for settings in config.audits]
    certificates = load_certificates(registry, run_id, names)
    artifact_uri = run_artifact_uri(registry, run_id)
    return AuditOutcome(
        model_uri, version.name, str(version.version), run_id, certificates, fingerprint,
        reused=True, report_uri=f"{artifact_uri}/{REPORT_ARTIFACT}", artifact_uri=artifact_uri,
        tags={k: v for k, v in tags.items() if k.startswith("certgate.")},
    )


def reusable_audit(config: CertgateConfig, registry: Registry,
                   model_uri: str) -> AuditOutcome | None:
    """:func:`previous_audit`, after checking that a configured deploy's constraint file
    resolves on the input names its certificates record (the reused audit loads no model)."""
    reused = previous_audit(config, registry, model_uri)
    if reused is not None and config.deploy is not None:
        names = recorded_input_names(reused) or config.model.input_names
        check_deploy_constraints(config.deploy.constraints, names,
                                 names_may_come_later=names is None)
    return reused


def recorded_input_names(outcome: AuditOutcome) -> list[str] | None:
    """The model's input names the certificates of a recorded audit record (their
    ``provenance``; the bound names where an older certificate lacks the model's own),
    ``None`` when none records them: the names a deploy file of the audited
    version resolves on when the reused audit loads no model (a misspelt name found by the
    deploy step stopped the run after the gate had moved the promotion alias)."""
    for certificate in outcome.certificates.values():
        names = (certificate.provenance.get("model_input_names")
                 or certificate.provenance.get("input_names"))
        if names:
            return list(names)
    return None


def bound_inputs(config: CertgateConfig, loaded: LoadedModel,
                 population: Any) -> tuple[Network, Any]:
    """The network with its inputs named and the population model ordered by
    :func:`verifier.audits.binding.bind` (names from the model or ``model.input_names``,
    never from the population), after checking that every input an audit names exists and
    that each audit can run on them (:func:`verifier.audits.check_audit`): a typo, an unnamed
    model or a population an audit cannot handle fails here, before anything is written to
    the registry or any audit starts. A configured deploy's constraint file must resolve
    on the model's own input names here too (not the population's columns binding appends,
    which the variant does not read): found by the deploy step, a misspelt name stopped
    the run after the gate had moved the promotion alias."""
    network, population = bind(loaded.network, population, config.model.input_names,
                               loaded.uri)
    check_audits(config.audits, network, population, list(network.input_names),
                 ("an input of the model", "inputs of the model"))
    if config.deploy is not None:
        own = list(network.input_names)[:loaded.network.input_size]
        check_deploy_constraints(config.deploy.constraints, own, names_may_come_later=False)
    return network, population


def audit_budget_s(config: CertgateConfig) -> float | None:
    """The seconds the configured audits may take together (the sum of their ``timeout_s``;
    ``None`` when one has no time limit): the claim's lease is this plus its grace."""
    limits = [getattr(settings, "timeout_s", None) for settings in config.audits]
    if any(limit is None for limit in limits):
        return None
    return float(sum(limits))


def interrupted_note(claim: Claim, reason: str) -> str:
    """The ``certgate.audit.interrupted`` text of a claim handed back on a stop."""
    stopped = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return (f"stopped by {reason} at {stopped} ({claim.lease.owner}) before its results were "
            "written; the version is due again")


def give_back(registry: Registry, claim: Claim, run_id: str | None, reason: str,
              guard: StopGuard) -> None:
    """Hand back the claim of an audit stopped for ``reason`` and delete the audit run it had
    logged, if any (:func:`~registry_hooks.claims.hand_back`); ``guard`` records the version
    handed back (:attr:`~registry_hooks.stopping.StopGuard.handed_back`)."""
    if hand_back(registry, claim, interrupted_note(claim, reason)):
        guard.handed_back.append(f"models:/{claim.name}/{claim.version}")
    if run_id is not None:
        delete_run(registry, run_id)


def discarded(registry: Registry, claim: Claim, why: str, run_id: str | None
              ) -> ClaimLostError:
    """The error of an audit whose claim was lost (``why``, :func:`~registry_hooks.claims.
    lost_to`), after deleting the run it logged (``run_id``; ``None``: none yet): nothing of
    it stays recorded, so the version's record is the other audit's (or, when that one fails
    and gives its claim back, a later audit's). A run that cannot be deleted is named in the
    message, to delete by hand."""
    run = "no run was logged"
    if run_id is not None:
        try:
            delete_run(registry, run_id)
            run = f"its run {run_id} was deleted"
        except RegistryError as error:
            run = (f"its run {run_id} could not be deleted ({error}) and is no record of the "
                   "version: delete it")
    return ClaimLostError(
        f"models:/{claim.name}/{claim.version} {why}; this audit ({claim.lease.owner}) lost its "
        f"claim and discarded its results ({run}; nothing written on the version): the "
        "version is left to the audit that claimed or recorded it")


def _restore_status(registry: Registry, claim: Claim, cause: BaseException,
                    run_id: str | None, guard: StopGuard) -> None:
    """Undo the claim of an audit that failed with ``cause`` (the status tag as it was, no
    lease; a stop hands it back, :func:`give_back`). When the registry cannot be reached for
    that either (it went away mid-run), the error raised is still ``cause``'s, of its type
    (a lost claim stays a :class:`~registry_hooks.claims.ClaimLostError`, which ``hooks``
    report as skipped), saying that the tag was left ``running`` and what audits it again
    (:func:`~registry_hooks.claims.left_running`)."""
    try:
        if isinstance(cause, AuditInterrupted):
            give_back(registry, claim, run_id, str(cause), guard)
        else:
            abandon_claim(registry, claim)
    except RegistryError as lost:
        left = f"{left_running(claim.name, claim.version, claim.lease)} ({lost})"
        if isinstance(cause, AuditNotRecorded):
            raise AuditNotRecorded(f"{cause}; {left}", cause.outcome) from cause
        if isinstance(cause, RegistryError):
            raise type(cause)(f"{cause}; {left}") from cause
        cause.add_note(left)


def audit_model(config: CertgateConfig, *, model_uri: str | None = None, force: bool = False,
                progress: bool = True, registry: Registry | None = None,
                report_dir: Path | None = None, guard: StopGuard | None = None,
                watch_s: float = WATCH_S) -> AuditOutcome:
    """The audit step for ``model_uri`` (default: the configuration's ``model.uri``); with
    ``report_dir`` a copy of the HTML report is written there too. ``guard``: stops it at its
    safe points (module docstring); a registered version's commit is left open for the
    caller's gate and deploy (:meth:`~registry_hooks.stopping.StopGuard.finished` ends it).
    ``watch_s``: how often the claim is read while the engines run
    (:func:`registry_hooks.lease_watch.watching`)."""
    started = time.monotonic()
    guard = guard if guard is not None else StopGuard()
    guard.checkpoint()
    uri = model_uri or config.model.uri
    registry = registry or connect(config.tracking.tracking_uri, config.tracking.registry_uri)
    if not force and (reused := reusable_audit(config, registry, uri)) is not None:
        return reused
    with tempfile.TemporaryDirectory(prefix="certgate-audit-") as scratch:
        scratch_dir = Path(scratch)
        loaded = load_model(uri, registry, scratch_dir, input_names=config.model.input_names)
        artifact = fetch_population(loaded, config.model.population_uri, scratch_dir)
        model_inputs = loaded.network.input_size
        network, population = bound_inputs(config, loaded, artifact.model)
        loaded.network = network
        validation = validate_audit_inputs(
            network, population, loaded.input_domain(),
            samples=config.validation.population_samples, seed=config.validation.seed,
            audit_data=config.validation.audit_data,
        )
        data = pipeline_data(config, registry, loaded, population, artifact.path,
                             list(network.input_names), scratch_dir)
        claim = None
        run_id = None
        lost: str | None = None
        if loaded.name is not None and loaded.version is not None:
            # another process (``hooks watch``) may have recorded this version's audit while
            # the model was downloaded and checked: reused, as at the start
            if not force and (reused := reusable_audit(
                    config, registry, f"models:/{loaded.name}/{loaded.version}")) is not None:
                return reused
            with guard.claiming():
                claim = claim_version(registry, loaded.name, loaded.version,
                                      audit_budget_s(config), force=force)
                guard.holding(claim)
        try:
            guard.checkpoint()
            with watching(registry, claim, watch_s):
                certificates, observed = certify_observed(config, network, population,
                                                          progress)
            guard.checkpoint()
            check_certificates(config.audits, certificates, network, population, data,
                               options(config), progress)
            for certificate in certificates.values():
                certificate.provenance = provenance(loaded, artifact, network, model_inputs)
            try:
                lost = lost_to(registry, claim) if claim is not None else None
                if lost is None:
                    outcome = log_audit_run(config, registry, loaded, artifact, validation,
                                            certificates, report_dir, observed, guard)
                    run_id = outcome.run_id
                if claim is not None and lost is None:
                    guard.commit()
                    lost = lost_to(registry, claim)
                    if lost is None:
                        replace_result_tags(registry, claim.name, claim.version, outcome.tags)
            except RegistryError as failed:
                raise unrecorded_audit(loaded, certificates, config.audit_fingerprint(),
                                       report_dir, failed, time.monotonic() - started) from failed
            if claim is not None and lost is not None:
                raise discarded(registry, claim, lost, run_id)
        except BaseException as error:
            if claim is not None:
                _restore_status(registry, claim, error, run_id, guard)
            raise
        if claim is not None:
            end_claim(registry, claim)
            outcome.took_over = claim.takeover_text()
    outcome.elapsed_s = time.monotonic() - started
    return outcome


def outcome_summary(outcome: AuditOutcome, config: CertgateConfig) -> dict[str, Any]:
    """A JSON-ready summary: version, run, and per audit the verdict and certified interval."""
    audits = {}
    for settings in config.audits:
        certificate = outcome.certificates[settings.name]
        low, high = certificate.bounds[settings.requirement.quantity]
        audits[settings.name] = {
            "verdict": certificate.verdict,
            settings.requirement.label: [low, high],
            "requirement": settings.requirement.describe(),
            "elapsed_s": certificate.cost.get("elapsed_s"),
            "population_fidelity": fidelity_summary(certificate),
        }
    return to_jsonable({
        "model_uri": outcome.model_uri, "model_name": outcome.model_name,
        "model_version": outcome.model_version, "run_id": outcome.run_id,
        "reused": outcome.reused, "took_over": outcome.took_over, "report": outcome.report_uri,
        "local_report": str(outcome.report_path) if outcome.report_path else None,
        "local_report_error": outcome.report_error,
        "recording_error": outcome.recording_error,
        "local_certificates": {name: str(path)
                               for name, path in outcome.local_certificates.items()},
        "audits": audits,
    })
