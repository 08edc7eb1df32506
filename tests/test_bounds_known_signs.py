"""Bounds with known kink signs (``known_signs``, the signs proven on an enclosing box, as PV's
children inherit them from their parent) against exact and sampled oracles.

Oracles: the network evaluated in rational arithmetic at the corners of every child box and
at sampled points (every bound must contain the exact value), dense sampling of the
pre-activations (every sign reported on a child holds there).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import assert_status_holds_at, networks, random_network

from tests.bound_oracles import exact_spec
from verifier.bounds import METHODS, compute_bounds, kink_neurons, pack_signs, unpack_signs
from verifier.errors import CertgateInputError
from verifier.network import Network
from verifier.pv.boxpool import Boxes
from verifier.pv.splitting import Splitter

SLACK = 1e-9  # sampled pre-activations are computed in float64 too


def _children(
    rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` random boxes inside the box ``[lo, hi]`` (some of them single points or
    sharing a face with it)."""
    a = lo + (hi - lo) * rng.uniform(size=(count, lo.size))
    b = lo + (hi - lo) * rng.uniform(size=(count, lo.size))
    child_lo, child_hi = np.minimum(a, b), np.maximum(a, b)
    child_lo[0], child_hi[0] = lo, hi
    child_hi[1] = child_lo[1]
    return np.clip(child_lo, lo, hi), np.clip(child_hi, lo, hi)


def _corners(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    grids = np.meshgrid(*[[a, b] for a, b in zip(lo, hi, strict=True)], indexing="ij")
    return np.stack([g.reshape(-1) for g in grids], axis=1)


@settings(max_examples=60, deadline=None)
@given(network=networks(), seed=st.integers(0, 2**31 - 1),
       scale=st.sampled_from([1e-3, 0.3, 2.0]))
def test_children_with_their_parents_signs_contain_the_exact_values(
    network: Network, seed: int, scale: float
) -> None:
    rng = np.random.default_rng(seed)
    centre = rng.normal(size=network.input_size)
    radius = rng.uniform(0.0, scale, size=network.input_size)
    parent = compute_bounds(network, centre - radius, centre + radius, None, "crown")
    child_lo, child_hi = _children(rng, centre - radius, centre + radius, 4)
    known = np.repeat(parent.signs(), child_lo.shape[0], axis=0)
    spec = rng.normal(size=(2, network.output_size))
    for method in METHODS:
        result = compute_bounds(
            network, child_lo, child_hi, spec, method,  # type: ignore[arg-type]
            alpha_steps=3, known_signs=known,
        )
        for box in range(child_lo.shape[0]):
            unit = rng.uniform(size=(3, network.input_size))
            points = np.vstack([
                _corners(child_lo[box], child_hi[box]),
                child_lo[box] + (child_hi[box] - child_lo[box]) * unit,
            ])
            for point in points:
                for row, value in enumerate(exact_spec(network, spec, point)):
                    assert Fraction(result.lower[box, row]) <= value, method
                    assert value <= Fraction(result.upper[box, row]), method


@settings(max_examples=60, deadline=None)
@given(network=networks(), seed=st.integers(0, 2**31 - 1))
def test_signs_reported_with_inherited_signs_hold_at_sampled_points(
    network: Network, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    centre = rng.normal(size=network.input_size)
    radius = rng.uniform(0.0, 1.0, size=network.input_size)
    parent = compute_bounds(network, centre - radius, centre + radius, None, "crown")
    child_lo, child_hi = _children(rng, centre - radius, centre + radius, 6)
    known = np.repeat(parent.signs(), child_lo.shape[0], axis=0)
    result = compute_bounds(network, child_lo, child_hi, None, "crown", known_signs=known)
    signs = result.signs()
    assert signs.shape == known.shape == (child_lo.shape[0], kink_neurons(network))
    # a sign known on the parent is never lost on a child
    assert np.all(signs[known != 0] == known[known != 0])
    unit = rng.uniform(size=(child_lo.shape[0], 300, network.input_size))
    assert_status_holds_at(result, child_lo[:, None] + (child_hi - child_lo)[:, None] * unit)


@given(network=networks(), seed=st.integers(0, 2**31 - 1))
def test_no_known_signs_change_nothing(network: Network, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lo = rng.normal(size=(5, network.input_size))
    hi = lo + rng.uniform(0.0, 1.0, size=lo.shape)
    plain = compute_bounds(network, lo, hi, None, "crown")
    zeros = np.zeros((5, kink_neurons(network)), dtype=np.int8)
    unknown = compute_bounds(network, lo, hi, None, "crown", known_signs=zeros)
    assert np.array_equal(plain.lower, unknown.lower)
    assert np.array_equal(plain.upper, unknown.upper)
    assert np.array_equal(plain.signs(), unknown.signs())


def test_known_signs_of_the_wrong_shape_or_values_are_refused() -> None:
    network = random_network(np.random.default_rng(0), [2, 3, 2])
    lo, hi = np.zeros((2, 2)), np.ones((2, 2))
    with pytest.raises(CertgateInputError, match="shape"):
        compute_bounds(network, lo, hi, None, "crown", known_signs=np.zeros((2, 4), np.int8))
    with pytest.raises(CertgateInputError, match="-1, 0 or 1"):
        compute_bounds(network, lo, hi, None, "crown", known_signs=np.full((2, 3), 2, np.int8))


def test_a_child_outside_its_parent_inherits_nothing() -> None:
    lo = np.array([[0.0, 0.0]])
    hi = np.array([[1.0, 1.0]])
    packed = pack_signs(np.array([[1, -1, 1]], np.int8))
    parents = Boxes(lo, hi, *(np.zeros(1) for _ in range(7)), packed,
                    np.array([[0.5, -2.0]]), np.array([[1.5, 3.0]]),
                    *(np.zeros(1) for _ in range(5)), np.array([[[-1.0], [2.0]]], np.float16))
    child_lo = np.array([[0.0, 0.5], [0.5, 0.0], [-0.1, 0.0]])
    child_hi = np.array([[1.0, 1.0], [1.0, 0.5], [0.5, 1.0]])
    known = Splitter.inherited(parents, np.zeros(3, dtype=np.int64), child_lo, child_hi)
    assert known.signs.dtype == np.uint8
    assert unpack_signs(known.signs, 3).tolist() == [[1, -1, 1], [1, -1, 1], [0, 0, 0]]
    assert known.low.tolist() == [[0.5, -2.0], [0.5, -2.0], [-np.inf, -np.inf]]
    assert known.high.tolist() == [[1.5, 3.0], [1.5, 3.0], [np.inf, np.inf]]
    assert known.carried is not None and known.reuse is not None
    assert known.carried.tolist() == [[[-1.0], [2.0]], [[-1.0], [2.0]], [[-np.inf], [np.inf]]]
    assert known.reuse.tolist() == [True, True, False]


@given(network=networks(), seed=st.integers(0, 2**31 - 1))
def test_rows_not_needed_keep_sound_bounds_and_needed_rows_their_crown_bounds(
    network: Network, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    lo = rng.normal(size=(6, network.input_size))
    hi = lo + rng.uniform(0.0, 1.0, size=lo.shape)
    spec = rng.normal(size=(3, network.output_size))
    needed = rng.uniform(size=(6, 3)) < 0.5
    full = compute_bounds(network, lo, hi, spec, "crown")
    part = compute_bounds(network, lo, hi, spec, "crown", needed=needed)
    # the same rows, back-substituted in a smaller batch (matmul rounding may differ)
    scale = np.abs(full.lower) + np.abs(full.upper) + 1.0
    assert np.all(np.abs(part.lower - full.lower)[needed] <= 1e-12 * scale[needed])
    assert np.all(np.abs(part.upper - full.upper)[needed] <= 1e-12 * scale[needed])
    assert part.sensitivity is not None
    assert not part.sensitivity[~needed].any()
    unit = rng.uniform(size=(6, 200, network.input_size))
    points = lo[:, None] + (hi - lo)[:, None] * unit
    values = network.evaluate(points.reshape(-1, network.input_size)).reshape(6, 200, -1) @ spec.T
    assert np.all(values.min(axis=1) >= part.lower - SLACK)
    assert np.all(values.max(axis=1) <= part.upper + SLACK)


@given(signs=st.lists(st.lists(st.sampled_from([-1, 0, 1]), min_size=13, max_size=13),
                      min_size=1, max_size=5))
def test_packed_signs_round_trip(signs: list[list[int]]) -> None:
    array = np.array(signs, dtype=np.int8)
    packed = pack_signs(array)
    assert packed.dtype == np.uint8 and packed.shape == (array.shape[0], 4)
    assert np.array_equal(unpack_signs(packed, 13), array)
