"""CROWN's intermediate rows in float32: sound against exact rational pre-activations, even
where float32 collapses weights that real arithmetic tells apart."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.bounds import compute_bounds
from verifier.exact_arith import exact_outputs
from verifier.network import Layer, Network
from verifier.numerics import SOUNDNESS_ABS_MARGIN, SOUNDNESS_REL_MARGIN
from verifier.single_precision import RANGE, UNIT, single_margins


def _pre_activations(network: Network, layer: int, point: np.ndarray) -> list[Fraction]:
    """Exact pre-activations of hidden layer ``layer`` at ``point``."""
    layers = list(network.layers[: layer + 1])
    last = layers[-1]
    layers[-1] = Layer(last.weight, last.bias, "none")
    return exact_outputs(Network(layers), point.tolist())


def _assert_layer_bounds_hold(network: Network, lo: np.ndarray, hi: np.ndarray,
                              points: np.ndarray) -> None:
    result = compute_bounds(network, lo, hi, None, "crown")
    for layer in result.pre_lower:
        for box, box_points in enumerate(points):
            for point in box_points:
                for neuron, value in enumerate(_pre_activations(network, layer, point)):
                    assert Fraction(result.pre_lower[layer][box, neuron]) <= value
                    assert value <= Fraction(result.pre_upper[layer][box, neuron])


def test_weights_float32_cannot_tell_apart_still_give_sound_bounds() -> None:
    """``(1 − 2⁻³⁰)·x − x`` is ``0`` in float32 (the weight rounds to 1) but ``−2⁻³⁰·x`` in
    real arithmetic: on ``[1, 2]`` the second layer's neuron ranges over ``[−2⁻²⁹, −2⁻³⁰]``,
    and a float32 bound without its margin would claim ``>= 0``."""
    close_to_one = 1.0 - 2.0**-30
    network = Network([
        Layer(np.array([[close_to_one], [1.0]]), np.zeros(2), "relu"),
        Layer(np.array([[1.0, -1.0]]), np.zeros(1), "relu"),
        Layer(np.eye(1), np.zeros(1), "none"),
    ])
    result = compute_bounds(network, np.array([[1.0]]), np.array([[2.0]]), None, "crown")
    assert Fraction(result.pre_lower[1][0, 0]) <= Fraction(-(2**-29))
    assert Fraction(result.pre_upper[1][0, 0]) >= Fraction(-(2**-30))
    # the margin is float32's, not a blanket loss: a few units of 2⁻²⁴ of the magnitude (4)
    assert result.pre_lower[1][0, 0] > -4e-4 and result.pre_upper[1][0, 0] < 4e-4


@st.composite
def _cancelling_networks(draw: st.DrawFn) -> Network:
    """Networks of two or three hidden layers whose weights differ from float32 values by
    tiny amounts (the float32 casts round them), with near-cancelling pairs of neurons."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    sizes = [draw(st.integers(1, 4)), *draw(st.lists(st.integers(2, 6), min_size=2,
                                                      max_size=3)), draw(st.integers(1, 2))]
    layers = []
    for index, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        weight = rng.normal(size=(fan_out, fan_in)) / np.sqrt(fan_in)
        weight = weight * (1.0 + rng.integers(-8, 9, size=weight.shape) * 2.0**-30)
        if fan_out >= 2:
            weight[1] = weight[0] * (1.0 + 2.0**-29)
        activation = "none" if index == len(sizes) - 2 else "relu"
        layers.append(Layer(weight, rng.normal(size=fan_out) * 0.5, activation))
    return Network(layers)


@settings(max_examples=40, deadline=None)
@given(network=_cancelling_networks(), seed=st.integers(0, 2**31 - 1),
       scale=st.sampled_from([1e-3, 0.5, 3.0]))
def test_intermediate_bounds_contain_exact_pre_activations(
    network: Network, seed: int, scale: float
) -> None:
    rng = np.random.default_rng(seed)
    centre = rng.normal(size=(3, network.input_size))
    radius = scale * rng.uniform(0.1, 1.0, size=centre.shape)
    lo, hi = centre - radius, centre + radius
    corners = np.array(list(itertools.product([0.0, 1.0], repeat=network.input_size)))
    inside = rng.uniform(size=(3, 6, network.input_size))
    unit = np.concatenate([np.broadcast_to(corners, (3, *corners.shape)), inside], axis=1)
    points = lo[:, None, :] + (hi - lo)[:, None, :] * unit
    _assert_layer_bounds_hold(network, lo, hi, np.clip(points, lo[:, None], hi[:, None]))


def _plain_layers(widths: list[int]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    weights = [torch.full((out, inp), 0.5, dtype=torch.float64)
               for inp, out in itertools.pairwise(widths)]
    return weights, [torch.zeros(w.shape[0], dtype=torch.float64) for w in weights]


def _margins(weights: list[torch.Tensor], biases: list[torch.Tensor],
             bounds: list[torch.Tensor], magnitude: torch.Tensor,
             support: torch.Tensor) -> torch.Tensor | None:
    slopes = [torch.ones(1, w.shape[0], dtype=torch.float64) for w in weights[:-1]]
    intercepts = [torch.zeros(1, w.shape[0], dtype=torch.float64) for w in weights[:-1]]
    return single_margins(weights, biases, slopes, intercepts, bounds, 0, magnitude, support,
                          SOUNDNESS_ABS_MARGIN)


def test_float32_margins_cover_the_rounding_of_the_row() -> None:
    weights, biases = _plain_layers([3, 4, 2])
    bounds = [torch.ones(1, 3, dtype=torch.float64), torch.ones(1, 4, dtype=torch.float64)]
    magnitude = torch.tensor([[0.0, 0.0, 7.5]], dtype=torch.float64)
    support = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    margins = _margins(weights, biases, bounds, magnitude, support)
    assert margins is not None and margins.dtype == torch.float32
    roundings = (3 + 8) + (4 + 8) + 2 * 3 + 16
    gamma = roundings * UNIT / (1 - roundings * UNIT)
    wide = margins.to(torch.float64)
    # a structural zero is exact; a row that may be non-zero gets at least the absolute margin
    assert wide[0, 0] == 0.0
    assert wide[0, 1] >= SOUNDNESS_ABS_MARGIN
    assert bool((wide[0, 1:] >= 2 * gamma * magnitude[0, 1:] + SOUNDNESS_ABS_MARGIN).all())


def test_a_fold_not_counted_adds_at_least_the_flat_margin_to_float32_rows() -> None:
    """A network with a folded layer whose roundings were not counted takes the flat relative
    margin ``1e-9`` in float64; its float32 rows add one float32 rounding, which covers it:
    each margin grows by at least ``1e-9`` times the row's magnitude."""
    weights, biases = _plain_layers([3, 4, 2])
    bounds = [torch.ones(1, 3, dtype=torch.float64), torch.ones(1, 4, dtype=torch.float64)]
    magnitude = torch.tensor([[0.5, 7.5]], dtype=torch.float64)
    support = torch.ones(1, 2, dtype=torch.float64)
    slopes = [torch.ones(1, w.shape[0], dtype=torch.float64) for w in weights[:-1]]
    intercepts = [torch.zeros(1, w.shape[0], dtype=torch.float64) for w in weights[:-1]]
    counted, uncounted = (
        single_margins(weights, biases, slopes, intercepts, bounds, 0, magnitude, support,
                       SOUNDNESS_ABS_MARGIN, folds)
        for folds in (0, None))
    assert counted is not None and uncounted is not None
    grown = uncounted.to(torch.float64) - counted.to(torch.float64)
    assert bool((grown >= SOUNDNESS_REL_MARGIN * magnitude).all())


def test_rows_float32_cannot_hold_stay_in_float64() -> None:
    weights, biases = _plain_layers([3, 4, 2])
    bounds = [torch.ones(1, 3, dtype=torch.float64), torch.ones(1, 4, dtype=torch.float64)]
    support = torch.ones(1, 2, dtype=torch.float64)
    small = torch.ones(1, 2, dtype=torch.float64)
    assert _margins(weights, biases, bounds, small, support) is not None
    huge = torch.full((1, 2), 2 * RANGE, dtype=torch.float64)
    assert _margins(weights, biases, bounds, huge, support) is None
    far = [bounds[0] * 2 * RANGE, bounds[1]]
    assert _margins(weights, biases, far, small, support) is None
    infinite = [bounds[0], bounds[1] * np.inf]
    assert _margins(weights, biases, infinite, small, support) is None
    wide_weights, wide_biases = _plain_layers([300_000, 1, 2])
    wide_bounds = [torch.ones(1, 300_000, dtype=torch.float64),
                   torch.ones(1, 1, dtype=torch.float64)]
    assert _margins(wide_weights, wide_biases, wide_bounds, small, support) is None
