"""A request to stop the running engine now, with what it has proven so far: the command
line's first SIGINT or SIGTERM sets it, and PV checks it between rounds and while it waits
for one (every :data:`POLL_S`). The engine then ends as at its deadline — the round in flight
abandoned, the bounds counting its boxes as they were before it, the verdict only what those
bounds prove — and says ``stopped_by: interrupted``. Nothing else reads it: an engine that
does not check it runs to its own end."""

from __future__ import annotations

import threading

POLL_S = 0.2
"""How often a waiting engine looks at the request (seconds)."""

_requested = threading.Event()


def request_stop() -> None:
    """Ask the running engine to stop at its next check."""
    _requested.set()


def stop_requested() -> bool:
    """Whether a stop was asked (and not withdrawn)."""
    return _requested.is_set()


def withdraw_stop() -> None:
    """Forget the request (a command that installed the signal handlers is done)."""
    _requested.clear()
