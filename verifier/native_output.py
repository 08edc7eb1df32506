"""Output that native code (C and C++ libraries) writes straight to file descriptor 1, kept
out of the command's output: HiGHS's diagnostics, and the graph torch's ONNX exporter logs
when it fails."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def flush_c_streams() -> None:
    """Flush the C library's output buffers (a native library's ``printf`` may sit there)."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        return


@contextmanager
def native_stdout_silenced() -> Iterator[None]:
    """Run the body with file descriptor 1 pointed at ``/dev/null``: whatever native code
    writes there (and flushes before the body ends) is dropped; Python's ``sys.stdout`` is
    flushed first, so nothing printed before is lost, and the descriptor is restored after."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as sink:
            os.dup2(sink.fileno(), 1)
            yield
    finally:
        flush_c_streams()
        os.dup2(saved, 1)
        os.close(saved)
