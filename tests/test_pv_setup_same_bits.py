"""PV's per-call set-up built once: the same bits as building it on every call.

A :class:`PreparedNetwork` gives compute_bounds' results byte for byte (boxes with infinite
sides and one-hot groups included, repeated calls, a pickled copy); the events' truth table
gives every event's own Kleene truth; :func:`share_intervals` is :func:`share_interval` per
element; the directed selection's weights are those of one finite difference per event and
side (the loop it replaced, kept here as the oracle); the quantile table's kept masses are
the mass calls' own, and cuts read from them are the cuts computed by a mass call."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import random_network
from test_pv_direction import _parity, _vector
from test_pv_quantiles import _cut_alone, _normal_network

from verifier.bounds import PreparedNetwork, compute_bounds, kink_neurons
from verifier.numerics import share_interval, share_intervals
from verifier.pv import population_domain
from verifier.pv.atoms import AtomBounds
from verifier.pv.direction import STEP, verdict_weights
from verifier.pv.events import TrackedEvents
from verifier.pv.quantiles import MarginalQuantiles
from verifier.spec import Names, demographic_parity, interval_eval

GROUP = (2, 3, 4)


def _result_arrays(result: object) -> list[np.ndarray]:
    linear = result.linear  # type: ignore[attr-defined]
    arrays = [result.lower, result.upper, *result.pre_lower.values(),  # type: ignore[attr-defined]
              *result.pre_upper.values(), result.signs()]  # type: ignore[attr-defined]
    if result.sensitivity is not None:  # type: ignore[attr-defined]
        arrays.append(result.sensitivity)  # type: ignore[attr-defined]
    if linear is not None:
        arrays += [linear.lower_coefficients, linear.lower_value, linear.upper_coefficients,
                   linear.upper_value]
    return arrays


def _assert_same_bits(left: object, right: object) -> None:
    for a, b in zip(_result_arrays(left), _result_arrays(right), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert a.tobytes() == b.tobytes()


def _boxes(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Boxes over 6 inputs, one-hot columns 2–4 excluded, fixed or open, and some sides of
    columns 0 and 5 infinite."""
    lo = rng.normal(size=(count, 6))
    hi = lo + rng.uniform(0.0, 1.0, size=(count, 6))
    patterns = np.array([(0.0, 0.0), (1.0, 1.0), (0.0, 1.0)])
    for column in GROUP:
        chosen = patterns[rng.integers(0, 3, size=count)]
        lo[:, column], hi[:, column] = chosen[:, 0], chosen[:, 1]
    lo[rng.random(count) < 0.3, 0] = -np.inf
    hi[rng.random(count) < 0.3, 5] = np.inf
    return lo, hi


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["ibp", "crown"]),
       st.sampled_from(["numpy", "torch"]), st.sampled_from(["relu", "mixed"]))
def test_a_prepared_network_bounds_bit_for_bit_as_the_network(
    seed: int, method: str, backend: str, activation: str,
) -> None:
    rng = np.random.default_rng(seed)
    network = random_network(rng, [6, int(rng.integers(2, 7)), int(rng.integers(2, 6)), 2],
                             activation)
    prepared = PreparedNetwork(network)
    copy = pickle.loads(pickle.dumps(prepared))
    spec = np.array([[-1.0, 1.0]])
    for _ in range(2):  # the second call reads the maps the first one built
        lo, hi = _boxes(rng, 24)
        unknown = np.zeros((24, kink_neurons(network)), dtype=np.int8)
        kwargs = {"groups": [GROUP], "known_signs": unknown, "backend": backend}
        plain = compute_bounds(network, lo, hi, spec, method, **kwargs)
        _assert_same_bits(plain, compute_bounds(prepared, lo, hi, spec, method, **kwargs))
        _assert_same_bits(plain, compute_bounds(copy, lo, hi, spec, method, **kwargs))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(*[st.floats(0.0, 1.0, allow_subnormal=True)] * 4), min_size=1,
                max_size=12))
def test_share_intervals_are_share_interval_per_element(rows: list[tuple[float, ...]]) -> None:
    a_lo, a_hi, b_lo, b_hi = (np.array(column) for column in zip(*rows, strict=True))
    lows, highs = share_intervals(a_lo, a_hi, b_lo, b_hi)
    for index, row in enumerate(rows):
        low, high = share_interval(*row)
        assert np.float64(low).tobytes() == lows[index].tobytes()
        assert np.float64(high).tobytes() == highs[index].tobytes()


def _qualified_parity() -> TrackedEvents:
    names = Names.of(["sex", "age", "x"], ["no", "maybe", "yes"])
    return TrackedEvents(demographic_parity(names, protected="sex", privileged=1.0,
                                            favorable_class=2, gamma=0.8,
                                            qualified="x.age >= 18"))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_tabled_event_truths_are_each_events_own(seed: int) -> None:
    tracked = _qualified_parity()
    network = random_network(np.random.default_rng(seed), [3, 4, 3])
    atoms = AtomBounds(network, tracked, ())
    assert len(tracked.atoms) >= 4
    truths = np.random.default_rng(seed).integers(-1, 2, size=(200, len(tracked.atoms)))
    truths = truths.astype(np.int8)
    assert np.array_equal(atoms.events_of(truths), atoms._evaluated(truths))


def _weights_event_by_event(
    spec: object, tracked: TrackedEvents, proven: np.ndarray, upper: np.ndarray,
    raise_low: bool, total: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The finite differences one event and side at a time (the loop verdict_weights ran)."""

    def deciding_end(event_lower: np.ndarray, event_upper: np.ndarray) -> float:
        value = interval_eval(spec.expression,  # type: ignore[attr-defined]
                              tracked.probabilities(event_lower, event_upper))
        return value[0] if raise_low else -value[1]

    base = deciding_end(proven, upper)
    step = STEP * total
    gain_true, gain_false = np.zeros(proven.size), np.zeros(proven.size)
    for event in range(proven.size):
        moved = min(step, upper[event] - proven[event])
        if not moved > 0.0:
            continue
        raised = proven.copy()
        raised[event] = min(proven[event] + moved, upper[event])
        lowered = upper.copy()
        lowered[event] = max(upper[event] - moved, proven[event])
        gain_true[event] = (deciding_end(raised, upper) - base) / moved
        gain_false[event] = (deciding_end(proven, lowered) - base) / moved
    return (np.where(np.isfinite(gain_true), np.maximum(gain_true, 0.0), 0.0),
            np.where(np.isfinite(gain_false), np.maximum(gain_false, 0.0), 0.0))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 0.2), min_size=4, max_size=4),
       st.lists(st.floats(0.0, 0.1), min_size=4, max_size=4),
       st.lists(st.floats(0.0, 0.1), min_size=4, max_size=4), st.sampled_from([0.3, 0.8, 0.95]))
def test_verdict_weights_are_each_events_finite_differences(
    proven_values: list[float], open_values: list[float], estimate_values: list[float],
    gamma: float,
) -> None:
    tracked, index = _parity()
    names = Names.of(["sex", "x"], ["no", "yes"])
    spec = demographic_parity(names, protected="sex", privileged=1.0, favorable_class=1,
                              gamma=gamma)
    names_order = sorted(index, key=index.get)  # type: ignore[arg-type]
    proven = _vector(index, dict(zip(names_order, proven_values, strict=True)))
    upper = proven + _vector(index, dict(zip(names_order, open_values, strict=True)))
    open_true = _vector(index, dict(zip(names_order, estimate_values, strict=True)))
    weights = verdict_weights(spec, tracked, proven, upper, open_true, 1.0)
    estimate = np.minimum(proven + open_true, upper)
    low, high = interval_eval(spec.expression, tracked.probabilities(estimate, estimate))
    guess = 0.5 * (low + high)
    if weights is None:
        return
    expected = _weights_event_by_event(spec, tracked, proven, upper, guess > gamma, 1.0)
    for got, want in zip(weights, expected, strict=True):
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_kept_table_masses_are_the_mass_calls_own_and_give_the_same_cuts(seed: int) -> None:
    masses, domain = population_domain(_normal_network(seed))
    quantiles = MarginalQuantiles(masses, domain)
    for column, table in quantiles.values.items():
        columns = np.full(table.size, column)
        kept = quantiles._known_cdf(columns, table)
        known = ~np.isnan(kept)
        assert known.mean() > 0.9
        assert np.array_equal(kept[known].view(np.int64),
                              quantiles.cdf(column, table[known]).view(np.int64))
        finite = np.isfinite(table)
        lower = np.where(np.arange(table.size) % 2 == 0, table, -np.inf)[finite]
        upper = np.where(np.arange(table.size) % 2 == 0, np.inf, table)[finite]
        cuts = quantiles.split_points(columns[finite], lower, upper)
        alone = np.array([_cut_alone(quantiles, column, a, b)
                          for a, b in zip(lower, upper, strict=True)])
        assert np.array_equal(cuts.view(np.int64), alone.view(np.int64))
