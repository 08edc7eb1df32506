"""The ``certgate`` command line.

Every verb group lives in its own module exposing ``register(subparsers)``; each registered
command sets ``func(args) -> int``. Bad input (any :class:`CertgateInputError`, a pydantic
validation error, a missing file, a usage error) prints one line on stderr and exits with code
2; ``--debug`` shows the traceback instead. Every verb takes ``--json``: stdout then carries
exactly one JSON object, also on errors (:mod:`pipeline_steps.cli.output`). An unexpected
error exits with code 3 (the traceback on stderr). Output cut short because stdout's reader
closed it (``certgate population sample … | head``) is no error: the command stops quietly with
the code 141 a process ended by SIGPIPE gets.

Verb modules are imported here, but they import torch, MLflow and the audit machinery inside
the functions that need them, so ``certgate --help`` and a configuration error stay fast
(``benchmarks/startup.py``).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import select
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType

from pipeline_steps.cli import output
from pipeline_steps.cli.exit_codes import EXIT_ERROR, EXIT_INTERNAL, EXIT_READER_GONE
from verifier import __version__
from verifier.errors import CertgateInputError, ExecutorLostError

VERBS: dict[str, tuple[str, str]] = {
    "bounds": ("bounds_cmd", "bound a network's outputs (or C·outputs) over an input box"),
    "verify": ("verify_cmd",
               "certify a probabilistic property of a network under a population model"),
    "population": ("population_cmd", "population models: fit, validate, describe, sample, schema"),
    "selfcorrect": ("selfcorrect_cmd",
                    "self-correcting layer: correct logits, wrap a model (paper 004)"),
    "config": ("config_cmd", "audit configuration: JSON Schema and validation"),
    "audit": ("pipeline_cmd", "certify a model and record the audit in MLflow"),
    "gate": ("pipeline_cmd", "decide promotion from a version's recorded certificates"),
    "run": ("pipeline_cmd", "audit, gate (and deploy when configured) in one go"),
    "hooks": ("pipeline_cmd", "audit registry events: webhook receiver or polling watcher"),
    "demo": ("demo_cmd", "run the pipeline end to end on a local store (no server)"),
}
"""Each top-level verb: the module that registers it and its one-line help (the same text the
module registers; ``tests/test_cli_startup.py`` checks that they agree)."""


def command_group(verb: str) -> ModuleType:
    """The module registering ``verb`` (imported on demand: the verb modules import numpy,
    pydantic and the verifier)."""
    return importlib.import_module(f"pipeline_steps.cli.{VERBS[verb][0]}")


def command_groups() -> list[ModuleType]:
    """Every verb module, in :data:`VERBS` order."""
    return [command_group(verb) for verb in dict.fromkeys(
        {module: verb for verb, (module, _) in reversed(VERBS.items())}.values())]
JSON_HELP = output.JSON_HELP


class UsageError(CertgateInputError):
    """A command line argparse rejects."""


_NUMBER = r"(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf(?:inity)?)"
NEGATIVE_NUMBERS = re.compile(rf"^-{_NUMBER}(?:,[+-]?{_NUMBER})*$", re.IGNORECASE)
"""A word argparse must read as a value, not an option: a number or comma-separated numbers
whose first is negative, as a user types them (``-1``, ``-.5``, ``-1e3``, ``-inf``,
``-1,0``). argparse's own pattern knows only ``-1`` and ``-1.5``, so ``--noise-uniform -inf 1``
was a missing argument. No option of certgate is spelled like such a word."""


class CertgateParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are raised (so ``--json`` can report them)
    instead of exiting, and which reads every :data:`NEGATIVE_NUMBERS` word as a value (its
    subcommands' parsers are of this class too)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._negative_number_matcher = NEGATIVE_NUMBERS

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        where = self.prog.removeprefix("certgate").strip()
        raise UsageError(f"{where}: {message}" if where else message)


def _leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers that run a verb (those without subcommands) under ``parser``."""
    groups = [action for action in parser._actions
              if isinstance(action, argparse._SubParsersAction)]
    if not groups:
        return [parser]
    leaves: list[argparse.ArgumentParser] = []
    for group in groups:
        for child in dict.fromkeys(group.choices.values()):
            leaves.extend(_leaf_parsers(child))
    return leaves


def requested_verb(argv: Sequence[str]) -> str | None:
    """The top-level verb ``argv`` names (its first word that is one), if any."""
    return next((word for word in argv if word in VERBS), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser, with a ``--help`` and a ``--json`` for every verb. Given ``argv``,
    only the verb it names is registered in full (the others by name and help line), so that
    ``certgate --help`` imports no verb module; without ``argv``, every verb in full."""
    parser = CertgateParser(
        prog="certgate",
        description="Certify neural-network classifiers: bounds, population models, audits.",
    )
    parser.add_argument("--version", action="version", version=f"certgate {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--json", dest="json_everywhere", action="store_true", help=JSON_HELP)
    parser.add_argument("--log-level", type=str.upper, choices=output.LOG_LEVELS,
                        help="log level on stderr, MLflow's included (default WARNING)")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more log output (-v INFO, -vv DEBUG)")
    parser.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if argv is None:
        for group in command_groups():
            group.register(subparsers)
    else:
        verb = requested_verb(argv)
        if verb is not None:
            command_group(verb).register(subparsers)
        for name, (_, help_line) in VERBS.items():
            if name not in subparsers.choices:
                subparsers.add_parser(name, help=help_line)
    for leaf in _leaf_parsers(parser):
        if "--json" not in leaf._option_string_actions:
            leaf.add_argument("--json", action="store_true", help=JSON_HELP)
    return parser


def _one_line(error: BaseException) -> str:
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(error, pydantic.ValidationError):
        problems = []
        for item in error.errors():
            location = ".".join(str(part) for part in item["loc"]) or "<root>"
            problems.append(f"{location}: {item['msg']}")
        return f"invalid {error.title}: " + "; ".join(problems)
    if isinstance(error, FileNotFoundError):
        return f"file not found: {error.filename or error}"
    if _is_file_system_error(error):
        where = f"{error.filename}: " if error.filename is not None else ""
        return f"{where}{error.strerror or error}"
    return str(error).replace("\n", " ")


FILE_SYSTEM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES,
                                errno.EPERM, errno.ENOTDIR, errno.EISDIR})
"""What a file system answers about a path (full, read-only, not permitted, not a
directory): the environment's answer, not a bug, so exit 2 with the path and the reason."""


def _is_file_system_error(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in FILE_SYSTEM_ERRNOS


def _is_input_error(error: BaseException) -> bool:
    """Bad input: our own errors, a missing file, a file system's refusal
    (:data:`FILE_SYSTEM_ERRNOS`), or a pydantic validation error (pydantic is
    only consulted when something imported it); also an executor lost mid-run."""
    if isinstance(error, (CertgateInputError, ExecutorLostError, FileNotFoundError,
                          IsADirectoryError)) or _is_file_system_error(error):
        return True
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(error, pydantic.ValidationError)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    as_json = output.wants_json(arguments)
    with output.json_mode(as_json):
        code, message = _run(arguments)
    try:
        if code == EXIT_READER_GONE:
            raise BrokenPipeError
        if message is None:
            output.finish(code)
        else:
            print(f"certgate: error: {message}", file=sys.stderr)
            output.fail(message, code)
    except BrokenPipeError:
        if not _reader_gone():
            raise
        _silence_stdout()
        return EXIT_READER_GONE
    return code


def _reader_gone() -> bool:
    """Whether stdout is a pipe whose reading end has been closed (its reader stopped, as
    ``head`` does): polling it then reports an error condition."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _silence_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush of what is still
    buffered for the closed pipe cannot fail again on the way out."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)


def _run(arguments: list[str]) -> tuple[int, str | None]:
    """Parse and run; ``(exit code, error message or None)``."""
    parser = build_parser(arguments)
    try:
        args = parser.parse_args(arguments)
    except UsageError as error:
        return EXIT_ERROR, str(error)
    args.json = args.json or args.json_everywhere
    level = output.log_level(args.log_level, args.verbose, args.quiet)
    output.configure_logging(level, asked=bool(args.log_level or args.verbose or args.quiet))
    try:
        return int(args.func(args)), None
    except KeyboardInterrupt:
        return EXIT_ERROR, "interrupted"
    except BrokenPipeError:
        if args.debug or not _reader_gone():
            raise
        return EXIT_READER_GONE, None
    except Exception as error:
        if args.debug:
            raise
        if _is_input_error(error):
            return EXIT_ERROR, _one_line(error)
        traceback.print_exc(file=sys.stderr)
        return EXIT_INTERNAL, f"internal error: {type(error).__name__}: {_one_line(error)}"


if __name__ == "__main__":
    sys.exit(main())
