"""A numeric child of a numeric parent, strongly dependent: ``tenure = 0.9·age + N(0, 2.5)``
on ``age ~ U(22, 65)`` (r ≈ 0.98). The fitted network holds ``tenure`` per cell of ``age``
and independent of ``age`` inside a cell, so a cell's width adds to the spread of the
residual ``tenure − 0.9·age`` that a model may read: with the tail cells (8, the middle two
a quarter of the rows each) the residual's upper tail had about 0.25 of the mass where the
generator has 0.159. The fit now cuts such a parent into finer equal-mass cells
(:func:`verifier.population.structure.fine_cells`).

Oracle: the closed form ``P(residual > 2.5) = 1 − Φ(1)``. The fitted population's share of
draws above it must lie within ``TOLERANCE_SE`` standard errors of the table's rows plus as
many of the draws, plus ``SPREAD_ALLOWANCE`` for the spread the finest cells still add (at
most ``FINE_SPREAD_EXCESS`` of the variance: 1 % of the residual's standard deviation moves
this share by 0.0024). The same fit with the tail cells must miss it by more."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import verifier.population.structure as structure
from certgate.population_data import fit_population

TOLERANCE_SE = 4.0
SPREAD_ALLOWANCE = 0.005
DRAWS = 200_000
ROWS = 5000


def residual_tail_share(frame: pd.DataFrame, cells: int | None,
                        monkeypatch: pytest.MonkeyPatch) -> tuple[float, int, str]:
    """The default fit's share of draws with ``tenure − 0.9·age > 2.5``, the number of CPT
    rows of ``tenure`` (``cells`` forces ``fine_cells``' answer) and the edges."""
    if cells is not None:
        monkeypatch.setattr(structure, "fine_cells", lambda parent, children: cells)
    model = fit_population(frame, protected="sex")
    draws = model.sample(DRAWS, np.random.default_rng(5))
    columns = list(model.columns)
    residual = draws[:, columns.index("tenure")] - 0.9 * draws[:, columns.index("age")]
    node = next(node for node in model.distribution.nodes if node.name == "tenure")
    return float((residual > 2.5).mean()), len(node.cpt), model.description or ""


def test_a_strongly_dependent_numeric_child_gets_fine_cells(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(41)
    age = rng.uniform(22, 65, ROWS)
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], ROWS), "age": age,
                          "tenure": 0.9 * age + rng.normal(0, 2.5, ROWS)})
    truth = 1 - norm.cdf(1.0)
    bound = TOLERANCE_SE * math.sqrt(truth * (1 - truth)) * (1 / math.sqrt(ROWS)
                                                               + 1 / math.sqrt(DRAWS))
    share, rows, edges = residual_tail_share(frame, None, monkeypatch)
    assert "age -> tenure" in edges or "tenure -> age" in edges, edges
    assert rows == 2 * structure.MAX_FINE_CELLS or "tenure -> age" in edges, rows
    assert abs(share - truth) <= bound + SPREAD_ALLOWANCE, (share, truth, bound)
    tail_share, _, _ = residual_tail_share(frame, structure.MAX_PARENT_CELLS, monkeypatch)
    assert abs(tail_share - truth) > bound + SPREAD_ALLOWANCE, (tail_share, truth, bound)


def test_an_independent_numeric_child_keeps_the_tail_cells() -> None:
    rng = np.random.default_rng(43)
    parent = rng.uniform(0, 1, ROWS)
    child = rng.normal(0, 1, ROWS) + np.where(parent > 0.5, 0.3, 0.0)
    assert structure.fine_cells(parent, [child]) == structure.MAX_PARENT_CELLS
    assert structure.fine_cells(parent, [0.9 * parent * 43 + rng.normal(0, 2.5, ROWS)]) \
        == structure.MAX_FINE_CELLS
    assert structure.fine_cells(parent[:1000], [parent[:1000]]) == structure.MAX_PARENT_CELLS
