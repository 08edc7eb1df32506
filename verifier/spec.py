"""Probabilistic specifications: events, probabilities, arithmetic over them, thresholds.

An *event* is a Boolean combination (``and``, ``or``, ``not``) of linear atoms over the network
outputs ``y`` and inputs ``x``, e.g. ``y[1] > y[0]``, ``x.sex <= 0``, ``age >= 18 and y.high >
y.low``. A *quantity* is an arithmetic expression (``+ − × ÷``, ``min``, ``max``, constants)
over named probabilities ``P[event]`` or ``P[event | condition]``. A :class:`Specification`
compares one quantity with a threshold.

Events and expressions are written as text and parsed with Python's ``ast`` restricted to a
whitelist of node types (no code is evaluated). Names resolve against the network's input and
output names: ``x.NAME``/``x[i]`` are inputs, ``y.NAME``/``y[i]`` outputs, and a bare ``NAME``
whichever of the two it names (an error if neither or both); ``x["NAME"]``/``y["NAME"]``
name any column, also one that is not a Python identifier (``x["sex=Male"]``,
``x["hours-per-week"]``).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from verifier.errors import CertgateInputError
from verifier.numerics import (
    COMPARISONS,
    Comparison,
    Verdict,
    add_down,
    add_up,
    down,
    interval_verdict,
    up,
)


class SpecError(CertgateInputError):
    """A specification that cannot be parsed or does not fit the network."""


# ----------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Atom:
    """``output_coeffs·y + input_coeffs·x + constant > 0`` (``strict``) or ``>= 0``."""

    output_coeffs: tuple[float, ...]
    input_coeffs: tuple[float, ...]
    constant: float
    strict: bool

    @property
    def reads_outputs(self) -> bool:
        return any(c != 0.0 for c in self.output_coeffs)

    @property
    def reads_inputs(self) -> bool:
        return any(c != 0.0 for c in self.input_coeffs)

    @property
    def orders_two_outputs(self) -> bool:
        """Whether the atom is ``c·(y_a − y_b) > 0`` (or ``>= 0``) for two outputs and ``c ≠
        0``, with no input and no constant: a strict or weak order of two outputs, which
        every classifier head preserves (:mod:`verifier.network`)."""
        nonzero = [c for c in self.output_coeffs if c != 0.0]
        return (len(nonzero) == 2 and nonzero[0] == -nonzero[1] and not self.reads_inputs
                and self.constant == 0.0)

    def negated(self) -> Atom:
        """The complement: ``not (e > 0)`` is ``−e >= 0`` and vice versa."""
        return Atom(
            tuple(-c for c in self.output_coeffs),
            tuple(-c for c in self.input_coeffs),
            -self.constant,
            not self.strict,
        )


@dataclass(frozen=True)
class And:
    parts: tuple[Event, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Event, ...]


@dataclass(frozen=True)
class Not:
    part: Event


@dataclass(frozen=True)
class Always:
    """The certain event (used for unconditional probabilities)."""


Event = Atom | And | Or | Not | Always


def atoms_of(event: Event) -> list[Atom]:
    """The distinct atoms of an event, in first-occurrence order."""
    found: list[Atom] = []

    def visit(node: Event) -> None:
        if isinstance(node, Atom):
            if node not in found:
                found.append(node)
        elif isinstance(node, And | Or):
            for part in node.parts:
                visit(part)
        elif isinstance(node, Not):
            visit(node.part)

    visit(event)
    return found


def evaluate_event(event: Event, atom_values: dict[Atom, np.ndarray]) -> np.ndarray:
    """Three-valued (Kleene) truth of ``event`` per box: 1 true, 0 unknown, −1 false.

    ``atom_values[a]`` holds the three-valued truth of atom ``a`` per box.
    """
    if isinstance(event, Atom):
        return atom_values[event]
    if isinstance(event, Always):
        return np.ones(len(next(iter(atom_values.values()))) if atom_values else 1, dtype=np.int8)
    if isinstance(event, Not):
        return -evaluate_event(event.part, atom_values)
    values = [evaluate_event(part, atom_values) for part in event.parts]
    stacked = np.stack(values)
    return stacked.min(axis=0) if isinstance(event, And) else stacked.max(axis=0)


def atom_truth(atom: Atom, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Kleene truth of an atom from sound bounds ``[lower, upper]`` of its left-hand side."""
    truth = np.zeros(lower.shape, dtype=np.int8)
    if atom.strict:
        truth[lower > 0.0] = 1
        truth[upper <= 0.0] = -1
    else:
        truth[lower >= 0.0] = 1
        truth[upper < 0.0] = -1
    return truth


def evaluate_event_at_points(event: Event, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Exact Boolean truth of ``event`` at concrete inputs ``x`` with outputs ``y``."""
    if isinstance(event, Always):
        return np.ones(x.shape[0], dtype=bool)
    if isinstance(event, Atom):
        value = y @ np.asarray(event.output_coeffs) + x @ np.asarray(event.input_coeffs)
        value = value + event.constant
        return value > 0.0 if event.strict else value >= 0.0
    if isinstance(event, Not):
        return ~evaluate_event_at_points(event.part, x, y)
    parts = [evaluate_event_at_points(part, x, y) for part in event.parts]
    return np.logical_and.reduce(parts) if isinstance(event, And) else np.logical_or.reduce(parts)


@dataclass(frozen=True)
class Names:
    """Input and output names that events refer to."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @classmethod
    def of(cls, inputs: Sequence[str], outputs: Sequence[str]) -> Names:
        return cls(tuple(inputs), tuple(outputs))


@dataclass
class _Linear:
    """A linear form ``out·y + inp·x + const`` during parsing."""

    out: np.ndarray
    inp: np.ndarray
    const: float = 0.0

    def scaled(self, factor: float) -> _Linear:
        return _Linear(self.out * factor, self.inp * factor, self.const * factor)

    def plus(self, other: _Linear) -> _Linear:
        return _Linear(self.out + other.out, self.inp + other.inp, self.const + other.const)

    @property
    def is_constant(self) -> bool:
        return not (self.out.any() or self.inp.any())


class _EventParser:
    def __init__(self, names: Names, text: str) -> None:
        self.names = names
        self.text = text

    def error(self, message: str) -> SpecError:
        return SpecError(f"in event {self.text!r}: {message}")

    def zero(self) -> _Linear:
        return _Linear(np.zeros(len(self.names.outputs)), np.zeros(len(self.names.inputs)))

    def variable(self, side: str, index: int) -> _Linear:
        form = self.zero()
        target = form.out if side == "y" else form.inp
        if not 0 <= index < len(target):
            count = len(target)
            kind = "outputs" if side == "y" else "inputs"
            raise self.error(f"{side}[{index}] is out of range: the network has {count} {kind}")
        target[index] = 1.0
        return form

    def named(self, side: str | None, name: str) -> _Linear:
        in_inputs = name in self.names.inputs
        in_outputs = name in self.names.outputs
        if side == "x" or (side is None and in_inputs and not in_outputs):
            if not in_inputs:
                raise self.error(f"unknown input {name!r}; inputs: {', '.join(self.names.inputs)}")
            return self.variable("x", self.names.inputs.index(name))
        if side == "y" or (side is None and in_outputs and not in_inputs):
            if not in_outputs:
                raise self.error(
                    f"unknown output {name!r}; outputs: {', '.join(self.names.outputs)}"
                )
            return self.variable("y", self.names.outputs.index(name))
        if in_inputs and in_outputs:
            raise self.error(
                f"{name!r} names both an input and an output: write x[{name!r}] or "
                f"y[{name!r}]"
            )
        raise self.error(
            f"unknown feature or output {name!r}; inputs: {', '.join(self.names.inputs)}; "
            f"outputs: {', '.join(self.names.outputs)}"
        )

    def linear(self, node: ast.expr) -> _Linear:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            form = self.zero()
            form.const = float(node.value)
            return form
        if isinstance(node, ast.Name):
            return self.named(None, node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            side = _side(node.value.id)
            if side is None:
                raise self.error(
                    f"use x.NAME for inputs and y.NAME for outputs, not {node.value.id}"
                )
            return self.named(side, node.attr)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            side = _side(node.value.id)
            index = node.slice
            constant = index.value if isinstance(index, ast.Constant) else None
            if side is not None and isinstance(constant, str):
                return self.named(side, constant)
            if side is None or not isinstance(constant, int) or isinstance(constant, bool):
                raise self.error('subscripts must be x[INDEX] or y[INDEX] with an integer index, '
                                 'or x["NAME"] / y["NAME"] for any name')
            return self.variable(side, constant)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner = self.linear(node.operand)
            return inner.scaled(-1.0) if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
            right = self.linear(node.right)
            return self.linear(node.left).plus(
                right.scaled(-1.0) if isinstance(node.op, ast.Sub) else right
            )
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
            left, right = self.linear(node.left), self.linear(node.right)
            if isinstance(node.op, ast.Div):
                if not right.is_constant or right.const == 0.0:
                    raise self.error("division is only by a non-zero constant")
                return left.scaled(1.0 / right.const)
            if left.is_constant:
                return right.scaled(left.const)
            if right.is_constant:
                return left.scaled(right.const)
            raise self.error("events must be linear: a product needs a constant factor")
        raise self.error(f"unsupported expression {ast.unparse(node)!r}")

    def event(self, node: ast.expr) -> Event:
        if isinstance(node, ast.BoolOp):
            parts = tuple(self.event(value) for value in node.values)
            return And(parts) if isinstance(node.op, ast.And) else Or(parts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return Not(self.event(node.operand))
        if isinstance(node, ast.Constant) and node.value is True:
            return Always()
        if isinstance(node, ast.Compare):
            atoms: list[Event] = []
            left = node.left
            for op, right in zip(node.ops, node.comparators, strict=True):
                atoms.append(self.comparison(left, op, right))
                left = right
            return atoms[0] if len(atoms) == 1 else And(tuple(atoms))
        raise self.error(f"expected a comparison, 'and', 'or' or 'not', got {ast.unparse(node)!r}")

    def comparison(self, left_node: ast.expr, op: ast.cmpop, right_node: ast.expr) -> Event:
        left, right = self.linear(left_node), self.linear(right_node)
        difference = left.plus(right.scaled(-1.0))  # left − right
        if difference.is_constant:
            raise self.error(f"comparison {ast.unparse(left_node)} vs {ast.unparse(right_node)} "
                             "reads neither inputs nor outputs")
        greater = _atom(difference, strict=False)
        less = _atom(difference.scaled(-1.0), strict=False)
        if isinstance(op, ast.Gt):
            return _atom(difference, strict=True)
        if isinstance(op, ast.GtE):
            return greater
        if isinstance(op, ast.Lt):
            return _atom(difference.scaled(-1.0), strict=True)
        if isinstance(op, ast.LtE):
            return less
        if isinstance(op, ast.Eq):
            return And((greater, less))
        if isinstance(op, ast.NotEq):
            return Or((_atom(difference, strict=True), _atom(difference.scaled(-1.0), strict=True)))
        raise self.error(f"unsupported comparison {type(op).__name__}")


def input_reference(name: str) -> str:
    """How an event names input ``name``: ``x.NAME`` for a Python identifier, else
    ``x["NAME"]`` (one-hot columns such as ``sex=Male``, ``hours-per-week``)."""
    return f"x.{name}" if name.isidentifier() else f"x[{name!r}]"


def _side(name: str) -> str | None:
    if name in ("x", "inputs", "input"):
        return "x"
    if name in ("y", "out", "outputs", "output"):
        return "y"
    return None


def _atom(form: _Linear, strict: bool) -> Atom:
    return Atom(tuple(form.out.tolist()), tuple(form.inp.tolist()), float(form.const), strict)


def _syntax_problem(error: SyntaxError) -> str:
    """Python's reason for a syntax error, except for a number written with a leading zero
    (``dept == 010``, a code as a CSV writes it), where Python advises an octal prefix that
    would read ``0o10`` as 8: the number is written without its leading zeros."""
    if "leading zeros in decimal integer literals" in str(error.msg):
        return ("a number with a leading zero: write it without (010 is 10; the value a CSV "
                "writes as 010 is read as 10)")
    return str(error.msg)


def parse_event(text: str, names: Names) -> Event:
    """Parse an event such as ``"y.high > y.low and x.age >= 18"``; errors name the problem."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise SpecError(f"in event {text!r}: not a valid expression ({_syntax_problem(error)})"
                        ) from error
    return _EventParser(names, text).event(tree.body)


def class_event(cls: int, names: Names) -> Event:
    """``argmax(y) == cls`` with ties going to the lowest index (as ``numpy.argmax``).

    ``names.outputs`` are a classifier's outputs: a single-output network's classes (class 1
    iff its logit is > 0) are the two outputs of
    :meth:`~verifier.network.Network.as_classifier`, whose names these must be."""
    outputs = len(names.outputs)
    no_inputs = (0.0,) * len(names.inputs)
    if outputs == 1:
        raise SpecError(
            f"class events need a classifier's outputs, but {names.outputs[0]!r} is a single "
            "output; name the outputs of network.as_classifier() (class 1 iff the logit > 0)"
        )
    if not 0 <= cls < outputs:
        raise SpecError(f"class {cls} is out of range for a network with {outputs} outputs")
    atoms = []
    for other in range(outputs):
        if other == cls:
            continue
        coeffs = np.zeros(outputs)
        coeffs[cls], coeffs[other] = 1.0, -1.0
        # y_cls > y_other for lower indices, y_cls >= y_other for higher ones
        atoms.append(Atom(tuple(coeffs.tolist()), no_inputs, 0.0, strict=other < cls))
    return And(tuple(atoms)) if len(atoms) > 1 else atoms[0]


# ------------------------------------------------------------------------------ quantities


@dataclass(frozen=True)
class ProbabilityTerm:
    """``P[event | condition]`` (``condition`` None: unconditional)."""

    event: Event
    condition: Event | None = None
    event_text: str = ""
    condition_text: str = ""

    def describe(self) -> str:
        if self.condition is None:
            return f"P[{self.event_text}]"
        return f"P[{self.event_text} | {self.condition_text}]"


@dataclass(frozen=True)
class Const:
    value: float


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class BinaryOp:
    op: Literal["+", "-", "*", "/"]
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Extremum:
    op: Literal["min", "max"]
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Negate:
    arg: Expr


Expr = Const | Ref | BinaryOp | Extremum | Negate

Interval = tuple[float, float]


def interval_eval(expr: Expr, values: dict[str, Interval]) -> Interval:
    """Sound interval enclosure of ``expr`` given intervals of its references.

    Every operation rounds outward by one float step (:mod:`verifier.numerics.rounding`:
    IEEE operations are correctly rounded, so the step encloses the exact result), except
    a sum or difference the float computes exactly (its TwoSum error says so: ``0 − 1`` is
    ``-1``, not ``-1.0000000000000002``), and past 0 when the operands' signs fix the
    result's (a ratio of probabilities starts at 0, not at ``-5e-324``).
    Division by an interval containing zero (or a NaN end, or ends out of order) gives
    ``(−∞, ∞)``, except a
    non-negative numerator over a non-negative denominator that is not ``[0, 0]`` (a ratio
    of probabilities whose lower one may vanish): ``[a_lo / b_hi, ∞]``, since ``a / b``
    only grows as ``b`` falls towards 0 (``a / 0 = ∞`` for ``a > 0``; a lower end above 0
    needs ``a_lo > 0``, so ``0 / 0`` is never inside it).
    """
    if isinstance(expr, Const):
        return (expr.value, expr.value)
    if isinstance(expr, Ref):
        return values[expr.name]
    if isinstance(expr, Negate):
        low, high = interval_eval(expr.arg, values)
        return (-high, -low)
    if isinstance(expr, Extremum):
        parts = [interval_eval(arg, values) for arg in expr.args]
        pick = min if expr.op == "min" else max
        return (pick(p[0] for p in parts), pick(p[1] for p in parts))
    a_lo, a_hi = interval_eval(expr.left, values)
    b_lo, b_hi = interval_eval(expr.right, values)
    if expr.op == "+":
        return _on_sign(float(add_down(a_lo, b_lo)), float(add_up(a_hi, b_hi)),
                        a_lo >= 0.0 and b_lo >= 0.0, a_hi <= 0.0 and b_hi <= 0.0)
    if expr.op == "-":
        return (float(add_down(a_lo, -b_hi)), float(add_up(a_hi, -b_lo)))
    if expr.op == "/":
        if not (0.0 < b_lo <= b_hi or b_lo <= b_hi < 0.0):
            return _unbounded_quotient(a_lo, b_lo, b_hi)
        b_lo, b_hi = _on_sign(down(1.0 / b_hi), up(1.0 / b_lo), b_lo > 0.0, b_hi < 0.0)
    products = [_product(x, y) for x in (a_lo, a_hi) for y in (b_lo, b_hi)]
    return _on_sign(down(min(products)), up(max(products)),
                    (a_lo >= 0.0 and b_lo >= 0.0) or (a_hi <= 0.0 and b_hi <= 0.0),
                    (a_lo >= 0.0 and b_hi <= 0.0) or (a_hi <= 0.0 and b_lo >= 0.0))


def _unbounded_quotient(a_lo: float, b_lo: float, b_hi: float) -> Interval:
    """``a / b`` for ``a >= a_lo`` and ``b`` in ``[b_lo, b_hi]`` reaching 0 (see
    :func:`interval_eval`)."""
    if a_lo >= 0.0 and b_lo == 0.0 and b_hi > 0.0 and math.isfinite(b_hi):
        return max(0.0, down(a_lo / b_hi)), math.inf
    return -math.inf, math.inf


def _on_sign(low: float, high: float, nonnegative: bool, nonpositive: bool) -> Interval:
    """``[low, high]`` kept on the side of 0 where the operands' signs put the exact result
    (a sum or product of nonnegative numbers, the reciprocal of a positive one): outward
    rounding of an exact 0 would otherwise report ``-5e-324``, a sign the quantity cannot
    have. The exact value lies on that side, so the clamped interval still encloses it."""
    if nonnegative:
        low = max(low, 0.0)
    if nonpositive:
        high = min(high, 0.0)
    return low, high


def _product(a: float, b: float) -> float:
    if a == 0.0 or b == 0.0:
        return 0.0
    return a * b


class _ExprParser:
    def __init__(self, names: Sequence[str], text: str) -> None:
        self.names = set(names)
        self.text = text

    def error(self, message: str) -> SpecError:
        return SpecError(f"in expression {self.text!r}: {message}")

    def parse(self, node: ast.expr) -> Expr:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return Const(float(node.value))
        if isinstance(node, ast.Name):
            if node.id not in self.names:
                known = ", ".join(sorted(self.names)) or "none"
                raise self.error(f"unknown probability {node.id!r}; defined: {known}")
            return Ref(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return Negate(self.parse(node.operand))
        if isinstance(node, ast.BinOp):
            ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
            op = ops.get(type(node.op))
            if op is None:
                raise self.error(f"unsupported operator in {ast.unparse(node)!r}")
            return BinaryOp(op, self.parse(node.left), self.parse(node.right))  # type: ignore[arg-type]
        if (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("min", "max") and node.args and not node.keywords
        ):
            return Extremum(node.func.id, tuple(self.parse(arg) for arg in node.args))  # type: ignore[arg-type]
        raise self.error(f"unsupported expression {ast.unparse(node)!r}")


def parse_expression(text: str, probability_names: Sequence[str]) -> Expr:
    """Parse ``"p_female / p_male"`` or ``"min(a, b) - 0.1"`` over named probabilities."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise SpecError(f"in expression {text!r}: not a valid expression "
                        f"({_syntax_problem(error)})") from error
    return _ExprParser(probability_names, text).parse(tree.body)


@dataclass
class Specification:
    """``expression(probabilities) <comparison> threshold``; without a comparison the
    specification only asks for bounds of the expression."""

    probabilities: dict[str, ProbabilityTerm]
    expression: Expr
    expression_text: str
    comparison: Comparison | None = None
    threshold: float | None = None
    name: str = "specification"
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.comparison is None) != (self.threshold is None):
            raise SpecError("give both a comparison and a threshold, or neither")
        if self.comparison is not None and self.comparison not in COMPARISONS:
            raise SpecError(f"comparison must be one of {COMPARISONS}, got {self.comparison!r}")

    def decide(self, interval: Interval) -> Verdict:
        """The proven verdict for an enclosure of the expression (``unknown`` if undecided;
        the table of :mod:`verifier.numerics.comparison`)."""
        if self.comparison is None or self.threshold is None:
            return "unknown"
        return interval_verdict(self.comparison, self.threshold, *interval)

    def describe(self) -> str:
        lines = [f"{self.name}: {self.expression_text}"
                 + (f" {self.comparison} {self.threshold}" if self.comparison else "")]
        for key, term in self.probabilities.items():
            lines.append(f"  {key} = {term.describe()}")
        return "\n".join(lines)


def probability(event: str, names: Names, given: str | None = None) -> ProbabilityTerm:
    """A probability term from event texts."""
    return ProbabilityTerm(
        parse_event(event, names),
        parse_event(given, names) if given else None,
        event,
        given or "",
    )


def specification_from_dict(data: dict[str, Any], names: Names) -> Specification:
    """Build a specification from its JSON/YAML form::

        probabilities:
          p_f: {event: "y.high > y.low", given: "x.sex <= 0"}
          p_m: {event: "y.high > y.low", given: "x.sex >= 1"}
        expression: "p_f / p_m"
        comparison: ">"
        threshold: 0.85
    """
    allowed = {"name", "probabilities", "expression", "comparison", "threshold"}
    unknown = set(data) - allowed
    if unknown:
        raise SpecError(f"unknown specification keys: {', '.join(sorted(unknown))}")
    raw = data.get("probabilities")
    if not isinstance(raw, dict) or not raw:
        raise SpecError("specification.probabilities must map names to {event, given}")
    terms = {}
    for key, value in raw.items():
        if not isinstance(value, dict) or "event" not in value:
            raise SpecError(f"specification.probabilities.{key}: needs an 'event'")
        extra = set(value) - {"event", "given"}
        if extra:
            raise SpecError(f"specification.probabilities.{key}: unknown keys {sorted(extra)}")
        terms[key] = probability(str(value["event"]), names, value.get("given"))
    text = str(data.get("expression", next(iter(terms)) if len(terms) == 1 else ""))
    if not text:
        raise SpecError("specification.expression is required with several probabilities")
    threshold = data.get("threshold")
    return Specification(
        terms,
        parse_expression(text, list(terms)),
        text,
        data.get("comparison"),
        None if threshold is None else float(threshold),
        str(data.get("name", "specification")),
    )


# --------------------------------------------------------------------------------- builders


def check_parity_gamma(form: Literal["ratio", "difference"], gamma: float) -> None:
    """The one range rule of demographic parity's threshold: γ in (0, 1] for the ratio form,
    in (0, 1) for the difference form; raises :class:`SpecError` (a ``ValueError``)."""
    if form == "ratio" and not 0.0 < gamma <= 1.0:
        raise SpecError(f"gamma must lie in (0, 1] for the ratio form, got {gamma}")
    if form == "difference" and not 0.0 < gamma < 1.0:
        raise SpecError(f"gamma must lie in (0, 1) for the difference form, got {gamma}")


def demographic_parity(
    names: Names, *, protected: str, privileged: float, favorable_class: int,
    gamma: float, qualified: str | None = None, form: Literal["ratio", "difference"] = "ratio",
) -> Specification:
    """Demographic parity of ``favorable_class`` between ``protected == privileged`` and the
    rest: ratio form ``P[fav | unprivileged] / P[fav | privileged] > gamma`` (γ in (0, 1]),
    difference form ``|P[fav | unpriv] − P[fav | priv]| < gamma``. With ``qualified`` every
    probability is also conditioned on that event (parity of qualified persons)."""
    check_parity_gamma(form, gamma)
    if protected not in names.inputs:
        raise SpecError(
            f"protected feature {protected!r} is not an input; inputs: {', '.join(names.inputs)}"
        )
    favorable = class_event(favorable_class, names)
    fav_text = f"class == {favorable_class}"
    groups = {
        "unprivileged": f"{input_reference(protected)} != {privileged!r}",
        "privileged": f"{input_reference(protected)} == {privileged!r}",
    }
    terms = {}
    for label, text in groups.items():
        condition_text = f"({text}) and ({qualified})" if qualified else text
        terms[f"p_{label}"] = ProbabilityTerm(
            favorable, parse_event(condition_text, names), fav_text, condition_text
        )
    if form == "ratio":
        text, comparison = "p_unprivileged / p_privileged", ">"
    else:
        text, comparison = "max(p_unprivileged - p_privileged, p_privileged - p_unprivileged)", "<"
    return Specification(
        terms, parse_expression(text, list(terms)), text, comparison, gamma,  # type: ignore[arg-type]
        name="demographic_parity" if not qualified else "parity_of_qualified_persons",
        metadata={"protected": protected, "privileged": privileged,
                  "favorable_class": favorable_class, "qualified": qualified, "form": form},
    )


def violation_probability(names: Names, violation: str, region: str | None = None,
                          threshold: float | None = None) -> Specification:
    """Probability that an output property is violated (``violation`` holds) over an input
    region, e.g. ACAS Xu φ2; with ``threshold``: require it to be at most that."""
    terms = {"p_violation": probability(violation, names, region)}
    return Specification(
        terms, Ref("p_violation"), "p_violation",
        "<=" if threshold is not None else None, threshold, name="violation_probability",
    )


def class_distribution(names: Names, region: str | None = None) -> Specification:
    """Probability of every output class (argmax) over the distribution, e.g. around a point."""
    outputs = len(names.outputs)
    terms = {
        f"p_class_{k}": ProbabilityTerm(
            class_event(k, names), parse_event(region, names) if region else None,
            f"class == {k}", region or "",
        )
        for k in range(outputs)
    }
    return Specification(
        terms, Ref("p_class_0"), "p_class_0", name="class_distribution",
    )
