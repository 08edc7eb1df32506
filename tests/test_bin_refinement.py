"""Refined histogram bins keep every row and nothing else: sorted, disjoint bins, each
holding a row, whose probabilities are exactly the shares of the rows inside them (an integer
bin split at its median spans its rows' values only, so a gap between its halves must lose
no row). Oracle: the rows, counted bin by bin in plain arithmetic (an integer bin holds
``low..high``, a continuous one ``[low, high)``, the last closed), on heavy-tailed samples
with common values of any scale."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from verifier.population.distributions import PointMass, Uniform
from verifier.population.fitting import (
    MIN_BIN_ROWS,
    fit_continuous_histogram,
    fit_integer_histogram,
)


def _skewed_rows(seed: int, rows: int, spikes: int, integer: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    body = rng.pareto(1.0 + rng.random(), rows) * 10.0 ** rng.integers(-3, 4)
    common = rng.choice(body[: max(1, spikes)], size=rows)
    values = np.where(rng.random(rows) < 0.3, common, body)
    return np.round(values).astype(np.int64) if integer else values.round(6)


@given(seed=st.integers(0, 2**31 - 1), rows=st.integers(12, 3000), spikes=st.integers(0, 6))
def test_refined_integer_bins_hold_exactly_the_rows(seed: int, rows: int, spikes: int) -> None:
    values = _skewed_rows(seed, rows, spikes, integer=True)
    if np.ptp(values) == 0:
        return
    fit = fit_integer_histogram(values, bins=max(1, min(16, rows // MIN_BIN_ROWS)))
    counted = 0
    for index, ((low, high), probability) in enumerate(
            zip(fit.bins, fit.probabilities, strict=True)):
        assert low <= high
        if index:
            assert low > fit.bins[index - 1][1]
        inside = int(((values >= low) & (values <= high)).sum())
        assert inside >= 1 and probability == inside / rows
        counted += inside
    assert counted == rows


@given(seed=st.integers(0, 2**31 - 1), rows=st.integers(12, 3000), spikes=st.integers(0, 6))
def test_refined_continuous_bins_hold_exactly_the_rows(seed: int, rows: int, spikes: int
                                                       ) -> None:
    values = _skewed_rows(seed, rows, spikes, integer=False)
    if np.ptp(values) == 0:
        return
    fit = fit_continuous_histogram(values, bins=max(1, min(16, rows // MIN_BIN_ROWS)))
    points = [c.value for c in fit.components if isinstance(c, PointMass)]
    pieces = [(c.lower, c.upper, w) for c, w in zip(fit.components, fit.weights, strict=True)
              if isinstance(c, Uniform)]
    rest = values[~np.isin(values, points)]
    counted = 0
    for index, (low, high, weight) in enumerate(pieces):
        assert low < high
        if index:
            assert low >= pieces[index - 1][1]
        last = index == len(pieces) - 1
        inside = int(((rest >= low) & ((rest <= high) if last else (rest < high))).sum())
        assert inside >= 1 and weight == inside / rows
        counted += inside
    assert counted == rest.size
