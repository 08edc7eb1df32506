"""The gate: decide from certificates and thresholds whether a model version is promoted.

Only a proven pass passes. For each configured audit the gate reads the certified interval of
the audited quantity and the requirement (e.g. ``ratio > 0.8``): the interval entirely on the
passing side is a *proven pass*, entirely on the failing side a *proven fail*, straddling the
threshold *undecided*; a missing certificate, or one whose verdict contradicts its own
interval for the same threshold, fails. The decision is ``passed`` when every audit is a
proven pass, ``failed`` when any audit fails (or is undecided under ``undecided: fail``), and
``warned`` when the only problems are undecided audits under ``undecided: warn``.
A certificate whose population model the data contradicts (``population_fidelity:
contradicted``, :mod:`verifier.audits.fidelity`) is not a pass whatever it proved: under
``population_contradicted: fail`` (the default) it fails, under ``warn`` it warns. A proven
pass whose population the check could not test (``population_fidelity: unchecked``: no data
reached, the table the population was fitted from changed since the fit, or no empirical
check for the audit kind) passes under ``population_unchecked: pass`` (the default), warns
under ``warn`` and fails under ``fail``.

Applying a decision removes the result tags (``certgate.<audit>.*``) of audits the
configuration does not list, writes the model-version tags ``certgate.gate`` and
``certgate.gate.reasons``, and moves the promotion alias on ``passed`` only. Exit codes: 0
passed or warned, 1 failed (2, an error, comes from the CLI).

A ``failed`` decision withdraws what earlier passes granted (:func:`withdraw_aliases`): the
promotion alias is removed when it points at this version, and the deploy alias when it points
at a self-correcting variant of this version. Neither is moved to another version: which
version should serve instead is a person's decision. What was removed is recorded in
``GateDecision.withdrawn_aliases`` (printed by the CLI) and the version's
``certgate.gate.withdrawn_aliases`` tag.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from configs.schema import AuditSettings, CertgateConfig, GatePolicy, Requirement
from registry_hooks.audit_runs import load_certificates, run_is_active, validate_in_mlflow
from registry_hooks.connection import Registry, RegistryError
from registry_hooks.lease import lease_of
from registry_hooks.tags import (
    CONFIG_HASH_TAG,
    GATE_REASONS_TAG,
    GATE_TAG,
    RUN_ID_TAG,
    SOURCE_MODEL_TAG,
    SOURCE_VERSION_TAG,
    STATUS_AUDITED,
    STATUS_RUNNING,
    STATUS_TAG,
    VARIANT_SELF_CORRECTING,
    VARIANT_TAG,
    WITHDRAWN_ALIASES_TAG,
    alias_version,
    move_alias,
    remove_alias,
    remove_result_tags_except,
    restore_version_tag,
    set_version_tags,
    version_tags,
)
from verifier.audits.requirement import exact_text
from verifier.certificate import Certificate

logger = logging.getLogger(__name__)
CheckStatus = Literal["proven_pass", "proven_fail", "undecided", "missing", "inconsistent",
                      "contradicted", "contradicted_warn", "unchecked", "unchecked_warn"]
Outcome = Literal["passed", "failed", "warned"]
CHECK_GROUPS: tuple[tuple[str, tuple[CheckStatus, ...]], ...] = (
    ("failing", ("proven_fail", "missing", "inconsistent", "contradicted", "unchecked")),
    ("warning", ("contradicted_warn", "unchecked_warn")),
    ("undecided", ("undecided",)),
    ("passing", ("proven_pass",)),
)
"""How the gate's reasons are shown, failing checks first: every output (command line,
``--json``, the ``certgate.gate.reasons`` tag, the report) groups them this way, so a passing
check is never listed as a reason for a failure."""


@dataclass(frozen=True)
class AuditCheck:
    """How one audit's certificate compares with its requirement."""

    audit: str
    requirement: Requirement
    status: CheckStatus
    interval: tuple[float, float] | None
    verdict: str | None
    reason: str


@dataclass
class GateDecision:
    """The gate's decision for one model version, and what it did about it."""

    outcome: Outcome
    checks: list[AuditCheck]
    model_name: str | None = None
    model_version: str | None = None
    promoted_alias: str | None = None
    promotion_kept_on: str | None = None
    """A passed version's promotion alias left on this newer version, whose own gate passed
    (:func:`apply_decision`); its deploy is held back too."""
    mlflow_validation: str | None = None
    reasons: list[str] = field(default_factory=list)
    withdrawn_aliases: list[str] = field(default_factory=list)
    """``"'alias' removed from models:/NAME/VERSION"`` for each alias a failed gate removed."""

    def reasons_by_group(self) -> dict[str, list[str]]:
        """The reasons of the checks in each group of :data:`CHECK_GROUPS` (every group, in
        that order; an empty list when no check falls in it)."""
        return {group: [check.reason for check in self.checks if check.status in statuses]
                for group, statuses in CHECK_GROUPS}

    def reasons_text(self) -> str:
        """One line, the non-empty groups separated by `` | ``: ``failing: b: proven to
        violate …; c: no certificate | passing: a: proven …``."""
        return " | ".join(f"{group}: " + "; ".join(reasons)
                          for group, reasons in self.reasons_by_group().items() if reasons)

    def summary(self) -> str:
        """One line: the outcome, then the reasons by group (:meth:`reasons_text`)."""
        return f"{self.outcome}: {self.reasons_text()}"


def check_certificate(audit: AuditSettings, certificate: Certificate | None) -> AuditCheck:
    """Compare one certificate with the audit's requirement (see the module docstring)."""
    requirement = audit.requirement
    if certificate is None:
        return AuditCheck(audit.name, requirement, "missing", None, None,
                          f"{audit.name}: no certificate")
    if requirement.quantity not in certificate.bounds:
        return AuditCheck(audit.name, requirement, "missing", None, certificate.verdict,
                          f"{audit.name}: the certificate has no bound on "
                          f"{requirement.quantity!r}")
    low, high = certificate.bounds[requirement.quantity]
    interval = (float(low), float(high))
    text = f"{requirement.label} ∈ {requirement.interval_text(*interval)}"
    if requirement.proven_pass(*interval):
        status: CheckStatus = "proven_pass"
        reason = f"{audit.name}: proven {requirement.describe()} ({text})"
    elif requirement.proven_fail(*interval):
        status = "proven_fail"
        reason = f"{audit.name}: proven to violate {requirement.describe()} ({text})"
    else:
        status = "undecided"
        undefined = certificate.details.get("undefined")
        reason = (f"{audit.name}: undecided, {undefined}" if undefined else
                  f"{audit.name}: undecided, {text} straddles "
                  f"{exact_text(requirement.threshold)}")
    recorded = certificate.details.get("threshold")
    same_threshold = isinstance(recorded, int | float) and float(recorded) == requirement.threshold
    contradicts = (
        (certificate.verdict == "satisfied" and status != "proven_pass")
        or (certificate.verdict == "violated" and status != "proven_fail")
    )
    if same_threshold and contradicts:
        return AuditCheck(audit.name, requirement, "inconsistent", interval, certificate.verdict,
                          f"{audit.name}: verdict {certificate.verdict!r} contradicts its "
                          f"interval {text}")
    return AuditCheck(audit.name, requirement, status, interval, certificate.verdict, reason)


def premise_check(check: AuditCheck, certificate: Certificate | None,
                  policy: GatePolicy) -> AuditCheck:
    """``check`` once the data's verdict on the certificate's population model is read.
    Under a contradicted population a pass becomes ``contradicted`` (policy ``fail``) or
    ``contradicted_warn`` (``warn``), an undecided interval becomes ``contradicted`` under
    ``fail`` (under ``warn`` the ``undecided`` policy still applies to it); every check
    names the contradiction. A proven check whose data rows' own estimate is on the other
    side of γ (``data_verdict``, within the rows' sampling error) keeps its status and says
    so in its reason. A proven pass whose population is ``unchecked`` becomes ``unchecked``
    under ``population_unchecked: fail``, ``unchecked_warn`` under ``warn`` (its reason
    naming the check's own reason), and stays a pass under ``pass``."""
    record = certificate.population_fidelity if certificate is not None else {}
    if record.get("status") == "unchecked":
        return _unchecked_check(check, record, policy)
    if record.get("status") != "contradicted":
        on_rows = record.get("data_verdict", {}).get("estimate")
        if check.status in ("proven_pass", "proven_fail") and certificate is not None \
                and on_rows not in (None, certificate.verdict):
            return replace(check, reason=f"{check.reason}; {record['reason']}")
        return check
    reason = f"{check.reason}; population contradicted by the data: {record['reason']}"
    status = check.status
    if status in ("proven_pass", "undecided") and policy.population_contradicted == "fail":
        status = "contradicted"
    elif status == "proven_pass":
        status = "contradicted_warn"
    return replace(check, status=status, reason=reason)


def _unchecked_check(check: AuditCheck, record: dict[str, Any],
                     policy: GatePolicy) -> AuditCheck:
    """``check`` under an ``unchecked`` population (:func:`premise_check`)."""
    if check.status != "proven_pass" or policy.population_unchecked == "pass":
        return check
    status: CheckStatus = "unchecked" if policy.population_unchecked == "fail" \
        else "unchecked_warn"
    reason = (f"{check.reason}; population not checked against data "
              f"(population_unchecked: {policy.population_unchecked}): {record['reason']}")
    return replace(check, status=status, reason=reason)


def decide(audits: list[AuditSettings], certificates: dict[str, Certificate],
           policy: GatePolicy) -> GateDecision:
    """The decision for these certificates under ``policy`` (no side effects)."""
    checks = [premise_check(check_certificate(audit, certificates.get(audit.name)),
                            certificates.get(audit.name), policy) for audit in audits]
    statuses = {check.status for check in checks}
    if statuses <= {"proven_pass"}:
        outcome: Outcome = "passed"
    elif statuses & {"proven_fail", "missing", "inconsistent", "contradicted",
                     "unchecked"} or (
            "undecided" in statuses and policy.undecided == "fail"):
        outcome = "failed"
    else:
        outcome = "warned"
    return GateDecision(outcome, checks, reasons=[check.reason for check in checks])


def mirror_in_mlflow(decision: GateDecision) -> str:
    """Run the decision's numbers through ``mlflow.validate_evaluation_results``
    (:func:`registry_hooks.audit_runs.validate_in_mlflow`).

    Each audit contributes its certified bound on the passing side (``<name>.<label>_lower``
    for ``>``/``>=`` requirements, ``_upper`` for ``<``/``<=``) and a ``<name>.proven_pass``
    flag (1 or 0) that must reach 1, so MLflow's non-strict comparison can never pass an
    unproven audit.
    Returns ``"passed"`` or ``"failed: <MLflow's message>"``.
    """
    metrics: dict[str, float] = {}
    thresholds: dict[str, tuple[float, bool]] = {}
    for check in decision.checks:
        requirement = check.requirement
        greater = requirement.greater_is_better
        side = "lower" if greater else "upper"
        bound_key = f"{check.audit}.{requirement.label}_{side}"
        flag_key = f"{check.audit}.proven_pass"
        if check.interval is not None:
            metrics[bound_key] = check.interval[0] if greater else check.interval[1]
            thresholds[bound_key] = (requirement.threshold, greater)
        metrics[flag_key] = 1.0 if check.status == "proven_pass" else 0.0
        thresholds[flag_key] = (1.0, True)
    return validate_in_mlflow(metrics, thresholds)


def apply_decision(registry: Registry, decision: GateDecision, policy: GatePolicy) -> None:
    """Tag the version with the decision; move ``policy.promote_alias`` only on ``passed``, and
    not away from a newer version whose gate passed (:attr:`GateDecision.promotion_kept_on`).
    An earlier gate's ``certgate.gate.withdrawn_aliases`` is removed: the tag says what the
    version's latest gate withdrew (:func:`withdraw_aliases`), so a later pass that gave the
    aliases back does not leave it saying they were removed."""
    name, version = decision.model_name, decision.model_version
    if name is None or version is None:
        raise RegistryError("a gate decision can only be applied to a registered model version")
    remove_result_tags_except(registry, name, version, [check.audit for check in decision.checks])
    if WITHDRAWN_ALIASES_TAG in version_tags(registry, name, version):
        restore_version_tag(registry, name, version, WITHDRAWN_ALIASES_TAG, None)
    set_version_tags(registry, name, version, {
        GATE_TAG: decision.outcome,
        GATE_REASONS_TAG: decision.reasons_text(),
    })
    if decision.outcome == "passed" and policy.promote_alias:
        newer = _newer_passed_holder(registry, name, version, policy.promote_alias)
        if newer is not None:
            decision.promotion_kept_on = newer
            return
        try:
            move_alias(registry, name, policy.promote_alias, version)
        except RegistryError as error:
            raise type(error)(
                f"the gate passed models:/{name}/{version} (recorded: {GATE_TAG}=passed) but "
                f"{error}; `certgate gate --config CONFIG --model-uri models:/{name}/{version}` "
                "moves the alias once the registry answers") from error
        decision.promoted_alias = policy.promote_alias


def _newer_passed_holder(registry: Registry, name: str, version: str,
                         alias: str) -> str | None:
    """The version ``alias`` points to when it is newer than ``version`` and its latest gate
    passed, else ``None``: a pass of an older version (a watcher reaching a version nobody
    audited, an old version audited again) never moves the promotion backwards; which
    version serves instead of a newer passing one is the user's to decide."""
    holder = alias_version(registry, name, alias)
    if holder is None or int(holder) <= int(version):
        return None
    return holder if version_tags(registry, name, holder).get(GATE_TAG) == "passed" else None


def withdraw_aliases(registry: Registry, decision: GateDecision,
                     config: CertgateConfig) -> list[str]:
    """After a ``failed`` decision, remove the promotion alias from this version and the
    deploy alias from this version's self-correcting variant, where they point there (module
    docstring); returns and records what was removed. Other decisions remove nothing."""
    name, version = decision.model_name, decision.model_version
    if decision.outcome != "failed" or name is None or version is None:
        return []
    held: list[tuple[str, str, str]] = []
    alias = config.gate.promote_alias
    if alias and alias_version(registry, name, alias) == version:
        held.append((name, alias, version))
    if config.deploy is not None:
        target = config.deploy.registered_model or name
        variant = alias_version(registry, target, config.deploy.alias)
        if variant is not None and _is_variant_of(version_tags(registry, target, variant),
                                                  name, version):
            held.append((target, config.deploy.alias, variant))
    withdrawn = []
    for model, alias, pointed in held:
        remove_alias(registry, model, alias)
        withdrawn.append(f"{alias!r} removed from models:/{model}/{pointed}")
        logger.info("gate failed for models:/%s/%s: alias %r removed from models:/%s/%s "
                    "(not moved to another version)", name, version, alias, model, pointed)
    if withdrawn:
        set_version_tags(registry, name, version, {WITHDRAWN_ALIASES_TAG: "; ".join(withdrawn)})
    decision.withdrawn_aliases = withdrawn
    return withdrawn


def _is_variant_of(tags: dict[str, str], name: str, version: str) -> bool:
    return (tags.get(VARIANT_TAG) == VARIANT_SELF_CORRECTING
            and tags.get(SOURCE_MODEL_TAG) == name and tags.get(SOURCE_VERSION_TAG) == version)


def audited_run(registry: Registry, name: str, version: str, fingerprint: str) -> str:
    """The run id of the version's completed audit for this configuration; raises
    :class:`RegistryError` when there is none, it used another configuration or its run was
    deleted."""
    tags = version_tags(registry, name, version)
    lease = lease_of(tags)
    if tags.get(STATUS_TAG) == STATUS_RUNNING and lease is not None and not lease.expired():
        raise RegistryError(
            f"models:/{name}/{version} is being audited {lease.describe()}; gate it once that "
            "audit is recorded (`certgate run` audits and gates in one go)"
        )
    if tags.get(STATUS_TAG) != STATUS_AUDITED or RUN_ID_TAG not in tags:
        raise RegistryError(
            f"models:/{name}/{version} has no completed certgate audit; run `certgate audit` first"
        )
    if tags.get(CONFIG_HASH_TAG) != fingerprint:
        raise RegistryError(
            f"models:/{name}/{version} was audited with a different audit configuration "
            f"(hash {tags.get(CONFIG_HASH_TAG)}, now {fingerprint}); run `certgate audit` again"
        )
    if not run_is_active(registry, tags[RUN_ID_TAG]):
        raise RegistryError(
            f"the audit run {tags[RUN_ID_TAG]} of models:/{name}/{version} was deleted; run "
            "`certgate audit` (or `certgate run`) again"
        )
    return tags[RUN_ID_TAG]


def gate_certificates(config: CertgateConfig, certificates: dict[str, Certificate],
                      registry: Registry | None, name: str | None,
                      version: str | None) -> GateDecision:
    """Decide, optionally mirror through MLflow, and apply the decision to the version."""
    decision = decide(list(config.audits), certificates, config.gate)
    decision.model_name, decision.model_version = name, version
    if config.gate.mlflow_validation:
        decision.mlflow_validation = mirror_in_mlflow(decision)
    if registry is not None and name is not None and version is not None:
        apply_decision(registry, decision, config.gate)
        withdraw_aliases(registry, decision, config)
    return decision


def run_gate(config: CertgateConfig, *, model_uri: str | None = None,
             registry: Registry | None = None) -> GateDecision:
    """The gate step alone: read the certificates of the version's recorded audit (same
    configuration fingerprint), decide, and apply the decision."""
    from registry_hooks.connection import connect
    from registry_hooks.uris import parse_model_uri, resolve_version

    uri = model_uri or config.model.uri
    registry = registry or connect(config.tracking.tracking_uri, config.tracking.registry_uri)
    reference = parse_model_uri(uri)
    if not reference.in_registry:
        raise RegistryError(
            f"the gate acts on registered model versions; {uri} is not one (use `certgate run` "
            "to audit and gate a local file in one go)"
        )
    version = resolve_version(registry, reference)
    name, number = version.name, str(version.version)
    run_id = audited_run(registry, name, number, config.audit_fingerprint())
    names = [settings.name for settings in config.audits]
    certificates = load_certificates(registry, run_id, names)
    return gate_certificates(config, certificates, registry, name, number)
