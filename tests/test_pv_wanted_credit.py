"""Credits bounded only on the wanted sides: each bounded credit is the one the full
evaluation gives, and a side no wanted credit reads is left at zero (never a bound it did
not prove)."""

from __future__ import annotations

import numpy as np
from adult_engine import needs_census, parity_engine

from verifier.pv.credit import WantedSides
from verifier.pv.engine import ProbabilityBranchAndBound

pytestmark = needs_census


def _engine_and_boxes() -> tuple[ProbabilityBranchAndBound, np.ndarray, np.ndarray]:
    """PV's engine on Adult-6 with a 2×16 network, and boxes cut from the root by halving
    random columns (many of them cut by the decision boundary)."""
    _, engine = parity_engine(6, (16, 16))
    domain = engine.domain
    rng = np.random.default_rng(0)
    lo = np.repeat(domain.lower[None, :], 400, axis=0)
    hi = np.repeat(domain.upper[None, :], 400, axis=0)
    for _ in range(6):
        rows = np.arange(lo.shape[0])
        columns = rng.integers(0, lo.shape[1], size=rows.size)
        middle = np.floor((lo[rows, columns] + hi[rows, columns]) / 2.0)
        upper = rng.random(rows.size) < 0.5
        lo[rows[upper], columns[upper]] = np.minimum(middle[upper] + 1.0,
                                                     hi[rows[upper], columns[upper]])
        hi[rows[~upper], columns[~upper]] = middle[~upper]
    engine.splitter.snap(lo, hi)
    return engine, lo, hi


def test_only_the_wanted_sides_are_bounded_and_each_is_the_full_credit() -> None:
    engine, lo, hi = _engine_and_boxes()
    evaluation = engine.evaluation
    full = evaluation(lo, hi, "crown")
    credit_true, credit_false = full[6], full[7]
    assert credit_true.sum() > 0.0 and credit_false.sum() > 0.0
    rng = np.random.default_rng(1)
    wanted = WantedSides(rng.random(credit_true.shape) < 0.5,
                         rng.random(credit_true.shape) < 0.5)
    part = evaluation(lo, hi, "crown", wanted=wanted)
    part_true, part_false = part[6], part[7]
    for bounded, reference, asked in ((part_true, credit_true, wanted.true),
                                      (part_false, credit_false, wanted.false)):
        assert np.array_equal(bounded[asked], reference[asked])
        assert ((bounded == reference) | (bounded == 0.0)).all()
    assert ((part_true != credit_true) | (part_false != credit_false)).any()
    every = WantedSides(np.ones_like(wanted.true), np.ones_like(wanted.false))
    again = evaluation(lo, hi, "crown", wanted=every)
    # every array but the last, the call's CPU seconds (a measurement, not a result)
    assert len(again) == len(full) == 11
    for left, right in zip(again[:-1], full[:-1], strict=True):
        assert np.array_equal(left, right)
