"""Claiming a model version's audit in the registry: at most one live audit per version, and
at most one audit recorded per claim race.

MLflow's tags have no compare-and-set, so a claim is written and then read back:
:func:`claim_version` refuses a version whose lease is live (:mod:`registry_hooks.lease`),
writes its own lease and ``certgate.audit.status=running``, waits :data:`SETTLE_S` and reads
the lease again. Two processes that claim at the same time both write; the later write wins,
and the earlier writer reads the other's lease back and gives up
(:class:`AuditInProgressError`). A writer whose read-then-write took longer than
:data:`SETTLE_S` (a loaded machine, a slow round trip) also wins, so both audit.

That is why a claim is checked again before the audit's results are recorded
(:func:`lost_to`): a claim whose lease another process has written since, or whose version
another audit recorded since it was claimed (the run id tag changed), discards its results
(:class:`ClaimLostError`) and leaves the version to that other audit. Only one lease stands
at a time, so of two overlapping claims at most one passes the check; two recordings would
need the other claim to be written, settle a second, audit and be checked, all between one
audit's check and its tags' write (one round trip).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from registry_hooks.connection import Registry, RegistryError, registry_errors
from registry_hooks.lease import LEASE_TAG, Lease, lease_of, lease_state, new_lease
from registry_hooks.tags import (
    INTERRUPTED_TAG,
    RUN_ID_TAG,
    STATUS_AUDITED,
    STATUS_RUNNING,
    STATUS_TAG,
    restore_version_tag,
    set_version_tags,
    version_tags,
)

SETTLE_S = 1.0
"""How long a claim waits before reading its lease back (module docstring)."""


class AuditInProgressError(RegistryError):
    """Another process holds a live lease on the version's audit; the message names it."""


class ClaimLostError(AuditInProgressError):
    """The audit's claim was lost while it ran (:func:`lost_to`): its results are discarded,
    and the message says to which audit the version was left and what became of the run."""


@dataclass(frozen=True)
class Claim:
    """A claimed audit: the lease written, the status tag it replaced, and the audit it took
    over (``taken_over``: the abandoned lease, a live one when ``forced``, or ``"unleased"``
    for a bare ``running`` tag)."""

    name: str
    version: str
    lease: Lease
    previous_status: str | None
    taken_over: Lease | str | None
    forced: bool = False
    recorded_run: str | None = None
    """The audit run the version's tags named (:data:`RUN_ID_TAG`) when it was claimed: a
    different one later means another audit recorded the version meanwhile."""

    def takeover_text(self) -> str | None:
        """What was taken over, for people (``None``: nothing)."""
        if self.taken_over is None:
            return None
        if isinstance(self.taken_over, Lease):
            if self.forced:
                return (f"audited although another audit held a live lease "
                        f"({self.taken_over.describe()}; --force)")
            return f"took over an abandoned audit ({self.taken_over.describe()}, expired)"
        return ("took over a 'running' tag without a lease (written before leases; its audit "
                "was taken to have ended)")


@dataclass(frozen=True)
class ClaimPlan:
    """What a claim read before writing its lease (:func:`plan_claim`): the version's status
    tag, the audit it takes over (:attr:`Claim.taken_over`), whether that one's lease was live
    (``forced``) and the recorded run (:attr:`Claim.recorded_run`)."""

    name: str
    version: str
    previous_status: str | None
    taken_over: Lease | str | None
    forced: bool
    recorded_run: str | None


def plan_claim(registry: Registry, name: str, version: str, *,
               force: bool = False) -> ClaimPlan:
    """Read the version's tags and decide whether it may be claimed (the first half of
    :func:`claim_version`; nothing is written).

    Raises:
        AuditInProgressError: another process holds a live lease (unless ``force``).
    """
    tags = version_tags(registry, name, version)
    previous = tags.get(STATUS_TAG)
    held = lease_of(tags)
    taken_over: Lease | str | None = None
    state = lease_state(tags) if previous == STATUS_RUNNING else None
    if state is not None:
        if state == "live" and not force:
            assert held is not None
            raise AuditInProgressError(
                f"models:/{name}/{version} is being audited {held.describe()}; it is audited "
                "again once that lease expires (or now with `certgate run --force`)"
            )
        taken_over = held if held is not None else "unleased"
    return ClaimPlan(name, version, previous, taken_over, state == "live",
                     tags.get(RUN_ID_TAG))


def write_claim(registry: Registry, plan: ClaimPlan, budget_s: float | None, *,
                settle_s: float = SETTLE_S) -> Claim:
    """Write the claim ``plan`` decided on for ``budget_s`` seconds (plus the lease's grace;
    ``None``: no time limit), wait ``settle_s`` and read the lease back (the second half of
    :func:`claim_version`). A write that fails is judged by the read-back too: two claims
    writing one tag at once can collide in the store (MLflow's SQL store inserts a new tag
    key, and the second insert fails on its unique key), so another process's lease read
    back is a claim lost, this claim's own lease read back has its tags written again, and
    no lease at all re-raises the write's error.

    Raises:
        AuditInProgressError: another process's lease was read back (it claimed the version
            in the same moment and won).
        RegistryError: the claim could not be written, or its lease not read back.
    """
    name, version = plan.name, plan.version
    lease = new_lease(budget_s)
    claim_tags = {LEASE_TAG: lease.to_tag(), STATUS_TAG: STATUS_RUNNING}
    try:
        set_version_tags(registry, name, version, claim_tags)
        collision = None
    except RegistryError as failed:
        collision = failed
    time.sleep(settle_s)
    try:
        winner = lease_of(version_tags(registry, name, version))
    except RegistryError as lost:
        raise type(lost)(f"{lost}; {left_running(name, version, lease)}") from lost
    if collision is not None and winner is None:
        raise collision
    if winner != lease:
        other = winner.describe() if winner is not None else "by another process"
        raise AuditInProgressError(
            f"models:/{name}/{version} was claimed {other} at the same time; that audit goes on"
        ) from collision
    if collision is not None:
        set_version_tags(registry, name, version, claim_tags)
    return Claim(name, version, lease, plan.previous_status, plan.taken_over,
                 forced=plan.forced, recorded_run=plan.recorded_run)


def claim_version(registry: Registry, name: str, version: str, budget_s: float | None, *,
                  force: bool = False, settle_s: float = SETTLE_S) -> Claim:
    """Claim the audit of ``models:/name/version`` for ``budget_s`` seconds (plus the lease's
    grace; ``None``: no time limit): :func:`plan_claim`, then :func:`write_claim` at once.

    Raises:
        AuditInProgressError: another process holds a live lease (unless ``force``), or
            claimed the version in the same moment and won.
    """
    return write_claim(registry, plan_claim(registry, name, version, force=force), budget_s,
                       settle_s=settle_s)


def left_running(name: str, version: str, lease: Lease) -> str:
    """What a claim the registry could not undo leaves behind, and what happens next."""
    then = ("it has no time limit, so `certgate hooks` skip it until the tag is removed"
            if lease.expires is None else
            f"`certgate hooks` audit it again once its lease ({LEASE_TAG}) expires")
    return (f"the tag {STATUS_TAG} of models:/{name}/{version} could not be reset and still "
            f"says {STATUS_RUNNING!r}; `certgate run` audits the version again, {then}")


def holds(registry: Registry, claim: Claim) -> bool:
    """Whether the version's lease is still this claim's (nobody took it over)."""
    return lease_of(version_tags(registry, claim.name, claim.version)) == claim.lease


def lost_to(registry: Registry, claim: Claim) -> str | None:
    """``None`` while the claim may record its audit: the version's lease is still this
    claim's and no other audit was recorded since it was claimed; otherwise what happened,
    for people (``"was claimed by … while this audit ran"``, or ``"was recorded by another
    audit (run …) while this one ran"``).

    Raises:
        RegistryError: the version could not be read (the message says what for).
    """
    try:
        tags = version_tags(registry, claim.name, claim.version)
    except RegistryError as error:
        raise type(error)(f"cannot check that this audit's claim still holds: {error}") from error
    lease = lease_of(tags)
    if lease != claim.lease:
        if lease is None:
            return "had its lease removed by another process while this audit ran"
        return f"was claimed {lease.describe()} while this audit ran"
    recorded = tags.get(RUN_ID_TAG)
    if recorded != claim.recorded_run:
        return f"was recorded by another audit (run {recorded}) while this one ran"
    return None


def end_claim(registry: Registry, claim: Claim) -> None:
    """Remove the claim's lease tag once the audit's own tags are written (a lease another
    process took over meanwhile is left to it)."""
    if holds(registry, claim):
        with registry_errors(f"cannot remove tag {LEASE_TAG} of "
                             f"models:/{claim.name}/{claim.version}"):
            registry.client.delete_model_version_tag(claim.name, claim.version, LEASE_TAG)


def abandon_claim(registry: Registry, claim: Claim) -> None:
    """Undo a claim whose audit failed or lost (:func:`lost_to`): the status tag as it was
    before (none, when it was an abandoned ``running``: the version is due again; ``audited``
    when another audit recorded the version meanwhile: its record stands) and no lease. A
    lease another process took over meanwhile is left to it."""
    tags = version_tags(registry, claim.name, claim.version)
    if lease_of(tags) != claim.lease:
        return
    previous = None if claim.previous_status == STATUS_RUNNING else claim.previous_status
    if tags.get(RUN_ID_TAG) != claim.recorded_run:
        previous = STATUS_AUDITED
    restore_version_tag(registry, claim.name, claim.version, STATUS_TAG, previous)
    restore_version_tag(registry, claim.name, claim.version, LEASE_TAG, None)


def hand_back(registry: Registry, claim: Claim, note: str) -> bool:
    """Give back the claim of an audit stopped before its results were written: ``note``
    (who stopped it, when, why) on ``certgate.audit.interrupted``, then the status and lease
    as :func:`abandon_claim` leaves them, so the version is due again at once. Returns whether
    the claim was still this process's to give (a lease taken over meanwhile is left)."""
    if not holds(registry, claim):
        return False
    set_version_tags(registry, claim.name, claim.version, {INTERRUPTED_TAG: note})
    abandon_claim(registry, claim)
    return True
