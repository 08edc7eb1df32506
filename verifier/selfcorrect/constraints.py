"""Safe-ordering constraints ⟨P, Q⟩ with class references resolved to indices (paper 004, Def. 1).

:class:`ConstraintSet` is what the self-correcting layer consumes: every postcondition is a DNF
of strict order literals ``(a, b)`` meaning ``y_a < y_b`` over class *indices* in
``range(num_classes)``; every precondition is a schema object from
:mod:`verifier.selfcorrect.schema` whose class references (``predicted_in``) are indices too.
Build one from a parsed file with :func:`build_constraint_set`, or load a file with
:func:`verifier.selfcorrect.loaders.load_constraints`.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from verifier.errors import CertgateInputError
from verifier.network import positional_names
from verifier.selfcorrect.input_names import (
    INPUT_NAMES,
    NAMES_UNKNOWN,
    PLACEHOLDER,
)
from verifier.selfcorrect.schema import (
    AllPrecondition,
    AlwaysPrecondition,
    BoxPrecondition,
    ClassRef,
    ConstraintFileSpec,
    LinearPrecondition,
    Precondition,
    PredictedInPrecondition,
    UnionPrecondition,
)

OrderLiteral = tuple[int, int]
"""``(a, b)``: ``y_a < y_b`` (strict)."""
Conjunction = tuple[OrderLiteral, ...]
DNF = tuple[Conjunction, ...]

_INDEX_PATTERN = re.compile(r"^y?(\d+)$")


class ConstraintError(CertgateInputError):
    """A constraint file or constraint set is malformed; the message names the field."""


class InputNamesUnknownError(ConstraintError):
    """The file names inputs, but neither its ``inputs:`` header nor the model names them; a
    check without the model (``certgate config check``) leaves this to the deploy step."""


class UnsatisfiableConstraintWarning(UserWarning):
    """A constraint whose postcondition no ordering of the classes satisfies."""


def never_satisfiable(constraint: SafeOrderingConstraint, num_classes: int) -> bool:
    """True when every disjunct of the postcondition is a cyclic order (no ranking fits)."""
    from verifier.selfcorrect.graphs import adjacency_from_literals, graph_tables

    for disjunct in constraint.postcondition:
        cyclic, _, _, _ = graph_tables(adjacency_from_literals(list(disjunct), num_classes)[None])
        if not bool(cyclic[0]):
            return False
    return True


@dataclass(frozen=True)
class SafeOrderingConstraint:
    """⟨precondition, postcondition⟩: where the precondition holds, some disjunct of the
    postcondition (all its literals ``y_a < y_b``) must hold."""

    name: str
    precondition: Precondition
    postcondition: DNF
    description: str | None = None


@dataclass(frozen=True)
class ConstraintSet:
    """An ordered list of constraints over ``num_classes`` classes (order matters: it fixes the
    enumeration order of the DNF of the active properties, DESIGN D8)."""

    constraints: tuple[SafeOrderingConstraint, ...]
    num_classes: int
    class_names: tuple[str, ...]
    input_size: int | None = None

    def __post_init__(self) -> None:
        validate_constraints(self.constraints, self.num_classes, self.input_size)
        if len(self.class_names) != self.num_classes:
            raise ConstraintError(
                f"class_names has {len(self.class_names)} names for {self.num_classes} classes"
            )
        for constraint in self.constraints:
            if never_satisfiable(constraint, self.num_classes):
                warnings.warn(
                    f"constraint {constraint.name!r} can never hold: every disjunct of its "
                    "postcondition orders classes in a cycle, so inputs where it is active get ⊥",
                    UnsatisfiableConstraintWarning,
                    stacklevel=3,
                )

    def __len__(self) -> int:
        return len(self.constraints)

    @property
    def names(self) -> list[str]:
        return [constraint.name for constraint in self.constraints]

    def describe(self) -> str:
        """A readable multi-line summary: classes, inputs and one block per constraint."""
        inputs = "any" if self.input_size is None else str(self.input_size)
        lines = [
            f"{len(self.constraints)} safe-ordering constraint(s) over {self.num_classes} classes "
            f"({', '.join(self.class_names)}); input size: {inputs}"
        ]
        for constraint in self.constraints:
            lines.append(f"{constraint.name}:")
            if constraint.description:
                lines.append(f"  ({constraint.description})")
            lines.append(f"  if   {self._describe_precondition(constraint.precondition)}")
            disjuncts = [
                " and ".join(f"{self.class_names[a]} < {self.class_names[b]}" for a, b in conj)
                for conj in constraint.postcondition
            ]
            joined = (
                disjuncts[0]
                if len(disjuncts) == 1
                else " or ".join(f"({text})" for text in disjuncts)
            )
            lines.append(f"  then {joined}")
        return "\n".join(lines)

    def _describe_precondition(self, precondition: Precondition) -> str:
        if isinstance(precondition, AlwaysPrecondition):
            return "always"
        if isinstance(precondition, BoxPrecondition):
            return "x in " + _describe_box(precondition)
        if isinstance(precondition, UnionPrecondition):
            return "x in " + " ∪ ".join(_describe_box(box) for box in precondition.boxes)
        if isinstance(precondition, LinearPrecondition):
            operator = "<" if precondition.strict else "<="
            rows = [
                f"{_describe_row(row)} {operator} {bound:g}"
                for row, bound in zip(precondition.a, precondition.b, strict=True)
            ]
            return " and ".join(rows)
        if isinstance(precondition, PredictedInPrecondition):
            names = ", ".join(self.class_names[int(c)] for c in precondition.classes)
            return f"predicted class in {{{names}}}"
        if isinstance(precondition, AllPrecondition):
            return " and ".join(
                f"[{self._describe_precondition(part)}]" for part in precondition.conditions
            )
        raise ConstraintError(f"unknown precondition kind {type(precondition).__name__}")

    def to_dict(self) -> dict[str, Any]:
        """The normalised file form: class names, counts, indices only (boxes and rows as
        positional lists, whether the file gave them by input name or not, so a set means one
        thing to the deploy step's fingerprint however it was written); loads back unchanged."""
        data: dict[str, Any] = {
            "classes": list(self.class_names),
            "num_classes": self.num_classes,
        }
        if self.input_size is not None:
            data["input_size"] = self.input_size
        data["constraints"] = [
            {
                "name": constraint.name,
                "precondition": constraint.precondition.model_dump(mode="json"),
                "postcondition": [
                    [[a, b] for a, b in conjunction] for conjunction in constraint.postcondition
                ],
                **({"description": constraint.description} if constraint.description else {}),
            }
            for constraint in self.constraints
        ]
        return data


def _describe_interval(low: float | None, high: float | None, closed: tuple[bool, bool]) -> str:
    if low is None and high is None:
        return "R"
    left = "(-inf" if low is None else ("[" if closed[0] else "(") + f"{low:g}"
    right = "inf)" if high is None else f"{high:g}" + ("]" if closed[1] else ")")
    return f"{left}, {right}"


def _describe_box(box: BoxPrecondition) -> str:
    lower_closed = _flags(box.lower_closed, box.size)
    upper_closed = _flags(box.upper_closed, box.size)
    return " × ".join(
        _describe_interval(
            _finite_or_none(low), _finite_or_none(high), (lower_closed[i], upper_closed[i])
        )
        for i, (low, high) in enumerate(zip(box.lower, box.upper, strict=True))
    )


def _describe_row(row: Sequence[float]) -> str:
    terms = [f"{coef:+g}·x{i}" for i, coef in enumerate(row) if coef != 0.0]
    return " ".join(terms) if terms else "0"


def _flags(flags: bool | list[bool], size: int) -> list[bool]:
    return [flags] * size if isinstance(flags, bool) else list(flags)


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None or math.isinf(value) else value


def _canonical_box(box: BoxPrecondition) -> BoxPrecondition:
    """Infinite sides as ``None`` and per-side closedness flags as lists."""
    return BoxPrecondition(
        kind="box",
        lower=[_finite_or_none(v) for v in box.lower],
        upper=[_finite_or_none(v) for v in box.upper],
        lower_closed=_flags(box.lower_closed, box.size),
        upper_closed=_flags(box.upper_closed, box.size),
    )


def validate_constraints(
    constraints: Iterable[SafeOrderingConstraint], num_classes: int, input_size: int | None
) -> None:
    """Check indices against ``num_classes``, input widths against ``input_size``, and that no
    postcondition or disjunct is empty and no literal compares a class with itself.

    Raises:
        ConstraintError: naming the constraint, disjunct and literal at fault.
    """
    if num_classes < 1:
        raise ConstraintError(f"num_classes must be >= 1, got {num_classes}")
    seen: set[str] = set()
    for constraint in constraints:
        where = f"constraint {constraint.name!r}"
        if constraint.name in seen:
            raise ConstraintError(f"{where}: duplicate constraint name")
        seen.add(constraint.name)
        if not constraint.postcondition:
            raise ConstraintError(f"{where}: the postcondition has no disjunct")
        for d_index, conjunction in enumerate(constraint.postcondition):
            if not conjunction:
                raise ConstraintError(f"{where}: postcondition disjunct {d_index} is empty")
            for l_index, (a, b) in enumerate(conjunction):
                for value in (a, b):
                    if not 0 <= value < num_classes:
                        raise ConstraintError(
                            f"{where}: postcondition.{d_index}.{l_index}: class index {value} "
                            f"is out of range for {num_classes} classes"
                        )
                if a == b:
                    raise ConstraintError(
                        f"{where}: postcondition.{d_index}.{l_index}: literal y{a} < y{b} "
                        "compares a class with itself"
                    )
        for c_index in _predicted_classes(constraint.precondition):
            if not 0 <= c_index < num_classes:
                raise ConstraintError(
                    f"{where}: precondition predicted_in class {c_index} is out of range "
                    f"for {num_classes} classes"
                )
        width = precondition_input_size(constraint.precondition)
        if width is not None and input_size is not None and width != input_size:
            raise ConstraintError(
                f"{where}: the precondition reads {width} inputs, the set has input_size "
                f"{input_size}"
            )


def _predicted_classes(precondition: Precondition) -> list[int]:
    if isinstance(precondition, PredictedInPrecondition):
        return [int(c) for c in precondition.classes]
    if isinstance(precondition, AllPrecondition):
        return [c for part in precondition.conditions for c in _predicted_classes(part)]
    return []


def precondition_input_size(precondition: Precondition) -> int | None:
    """Width of ``x`` the precondition reads (``None`` if it reads no input coordinate).

    Raises:
        ConstraintError: parts of an ``all`` precondition disagree on the width.
    """
    if isinstance(precondition, BoxPrecondition | LinearPrecondition):
        return precondition.size
    if isinstance(precondition, UnionPrecondition):
        return precondition.boxes[0].size
    if isinstance(precondition, AllPrecondition):
        widths = {precondition_input_size(part) for part in precondition.conditions} - {None}
        if len(widths) > 1:
            raise ConstraintError(
                f"the parts of an 'all' precondition read {sorted(widths)} inputs"
            )
        return widths.pop() if widths else None
    return None


def resolve_class(ref: ClassRef, class_names: Sequence[str], where: str) -> int:
    """Index of a class given by index, name, or ``y<index>``.

    Raises:
        ConstraintError: unknown name or out-of-range index, naming ``where``.
    """
    count = len(class_names)
    if isinstance(ref, bool):
        raise ConstraintError(f"{where}: expected a class name or index, got {ref!r}")
    if isinstance(ref, int):
        index = ref
    elif ref in class_names:
        return class_names.index(ref)
    elif (match := _INDEX_PATTERN.match(ref)) is not None:
        index = int(match.group(1))
    else:
        raise ConstraintError(
            f"{where}: unknown class {ref!r}; classes are {', '.join(class_names)} "
            f"(or indices 0..{count - 1})"
        )
    if not 0 <= index < count:
        raise ConstraintError(f"{where}: class index {index} is out of range for {count} classes")
    return index


def _resolve_precondition(
    precondition: Precondition, class_names: Sequence[str], where: str
) -> Precondition:
    """Class names to indices, boxes in canonical form (see :func:`_canonical_box`)."""
    if isinstance(precondition, BoxPrecondition):
        return _canonical_box(precondition)
    if isinstance(precondition, UnionPrecondition):
        return UnionPrecondition(
            kind="union", boxes=[_canonical_box(box) for box in precondition.boxes]
        )
    if isinstance(precondition, PredictedInPrecondition):
        classes = [
            resolve_class(ref, class_names, f"{where}.classes.{i}")
            for i, ref in enumerate(precondition.classes)
        ]
        return PredictedInPrecondition(kind="predicted_in", classes=classes)
    if isinstance(precondition, AllPrecondition):
        parts = [
            _resolve_precondition(part, class_names, f"{where}.conditions.{i}")
            for i, part in enumerate(precondition.conditions)
        ]
        return AllPrecondition(kind="all", conditions=parts)
    return precondition


def _class_count(spec: ConstraintFileSpec, num_classes: int | None, source: str) -> int:
    declared = len(spec.classes) if spec.classes is not None else spec.num_classes
    if declared is not None and num_classes is not None and declared != num_classes:
        raise ConstraintError(
            f"{source}: the file declares {declared} classes but the model has {num_classes}"
        )
    count = declared if declared is not None else num_classes
    if count is None:
        raise ConstraintError(
            f"{source}: the class count is unknown; give 'classes' or 'num_classes' in the file "
            "or the model's class count"
        )
    return count


def build_constraint_set(
    spec: ConstraintFileSpec, num_classes: int | None = None, source: str = "constraints"
) -> ConstraintSet:
    """Resolve a parsed constraint file into a :class:`ConstraintSet`.

    Args:
        spec: the parsed file.
        num_classes: the classifier's class count; must agree with the file if both give one.
        source: a name for error messages (usually the file path).

    Raises:
        ConstraintError: unknown class names, out-of-range indices, inconsistent input widths.
    """
    count = _class_count(spec, num_classes, source)
    class_names = (
        tuple(spec.classes) if spec.classes is not None else tuple(f"y{i}" for i in range(count))
    )
    constraints = []
    widths: set[int] = set()
    for c_index, item in enumerate(spec.constraints):
        where = f"{source}: constraints.{c_index}"
        postcondition = tuple(
            tuple(
                (
                    resolve_class(a, class_names, f"{where}.postcondition.{d}.{l_index}"),
                    resolve_class(b, class_names, f"{where}.postcondition.{d}.{l_index}"),
                )
                for l_index, (a, b) in enumerate(conjunction)
            )
            for d, conjunction in enumerate(item.postcondition)
        )
        precondition = _resolve_precondition(
            item.precondition, class_names, f"{where}.precondition"
        )
        try:
            width = precondition_input_size(precondition)
        except ConstraintError as error:
            raise ConstraintError(f"{where}.precondition: {error}") from error
        if width is not None:
            widths.add(width)
        constraints.append(
            SafeOrderingConstraint(item.name, precondition, postcondition, item.description)
        )
    if spec.input_size is not None:
        widths.add(spec.input_size)
    if spec.inputs is not None:
        widths.add(len(spec.inputs))
    if len(widths) > 1:
        raise ConstraintError(
            f"{source}: preconditions read different input sizes {sorted(widths)}"
        )
    input_size = widths.pop() if widths else None
    return ConstraintSet(tuple(constraints), count, class_names, input_size)


def _file_input_names(
    data: Any, model_names: Sequence[str] | None, source: str
) -> tuple[list[str] | None, bool]:
    """The input names a file's named fields resolve against, and whether they say only a
    position (``x0, x1, …`` or one tensor's ``input[0], input[1], …``): the file's ``inputs:``
    header, which must agree with the model's names (when the model has names of its own) or
    at least its size; else the model's names.

    Raises:
        ConstraintError: the header and the model disagree, naming ``inputs``.
    """
    header = data.get("inputs") if isinstance(data, dict) else None
    if not (isinstance(header, list) and all(isinstance(name, str) for name in header)):
        header = None
    if header is None:
        placeholder = model_names is not None and positional_names(model_names, "x")
        return (None if model_names is None else list(model_names)), placeholder
    if model_names is None:
        return header, False
    if len(header) != len(model_names):
        raise ConstraintError(
            f"{source}: inputs: the file lists {len(header)} inputs, the model has "
            f"{len(model_names)}"
        )
    if not positional_names(model_names, "x"):
        for position, (ours, theirs) in enumerate(zip(header, model_names, strict=True)):
            if ours != theirs:
                raise ConstraintError(
                    f"{source}: inputs.{position}: the file names input {position} {ours!r}, "
                    f"the model {theirs!r}; list the model's inputs in its order, or leave "
                    "'inputs' out to use the model's names"
                )
    return header, False


def constraint_set_from_dict(
    data: Any,
    num_classes: int | None = None,
    source: str = "constraints",
    input_names: Sequence[str] | None = None,
) -> ConstraintSet:
    """Validate a dict in the schema of :mod:`verifier.selfcorrect.schema` and resolve it.

    Args:
        input_names: the model's input names, which fields given by input name resolve
            against when the file has no ``inputs:`` header (and which the header must match).

    Raises:
        InputNamesUnknownError: the file names inputs and no input names are known (and it
            has no other fault).
        ConstraintError: with every schema violation as ``field.path: message``.
    """
    names, placeholder = _file_input_names(data, input_names, source)
    context = {INPUT_NAMES: names, PLACEHOLDER: placeholder}
    try:
        spec = ConstraintFileSpec.model_validate(data, context=context)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '<root>'}: {item['msg']}"
            for item in error.errors()
        )
        kind = (InputNamesUnknownError
                if all(item["type"] == NAMES_UNKNOWN for item in error.errors())
                else ConstraintError)
        raise kind(f"{source}: invalid constraints: {problems}") from error
    return build_constraint_set(spec, num_classes, source)
