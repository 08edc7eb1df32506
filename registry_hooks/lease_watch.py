"""Watching an audit's claim while its engines run, so that an audit whose claim was lost
stops computing instead of running to its end for results it will discard.

:func:`watching` reads the claim every ``every_s`` seconds on a thread of its own
(:func:`registry_hooks.claims.lost_to`); once it has lost (another process's lease, or
another audit's record), it asks the running engine to stop
(:func:`verifier.stop_request.request_stop`: PV, causal fairness and exact WMI then end as at
their deadline) and withdraws the request when the block ends. A claim once lost stays lost
(a lease is a random token; a recorded run stays recorded), so the audit's own check before
recording discards these results anyway: the watch only saves their CPU. A read that fails
(a server blip) is not a loss; the next one decides.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from registry_hooks.claims import Claim, lost_to
from registry_hooks.connection import Registry, RegistryError
from verifier.stop_request import request_stop, withdraw_stop

WATCH_S = 10.0
"""How often a claim is read while its audit's engines run (seconds): one registry call."""


@contextmanager
def watching(registry: Registry, claim: Claim | None,
             every_s: float = WATCH_S) -> Iterator[None]:
    """Watch ``claim`` while the block runs (module docstring; ``None``: nothing to watch).
    Guarantees that no stop request of the watch outlives the block."""
    if claim is None:
        yield
        return
    done = threading.Event()
    stopped = threading.Event()

    def watch() -> None:
        while not done.wait(every_s):
            try:
                if lost_to(registry, claim) is None:
                    continue
            except RegistryError:
                continue
            stopped.set()
            request_stop()
            return

    watcher = threading.Thread(target=watch, name="certgate-lease-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        if stopped.is_set():
            withdraw_stop()
