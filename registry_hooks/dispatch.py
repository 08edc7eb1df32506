"""Hand registry events to a callback: filtered, once per model version, one at a time.

Both event sources (the webhook receiver and the polling watcher) feed a :class:`Dispatcher`.
It keeps the events the configuration asks for (``model_version_alias.created`` for one alias,
or ``model_version.created`` when no alias is configured) for the registered models the
configuration names, drops a version that is already
queued, running or audited (the registry's ``certgate.audit.status`` tag and its lease, read
through ``is_due``; a recorded audit run that was deleted makes the version due again; an
in-process set against duplicate deliveries while a version is queued or running), and runs
the callback for the rest. The callback returns the version's outcome (the gate's, or
``"skipped"``), kept in :attr:`Dispatcher.outcomes`; a callback that raises leaves the version
due again, so a later event retries it.

A stop (:meth:`Dispatcher.stop`, through its :class:`~registry_hooks.stopping.StopGuard`)
takes no new event, drops the queued ones (nothing of theirs is written yet) and stops the
event in flight at its next safe point (:mod:`registry_hooks.stopping`).
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Collection
from typing import Literal

from registry_hooks.audit_runs import run_is_active
from registry_hooks.connection import Registry
from registry_hooks.events import ALIAS_CREATED, MODEL_VERSION_CREATED, RegistryEvent
from registry_hooks.stopping import AuditInterrupted, InFlight, StopGuard
from registry_hooks.tags import (
    FAILURE_TAG,
    STATUS_TAG,
    audited_under,
    is_due,
    unleased_running,
    version_tags,
)

EventCallback = Callable[[RegistryEvent], str]
DueCheck = Callable[[str, str], bool]
Offer = Literal["queued", "ignored", "duplicate", "stopping"]


def registry_due_check(registry: Registry, config_hash: str | None = None,
                       reported: Collection[str] = ()) -> DueCheck:
    """``is_due(name, version)`` read from the version's tags in the registry, or its recorded
    audit run deleted (one more call, only for a version the tags call done). A ``running``
    tag without a lease (:func:`~registry_hooks.tags.unleased_running`) is not due; the first
    time it is met, stderr says how to resume it. A version whose failure record
    (:data:`~registry_hooks.tags.FAILURE_TAG`) is one of ``reported`` (the caller's records
    met or written in this process, :mod:`registry_hooks.failures`) is not due either."""
    told: set[tuple[str, str]] = set()

    def check(name: str, version: str) -> bool:
        tags = version_tags(registry, name, version)
        if tags.get(FAILURE_TAG) in reported:
            return False
        if is_due(tags, config_hash):
            return True
        if unleased_running(tags) and (name, version) not in told:
            told.add((name, version))
            print(f"certgate: models:/{name}/{version} has {STATUS_TAG}=running without a "
                  "lease (written by a certgate without leases); if no audit of it is running, "
                  f"resume it with `certgate run --config CONFIG --model-uri models:/{name}/"
                  f"{version}`", file=sys.stderr)
        run_id = audited_under(tags, config_hash)
        return run_id is not None and not run_is_active(registry, run_id)

    return check


class Dispatcher:
    """Filters, de-duplicates and runs events; ``background=True`` runs callbacks on a worker
    thread (so a webhook answers at once), otherwise in the caller's thread."""

    def __init__(self, callback: EventCallback, due: DueCheck, *, alias: str | None = None,
                 background: bool = False, model_names: Collection[str] | None = None,
                 guard: StopGuard | None = None) -> None:
        self.callback = callback
        self.due = due
        self.guard = guard if guard is not None else StopGuard()
        """Shared with the callback's audit step: stops it at its safe points."""
        self.alias = alias
        self.model_names = frozenset(model_names) if model_names is not None else None
        self.handled: list[RegistryEvent] = []
        self.outcomes: list[str] = []
        """The callback's result for each event of :attr:`handled`, in the same order."""
        self.failed: list[tuple[RegistryEvent, BaseException]] = []
        self.running: RegistryEvent | None = None
        """The event whose callback is running."""
        self.interrupted: list[RegistryEvent] = []
        """Events whose callback a stop ended (their claims handed back: the guard's
        :attr:`~registry_hooks.stopping.StopGuard.handed_back`)."""
        self._claimed: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._queue: queue.Queue[RegistryEvent | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        if background:
            self._worker = threading.Thread(target=self._work, name="certgate-dispatch",
                                            daemon=True)
            self._worker.start()

    def wanted(self, event: RegistryEvent) -> bool:
        """Whether the configuration acts on this event: its kind, and the registered model
        when ``model_names`` restricts them."""
        if self.model_names is not None and event.name not in self.model_names:
            return False
        if self.alias is not None:
            return event.kind == ALIAS_CREATED and event.alias == self.alias
        return event.kind == MODEL_VERSION_CREATED

    @property
    def stopping(self) -> bool:
        """Whether a stop was asked (no new event is taken)."""
        return self.guard.reason is not None

    def offer(self, event: RegistryEvent) -> Offer:
        """Queue (or run) the event unless it is unwanted, its version is taken or a stop was
        asked."""
        if not self.wanted(event):
            return "ignored"
        if self.stopping:
            return "stopping"
        key = (event.name, event.version)
        with self._lock:
            if key in self._claimed or not self.due(event.name, event.version):
                return "duplicate"
            self._claimed.add(key)
        if self._worker is None:
            self._run(event)
        else:
            self._queue.put(event)
        return "queued"

    def _run(self, event: RegistryEvent) -> None:
        """Run the callback; then the registry's tags alone say whether the version is due (a
        later deletion of its audit run makes it due again in this process too)."""
        self.running = event
        try:
            outcome = self.callback(event)
        except AuditInterrupted:
            self.interrupted.append(event)
            raise
        except Exception as error:  # reported, and the version becomes due again
            print(f"certgate: {event.model_uri}: {error}", file=sys.stderr)
            self.failed.append((event, error))
        else:
            self.handled.append(event)
            self.outcomes.append(outcome)
        finally:
            self.running = None
            self.guard.finished()
            with self._lock:
                self._claimed.discard((event.name, event.version))

    def _work(self) -> None:
        """The worker thread: run queued events until :meth:`close` or a stop (the events
        still queued then are dropped)."""
        while (event := self._queue.get()) is not None:
            try:
                if not self.stopping:
                    self._run(event)
            except AuditInterrupted:
                pass  # the stop's thread hands the claim back and ends the process
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def drain(self) -> None:
        """Wait until every queued event has been handled."""
        self._queue.join()

    def stop(self, reason: str) -> InFlight | None:
        """Stop taking events and wait until no claim or commit is being written
        (:meth:`StopGuard.stop <registry_hooks.stopping.StopGuard.stop>`); returns the claim in
        flight to hand back, if any. The worker thread is not joined: it may be inside an engine
        that reports nothing until it ends, and it writes nothing more on the version."""
        return self.guard.stop(reason)

    def close(self) -> None:
        """Finish the queued events and stop the worker thread; after :meth:`stop`, let the
        worker go without waiting for it (see there)."""
        if self._worker is not None:
            self._queue.put(None)
            if not self.stopping:
                self._worker.join()
            self._worker = None
