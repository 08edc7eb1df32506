"""The last hidden layer's bounds carried from an enclosing box (``carried`` of
:func:`verifier.bounds.compute_bounds`, :mod:`verifier.bounds.carried`).

Oracles: the network evaluated in rational arithmetic (``Fraction``) at the corners and at
sampled points of every box: the carried layer's exact pre-activations lie within the
carried bounds (float16, rounded outward), and every bound a child gets with its parent's
carried bounds — tightened or not — holds the exact outputs and pre-activations; the outward
rounding to float32 and float16 against ``Fraction`` comparisons of the float64 bounds it
encloses.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import networks, random_network

from verifier.bounds import carried_bounds, carried_width, compute_bounds
from verifier.errors import CertgateInputError
from verifier.exact_arith import exact_outputs
from verifier.network import Layer, Network


def _exact_pre(network: Network, layer: int, point: np.ndarray) -> list[Fraction]:
    """The exact pre-activations of ``layer`` of the lowered ``network`` at ``point``."""
    head = network.layers[layer]
    truncated = Network([*network.layers[:layer], Layer(head.weight, head.bias, "none")])
    return exact_outputs(truncated, point)


def _points(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The corners of the box (up to 16) and 6 uniform points inside it."""
    corners = np.array(list(itertools.product(*zip(lo, hi, strict=True)))[:16])
    return np.vstack([corners, lo + (hi - lo) * rng.uniform(size=(6, lo.size))])


def _child_boxes(rng: np.random.Generator, count: int, inputs: int
                 ) -> tuple[np.ndarray, ...]:
    """Parent boxes and a child box inside each."""
    parent_lo = rng.normal(size=(count, inputs))
    parent_hi = parent_lo + rng.uniform(0.0, 2.0, size=parent_lo.shape)
    cut = rng.uniform(size=(2, count, inputs))
    child_lo = parent_lo + (parent_hi - parent_lo) * np.minimum(cut[0], cut[1])
    child_hi = parent_lo + (parent_hi - parent_lo) * np.maximum(cut[0], cut[1])
    return parent_lo, parent_hi, child_lo, child_hi


def _contains(low: float, high: float, exact: Fraction) -> bool:
    return Fraction(float(low)) <= exact <= Fraction(float(high))


@settings(max_examples=60, deadline=None)
@given(network=networks(max_inputs=3, max_width=6), seed=st.integers(0, 2**31 - 1),
       tighten=st.sampled_from(["all", "none", "some"]),
       backend=st.sampled_from(["numpy", "torch"]))
def test_a_child_bounded_with_its_parents_carried_bounds_holds_the_exact_values(
        network: Network, seed: int, tighten: str, backend: str) -> None:
    rng = np.random.default_rng(seed)
    count = 4
    parent_lo, parent_hi, lo, hi = _child_boxes(rng, count, network.input_size)
    parent = compute_bounds(network, parent_lo, parent_hi, None, "crown", backend=backend)
    carried = carried_bounds(parent)
    assert carried.shape == (count, 2, carried_width(network))
    mask = {"all": None, "none": np.zeros(count, dtype=bool),
            "some": rng.integers(0, 2, size=count).astype(bool)}[tighten]
    child = compute_bounds(network, lo, hi, None, "crown", tighten=mask, carried=carried,
                           backend=backend)
    lowered = child.network
    layer = len(lowered.layers) - 2
    for box in range(count):
        for point in _points(rng, lo[box], hi[box]):
            for out, exact in enumerate(exact_outputs(lowered, point)):
                assert _contains(child.lower[box, out], child.upper[box, out], exact), (
                    box, out, child.lower[box, out], child.upper[box, out], float(exact))
            if carried.shape[2] == 0:
                continue
            for neuron, exact in enumerate(_exact_pre(lowered, layer, point)):
                assert _contains(carried[box, 0, neuron], carried[box, 1, neuron], exact)
                assert _contains(child.pre_lower[layer][box, neuron],
                                 child.pre_upper[layer][box, neuron], exact)


@settings(max_examples=40, deadline=None)
@given(network=networks(max_inputs=3, max_width=6), seed=st.integers(0, 2**31 - 1))
def test_carried_bounds_only_narrow_a_boxs_own(network: Network, seed: int) -> None:
    """On a box not tightened, intersected with the box's own bounds: never wider than
    without them; unknown (infinite) carried bounds change nothing, tightened or not. (A
    tightened box may end a stable neuron's bound below CROWN's: the carried bounds make
    it stable, so it is not back-substituted; its relaxation is exact either way.)"""
    rng = np.random.default_rng(seed)
    parent_lo, parent_hi, lo, hi = _child_boxes(rng, 3, network.input_size)
    carried = carried_bounds(compute_bounds(network, parent_lo, parent_hi, None, "crown"))
    width = carried.shape[2]
    for mask in (None, np.zeros(3, dtype=bool)):
        own = compute_bounds(network, lo, hi, None, "crown", tighten=mask)
        with_carried = compute_bounds(network, lo, hi, None, "crown", tighten=mask,
                                      carried=carried)
        if width and mask is not None:
            layer = len(own.network.layers) - 2
            assert np.all(with_carried.pre_lower[layer] >= own.pre_lower[layer])
            assert np.all(with_carried.pre_upper[layer] <= own.pre_upper[layer])
        unknown = np.empty_like(carried)
        unknown[:, 0], unknown[:, 1] = -np.inf, np.inf
        same = compute_bounds(network, lo, hi, None, "crown", tighten=mask, carried=unknown)
        assert np.array_equal(same.lower, own.lower)
        assert np.array_equal(same.upper, own.upper)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@given(values=st.lists(st.floats(allow_nan=False), min_size=2, max_size=40))
def test_the_narrow_record_encloses_the_float64_bounds(
    dtype: type[np.floating], values: list[float]
) -> None:
    """Each narrow end is the float64 one rounded outward (infinite beyond the type's range on
    the outer side only), compared exactly; one step of the type further in would not
    enclose."""
    from verifier.numerics import outward_cast

    array = np.sort(np.array(values).reshape(-1, 1) if len(values) % 2 else
                    np.array(values).reshape(-1, 2), axis=-1)
    lower, upper = array[:, :1], array[:, -1:]
    low, high = outward_cast(lower, upper, dtype)
    assert low.dtype == dtype and high.dtype == dtype
    for a, b, a_n, b_n in zip(lower.ravel(), upper.ravel(), low.ravel(), high.ravel(),
                              strict=True):
        assert _at_most(float(a_n), float(a)) and _at_most(float(b), float(b_n))
        if np.isfinite(a_n) and np.isfinite(a):
            with np.errstate(over="ignore"):
                inward = np.nextafter(a_n, dtype(np.inf))
            assert inward == np.inf or not _at_most(float(inward), float(a))
        if np.isfinite(b_n) and np.isfinite(b):
            with np.errstate(over="ignore"):
                inward = np.nextafter(b_n, dtype(-np.inf))
            assert inward == -np.inf or not _at_most(float(b), float(inward))


def _at_most(x: float, y: float) -> bool:
    """``x <= y`` in the extended reals, compared in ``Fraction`` where both are finite."""
    if np.isfinite(x) and np.isfinite(y):
        return Fraction(x) <= Fraction(y)
    return x <= y


def test_no_layer_is_carried_with_one_hidden_layer_and_a_wrong_shape_is_refused() -> None:
    rng = np.random.default_rng(0)
    shallow = random_network(rng, [3, 5, 2])
    deep = random_network(rng, [3, 5, 4, 2])
    lo, hi = np.zeros((2, 3)), np.ones((2, 3))
    assert carried_width(shallow) == 0
    assert carried_width(deep) == 4
    assert carried_bounds(compute_bounds(shallow, lo, hi, None, "crown")).shape == (2, 2, 0)
    with pytest.raises(CertgateInputError, match="shape"):
        compute_bounds(deep, lo, hi, None, "crown", carried=np.zeros((2, 2, 5)))
    with pytest.raises(CertgateInputError, match="NaN"):
        compute_bounds(deep, lo, hi, None, "crown", carried=np.full((2, 2, 4), np.nan))
