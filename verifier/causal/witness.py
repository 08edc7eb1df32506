"""Witnesses are proof objects: their classes are decided in real arithmetic, not in float.

A witness of bias is two points that differ only in sensitive inputs and get two different
classes. Float evaluation can disagree with the real-arithmetic value when two outputs are
within rounding of each other, so a witness is kept only when both classes are *certified*.
"""

from __future__ import annotations

import numpy as np

from verifier.bounds import compute_bounds
from verifier.exact_arith import exact_outputs
from verifier.network import Network


def _pair_rows(classes: int) -> np.ndarray:
    """``(K(K−1), K)`` rows ``e_c − e_d`` grouped by ``c`` (``d ≠ c`` ascending)."""
    eye = np.eye(classes)
    return np.array([eye[c] - eye[d] for c in range(classes) for d in range(classes) if d != c])


def certified_classes(network: Network, points: np.ndarray) -> np.ndarray:
    """The class of each point that beats every other class strictly in real arithmetic, or
    −1 where no class does (a tie) or the IR cannot decide it.

    First the bounds of every class difference on the point (sound, with rounding margins
    that also cover folded coefficients); a point they leave undecided is evaluated exactly
    in rational arithmetic, which is the model's real value when the IR holds the model's own
    coefficients (a folded IR leaves it at −1).
    """
    points = np.atleast_2d(np.asarray(points, dtype=np.float64))
    count, classes = points.shape[0], network.output_size
    result = compute_bounds(network, points, points, _pair_rows(classes), "ibp")
    wins = (result.lower > 0.0).reshape(count, classes, classes - 1).all(axis=2)
    certified = np.where(wins.any(axis=1), np.argmax(wins, axis=1), -1)
    possible = (result.upper > 0.0).reshape(count, classes, classes - 1).all(axis=2)
    undecided = (certified < 0) & possible.any(axis=1)
    if undecided.any() and not network.folded:
        for row in np.flatnonzero(undecided):
            outputs = exact_outputs(network, points[row])
            best = max(range(classes), key=lambda k: outputs[k])
            if all(outputs[best] > outputs[k] for k in range(classes) if k != best):
                certified[row] = best
    return certified


def confirmed_pairs(
    network: Network, x_a: np.ndarray, x_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which candidate witness pairs are genuine (both classes certified and different), with
    the certified classes of ``x_a`` and ``x_b`` (−1 where not certified)."""
    x_a = np.atleast_2d(x_a)
    classes = certified_classes(network, np.vstack([x_a, np.atleast_2d(x_b)]))
    class_a, class_b = classes[: x_a.shape[0]], classes[x_a.shape[0] :]
    return (class_a >= 0) & (class_b >= 0) & (class_a != class_b), class_a, class_b
