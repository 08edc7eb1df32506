"""Claiming a model version's audit in the registry: at most one live audit per version.

MLflow's tags have no compare-and-set, so a claim is written and then read back:
:func:`claim_version` refuses a version whose lease is live (:mod:`registry_hooks.lease`),
writes its own lease and ``certgate.audit.status=running``, waits :data:`SETTLE_S` and reads
the lease again. Two processes that claim at the same time both write; the later write wins,
and the earlier writer reads the other's lease back and gives up
(:class:`AuditInProgressError`). A claim is lost only to a writer whose read-then-write took
longer than :data:`SETTLE_S` (one round trip each); then both audit, and the later one's
tags stand — two complete audits of one version under one configuration, never a wrong tag.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from registry_hooks.connection import Registry, RegistryError, registry_errors
from registry_hooks.lease import LEASE_TAG, Lease, lease_of, lease_state, new_lease
from registry_hooks.tags import (
    INTERRUPTED_TAG,
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


def claim_version(registry: Registry, name: str, version: str, budget_s: float | None, *,
                  force: bool = False, settle_s: float = SETTLE_S) -> Claim:
    """Claim the audit of ``models:/name/version`` for ``budget_s`` seconds (plus the lease's
    grace; ``None``: no time limit).

    Raises:
        AuditInProgressError: another process holds a live lease (unless ``force``), or
            claimed the version in the same moment and won.
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
    lease = new_lease(budget_s)
    set_version_tags(registry, name, version, {LEASE_TAG: lease.to_tag(),
                                               STATUS_TAG: STATUS_RUNNING})
    time.sleep(settle_s)
    try:
        winner = lease_of(version_tags(registry, name, version))
    except RegistryError as lost:
        raise type(lost)(f"{lost}; {left_running(name, version, lease)}") from lost
    if winner != lease:
        other = winner.describe() if winner is not None else "by another process"
        raise AuditInProgressError(
            f"models:/{name}/{version} was claimed {other} at the same time; that audit goes on"
        )
    return Claim(name, version, lease, previous, taken_over, forced=state == "live")


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


def end_claim(registry: Registry, claim: Claim) -> None:
    """Remove the claim's lease tag once the audit's own tags are written (a lease another
    process took over meanwhile is left to it)."""
    if holds(registry, claim):
        with registry_errors(f"cannot remove tag {LEASE_TAG} of "
                             f"models:/{claim.name}/{claim.version}"):
            registry.client.delete_model_version_tag(claim.name, claim.version, LEASE_TAG)


def abandon_claim(registry: Registry, claim: Claim) -> None:
    """Undo a claim whose audit failed: the status tag as it was before (none, when it was an
    abandoned ``running``: the version is due again) and no lease. A lease another process
    took over meanwhile is left to it."""
    if not holds(registry, claim):
        return
    previous = None if claim.previous_status == STATUS_RUNNING else claim.previous_status
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
