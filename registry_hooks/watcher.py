"""A polling watcher for stores without webhooks (local sqlite, file stores, older servers).

Each poll turns the registry's current state into the events a webhook would have sent and
offers them to the :class:`~registry_hooks.dispatch.Dispatcher`: with an alias, the version
each watched model's alias points to (``model_version_alias.created``); without one, every
version not yet audited under the configuration (``model_version.created``; a version audited
under another configuration is due again, as with an alias), every version whose audit was
abandoned (``running`` with an expired lease) or whose recorded audit run is deleted (checked
for all the versions in one batch, :func:`~registry_hooks.audit_runs.inactive_runs`), and every
``running`` version without a lease (for the dispatcher to say how to resume it). The
dispatcher's idempotency makes repeated polls harmless: a version is handled once.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from registry_hooks.audit_runs import inactive_runs
from registry_hooks.connection import Registry, RegistryError, registry_errors
from registry_hooks.dispatch import Dispatcher
from registry_hooks.events import ALIAS_CREATED, MODEL_VERSION_CREATED, RegistryEvent
from registry_hooks.tags import audited_under, is_due, model_versions, unleased_running

POLL_DELIVERY_ID = "poll"


def registered_names(registry: Registry) -> list[str]:
    """Every registered model's name."""
    names: list[str] = []
    with registry_errors("cannot list registered models"):
        page_token = None
        while True:
            page = registry.client.search_registered_models(max_results=200,
                                                            page_token=page_token)
            names.extend(model.name for model in page)
            page_token = page.token
            if not page_token:
                break
    return names


def pending_events(registry: Registry, names: Iterable[str] | None,
                   alias: str | None, config_hash: str | None = None) -> list[RegistryEvent]:
    """The events one poll produces (see the module docstring); ``config_hash``: the
    configuration's fingerprint, under which a version audited with another configuration
    is due again (as the dispatcher judges it)."""
    if alias is None:
        versions = model_versions(registry, names)
        recorded = {(version.name, str(version.version)): run_id for version in versions
                    if (run_id := audited_under(version.tags, config_hash)) is not None}
        gone = inactive_runs(registry, recorded.values())
        return [
            RegistryEvent(MODEL_VERSION_CREATED, version.name, str(version.version), None,
                          POLL_DELIVERY_ID)
            for version in versions
            if is_due(version.tags, config_hash) or unleased_running(version.tags)
            or recorded.get((version.name, str(version.version))) in gone
        ]
    events = []
    for name in names if names is not None else registered_names(registry):
        with registry_errors(f"cannot read registered model {name}"):
            aliases = registry.client.get_registered_model(name).aliases
        if alias in aliases:
            events.append(RegistryEvent(ALIAS_CREATED, name, str(aliases[alias]), alias,
                                        POLL_DELIVERY_ID))
    return events


def poll_once(registry: Registry, dispatcher: Dispatcher,
              names: Iterable[str] | None = None,
              config_hash: str | None = None) -> list[RegistryEvent]:
    """Offer this poll's events; return those that were queued (or run)."""
    queued = []
    for event in pending_events(registry, names, dispatcher.alias, config_hash):
        if dispatcher.offer(event) == "queued":
            queued.append(event)
    return queued


@dataclass
class WatchResult:
    """What a watch queued, and the polls that failed (the registry could not be read)."""

    queued: list[RegistryEvent] = field(default_factory=list)
    poll_errors: list[RegistryError] = field(default_factory=list)


def watch(registry: Registry, dispatcher: Dispatcher, interval_s: float,
          names: Iterable[str] | None = None, *, once: bool = False,
          stop: threading.Event | None = None, config_hash: str | None = None,
          result: WatchResult | None = None) -> WatchResult:
    """Poll every ``interval_s`` seconds until ``stop`` is set, the dispatcher stops
    (:meth:`Dispatcher.stop`) or once, filling ``result`` (a new one by default; the caller's
    survives an interrupt) and returning it; with ``once`` the queued events are waited for,
    otherwise not (a stop must not wait for audits). ``config_hash``: the configuration's
    fingerprint (:func:`pending_events`).

    A poll that cannot read the registry (a server restarting, a network blip) is reported on
    stderr and retried at the next poll, so a long-running watch outlives the outage; with
    ``once`` it raises :class:`RegistryError`."""
    names = list(names) if names is not None else None
    stop = stop or threading.Event()
    result = result if result is not None else WatchResult()
    while True:
        try:
            result.queued.extend(poll_once(registry, dispatcher, names, config_hash))
        except RegistryError as error:
            if once:
                raise
            result.poll_errors.append(error)
            print(f"certgate: poll failed, retrying in {interval_s:g} s: {error}",
                  file=sys.stderr, flush=True)
        if once:
            dispatcher.drain()
            return result
        if dispatcher.stopping or stop.wait(interval_s):
            return result
