"""Nothing outside :mod:`verifier.numerics` rounds by hand: read from the source (the AST, so
comments and docstrings may still name ``nextafter``) of every package pyproject.toml ships.

Forbidden elsewhere: a call of ``nextafter`` (numpy, torch or math), a float64 machine
epsilon (``finfo(float64).eps``), a module constant named like the core's (``EPS``,
``…_MARGIN``, ``SUM_ROUNDING``), a hand-written relative margin ``1 ± <literal>`` with a
literal below 1e-6 (``1 - 1e-12``), and a hand-written scaling by ``1 ± <margin>`` where the
margin names one (``x * (1.0 - relative_margin(n))``, ``(1 + FUNCTION_REL_MARGIN) * x``,
``x * (1.0 + 4.0 * EPS)``, ``x * (1 - low_err)``, ``x * (1 + gamma(n))``):
:func:`verifier.numerics.scaled_down` and :func:`~verifier.numerics.scaled_up` compute it."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tuple(pattern.rstrip("*") for pattern in tomllib.loads(
    (ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"])
CORE = ROOT / "verifier" / "numerics"
CORE_NAMES = re.compile(r"^(EPS|SUM_ROUNDING|[A-Z_]*REL_MARGIN|[A-Z_]*ABS_MARGIN|MARGIN)$")
SMALL = 1e-6
MARGIN_WORDS = re.compile(r"margin|eps|err|gamma", re.IGNORECASE)


def _is_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in (1, 1.0) and \
        not isinstance(node.value, bool)


def _is_small_literal(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, float)
            and 0.0 < node.value < SMALL)


def _names_a_margin(node: ast.AST) -> bool:
    """Whether ``node`` mentions a margin: a name, attribute or called function whose name
    says margin, epsilon, error or gamma."""
    return any((isinstance(part, ast.Name) and MARGIN_WORDS.search(part.id))
               or (isinstance(part, ast.Attribute) and MARGIN_WORDS.search(part.attr))
               for part in ast.walk(node))


def _is_margin_factor(node: ast.AST) -> bool:
    """``1 ± m`` (or ``1 ± a ± m …``, the chain starting at ``1``) with a margin ``m``."""
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        if _is_one(node.left):
            return _names_a_margin(node.right)
        if _names_a_margin(node.right) and _is_margin_factor(node.left):
            return True
        node = node.left
    return False


def _is_float64_name(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "float") or \
        (isinstance(node, ast.Attribute) and node.attr == "float64")


def hand_rounding(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, what)`` for every construct the module docstring forbids."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else ""
            if name == "nextafter":
                found.append((node.lineno, "nextafter call"))
        elif isinstance(node, ast.Attribute) and node.attr == "eps":
            call = node.value
            if isinstance(call, ast.Call) and call.args and _is_float64_name(call.args[0]):
                found.append((node.lineno, "float64 epsilon"))
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and CORE_NAMES.match(target.id):
                    found.append((node.lineno, f"constant {target.id}"))
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub)
              and _is_one(node.left) and _is_small_literal(node.right)):
            found.append((node.lineno, "hand-written margin 1 ± literal"))
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)
                and (_is_margin_factor(node.left) or _is_margin_factor(node.right))):
            found.append((node.lineno, "hand-written scaling by 1 ± margin"))
    return found


def test_the_checker_finds_each_form() -> None:
    source = (
        "import numpy as np\nEPS = np.finfo(np.float64).eps\nREL_MARGIN = 1e-9\n"
        "x = np.nextafter(1.0, 2.0)\ny = 3.0 * (1 - 1e-12)\n"
        "z = np.finfo(np.float32).eps\nw = 1.0 - 0.5\n"
        "a = low * (1.0 - relative_margin(3))\nb = (1 + FUNCTION_REL_MARGIN) * high\n"
        "c = x * (1.0 + 4.0 * EPS)\nd = y * (1 - self.margin)\ne = v * (1.0 + gamma(4))\n"
        "f = (1.0 - share) * rest\ng = hi * (1.0 - chord)\n"
    )
    kinds = [what for _, what in hand_rounding(ast.parse(source))]
    assert sorted(kinds) == sorted(["constant EPS", "float64 epsilon", "constant REL_MARGIN",
                                    "nextafter call", "hand-written margin 1 ± literal",
                                    *["hand-written scaling by 1 ± margin"] * 5])


def test_nothing_outside_the_numerics_core_rounds_by_hand() -> None:
    offences = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if CORE in path.parents:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            offences += [f"{path.relative_to(ROOT)}:{line}: {what}"
                         for line, what in hand_rounding(tree)]
    assert offences == [], "round through verifier.numerics instead:\n" + "\n".join(offences)
