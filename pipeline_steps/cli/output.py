"""Where the ``certgate`` CLI writes: the ``--json`` contract and the verbosity options.

With ``--json`` stdout carries exactly one JSON object, on success and on error: while a verb
runs, :func:`json_mode` points ``sys.stdout`` at stderr (human lines, MLflow's "View run"
lines and progress all land there) and the verb hands its result to :func:`emit_json`, the
only writer of the real stdout. A verb that has nothing else to say gets ``{"exit_code": N}``
from :func:`finish`; an error becomes ``{"error": "...", "exit_code": 2}``.

``--log-level`` (or ``-v``/``-vv``/``-q``) sets the level of Python logging on stderr and, when
given, of MLflow's own loggers (through ``MLFLOW_LOGGING_LEVEL``, which MLflow reads when it is
imported, so it is set before any verb imports it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

JSON_HELP = "print exactly one JSON object on stdout (also on errors); human text goes to stderr"
"""The help of every ``--json`` option."""

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_LOG_LEVEL = "WARNING"


class _Channel:
    """The real stdout while a ``--json`` verb runs, and whether it was written."""

    def __init__(self) -> None:
        self.stream: TextIO | None = None
        self.written = False


_channel = _Channel()


@contextlib.contextmanager
def json_mode(enabled: bool) -> Iterator[None]:
    """Run the body with ``sys.stdout`` sent to stderr when ``enabled``; :func:`emit_json`
    still reaches the real stdout."""
    if not enabled:
        yield
        return
    _channel.stream, _channel.written = sys.stdout, False
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    except BaseException:
        _channel.stream, _channel.written = None, False
        raise


def emit_json(document: Any) -> None:
    """Write ``document`` as the one JSON object of this invocation: to the real stdout in
    ``--json`` mode, else to ``sys.stdout``. A second call in one invocation is a bug."""
    stream = _channel.stream if _channel.stream is not None else sys.stdout
    if _channel.stream is not None and _channel.written:
        raise RuntimeError("a --json invocation wrote a second JSON object")
    stream.write(json.dumps(document) + "\n")
    stream.flush()
    _channel.written = _channel.stream is not None


def finish(code: int) -> None:
    """End a ``--json`` invocation that wrote nothing with ``{"exit_code": code}``, and
    release the real stdout."""
    if _channel.stream is not None and not _channel.written:
        emit_json({"exit_code": code})
    _channel.stream, _channel.written = None, False


def fail(message: str, code: int) -> None:
    """End a ``--json`` invocation with ``{"error": message, "exit_code": code}`` (replacing
    nothing: a verb that failed after writing its object keeps it)."""
    if _channel.stream is not None and not _channel.written:
        emit_json({"error": message, "exit_code": code})
    _channel.stream, _channel.written = None, False


def wants_json(argv: list[str]) -> bool:
    """Whether ``argv`` asks for ``--json`` (read before parsing, so that a usage error is
    reported as JSON too)."""
    return "--json" in argv[: argv.index("--") if "--" in argv else len(argv)]


def log_level(explicit: str | None, verbose: int, quiet: bool) -> str:
    """The log level: ``--log-level`` wins, else ``-q`` → ERROR, ``-v`` → INFO,
    ``-vv`` → DEBUG, else WARNING."""
    if explicit:
        return explicit.upper()
    if quiet:
        return "ERROR"
    return {0: DEFAULT_LOG_LEVEL, 1: "INFO"}.get(verbose, "DEBUG")


def configure_logging(level: str, asked: bool) -> None:
    """Python logging on stderr at ``level``. When the level was ``asked`` for (an option was
    given), MLflow's loggers follow it too; otherwise MLflow keeps its own default."""
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="%(levelname)s %(name)s: %(message)s", force=True)
    if asked:
        os.environ["MLFLOW_LOGGING_LEVEL"] = level
        if "mlflow" in sys.modules:
            logging.getLogger("mlflow").setLevel(level)
