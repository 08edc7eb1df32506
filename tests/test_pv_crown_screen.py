"""CROWN's hidden-layer tightening on part of a batch only (``crown_share`` < 1,
:meth:`AtomBounds.bounds_and_drive`; the others CROWN over IBP's hidden-layer bounds; the
share set by :class:`verifier.pv.pace.CostPace` from ``crown_cost_share``).

Oracles: the network evaluated in rational arithmetic at the corners of every box and at
sampled points (every atom bound must contain the exact value, whichever boxes are tightened,
with and without the signs and bounds of an enclosing box); the choice of boxes against a
hand-computed order; PV's intervals on Adult-4/6 with CROWN cut to a few boxes per round
against exact enumeration of every population point.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from adult_engine import assert_reports_hold_the_exact_value, needs_census
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import random_network

from benchmarks.adult_instances import build_instance
from verifier.exact_arith import exact_outputs
from verifier.pv import PVSettings
from verifier.pv.atoms import AtomBounds, Known
from verifier.pv.events import TrackedEvents
from verifier.pv.pace import CostPace
from verifier.spec import Names, demographic_parity

INPUTS = ("sex", "a", "b")
CROWN_SHARE = 0.001  # so small that the tightening is cut on a 64-8 network


def _parity_atoms(seed: int, hidden: list[int]) -> AtomBounds:
    """Demographic parity of class ``yes`` w.r.t. ``sex`` on a random ReLU network."""
    rng = np.random.default_rng(seed)
    network = random_network(rng, [len(INPUTS), *hidden, 2], "relu")
    names = Names.of(list(INPUTS), ["no", "yes"])
    spec = demographic_parity(names, protected="sex", privileged=1.0, favorable_class=1,
                              gamma=0.8)
    return AtomBounds(network, TrackedEvents(spec), ())


def _boxes(rng: np.random.Generator, count: int, scale: float) -> tuple[np.ndarray, ...]:
    centre = rng.normal(size=(count, len(INPUTS)))
    radius = rng.uniform(0.0, scale, size=(count, len(INPUTS)))
    lo, hi = centre - radius, centre + radius
    sex = rng.integers(0, 3, size=count)  # 0, 1, or both values
    lo[:, 0] = np.where(sex == 2, 0.0, sex)
    hi[:, 0] = np.where(sex == 2, 1.0, sex)
    return lo, hi


def _exact_atom(atoms: AtomBounds, point: np.ndarray, atom: int) -> Fraction:
    outputs = exact_outputs(atoms.network, point)
    value = Fraction(float(atoms.constants[atom]))
    for c, y in zip(atoms.output_rows[atom], outputs, strict=True):
        value += Fraction(float(c)) * y
    for c, x in zip(atoms.input_rows[atom], point, strict=True):
        value += Fraction(float(c)) * Fraction(float(x))
    return value


def _points(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    grids = np.meshgrid(*[[a, b] for a, b in zip(lo, hi, strict=True)], indexing="ij")
    corners = np.stack([g.reshape(-1) for g in grids], axis=1)
    return np.vstack([corners, lo + (hi - lo) * rng.uniform(size=(4, lo.size))])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1),
       hidden=st.one_of(st.lists(st.integers(1, 12), min_size=1, max_size=3),
                        st.tuples(st.integers(8, 16), st.integers(1, 2)).map(list)),
       share=st.sampled_from([1e-3, 0.2, 0.5, 0.99, 1.0]),
       scale=st.sampled_from([1e-3, 0.3, 2.0]), with_parent=st.booleans())
def test_every_atom_bound_holds_whichever_boxes_are_tightened(
        seed: int, hidden: list[int], share: float, scale: float, with_parent: bool) -> None:
    rng = np.random.default_rng(seed)
    atoms = _parity_atoms(seed, hidden)
    lo, hi = _boxes(rng, 6, scale)
    known = None
    if with_parent:
        # what the enclosing box proved (a parent in PV) holds on each of these boxes
        parent_lo, parent_hi = lo - rng.uniform(0, 0.5, lo.shape), hi + rng.uniform(0, 0.5,
                                                                                     lo.shape)
        parent_lo[:, 0], parent_hi[:, 0] = lo[:, 0], hi[:, 0]
        p_low, p_high, _, _, p_signs, *_ = atoms.bounds_and_drive(parent_lo, parent_hi,
                                                                  "crown")
        known = Known(p_signs, p_low, p_high)
    events = len(atoms.tracked.events)
    wanted = (rng.integers(0, 2, size=(6, events)).astype(bool),
              rng.integers(0, 2, size=(6, events)).astype(bool))
    low, high, _, _, _, (_, tightened), _, _ = atoms.bounds_and_drive(
        lo, hi, "crown", known, share, wanted)
    if known is None or share >= 1.0 or not atoms.wide_fed:
        assert tightened == 6
    else:
        assert tightened <= math.ceil(share * 6)
    for box in range(6):
        for point in _points(rng, lo[box], hi[box]):
            for atom in range(len(atoms.tracked.atoms)):
                exact = _exact_atom(atoms, point, atom)
                assert Fraction(float(low[box, atom])) <= exact <= Fraction(
                    float(high[box, atom])), (box, atom, low[box, atom], high[box, atom],
                                              float(exact))


def test_the_boxes_closest_to_decided_on_a_wanted_side_are_tightened() -> None:
    from verifier.pv.atoms import screen_order

    # one atom row >= 0; IBP bounds per box
    lower = np.array([[-1.0], [-9.0], [1.0], [-5.0], [-2.0]])
    upper = np.array([[9.0], [1.0], [3.0], [5.0], [2.0]])
    strict = np.array([False])
    # closeness min(-l, u)/(u - l): 0.1, 0.1, decided, 0.5, 0.5
    assert list(screen_order(lower, upper, strict, None, 0.4)) == [0, 1]
    assert list(screen_order(lower, upper, strict, None, 1.0)) == [0, 1, 3, 4]
    # only the true side wanted: -l/(u - l) = 0.1, 0.9, -, 0.5, 0.5
    sides = np.zeros((5, 1, 2), dtype=bool)
    sides[..., 0] = True
    assert list(screen_order(lower, upper, strict, None, 0.4, sides)) == [0, 3]
    # a box whose rows are not needed is never chosen
    needed = np.array([[False], [True], [True], [True], [True]])
    assert list(screen_order(lower, upper, strict, needed, 0.2)) == [1]


def test_only_a_last_hidden_layer_fed_by_a_far_wider_one_is_cut() -> None:
    from verifier.pv.atoms import wide_fed_last_layer

    rng = np.random.default_rng(0)
    assert wide_fed_last_layer(random_network(rng, [3, 787, 69, 2], "relu"))
    assert wide_fed_last_layer(random_network(rng, [3, 8, 2, 2], "relu"))
    assert not wide_fed_last_layer(random_network(rng, [3, 7, 2, 2], "relu"))
    assert not wide_fed_last_layer(random_network(rng, [3, 50, 50, 50, 2], "relu"))
    assert not wide_fed_last_layer(random_network(rng, [103, 10, 2], "relu"))


@needs_census
@pytest.mark.parametrize("k", [4, 6])
def test_crown_on_few_boxes_keeps_the_exact_value_in_every_interval(
        k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a CROWN share so small that most boxes of each round keep IBP's hidden-layer
    bounds (a last hidden layer fed by a layer 8 times wider, see ``wide_fed_last_layer``),
    every
    interval PV reports (anytime and final) holds the exactly enumerated value, each report's
    intervals lie within the previous one's, and the cut happened."""
    allowed: list[tuple[int, int]] = []
    counted = CostPace.allowed_count

    def spy(self: CostPace, boxes: int) -> int:
        count = counted(self, boxes)
        if self.share == CROWN_SHARE:
            allowed.append((boxes, count))
        return count

    monkeypatch.setattr(CostPace, "allowed_count", spy)
    instance = build_instance(k, (64, 8), 7, epochs=1, cache_dir=None)
    assert_reports_hold_the_exact_value(instance, PVSettings(
        timeout_s=30.0, max_boxes=3000, batch_size=128, crown_cost_share=CROWN_SHARE))
    assert any(count < boxes for boxes, count in allowed)
