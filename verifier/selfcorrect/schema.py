"""The YAML/JSON schema of safe-ordering constraints (pydantic v2, closed and frozen).

A constraint file looks like::

    classes: [COC, WL, WR, SL, SR]          # or num_classes: 5 (names optional)
    input_size: 5                           # optional; inferred from the preconditions
    constraints:
      - name: phi2
        precondition: {kind: box, lower: [0.6, null, null, 0.45, null],
                       upper: [null, null, null, null, -0.45]}
        postcondition:                      # DNF: a list of disjuncts, each a list of literals
          - ["SL < COC"]
          - ["WL < COC"]
          - [[2, 0]]                        # the pair [a, b] means y_a < y_b

Literals are ``"a < b"`` or ``"a > b"`` (``a``/``b`` a class name, an index, or ``y<index>``) or a
pair ``[a, b]`` meaning ``y_a < y_b``. Preconditions (``kind``): ``box`` (``null`` = unbounded side,
``lower_closed``/``upper_closed`` per side or for all sides), ``union`` of boxes, ``linear``
(every row ``a·x <= b``, or ``<`` with ``strict``), ``predicted_in`` (the argmax of the
*uncorrected* logits lies in ``classes``), ``always``, and ``all`` (a conjunction of preconditions).
Names are resolved to indices by :mod:`verifier.selfcorrect.constraints`.

Inputs may be named: a box's ``lower``/``upper``/``lower_closed``/``upper_closed`` and a linear
row ``a`` may each be a mapping from input name to value (``lower: {dti: 300}``); unnamed
inputs are unbounded (closed, coefficient 0). The names come from the file's ``inputs:`` header
or the model's input names, in the validation context (:mod:`verifier.selfcorrect.input_names`);
validation turns a named field into the positional list, so a validated precondition holds
lists only.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)

from verifier.selfcorrect.input_names import by_position

_LITERAL_PATTERN = re.compile(r"^\s*([^<>\s]+)\s*([<>])\s*([^<>\s]+)\s*$")


class SchemaModel(BaseModel):
    """Base of every schema model: unknown keys are errors and instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _parse_literal(value: Any) -> Any:
    """``"a < b"`` → ``(a, b)``; ``"a > b"`` → ``(b, a)``; a pair passes through unchanged."""
    if isinstance(value, str):
        match = _LITERAL_PATTERN.match(value)
        if match is None:
            raise ValueError(
                f"order literal {value!r} is not of the form 'a < b' or 'a > b' "
                "(a, b: class names, indices or y<index>)"
            )
        left, operator, right = match.groups()
        return (left, right) if operator == "<" else (right, left)
    if isinstance(value, list | tuple) and len(value) != 2:
        raise ValueError(f"an order literal pair needs exactly 2 entries [a, b], got {value!r}")
    return value


def _refuse_boolean(value: Any) -> Any:
    """A class is a name or an index, never a boolean: pydantic would read ``True`` as index 1,
    so a class named ``true`` written unquoted (a boolean in YAML; ``yes``/``no`` are strings
    in the YAML 1.2 core schema the files are read by) would silently become class 1."""
    if isinstance(value, bool):
        raise ValueError(
            f"a class is a name or an index, got the boolean {value!r}; YAML reads unquoted "
            "true/false as booleans: quote the class name"
        )
    return value


ClassRef = Annotated[int | str, BeforeValidator(_refuse_boolean)]
OrderLiteralSpec = Annotated[tuple[ClassRef, ClassRef], BeforeValidator(_parse_literal)]
"""``(a, b)``: the logit of class ``a`` must be strictly smaller than that of class ``b``."""


def _check_finite_or_none(values: list[float | None], field_name: str) -> None:
    for index, value in enumerate(values):
        if value is not None and math.isnan(value):
            raise ValueError(f"{field_name}[{index}] is NaN; use null for an unbounded side")


def _per_side(flags: bool | list[bool], size: int, field_name: str) -> list[bool]:
    if isinstance(flags, bool):
        return [flags] * size
    if len(flags) != size:
        raise ValueError(f"{field_name} has {len(flags)} entries, the box has {size} sides")
    return list(flags)


class BoxPrecondition(SchemaModel):
    """``lower <= x <= upper`` per coordinate; ``null`` is an unbounded side, a ``False`` in
    ``lower_closed``/``upper_closed`` makes that side strict (``<``)."""

    kind: Literal["box"]
    lower: list[float | None] = Field(min_length=1)
    upper: list[float | None] = Field(min_length=1)
    lower_closed: bool | list[bool] = True
    upper_closed: bool | list[bool] = True

    @model_validator(mode="before")
    @classmethod
    def _by_name(cls, data: Any, info: ValidationInfo) -> Any:
        """Fields given as ``{input name: value}`` to lists (unnamed: unbounded, closed); in a
        box written by name, a missing ``lower`` or ``upper`` is unbounded on every input."""
        if not isinstance(data, dict):
            return data
        fills = {"lower": None, "upper": None, "lower_closed": True, "upper_closed": True}
        named = {key: value for key, value in data.items()
                 if key in fills and isinstance(value, dict)}
        if not named:
            return data
        named = {**named, **{side: {} for side in ("lower", "upper") if side not in data}}
        resolved = {key: by_position(value, key, info.context, fills[key])
                    for key, value in named.items()}
        return {**data, **resolved}

    @model_validator(mode="after")
    def _check_box(self) -> BoxPrecondition:
        if len(self.lower) != len(self.upper):
            raise ValueError(f"lower has {len(self.lower)} entries but upper has {len(self.upper)}")
        _check_finite_or_none(self.lower, "lower")
        _check_finite_or_none(self.upper, "upper")
        for index, (low, high) in enumerate(zip(self.lower, self.upper, strict=True)):
            if low == math.inf or high == -math.inf:
                raise ValueError(
                    f"side {index} is empty: lower={low}, upper={high}; "
                    "use null for an unbounded side"
                )
        lower_closed = _per_side(self.lower_closed, len(self.lower), "lower_closed")
        upper_closed = _per_side(self.upper_closed, len(self.upper), "upper_closed")
        for index, (low, high) in enumerate(zip(self.lower, self.upper, strict=True)):
            if low is None or high is None:
                continue
            both_closed = lower_closed[index] and upper_closed[index]
            if low > high or (low == high and not both_closed):
                raise ValueError(
                    f"side {index} is empty: lower={low}, upper={high}"
                    + ("" if low > high else " with an open end")
                )
        return self

    @property
    def size(self) -> int:
        return len(self.lower)


class UnionPrecondition(SchemaModel):
    """``x`` lies in at least one of ``boxes``."""

    kind: Literal["union"]
    boxes: list[BoxPrecondition] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_sizes(self) -> UnionPrecondition:
        sizes = {box.size for box in self.boxes}
        if len(sizes) != 1:
            raise ValueError(f"the boxes of a union have different sizes: {sorted(sizes)}")
        return self


class LinearPrecondition(SchemaModel):
    """Every row holds: ``a[i]·x <= b[i]`` (``<`` when ``strict``). A single row may be given
    as a flat list ``a: [..]`` (or a mapping ``{input name: coefficient}``) with a number
    ``b``; a row given as a mapping has coefficient 0 on the inputs it does not name."""

    kind: Literal["linear"]
    a: list[list[float]] = Field(min_length=1)
    b: list[float] = Field(min_length=1)
    strict: bool = False

    @model_validator(mode="before")
    @classmethod
    def _single_row(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict):
            row, bound = data.get("a"), data.get("b")
            if isinstance(row, dict) or (
                isinstance(row, list) and row and not isinstance(row[0], list | dict)
            ):
                data = {**data, "a": [row]}
            if isinstance(bound, int | float) and not isinstance(bound, bool):
                data = {**data, "b": [bound]}
            rows = data.get("a")
            if isinstance(rows, list) and any(isinstance(item, dict) for item in rows):
                data = {**data, "a": [
                    by_position(item, f"a.{i}", info.context, 0.0)
                    if isinstance(item, dict) else item
                    for i, item in enumerate(rows)
                ]}
        return data

    @model_validator(mode="after")
    def _check_rows(self) -> LinearPrecondition:
        if len(self.a) != len(self.b):
            raise ValueError(f"a has {len(self.a)} rows but b has {len(self.b)} entries")
        widths = {len(row) for row in self.a}
        if len(widths) != 1 or 0 in widths:
            raise ValueError(f"the rows of a must be non-empty and equally long, got {widths}")
        for name, values in (("a", [v for row in self.a for v in row]), ("b", self.b)):
            if not all(math.isfinite(value) for value in values):
                raise ValueError(f"{name} must be finite")
        return self

    @property
    def size(self) -> int:
        return len(self.a[0])


class PredictedInPrecondition(SchemaModel):
    """The class predicted by the *uncorrected* logits (argmax, ties to the lowest index) is
    one of ``classes``."""

    kind: Literal["predicted_in"]
    classes: list[ClassRef] = Field(min_length=1)


class AlwaysPrecondition(SchemaModel):
    """Holds for every input (the paper's ⊤)."""

    kind: Literal["always"]


class AllPrecondition(SchemaModel):
    """Every one of ``conditions`` holds."""

    kind: Literal["all"]
    conditions: list[Precondition] = Field(min_length=1)


Precondition = Annotated[
    BoxPrecondition
    | UnionPrecondition
    | LinearPrecondition
    | PredictedInPrecondition
    | AlwaysPrecondition
    | AllPrecondition,
    Field(discriminator="kind"),
]
AllPrecondition.model_rebuild()


class ConstraintSpec(SchemaModel):
    """One safe-ordering constraint ⟨precondition, postcondition⟩; the postcondition is in DNF."""

    name: str = Field(min_length=1)
    precondition: Precondition = Field(default_factory=lambda: AlwaysPrecondition(kind="always"))
    postcondition: list[Annotated[list[OrderLiteralSpec], Field(min_length=1)]] = Field(
        min_length=1
    )
    description: str | None = None


class ConstraintFileSpec(SchemaModel):
    """A constraint file: the class names or count, optionally the input size and the input
    names (``inputs``, in the model's order), the constraints."""

    classes: list[str] | None = Field(default=None, min_length=1)
    num_classes: int | None = Field(default=None, ge=1)
    input_size: int | None = Field(default=None, ge=1)
    inputs: list[str] | None = Field(default=None, min_length=1)
    constraints: list[ConstraintSpec]

    @model_validator(mode="after")
    def _check_header(self) -> ConstraintFileSpec:
        if self.classes is not None:
            duplicates = sorted({n for n in self.classes if self.classes.count(n) > 1})
            if duplicates:
                raise ValueError(f"classes: duplicate names {duplicates}")
            if self.num_classes is not None and self.num_classes != len(self.classes):
                raise ValueError(
                    f"num_classes={self.num_classes} but classes lists {len(self.classes)} names"
                )
        if self.inputs is not None:
            duplicates = sorted({n for n in self.inputs if self.inputs.count(n) > 1})
            if duplicates:
                raise ValueError(f"inputs: duplicate names {duplicates}")
            if self.input_size is not None and self.input_size != len(self.inputs):
                raise ValueError(
                    f"input_size={self.input_size} but inputs lists {len(self.inputs)} names"
                )
        names = [constraint.name for constraint in self.constraints]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"constraints: duplicate constraint names {duplicates}")
        return self
