"""Every benchmark command the documentation gives runs as written: each ``python
benchmarks/NAME.py`` and ``python -m benchmarks.NAME`` in README.md, BENCHMARKS.md and the
scripts' own docstrings answers ``--help`` from the checkout's root, in a fresh interpreter
with no ``PYTHONPATH`` (a script run by its path cannot import the ``benchmarks`` package,
so a script that does must be documented with ``-m``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMAND = re.compile(r"python (benchmarks/(\w+)\.py|-m benchmarks\.(\w+))")


def documented_commands() -> list[tuple[str, ...]]:
    """The distinct benchmark invocations the documentation names, as argv tails."""
    scripts = sorted((ROOT / "benchmarks").glob("*.py"))
    texts = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *scripts]
    commands: set[tuple[str, ...]] = set()
    for path in texts:
        for match in COMMAND.finditer(path.read_text(encoding="utf-8")):
            if match.group(2):
                commands.add((f"benchmarks/{match.group(2)}.py",))
            else:
                commands.add(("-m", f"benchmarks.{match.group(3)}"))
    return sorted(commands)


def test_the_documentation_names_benchmark_commands() -> None:
    assert len(documented_commands()) >= 10


@pytest.mark.parametrize("command", documented_commands(), ids=" ".join)
def test_a_documented_benchmark_command_answers_help(command: tuple[str, ...]) -> None:
    script = ROOT / (command[0] if len(command) == 1 else
                     command[1].replace(".", "/") + ".py")
    assert script.is_file(), f"documented command names no script: {' '.join(command)}"
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run([sys.executable, *command, "--help"], cwd=ROOT, env=environment,
                            capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, f"python {' '.join(command)} --help: {result.stderr[-800:]}"
    assert result.stdout.lstrip().startswith("usage:")
