"""Split points for unbounded dimensions from the population's marginal quantiles.

A box side that is infinite cannot be bisected; cutting it at a quantile of the population's
marginal that halves the marginal mass on the unbounded side keeps children of comparable
probability, whatever the feature's scale (the exponential search ``0, 1, 2, 4, …`` of paper
003 wastes a dozen splits on features whose scale is in the thousands). Only used to choose
cuts: soundness never depends on where a box is cut.
"""

from __future__ import annotations

import math

import numpy as np

from verifier.pv.domain import InputDomain, MassFunction

QUANTILE_LEVELS = np.unique(
    np.concatenate([2.0 ** -np.arange(1, 41), 1.0 - 2.0 ** -np.arange(1, 41), [0.5]])
)


class MarginalQuantiles:
    """Marginal quantiles of the population for columns with an unbounded side."""

    def __init__(self, masses: MassFunction, domain: InputDomain) -> None:
        self.masses = masses
        self.domain = domain
        columns = [column for column in range(domain.lower.size)
                   if not (math.isfinite(domain.lower[column])
                           and math.isfinite(domain.upper[column]))]
        self._tables_of, self._masses_of = self._tables(np.array(columns, dtype=np.int64))
        self._row_of = np.full(domain.lower.size, -1, dtype=np.int64)
        self._row_of[columns] = np.arange(len(columns))
        self.values: dict[int, np.ndarray] = dict(zip(columns, self._tables_of, strict=True))

    def cdf(self, column: int, points: np.ndarray) -> np.ndarray:
        """``P[x_column <= t]`` (upper mass enclosure) for every ``t`` in ``points``."""
        return self._cdf_at(np.full(points.size, column), points)

    def _cdf_at(self, columns: np.ndarray, points: np.ndarray) -> np.ndarray:
        """:meth:`cdf` of ``columns[i]`` at ``points[i]`` (same shapes), in one call of the
        mass function (each box's mass is its own, whatever is beside it)."""
        count = points.size
        lo = np.repeat(self.domain.lower[None, :], count, axis=0)
        hi = np.repeat(self.domain.upper[None, :], count, axis=0)
        which = columns.reshape(-1)
        hi[np.arange(count), which] = np.minimum(points.reshape(-1), self.domain.upper[which])
        _, upper = self.masses(lo, hi)
        return upper.reshape(points.shape)

    def _tables(self, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each column's value at every level of :data:`QUANTILE_LEVELS` (``(columns,
        levels)``): brackets doubled until they hold the level, then 60 bisection steps; all
        columns and both brackets in one mass call per step. Beside it, the :meth:`cdf` of
        each entry as that step's mass call returned it (NaN for a bracket doubled after its
        last call), which :meth:`split_points` reads instead of calling again."""
        levels = np.broadcast_to(QUANTILE_LEVELS, (columns.size, QUANTILE_LEVELS.size))
        low = np.full(levels.shape, -1.0)
        high = np.full(levels.shape, 1.0)
        if columns.size == 0:
            return high, np.full(levels.shape, np.nan)
        each = np.broadcast_to(columns[:, None], levels.shape)
        both = np.concatenate([each, each])
        for _ in range(64):
            at_low, at_high = np.split(self._cdf_at(both, np.concatenate([low, high])), 2)
            below = at_low > levels
            above = at_high < levels
            if not (below.any() or above.any()):
                break
            low[below] *= 2.0
            high[above] *= 2.0
        high_mass = np.where(above, np.nan, at_high)
        for _ in range(60):
            middle = (low + high) * 0.5
            at_middle = self._cdf_at(each, middle)
            take_high = at_middle >= levels
            high = np.where(take_high, middle, high)
            high_mass = np.where(take_high, at_middle, high_mass)
            low = np.where(take_high, low, middle)
        table = np.maximum.accumulate(high, axis=1)
        # each entry is the level's own bracket or an earlier level's larger one: its mass
        # is that entry's
        position = np.arange(levels.shape[1])
        source = np.maximum.accumulate(np.where(high >= table, position, 0), axis=1)
        return table, np.take_along_axis(high_mass, source, axis=1)

    def _known_cdf(self, columns: np.ndarray, points: np.ndarray) -> np.ndarray:
        """:meth:`cdf` of ``columns[i]`` at ``points[i]`` where the point is an entry of the
        column's table (the same bits) whose mass the table's own mass calls returned (the
        same box: the same float), NaN elsewhere."""
        rows = self._row_of[columns]
        match = self._tables_of[rows].view(np.int64) == points.view(np.int64)[:, None]
        masses = np.where(match, self._masses_of[rows], np.nan)
        entry = np.argmax(match & ~np.isnan(masses), axis=1)
        return masses[np.arange(points.size), entry]

    def split_points(self, columns: np.ndarray, lower: np.ndarray,
                     upper: np.ndarray) -> np.ndarray:
        """A finite cut strictly inside each interval ``[lower[i], upper[i]]`` of column
        ``columns[i]`` with an infinite side. A one-sided interval's finite end is most often
        an earlier cut, an entry of the table, whose marginal mass the table kept; the others'
        masses are computed in one mass call."""
        tables = self._tables_of[self._row_of[columns]]
        levels = QUANTILE_LEVELS
        points = tables[:, np.searchsorted(levels, 0.5)]
        right = np.isfinite(lower) & ~np.isfinite(upper)
        left = ~np.isfinite(lower) & np.isfinite(upper)
        one_sided = right | left
        if not one_sided.any():
            return points
        mass = self._known_cdf(columns, np.where(right, lower, upper))
        unknown = one_sided & np.isnan(mass)
        if unknown.any():
            mass[unknown] = self._cdf_at(columns[unknown],
                                         np.where(right, lower, upper)[unknown])
        if right.any():
            level = (mass[right] + 1.0) * 0.5
            index = np.minimum(np.searchsorted(levels, level), levels.size - 1)
            cut = tables[right, index]
            fallback = lower[right] + np.maximum(1.0, np.abs(lower[right]))
            points[right] = np.where(cut > lower[right], cut, fallback)
        if left.any():
            level = mass[left] * 0.5
            index = np.maximum(np.searchsorted(levels, level, side="right") - 1, 0)
            cut = tables[left, index]
            fallback = upper[left] - np.maximum(1.0, np.abs(upper[left]))
            points[left] = np.where(cut < upper[left], cut, fallback)
        return points
