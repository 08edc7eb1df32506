"""Exact check of one partition: a MILP over two copies of the network (HiGHS via highspy).

Copy A and copy B share every non-protected input; their protected inputs range over two
protected cells. Each ReLU/LeakyReLU whose pre-activation bounds (valid over the partition and
the copy's cell) straddle zero gets one binary variable (big-M encoding with those bounds);
stable neurons are linear. For an ordered pair of classes ``(c, c')`` the MILP maximises the
margin ``t`` of every class row of both copies: ``y_c − y_d ≥ t`` for every ``d ≠ c`` in
copy A and ``y_c' − y_d ≥ t`` for every ``d ≠ c'`` in copy B. Under the class rule, ties
included (:mod:`verifier.causal.classes`), copy A has class ``c`` iff ``y_c − y_d > 0``
against every lower class ``d < c`` and ``≥ 0`` against every higher one (ties go to ``c``),
so a biased point with these classes has every row ``≥ 0``, and every point with every row
``> 0`` is one: in real arithmetic ``t* < 0`` proves the pair absent and ``t* > 0`` shows it.
(The margin on the non-strict rows too is what keeps the LP relaxation, and with it the
branch and bound, tight: with those rows only ``≥ 0``, copy A's rows do not move with ``t``;
measured 2.5× slower per proving MILP on Libra COMPAS race, docs/decisions.md 2026-11-28.)

No solver's word proves a pair absent. "Absent" is proven by
:mod:`verifier.causal.milp_certificate`: a branch and bound of our own over the MILP's integer
variables whose every node is closed by an upper bound on the margin proven in real
arithmetic, rounding included (:mod:`verifier.lp_bound`: HiGHS only suggests the row
multipliers and the branching variable). Its root node is the LP relaxation: most pairs are
proven there, with one LP and no branching. Every variable of the encoding has finite bounds
(the linear output layer's by :func:`verifier.lp_bound.affine_interval`), which such bounds
need, and the big-M coefficients are rounded outward, so every point of the network (real
arithmetic) is a point of the MILP. The certificate runs first (``relaxation_first``; with
at most :data:`FIRST_SEARCH_LPS` LPs, and only its root where proofs are measured rare,
``presolve_first``: a search stopped so goes on after the MILP's "infeasible"); a pair it
cannot prove goes to HiGHS's MILP, which only looks for a witness:

* HiGHS solves in floating point with tolerances, so neither side of ``t* = 0`` is taken
  from it near zero (a tie that the class rule counts, or a deep net's margin of 1e-17, is
  exactly there): the margin's floor is ``−τ`` with ``τ`` = :data:`TIE_MARGIN` times the
  model's scale (the largest finite variable bound, at least 1);
* a candidate with ``t ≥ 0`` is re-evaluated in real arithmetic (:func:`_confirm`; ``t = 0``
  is a tie, which the class rule may count: with tight big-M bounds HiGHS lands on it
  exactly, where looser ones let it report a spurious ``t`` of about 1e-9); failing
  that, a second solve searches for a clear witness (margin ``≥ +τ``): the best point of the
  first solve may sit on a tie, where the real class may be the other one by 1e-17. Solves
  whose infeasibility decides nothing may presolve (:func:`_decide_pair`);
* "infeasible" (or a dual bound below ``−τ``), with no certificate, and a best margin in
  ``[−τ, τ]`` (a near tie) leave the partition undecided (it is split; an integer point is
  decided exactly by :func:`verifier.causal.points.decide_points`).

With ``relaxation_first=False`` the MILP runs first and only its "infeasible" (a solve
without presolve) is handed to the same certificate, so certificate first proves every pair
MILP first does. Measured (docs/decisions.md 2026-11-28, "the MILP's infeasible, proven"):
certificate first costs less where proofs are common, the MILPs then running only where a
witness or a near tie is; where they are rare, its failed searches cost more than the MILPs.

For a one-hot protected feature with many values, the cell pairs can be merged into one MILP
per class pair: each copy's protected inputs are binaries summing to one (any value), with
big-M bounds merged over the cells (see :data:`MERGE_MIN_VALUES`), and the two copies'
values differ (one value in both copies is never a bias; allowed, it would put every tie of
the partition at margin 0, where nothing is proven).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from verifier.causal.milp_certificate import (
    NODE_LIMIT,
    MarginCertificate,
    certify_negative_margin,
)
from verifier.causal.problem import CausalInputError, FairnessProblem
from verifier.causal.proof_tally import ProofTally
from verifier.causal.witness import confirmed_pairs
from verifier.highs import search_mip
from verifier.lp_bound import affine_interval
from verifier.native_output import native_stdout_silenced
from verifier.numerics import add_up, mul_down, mul_up
from verifier.sparse_rows import RowMatrix

TIE_MARGIN = 1e-6
"""The band ``[−τ, τ]`` of margins the MILP leaves undecided, relative to the model's scale
(module docstring): ten times HiGHS's primal feasibility tolerance on a unit-scaled model."""
MARGIN_CAP = 1.0
MIP_REL_GAP = 1e-9
FIRST_SEARCH_LPS = 300
"""LPs the certificate may spend before the MILP (proofs measured common): a search through a
feasible model (a witness, a near tie) spends them all in vain; one stopped by this budget
goes on, with :data:`~verifier.causal.milp_certificate.NODE_LIMIT`, after the MILP's
"infeasible"."""
MERGE_MIN_VALUES = 4
"""One-hot protected features with at least this many values get the merged encoding by
default. Measured on COMPAS (30 s budgets): race (6 values, 15 cell pairs) certifies far more
merged; age (3 values) certifies less, the merged big-M bounds being looser than per cell."""


@dataclass
class ExactOutcome:
    """``status``: ``fair`` (proven), ``witness`` (``x_a``/``x_b`` re-evaluated to the
    different classes ``classes``) or ``unknown`` (solver limit, an unproven "infeasible",
    or a candidate that did not survive re-evaluation). ``solved`` counts the MILPs run;
    ``proofs`` how the absent class pairs were proven."""

    status: str
    solved: int
    x_a: np.ndarray | None = None
    x_b: np.ndarray | None = None
    classes: tuple[int, int] | None = None
    proofs: ProofTally | None = None


class _Model:
    """Sparse rows ``lb ≤ A·v ≤ ub`` and variable bounds, built incrementally."""

    def __init__(self) -> None:
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.integral: list[int] = []
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []
        self._built: tuple[tuple[int, int, int], RowMatrix] | None = None

    def matrix(self) -> RowMatrix:
        """``A`` as a sparse matrix, built once for the certificate and every solve of
        the same rows (rebuilt after rows or variables are added)."""
        shape = (len(self.row_lower), len(self.lower), len(self.vals))
        if self._built is None or self._built[0] != shape:
            matrix = RowMatrix.from_entries(np.asarray(self.rows), np.asarray(self.cols),
                                            np.asarray(self.vals), shape[:2])
            self._built = (shape, matrix)
        return self._built[1]

    def variables(self, lower: np.ndarray, upper: np.ndarray, integral: bool = False) -> np.ndarray:
        start = len(self.lower)
        self.lower.extend(np.asarray(lower, dtype=float).tolist())
        self.upper.extend(np.asarray(upper, dtype=float).tolist())
        self.integral.extend([int(integral)] * len(lower))
        return np.arange(start, len(self.lower))

    def row(self, columns: list[int], values: list[float], low: float, high: float) -> None:
        index = len(self.row_lower)
        self.rows.extend([index] * len(columns))
        self.cols.extend(columns)
        self.vals.extend(values)
        self.row_lower.append(low)
        self.row_upper.append(high)

    def affine_rows(self, out: np.ndarray, weight: np.ndarray, inputs: np.ndarray,
                    bias: np.ndarray) -> None:
        """``out_j − Σ_i W_ji in_i = b_j``."""
        units, nz = np.nonzero(weight)
        first = len(self.row_lower)
        order = np.argsort(np.concatenate([np.arange(weight.shape[0]), units]), kind="stable")
        rows = np.concatenate([np.arange(weight.shape[0]), units])[order] + first
        cols = np.concatenate([np.asarray(out), np.asarray(inputs)[nz]])[order]
        vals = np.concatenate([np.ones(weight.shape[0]), -weight[units, nz]])[order]
        self.rows.extend(rows.tolist())
        self.cols.extend(cols.tolist())
        self.vals.extend(vals.tolist())
        sides = np.asarray(bias, dtype=float).tolist()
        self.row_lower.extend(sides)
        self.row_upper.extend(sides)


def _encode_copy(model: _Model, problem: FairnessProblem, x: np.ndarray,
                 pre_lower: dict[int, np.ndarray], pre_upper: dict[int, np.ndarray]) -> np.ndarray:
    """Add one network copy reading inputs ``x``; returns the output variables."""
    h = x
    for index, layer in enumerate(problem.network.layers):
        if index in pre_lower:
            low, high = pre_lower[index], pre_upper[index]
            z = model.variables(low, high)
        else:
            z = model.variables(*affine_interval(
                np.asarray(layer.weight, dtype=np.float64),
                np.asarray(layer.bias, dtype=np.float64),
                np.asarray(model.lower, dtype=np.float64)[h],
                np.asarray(model.upper, dtype=np.float64)[h]))
        model.affine_rows(z, layer.weight, h, layer.bias)
        if layer.activation == "none":
            h = z
            continue
        slopes = layer.negative_slope_effective
        low, high = pre_lower[index], pre_upper[index]
        out_low = np.minimum(low, mul_down(slopes, low))
        out_high = np.maximum(high, mul_up(slopes, high))
        h = model.variables(np.minimum(out_low, 0.0), out_high)
        # big-M coefficients rounded outward: (1 − a)·l down, (1 − a)·u up (l < 0 < u)
        gap = add_up(1.0, -slopes)
        big_low, big_high = mul_down(gap, low), mul_up(gap, high)
        for j in range(layer.out_features):
            a, lj, uj = float(slopes[j]), float(low[j]), float(high[j])
            hj, zj = int(h[j]), int(z[j])
            if lj >= 0.0:
                model.row([hj, zj], [1.0, -1.0], 0.0, 0.0)
            elif uj <= 0.0:
                model.row([hj, zj], [1.0, -a], 0.0, 0.0)
            else:
                delta = int(model.variables(np.zeros(1), np.ones(1), integral=True)[0])
                bl, bu = float(big_low[j]), float(big_high[j])
                model.row([hj, zj], [1.0, -1.0], 0.0, np.inf)
                model.row([hj, zj], [1.0, -a], 0.0, np.inf)
                model.row([hj, zj, delta], [1.0, -1.0, -bl], -np.inf, -bl)
                model.row([hj, zj, delta], [1.0, -a, -bu], -np.inf, 0.0)
    return h


CellBounds = tuple[dict[int, np.ndarray], dict[int, np.ndarray]]


def _copy_inputs(model: _Model, problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                 cell: int | None) -> np.ndarray:
    """Input variables of one copy: the partition box with the protected inputs fixed to cell
    ``cell``, or (``None``, one-hot only) binary protected inputs summing to 1, i.e. any value."""
    lo, hi = lower.copy(), upper.copy()
    prot = list(problem.protected)
    if cell is None:
        lo[prot], hi[prot] = 0.0, 1.0
    else:
        lo[prot] = problem.protected_cells[cell, 0]
        hi[prot] = problem.protected_cells[cell, 1]
    x = model.variables(lo, hi)
    for index in np.flatnonzero(problem.integer):
        model.integral[int(x[index])] = 1
    if cell is None:
        columns = [int(x[i]) for i in prot]
        for column in columns:
            model.integral[column] = 1
        model.row(columns, [1.0] * len(columns), 1.0, 1.0)
    return x


def _pair_model(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                cells: tuple[int | None, int | None], bounds: tuple[CellBounds, CellBounds]
                ) -> tuple[_Model, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Two copies sharing the non-protected inputs (see :func:`_copy_inputs` for ``cells``);
    ``bounds[i]`` must be valid pre-activation bounds for copy ``i``'s input set."""
    model = _Model()
    copies = []
    outputs = []
    for cell, (pre_lo, pre_hi) in zip(cells, bounds, strict=True):
        x = _copy_inputs(model, problem, lower, upper, cell)
        copies.append(x)
        outputs.append(_encode_copy(model, problem, x, pre_lo, pre_hi))
    x_a, x_b = copies
    protected = set(problem.protected)
    for i in range(problem.inputs):
        if i not in protected:
            model.row([int(x_a[i]), int(x_b[i])], [1.0, -1.0], 0.0, 0.0)
    for group in problem.onehot_groups:
        columns = [int(x_a[i]) for i in group]
        for column in columns:
            model.integral[column] = 1
        model.row(columns, [1.0] * len(columns), 1.0, 1.0)
    if cells == (None, None):
        for i in problem.protected:  # two different values: one value twice is never biased
            model.row([int(x_a[i]), int(x_b[i])], [1.0, 1.0], -np.inf, 1.0)
    t = int(model.variables(np.array([-np.inf]), np.array([MARGIN_CAP]))[0])
    return model, x_a, x_b, outputs[0], outputs[1], t


def _merged_bounds(cell_bounds: list[CellBounds]) -> CellBounds:
    """Elementwise min of the lower and max of the upper bounds over all cells: valid for a
    copy whose protected value may be any cell's."""
    pre_lo, pre_hi = cell_bounds[0]
    lower = {k: np.min([b[0][k] for b in cell_bounds], axis=0) for k in pre_lo}
    upper = {k: np.max([b[1][k] for b in cell_bounds], axis=0) for k in pre_hi}
    return lower, upper


def _margin_rows(model: _Model, y: np.ndarray, cls: int, t: int) -> None:
    """``y_cls − y_d ≥ t`` for every ``d ≠ cls``: at ``t > 0`` class ``cls`` wins at ``y``;
    where it wins by the class rule (a tie with a higher index is ``cls``'s), ``t = 0`` is
    feasible (module docstring)."""
    for d in range(len(y)):
        if d != cls:
            model.row([int(y[cls]), int(y[d]), t], [1.0, -1.0, -1.0], 0.0, np.inf)


def tie_margin(model: _Model) -> float:
    """``τ`` for ``model``: :data:`TIE_MARGIN` times its largest finite variable bound (at
    least 1)."""
    bounds = np.abs(np.concatenate([model.lower, model.upper]))
    finite = bounds[np.isfinite(bounds)]
    return TIE_MARGIN * max(1.0, float(finite.max(initial=0.0)))


def _solve(model: _Model, t: int, time_limit: float, floor: float, presolve: bool = False
           ) -> tuple[str, float, np.ndarray | None]:
    """Search for a point whose margin ``t`` is at least ``floor``: *infeasible* says none is
    (up to the solver's tolerances, which only enlarge the set searched), and HiGHS stops at
    its first feasible point (``mip_max_improving_sols``: a candidate, whatever its margin)
    instead of proving the best margin optimal. HiGHS's presolve is off unless ``presolve``
    (for searches whose infeasibility decides nothing): on a two-copy model of a 3-3-3
    integer network (``tests/test_causal_ties.py``) it declared infeasible a problem with a
    feasible integer point (HiGHS in scipy 1.17.1, and highspy 1.16), which would have
    certified a biased network fair. Returns the status (``infeasible``,
    ``solved`` with the point, or ``unknown``), the best upper bound on the margin known,
    and the point."""
    size = len(model.lower)
    matrix = model.matrix()
    objective = np.zeros(size)
    objective[t] = -1.0
    lower = np.asarray(model.lower, dtype=float)
    lower[t] = floor
    with native_stdout_silenced():
        status, dual, point = search_mip(
            objective, matrix, np.asarray(model.row_lower), np.asarray(model.row_upper), lower,
            np.asarray(model.upper), np.asarray(model.integral),
            {"time_limit": max(time_limit, 0.01), "mip_rel_gap": MIP_REL_GAP,
             "mip_max_improving_sols": 1, "presolve": presolve})
    if status == "infeasible":
        return "infeasible", -np.inf, None
    best_upper = -dual if dual is not None and np.isfinite(dual) else np.inf
    if point is None:
        return "unknown", best_upper, None
    return "solved", best_upper, point


def _encodings(problem: FairnessProblem, cell_bounds: list[CellBounds], merge_cells: bool
               ) -> list[tuple[tuple[int | None, int | None], tuple[CellBounds, CellBounds]]]:
    """The (cells, bounds) of every two-copy MILP family: one per unordered cell pair, or one
    in which both copies range over every one-hot value (bounds merged over the cells)."""
    if merge_cells:
        merged = _merged_bounds(cell_bounds)
        return [((None, None), (merged, merged))]
    cells = problem.cell_count
    pairs = [(a, b) for a in range(cells) for b in range(a + 1, cells)] or [(0, 0)]
    return [((a, b), (cell_bounds[a], cell_bounds[b])) for a, b in pairs]


def check_partition(
    problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
    cell_bounds: list[CellBounds],
    time_limit: float = 10.0, deadline: float | None = None, merge_cells: bool | None = None,
    possible: np.ndarray | None = None, presolve_first: bool = False,
    relaxation_first: bool = True,
) -> ExactOutcome:
    """Decide one partition exactly (see the module docstring).

    ``lower``/``upper``: the partition box over all inputs (one-hot groups as 0/1 bounds);
    ``cell_bounds[v]``: pre-activation bounds of every kink layer valid over the partition with
    the protected inputs in cell ``v``. A witness is returned only after the network, evaluated
    at both points, gives the two different classes. Each MILP gets at most ``time_limit``
    seconds and none runs past ``deadline`` (``time.time()`` seconds): the outcome is then
    ``unknown``, never ``fair``.

    ``merge_cells``: one MILP per class pair in which each copy's one-hot protected value is a
    binary vector summing to 1 (big-M bounds merged over the cells) instead of one MILP per
    cell pair and class pair; both are exact. ``None`` merges for one-hot protected features
    with at least :data:`MERGE_MIN_VALUES` values, else uses the per-pair encoding. Raises
    :class:`CausalInputError` when merging is asked for a continuous protected feature.

    ``possible`` ``(V, K)``: whether class ``k`` can be the class anywhere in the partition
    with cell ``v`` (sound bounds, e.g. :func:`verifier.causal.analysis.possible_classes`);
    MILPs asking a copy for a class impossible on its cells are skipped (they are infeasible).
    ``presolve_first``: see :func:`_decide_pair` (either way "fair" rests on a solve without
    presolve). ``relaxation_first``: the certificate (LP relaxation at its root, then its
    branch and bound) before each MILP, else only on the MILP's "infeasible" (module
    docstring); ``solved`` counts MILPs only, ``proofs`` how each pair was proven.
    """
    if merge_cells is None:
        merge_cells = (problem.protected_kind == "one_hot"
                       and problem.cell_count >= MERGE_MIN_VALUES)
    elif merge_cells and problem.protected_kind != "one_hot":
        raise CausalInputError("merge_cells needs a one-hot protected feature, got "
                               f"{problem.protected_kind!r}")
    classes = problem.network.output_size
    solved = 0
    undecided = False
    proofs = ProofTally()
    if possible is None:
        possible = np.ones((problem.cell_count, classes), dtype=bool)
    anywhere = possible.any(axis=0)
    for cells, bounds in _encodings(problem, cell_bounds, merge_cells):
        allowed_a = anywhere if cells[0] is None else possible[cells[0]]
        allowed_b = anywhere if cells[1] is None else possible[cells[1]]
        for class_a in range(classes):
            for class_b in range(classes):
                if class_a == class_b or not (allowed_a[class_a] and allowed_b[class_b]):
                    continue
                model, x_a, x_b, y_a, y_b, t = _pair_model(problem, lower, upper, cells, bounds)
                _margin_rows(model, y_a, class_a, t)
                _margin_rows(model, y_b, class_b, t)
                verdict, count, witness = _decide_pair(problem, (model, x_a, x_b, t), lower,
                                                       upper, (class_a, class_b), time_limit,
                                                       deadline, proofs, presolve_first,
                                                       relaxation_first=relaxation_first)
                solved += count
                if verdict == "witness":
                    assert witness is not None
                    return ExactOutcome("witness", solved, witness[0], witness[1],
                                        (class_a, class_b), proofs)
                if verdict == "deadline":
                    return ExactOutcome("unknown", solved, proofs=proofs)
                undecided |= verdict == "unknown"
    return ExactOutcome("unknown" if undecided else "fair", solved, proofs=proofs)


def _decide_pair(problem: FairnessProblem,
                 pair_model: tuple[_Model, np.ndarray, np.ndarray, int], lower: np.ndarray,
                 upper: np.ndarray, classes: tuple[int, int], time_limit: float,
                 deadline: float | None, proofs: ProofTally, presolve_first: bool = False,
                 relaxation_first: bool = True
                 ) -> tuple[str, int, tuple[np.ndarray, np.ndarray] | None]:
    """One class pair on its model ``(model, x_a columns, x_b columns, margin column)``:
    solved with the margin's floor at ``−τ`` and, unless that proves the pair absent or
    yields a confirmed witness, searched for a clear witness (floor ``+τ``; module
    docstring). ``relaxation_first``: first try to prove the pair absent by the certificate
    (:func:`_certificate`, no MILP at all). ``presolve_first``: the
    ``−τ`` solve is tried with HiGHS's presolve first (faster on feasible models) and only its
    answer "infeasible", which presolve may get wrong, is solved again without it: cheaper
    where most pairs are feasible (witnesses, near ties), dearer where most are proven absent.
    The caller sets it where proofs are measured rare; then the certificate tried first is
    only its root (the LP relaxation), and its branch and bound runs only on the MILP's
    "infeasible" (a search through a feasible model ends unproven, all its LPs wasted).
    Returns ``fair``, ``witness`` (with the confirmed pair), ``unknown`` or ``deadline``, and
    the number of MILPs solved. "fair" only where :func:`_certificate` proved the pair
    absent (before the MILP, or after its "infeasible"); a MILP "infeasible" left unproven is
    ``unknown``."""
    model, x_a, x_b, t = pair_model
    searched = False  # whether the certificate's branch and bound has had its full try
    if relaxation_first:
        budget = 1 if presolve_first else FIRST_SEARCH_LPS
        certificate = _certificate(model, t, deadline, proofs, budget)
        if certificate.proven:
            return "fair", 0, None
        searched = certificate.reason != "nodes"
    tau = tie_margin(model)
    attempts = [(-tau, True), (-tau, False), (tau, True)]
    if not presolve_first:
        attempts.pop(0)
    solved = 0
    position = 0
    while position < len(attempts):
        floor, presolve = attempts[position]
        position += 1
        limit = time_limit if deadline is None else min(time_limit, deadline - time.time())
        if limit <= 0.0:
            return "deadline", solved, None
        status, best_upper, solution = _solve(model, t, limit, floor, presolve=presolve)
        solved += 1
        if floor < 0.0 and (status == "infeasible" or best_upper < floor):
            if presolve:
                continue  # re-solved without presolve: only that answer is certified
            if not searched and _certificate(model, t, deadline, proofs, NODE_LIMIT).proven:
                return "fair", solved, None
            proofs.refused += 1  # no proof holds: the solver's word is not taken
            return "unknown", solved, None
        if solution is not None and solution[t] >= 0.0:
            witness = _confirm(problem, solution[x_a], solution[x_b], lower, upper, classes)
            if witness is not None:
                return "witness", solved, witness
        if status != "solved":
            break
        if floor < 0.0:
            position = len(attempts) - 1  # feasible near zero: on to the witness search
    return "unknown", solved, None


def _certificate(model: _Model, t: int, deadline: float | None, proofs: ProofTally,
                 node_limit: int) -> MarginCertificate:
    """:func:`verifier.causal.milp_certificate.certify_negative_margin` on ``model``: whether
    no point has margin ``t ≥ 0``, in at most ``node_limit`` LPs (1: the LP relaxation
    alone), tallied in ``proofs``."""
    certificate = certify_negative_margin(
        model.matrix(), np.asarray(model.row_lower), np.asarray(model.row_upper),
        np.asarray(model.lower), np.asarray(model.upper), np.asarray(model.integral, dtype=bool),
        t, node_limit=node_limit, deadline=deadline)
    proofs.nodes += certificate.nodes
    if not certificate.proven:
        proofs.unproven += 1
    elif certificate.nodes == 1:
        proofs.relaxation += 1
    else:
        proofs.certified += 1
    return certificate


def _confirm(problem: FairnessProblem, x_a: np.ndarray, x_b: np.ndarray, lower: np.ndarray,
             upper: np.ndarray, classes: tuple[int, int]) -> tuple[np.ndarray, np.ndarray] | None:
    """Snap the solver's point into the partition (one-hots exact, integer inputs rounded,
    shared non-protected part, protected values onto the nearest point cell) and keep it only
    if the network gives the two classes in real arithmetic (class rule, ties included)."""
    a = np.clip(x_a, lower, upper)
    a[problem.integer] = np.clip(np.rint(a[problem.integer]), lower[problem.integer],
                                 upper[problem.integer])
    for group in problem.onehot_groups:
        members = list(group)
        chosen = members[int(np.argmax(a[members]))]
        a[members] = 0.0
        a[chosen] = 1.0
    b = a.copy()
    prot = list(problem.protected)
    b[prot] = x_b[prot]
    if problem.protected_kind == "one_hot":
        for point in (a, b):
            chosen = prot[int(np.argmax(point[prot]))]
            point[prot] = 0.0
            point[chosen] = 1.0
    elif problem.point_cells:
        values = problem.protected_cells[:, 0, 0]
        for point in (a, b):
            point[prot] = values[int(np.argmin(np.abs(values - point[prot[0]])))]
    else:
        low, high = problem.domain_lower[prot], problem.domain_upper[prot]
        a[prot] = np.clip(a[prot], low, high)
        b[prot] = np.clip(b[prot], low, high)
    genuine, class_a, class_b = confirmed_pairs(problem.network, a, b)
    if not genuine[0] or (int(class_a[0]), int(class_b[0])) != tuple(classes):
        return None
    return a, b
