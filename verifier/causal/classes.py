"""The class rule of :meth:`~verifier.network.Network.as_classifier`, ties included, as the
causal certifier reads it: from sound bounds, from float values and from exact values.

The class is the argmax of the outputs with ties to the lowest index (a single logit ``z`` is
the outputs ``(0, z)``: class 1 iff ``z > 0``, so ``z = 0`` is class 0). Class ``c`` wins at
``y`` iff ``y_c > y_d`` for every ``d < c`` (strict) and ``y_c ≥ y_d`` for every ``d > c``
(a tie with a higher index goes to ``c``). A tie is a class, never "no class".

Bounds are read on the rows of :func:`~verifier.bounds.pairwise_difference_spec`
(``e_c − e_d``, grouped by ``c``, ``d ≠ c`` ascending).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np


def strict_rows(classes: int) -> np.ndarray:
    """``(K, K−1)``: whether row ``(c, d)`` of the pairwise spec needs ``y_c − y_d > 0``
    (``d < c``) rather than ``≥ 0`` (``d > c``) for class ``c`` to win."""
    others = np.array([[d for d in range(classes) if d != c] for c in range(classes)])
    return others.reshape(classes, classes - 1) < np.arange(classes)[:, None]


def proven_from_lower(lower: np.ndarray, classes: int) -> np.ndarray:
    """``(M,)`` the class proven on each box from sound lower bounds ``(M, K(K−1))`` of the
    pairwise differences (``−1`` where none is): ``lb > 0`` on the strict rows and
    ``lb ≥ 0`` on the others. At most one class can be proven on a non-empty box."""
    lb = lower.reshape(-1, classes, classes - 1)
    strict = strict_rows(classes)[None]
    wins = np.where(strict, lb > 0.0, lb >= 0.0).all(axis=2)
    return np.where(wins.any(axis=1), np.argmax(wins, axis=1), -1)


def possible_from_upper(upper: np.ndarray, classes: int) -> np.ndarray:
    """``(M, K)`` from sound upper bounds ``(M, K(K−1))`` of the pairwise differences:
    whether class ``k`` may win somewhere in each box. It cannot where a lower class is proven
    at least as large (``ub(y_k − y_d) ≤ 0``, ``d < k``) or a higher class proven larger
    (``ub(y_k − y_d) < 0``, ``d > k``)."""
    ub = upper.reshape(-1, classes, classes - 1)
    strict = strict_rows(classes)[None]
    return np.where(strict, ub > 0.0, ub >= 0.0).all(axis=2)


def float_classes(outputs: np.ndarray) -> np.ndarray:
    """The class of each row of float outputs (argmax, ties to the lowest index). A float
    output can differ from the real value, so these are candidates, re-checked by
    :func:`verifier.causal.witness.certified_classes` before they prove anything."""
    return np.argmax(outputs, axis=-1)


def exact_class(outputs: Sequence[Fraction]) -> int:
    """The class of exact outputs: the largest, ties to the lowest index."""
    return max(range(len(outputs)), key=lambda k: (outputs[k], -k))
