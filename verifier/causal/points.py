"""Non-protected points decided in real arithmetic: the class of a point at every protected
value, read by :func:`~verifier.causal.witness.certified_classes` (a rigorous float64 point
enclosure, else exact rationals). The partitioning analysis decides the single-point
partitions integer inputs refine down to with it, and a finite query is enumerated with it
(:mod:`verifier.causal.enumeration`). Imports no torch.
"""

from __future__ import annotations

import numpy as np

from verifier.causal.codes import BIASED_EVERYWHERE, FAIR, SPLIT
from verifier.causal.problem import FairnessProblem
from verifier.causal.witness import certified_classes


def decide_points(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decide partitions that are one non-protected point, with point protected cells, in
    real arithmetic: the class of the point at every protected value
    (:func:`~verifier.causal.witness.certified_classes`: a point enclosure, else exact
    rationals).
    Returns ``(B,)`` status (``FAIR``, ``BIASED_EVERYWHERE``, or ``SPLIT`` where the IR
    cannot decide, a folded network), witnesses ``(B, n)`` and their classes ``(B, 2)``."""
    batch, n = lower.shape
    values = problem.protected_cells[:, 0, :]
    count = values.shape[0]
    points = np.repeat(lower, count, axis=0)
    points[:, list(problem.protected)] = np.tile(values, (batch, 1))
    classes = certified_classes(problem.network, points).reshape(batch, count)
    known = (classes >= 0).all(axis=1)
    first, second = np.argmin(classes, axis=1), np.argmax(classes, axis=1)
    rows = np.arange(batch)
    biased = known & (classes[rows, first] != classes[rows, second])
    status = np.where(known, np.where(biased, BIASED_EVERYWHERE, FAIR), SPLIT).astype(np.int8)
    witness_a = np.where(biased[:, None], points.reshape(batch, count, n)[rows, first], np.nan)
    witness_b = np.where(biased[:, None], points.reshape(batch, count, n)[rows, second], np.nan)
    pair = np.where(biased[:, None], np.stack([classes[rows, first], classes[rows, second]],
                                              axis=1), -1)
    return status, witness_a, witness_b, pair
