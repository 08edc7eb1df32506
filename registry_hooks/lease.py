"""The audit lease: who audits a model version, since when, and until when the claim holds.

An audit in progress tags its version ``certgate.audit.status=running`` and
``certgate.audit.lease`` (:data:`LEASE_TAG`), a JSON object ``{"owner", "started",
"expires"}``: the owner is ``host:pid:token`` (the token tells two claims of one process
apart), the times are UTC ISO-8601 seconds, and ``expires`` is the start plus the audit's
budget (the sum of its audits' ``timeout_s``) plus :data:`GRACE_S` for loading, the fidelity
check, logging the run and clock skew between hosts; ``null`` when an audit has no time limit.

A ``running`` version is in one of three :data:`LeaseState`\\ s: ``live`` (a lease not yet
expired: an audit is in progress, never doubled), ``abandoned`` (its lease expired: the audit
crashed or was killed, and the version is due again) or ``unleased`` (a bare ``running`` tag
written before leases existed, or a lease tag that cannot be read: nothing tells whether its
audit still runs, so event handlers leave it and say how to resume it). This module reads and
writes the tag's value only; :mod:`registry_hooks.claims` writes it to the registry.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

LEASE_TAG = "certgate.audit.lease"
GRACE_S = 600.0
"""Added to an audit's budget: the phases its ``timeout_s`` does not bound (the population
fidelity check, logging the run and the report) and clock skew between the auditing host and
the one reading the lease."""

LeaseState = Literal["live", "abandoned", "unleased"]


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class Lease:
    """One claim on a model version's audit: ``owner`` (``host:pid:token``), ``started`` and
    ``expires`` in Unix seconds (whole seconds; ``expires`` ``None``: no time limit)."""

    owner: str
    started: float
    expires: float | None

    def to_tag(self) -> str:
        """The tag value (:data:`LEASE_TAG`)."""
        return json.dumps({"owner": self.owner, "started": _iso(self.started),
                           "expires": None if self.expires is None else _iso(self.expires)})

    @classmethod
    def from_tag(cls, text: str) -> Lease | None:
        """The lease a tag value records, ``None`` when it is not one."""
        try:
            document = json.loads(text)
            expires = document["expires"]
            return cls(str(document["owner"]), _seconds(document["started"]),
                       None if expires is None else _seconds(expires))
        except (ValueError, TypeError, KeyError):
            return None

    def expired(self, now: float | None = None) -> bool:
        """Whether the lease ran out (never, without a time limit)."""
        return self.expires is not None and (time.time() if now is None else now) > self.expires

    def describe(self) -> str:
        """``by HOST:PID:TOKEN since …, lease until …`` (or ``no time limit``)."""
        until = "no time limit" if self.expires is None else f"lease until {_iso(self.expires)}"
        return f"by {self.owner} since {_iso(self.started)}, {until}"


def new_lease(budget_s: float | None, now: float | None = None) -> Lease:
    """A lease for this process starting ``now``, expiring after ``budget_s`` plus
    :data:`GRACE_S` (``budget_s`` ``None``: an audit without a time limit, no expiry)."""
    started = float(int(time.time() if now is None else now))
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    expires = None if budget_s is None else float(int(started + budget_s + GRACE_S) + 1)
    return Lease(owner, started, expires)


def lease_of(tags: Mapping[str, str]) -> Lease | None:
    """The lease recorded in a version's tags, if any can be read."""
    text = tags.get(LEASE_TAG)
    return None if text is None else Lease.from_tag(text)


def lease_state(tags: Mapping[str, str], now: float | None = None) -> LeaseState:
    """The state of a ``running`` version with these tags (module docstring)."""
    lease = lease_of(tags)
    if lease is None:
        return "unleased"
    return "abandoned" if lease.expired(now) else "live"
