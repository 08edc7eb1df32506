"""What ``certgate`` imports before it can answer: ``--help`` and a missing configuration
file import no verb machinery (torch, MLflow, scipy, pydantic); the top-level help lines the
CLI shows without importing the verb modules are the ones those modules register. Times are
measured in ``benchmarks/startup.py``, not here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_steps.cli import VERBS, build_parser, command_group

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "mlflow", "scipy", "pydantic", "great_expectations", "pandas")

PROBE = """
import sys
from pipeline_steps.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print(code, sorted(name for name in HEAVY if name in sys.modules), file=sys.stderr)
"""


def imported_after(*argv: str) -> tuple[str, str, str]:
    """``(stdout, exit code, heavy modules imported)`` of ``certgate argv`` in a fresh
    interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {HEAVY!r}" + PROBE, *argv], capture_output=True,
        text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False, timeout=120)
    code, heavy = result.stderr.strip().splitlines()[-1].split(" ", 1)
    return result.stdout, code, heavy


@pytest.mark.parametrize(("argv", "expected_code"), [
    (["--help"], "0"),
    (["config", "check", "missing.yaml"], "2"),
    (["run", "--config", "missing.yaml", "--json"], "2"),
    (["audit", "--no-such-option"], "2"),
])
def test_fast_paths_import_nothing_heavy(argv: list[str], expected_code: str) -> None:
    out, code, heavy = imported_after(*argv)
    assert code == expected_code
    assert heavy == "[]"
    if argv == ["--help"]:
        assert "usage: certgate" in out


def test_help_lines_are_the_registered_ones() -> None:
    full = build_parser()._subparsers._group_actions[0]
    registered = {choice.dest: choice.help for choice in full._choices_actions}
    assert registered == {verb: help_line for verb, (_, help_line) in VERBS.items()}
    for verb in VERBS:
        assert full.choices[verb].get_default("func") is None or \
            full.choices[verb].get_default("func").__module__ == command_group(verb).__name__


def test_a_named_verb_is_parsed_in_full() -> None:
    args = build_parser(["bounds", "--model", "m.json", "--lower", "0", "--upper", "1"])\
        .parse_args(["bounds", "--model", "m.json", "--lower", "0", "--upper", "1"])
    assert args.model == "m.json" and args.func.__module__ == "pipeline_steps.cli.bounds_cmd"
