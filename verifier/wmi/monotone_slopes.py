"""Whole boxes of monotonicity pairs proven free of violations by the sign of a slope.

Monotonicity by branching (:func:`verifier.wmi.branched.monotonicity`) bounds, over boxes of
the pair space ``z = (x, t)`` (``t`` is ``x′_i``; ``x′`` is ``x`` with ``x_i`` replaced by
``t``), the probability of the violation ``class(x) = c ∧ class(x′) ≠ c ∧ t > x_i``
(``t < x_i`` when decreasing), or ``f(x)[o] > f(x′)[o] ∧ t > x_i`` in the output-value form.
Bound propagation of the two copies decides a box only when one copy's class is fixed on it,
so boxes straddling the decision boundary — and every box near the diagonal ``t ≈ x_i`` —
stay open however small.

:class:`MonotoneBoxes` reads the same event differently: every pair of a box lies, with the
segment between ``x`` and ``x′``, in the *hull box* (``x``'s box with column ``i`` widened to
cover ``t``'s range). If the partial derivative in ``x_i`` of every margin ``y_c − y_j``
(``j ≠ c``) of the classifier view is ``>= 0`` on the hull box
(:func:`verifier.jacobian_bounds.input_slope_bounds`; ``<= 0`` when decreasing), every margin
is non-decreasing from ``x`` to ``x′``, so the strict wins of ``c`` over lower indices and
the ties-or-wins over higher ones that make ``class(x) = c`` (argmax, ties to the lowest
index; a single logit reads as ``(0, z)``, class 1 iff ``z > 0``) hold at ``x′`` too: no
pair of the box violates. In the output-value form the row is ``e_o`` and ``f(x′)[o] >=
f(x)[o]`` follows the same way (a sigmoid head is increasing, so the logit's order is the
output's). The box's whole mass is then credited to "no violation" by PV (its ``refute``
hook); nothing else about the box is assumed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verifier.jacobian_bounds import input_slope_bounds
from verifier.network import Network

RARE_SHARE = 1 / 32
"""Below this share of proven boxes (recent calls weighing most) the proof is tried only on
every :data:`PROBE_EVERY`-th batch: where the margins' slopes really change sign it costs
CROWN on every hull box and proves almost nothing."""
PROBE_EVERY = 8
RECENT_BOXES = 1024
"""The share is judged once this many boxes (decayed) have been tried."""


def margin_rows(outputs: int, favorable_class: int) -> np.ndarray:
    """``[outputs − 1, outputs]``: the rows ``e_c − e_j`` for every ``j ≠ c``."""
    rows = -np.eye(outputs)[[j for j in range(outputs) if j != favorable_class]]
    rows[:, favorable_class] = 1.0
    return rows


class MonotoneBoxes:
    """PV's ``refute`` hook for monotonicity pairs (module docstring): ``(lo, hi) ->
    [n_boxes] bool`` over boxes of ``z = (x, t)``, ``True`` where no pair of the box violates
    (``False`` says nothing: while proofs are rare, :data:`RARE_SHARE`, only every
    :data:`PROBE_EVERY`-th batch is tried).

    Args:
        view: the lowered, headless copy network the violation reads (the classifier view,
            or the logits in the output-value form).
        feature: the column ``i`` of ``x``; ``t`` is column ``view.input_size`` of ``z``.
        rows: ``[n_rows, n_out]`` the spec rows whose slope must have the sign.
        decreasing: the pairs have ``t < x_i`` and the slopes must be ``<= 0``.
        groups: the one-hot groups of ``x``'s columns (``feature`` in none).
        method: the pre-activation bound method.
    """

    def __init__(self, view: Network, feature: int, rows: np.ndarray, *, decreasing: bool,
                 groups: Sequence[Sequence[int]] = (), method: str = "crown") -> None:
        self.view = view
        self.feature = feature
        self.rows = rows
        self.decreasing = decreasing
        self.groups = [list(group) for group in groups]
        self.method = method
        self.tried = self.proven = 0.0  # boxes tried and proven, halved at every call
        self.calls = 0

    def __call__(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        rare = self.tried >= RECENT_BOXES and self.proven < RARE_SHARE * self.tried
        self.calls += 1
        if rare and self.calls % PROBE_EVERY:
            return np.zeros(lo.shape[0], dtype=bool)
        monotone = self._proven(lo, hi)
        self.tried = self.tried / 2 + lo.shape[0]
        self.proven = self.proven / 2 + int(monotone.sum())
        return monotone

    def _proven(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        width, f = self.view.input_size, self.feature
        hull_lo, hull_hi = lo[:, :width].copy(), hi[:, :width].copy()
        hull_lo[:, f] = np.minimum(lo[:, f], lo[:, width])
        hull_hi[:, f] = np.maximum(hi[:, f], hi[:, width])
        lower, upper = input_slope_bounds(self.view, hull_lo, hull_hi, f, self.rows,
                                          groups=self.groups, method=self.method)
        if self.decreasing:
            return np.all(upper <= 0.0, axis=1)
        return np.all(lower >= 0.0, axis=1)
