"""Which children reuse their parent's bounds of the last hidden layer instead of CROWN's
tightening of it (:mod:`verifier.bounds.carried`).

On a network with two hidden layers or more, CROWN's tightening of the last hidden layer is
the largest part of a box's bounds (Adult-13 2×64: 41 % of PV's CPU); a child that keeps its
parent's tightened bounds of that layer, intersected with its own IBP ones, is bounded at
about half the cost and nearly as tightly (its linear credit ~10 % lower on a late batch).
Children alternate: those of a tightened parent reuse its bounds, and theirs are tightened
again (:data:`REUSED_GENERATIONS`), so no box's bounds of that layer are older than one
split. Only a choice of work: carried bounds are sound on every box inside the parent.
"""

from __future__ import annotations

import numpy as np

REUSED_GENERATIONS = 1
"""A child at split depth ``d`` reuses its parent's carried bounds unless ``d`` is a multiple
of ``REUSED_GENERATIONS + 1``: with 1, every other generation is tightened (docs/
decisions.md, 2026-11-30, "A child's last hidden layer from its parent's bounds")."""


def inherited_carried(
    carried: np.ndarray, inside: np.ndarray, depth: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The carried bounds ``(B, 2, n)`` of each child from its parent's (``carried``, one row
    per child), ``−∞``/``+∞`` for a child not ``inside`` its parent, and whether the child
    reuses them instead of tightening (``depth``: the child's split depth; never a child not
    inside, nor where no layer is carried, ``n = 0``)."""
    unknown = np.empty_like(carried)
    unknown[:, 0], unknown[:, 1] = -np.inf, np.inf
    known = np.where(inside[:, None, None], carried, unknown)
    reuse = inside & (depth % (REUSED_GENERATIONS + 1) != 0) & (carried.shape[2] > 0)
    return known, reuse
