"""The IR itself: exact hardtanh lowering, torch export round trip, validation errors.

Oracles: the unlowered network's own forward pass (lowering must not change any output beyond
float64 rounding), an independent numpy evaluation, and ``torch.nn`` modules built by
``to_torch``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from strategies import networks, random_network

from verifier.convert.torch_module import from_torch
from verifier.network import HEADS, Layer, Network, NetworkError, apply_head, apply_head_numpy


def _numpy_forward(network: Network, x: np.ndarray) -> np.ndarray:
    """Literal evaluation of the IR layer by layer (the reference for ``evaluate``)."""
    hidden = x
    for layer in network.layers:
        z = hidden @ layer.weight.T + layer.bias
        if layer.activation == "relu":
            z = np.maximum(z, 0.0)
        elif layer.activation == "leaky_relu":
            z = np.where(z < 0.0, np.asarray(layer.negative_slope) * z, z)
        elif layer.activation == "hardtanh":
            z = np.clip(z, layer.min_val, layer.max_val)
        hidden = z
    return hidden


def _points(rng: np.random.Generator, network: Network, count: int = 200) -> np.ndarray:
    return rng.normal(scale=3.0, size=(count, network.input_size))


@given(network=networks(), seed=st.integers(0, 2**31 - 1))
def test_evaluate_matches_numpy_reference(network: Network, seed: int) -> None:
    x = _points(np.random.default_rng(seed), network)
    np.testing.assert_allclose(network.evaluate(x), _numpy_forward(network, x), rtol=0, atol=1e-12)


@given(head=st.sampled_from(HEADS), scale=st.sampled_from([1e-3, 1.0, 40.0, 800.0]),
       seed=st.integers(0, 2**31 - 1))
def test_numpy_head_matches_torch_head(head: str, scale: float, seed: int) -> None:
    """The converters' numpy head (no scipy) agrees with torch's float64 head to rounding,
    stays finite where ``exp`` alone would overflow, and keeps the sigmoid in [0, 1]."""
    logits = np.random.default_rng(seed).normal(scale=scale, size=(64, 5))
    ours = apply_head_numpy(head, logits)
    reference = apply_head(head, torch.from_numpy(logits)).numpy()
    np.testing.assert_allclose(ours, reference, rtol=1e-14, atol=1e-15)
    assert np.isfinite(ours).all()
    if head == "sigmoid":
        assert ((ours >= 0.0) & (ours <= 1.0)).all()


@given(network=networks(), seed=st.integers(0, 2**31 - 1))
def test_hardtanh_lowering_is_exact(network: Network, seed: int) -> None:
    """Outputs agree to float64 rounding (|Δ| ≤ 1e-12 · max(1, |y|)), activations are only
    none/relu/leaky_relu, and a network without hardtanh is returned unchanged."""
    lowered = network.lowered()
    assert {layer.activation for layer in lowered.layers} <= {"none", "relu", "leaky_relu"}
    x = _points(np.random.default_rng(seed), network)
    expected = network.evaluate(x)
    scale = np.maximum(1.0, np.abs(expected))
    assert np.all(np.abs(lowered.evaluate(x) - expected) <= 1e-12 * scale)
    assert lowered.input_names == network.input_names
    assert lowered.output_names == network.output_names
    if all(layer.activation != "hardtanh" for layer in network.layers):
        assert lowered is network


def test_hardtanh_lowering_hits_both_kinks_exactly() -> None:
    """On points exactly at, inside and outside [min_val, max_val] the lowered net is exact."""
    network = Network([Layer(np.eye(1), np.zeros(1), "hardtanh", min_val=-0.5, max_val=0.75)])
    x = np.array([[-2.0], [-0.5], [-0.25], [0.0], [0.5], [0.75], [3.0]])
    assert np.array_equal(network.lowered().evaluate(x), np.clip(x, -0.5, 0.75))
    assert network.lowered().relu_layer_sizes() == [2]


@given(network=networks(), seed=st.integers(0, 2**31 - 1))
def test_to_torch_round_trip(network: Network, seed: int) -> None:
    """``to_torch`` computes the same function, and converting it back gives the same IR."""
    x = _points(np.random.default_rng(seed), network)
    module = network.to_torch()
    with torch.no_grad():
        torch_out = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(torch_out, network.evaluate(x), rtol=0, atol=1e-12)
    back = from_torch(module, network.input_names, network.output_names)
    assert len(back.layers) == len(network.layers)
    for original, converted in zip(network.layers, back.layers, strict=True):
        assert np.array_equal(original.weight, converted.weight)
        assert np.array_equal(original.bias, converted.bias)
        assert original.activation == converted.activation
        if original.activation == "leaky_relu":
            assert np.array_equal(
                original.negative_slope_effective, converted.negative_slope_effective
            )
        if original.activation == "hardtanh":
            assert (original.min_val, original.max_val) == (converted.min_val, converted.max_val)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weight": np.ones(3), "bias": np.ones(3)}, "must be 2-D"),
        ({"weight": np.ones((2, 3)), "bias": np.ones(3)}, "bias has shape"),
        ({"weight": np.ones((2, 3)), "bias": np.ones(2), "activation": "gelu"}, "'gelu'"),
        ({"weight": np.full((2, 3), np.nan), "bias": np.ones(2)}, "finite"),
        ({"weight": np.ones((2, 3)), "bias": [np.inf, 0.0]}, "finite"),
        (
            {
                "weight": np.ones((2, 3)),
                "bias": np.ones(2),
                "activation": "leaky_relu",
                "negative_slope": 1.5,
            },
            "slopes must lie in [0, 1]",
        ),
        (
            {
                "weight": np.ones((2, 3)),
                "bias": np.ones(2),
                "activation": "leaky_relu",
                "negative_slope": (0.1, 0.2, 0.3),
            },
            "3 per-neuron slopes for a layer with 2 neurons",
        ),
        (
            {
                "weight": np.ones((2, 3)),
                "bias": np.ones(2),
                "activation": "hardtanh",
                "min_val": 1.0,
                "max_val": 1.0,
            },
            "min_val < max_val",
        ),
    ],
)
def test_layer_validation_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(NetworkError, match=message.replace("[", r"\[").replace("(", r"\(")):
        Layer(**kwargs)


def test_network_validation_errors() -> None:
    first = Layer(np.ones((2, 3)), np.zeros(2), "relu")
    with pytest.raises(NetworkError, match="at least one layer"):
        Network([])
    with pytest.raises(NetworkError, match="layer 1 expects 4 inputs but layer 0 produces 2"):
        Network([first, Layer(np.ones((1, 4)), np.zeros(1))])
    with pytest.raises(NetworkError, match="2 input names for a network with 3 inputs"):
        Network([first], ["a", "b"])
    with pytest.raises(NetworkError, match="1 output names for a network with 2 outputs"):
        Network([first], ["a", "b", "c"], ["y"])
    network = Network([first])
    assert network.input_names == ["x0", "x1", "x2"]
    assert network.output_names == ["y0", "y1"]
    with pytest.raises(NetworkError, match="input has 2 columns, the network expects 3"):
        network.evaluate(np.zeros((4, 2)))


def test_negative_slope_effective_and_read_inputs() -> None:
    rng = np.random.default_rng(3)
    network = random_network(rng, [3, 4, 2], "mixed")
    slopes = network.layers[0].negative_slope_effective
    assert slopes.shape == (4,)
    assert set(slopes.tolist()) <= {0.0, 0.1, 1.0}
    weight = np.array([[1.0, 0.0, 2.0]])
    assert Network([Layer(weight, np.zeros(1))]).read_inputs().tolist() == [True, False, True]
    with pytest.raises(NetworkError, match="lower the network first"):
        _ = Layer(np.ones((1, 1)), np.zeros(1), "hardtanh").negative_slope_effective
