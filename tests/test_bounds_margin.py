"""The counted relative margin of network bounds (``verifier.bounds.affine._network_rel_margin``).

A network whose coefficients are its own is bounded with ``2·gamma(r)`` relative to the
magnitude, ``r`` the roundings a real term meets (:func:`verifier.numerics.network_roundings`),
instead of the flat ``1e-9``; a folded network keeps ``1e-9``. Oracle: the network in rational
arithmetic (:func:`verifier.exact_arith.exact_outputs`) at every point of an integer grid,
bounded as point boxes — where a bound is as tight as rounding lets it be, so a margin that
did not cover the rounding would leave the exact value outside — and at the corners and
samples of small boxes around them. The networks are deep and cancel large terms (first-layer
weights and biases up to 10⁵, so the rounding of a value is far above the absolute margin
``1e-12``): with the relative margin set to zero, the same check fails on nearly every bound.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import verifier.bounds.affine as affine
from verifier.bounds import LOWER_SLOPES, compute_bounds, pairwise_difference_spec
from verifier.convert import load_network
from verifier.exact_arith import exact_outputs
from verifier.network import Layer, Network
from verifier.numerics import (
    SOUNDNESS_REL_MARGIN,
    gamma,
    network_rel_margin,
    network_roundings,
)

ADULT_1280 = (Path(__file__).resolve().parents[1].parent / "shared/benchmarks/libra/census"
              / "networks/1280A-F.json")
METHODS = ("ibp", "crown", "alpha-crown")


def _cancelling_network(seed: int, depth: int, width: int, scale: float) -> Network:
    """``depth`` ReLU layers of ``width`` over 3 inputs and 3 outputs; the first layer's
    weights and every bias of order ``scale``, so values cancel large terms."""
    rng = np.random.default_rng(seed)
    layers, fan_in = [], 3
    for index in range(depth):
        weight = rng.normal(size=(width, fan_in)) * (scale if index == 0 else 1.0)
        layers.append(Layer(weight, rng.normal(size=width) * scale, "relu"))
        fan_in = width
    layers.append(Layer(rng.normal(size=(3, fan_in)), rng.normal(size=3), "none"))
    return Network(layers, ["x0", "x1", "x2"], ["a", "b", "c"])


def _exact_rows(network: Network, spec: np.ndarray, point: np.ndarray) -> list[Fraction]:
    outputs = exact_outputs(network, point)
    return [sum((Fraction(float(c)) * y for c, y in zip(row, outputs, strict=True)),
                Fraction(0)) for row in spec]


def _outside(network: Network, lower: np.ndarray, upper: np.ndarray,
             points_per_box: list[np.ndarray]) -> int:
    """How many (box, point, spec row) triples have the exact value outside every method's
    bounds of the box (counted per method and lower-slope rule)."""
    spec = pairwise_difference_spec(network.output_size)
    missed = 0
    for method, rule in itertools.product(METHODS, LOWER_SLOPES):
        result = compute_bounds(network, lower, upper, spec, method, alpha_steps=3,
                                lower_slopes=rule)
        for low, high, points in zip(result.lower, result.upper, points_per_box, strict=True):
            for point in points:
                for value, lo, hi in zip(_exact_rows(network, spec, point), low, high,
                                         strict=True):
                    missed += not (Fraction(float(lo)) <= value <= Fraction(float(hi)))
    return missed


def _grid_cases(radius: float, span: int = 2) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Boxes ``[x − radius, x + radius]`` at every point of ``{−span, …, span}³`` and the
    points each is checked at (the centre; with a radius, also its corners, the midpoints of
    its edges and faces)."""
    grid = range(-span, span + 1)
    centres = np.array(list(itertools.product(grid, repeat=3)), dtype=np.float64)
    lower, upper = centres - radius, centres + radius
    if radius == 0.0:
        return lower, upper, [centre[None, :] for centre in centres]
    offsets = np.array(list(itertools.product((-radius, 0.0, radius), repeat=3)))
    return lower, upper, [centre + offsets for centre in centres]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_point_boxes_on_a_deep_cancelling_network_contain_the_exact_values(seed: int) -> None:
    network = _cancelling_network(seed, depth=10, width=8, scale=1e5)
    assert _outside(network, *_grid_cases(0.0)) == 0
    assert _outside(network, *_grid_cases(2.0**-30)) == 0


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), depth=st.integers(6, 14), width=st.integers(3, 9),
       scale=st.sampled_from([1.0, 1e3, 1e5]), radius=st.sampled_from([0.0, 2.0**-40, 2.0**-20]))
def test_random_deep_networks_contain_the_exact_values(seed: int, depth: int, width: int,
                                                         scale: float, radius: float) -> None:
    network = _cancelling_network(seed, depth, width, scale)
    assert _outside(network, *_grid_cases(radius, span=1)) == 0


def test_without_the_relative_margin_the_same_check_fails(monkeypatch) -> None:
    """The oracle has teeth: the rounding on these networks is far above the absolute
    margin, so only the relative margin keeps the exact values inside."""
    network = _cancelling_network(0, depth=10, width=8, scale=1e5)
    monkeypatch.setattr(affine, "_network_rel_margin", lambda network: 0.0)
    assert _outside(network, *_grid_cases(0.0)) > 100


def test_the_margin_is_counted_for_own_coefficients_and_flat_for_folded_ones() -> None:
    network = _cancelling_network(0, depth=10, width=8, scale=1.0)
    fan_ins = [3] + [8] * 10 + [3]
    expected = network_rel_margin(network_roundings(fan_ins, 3, 1))
    assert affine._network_rel_margin(network) == expected
    assert expected == 2.0 * gamma(sum(f + 8 for f in fan_ins) + 6 + 1 + 16)
    assert expected < SOUNDNESS_REL_MARGIN / 1000
    _, affines = affine._prepare(network)
    assert {a.rel_margin for a in affines} == {expected}
    first = network.layers[0]
    folded = Network([Layer(first.weight, first.bias, "relu",
                            weight_magnitude=np.abs(first.weight) * 2.0),
                      *network.layers[1:]], network.input_names, network.output_names)
    assert folded.folded
    assert affine._network_rel_margin(folded) == SOUNDNESS_REL_MARGIN


@pytest.mark.skipif(not ADULT_1280.is_file(), reason="the Libra census networks are not present")
def test_adult_rq4_1280_margin() -> None:
    """The deep network of issue 35: 32 × 40 ReLUs, 23 inputs."""
    margin = affine._network_rel_margin(load_network(ADULT_1280))
    assert 1e-12 < margin < 2e-12


def test_too_many_roundings_are_refused() -> None:
    with pytest.raises(ValueError, match="too coarse"):
        network_rel_margin(2**51)
