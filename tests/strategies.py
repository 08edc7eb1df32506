"""Shared hypothesis strategies, small random networks and sampled-point checks for the
tests."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import strategies as st

from verifier.bounds import ACTIVE, INACTIVE, BoundsResult
from verifier.network import Layer, Network

SAMPLE_SLACK = 1e-9  # sampled pre-activations are computed in float64 too: their own rounding


def random_network(
    rng: np.random.Generator, sizes: list[int], activation: str = "relu",
    output_activation: str = "none",
) -> Network:
    """A network with the given layer sizes and standard-normal-ish weights."""
    layers = []
    for index, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        last = index == len(sizes) - 2
        slope: float | tuple[float, ...] = 0.1
        if activation == "mixed":
            slope = tuple(rng.choice([0.0, 0.1, 1.0], size=fan_out).tolist())
        layers.append(
            Layer(
                rng.normal(size=(fan_out, fan_in)) / np.sqrt(fan_in),
                rng.normal(size=fan_out) * 0.5,
                output_activation if last else activation.replace("mixed", "leaky_relu"),
                negative_slope=slope,
                min_val=-0.5,
                max_val=0.7,
            )
        )
    return Network(layers)


@st.composite
def networks(draw: st.DrawFn, max_inputs: int = 4, max_width: int = 8) -> Network:
    """Random small piecewise-linear networks (ReLU, LeakyReLU, Hardtanh, per-neuron slopes
    mixing pass-through and ReLU neurons; 1–3 hidden layers)."""
    seed = draw(st.integers(0, 2**32 - 1))
    inputs = draw(st.integers(1, max_inputs))
    hidden = draw(st.lists(st.integers(1, max_width), min_size=1, max_size=3))
    outputs = draw(st.integers(1, 3))
    activation = draw(st.sampled_from(["relu", "leaky_relu", "hardtanh", "mixed"]))
    output_activation = draw(st.sampled_from(["none", "relu"]))
    rng = np.random.default_rng(seed)
    return random_network(rng, [inputs, *hidden, outputs], activation, output_activation)


def assert_status_holds_at(result: BoundsResult, points: np.ndarray) -> None:
    """Every neuron the bounds call active (inactive) on box ``b`` has a pre-activation
    ``>= 0`` (``<= 0``) at every sampled point ``points[b]`` (``(B, P, inputs)``), evaluated
    layer by layer on the lowered network, up to :data:`SAMPLE_SLACK`."""
    import torch

    h = points.reshape(-1, points.shape[2])
    for index, layer in enumerate(result.network.layers[:-1]):
        z = h @ layer.weight.T + layer.bias
        if index in result.pre_lower:
            status = np.repeat(result.activation_status(index), points.shape[1], axis=0)
            assert np.all(z[status == ACTIVE] >= -SAMPLE_SLACK)
            assert np.all(z[status == INACTIVE] <= SAMPLE_SLACK)
        h = layer.activate(torch.from_numpy(z)).numpy()
