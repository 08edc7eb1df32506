"""HiGHS through ``highspy`` directly: a quiet solver per thread, sparse LPs solved to their
row multipliers, and sparse MILPs searched for a point.

``scipy.optimize.linprog(method="highs")`` runs the same solver but spends most of a small
LP's time validating options and converting matrices (``verifier/wmi/lp.py``'s measurements),
and ``scipy.optimize`` costs 0.2–0.35 CPU s to import on a cold process.
Nothing here proves anything: callers turn the multipliers into proven bounds
(:mod:`verifier.lp_bound`) or decide only what an exact check confirms.
"""

from __future__ import annotations

import os
import sys
import threading

import highspy
import numpy as np

from verifier.sparse_rows import CompressedRows, RowMatrix

STATUS = highspy.HighsModelStatus
INFINITY = highspy.kHighsInf
_local = threading.local()


def quiet_highs() -> highspy.Highs:
    """A ``Highs`` object whose copyright banner goes to stderr: HiGHS writes it to the
    process's stdout on construction, before any option can silence it, which would put a
    second thing beside ``--json``'s one object on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        return highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _thread_solver(role: str) -> highspy.Highs:
    """This thread's quiet, presolve-free solver for ``role`` (one model held per role)."""
    solver = getattr(_local, role, None)
    if solver is None:
        solver = quiet_highs()
        solver.setOptionValue("output_flag", False)
        solver.setOptionValue("presolve", "off")  # an infeasible LP then reports its ray
        setattr(_local, role, solver)
    return solver


def _finite_or_inf(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return np.clip(values, -INFINITY, INFINITY)


def _highs_lp(cost: np.ndarray, matrix: CompressedRows, row_lower: np.ndarray,
              row_upper: np.ndarray, lower: np.ndarray, upper: np.ndarray,
              column_wise: bool = False) -> highspy.HighsLp:
    """``min cost·v`` subject to ``row_lower ≤ matrix·v ≤ row_upper``, ``lower ≤ v ≤ upper``;
    ``column_wise``: the matrix passed in compressed columns (``scipy.optimize.milp``'s
    layout) rather than rows."""
    rows, columns = matrix.shape
    stored = RowMatrix.of(matrix).transposed() if column_wise else matrix
    lp = highspy.HighsLp()
    lp.num_col_ = columns
    lp.num_row_ = rows
    lp.col_cost_ = np.asarray(cost, np.float64)
    lp.col_lower_ = _finite_or_inf(lower)
    lp.col_upper_ = _finite_or_inf(upper)
    lp.row_lower_ = _finite_or_inf(row_lower)
    lp.row_upper_ = _finite_or_inf(row_upper)
    lp.a_matrix_.format_ = (highspy.MatrixFormat.kColwise if column_wise
                            else highspy.MatrixFormat.kRowwise)
    lp.a_matrix_.num_col_ = columns
    lp.a_matrix_.num_row_ = rows
    lp.a_matrix_.start_ = stored.indptr.astype(np.int32)
    lp.a_matrix_.index_ = stored.indices.astype(np.int32)
    lp.a_matrix_.value_ = stored.data.astype(np.float64)
    return lp


def minimise_rows(cost: np.ndarray, matrix: CompressedRows, row_lower: np.ndarray,
                  row_upper: np.ndarray, lower: np.ndarray, upper: np.ndarray
                  ) -> tuple[str, np.ndarray | None]:
    """Row multipliers for ``min cost·v`` subject to ``row_lower ≤ matrix·v ≤ row_upper`` and
    ``lower ≤ v ≤ upper`` (infinite entries: free): ``("optimal", duals at the optimum)``,
    ``("infeasible", a dual ray)`` (Farkas multipliers, ``None`` if HiGHS has none), or
    ``(status, None)``. Multipliers are a suggestion, signs as HiGHS gives them."""
    solver = _thread_solver("sparse")
    solver.clearModel()
    solver.passModel(_highs_lp(cost, matrix, row_lower, row_upper, lower, upper))
    solver.run()
    status = solver.getModelStatus()
    if status == STATUS.kOptimal:
        return "optimal", np.array(solver.getSolution().row_dual)
    if status == STATUS.kInfeasible:
        _, has_ray, ray = solver.getDualRay()
        return "infeasible", np.array(ray) if has_ray else None
    return solver.modelStatusToString(status), None


class BoundedLp:
    """One sparse LP ``min cost·v`` whose column bounds change between solves (a branch and
    bound's nodes): passed to HiGHS once, each :meth:`solve` warm-started from the previous
    basis. Like :func:`minimise_rows`, it only suggests: callers prove."""

    def __init__(self, cost: np.ndarray, matrix: CompressedRows, row_lower: np.ndarray,
                 row_upper: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        solver = _thread_solver("bounded")
        self._solver = solver
        solver.clearModel()
        solver.passModel(_highs_lp(cost, matrix, row_lower, row_upper, lower, upper))

    def solve(self, columns: np.ndarray, lower: np.ndarray, upper: np.ndarray
              ) -> tuple[str, np.ndarray | None, np.ndarray | None]:
        """Solve with the bounds of ``columns`` set to ``lower``/``upper`` (the other columns
        keep theirs): ``("optimal", duals, primal point)``, ``("infeasible", a dual ray or
        None, None)`` or ``(status, None, None)``. Valid only while this object's solver is
        the thread's last one used (one branch and bound at a time per thread)."""
        solver = self._solver
        index = np.asarray(columns, dtype=np.int32)
        solver.changeColsBounds(index.size, index, _finite_or_inf(lower), _finite_or_inf(upper))
        solver.run()
        status = solver.getModelStatus()
        if status == STATUS.kOptimal:
            solution = solver.getSolution()
            return "optimal", np.array(solution.row_dual), np.array(solution.col_value)
        if status == STATUS.kInfeasible:
            _, has_ray, ray = solver.getDualRay()
            return "infeasible", (np.array(ray) if has_ray else None), None
        return solver.modelStatusToString(status), None, None


MIP_FEASIBLE_STOPS = (STATUS.kTimeLimit, STATUS.kIterationLimit, STATUS.kSolutionLimit)
"""Statuses at which a MILP search may hold a feasible point (read only if its objective is
finite), besides the optimum."""


def search_mip(cost: np.ndarray, matrix: CompressedRows, row_lower: np.ndarray,
               row_upper: np.ndarray, lower: np.ndarray, upper: np.ndarray,
               integral: np.ndarray, options: dict[str, bool | int | float]
               ) -> tuple[str, float | None, np.ndarray | None]:
    """HiGHS's MILP search for ``min cost·v`` subject to ``row_lower ≤ matrix·v ≤ row_upper``,
    ``lower ≤ v ≤ upper`` and ``v_j`` integral where ``integral[j]``, with HiGHS's
    ``options`` (``presolve`` as a bool). The model is passed column-wise and the options are
    those ``scipy.optimize.milp`` would pass. Returns ``("infeasible", None, None)``, or
    ``(status, HiGHS's dual bound, the point)`` when HiGHS holds a point (at the optimum or a
    limit), or ``(status, None, None)``. Like every answer here, a claim: callers prove.
    Each search gets a fresh solver (0.1 ms), as scipy's gives it: a reused one carries state
    from search to search (a test's verdict changed with the searches run before it). HiGHS's
    MILP starts worker threads that a forked process does not inherit (a process pool's
    worker then spins in its first MILP), so they are shut down after each search."""
    solver = quiet_highs()
    solver.setOptionValue("output_flag", False)
    for key, value in options.items():
        if key == "presolve":
            value = "on" if value else "off"
        solver.setOptionValue(key, value)
    lp = _highs_lp(cost, matrix, row_lower, row_upper, lower, upper, column_wise=True)
    lp.integrality_ = [highspy.HighsVarType(int(flag)) for flag in integral]
    solver.passModel(lp)
    solver.run()
    highspy.Highs.resetGlobalScheduler(True)
    status = solver.getModelStatus()
    if status == STATUS.kInfeasible:
        return "infeasible", None, None
    info = solver.getInfo()
    has_point = status == STATUS.kOptimal or (
        status in MIP_FEASIBLE_STOPS and info.objective_function_value != INFINITY)
    if not has_point:
        return solver.modelStatusToString(status), None, None
    point = np.array(solver.getSolution().col_value)
    return solver.modelStatusToString(status), float(info.mip_dual_bound), point
