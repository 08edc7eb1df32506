"""A real signal sent to this process once a command's handler for it is installed: the
in-process tests of how a ``verify`` verb ends on SIGINT or SIGTERM."""

from __future__ import annotations

import os
import signal
import threading
import time

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
