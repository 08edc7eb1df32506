"""Where the ``certgate`` CLI writes: the ``--json`` contract and the verbosity options.

With ``--json`` stdout carries exactly one JSON object, on success and on error: while a verb
runs, :func:`json_mode` points ``sys.stdout`` *and file descriptor 1* at stderr (human lines,
MLflow's "View run" lines, progress, a native library's banner such as HiGHS's and anything a
worker process prints all land there) and the verb hands its result to :func:`emit_json`;
the object is written to the real stdout once the verb is done. A verb that has nothing else
to say gets ``{"exit_code": N}`` from :func:`finish`; an error becomes ``{"error": "...",
"exit_code": 2}``.

``--log-level`` (or ``-v``/``-vv``/``-q``) sets the level of Python logging on stderr and, when
given, of MLflow's own loggers (through ``MLFLOW_LOGGING_LEVEL``, which MLflow reads when it is
imported, so it is set before any verb imports it).

A verb that writes to the registry (:func:`outlives_its_reader`) is not stopped by a reader
that closed stdout or stderr early (``certgate run … | head -1``): its writes there are
dropped and it finishes its audit, gate and deploy, so that no display costs a run its
result (MLflow's own "View run" line had undone a whole audit).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from verifier.native_output import flush_c_streams

JSON_HELP = "print exactly one JSON object on stdout (also on errors); human text goes to stderr"
"""The help of every ``--json`` option."""

PROGRESS_HELP = "no progress bars on stderr"
"""The help of every ``--no-progress`` option."""

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_LOG_LEVEL = "WARNING"


class _Channel:
    """The real stdout while a ``--json`` verb runs, and the object waiting to be written."""

    def __init__(self) -> None:
        self.stream: TextIO | None = None
        self.pending: str | None = None

    def release(self) -> None:
        """Write the pending object (if any) to the real stdout and leave ``--json`` mode."""
        if self.stream is not None and self.pending is not None:
            self.stream.write(self.pending + "\n")
            self.stream.flush()
        self.stream, self.pending = None, None


_channel = _Channel()


@contextlib.contextmanager
def _stdout_descriptor_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr's for the body: what native libraries (HiGHS's
    banner) and child processes write to stdout lands on stderr."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    except (OSError, ValueError):  # no usable descriptors (an embedding host): nothing moves
        yield
        return
    try:
        yield
    finally:
        flush_c_streams()
        os.dup2(saved, 1)
        os.close(saved)


@contextlib.contextmanager
def json_mode(enabled: bool) -> Iterator[None]:
    """Run the body with stdout sent to stderr when ``enabled`` — ``sys.stdout`` and file
    descriptor 1 both, so no library's print reaches stdout; :func:`emit_json` keeps the one
    object, which :func:`finish` or :func:`fail` writes to the real stdout afterwards."""
    if not enabled:
        yield
        return
    _channel.stream, _channel.pending = sys.stdout, None
    try:
        with _stdout_descriptor_to_stderr(), contextlib.redirect_stdout(sys.stderr):
            yield
    except BaseException:
        _channel.stream, _channel.pending = None, None
        raise


def emit_json(document: Any) -> None:
    """Hand over ``document`` as the one JSON object of this invocation: kept for the real
    stdout in ``--json`` mode (written when the verb is done), else written to
    ``sys.stdout``. A second call in one invocation is a bug."""
    text = json.dumps(document)
    if _channel.stream is None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    if _channel.pending is not None:
        raise RuntimeError("a --json invocation wrote a second JSON object")
    _channel.pending = text


def finish(code: int) -> None:
    """End a ``--json`` invocation: write its object, or ``{"exit_code": code}`` when the
    verb gave none, to the real stdout."""
    if _channel.stream is not None and _channel.pending is None:
        _channel.pending = json.dumps({"exit_code": code})
    _channel.release()


def fail(message: str, code: int) -> None:
    """End a ``--json`` invocation with ``{"error": message, "exit_code": code}`` (replacing
    nothing: a verb that failed after handing over its object keeps it)."""
    if _channel.stream is not None and _channel.pending is None:
        _channel.pending = json.dumps({"error": message, "exit_code": code})
    _channel.release()


class _ReaderTolerantStream:
    """A text stream that drops what it is given, instead of raising, once the reader of its
    pipe has gone: the first broken pipe points the stream's descriptor at the null device
    (so what is still buffered, and what native code writes there, goes nowhere too)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self.reader_gone = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError):  # no descriptor (an embedding host's stream)
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def outlives_its_reader(command: Callable[[argparse.Namespace], int]
                        ) -> Callable[[argparse.Namespace], int]:
    """``command`` with stdout and stderr that drop their writes once their reader has gone
    (see the module docstring): it runs to its end and returns its own exit code."""

    @functools.wraps(command)
    def tolerant(args: argparse.Namespace) -> int:
        out, err = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _ReaderTolerantStream(out), _ReaderTolerantStream(err)
        try:
            return command(args)
        finally:
            sys.stdout, sys.stderr = out, err

    return tolerant


def add_no_progress(parser: argparse.ArgumentParser) -> None:
    """Add ``--no-progress`` to a verb that shows progress bars."""
    parser.add_argument("--no-progress", action="store_true", help=PROGRESS_HELP)


def shows_progress(args: argparse.Namespace) -> bool:
    """Whether a verb that shows progress bars shows them: not with ``--no-progress``, nor
    with ``--json`` (the object is the output there)."""
    return not (getattr(args, "no_progress", False) or getattr(args, "json", False))


def quiet_downloads() -> None:
    """No MLflow artifact-download progress bars (unless the user's environment asks)."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


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


DASK_LOG_LEVEL = "DASK_LOGGING__DISTRIBUTED"
"""The environment variable Dask reads, when ``distributed`` is imported, as its loggers'
level."""


def configure_logging(level: str, asked: bool) -> None:
    """Python logging on stderr at ``level``. When the level was ``asked`` for (an option was
    given), MLflow's loggers follow it too; otherwise MLflow keeps its own default. Dask's
    ``distributed`` (imported later, by a Dask executor, and in a local cluster's workers)
    follows it unless the environment names its level: its own default, INFO, wrote ~40
    lines of scheduler and nanny chatter on every run of a local cluster."""
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="%(levelname)s %(name)s: %(message)s", force=True)
    if asked:
        os.environ[DASK_LOG_LEVEL] = level.lower()
    else:
        os.environ.setdefault(DASK_LOG_LEVEL, level.lower())
    if asked:
        os.environ["MLFLOW_LOGGING_LEVEL"] = level
        if "mlflow" in sys.modules:
            logging.getLogger("mlflow").setLevel(level)
