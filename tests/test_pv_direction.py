"""Directed selection: the worth of proven mass per event against closed-form derivatives of
the deciding end of a parity ratio, the estimated true share of a box against exact uniform
shares, and the pool's choice of boxes by worth and by a split's expected gain."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier.network import Layer, Network
from verifier.pv.atoms import AtomBounds
from verifier.pv.boxpool import BOX_FIELDS, Boxes, BoxPool
from verifier.pv.credit import true_share
from verifier.pv.direction import (
    CREDIT_SCALE,
    UNCREDITED_GAIN,
    split_gain,
    verdict_weights,
)
from verifier.pv.events import TrackedEvents
from verifier.spec import Names, demographic_parity, specification_from_dict

NAMES = Names.of(["sex", "x"], ["no", "yes"])


def _parity() -> tuple[TrackedEvents, dict[str, int]]:
    spec = demographic_parity(NAMES, protected="sex", privileged=1.0, favorable_class=1,
                              gamma=0.8)
    tracked = TrackedEvents(spec)
    (fav_u, unf_u), (fav_p, unf_p) = (tracked.terms["p_unprivileged"],
                                      tracked.terms["p_privileged"])
    return tracked, {"a": fav_u, "b": unf_u, "c": fav_p, "d": unf_p}


def _vector(index: dict[str, int], values: dict[str, float]) -> np.ndarray:
    vector = np.zeros(len(index))
    for name, value in values.items():
        vector[index[name]] = value
    return vector


PROVEN = {"a": 0.05, "b": 0.2, "c": 0.1, "d": 0.2}
UPPER = {"a": 0.2, "b": 0.35, "c": 0.3, "d": 0.4}


def test_a_violation_in_sight_values_mass_by_how_it_lowers_the_upper_end() -> None:
    """Estimated ratio 0.3 < γ: the upper end ``ub(p_u)/lb(p_p)`` (2.5 here) must fall. Its
    derivatives: privileged favourable proven 20, privileged unfavourable refuted 5,
    unprivileged unfavourable proven 6.25, unprivileged favourable refuted 6.25; nothing else
    moves it."""
    tracked, index = _parity()
    spec = demographic_parity(NAMES, protected="sex", privileged=1.0, favorable_class=1,
                              gamma=0.8)
    open_true = _vector(index, {"a": 0.01, "b": 0.14, "c": 0.15, "d": 0.05})
    weights = verdict_weights(spec, tracked, _vector(index, PROVEN), _vector(index, UPPER),
                              open_true, 1.0)
    assert weights is not None
    gain_true, gain_false = weights
    expected_true = _vector(index, {"b": 6.25, "c": 20.0})
    expected_false = _vector(index, {"a": 6.25, "d": 5.0})
    np.testing.assert_allclose(gain_true, expected_true, rtol=1e-2, atol=1e-9)
    np.testing.assert_allclose(gain_false, expected_false, rtol=1e-2, atol=1e-9)


def test_a_satisfied_ratio_in_sight_values_mass_by_how_it_raises_the_lower_end() -> None:
    """Estimated ratio 1.5 > γ: the lower end ``lb(p_u)/ub(p_p)`` must rise (derivatives
    3.6458, 0.5208, 0.41667, 0.27778)."""
    tracked, index = _parity()
    spec = demographic_parity(NAMES, protected="sex", privileged=1.0, favorable_class=1,
                              gamma=0.8)
    open_true = _vector(index, {"a": 0.15})
    weights = verdict_weights(spec, tracked, _vector(index, PROVEN), _vector(index, UPPER),
                              open_true, 1.0)
    assert weights is not None
    gain_true, gain_false = weights
    np.testing.assert_allclose(gain_true, _vector(index, {"a": 3.6458, "d": 0.41667}),
                               rtol=1e-2, atol=1e-9)
    np.testing.assert_allclose(gain_false, _vector(index, {"b": 0.5208, "c": 0.27778}),
                               rtol=1e-2, atol=1e-9)


def test_no_threshold_or_no_finite_deciding_end_means_refining_by_mass() -> None:
    tracked, index = _parity()
    spec = demographic_parity(NAMES, protected="sex", privileged=1.0, favorable_class=1,
                              gamma=0.8)
    nothing_proven = _vector(index, {"c": 0.0})
    # the estimate points below γ, and the upper end is infinite while P[fav | privileged]
    # may be 0
    assert verdict_weights(spec, tracked, nothing_proven, _vector(index, UPPER),
                           _vector(index, {"a": 0.01, "b": 0.3, "c": 0.2}), 1.0) is None
    plain = specification_from_dict({"probabilities": {"p": {"event": "y.yes > y.no"}}}, NAMES)
    plain_tracked = TrackedEvents(plain)
    assert verdict_weights(plain, plain_tracked, np.zeros(1), np.ones(1), np.zeros(1),
                           1.0) is None


@pytest.mark.parametrize(("lo", "hi", "uniform_share"), [
    (0.0, 1.0, 0.7), (0.0, 0.4, 0.25), (0.2, 1.0, 0.875),
])
def test_estimated_true_share_follows_the_uniform_share(lo: float, hi: float,
                                                        uniform_share: float) -> None:
    """``yes − no = x − 0.3`` on ``[lo, hi]``: the linear bounds are exact, so the estimate is
    the normal approximation of a uniform share (within 0.07 of it)."""
    network = Network([Layer(np.array([[0.0], [1.0]]), np.array([0.0, -0.3]), "none")],
                      input_names=["x"])
    names = Names.of(["x"], ["no", "yes"])
    spec = specification_from_dict({"probabilities": {"p": {"event": "y.yes > y.no"}}}, names)
    atoms = AtomBounds(network, TrackedEvents(spec), ())
    box_lo, box_hi = np.array([[lo]]), np.array([[hi]])
    low, high, *_, lines, _ = atoms.bounds_and_drive(box_lo, box_hi, "crown")
    share = true_share(atoms, low, high, lines, box_lo, box_hi, np.ones(1))
    assert abs(share[0, 0] - uniform_share) < 0.07


def test_a_decided_box_keeps_the_neutral_share() -> None:
    network = Network([Layer(np.array([[0.0], [1.0]]), np.array([0.0, -0.3]), "none")],
                      input_names=["x"])
    names = Names.of(["x"], ["no", "yes"])
    spec = specification_from_dict({"probabilities": {"p": {"event": "y.yes > y.no"}}}, names)
    atoms = AtomBounds(network, TrackedEvents(spec), ())
    box_lo, box_hi = np.array([[0.5]]), np.array([[1.0]])
    low, high, *_, lines, _ = atoms.bounds_and_drive(box_lo, box_hi, "crown")
    assert true_share(atoms, low, high, lines, box_lo, box_hi, np.ones(1))[0, 0] == 0.5


def _pool(open_true: np.ndarray, priority: np.ndarray,
          credit_true: np.ndarray | None = None) -> BoxPool:
    count, events = open_true.shape
    fields = {name: np.zeros(count) for name in BOX_FIELDS}
    fields.update(lo=np.zeros((count, 1)), hi=np.ones((count, 1)), open_true=open_true,
                  open_false=np.zeros_like(open_true), priority=priority,
                  credit_true=np.zeros((count, events)) if credit_true is None else credit_true,
                  credit_false=np.zeros((count, events)))
    pool = BoxPool()
    pool.add(Boxes(**fields))
    return pool


def test_the_pool_pops_by_worth_and_keeps_a_quarter_for_the_heaviest() -> None:
    open_true = np.array([[0.0, 0.9], [0.5, 0.0], [0.4, 0.0], [0.0, 0.8], [0.3, 0.0],
                          [0.2, 0.0], [0.1, 0.0], [0.0, 0.0]])
    priority = np.array([0.9, 0.5, 0.4, 0.8, 0.3, 0.2, 0.1, 0.95])
    pool = _pool(open_true, priority)
    chosen = pool.pop_heaviest(4, (np.array([1.0, 0.0]), np.zeros(2)))
    # three by worth (event 0's open mass), one by priority among the rest
    assert sorted(chosen.priority.tolist()) == [0.3, 0.4, 0.5, 0.95]
    assert pool.size == 4
    assert pool.open_estimate(2).tolist() == pytest.approx([0.3, 1.7])
    plain = _pool(open_true, priority).pop_heaviest(4)
    assert sorted(plain.priority.tolist()) == [0.5, 0.8, 0.9, 0.95]


def test_the_difference_form_weighs_the_branch_that_attains_the_upper_end() -> None:
    """``|p_u − p_p| < 0.1`` with ``p_u ∈ [0.3, 0.5]``, ``p_p ∈ [0.35, 0.42]``: the estimate
    (0.076) lies below the threshold, so the upper end ``ub(p_u) − lb(p_p)`` (0.15) must fall:
    only mass that lowers ``ub(p_u)`` or raises ``lb(p_p)`` is worth anything."""
    spec = demographic_parity(NAMES, protected="sex", privileged=1.0, favorable_class=1,
                              gamma=0.1, form="difference")
    tracked = TrackedEvents(spec)
    (a, b), (c, d) = tracked.terms["p_unprivileged"], tracked.terms["p_privileged"]
    index = {"a": a, "b": b, "c": c, "d": d}
    proven = _vector(index, {"a": 0.15, "b": 0.25, "c": 0.175, "d": 0.29})
    upper = _vector(index, {"a": 0.25, "b": 0.35, "c": 0.21, "d": 0.325})
    weights = verdict_weights(spec, tracked, proven, upper, np.zeros(4), 1.0)
    assert weights is not None
    gain_true, gain_false = weights
    assert (gain_true > 0).tolist() == (_vector(index, {"b": 1.0, "c": 1.0}) > 0).tolist()
    assert (gain_false > 0).tolist() == (_vector(index, {"a": 1.0, "d": 1.0}) > 0).tolist()
    # d ub(p_u) / d b_lo = −a_hi / (a_hi + b_lo)² = −1; d lb(p_p) / d c_lo = d_hi / (·)² = 1.3
    np.testing.assert_allclose(gain_true[[b, c]], [1.0, 1.3], rtol=1e-2)


@pytest.mark.parametrize("mass", [1e-12, 1e-300, 5e-324])
def test_a_privileged_group_of_vanishing_mass_gets_a_sound_interval(mass: float) -> None:
    """``logit = x + 0.3·s − 0.5`` on x ~ U(0, 1), P(s = 1) = ``mass``: P[fav | s = 0] = 1/2,
    P[fav | s = 1] = 4/5, ratio 5/8 (closed form). At 1e-300 the selection's moved ends
    crossed by a rounding and the run stopped on a ``ZeroDivisionError``; at 1e-12 the run
    stayed unknown ([0.526, 6.67] after 5 s): the group's split-off boxes carried their
    parent's absolute rounding as their mass ([0, 4e-12]) and its events' upper ends the
    whole mass's. Both now decide ``violated`` at once; at 5e-324 (a mass no float
    enclosure separates from 0) the intervals hold the closed form and the certificate
    says that the group's mass, not the model, leaves its rate open."""
    from fractions import Fraction

    from verifier.audits.demographic_parity import demographic_parity_audit
    from verifier.population import Discrete, Feature, PopulationModel, Uniform
    from verifier.population.product import Factor, Product
    from verifier.pv import PVSettings

    network = Network([Layer(np.array([[1.0, 0.3]]), np.array([-0.5]))], ["x", "s"],
                      ["logit"])
    population = PopulationModel(
        features=[Feature(name="x", kind="continuous", domain=[0, 1]),
                  Feature(name="s", kind="binary", domain=[0, 1])],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Uniform(lower=0.0, upper=1.0)),
            Factor(columns=["s"], distribution=Discrete(values=[0, 1],
                                                        probabilities=[1 - mass, mass]))]))
    certificate = demographic_parity_audit(
        network, population, protected="s", privileged=1.0, favorable_class=1, gamma=0.8,
        settings=PVSettings(timeout_s=5.0))
    truths = {"value": Fraction(5, 8), "p_unprivileged": Fraction(1, 2),
              "p_privileged": Fraction(4, 5)}
    for name, truth in truths.items():
        low, high = certificate.bounds[name]
        assert Fraction(low) <= truth and (high == math.inf or truth <= Fraction(high)), name
    assert certificate.verdict == ("unknown" if mass < 1e-320 else "violated")
    if mass < 1e-320:  # the note names the group, not the model
        assert "the group s = 1 has a probability no float enclosure separates from 0" in \
            certificate.details["undefined"]
    else:
        assert "undefined" not in certificate.details


FINITE = st.floats(0.0, 1e6, allow_nan=False, allow_infinity=False)


@given(worth=FINITE, credit=FINITE, more=FINITE)
def test_a_splits_expected_gain_lies_between_a_fifth_of_the_worth_and_all_of_it(
    worth: float, credit: float, more: float,
) -> None:
    """The closed form ``w·(c + a·s·w) / (c + s·w)``, checked in rationals: between
    ``UNCREDITED_GAIN·w`` (no credit) and ``w`` (credit far beyond the worth), rising with the
    credit and with the worth, 0 without worth."""
    from fractions import Fraction

    gain = float(split_gain(np.array([worth]), np.array([credit]))[0])
    if worth == 0.0:
        assert gain == 0.0
        return
    w, c = Fraction(worth), Fraction(credit)
    a, s = Fraction(UNCREDITED_GAIN), Fraction(CREDIT_SCALE)
    exact = w * (c + a * s * w) / (c + s * w)
    assert gain == pytest.approx(float(exact), rel=1e-12)
    assert UNCREDITED_GAIN * worth * (1 - 1e-12) <= gain <= worth * (1 + 1e-12)
    assert float(split_gain(np.array([worth]), np.array([credit + more]))[0]) >= gain * (
        1 - 1e-12)
    assert float(split_gain(np.array([worth + more]), np.array([credit]))[0]) >= gain * (
        1 - 1e-12)


def test_of_equal_worth_the_box_credited_on_the_deciding_side_is_split_first() -> None:
    """Four boxes of equal worth on event 0 (the deciding end reads only its true side):
    the two credited there go first, the one credited on event 1 (weight 0) counts as
    uncredited; the guard's box is the heaviest by priority of the rest (no worth, 0.9)."""
    open_true = np.array([[0.5, 0.0], [0.5, 0.0], [0.5, 0.0], [0.5, 0.0], [0.0, 0.0]])
    credit = np.array([[0.0, 0.0], [0.3, 0.0], [0.0, 0.9], [0.1, 0.0], [0.0, 0.0]])
    priority = np.array([0.5, 0.1, 0.2, 0.3, 0.9])
    pool = _pool(open_true, priority, credit)
    assert pool.credited and not _pool(open_true, priority).credited
    chosen = pool.pop_heaviest(3, (np.array([1.0, 0.0]), np.zeros(2)))
    # two by expected gain (credits 0.3 and 0.1 on event 0), one by priority among the rest
    assert sorted(chosen.priority.tolist()) == [0.1, 0.3, 0.9]
    assert pool.size == 2
    # by worth alone the first two would be any two of the four equal boxes: here the
    # uncredited box (0.5) and the one credited on the other event (0.2) stay
    assert sorted(pool.pop_heaviest(2).priority.tolist()) == [0.2, 0.5]
