"""A proven upper bound on a linear objective over a sparse LP, from any row multipliers.

For ``max cᵀv`` subject to ``row_lower ≤ A v ≤ row_upper`` and ``lower ≤ v ≤ upper``, every
vector ``y`` gives (weak duality, no optimality needed)::

    cᵀv = (c − Aᵀy)ᵀv + yᵀ(A v) ≤ Σ_j max_{v_j ∈ [l_j, u_j]} g_j v_j
                                  + Σ_i max_{r_i ∈ [row_lower_i, row_upper_i]} y_i r_i

with ``g = c − Aᵀy``. An LP solver's duals make the bound nearly tight, but the bound is valid
whatever ``y`` is, so no solver tolerance enters it: :func:`proven_upper_bound` evaluates it in
float with every rounding error bounded (Higham's ``γ_n``; Neumaier & Shcherbina, Math.
Program. 99, 2004). The data are read as the exact rationals their floats denote.
"""

from __future__ import annotations

import numpy as np

from verifier.numerics import gamma
from verifier.sparse_rows import CompressedRows, RowMatrix


def _sum_upper(terms: np.ndarray) -> np.ndarray:
    """Upper bounds on the exact sums of the columns of float ``terms`` ``(k, r)`` (each term
    exact)."""
    total = terms.sum(axis=0)
    return total + gamma(terms.shape[0] + 2) * (np.abs(terms).sum(axis=0) + np.abs(total))


def proven_upper_bound(cost: np.ndarray, matrix: CompressedRows, row_lower: np.ndarray,
                       row_upper: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                       multipliers: np.ndarray) -> float:
    """An upper bound, in real arithmetic, on ``cost·v`` over every ``v`` with ``row_lower ≤
    matrix·v ≤ row_upper`` and ``lower ≤ v ≤ upper`` (the module docstring's bound for
    ``multipliers``), or ``inf`` when the bound is unbounded (a multiplier of the wrong sign
    on an infinite side). Multipliers whose sign meets an infinite row side are taken as 0,
    which keeps the bound valid. ``multipliers`` ``(m,)``, or ``(r, m)`` for several
    candidates (e.g. a solver's duals in both sign conventions): the least of their bounds,
    the transposed matrix built once."""
    y = np.atleast_2d(np.asarray(multipliers, dtype=np.float64))
    return float(proven_upper_bounds(cost, matrix, row_lower, row_upper, lower, upper,
                                     y).min(initial=np.inf))


def proven_upper_bounds(cost: np.ndarray, matrix: CompressedRows, row_lower: np.ndarray,
                        row_upper: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                        multipliers: np.ndarray) -> np.ndarray:
    """:func:`proven_upper_bound` for ``r`` candidates at once, each with its own column
    bounds: ``multipliers`` ``(r, m)``; ``lower``/``upper`` ``(n,)`` (shared) or ``(n, r)``
    (candidate ``k`` bounds the LP over ``lower[:, k] ≤ v ≤ upper[:, k]``, e.g. the nodes of a
    branch and bound). Returns ``(r,)`` bounds, each valid in real arithmetic (``inf`` where
    nothing is proven)."""
    y = np.array(multipliers, dtype=np.float64, ndmin=2)
    y[(y > 0.0) & ~np.isfinite(row_upper)[None, :]] = 0.0
    y[(y < 0.0) & ~np.isfinite(row_lower)[None, :]] = 0.0
    transposed = RowMatrix.of(matrix).transposed()
    reduced = cost[:, None] - transposed.times(y.T)
    # every column's dot product has at most max_k + 1 roundings; γ grows with the count
    roundings = int(np.diff(transposed.indptr).max(initial=0)) + 2
    reach = transposed.absolute().times(np.abs(y).T) + np.abs(cost)[:, None]
    error = gamma(roundings) * reach
    g_low, g_high = reduced - error, reduced + error
    low = lower[:, None] if lower.ndim == 1 else lower
    high = upper[:, None] if upper.ndim == 1 else upper
    with np.errstate(invalid="ignore"):
        corners = np.stack(np.broadcast_arrays(g_low * low, g_low * high, g_high * low,
                                               g_high * high))
    corners = np.where(np.isnan(corners), 0.0, corners)  # 0·inf: a zero coefficient
    column_terms = corners.max(axis=0)
    row_side = np.where(y > 0.0, row_upper[None, :], row_lower[None, :])
    row_terms = np.where(y == 0.0, 0.0, y * np.where(y == 0.0, 0.0, row_side))
    terms = np.concatenate([column_terms, row_terms.T])
    finite = np.isfinite(terms).all(axis=0)
    return np.where(finite, _sum_upper(np.where(finite, terms, 0.0)), np.inf)


def affine_interval(weight: np.ndarray, bias: np.ndarray, lower: np.ndarray,
                    upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds, valid in real arithmetic, on ``weight @ v + bias`` over the finite box
    ``[lower, upper]``: the interval ends computed in float, widened by their dot products'
    rounding error bound."""
    positive, negative = np.maximum(weight, 0.0), np.minimum(weight, 0.0)
    low = positive @ lower + negative @ upper + bias
    high = positive @ upper + negative @ lower + bias
    reach = np.abs(weight) @ np.maximum(np.abs(lower), np.abs(upper)) + np.abs(bias)
    error = gamma(weight.shape[1] + 2) * reach
    return low - error, high + error
