"""The audit-kind contract (:mod:`verifier.audits.kind`): every registered kind's module keeps
it, no other module names a kind, and a new kind is one new module plus its line in the
registry — shown by adding the toy kind of ``tests/toy_kind.py`` to a copy of the packages
and running it through ``certgate run`` (config → audit → progress → report → gate), its
certified interval checked against the closed-form probability."""

from __future__ import annotations

import ast
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import get_args

import pytest
import yaml

from configs.schema import AUDIT_TYPES
from pipeline_steps.progress import BARS
from tests.causal_nets import threshold_network, threshold_population
from verifier.audits import KIND_MODULES, KINDS, SETTINGS_TYPES
from verifier.audits.kind import AuditKind, ProgressUnit, settings_kind
from verifier.certificate import Certificate
from verifier.convert import save_network
from verifier.population import (
    save_population,
)

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("verifier", "pipeline_steps", "registry_hooks", "configs", "certgate")
NAMES_OF_THEIR_OWN = {
    "verifier/wmi/check.py": "the WMI engine's names of the properties it integrates",
    "verifier/wmi/branched.py": "the names of the properties box branching certifies (its "
                                "PV specifications' names)",
    "verifier/spec.py": "the name of the demographic-parity specification it builds",
}
"""Modules that may spell a kind's name for a reason of their own (not to switch on a kind)."""


@pytest.mark.parametrize("module", KIND_MODULES, ids=lambda module: module.KIND)
def test_every_registered_kind_keeps_the_contract(module: ModuleType) -> None:
    assert isinstance(module, AuditKind)
    assert settings_kind(module.SETTINGS) == module.KIND
    assert module.SETTINGS.model_fields["name"].default == module.KIND
    assert module.PROGRESS in get_args(ProgressUnit) and module.PROGRESS in BARS
    assert callable(module.EMPIRICAL_CHECK) or module.EMPIRICAL_CHECK.strip()
    for executor in ("local", "process"):
        options = module.engine_options(executor, 2)
        assert options is None or isinstance(options, dict)
    empty = Certificate(audit=module.KIND, verdict="unknown", bounds={}, details={},
                        settings={}, cost={}, algorithm="")
    assert module.work_done(empty) == ""


def test_the_registry_is_the_one_list() -> None:
    assert tuple(KINDS.values()) == KIND_MODULES
    assert tuple(module.SETTINGS for module in KIND_MODULES) == SETTINGS_TYPES
    assert AUDIT_TYPES == SETTINGS_TYPES


def _strings(path: Path) -> set[str]:
    """String constants of ``path`` that are neither docstrings, ``__all__`` entries (names of
    functions) nor command-line verbs (``add_parser("monotonicity", …)``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(node.body[0].value) for node in ast.walk(tree)
               if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                    ast.AsyncFunctionDef))
               and node.body and isinstance(node.body[0], ast.Expr)
               and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "__all__"
                for target in node.targets):
            skipped.update(id(child) for child in ast.walk(node.value))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_parser" and node.args):
            skipped.add(id(node.args[0]))
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in skipped}


def test_no_module_but_its_own_names_a_kind() -> None:
    """A kind's name as a string anywhere else would be a switch on it (or a list of kinds
    beside the registry)."""
    owners = {Path(module.__file__).resolve(): module.KIND for module in KIND_MODULES}
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            if where in NAMES_OF_THEIR_OWN:
                continue
            named = _strings(path) & set(KINDS) - {owners.get(path.resolve())}
            found.extend(f"{where}: {kind!r}" for kind in sorted(named))
    assert found == []


# ---------------------------------------------------------------------- a new kind, end to end


def _copy_with_toy_kind(target: Path) -> tuple[Path, list[str]]:
    """The packages copied to ``target`` with ``tests/toy_kind.py`` as a new kind module and
    the registry extended by it; returns the registry file and its changed lines."""
    for package in (*PACKAGES, "tests"):
        shutil.copytree(ROOT / package, target / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "tests" / "toy_kind.py", target / "verifier/audits/favorable_rate.py")
    registry = target / "verifier/audits/__init__.py"
    before = registry.read_text(encoding="utf-8")
    after = re.sub(r"(from verifier\.audits import \(\n)", r"\1    favorable_rate,\n", before,
                   count=1)
    after = re.sub(r"(KIND_MODULES: tuple\[ModuleType, \.\.\.\] = \(\n[^)]*)\)",
                   r"\1, favorable_rate)", after, count=1)
    registry.write_text(after, encoding="utf-8")
    changed = [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(),
                                                     lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return registry, changed


def test_a_new_kind_is_one_module_and_its_registry_line(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    _registry, changed = _copy_with_toy_kind(copy)
    assert len([line for line in changed if line.startswith("+")]) == 2, changed
    assert len([line for line in changed if line.startswith("-")]) == 1, changed

    # class 1 iff x + 0.5 s > 0.75, x ~ U[0, 1], s ∈ {0, 1} with probability 1/2 each:
    # P[class 1] = (P[x > 0.75] + P[x > 0.25]) / 2 = 1/2 exactly.
    save_network(threshold_network([1.0, 0.5], -0.75, ["x", "s"]), tmp_path / "model.json")
    save_population(threshold_population(),
        tmp_path / "population.json")
    config = tmp_path / "audit.yaml"
    config.write_text(yaml.safe_dump({
        "tracking": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
                     "experiment": "toy-kind"},
        "model": {"uri": str(tmp_path / "model.json"),
                  "population_uri": str(tmp_path / "population.json")},
        "validation": {"population_samples": 200},
        "audits": [{"kind": "favorable_rate", "favorable_class": 1, "min_rate": 0.4,
                    "precision": 0.02}],
        "gate": {"promote_alias": None},
    }))
    result = subprocess.run(
        [sys.executable, "-m", "pipeline_steps", "run", "--config", str(config), "--json",
         "--no-progress"], capture_output=True, text=True, cwd=copy, timeout=300,
        env={**os.environ, "PYTHONPATH": str(copy), "MLFLOW_DISABLE_TELEMETRY": "true"},
        check=False)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    audit = summary["audit"]["audits"]["favorable_rate"]
    assert audit["verdict"] == "satisfied"
    low, high = audit["rate"]
    assert low <= 0.5 <= high  # the oracle: the exact probability
    assert low > 0.4  # PV stops once the verdict is proven
