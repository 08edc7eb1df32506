"""Constraint propagation over ``A z <= b``: a box holding every point of a polytope, and a
proof of emptiness that needs no LP.

:func:`tightened` shrinks a box to ``{z ∈ box : A z <= b}`` by bounding each coordinate from
each row with the others at their extremes (interval arithmetic, every bound relaxed by a
relative ``1e-9`` plus a bound on the float error of its row's sum, never by an absolute
amount, so a result means the same at every scale of the inputs);
``None`` means no point of the box satisfies the rows. :func:`provably_empty` runs it from the
box that the single-coordinate rows of ``A`` impose (region enumeration always keeps its root
box's rows): an empty answer there is an empty polytope, so the Chebyshev LP that would say
the same is skipped. Only emptiness is decided this way; a non-empty polytope still gets its
interior point from an LP.
"""

from __future__ import annotations

import numpy as np

from verifier.numerics import EPS

START_MARGIN = 1e-12


def tightened(A: np.ndarray, b: np.ndarray, lower: np.ndarray, upper: np.ndarray,
              sweeps: int = 3) -> tuple[np.ndarray, np.ndarray] | None:
    """A box containing ``{z ∈ [lower, upper] : A z <= b}`` (constraint propagation, each
    bound relaxed by a relative ``1e-9`` and by the float error of its row's sum); ``None``
    when provably empty."""
    lower, upper = lower.copy(), upper.copy()
    positive, negative = np.maximum(A, 0.0), np.minimum(A, 0.0)
    terms = A.shape[1] + 2
    for _ in range(sweeps):
        least = positive * lower + negative * upper  # (rows, D): each term's minimum
        total = least.sum(axis=1)
        rest = b[:, None] - (total[:, None] - least)  # a_j z_j <= rest
        # float error of rest: a sum of D + 2 terms, whatever cancels in it
        error = 2.0 * terms * EPS * (np.abs(least).sum(axis=1) + np.abs(b))
        with np.errstate(divide="ignore", invalid="ignore"):
            limit = rest / A
            slack = 1e-9 * (np.abs(limit) + np.abs(rest)) + error[:, None] / np.abs(A)
            upper_cut = np.where(A > 0, limit + slack, np.inf).min(axis=0)
            lower_cut = np.where(A < 0, limit - slack, -np.inf).max(axis=0)
        lower, upper = np.maximum(lower, lower_cut), np.minimum(upper, upper_cut)
        if np.any(lower > upper):
            return None
    return lower, upper


def row_box(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The box that the rows of ``A z <= b`` with one non-zero coefficient impose, widened by
    ``START_MARGIN`` relative; ``None`` when a coordinate is unbounded by such rows."""
    single = np.count_nonzero(A, axis=1) == 1
    rows, rhs = A[single], b[single]
    column = np.argmax(rows != 0, axis=1)
    coefficient = rows[np.arange(rows.shape[0]), column]
    value = rhs / coefficient
    value = value + np.where(coefficient > 0, 1.0, -1.0) * START_MARGIN * np.abs(value)
    dimension = A.shape[1]
    upper = np.full(dimension, np.inf)
    lower = np.full(dimension, -np.inf)
    np.minimum.at(upper, column[coefficient > 0], value[coefficient > 0])
    np.maximum.at(lower, column[coefficient < 0], value[coefficient < 0])
    if not (np.isfinite(lower).all() and np.isfinite(upper).all()):
        return None
    return lower, upper


def provably_empty(A: np.ndarray, b: np.ndarray, sweeps: int = 5) -> bool:
    """``True`` only if ``{z : A z <= b}`` is empty (propagation from :func:`row_box`);
    ``False`` says nothing."""
    box = row_box(A, b)
    if box is None:
        return False
    return tightened(A, b, box[0], box[1], sweeps) is None
