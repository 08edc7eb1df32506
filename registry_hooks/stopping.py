"""Stopping an audit of ``certgate hooks`` promptly without leaving it half applied.

A stop (SIGINT, SIGTERM) is asked through a :class:`StopGuard`; the audit in flight is given up
at its next *safe point* and its version handed back, never cut inside a write that must be
whole. Its work falls in three kinds of phase:

* **Reading and computing** (loading, validating, certifying, logging the audit run): nothing
  on the version is written, so a stop may end it anywhere. The audit's own thread stops at
  :meth:`StopGuard.checkpoint` (:class:`AuditInterrupted`); a stop from another thread (the
  receiver of ``hooks serve``) does not wait for an engine that reports nothing until it ends:
  it hands the version back itself (:meth:`StopGuard.stop`) and the process exits.
* **Claiming** (:meth:`StopGuard.claiming`: the lease and status written, read back a second
  later): done whole or not begun, so a stop waits for it (about a second) and then hands the
  claim back.
* **Committing** (:meth:`StopGuard.commit` until the event ends, :meth:`StopGuard.finished`:
  the version's result tags, the lease removed, the gate's tags and alias moves, the deploy):
  done whole, so a stop waits for it; the version is then complete and nothing is handed back.

Handing back (:func:`registry_hooks.claims.hand_back`) writes ``certgate.audit.interrupted``
(who, when, why), puts the status tag back as it was before the claim and removes the lease,
so the version is due again at once for the next ``hooks watch``/``serve`` or ``certgate
run``; an audit run already logged for it is deleted. The guard holds no MLflow state itself:
the caller hands back the :class:`~registry_hooks.claims.Claim` and run it returns.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from registry_hooks.claims import Claim


class AuditInterrupted(KeyboardInterrupt):
    """A stop was asked; raised at a safe point of the audit in flight (module docstring). A
    :class:`KeyboardInterrupt`, so it passes every ``except Exception`` of the engines."""


@dataclass(frozen=True)
class InFlight:
    """What a stop found claimed and not committed: the claim to hand back, and the audit run
    already logged for it (``None``: none yet)."""

    claim: Claim
    run_id: str | None


class StopGuard:
    """One audit in flight at a time (the dispatcher runs one) and the stop of its process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._claim: Claim | None = None
        self._run_id: str | None = None
        self._claiming = False
        self._committing = False
        self.handed_back: list[str] = []
        """``models:/NAME/VERSION`` of every version whose claim was handed back."""

    @property
    def reason(self) -> str | None:
        """Why the stop was asked (e.g. ``"SIGTERM"``), ``None`` until it is."""
        return self._reason

    @property
    def busy(self) -> bool:
        """Whether a claim or a commit is being written (a stop must wait for it)."""
        return self._claiming or self._committing

    @property
    def in_flight(self) -> Claim | None:
        """The claim of the audit in flight, if it holds one."""
        return self._claim

    def request(self, reason: str) -> None:
        """Ask for a stop: every later safe point raises :class:`AuditInterrupted`."""
        if self._reason is None:
            self._reason = reason

    def checkpoint(self) -> None:
        """A safe point: raise :class:`AuditInterrupted` once a stop is asked."""
        if self._reason is not None:
            raise AuditInterrupted(self._reason)

    @contextmanager
    def claiming(self) -> Iterator[None]:
        """Write a claim whole: a stop from another thread waits for the block, then finds
        the claim given to :meth:`holding` in it. Raises :class:`AuditInterrupted` instead of
        starting when a stop was asked."""
        with self._lock:
            self.checkpoint()
            self._claiming = True
            try:
                yield
            finally:
                self._claiming = False

    def holding(self, claim: Claim) -> None:
        """The audit in flight holds ``claim`` (until :meth:`finished`)."""
        self._claim = claim

    def logged(self, run_id: str) -> None:
        """The audit in flight logged the run ``run_id`` (deleted if the claim is handed back)."""
        self._run_id = run_id

    def commit(self) -> None:
        """From here until :meth:`finished` the version's results are written whole: a stop
        waits for them. Raises :class:`AuditInterrupted` instead when a stop was asked (for a
        stop from another thread: waits until it has handed the claim back, for ever)."""
        if self._committing:
            return
        self._lock.acquire()
        if self._reason is not None:
            self._lock.release()
            raise AuditInterrupted(self._reason)
        self._committing = True

    def finished(self) -> None:
        """The event's work ended (done, failed or interrupted): nothing is in flight."""
        self._claim = self._run_id = None
        if self._committing:
            self._committing = False
            self._lock.release()

    def stop(self, reason: str) -> InFlight | None:
        """For a thread other than the audit's: ask for a stop and wait until no claim or
        commit is being written (a commit's wait ends when its event does); from then on the
        audit's thread writes nothing more on the version. Returns what is claimed and not
        committed, for the caller to hand back (``None``: nothing)."""
        self.request(reason)
        self._lock.acquire()
        if self._claim is None:
            return None
        return InFlight(self._claim, self._run_id)
