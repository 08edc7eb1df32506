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
from dataclasses import dataclass, field
from typing import cast

import torch
from torch import Tensor

from verifier.errors import CertgateInputError
from verifier.numerics.scripted import down_scripted, up_scripted
from verifier.selfcorrect.constraints import SafeOrderingConstraint
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


def active_everywhere(precondition: Precondition, predicted: int) -> bool:
    """True when ``precondition`` holds by its form alone at every input the network assigns
    the class ``predicted``: ``always``, a union of boxes covering the whole space
    (:func:`boxes_cover_space`; a box without bounded sides covers it alone), a linear
    precondition whose every row has zero coefficients and holds at 0 (``0 <= b``, ``0 < b``
    when strict), ``predicted_in`` listing ``predicted``, an ``all`` of such parts. False
    otherwise, so False does not prove that some input falsifies it."""
    if isinstance(precondition, AlwaysPrecondition):
        return True
    if isinstance(precondition, BoxPrecondition):
        return boxes_cover_space([precondition])
    if isinstance(precondition, UnionPrecondition):
        return boxes_cover_space(precondition.boxes)
    if isinstance(precondition, LinearPrecondition):
        return all(not any(row) and (bound > 0.0 if precondition.strict else bound >= 0.0)
                   for row, bound in zip(precondition.a, precondition.b, strict=True))
    if isinstance(precondition, PredictedInPrecondition):
        return predicted in {int(c) for c in precondition.classes}
    if isinstance(precondition, AllPrecondition):
        return all(active_everywhere(part, predicted) for part in precondition.conditions)
    return False


COVER_PIECES = 100_000
"""Most slabs :func:`boxes_cover_space` examines before it answers False (not shown)."""


def boxes_cover_space(boxes: list[BoxPrecondition]) -> bool:
    """True when the union of ``boxes`` (open or closed sides, ``None`` unbounded) is the whole
    space. One coordinate at a time, the line is cut at the boxes' finite sides into points
    and the open intervals between them; the boxes holding a piece entirely must cover the
    remaining coordinates over it. Exact comparisons of the sides' floats. More than
    :data:`COVER_PIECES` pieces answer False (not shown), never a wrong True."""
    budget = [COVER_PIECES]
    sides = [(box.lower, box.upper, _side_flags(box.lower_closed, box.size),
              _side_flags(box.upper_closed, box.size)) for box in boxes]
    return _covers(sides, 0, boxes[0].size if boxes else 0, budget)


_Sides = tuple[list[float | None], list[float | None], list[bool], list[bool]]


def _covers(boxes: list[_Sides], axis: int, size: int, budget: list[int]) -> bool:
    if not boxes:
        return False
    if axis == size:
        return True
    cuts = sorted({float(v) for box in boxes for v in (box[0][axis], box[1][axis])
                   if v is not None})
    ends = [-math.inf, *cuts, math.inf]
    pieces = [(ends[i], ends[i + 1], False) for i in range(len(ends) - 1)]
    pieces += [(cut, cut, True) for cut in cuts]
    for low, high, point in pieces:
        budget[0] -= 1
        if budget[0] < 0:
            return False
        holding = [box for box in boxes if _holds_piece(box, axis, low, high, point)]
        if not _covers(holding, axis + 1, size, budget):
            return False
    return True


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
