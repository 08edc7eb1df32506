"""The open-box pool against a plain list of the boxes it was given: every popped box comes
back with the fields it was added with, the credit sums bound the exact sums from below, and
the top-``k`` search returns exactly the ``k`` largest values."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from verifier.pv.boxpool import BOX_FIELDS, EVENT_FIELDS, Boxes, BoxPool, _largest

EVENTS = 3


def _corners(rng: np.random.Generator, count: int, lattice: bool) -> np.ndarray:
    """Box corners: random float64 values, or on lattices as the corners of integer and
    one-hot columns are (columns 0–1: integers in [−2048, 2048], column 2: 0 and 1, column 3:
    halves up to 2^19 and infinities, each a float32 exactly)."""
    if not lattice:
        return rng.random((count, 4))
    halves = rng.integers(-2**20, 2**20, count) / 2.0
    return np.stack([
        rng.integers(-2048, 2049, count).astype(np.float64),
        rng.integers(-2048, 2049, count).astype(np.float64),
        rng.integers(0, 2, count).astype(np.float64),
        np.where(rng.random(count) < 0.1, np.inf * np.sign(halves - 0.25), halves),
    ], axis=1)


def _boxes(rng: np.random.Generator, first_id: int, count: int, lattice: bool = False) -> Boxes:
    """``count`` boxes whose ``depth`` is a unique id and whose other fields are random (the
    corners on a lattice if ``lattice``)."""
    fields: dict[str, np.ndarray] = {
        name: rng.random((count, EVENTS)) for name in EVENT_FIELDS}
    fields.update(
        lo=_corners(rng, count, lattice), hi=_corners(rng, count, lattice),
        mass_lo=rng.random(count),
        mass_hi=rng.random(count), pending=rng.random((count, EVENTS)) < 0.5,
        depth=np.arange(first_id, first_id + count, dtype=np.int64),
        atoms=rng.random((count, 2)) < 0.5, guide=rng.random((count, 4)),
        truth=rng.integers(-1, 2, (count, EVENTS), np.int8),
        signs=rng.integers(0, 255, (count, 2), np.uint8), low=rng.random((count, 2)),
        high=rng.random((count, 2)), priority=rng.random(count),
        carried=rng.random((count, 2, 3)).astype(np.float16),
    )
    return Boxes(**{name: fields[name] for name in BOX_FIELDS})


def _rows(boxes: Boxes) -> dict[int, dict[str, np.ndarray]]:
    return {int(box_id): {name: getattr(boxes, name)[i] for name in BOX_FIELDS}
            for i, box_id in enumerate(boxes.depth)}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1),
       rounds=st.lists(st.tuples(st.integers(0, 300), st.integers(1, 200), st.booleans()),
                       min_size=1, max_size=6),
       directed=st.booleans())
def test_the_pool_returns_what_it_was_given_and_bounds_the_credit_sums(
    seed: int, rounds: list[tuple[int, int, bool]], directed: bool
) -> None:
    """Box corners come back bit for bit and in float64 whether the pool stored them in
    float32 (rounds of lattice corners) or had to widen them (a round of random ones); the
    credit sums bound the exact ones from below and the pending masses from above."""
    rng = np.random.default_rng(seed)
    pool = BoxPool()
    reference: dict[int, dict[str, np.ndarray]] = {}
    next_id = 0
    weights = (rng.random(EVENTS), rng.random(EVENTS)) if directed else None
    for added, popped, lattice in rounds:
        if added:
            boxes = _boxes(rng, next_id, added, lattice)
            next_id += added
            pool.add(boxes)
            reference.update(_rows(boxes))
        if not reference:
            continue
        chosen = pool.pop_heaviest(popped, weights)
        assert chosen.lo.shape[0] == min(popped, len(reference))
        for box_id, row in _rows(chosen).items():
            expected = reference.pop(box_id)
            for name in BOX_FIELDS:
                assert np.array_equal(row[name], expected[name]), name
                assert row[name].dtype == expected[name].dtype, name
        assert pool.size == len(reference)
        credit_true, credit_false = pool.credits(EVENTS)
        for name, bound in (("credit_true", credit_true), ("credit_false", credit_false)):
            for event in range(EVENTS):
                exact = sum((Fraction(float(row[name][event])) for row in reference.values()),
                            Fraction(0))
                assert Fraction(float(bound[event])) <= exact
        pending = pool.pending_mass(EVENTS)
        for event in range(EVENTS):
            exact = sum((Fraction(float(row["mass_hi"])) for row in reference.values()
                         if row["pending"][event]), Fraction(0))
            assert exact <= Fraction(float(pending[event]))


def test_the_pool_pops_the_heaviest_boxes_by_priority() -> None:
    rng = np.random.default_rng(7)
    pool = BoxPool()
    boxes = _boxes(rng, 0, 5000)
    pool.add(boxes)
    chosen = pool.pop_heaviest(50)
    assert sorted(chosen.priority.tolist()) == sorted(boxes.priority.tolist())[-50:]


@settings(max_examples=200, deadline=None)
@given(values=arrays(np.float64, st.integers(1, 4000),
                     elements=st.sampled_from([-np.inf, 0.0, 0.25, 0.5, 1.0, 3.0, 1e-300])),
       fraction=st.floats(0.0005, 1.0))
def test_the_top_k_search_returns_exactly_the_largest_values(
    values: np.ndarray, fraction: float
) -> None:
    count = max(1, min(values.size, int(values.size * fraction)))
    found = _largest(values, count)
    assert np.unique(found).size == count
    assert sorted(values[found].tolist()) == sorted(values.tolist())[-count:]


def test_lattice_corners_are_stored_per_column_in_the_narrowest_exact_type() -> None:
    rng = np.random.default_rng(3)
    pool = BoxPool()
    pool.add(_boxes(rng, 0, 50, lattice=True))
    for name in ("lo", "hi"):
        assert [pool.corners[name].dtype_of(c) for c in range(4)] == [
            np.int16, np.int16, np.int8, np.float32]
    narrow_bytes = pool.record_bytes
    random = _boxes(rng, 50, 5)
    pool.add(random)
    for name in ("lo", "hi"):
        assert all(pool.corners[name].dtype_of(c) == np.float64 for c in range(4))
    assert pool.record_bytes == narrow_bytes + 2 * (6 + 6 + 7 + 4)
    popped = pool.pop_heaviest(55)
    back = {int(i): row for i, row in zip(popped.depth, popped.lo, strict=True)}
    assert all(np.array_equal(back[50 + i], random.lo[i]) for i in range(5))
