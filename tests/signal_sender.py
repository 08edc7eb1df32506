"""A real signal sent to this process once a command's handler for it is installed: the
in-process tests of how a ``verify`` verb ends on SIGINT or SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from typing import Any

import pytest

from pipeline_steps.cli import main

HANDLER_WAIT_S = 120.0


def signal_once_running(signum: int, original: object, after_s: float) -> threading.Thread:
    """A started thread that sends ``signum`` to this process once a handler other than
    ``original`` is installed for it (the command's) and ``after_s`` seconds have passed
    since, and only while that handler is still installed (so a command that ended, or never
    installed it within :data:`HANDLER_WAIT_S`, never gets it)."""

    def send() -> None:
        deadline = time.monotonic() + HANDLER_WAIT_S
        while signal.getsignal(signum) is original and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(after_s)
        if signal.getsignal(signum) is not original:
            os.kill(os.getpid(), signum)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def interrupted_run(argv: list[str], signum: int, after_s: float,
                    capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Run the ``--json`` command ``argv`` in this process, send it ``signum`` ``after_s``
    seconds after its handler is installed, check that it ended as an interrupted run ends
    (``stopped_by: interrupted``, verdict ``unknown``, exit 1, well before its budget, the
    handler's message on stderr) and return its JSON object."""
    sender = signal_once_running(signum, signal.getsignal(signum), after_s)
    started = time.monotonic()
    code = main(argv)
    elapsed = time.monotonic() - started
    sender.join(timeout=5.0)
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert payload["stopped_by"] == "interrupted", payload
    assert payload["verdict"] == "unknown" and code == 1
    assert elapsed < 60.0, elapsed
    assert f"{signal.Signals(signum).name}: stopping with the bounds reached" in captured.err
    return payload
