"""One-hot groups of input columns: a group's part of a linear form ranges exactly over the
coefficients of the categories a box still allows (a vertex set), not over ``[0, 1]^g``.

Used wherever a linear form meets the input box: the first layer's interval image
(:mod:`verifier.bounds.intervals`), CROWN's concretisation (:mod:`verifier.bounds.backward`)
and alpha-CROWN's (:mod:`verifier.bounds.alpha`). A group no category of which fits a box
keeps the box relaxation, which is sound for any box.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from verifier.arrays import (
    Array,
    astype,
    from_numpy,
    namespace,
    take,
    unique_rows,
    unique_values,
)
from verifier.bounds.affine import _halves


@dataclass(frozen=True)
class _OneHot:
    """One-hot groups of input columns and, per box, which categories it still allows.

    A group's columns hold a one-hot vector (exactly one 1). Over a box, category ``c`` of a
    group is *allowed* when ``e_c`` fits the box's columns of that group; the group's part of
    a linear form ``a·x`` then ranges exactly over ``{a_c : c allowed}`` (a vertex set, not the
    ``[0, 1]^g`` box). A group with no allowed category (the box holds no one-hot vector of
    it, so no point of the population) keeps the box relaxation, which is sound for any box.
    ``index``: ``(G, m)`` group columns, padded by repeating the first; ``allowed``:
    ``(B, G, m)``; ``usable``: ``(B, G)`` groups bounded by their categories; ``free``:
    ``(B, D)`` 1.0 for columns bounded by the box, 0.0 for columns of usable groups;
    ``shut``: ``(B, D)`` ``+∞`` on the columns of usable groups whose category is not
    allowed, 0 elsewhere (added to a coefficient row, it masks them out); ``columns``: each
    group's columns, a slice where they are contiguous (a view, no copy).
    """

    index: Array
    allowed: Array
    usable: Array
    free: Array
    shut: Array
    columns: tuple[slice | Array, ...]

    def select(self, rows: Array) -> _OneHot:
        """The records of the boxes ``rows`` (a mask or an index)."""
        return _OneHot(self.index, self.allowed[rows], self.usable[rows], self.free[rows],
                       self.shut[rows], self.columns)


def _onehot(
    groups: Sequence[Sequence[int]], lo: Array, hi: Array
) -> _OneHot | None:
    """The one-hot records of the boxes ``[lo, hi]`` (None without groups), on their
    backend."""
    if not groups:
        return None
    xp = namespace(lo)
    width = max(len(group) for group in groups)
    index = from_numpy(
        np.array([[*g, *([g[0]] * (width - len(g)))] for g in groups], dtype=np.int64), lo)
    valid = from_numpy(
        np.array([[True] * len(g) + [False] * (width - len(g)) for g in groups]), lo)
    g_lo, g_hi = lo[:, index], hi[:, index]
    zero_fails = ~((g_lo <= 0.0) & (g_hi >= 0.0)) & valid
    one_fits = (g_lo <= 1.0) & (g_hi >= 1.0) & valid
    # counts in int32 (exact: a group has fewer than 2^31 columns); the int64 conversion
    # of the (B, G, m) mask took 2.6 ms of a 2,048-box evaluation on Adult-13, int32 0.2
    others_fail = (xp.sum(zero_fails, axis=2, keepdims=True, dtype=xp.int32)
                   - astype(zero_fails, xp.int32))
    allowed = one_fits & (others_fail == 0)
    usable = xp.any(allowed, axis=2)
    # per input column: its group and its slot there (0 outside every group)
    member = np.full(lo.shape[1], -1, dtype=np.int64)
    slot = np.zeros(lo.shape[1], dtype=np.int64)
    for number, group in enumerate(groups):
        member[list(group)] = number
        slot[list(group)] = np.arange(len(group))
    grouped = usable[:, from_numpy(np.maximum(member, 0), lo)] & from_numpy(member >= 0, lo)
    free = astype(~grouped, lo.dtype)
    closed = grouped & ~allowed[:, from_numpy(np.maximum(member, 0), lo), from_numpy(slot, lo)]
    shut = xp.where(closed, np.inf, xp.zeros_like(lo))
    columns = tuple(
        slice(g[0], g[-1] + 1) if list(g) == list(range(g[0], g[-1] + 1))
        else from_numpy(np.array(list(g), dtype=np.int64), lo)
        for g in groups
    )
    return _OneHot(index, allowed, usable, free, shut, columns)


def _input_halves(
    lo: Array, hi: Array, onehot: _OneHot | None
) -> tuple[Array, Array]:
    """:func:`_halves` of the input boxes with the columns of usable one-hot groups set to
    zero: their part of a linear form is added by :func:`_group_extreme` instead."""
    if onehot is None:
        return _halves(lo, hi)
    return _halves(lo * onehot.free, hi * onehot.free)


def _group_extreme(
    coeffs: Array, onehot: _OneHot, largest: bool = False,
    rows: Array | None = None,
) -> Array:
    """``Σ`` over usable groups of ``min`` (``max`` if ``largest``) over allowed categories of
    the coefficients: ``coeffs`` ``(..., R, K, D)``, row ``r`` on box ``rows[r]`` of
    ``onehot`` (box ``r`` without ``rows``; leading axes share the records); returns
    ``(..., R, K)``. The categories that are not allowed are
    masked out over the input columns once, by adding ``±∞`` (no per-group gather of the
    coefficients; an addition, where a select took 3× as long on one thread), and only the
    two records read are gathered per row. A coefficient that is already infinite may give
    NaN, which every caller turns into the infinite bound on its side."""
    xp = namespace(coeffs)
    shut = onehot.shut if rows is None else take(onehot.shut, rows)
    usable = onehot.usable if rows is None else onehot.usable[rows]
    masked = coeffs - shut[:, None, :] if largest else coeffs + shut[:, None, :]
    extreme = xp.amax if largest else xp.amin
    extremes = xp.stack(
        [extreme(masked[..., columns], axis=-1) for columns in onehot.columns], axis=-1)
    return xp.sum(xp.where(usable[:, None, :], extremes, 0.0), axis=-1)


def _distinct_rows(masks: Array) -> tuple[Array, Array]:
    """The distinct rows of a boolean ``(B, m)`` matrix and each row's index among them
    (rows of up to 62 entries are compared as packed integers, much faster than rows)."""
    if masks.shape[1] > 62:
        return unique_rows(masks)
    xp = namespace(masks)
    weights = from_numpy(np.ones(masks.shape[1], dtype=np.int64)
                         << np.arange(masks.shape[1], dtype=np.int64), masks)
    keys, inverse = unique_values(xp.sum(astype(masks, xp.int64) * weights, axis=1))
    patterns = ((keys[:, None] & weights) != 0)
    return patterns, inverse


def _shared_group_extremes(
    weight: Array, onehot: _OneHot
) -> tuple[Array, Array]:
    """Per box and row of a weight matrix shared by every box: the sums over usable groups of
    the smallest and largest weight over the allowed categories, ``(B, rows)`` each.

    Boxes of a batch share few distinct sets of allowed categories per group, so each set's
    extremes are computed once and gathered."""
    xp = namespace(weight)
    batch = onehot.allowed.shape[0]
    low = xp.zeros((batch, weight.shape[0]), dtype=xp.float64)
    high = xp.zeros_like(low)
    for group in range(onehot.index.shape[0]):
        patterns, inverse = _distinct_rows(onehot.allowed[:, group])
        values = weight[:, onehot.index[group]]  # (rows, m)
        allowed = patterns[:, None, :]
        smallest = xp.amin(xp.where(allowed, values[None], np.inf), axis=2)
        largest = xp.amax(xp.where(allowed, values[None], -np.inf), axis=2)
        usable = onehot.usable[:, group, None]
        low += xp.where(usable, smallest[inverse], 0.0)
        high += xp.where(usable, largest[inverse], 0.0)
    return low, high
