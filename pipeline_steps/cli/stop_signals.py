"""The signals that stop ``certgate hooks`` (SIGINT, SIGTERM): the first asks for a prompt
stop, a second exits at once.

The first signal asks the dispatcher's :class:`~registry_hooks.stopping.StopGuard` for a stop
and raises :class:`~registry_hooks.stopping.AuditInterrupted` in the main thread, unless that
thread runs the audits (``hooks watch``) and is writing a claim or a commit: it then finishes
the write and stops at the next safe point. A second signal exits at once (code 128 + the
signal's number), saying on stderr what the audit in flight leaves behind.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from pipeline_steps.cli.signal_handlers import handling
from registry_hooks.claims import left_running
from registry_hooks.stopping import AuditInterrupted, StopGuard

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _say(text: str) -> None:
    print(f"certgate hooks: {text}", file=sys.stderr, flush=True)


@contextmanager
def stop_on_signals(guard: StopGuard, *, audits_here: bool) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM stop as the module docstring says
    (``audits_here``: the audits run in this thread); the previous handlers come back after."""

    def second(signum: int, frame: FrameType | None) -> None:
        claim = guard.in_flight
        left = ("" if claim is None else
                f"; {left_running(claim.name, claim.version, claim.lease)}")
        _say(f"{signal.Signals(signum).name} again: exiting now{left}")
        sys.stdout.flush()
        os._exit(128 + signum)

    def first(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        guard.request(name)
        for number in STOP_SIGNALS:
            signal.signal(number, second)
        _say(f"{name}: stopping (a second signal exits at once)")
        if not (audits_here and guard.busy):
            raise AuditInterrupted(name)

    with handling(STOP_SIGNALS, first):
        yield
