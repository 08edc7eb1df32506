"""The ``certgate`` command line.

Every verb group lives in its own module exposing ``register(subparsers)``; each registered
command sets ``func(args) -> int``. Bad input (any :class:`CertgateInputError`, a pydantic
validation error, a missing file) prints one line on stderr and exits with code 2; ``--debug``
shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from pipeline_steps.cli import (
    bounds_cmd,
    config_cmd,
    demo_cmd,
    pipeline_cmd,
    population_cmd,
    selfcorrect_cmd,
    verify_cmd,
)
from verifier.errors import CertgateInputError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2

COMMAND_GROUPS = (
    bounds_cmd, verify_cmd, population_cmd, selfcorrect_cmd, config_cmd, pipeline_cmd,
    demo_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with a ``--help`` for every verb."""
    parser = argparse.ArgumentParser(
        prog="certgate",
        description="Certify neural-network classifiers: bounds, population models, audits.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in COMMAND_GROUPS:
        group.register(subparsers)
    return parser


def _one_line(error: BaseException) -> str:
    if isinstance(error, ValidationError):
        problems = []
        for item in error.errors():
            location = ".".join(str(part) for part in item["loc"]) or "<root>"
            problems.append(f"{location}: {item['msg']}")
        return f"invalid {error.title}: " + "; ".join(problems)
    if isinstance(error, FileNotFoundError):
        return f"file not found: {error.filename or error}"
    return str(error).replace("\n", " ")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return int(args.func(args))
    except (CertgateInputError, ValidationError, FileNotFoundError, IsADirectoryError) as error:
        if args.debug:
            raise
        print(f"certgate: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("certgate: interrupted", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
