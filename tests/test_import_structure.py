"""The dependency rules of the code base, read from the source (every import, function-level
ones included; ``if TYPE_CHECKING:`` blocks left out) of every package pyproject.toml ships:
``verifier`` imports nothing of ours outside itself; ``registry_hooks`` never imports
``pipeline_steps``, ``configs`` or ``certgate``; no package but ``registry_hooks`` imports MLflow
(the others go through it); and no module imports itself through a circle of others, not
even with the ``TYPE_CHECKING`` imports counted. An import inside a function defers a
heavy third-party package's start-up, and nothing else: the package is one of
:data:`HEAVY_STARTUP` (with its reason), or a module of ours whose module-level imports reach
one; any other import sits at the top of its module."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tuple(pattern.rstrip("*") for pattern in tomllib.loads(
    (ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"])
MLFLOW_PACKAGE = "registry_hooks"

HEAVY_STARTUP = {
    "torch": "the tensor library: the largest start-up of all (--help, config errors and the "
             "JSON/.nnet readers never import it: tests/test_cli_startup.py)",
    "mlflow": "the registry client: imported only when a command talks to a registry",
    "scipy": "HiGHS through scipy: only when a MILP or an LP runs",
    "pydantic": "settings validation: --help and option errors stay without it",
    "onnx": "the ONNX reader: only for .onnx files",
    "onnxruntime": "the ONNX runtime: only to check a conversion against it",
    "pandas": "data tables: only when data is read (fit, fidelity, the evaluator)",
    "great_expectations": "data validation: only when data is validated",
    "sklearn": "tree surrogates: only for a pickled scikit-learn model",
    "pgmpy": "structure learning: only when a population is fitted",
    "distributed": "Dask: only for the dask executor",
    "dask": "Dask's configuration (distributed's base): only for the dask executor",
    "psutil": "process handles, installed with distributed (the dask extra): only to end a "
              "local Dask cluster's workers",
    "numpy": "arrays: verbs that only parse options or print help do without it",
}
"""The third-party packages whose import a function may defer, each with its reason."""


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


def function_level_imports(path: Path) -> list[tuple[int, list[str]]]:
    """``(line, imported names)`` of every import inside a function of ``path`` (absolute
    names as :func:`imports_of` counts them; ``TYPE_CHECKING`` blocks left out)."""
    found: list[tuple[int, list[str]]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child, in_function)
            return
        if in_function and isinstance(node, ast.Import):
            found.append((node.lineno, [alias.name for alias in node.names]))
        elif in_function and isinstance(node, ast.ImportFrom) and node.module and \
                node.level == 0:
            found.append((node.lineno, [node.module,
                                        *(f"{node.module}.{alias.name}" for alias in node.names)]))
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def module_level_imports(path: Path) -> set[str]:
    """What importing ``path`` imports: :func:`imports_of` without the function-level ones."""
    deferred = {name for _, names in function_level_imports(path) for name in names}
    return imports_of(path) - deferred


def with_parents(name: str) -> set[str]:
    """``a.b.c`` and the packages importing it runs: ``a``, ``a.b``."""
    parts = name.split(".")
    return {".".join(parts[:end]) for end in range(1, len(parts) + 1)}


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


def test_type_annotations_add_no_circle() -> None:
    assert strongly_connected(package_edges(graph(type_checking=True))) == []


def test_every_package_is_checked() -> None:
    """A package on disk that pyproject.toml does not ship would escape the rules below."""
    on_disk = {path.parent.name for path in ROOT.glob("*/__init__.py")}
    assert on_disk == set(PACKAGES)


def uses_mlflow(path: Path) -> bool:
    """Whether ``path`` imports MLflow anywhere: at the top, in a function or for type
    annotations only."""
    return any(target.split(".")[0] == "mlflow" for target in imports_of(path, True))


def test_the_mlflow_rule_sees_every_import_form(tmp_path: Path) -> None:
    forms = ["import mlflow\n", "import mlflow.pyfunc as pf\n", "from mlflow import MlflowClient\n",
             "def f():\n    from mlflow.models import Model\n",
             "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mlflow\n"]
    for number, source in enumerate(forms):
        path = tmp_path / f"form{number}.py"
        path.write_text(source)
        assert uses_mlflow(path), source
    path = tmp_path / "clean.py"
    path.write_text("import registry_hooks\nfrom registry_hooks import mlflow_tags\n")
    assert not uses_mlflow(path)


def test_dependency_direction_and_the_mlflow_boundary() -> None:
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            imported = imports_of(path)
            ours = {target.split(".")[0] for target in imported} & set(PACKAGES)
            where = path.relative_to(ROOT)
            if package != MLFLOW_PACKAGE:
                assert not uses_mlflow(path), f"{where} imports mlflow outside {MLFLOW_PACKAGE}/"
            if package == "verifier":
                assert ours <= {"verifier"}, where
            if package == MLFLOW_PACKAGE:
                assert not ours & {"pipeline_steps", "configs", "certgate"}, where


def test_function_level_imports_defer_only_heavy_start_up() -> None:
    paths = {module_name(path): path for package in PACKAGES
             for path in (ROOT / package).rglob("*.py")}
    top = {name: {part for target in module_level_imports(path)
                  for part in with_parents(target)} for name, path in paths.items()}

    def reaches_heavy(module: str) -> bool:
        seen, stack = set(), [module]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            for target in top.get(current, ()):
                if target in paths:
                    stack.append(target)
                elif target.split(".")[0] in HEAVY_STARTUP:
                    return True
        return False

    offences = []
    for path in paths.values():
        for line, names in function_level_imports(path):
            root = names[0].split(".")[0]
            ours = {part for target in names for part in with_parents(target)} & set(paths)
            deferred_heavy = root in HEAVY_STARTUP if root not in PACKAGES else \
                any(reaches_heavy(module) for module in ours)
            if not deferred_heavy:
                offences.append(f"{path.relative_to(ROOT)}:{line}: {names[0]}")
    assert offences == [], ("import these at the top of the module (nothing heavy to defer), "
                            "or name the package in HEAVY_STARTUP with its reason:\n"
                            + "\n".join(offences))
