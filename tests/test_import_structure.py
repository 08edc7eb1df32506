"""The dependency rules of the code base, read from the source (every import, function-level
ones included; ``if TYPE_CHECKING:`` blocks left out) of every package pyproject.toml ships:
``verifier`` imports nothing of ours outside itself; ``registry_hooks`` never imports
``pipeline_steps``, ``configs`` or ``certgate``; no package but ``registry_hooks`` imports MLflow
(the others go through it); and no module imports itself through a circle of others. With the
``TYPE_CHECKING`` imports counted too, the only circles left are the ones
:data:`TYPE_ONLY_CIRCLES` names, each with its reason."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tuple(pattern.rstrip("*") for pattern in tomllib.loads(
    (ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"])
MLFLOW_PACKAGE = "registry_hooks"
TYPE_ONLY_CIRCLES = [
    # the distribution union is a recursive type: a product, mixture or Bayesian network
    # holds distributions of the union (union.py rebuilds them once every member exists)
    {"verifier.population.union", "verifier.population.product", "verifier.population.mixture",
     "verifier.population.bayesnet"},
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(path: Path, type_checking: bool = False) -> set[str]:
    """Every module ``path`` imports (absolute names; ``from a import b`` counts ``a`` and
    ``a.b``), those under ``if TYPE_CHECKING:`` only when ``type_checking``."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def graph(type_checking: bool = False) -> dict[str, set[str]]:
    modules = {module_name(path): path for package in PACKAGES
               for path in (ROOT / package).rglob("*.py")}
    return {name: {target for target in imports_of(path, type_checking)
                   if target in modules and target != name}
            for name, path in modules.items()}


def strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return components


def package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Edges between modules, without the edge from a module to the package it belongs to (a
    submodule's import of its own package's ``__init__`` runs after that ``__init__``)."""
    return {name: {target for target in targets if not name.startswith(f"{target}.")}
            for name, targets in edges.items()}


def test_no_import_circles() -> None:
    assert strongly_connected(package_edges(graph())) == []


def test_type_annotations_add_no_other_circle() -> None:
    circles = strongly_connected(package_edges(graph(type_checking=True)))
    assert sorted(map(sorted, circles)) == sorted(map(sorted, TYPE_ONLY_CIRCLES))


def test_every_package_is_checked() -> None:
    """A package on disk that pyproject.toml does not ship would escape the rules below."""
    on_disk = {path.parent.name for path in ROOT.glob("*/__init__.py")}
    assert on_disk == set(PACKAGES)


def test_dependency_direction_and_the_mlflow_boundary() -> None:
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            imported = imports_of(path)
            ours = {target.split(".")[0] for target in imported} & set(PACKAGES)
            uses_mlflow = any(target.split(".")[0] == "mlflow" for target in imported)
            where = path.relative_to(ROOT)
            if package != MLFLOW_PACKAGE:
                assert not uses_mlflow, f"{where} imports mlflow outside {MLFLOW_PACKAGE}/"
            if package == "verifier":
                assert ours <= {"verifier"}, where
            if package == MLFLOW_PACKAGE:
                assert not ours & {"pipeline_steps", "configs", "certgate"}, where
