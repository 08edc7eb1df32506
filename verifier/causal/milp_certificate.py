"""A proof, trusting no solver, that a two-copy MILP has no point with margin ``t ≥ 0``.

HiGHS's branch and bound runs in floating point with tolerances; its "infeasible" is a claim,
not a proof. :func:`certify_negative_margin` proves the claim itself: a branch and bound of
its own over the MILP's integer variables (the ReLU phases, one-hot and integer inputs), in
which a node is the LP relaxation with some integer variables' bounds narrowed, and a node is
closed only by a bound proven in real arithmetic
(:func:`verifier.lp_bound.proven_upper_bounds`, rounding included):

* the margin's LP maximum over the node is ``< 0`` (the optimum's duals as multipliers), or
* the node's LP is empty (HiGHS's Farkas ray, checked the same way: ``0·v ≤ bound < 0``).

HiGHS (:class:`verifier.highs.BoundedLp`, warm-started from node to node) only proposes the
multipliers and the branching variable (the most fractional integer variable of the node's
LP optimum). Branching splits an integer variable's range at its LP value
(``≤ ⌊x⌋`` / ``≥ ⌊x⌋ + 1``), so the leaves' boxes cover every integer point of the parent:
when every leaf is closed, no point of the MILP has ``t ≥ 0``, which is what the exact check
needs (a biased point has every margin row ``≥ 0``). Nothing else is trusted.

A node that cannot be closed ends the search unproven: an LP optimum whose integer variables
are all integral (it is a point of the MILP, its margin not proven negative), an empty LP
whose ray proves nothing, any other solver status, the node limit or the deadline. The
caller then leaves the partition undecided (it is split), never fair.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_array

from verifier.highs import BoundedLp
from verifier.lp_bound import proven_upper_bounds

NODE_LIMIT = 2000
"""Nodes (LPs) one certificate may solve before it gives up (unproven)."""
BATCH = 16
"""Nodes whose LPs are solved before their bounds are proven together (one vectorised
:func:`~verifier.lp_bound.proven_upper_bounds` call)."""
INTEGRAL = 1e-9
"""An integer variable's LP value within this of an integer is not branched on: every
integer variable so, the LP optimum is (up to the solver's tolerance) a point of the MILP and
the node cannot be closed."""


@dataclass(frozen=True)
class MarginCertificate:
    """``proven``: every node closed by a proven bound (no MILP point has ``t ≥ 0``).
    ``nodes``: LPs solved. ``reason``: ``proven``, ``integral`` (an unclosable LP optimum
    with integral integer variables), ``empty`` (an empty LP whose ray proves nothing),
    ``solver`` (another LP status), ``nodes`` (the node limit) or ``deadline``."""

    proven: bool
    nodes: int
    reason: str


def certify_negative_margin(matrix: csr_array, row_lower: np.ndarray, row_upper: np.ndarray,
                            lower: np.ndarray, upper: np.ndarray, integral: np.ndarray,
                            margin: int, node_limit: int = NODE_LIMIT,
                            deadline: float | None = None) -> MarginCertificate:
    """Prove that no ``v`` with ``row_lower ≤ matrix·v ≤ row_upper``, ``lower ≤ v ≤ upper``
    and ``v_j`` integral wherever ``integral[j]`` has ``v[margin] ≥ 0`` (module docstring).
    Every bound must be finite except possibly ``margin``'s lower one (moved here low enough
    to keep every point with ``t ≥ 0``). ``deadline``: ``time.time()`` seconds."""
    lower = np.asarray(lower, dtype=np.float64).copy()
    upper = np.asarray(upper, dtype=np.float64)
    finite = np.abs(np.concatenate([lower, upper]))
    lower[margin] = -2.0 * float(finite[np.isfinite(finite)].max(initial=1.0)) - 1.0
    row_lower = np.asarray(row_lower, dtype=np.float64)
    row_upper = np.asarray(row_upper, dtype=np.float64)
    columns = np.flatnonzero(np.asarray(integral, dtype=bool))
    cost = np.zeros(matrix.shape[1])
    cost[margin] = 1.0
    lp = BoundedLp(-cost, matrix, row_lower, row_upper, lower, upper)
    stack = [(lower[columns], upper[columns])]
    nodes = 0
    while stack:
        if deadline is not None and time.time() >= deadline:
            return MarginCertificate(False, nodes, "deadline")
        batch = [stack.pop() for _ in range(min(BATCH, len(stack)))]
        if nodes + len(batch) > node_limit:
            return MarginCertificate(False, nodes, "nodes")
        nodes += len(batch)
        solved = [lp.solve(columns, low, high) for low, high in batch]
        failure = _unsolvable(solved)
        if failure is not None:
            return MarginCertificate(False, nodes, failure)
        closed = _closed(cost, matrix, row_lower, row_upper, lower, upper, columns, batch,
                         solved)
        for (low, high), (status, _, point), done in zip(batch, solved, closed, strict=True):
            if done:
                continue
            if status != "optimal" or point is None:
                return MarginCertificate(False, nodes, "empty")
            values = np.clip(point[columns], low, high)  # within the solver's tolerance
            branch = _branching(values)
            if branch is None:
                return MarginCertificate(False, nodes, "integral")
            cut = np.floor(values[branch])
            below_high, above_low = high.copy(), low.copy()
            below_high[branch] = cut
            above_low[branch] = cut + 1.0
            stack.append((low, below_high))
            stack.append((above_low, high))
    return MarginCertificate(True, nodes, "proven")


def _branching(values: np.ndarray) -> int | None:
    """The integer variable to branch on: the most fractional, ``None`` if all are within
    :data:`INTEGRAL` of an integer."""
    fraction = np.abs(values - np.rint(values))
    if fraction.size == 0:
        return None
    branch = int(np.argmax(fraction))
    return branch if fraction[branch] > INTEGRAL else None


def _unsolvable(solved: list[tuple[str, np.ndarray | None, np.ndarray | None]]) -> str | None:
    """``solver`` if some node's LP ended in neither optimum nor infeasibility with a ray."""
    for status, multipliers, _ in solved:
        if status not in ("optimal", "infeasible"):
            return "solver"
        if multipliers is None:
            return "empty"
    return None


def _node_bounds(lower: np.ndarray, upper: np.ndarray, columns: np.ndarray,
                 boxes: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Column bounds ``(n, len(boxes))``: ``lower``/``upper`` with the integer ``columns`` set
    to each box's."""
    node_lower = np.repeat(lower[:, None], len(boxes), axis=1)
    node_upper = np.repeat(upper[:, None], len(boxes), axis=1)
    for k, (low, high) in enumerate(boxes):
        node_lower[columns, k] = low
        node_upper[columns, k] = high
    return node_lower, node_upper


def _closed(cost: np.ndarray, matrix: csr_array, row_lower: np.ndarray, row_upper: np.ndarray,
            lower: np.ndarray, upper: np.ndarray, columns: np.ndarray,
            batch: list[tuple[np.ndarray, np.ndarray]],
            solved: list[tuple[str, np.ndarray | None, np.ndarray | None]]) -> np.ndarray:
    """Whether each node of ``batch`` is closed by a proven bound: the margin's maximum
    ``< 0`` from an optimum's duals, or the zero objective's maximum ``< 0`` (no point) from
    an empty LP's ray; both sign conventions of each multiplier vector are tried, in one
    vectorised call per objective."""
    node_lower, node_upper = _node_bounds(lower, upper, columns,
                                          [box for box in batch for _ in range(2)])
    multipliers = np.concatenate([np.stack([y, -y]) for _, y, _ in solved if y is not None])
    closed = np.zeros(len(batch), dtype=bool)
    for objective, status in ((cost, "optimal"), (np.zeros_like(cost), "infeasible")):
        pick = np.array([s == status for s, _, _ in solved])
        if not pick.any():
            continue
        candidates = np.repeat(pick, 2)
        bounds = proven_upper_bounds(objective, matrix, row_lower, row_upper,
                                     node_lower[:, candidates], node_upper[:, candidates],
                                     multipliers[candidates]).reshape(-1, 2)
        closed[pick] = bounds.min(axis=1) < 0.0
    return closed
