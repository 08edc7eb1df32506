"""Vectorised evaluation of the preconditions of a constraint set.

Every precondition is compiled into a disjunction of *cells*, each a conjunction of *atoms*:
a box (per-side open/closed, infinite sides), a linear inequality ``a·x <= b`` (or ``<``), or
"the predicted class is in a set". ``always`` is one cell without atoms, ``union`` one cell per
box, ``all`` the product of its parts' cells. At run time all atoms of all constraints are
evaluated at once and reduced to an ``[batch, constraints]`` activity mask with ``index_add``:
no Python loop over rows or constraints.

Semantics: every atom is decided in real arithmetic on the float values of the input and of
the constraint's coefficients, identically in the layer, its TorchScript export and every
check of the wrapped model. Box tests are exact comparisons (float32/float64 inputs convert
exactly; an open side ``x > a`` is tested as ``x >= nextafter(a, +inf)``, equivalent in
float64). A linear atom ``a·x <= b`` (``<``) is decided by the exact sign of ``a·x − b``
(:func:`verifier.selfcorrect.exact_sign.exact_linear_sign`): points within rounding of the
hyperplane, exact ties included, are not left to the float dot product; an infinite
coordinate is read in the extended reals (a zero coefficient does not read it). NaN inputs
are rejected by the layer before they get here.
"""

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

import torch
from torch import Tensor

from verifier.errors import CertgateInputError
from verifier.numerics.scripted import down_scripted, up_scripted
from verifier.selfcorrect.constraints import SafeOrderingConstraint, precondition_input_size
from verifier.selfcorrect.exact_sign import exact_linear_sign
from verifier.selfcorrect.schema import (
    AllPrecondition,
    AlwaysPrecondition,
    BoxPrecondition,
    LinearPrecondition,
    Precondition,
    PredictedInPrecondition,
    UnionPrecondition,
)


class SelfCorrectionInputError(CertgateInputError):
    """Inputs or logits handed to the SC-layer have the wrong shape or non-finite values."""


@dataclass
class _Atoms:
    """Atoms collected while compiling; each atom belongs to exactly one cell."""

    box_lo: list[list[float]] = field(default_factory=list)
    box_hi: list[list[float]] = field(default_factory=list)
    box_lo_closed: list[list[bool]] = field(default_factory=list)
    box_hi_closed: list[list[bool]] = field(default_factory=list)
    box_cell: list[int] = field(default_factory=list)
    lin_a: list[list[float]] = field(default_factory=list)
    lin_b: list[float] = field(default_factory=list)
    lin_strict: list[bool] = field(default_factory=list)
    lin_cell: list[int] = field(default_factory=list)
    pred_mask: list[list[bool]] = field(default_factory=list)
    pred_cell: list[int] = field(default_factory=list)
    cell_constraint: list[int] = field(default_factory=list)


_Atom = tuple[str, object]


def _cells(precondition: Precondition) -> list[list[_Atom]]:
    """The precondition as a DNF over atoms (a list of cells, each a list of atoms)."""
    if isinstance(precondition, AlwaysPrecondition):
        return [[]]
    if isinstance(precondition, BoxPrecondition):
        return [[("box", precondition)]]
    if isinstance(precondition, UnionPrecondition):
        return [[("box", box)] for box in precondition.boxes]
    if isinstance(precondition, LinearPrecondition):
        return [
            [
                ("linear", (row, bound, precondition.strict))
                for row, bound in zip(precondition.a, precondition.b, strict=True)
            ]
        ]
    if isinstance(precondition, PredictedInPrecondition):
        return [[("predicted", [int(c) for c in precondition.classes])]]
    if isinstance(precondition, AllPrecondition):
        parts = [_cells(part) for part in precondition.conditions]
        return [
            [atom for cell in combination for atom in cell]
            for combination in itertools.product(*parts)
        ]
    raise CertgateInputError(f"unknown precondition kind {type(precondition).__name__}")


def active_sets_everywhere(
    preconditions: Sequence[Precondition], predicted: int,
    enough: Callable[[frozenset[int]], bool] = lambda active: False,
) -> Iterator[frozenset[int] | None]:
    """Sets of preconditions (by index) that hold together by their form alone, one set per
    region of the input space, for the inputs the network assigns the class ``predicted``:
    every such input lies in a region whose set lists only preconditions that hold at it. By
    form: ``always``, a box (open or closed sides, ``None`` unbounded), a union of boxes, a
    linear precondition whose every row has zero coefficients and holds at 0 (``0 <= b``,
    ``0 < b`` when strict), ``predicted_in`` listing ``predicted``, an ``all`` of such parts.
    The space is cut one coordinate at a time at the boxes' finite sides, of every
    precondition at once, into points and the open intervals between them, so boxes of
    different preconditions covering the space together are seen (exact comparisons of the
    sides' floats). A set may omit a precondition that holds (a linear row is not read), never
    lists one that does not. A region whose set of preconditions holding all of it is
    ``enough`` is not cut further (the sets of its pieces would contain it). Yields ``None``
    and stops once :data:`COVER_PIECES` pieces were examined (the rest are not listed); the
    caller may stop reading at any set."""
    size = max((precondition_input_size(precondition) or 0 for precondition in preconditions),
               default=0)
    cells = [(index, sides) for index, precondition in enumerate(preconditions)
             for cell in _cells(precondition)
             if (sides := _held_box(cell, predicted, size)) is not None]
    yield from _piece_sets(cells, 0, size, enough, [COVER_PIECES])


COVER_PIECES = 100_000
"""Most pieces :func:`active_sets_everywhere` examines before it yields None."""


_Sides = tuple[list[float | None], list[float | None], list[bool], list[bool]]


def _held_box(cell: list[_Atom], predicted: int, size: int) -> _Sides | None:
    """The box in ``size`` dimensions (the intersection of the cell's box atoms; unbounded
    without any) on which every atom of ``cell`` holds by its form for inputs predicted
    ``predicted``; ``None`` when an atom is not proven so (a linear row with a nonzero
    coefficient or false at 0, a ``predicted_in`` without ``predicted``)."""
    lower: list[float | None] = [None] * size
    upper: list[float | None] = [None] * size
    lower_closed, upper_closed = [True] * size, [True] * size
    for kind, payload in cell:
        if kind == "linear":
            row, bound, strict = cast(tuple[list[float], float, bool], payload)
            if any(row) or not (bound > 0.0 if strict else bound >= 0.0):
                return None
        elif kind == "predicted":
            if predicted not in cast(list[int], payload):
                return None
        else:
            box = cast(BoxPrecondition, payload)
            box_lower_closed = _side_flags(box.lower_closed, box.size)
            box_upper_closed = _side_flags(box.upper_closed, box.size)
            for axis in range(box.size):
                lower[axis], lower_closed[axis] = _tighter(
                    lower[axis], lower_closed[axis], box.lower[axis], box_lower_closed[axis], 1.0)
                upper[axis], upper_closed[axis] = _tighter(
                    upper[axis], upper_closed[axis], box.upper[axis], box_upper_closed[axis], -1.0)
    return lower, upper, lower_closed, upper_closed


def _tighter(side: float | None, closed: bool, other: float | None, other_closed: bool,
             direction: float) -> tuple[float | None, bool]:
    """The tighter of two sides of the same kind (``direction`` 1 for lower sides, -1 for
    upper ones); at equal values the side is closed only when both are."""
    if other is None:
        return side, closed
    if side is None or direction * other > direction * side:
        return float(other), other_closed
    if other == side:
        return side, closed and other_closed
    return side, closed


def _piece_sets(cells: list[tuple[int, _Sides]], axis: int, size: int,
                enough: Callable[[frozenset[int]], bool],
                budget: list[int]) -> Iterator[frozenset[int] | None]:
    """The indices of the ``cells`` holding each piece of the space from ``axis`` on (the cells
    given hold the current piece on the axes before it), or of those holding all of it when
    that set is ``enough``; ``None`` once ``budget`` is spent."""
    whole = frozenset(index for index, box in cells
                      if all(box[0][later] is None and box[1][later] is None
                             for later in range(axis, size)))
    if axis == size or not cells or enough(whole):
        yield whole
        return
    cuts = sorted({float(v) for _, box in cells for v in (box[0][axis], box[1][axis])
                   if v is not None})
    ends = [-math.inf, *cuts, math.inf]
    pieces = [(ends[i], ends[i + 1], False) for i in range(len(ends) - 1)]
    pieces += [(cut, cut, True) for cut in cuts]
    for low, high, point in pieces:
        budget[0] -= 1
        if budget[0] < 0:
            yield None
            return
        holding = [(index, box) for index, box in cells
                   if _holds_piece(box, axis, low, high, point)]
        for active in _piece_sets(holding, axis + 1, size, enough, budget):
            yield active
            if active is None:
                return


def _holds_piece(box: _Sides, axis: int, low: float, high: float, point: bool) -> bool:
    """The box's side on ``axis`` contains the point ``low`` (``point``) or the open interval
    ``(low, high)``."""
    lower, upper = box[0][axis], box[1][axis]
    lower_closed, upper_closed = box[2][axis], box[3][axis]
    if point:
        above = lower is None or lower < low or (lower == low and lower_closed)
        below = upper is None or upper > low or (upper == low and upper_closed)
        return above and below
    return (lower is None or lower <= low) and (upper is None or upper >= high)


def _side_flags(flags: bool | list[bool], size: int) -> list[bool]:
    return [flags] * size if isinstance(flags, bool) else list(flags)


def _add_atom(atoms: _Atoms, atom: _Atom, cell: int, num_classes: int) -> None:
    kind, payload = atom
    if kind == "box":
        payload = cast(BoxPrecondition, payload)
        atoms.box_lo.append([float("-inf") if v is None else float(v) for v in payload.lower])
        atoms.box_hi.append([float("inf") if v is None else float(v) for v in payload.upper])
        atoms.box_lo_closed.append(_side_flags(payload.lower_closed, payload.size))
        atoms.box_hi_closed.append(_side_flags(payload.upper_closed, payload.size))
        atoms.box_cell.append(cell)
    elif kind == "linear":
        row, bound, strict = cast(tuple[list[float], float, bool], payload)
        atoms.lin_a.append([float(v) for v in row])
        atoms.lin_b.append(float(bound))
        atoms.lin_strict.append(bool(strict))
        atoms.lin_cell.append(cell)
    else:
        classes = set(cast(list[int], payload))
        atoms.pred_mask.append([c in classes for c in range(num_classes)])
        atoms.pred_cell.append(cell)


def _matrix(rows: list[list[float]] | list[list[bool]], width: int, dtype: torch.dtype) -> Tensor:
    if not rows:
        return torch.zeros(0, width, dtype=dtype)
    return torch.tensor(rows, dtype=dtype)


class PreconditionEvaluator(torch.nn.Module):
    """``forward(x, predicted) -> [batch, constraints]`` bool: which preconditions hold.

    ``x`` is ``[batch, input_size]`` (any float dtype, compared in float64); ``predicted`` is
    ``[batch]`` int64, the argmax of the uncorrected logits.
    """

    def __init__(
        self,
        constraints: tuple[SafeOrderingConstraint, ...],
        num_classes: int,
        input_size: int | None,
    ) -> None:
        super().__init__()
        atoms = _Atoms()
        for c_index, constraint in enumerate(constraints):
            for cell in _cells(constraint.precondition):
                cell_index = len(atoms.cell_constraint)
                atoms.cell_constraint.append(c_index)
                for atom in cell:
                    _add_atom(atoms, atom, cell_index, num_classes)
        width = 0 if input_size is None else input_size
        self.num_constraints = len(constraints)
        self.num_cells = len(atoms.cell_constraint)
        # Strict sides become closed ones at the neighbouring float64: for a float64 value v,
        # v > a  <=>  v >= nextafter(a, +inf), and v < b  <=>  v <= nextafter(b, -inf).
        lo = _matrix(atoms.box_lo, width, torch.float64)
        hi = _matrix(atoms.box_hi, width, torch.float64)
        lo_closed = _matrix(atoms.box_lo_closed, width, torch.bool)
        hi_closed = _matrix(atoms.box_hi_closed, width, torch.bool)
        lo = torch.where(lo_closed, lo, up_scripted(lo))
        hi = torch.where(hi_closed, hi, down_scripted(hi))
        bound = torch.tensor(atoms.lin_b, dtype=torch.float64)
        strict = torch.tensor(atoms.lin_strict, dtype=torch.bool)
        self.register_buffer("box_lo", lo, False)
        self.register_buffer("box_hi", hi, False)
        self.register_buffer("box_cell", torch.tensor(atoms.box_cell, dtype=torch.long), False)
        self.register_buffer("lin_a", _matrix(atoms.lin_a, width, torch.float64), False)
        self.register_buffer("lin_b", bound, False)
        self.register_buffer("lin_strict", strict, False)
        self.register_buffer("lin_cell", torch.tensor(atoms.lin_cell, dtype=torch.long), False)
        self.register_buffer("pred_mask", _matrix(atoms.pred_mask, num_classes, torch.bool), False)
        self.register_buffer("pred_cell", torch.tensor(atoms.pred_cell, dtype=torch.long), False)
        self.register_buffer(
            "cell_constraint", torch.tensor(atoms.cell_constraint, dtype=torch.long), False
        )

    def forward(self, x: Tensor, predicted: Tensor) -> Tensor:
        batch = x.shape[0]
        x64 = x.to(torch.float64)
        false_atoms = torch.zeros(batch, self.num_cells, dtype=torch.float64, device=x.device)
        if self.box_lo.shape[0] > 0:
            point = x64.unsqueeze(1)
            outside = ((point < self.box_lo) | (point > self.box_hi)).any(dim=2)
            false_atoms.index_add_(1, self.box_cell, outside.to(torch.float64))
        if self.lin_a.shape[0] > 0:
            sign = exact_linear_sign(x64, self.lin_a, self.lin_b)
            fails = (sign > 0) | ((sign == 0) & self.lin_strict)
            false_atoms.index_add_(1, self.lin_cell, fails.to(torch.float64))
        if self.pred_mask.shape[0] > 0:
            holds = self.pred_mask.index_select(1, predicted).t()
            false_atoms.index_add_(1, self.pred_cell, (~holds).to(torch.float64))
        cell_true = false_atoms.eq(0.0).to(torch.float64)
        active = torch.zeros(batch, self.num_constraints, dtype=torch.float64, device=x.device)
        active.index_add_(1, self.cell_constraint, cell_true)
        return active.gt(0.0)
