"""SIGINT and SIGTERM while a ``verify`` verb's engine runs (PV, causal fairness, WMI): the
first asks the engine to stop with the bounds it has reached (:mod:`verifier.stop_request`),
so the command still reports them, with ``stopped_by: interrupted`` and only a verdict those
bounds prove; a second signal interrupts at once (``KeyboardInterrupt``: exit 2, nothing
reported). Outside the engine the signals act as Python's defaults do. ``certgate hooks``
has its own handlers (:mod:`pipeline_steps.cli.stop_signals`)."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from pipeline_steps.cli.signal_handlers import handling
from verifier.stop_request import request_stop, withdraw_stop

ENGINE_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_engine_on_signals() -> Iterator[None]:
    """Within the block, the first SIGINT or SIGTERM stops the engine as the module
    docstring says; the previous handlers come back after (in a thread other than the main
    one, where handlers cannot be set, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def second(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    def first(signum: int, frame: FrameType | None) -> None:
        request_stop()
        for number in ENGINE_STOP_SIGNALS:
            signal.signal(number, second)
        print(f"certgate: {signal.Signals(signum).name}: stopping with the bounds reached "
              "(a second signal stops at once)", file=sys.stderr, flush=True)

    with handling(ENGINE_STOP_SIGNALS, first):
        try:
            yield
        finally:
            withdraw_stop()
