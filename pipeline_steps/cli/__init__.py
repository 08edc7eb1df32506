"""The ``certgate`` command line.

Every verb group lives in its own module exposing ``register(subparsers)``; each registered
command sets ``func(args) -> int``. Bad input (any :class:`CertgateInputError`, a pydantic
validation error, a missing file, a usage error) prints one line on stderr and exits with code
2; ``--debug`` shows the traceback instead. Every verb takes ``--json``: stdout then carries
exactly one JSON object, also on errors (:mod:`pipeline_steps.cli.output`). An unexpected
error exits with code 3 (the traceback on stderr).

Verb modules are imported here, but they import torch, MLflow and the audit machinery inside
the functions that need them, so ``certgate --help`` and a configuration error stay fast
(``benchmarks/startup.py``).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from pipeline_steps.cli import (
    bounds_cmd,
    config_cmd,
    demo_cmd,
    output,
    pipeline_cmd,
    population_cmd,
    selfcorrect_cmd,
    verify_cmd,
)
from verifier.errors import CertgateInputError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
EXIT_INTERNAL = 3

COMMAND_GROUPS = (
    bounds_cmd, verify_cmd, population_cmd, selfcorrect_cmd, config_cmd, pipeline_cmd,
    demo_cmd,
)
JSON_HELP = "print exactly one JSON object on stdout (also on errors); human text goes to stderr"


class UsageError(CertgateInputError):
    """A command line argparse rejects."""


class CertgateParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are raised (so ``--json`` can report them)
    instead of exiting."""

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


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with a ``--help`` and a ``--json`` for every verb."""
    parser = CertgateParser(
        prog="certgate",
        description="Certify neural-network classifiers: bounds, population models, audits.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--json", dest="json_everywhere", action="store_true", help=JSON_HELP)
    parser.add_argument("--log-level", type=str.upper, choices=output.LOG_LEVELS,
                        help="log level on stderr, MLflow's included (default WARNING)")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more log output (-v INFO, -vv DEBUG)")
    parser.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in COMMAND_GROUPS:
        group.register(subparsers)
    for leaf in _leaf_parsers(parser):
        if "--json" not in leaf._option_string_actions:
            leaf.add_argument("--json", action="store_true", help=JSON_HELP)
    return parser


def _one_line(error: BaseException) -> str:
    from pydantic import ValidationError

    if isinstance(error, ValidationError):
        problems = []
        for item in error.errors():
            location = ".".join(str(part) for part in item["loc"]) or "<root>"
            problems.append(f"{location}: {item['msg']}")
        return f"invalid {error.title}: " + "; ".join(problems)
    if isinstance(error, FileNotFoundError):
        return f"file not found: {error.filename or error}"
    return str(error).replace("\n", " ")


def _input_errors() -> tuple[type[BaseException], ...]:
    from pydantic import ValidationError

    return (CertgateInputError, ValidationError, FileNotFoundError, IsADirectoryError)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    as_json = output.wants_json(arguments)
    with output.json_mode(as_json):
        code, message = _run(arguments)
    if message is None:
        output.finish(code)
    else:
        print(f"certgate: error: {message}", file=sys.stderr)
        output.fail(message, code)
    return code


def _run(arguments: list[str]) -> tuple[int, str | None]:
    """Parse and run; ``(exit code, error message or None)``."""
    parser = build_parser()
    try:
        args = parser.parse_args(arguments)
    except UsageError as error:
        return EXIT_ERROR, str(error)
    args.json = args.json or args.json_everywhere
    level = output.log_level(args.log_level, args.verbose, args.quiet)
    output.configure_logging(level, asked=bool(args.log_level or args.verbose or args.quiet))
    try:
        return int(args.func(args)), None
    except _input_errors() as error:
        if args.debug:
            raise
        return EXIT_ERROR, _one_line(error)
    except KeyboardInterrupt:
        return EXIT_ERROR, "interrupted"
    except Exception as error:
        if args.debug:
            raise
        traceback.print_exc(file=sys.stderr)
        return EXIT_INTERNAL, f"internal error: {type(error).__name__}: {_one_line(error)}"


if __name__ == "__main__":
    sys.exit(main())
