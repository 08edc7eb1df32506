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
        self.values: dict[int, np.ndarray] = {}
        for column in range(domain.lower.size):
            if not (math.isfinite(domain.lower[column]) and math.isfinite(domain.upper[column])):
                self.values[column] = self._table(column)

    def cdf(self, column: int, points: np.ndarray) -> np.ndarray:
        """``P[x_column <= t]`` (upper mass enclosure) for every ``t`` in ``points``."""
        count = points.size
        lo = np.repeat(self.domain.lower[None, :], count, axis=0)
        hi = np.repeat(self.domain.upper[None, :], count, axis=0)
        hi[:, column] = np.minimum(points, self.domain.upper[column])
        _, upper = self.masses(lo, hi)
        return upper

    def _table(self, column: int) -> np.ndarray:
        levels = QUANTILE_LEVELS
        low = np.full(levels.size, -1.0)
        high = np.full(levels.size, 1.0)
        for _ in range(64):
            below = self.cdf(column, low) > levels
            above = self.cdf(column, high) < levels
            if not (below.any() or above.any()):
                break
            low[below] *= 2.0
            high[above] *= 2.0
        for _ in range(60):
            middle = (low + high) * 0.5
            take_high = self.cdf(column, middle) >= levels
            high = np.where(take_high, middle, high)
            low = np.where(take_high, low, middle)
        return np.maximum.accumulate(high)

    def split_points(self, column: int, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """A finite cut strictly inside each interval with an infinite side."""
        table = self.values[column]
        points = np.empty(lower.size)
        both = ~np.isfinite(lower) & ~np.isfinite(upper)
        points[both] = table[np.searchsorted(QUANTILE_LEVELS, 0.5)]
        right = np.isfinite(lower) & ~np.isfinite(upper)
        if right.any():
            level = (self.cdf(column, lower[right]) + 1.0) * 0.5
            index = np.minimum(np.searchsorted(QUANTILE_LEVELS, level), table.size - 1)
            cut = table[index]
            fallback = lower[right] + np.maximum(1.0, np.abs(lower[right]))
            points[right] = np.where(cut > lower[right], cut, fallback)
        left = ~np.isfinite(lower) & np.isfinite(upper)
        if left.any():
            level = self.cdf(column, upper[left]) * 0.5
            index = np.maximum(np.searchsorted(QUANTILE_LEVELS, level, side="right") - 1, 0)
            cut = table[index]
            fallback = upper[left] - np.maximum(1.0, np.abs(upper[left]))
            points[left] = np.where(cut < upper[left], cut, fallback)
        return points
