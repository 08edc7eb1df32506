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
multipliers and the branching variable (strong branching among the most fractional integer
variables of the node's LP optimum, :func:`_strong_branching`). Branching splits an integer
variable's range at its LP value (``≤ ⌊x⌋`` / ``≥ ⌊x⌋ + 1``), so the leaves' boxes cover
every integer point of the parent: when every leaf is closed, no point of the MILP has
``t ≥ 0``, which is what the exact check needs (a biased point has every margin row ``≥ 0``).
Nothing else is trusted.

A node that cannot be closed ends the search unproven: an LP optimum whose integer variables
are all integral (it is a point of the MILP, its margin not proven negative), an empty LP
whose ray proves nothing, any other solver status, the node limit or the deadline. The
caller then leaves the partition undecided (it is split), never fair.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from verifier.highs import BoundedLp
from verifier.lp_bound import proven_upper_bounds
from verifier.sparse_rows import CompressedRows

NODE_LIMIT = 2000
"""LPs one certificate may solve before it gives up (unproven)."""
STRONG_CANDIDATES = 12
"""Integer variables (the most fractional) whose children's LPs are solved to choose the
branching one (:func:`_strong_branching`). On German 0.20-bias1/Gt's 254 proving models:
1,708 nodes and 10,034 LPs in 5.1 CPU s, against 13,008 nodes (one LP each) in 7.4–8.4 s
branching on the most fractional; 6 candidates 6.7 s, all of them 5.5 s."""
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


def certify_negative_margin(matrix: CompressedRows, row_lower: np.ndarray, row_upper: np.ndarray,
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
    stack: list[_Node] = [(lower[columns], upper[columns], None)]
    nodes = 0
    while stack:
        if deadline is not None and time.time() >= deadline:
            return MarginCertificate(False, nodes, "deadline")
        batch = [stack.pop() for _ in range(min(BATCH, len(stack)))]
        solved = []
        for low, high, known in batch:
            if known is None:
                known = lp.solve(columns, low, high)
                nodes += 1
            solved.append(known)
        if nodes > node_limit:
            return MarginCertificate(False, nodes, "nodes")
        failure = _unsolvable(solved)
        if failure is not None:
            return MarginCertificate(False, nodes, failure)
        boxes = [(low, high) for low, high, _ in batch]
        closed = _closed(cost, matrix, row_lower, row_upper, lower, upper, columns, boxes,
                         solved)
        for (low, high), (status, _, point), done in zip(boxes, solved, closed, strict=True):
            if done:
                continue
            if status != "optimal" or point is None:
                return MarginCertificate(False, nodes, "empty")
            if nodes >= node_limit:
                return MarginCertificate(False, nodes, "nodes")
            values = np.clip(point[columns], low, high)  # within the solver's tolerance
            children, tried = _strong_branching(lp, columns, margin, (low, high), values)
            nodes += tried
            if not children:
                return MarginCertificate(False, nodes, "integral")
            stack.extend(children)
    return MarginCertificate(True, nodes, "proven")


_Solved = tuple[str, np.ndarray | None, np.ndarray | None]
_Node = tuple[np.ndarray, np.ndarray, _Solved | None]


def _strong_branching(lp: BoundedLp, columns: np.ndarray, margin: int,
                      box: tuple[np.ndarray, np.ndarray], values: np.ndarray
                      ) -> tuple[list[_Node], int]:
    """The two children of the node ``box`` (integer columns' bounds), split on one of its
    :data:`STRONG_CANDIDATES` most fractional integer variables (LP values ``values``): the
    one whose worse child has the lowest LP margin, the first whose children both have a
    negative one. The children's LPs, solved to choose, go with them (proven when they are
    popped). Returns the children (none if every value is within :data:`INTEGRAL` of an
    integer) and the LPs solved."""
    low, high = box
    fraction = np.abs(values - np.rint(values))
    candidates = np.argsort(-fraction, kind="stable")[:STRONG_CANDIDATES]
    candidates = candidates[fraction[candidates] > INTEGRAL]
    best: tuple[float, list[_Node]] | None = None
    tried = 0
    for branch in candidates:
        cut = np.floor(values[branch])
        below_high, above_low = high.copy(), low.copy()
        below_high[branch] = cut
        above_low[branch] = cut + 1.0
        children: list[_Node] = []
        worse = -np.inf
        for child_low, child_high in ((low, below_high), (above_low, high)):
            solved = lp.solve(columns, child_low, child_high)
            tried += 1
            children.append((child_low, child_high, solved))
            status, _, point = solved
            if status != "infeasible":
                worse = max(worse, np.inf if point is None else float(point[margin]))
        if best is None or worse < best[0]:
            best = (worse, children)
        if worse < 0.0:
            break
    return ([] if best is None else best[1]), tried


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


def _closed(cost: np.ndarray, matrix: CompressedRows, row_lower: np.ndarray, row_upper: np.ndarray,
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
