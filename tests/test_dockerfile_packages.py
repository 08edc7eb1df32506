"""The image installs every package the project declares: the Dockerfile copies each
top-level package that ``pyproject.toml``'s package search includes (the image left out
``certgate/``, so ``certgate population fit`` and a fidelity check with data failed there
importing ``certgate.population_data``). A static check: no Docker daemon is needed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_dockerfile_copies_every_declared_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["packages"]["find"]["include"]
    declared = {path.name for path in ROOT.iterdir()
                if (path / "__init__.py").is_file()
                and any(re.fullmatch(pattern.replace("*", ".*"), path.name)
                        for pattern in patterns)}
    copied = set(re.findall(r"^COPY (\S+) \./\1\s*$", (ROOT / "Dockerfile").read_text(),
                            flags=re.MULTILINE))
    assert declared, patterns
    assert declared <= copied, sorted(declared - copied)
