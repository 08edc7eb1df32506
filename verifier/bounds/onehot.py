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
import torch

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

    index: torch.Tensor
    allowed: torch.Tensor
    usable: torch.Tensor
    free: torch.Tensor
    shut: torch.Tensor
    columns: tuple[slice | torch.Tensor, ...]

    def select(self, rows: torch.Tensor) -> _OneHot:
        """The records of the boxes ``rows`` (a mask or an index)."""
        return _OneHot(self.index, self.allowed[rows], self.usable[rows], self.free[rows],
                       self.shut[rows], self.columns)


def _onehot(
    groups: Sequence[Sequence[int]], lo: torch.Tensor, hi: torch.Tensor
) -> _OneHot | None:
    """The one-hot records of the boxes ``[lo, hi]`` (None without groups)."""
    if not groups:
        return None
    width = max(len(group) for group in groups)
    index = torch.tensor([[*g, *([g[0]] * (width - len(g)))] for g in groups], dtype=torch.long)
    valid = torch.tensor([[True] * len(g) + [False] * (width - len(g)) for g in groups])
    g_lo, g_hi = lo[:, index], hi[:, index]
    zero_fails = ~((g_lo <= 0.0) & (g_hi >= 0.0)) & valid
    one_fits = (g_lo <= 1.0) & (g_hi >= 1.0) & valid
    # counts in int32 (exact: a group has fewer than 2^31 columns); the int64 conversion
    # of the (B, G, m) mask took 2.6 ms of a 2,048-box evaluation on Adult-13, int32 0.2
    others_fail = (zero_fails.sum(dim=2, keepdim=True, dtype=torch.int32)
                   - zero_fails.to(torch.int32))
    allowed = one_fits & (others_fail == 0)
    usable = allowed.any(dim=2)
    # per input column: its group and its slot there (-1 / 0 outside every group)
    member = torch.full((lo.shape[1],), -1, dtype=torch.long)
    slot = torch.zeros(lo.shape[1], dtype=torch.long)
    for number, group in enumerate(groups):
        member[list(group)] = number
        slot[list(group)] = torch.arange(len(group))
    grouped = usable[:, member.clamp(min=0)] & (member >= 0)
    free = (~grouped).to(lo.dtype)
    closed = grouped & ~allowed[:, member.clamp(min=0), slot]
    shut = torch.zeros_like(lo).masked_fill_(closed, np.inf)
    columns = tuple(
        slice(g[0], g[-1] + 1) if list(g) == list(range(g[0], g[-1] + 1))
        else torch.tensor(list(g), dtype=torch.long)
        for g in groups
    )
    return _OneHot(index, allowed, usable, free, shut, columns)


def _input_halves(
    lo: torch.Tensor, hi: torch.Tensor, onehot: _OneHot | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_halves` of the input boxes with the columns of usable one-hot groups set to
    zero: their part of a linear form is added by :func:`_group_extreme` instead."""
    if onehot is None:
        return _halves(lo, hi)
    return _halves(lo * onehot.free, hi * onehot.free)


def _group_extreme(
    coeffs: torch.Tensor, onehot: _OneHot, largest: bool = False,
    rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """``Σ`` over usable groups of ``min`` (``max`` if ``largest``) over allowed categories of
    the coefficients: ``coeffs`` ``(..., R, K, D)``, row ``r`` on box ``rows[r]`` of
    ``onehot`` (box ``r`` without ``rows``; leading axes share the records); returns
    ``(..., R, K)``. The categories that are not allowed are
    masked out over the input columns once, by adding ``±∞`` (no per-group gather of the
    coefficients; an addition, where a select took 3× as long on one thread), and only the
    two records read are gathered per row. A coefficient that is already infinite may give
    NaN, which every caller turns into the infinite bound on its side."""
    shut = onehot.shut if rows is None else onehot.shut.index_select(0, rows)
    usable = onehot.usable if rows is None else onehot.usable[rows]
    masked = coeffs - shut[:, None, :] if largest else coeffs + shut[:, None, :]
    extremes = torch.stack([
        masked[..., columns].amax(dim=-1) if largest else masked[..., columns].amin(dim=-1)
        for columns in onehot.columns
    ], dim=-1)
    return extremes.masked_fill(~usable[:, None, :], 0.0).sum(dim=-1)


def _distinct_rows(masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct rows of a boolean ``(B, m)`` matrix and each row's index among them
    (rows of up to 62 entries are compared as packed integers, much faster than rows)."""
    if masks.shape[1] > 62:
        return torch.unique(masks, dim=0, return_inverse=True)
    weights = torch.ones(masks.shape[1], dtype=torch.long) << torch.arange(masks.shape[1])
    keys, inverse = torch.unique((masks.long() * weights).sum(dim=1), return_inverse=True)
    patterns = ((keys[:, None] & weights) != 0)
    return patterns, inverse


def _shared_group_extremes(
    weight: torch.Tensor, onehot: _OneHot
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per box and row of a weight matrix shared by every box: the sums over usable groups of
    the smallest and largest weight over the allowed categories, ``(B, rows)`` each.

    Boxes of a batch share few distinct sets of allowed categories per group, so each set's
    extremes are computed once and gathered."""
    batch = onehot.allowed.shape[0]
    low = torch.zeros(batch, weight.shape[0], dtype=torch.float64)
    high = torch.zeros_like(low)
    for group in range(onehot.index.shape[0]):
        patterns, inverse = _distinct_rows(onehot.allowed[:, group])
        values = weight[:, onehot.index[group]]  # (rows, m)
        allowed = patterns[:, None, :]
        smallest = torch.where(allowed, values[None], np.inf).amin(dim=2)
        largest = torch.where(allowed, values[None], -np.inf).amax(dim=2)
        usable = onehot.usable[:, group, None]
        low += torch.where(usable, smallest[inverse], 0.0)
        high += torch.where(usable, largest[inverse], 0.0)
    return low, high
