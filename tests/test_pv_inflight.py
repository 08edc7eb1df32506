"""Rounds in flight: the parents' credit sums bound the exact sums from below and their
pending masses from above (they keep counting while the round's boxes are bounded), and a
round collects its parts in order."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_pv_boxpool import EVENTS, _boxes

from verifier.pv.inflight import Round, RoundsInFlight


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1),
       sizes=st.lists(st.integers(1, 400), min_size=0, max_size=4),
       scale=st.sampled_from([1.0, 1e-300, 1e300]))
def test_held_credits_bound_the_exact_sums_from_below(
    seed: int, sizes: list[int], scale: float
) -> None:
    rng = np.random.default_rng(seed)
    flight = RoundsInFlight()
    parents = []
    first = 0
    for size in sizes:
        boxes = _boxes(rng, first, size)
        boxes.credit_true = boxes.credit_true * scale
        boxes.credit_false = boxes.credit_false * scale
        boxes.mass_hi = boxes.mass_hi * scale
        first += size
        parents.append(boxes)
        flight.start(Round(boxes, []))
    assert len(flight) == len(sizes) and flight.boxes == sum(sizes)
    credit_true, credit_false = flight.credits(EVENTS)
    for name, bound in (("credit_true", credit_true), ("credit_false", credit_false)):
        for event in range(EVENTS):
            exact = sum((Fraction(float(value)) for boxes in parents
                         for value in getattr(boxes, name)[:, event]), Fraction(0))
            assert bound[event] >= 0.0 and Fraction(float(bound[event])) <= exact
    pending = flight.pending_mass(EVENTS)
    for event in range(EVENTS):
        exact = sum((Fraction(float(mass)) for boxes in parents
                     for mass, open_ in zip(boxes.mass_hi, boxes.pending[:, event], strict=True)
                     if open_), Fraction(0))
        assert exact <= Fraction(float(pending[event]))
    expected = sum((boxes.open_true.sum(axis=0) for boxes in parents), np.zeros(EVENTS))
    np.testing.assert_allclose(flight.open_estimate(EVENTS), expected, rtol=1e-12)


def test_a_round_collects_its_parts_in_order_and_leaves_the_flight() -> None:
    rng = np.random.default_rng(3)
    parents = _boxes(rng, 0, 4)
    first, second = _boxes(rng, 10, 3), _boxes(rng, 20, 5)
    flight = RoundsInFlight()
    flight.start(Round(parents, [lambda: first, lambda: second]))
    flight.start(Round(_boxes(rng, 30, 2), [lambda: second]))
    collected = flight.collect_oldest()
    assert collected.depth.tolist() == [10, 11, 12, 20, 21, 22, 23, 24]
    assert len(flight) == 1 and flight.boxes == 2
