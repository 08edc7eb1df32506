"""The small dense LPs of region enumeration, solved by HiGHS through ``highspy`` directly.

``scipy.optimize.linprog(method="highs")`` runs the same solver but spends about 80 % of a
small LP's time (0.35 ms of HiGHS in 1.5–2.3 ms) validating options and converting matrices;
a reused ``Highs`` object per thread with presolve off takes 0.35–0.45 ms for the same
Chebyshev LPs with identical optima (measured on 20×4 and 40×7 random systems; BENCHMARKS.md).

Outcomes are never guessed: an optimum, a proven infeasibility and a proven unboundedness are
reported as such, and anything else (a solver error, an undecided ``unbounded or infeasible``
that a feasibility re-solve cannot settle) raises :class:`LPError`, so a cell is never dropped
because the solver gave up.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import highspy
import numpy as np

from verifier.errors import CertgateInputError
from verifier.highs import INFINITY, quiet_highs

_STATUS = highspy.HighsModelStatus
_local = threading.local()


class LPError(CertgateInputError):
    """HiGHS could not decide an LP of the region enumeration."""


@dataclass(frozen=True)
class LPResult:
    """``status`` is ``optimal``, ``infeasible`` or ``unbounded``; ``x`` the optimum and
    ``dual`` its row multipliers, sign-flipped to be ``>= 0`` for the ``<=`` rows of a
    minimisation (``cost = −Σ dual_i A_i`` up to the solver's tolerance)."""

    status: str
    x: np.ndarray | None = None
    dual: np.ndarray | None = None


def _solver() -> highspy.Highs:
    solver = getattr(_local, "solver", None)
    if solver is None:
        solver = quiet_highs()
        solver.setOptionValue("output_flag", False)
        solver.setOptionValue("presolve", "off")
        _local.solver = solver
    return solver


def _pass(solver: highspy.Highs, cost: np.ndarray, A: np.ndarray, b: np.ndarray,
          lower: np.ndarray, upper: np.ndarray) -> None:
    rows, columns = A.shape
    lp = highspy.HighsLp()
    lp.num_col_ = columns
    lp.num_row_ = rows
    lp.col_cost_ = np.asarray(cost, np.float64)
    lp.col_lower_ = np.where(np.isfinite(lower), lower, -INFINITY)
    lp.col_upper_ = np.where(np.isfinite(upper), upper, INFINITY)
    lp.row_lower_ = np.full(rows, -INFINITY)
    lp.row_upper_ = np.asarray(b, np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = columns
    lp.a_matrix_.num_row_ = rows
    lp.a_matrix_.start_ = np.arange(0, rows * columns + 1, columns, dtype=np.int32)
    lp.a_matrix_.index_ = np.tile(np.arange(columns, dtype=np.int32), rows)
    lp.a_matrix_.value_ = np.ascontiguousarray(A, np.float64).ravel()
    solver.clearModel()
    solver.passModel(lp)


def _outcome(solver: highspy.Highs, columns: int) -> LPResult:
    solver.run()
    status = solver.getModelStatus()
    if status == _STATUS.kOptimal:
        solution = solver.getSolution()
        return LPResult("optimal", np.array(solution.col_value[:columns]),
                        -np.array(solution.row_dual))
    if status == _STATUS.kInfeasible:
        return LPResult("infeasible")
    if status == _STATUS.kUnbounded:
        return LPResult("unbounded")
    if status == _STATUS.kUnboundedOrInfeasible:
        solver.changeColsCost(columns, np.arange(columns, dtype=np.int32), np.zeros(columns))
        solver.run()
        if solver.getModelStatus() == _STATUS.kInfeasible:
            return LPResult("infeasible")
        if solver.getModelStatus() == _STATUS.kOptimal:
            return LPResult("unbounded")
    raise LPError(f"the LP solver could not decide a region: "
                  f"{solver.modelStatusToString(solver.getModelStatus())}")


def minimise(cost: np.ndarray, A: np.ndarray, b: np.ndarray, lower: np.ndarray,
             upper: np.ndarray) -> LPResult:
    """``min cost·x`` subject to ``A x <= b`` and ``lower <= x <= upper`` (infinite entries:
    free)."""
    solver = _solver()
    _pass(solver, cost, A, b, lower, upper)
    return _outcome(solver, A.shape[1])


def coordinate_extremes(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row multipliers ``(D, 2, rows)`` of ``min z_j`` (``[:, 0]``) and ``max z_j``
    (``[:, 1]``) over ``A z <= b`` for every coordinate ``j``, sign-flipped to be ``>= 0``
    (``Aᵀy ≈ ∓e_j``), with the optima ``(D, 2)`` (the model is passed once and re-solved warm
    with each cost); raises :class:`LPError` unless every LP has an optimum."""
    solver = _solver()
    dimension = A.shape[1]
    free = np.full(dimension, np.inf)
    _pass(solver, np.zeros(dimension), A, b, -free, free)
    everything = np.arange(dimension, dtype=np.int32)
    duals = np.empty((dimension, 2, A.shape[0]))
    optima = np.empty((dimension, 2))
    for axis in range(dimension):
        for side, sign in enumerate((1.0, -1.0)):
            cost = np.zeros(dimension)
            cost[axis] = sign
            solver.changeColsCost(dimension, everything, cost)
            solver.run()
            if solver.getModelStatus() != _STATUS.kOptimal:
                raise LPError(f"bounding a region failed: "
                              f"{solver.modelStatusToString(solver.getModelStatus())}")
            solution = solver.getSolution()
            duals[axis, side] = -np.array(solution.row_dual)
            optima[axis, side] = solution.col_value[axis]
    return duals, optima
