"""A request to stop the running engine now, with what it has proven so far: the command
line's first SIGINT or SIGTERM sets it, and PV checks it between rounds and while it waits
for one (every :data:`POLL_S`). The engine then ends as at its deadline — the round in flight
abandoned, the bounds counting its boxes as they were before it, the verdict only what those
bounds prove — and says ``stopped_by: interrupted``. Causal fairness checks it between rounds,
while it waits for a round and inside an in-process chunk; exact WMI reads its deadline on a
:func:`stoppable` clock. An engine that does not check it runs to its own end."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

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


def stoppable(clock: Callable[[], float]) -> Callable[[], float]:
    """``clock`` read as ``+inf`` once a stop is requested, so that every deadline check made
    on it (``clock() >= deadline``, an infinite deadline included) fires: an engine that
    reads its deadline on this clock ends as at its deadline. Only for deadline checks: an
    elapsed time is read on ``clock`` itself."""

    def read() -> float:
        return math.inf if _requested.is_set() else clock()

    return read
