"""``certgate audit|gate|run`` and ``certgate hooks serve|watch``: the MLflow pipeline verbs.

Exit codes: ``audit`` 0 once the audit is recorded; ``gate`` and ``run`` 0 when the gate
passes (or only warns), 1 when it fails; every error is one line on stderr with exit code 2.
MLflow and the pipeline steps are imported when a verb runs, after its configuration is read,
so other verbs and configuration errors start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline_steps.cli.config_cmd import DEPLOY_MODULE, load_config, require_deploy_step
from pipeline_steps.cli.exit_codes import EXIT_ERROR, EXIT_OK, exit_for
from pipeline_steps.cli.output import (
    JSON_HELP,
    add_no_progress,
    emit_json,
    outlives_its_reader,
    quiet_downloads,
)
from verifier.errors import CertgateInputError, ExecutorUnreachableError

if TYPE_CHECKING:
    from configs.schema import CertgateConfig
    from pipeline_steps.audit import AuditNotRecorded, AuditOutcome
    from pipeline_steps.gate import GateDecision
    from registry_hooks.connection import Registry
    from registry_hooks.dispatch import Dispatcher
    from registry_hooks.events import RegistryEvent
    from registry_hooks.stopping import StopGuard

SECRET_ENV = "CERTGATE_WEBHOOK_SECRET"


def register(subparsers: argparse._SubParsersAction) -> None:
    _register_audit(subparsers)
    _register_gate(subparsers)
    _register_run(subparsers)
    _register_hooks(subparsers)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="audit configuration (YAML)")
    parser.add_argument("--model-uri", help="this model instead of the config's model.uri")
    parser.add_argument("--json", action="store_true", help=JSON_HELP)


def _audit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true",
                        help="audit again even if this version was audited with this config")
    add_no_progress(parser)
    parser.add_argument("--report-dir", type=Path,
                        help="also write the HTML report into this directory")


def _register_audit(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "audit", help="certify a model and record the audit in MLflow",
        description="Load the model and its population model, validate, run every configured "
        "audit, log the audit run (metrics, certificates, report) and tag the model version.",
    )
    _common(parser)
    _audit_options(parser)
    parser.set_defaults(func=audit_command)


def _register_gate(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gate", help="decide promotion from a version's recorded certificates",
        description="Only proven passes pass. Tags certgate.gate and certgate.gate.reasons; "
        "moves the promotion alias on pass. Exit code 0 pass (or warn), 1 fail, 2 error.",
    )
    _common(parser)
    parser.set_defaults(func=gate_command)


def _register_run(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="audit, gate (and deploy when configured) in one go",
        description="The whole pipeline for one model. Exit code 0 when the gate passes (or "
        "warns), 1 when it fails, 2 on errors.",
    )
    _common(parser)
    _audit_options(parser)
    parser.set_defaults(func=run_command)


def _register_hooks(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "hooks", help="audit registry events: webhook receiver or polling watcher",
        description="Run the pipeline (audit, gate, and deploy when configured, as `certgate "
        "run`) for new model versions, once per version.",
    )
    verbs = parser.add_subparsers(dest="hooks_command", metavar="VERB", required=True)
    serve = verbs.add_parser(
        "serve", help="receive MLflow registry webhooks",
        description="Serve POST PATH; verify MLflow's HMAC signature (secret from --secret or "
        f"${SECRET_ENV}); audit on model_version_alias.created for --alias, or on "
        "model_version.created when no alias is given.",
    )
    serve.add_argument("--config", required=True, help="audit configuration (YAML)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1; 0.0.0.0 for every "
                            "interface, e.g. when the MLflow server runs elsewhere)")
    serve.add_argument("--port", type=int, required=True, help="port to listen on")
    serve.add_argument("--path", default="/webhook", help="URL path to serve (default /webhook)")
    serve.add_argument("--secret", default=os.environ.get(SECRET_ENV),
                       help=f"webhook secret (default: ${SECRET_ENV})")
    serve.add_argument("--alias", help="act on this alias being set (e.g. candidate)")
    serve.add_argument("--certfile",
                       help="PEM certificate (chain): serve HTTPS, as MLflow's server requires "
                            "unless MLFLOW_WEBHOOK_ALLOWED_SCHEMES allows http")
    serve.add_argument("--keyfile", help="PEM private key of --certfile (if not inside it)")
    _retry_option(serve)
    serve.add_argument("--poll-interval", type=float, default=0.0, metavar="SECONDS",
                       help="also poll the registry every SECONDS, as `hooks watch` does (the "
                            "first poll at start), so an audit that failed or was abandoned is "
                            "retried without a new event (default 0: events only)")
    serve.set_defaults(func=serve_command)
    watch = verbs.add_parser(
        "watch", help="poll the registry for versions awaiting an audit",
        description="Every --interval seconds, audit versions not yet audited under this "
        "configuration (or the version --alias points to), once per version.",
    )
    watch.add_argument("--config", required=True, help="audit configuration (YAML)")
    watch.add_argument("--interval", type=float, default=30.0, help="seconds between polls")
    watch.add_argument("--once", action="store_true", help="poll once and exit")
    watch.add_argument("--alias", help="audit the version this alias points to")
    watch.add_argument("--json", action="store_true", help=JSON_HELP)
    _retry_option(watch)
    watch.set_defaults(func=watch_command)


# ------------------------------------------------------------------------------ printing


def _retry_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--retry-failed", action="store_true",
        help="audit again the versions whose audit failed before under this configuration "
             "(tag certgate.audit.failure; without this they are skipped until the tag is "
             "removed or the configuration changes)")


def _interval(bounds: tuple[float, float]) -> str:
    return f"[{bounds[0]:.6g}, {bounds[1]:.6g}]"


def print_audit(outcome: AuditOutcome, config: CertgateConfig) -> None:
    from pipeline_steps.fidelity_step import fidelity_line

    target = (f"models:/{outcome.model_name}/{outcome.model_version}" if outcome.model_name
              else outcome.model_uri)
    if outcome.reused:
        print(f"audit {target}: already audited with this configuration in run "
              f"{outcome.run_id} (use --force to audit again)")
    elif outcome.recording_error:
        print(f"audit {target}: finished ({outcome.elapsed_s:.1f} s), not recorded in the "
              "registry (its certificates below are not trusted by the gate)")
    else:
        print(f"audit {target}: run {outcome.run_id} ({outcome.elapsed_s:.1f} s)")
    if outcome.took_over:
        print(f"  {outcome.took_over}")
    for settings in config.audits:
        certificate = outcome.certificates.get(settings.name)
        if certificate is None:
            print(f"  {settings.name}: no certificate")
            continue
        requirement = settings.requirement
        interval = certificate.bounds[requirement.quantity]
        print(f"  {settings.name}: {certificate.verdict}, certified {requirement.label} ∈ "
              f"{_interval(interval)} (requirement {requirement.describe()}, "
              f"{certificate.cost.get('elapsed_s', 0.0):.1f} s)")
        line = fidelity_line(certificate)
        if line:
            print(f"    {line}")
    if outcome.report_uri:
        print(f"  report: {outcome.report_uri}")
    if outcome.report_path:
        print(f"  report (local copy): {outcome.report_path}")
    if outcome.report_error:
        print(f"  report (local copy): not written: {outcome.report_error}")
    for name, path in outcome.local_certificates.items():
        print(f"  {name}: certificate (local file, not in the registry): {path}")


def keep_unrecorded(error: AuditNotRecorded, config: CertgateConfig, as_json: bool,
                    envelope: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Print the results of audits the registry failed to record (the error follows on
    stderr) and, with ``--json``, hand over ``envelope`` of their summary with the error: the
    bounds reach the output whatever the registry did."""
    from pipeline_steps.audit import outcome_summary

    print_audit(error.outcome, config)
    if as_json:
        emit_json({**envelope(outcome_summary(error.outcome, config)), "error": str(error),
                   "exit_code": EXIT_ERROR})


def print_gate(decision: GateDecision, config: CertgateConfig) -> None:
    print(f"gate: {decision.outcome}")
    for group, reasons in decision.reasons_by_group().items():
        if reasons:
            print(f"  {group}:")
            for reason in reasons:
                print(f"    {reason}")
    if decision.mlflow_validation is not None:
        print(f"  mlflow.validate_evaluation_results: {decision.mlflow_validation}")
    alias = config.gate.promote_alias
    if decision.promoted_alias:
        print(f"  alias {decision.promoted_alias!r} -> models:/{decision.model_name}/"
              f"{decision.model_version}")
    elif decision.promotion_kept_on is not None:
        print(f"  alias {alias!r} stays on models:/{decision.model_name}/"
              f"{decision.promotion_kept_on} (a newer version whose gate passed)")
    elif alias and decision.model_name is not None:
        print(f"  alias {alias!r} not moved")
    for withdrawn in decision.withdrawn_aliases:
        print(f"  alias {withdrawn} (the gate failed; no other version was given it)")


def gate_summary(decision: GateDecision) -> dict[str, Any]:
    from verifier.certificate import to_jsonable

    return to_jsonable({
        "outcome": decision.outcome,
        "exit_code": exit_for(decision.outcome),
        "reasons": decision.reasons_by_group(),
        "promoted_alias": decision.promoted_alias,
        "promotion_kept_on": decision.promotion_kept_on,
        "withdrawn_aliases": decision.withdrawn_aliases,
        "mlflow_validation": decision.mlflow_validation,
        "checks": {check.audit: {"status": check.status, "interval": check.interval}
                   for check in decision.checks},
    })


# ------------------------------------------------------------------------------ commands


def _registry(config: CertgateConfig) -> Registry:
    from registry_hooks.connection import connect

    return connect(config.tracking.tracking_uri, config.tracking.registry_uri)


@outlives_its_reader
def audit_command(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    from pipeline_steps.audit import AuditNotRecorded, audit_model, outcome_summary
    from registry_hooks.connection import registry_errors

    quiet_downloads()
    with registry_errors("certgate audit"):
        try:
            outcome = audit_model(config, model_uri=args.model_uri, force=args.force,
                                  progress=not args.no_progress, report_dir=args.report_dir)
        except AuditNotRecorded as unrecorded:
            keep_unrecorded(unrecorded, config, args.json, lambda summary: summary)
            raise
    print_audit(outcome, config)
    if args.json:
        emit_json(outcome_summary(outcome, config))
    return 0


@outlives_its_reader
def gate_command(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    from pipeline_steps.gate import run_gate
    from registry_hooks.connection import registry_errors

    quiet_downloads()
    with registry_errors("certgate gate"):
        decision = run_gate(config, model_uri=args.model_uri)
    print_gate(decision, config)
    if args.json:
        emit_json(gate_summary(decision))
    return exit_for(decision.outcome)


def audit_and_gate(config: CertgateConfig, registry: Registry, model_uri: str | None, *,
                   force: bool, progress: bool, report_dir: Path | None,
                   guard: StopGuard | None = None) -> tuple[AuditOutcome, GateDecision]:
    """The audit step, then the gate on its certificates (tags and alias for registered
    versions); ``guard`` stops the audit at its safe points (``hooks``)."""
    from pipeline_steps.audit import audit_model
    from pipeline_steps.gate import gate_certificates

    outcome = audit_model(config, model_uri=model_uri, force=force, progress=progress,
                        registry=registry, report_dir=report_dir, guard=guard)
    in_registry = outcome.model_name is not None
    decision = gate_certificates(config, outcome.certificates,
                                 registry if in_registry else None,
                                 outcome.model_name, outcome.model_version)
    return outcome, decision


def deploy_step(config: CertgateConfig, registry: Registry, decision: GateDecision) -> str:
    """Run the deploy step after a passed gate: ``pipeline_steps.deploy.run_deploy(config,
    registry=…, model_name=…, model_version=…)``, whose result is printed."""
    deploy = importlib.import_module(DEPLOY_MODULE)
    return str(deploy.run_deploy(config, registry=registry, model_name=decision.model_name,
                                 model_version=decision.model_version))


def deploy_due(config: CertgateConfig, decision: GateDecision) -> bool:
    """Whether the configured deploy runs: after a passed gate that did not leave the
    promotion on a newer passing version (its deploy alias stays with it too)."""
    return (config.deploy is not None and decision.outcome == "passed"
            and decision.promotion_kept_on is None)


def say_held_back_deploy(config: CertgateConfig, decision: GateDecision) -> None:
    """Print why a configured deploy was not done (silence would read as a deploy that was
    forgotten)."""
    if config.deploy is None or deploy_due(config, decision):
        return
    if decision.outcome != "passed":
        print(f"deploy: not done: the gate {decision.outcome} (a variant is deployed after a "
              "passed gate)")
    else:
        print(f"deploy: not done: models:/{decision.model_name}/{decision.promotion_kept_on}, "
              "a newer version whose gate passed, keeps the promotion and its deployment")


@outlives_its_reader
def run_command(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    from pipeline_steps.audit import AuditNotRecorded, outcome_summary
    from registry_hooks.connection import registry_errors

    require_deploy_step(config)
    quiet_downloads()
    with registry_errors("certgate run"):
        registry = _registry(config)
        try:
            outcome, decision = audit_and_gate(config, registry, args.model_uri,
                                               force=args.force, progress=not args.no_progress,
                                               report_dir=args.report_dir)
        except AuditNotRecorded as unrecorded:
            keep_unrecorded(unrecorded, config, args.json,
                            lambda summary: {"audit": summary, "gate": None, "deploy": None})
            raise
        print_audit(outcome, config)
        print_gate(decision, config)
        deployed = None
        if deploy_due(config, decision):
            try:
                deployed = deploy_step(config, registry, decision)
            except CertgateInputError as error:
                if args.json:  # the audit and the gate happened: their results are kept
                    emit_json({"audit": outcome_summary(outcome, config),
                               "gate": gate_summary(decision), "deploy": None,
                               "error": f"deploy: {error}", "exit_code": EXIT_ERROR})
                raise
            print(f"deploy: {deployed}")
        say_held_back_deploy(config, decision)
    if args.json:
        emit_json({"audit": outcome_summary(outcome, config),
                   "gate": gate_summary(decision), "deploy": deployed})
    return exit_for(decision.outcome)


def _event_callback(config: CertgateConfig, registry: Registry, guard: StopGuard,
                    reported: set[str], retry_failed: bool) -> Callable[[RegistryEvent], str]:
    """Audit and gate the event's version, then deploy it after a passed gate when the
    configuration has a ``deploy`` section (as ``certgate run``); returns the gate's outcome,
    ``"skipped"`` when another process holds the version's audit (its live lease is never
    doubled), or ``"failed_before"`` when its audit failed before on the same model and
    configuration (:mod:`registry_hooks.failures`; nothing is downloaded; ``retry_failed``
    ignores the records written before this callback existed). An audit that cannot run on
    the version's inputs (:class:`CertgateInputError`, not a registry error nor an
    unreachable executor, both of which may pass) is recorded so, then raised. The tag text
    of every record met or written goes into ``reported`` (the due check's memory). A
    deploy that fails raises (an error of the watch) naming ``certgate run``, which deploys
    the version without auditing it again."""
    from registry_hooks.claims import AuditInProgressError
    from registry_hooks.connection import RegistryError
    from registry_hooks.failures import record_failure, recorded_failure, recorder
    from registry_hooks.tags import FAILURE_TAG, model_version

    fingerprint = config.audit_fingerprint()
    me = recorder()

    def handle(event: RegistryEvent) -> str:
        print(f"event {event.kind}: {event.model_uri}", flush=True)
        version = model_version(registry, event.name, event.version)
        failure = recorded_failure(version, fingerprint, retry_for=me if retry_failed else None)
        if failure is not None:
            reported.add(version.tags[FAILURE_TAG])
            print(f"skipped: {event.model_uri} failed before with this model and configuration "
                  f"({failure.at}: {failure.error}); remove its tag {FAILURE_TAG} or pass "
                  "--retry-failed to audit it again", flush=True)
            return "failed_before"
        try:
            outcome, decision = audit_and_gate(config, registry, event.model_uri, force=False,
                                               progress=False, report_dir=None, guard=guard)
        except AuditInProgressError as busy:
            print(f"skipped: {busy}", flush=True)
            return "skipped"
        except (RegistryError, ExecutorUnreachableError):
            raise
        except CertgateInputError as error:
            try:
                reported.add(record_failure(registry, version, fingerprint, error, me).to_tag())
            except RegistryError as lost:  # the audit's own error is the one to report
                print(f"certgate: {event.model_uri}: the failure below is not recorded ({lost})",
                      file=sys.stderr, flush=True)
            raise
        print_audit(outcome, config)
        print_gate(decision, config)
        if deploy_due(config, decision):
            try:
                print(f"deploy: {deploy_step(config, registry, decision)}")
            except CertgateInputError as error:
                raise CertgateInputError(
                    f"deploy: {error} (the audit and the gate are recorded; `certgate run "
                    f"--model-uri {event.model_uri}` deploys once this is fixed)") from error
        say_held_back_deploy(config, decision)
        sys.stdout.flush()
        return decision.outcome

    return handle


def configured_model_names(config: CertgateConfig) -> list[str] | None:
    """The registered model the configuration's ``model.uri`` names, or ``None`` when it names
    a file or a run."""
    from registry_hooks.uris import parse_model_uri

    reference = parse_model_uri(config.model.uri) if config.model.uri.startswith("models:/") \
        else None
    return [reference.name] if reference is not None and reference.name else None


def _dispatcher(config: CertgateConfig, registry: Registry, alias: str | None,
                background: bool, retry_failed: bool = False) -> Dispatcher:
    """Events of the configured registered model only: a configuration is written for one
    model (its inputs, its thresholds), so another model's events are ignored. A failed audit
    reported once (:func:`_event_callback`) is not due again in this process."""
    from registry_hooks.dispatch import Dispatcher, registry_due_check
    from registry_hooks.stopping import StopGuard

    guard = StopGuard()
    reported: set[str] = set()
    due = registry_due_check(registry, config.audit_fingerprint(), reported)
    return Dispatcher(_event_callback(config, registry, guard, reported, retry_failed), due,
                      alias=alias, background=background,
                      model_names=configured_model_names(config), guard=guard)


@outlives_its_reader
def serve_command(args: argparse.Namespace) -> int:
    if not args.secret:
        raise CertgateInputError(f"a webhook secret is required: --secret or ${SECRET_ENV}")
    config = load_config(args.config)
    require_deploy_step(config)
    from pipeline_steps.cli.stop_signals import stop_on_signals
    from registry_hooks.connection import registry_errors
    from registry_hooks.receiver import WebhookReceiver, tls_context
    from registry_hooks.stopping import AuditInterrupted

    if args.keyfile and not args.certfile:
        raise CertgateInputError("--keyfile needs --certfile (the certificate it belongs to)")
    if args.certfile:
        try:
            tls_context(args.certfile, args.keyfile)
        except ValueError as error:
            raise CertgateInputError(f"--certfile/--keyfile: {error}") from error
    if configured_model_names(config) is None:
        raise CertgateInputError(
            f"model.uri {config.model.uri!r}: hooks serve acts on registry events of one "
            "registered model; give its models:/NAME@ALIAS or models:/NAME/VERSION URI"
        )
    quiet_downloads()
    with registry_errors("certgate hooks serve"):
        registry = _registry(config)
        dispatcher = _dispatcher(config, registry, args.alias, background=True,
                                 retry_failed=args.retry_failed)
        receiver = WebhookReceiver(dispatcher, args.secret, host=args.host, port=args.port,
                                   path=args.path, certfile=args.certfile,
                                   keyfile=args.keyfile)
        trigger = f"alias {args.alias!r} set" if args.alias else "model_version.created"
        print(f"certgate hooks: listening on {receiver.url} (acting on {trigger})", flush=True)
        stop = threading.Event()
        poller = _poller(config, registry, dispatcher, args.poll_interval, stop)
        with stop_on_signals(dispatcher.guard, audits_here=False):
            try:
                receiver.serve_forever()
            except AuditInterrupted as interrupt:
                stop_serving(registry, dispatcher, str(interrupt))
            finally:
                stop.set()
                receiver.stop()
                if poller is not None:
                    poller.join(timeout=POLLER_JOIN_S)
        if dispatcher.running is not None:
            exit_now(EXIT_OK)
    return 0


POLLER_JOIN_S = 5.0
"""How long a stopping ``hooks serve`` lets a poll in progress end (its registry reads; it
offers nothing once the stop is asked)."""


def stop_serving(registry: Registry, dispatcher: Dispatcher, reason: str) -> None:
    """The stop of ``hooks serve`` (:mod:`registry_hooks.stopping`): no new event, the queued
    ones dropped, a claim or commit being written waited for, the claim in flight handed
    back; stderr says what was handed back."""
    from pipeline_steps.audit import give_back
    from registry_hooks.claims import left_running
    from registry_hooks.connection import RegistryError

    started = time.monotonic()
    in_flight = dispatcher.stop(reason)
    if in_flight is not None:
        claim = in_flight.claim
        try:
            give_back(registry, claim, in_flight.run_id, reason, dispatcher.guard)
        except RegistryError as lost:
            print(f"certgate hooks: {lost}; {left_running(claim.name, claim.version, claim.lease)}",
                  file=sys.stderr, flush=True)
    say_handed_back(dispatcher.guard.handed_back, time.monotonic() - started)


def say_handed_back(versions: list[str], elapsed_s: float) -> None:
    """One stderr line: the versions whose interrupted audit was handed back, or none."""
    handed = (f"handed back {', '.join(versions)} (audit interrupted before its results were "
              "written: status as before the claim, lease released, certgate.audit.interrupted "
              "set; the next hooks watch/serve or certgate run audits it)"
              if versions else "no audit was in flight to hand back")
    print(f"certgate hooks: stopped in {elapsed_s:.1f} s; {handed}", file=sys.stderr,
          flush=True)


def exit_now(code: int) -> None:
    """End the process without waiting for an audit's thread still inside an engine (it writes
    nothing more; :mod:`registry_hooks.stopping`): outputs flushed, pool workers this process
    started terminated."""
    for child in multiprocessing.active_children():
        child.terminate()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _poller(config: CertgateConfig, registry: Registry, dispatcher: Dispatcher,
            interval_s: float, stop: threading.Event) -> threading.Thread | None:
    """``hooks serve --poll-interval``: the watcher's polls on a background thread, offering
    their events to the receiver's dispatcher (``None`` when ``interval_s`` is 0)."""
    from registry_hooks.watcher import watch

    if interval_s <= 0:
        return None
    poller = threading.Thread(
        target=watch, args=(registry, dispatcher, interval_s, configured_model_names(config)),
        kwargs={"stop": stop, "config_hash": config.audit_fingerprint()},
        name="certgate-poll", daemon=True)
    poller.start()
    return poller


@outlives_its_reader
def watch_command(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    require_deploy_step(config)
    from pipeline_steps.cli.stop_signals import stop_on_signals
    from registry_hooks.connection import registry_errors
    from registry_hooks.watcher import WatchResult, watch

    quiet_downloads()
    names = configured_model_names(config)
    result = WatchResult()
    with registry_errors("certgate hooks watch"):
        registry = _registry(config)
        dispatcher = _dispatcher(config, registry, args.alias, background=False,
                                 retry_failed=args.retry_failed)
        started = time.monotonic()
        with stop_on_signals(dispatcher.guard, audits_here=True), \
                contextlib.suppress(KeyboardInterrupt):
            watch(registry, dispatcher, args.interval, names, once=args.once,
                  config_hash=config.audit_fingerprint(), result=result)
        if dispatcher.stopping:
            say_handed_back(dispatcher.guard.handed_back, time.monotonic() - started)
    counts = {**watch_counts(dispatcher), "poll_errors": len(result.poll_errors)}
    print(f"certgate hooks: {counts['handled']} version(s) handled: {counts['passed']} passed, "
          f"{counts['warned']} warned, {counts['gate_failed']} failed the gate; "
          f"{counts['errors']} error(s), {counts['skipped']} skipped (audited elsewhere), "
          f"{counts['failed_before']} skipped (failed before), "
          f"{counts['poll_errors']} failed poll(s)")
    code = watch_exit_code(counts)
    if args.json:
        emit_json({**counts, "exit_code": code})
    return code


def watch_counts(dispatcher: Dispatcher) -> dict[str, int]:
    """What a watch did: ``handled`` (audited and gated) = ``passed`` + ``warned`` +
    ``gate_failed``; ``errors`` (the audit or gate could not run; the version is due again,
    unless the audit could not run on its inputs: then it is recorded as failed); ``skipped``
    (another process held the version's audit); ``failed_before`` (its audit failed before on
    the same model and configuration: not downloaded); ``interrupted`` (a stop handed the
    version back)."""
    outcomes = dispatcher.outcomes
    counts = {key: outcomes.count(outcome) for key, outcome in
              (("passed", "passed"), ("warned", "warned"), ("gate_failed", "failed"),
               ("skipped", "skipped"), ("failed_before", "failed_before"))}
    handled = counts["passed"] + counts["warned"] + counts["gate_failed"]
    return {"handled": handled, **counts, "errors": len(dispatcher.failed),
            "interrupted": len(dispatcher.interrupted)}


def watch_exit_code(counts: dict[str, int]) -> int:
    """2 when an audit, a gate or a poll could not run, else 1 when a gate failed, else 0: the
    codes of ``certgate gate`` (:func:`exit_for`) for the worst version, errors first."""
    if counts["errors"] or counts.get("poll_errors"):
        return EXIT_ERROR
    return exit_for("failed") if counts["gate_failed"] else EXIT_OK
