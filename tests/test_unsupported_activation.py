"""A model with a smooth activation is refused with an error that says what it is and what is
supported.

Exact GELU exports to ONNX as ``Erf`` (opsets below 20), reaches the fx reader (``torch.export``,
MLflow's ``pt2``) as ``gelu``, or as ``erf`` in a graph that carries it, and the ``torch.nn`` and
TorchScript readers as the ``GELU`` module. Every route must name GELU and list the supported
activations. The other smooth activations get the same, SiLU/Swish written as a product gets a
hint at the product, and HardSigmoid gets the piecewise-linear rewrite that certgate reads.
"""

from __future__ import annotations

import io
import math

import numpy as np
import onnx
import pytest
import torch

from verifier.convert.onnx_graph import from_onnx
from verifier.convert.torch_module import from_torch
from verifier.convert.unsupported import SUPPORTED_ACTIVATIONS
from verifier.network import NetworkError

EXAMPLE = (torch.zeros(1, 3, dtype=torch.float64),)


def _gelu_model() -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.GELU(), torch.nn.Linear(4, 2)
    ).double().eval()


class _ErfLayer(torch.nn.Module):
    """``torch.erf`` alone between two layers: an fx graph carrying ``erf`` itself (a GELU
    written out as ``x * Φ(x)`` is refused earlier, at its branch)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(3, 4).double()
        self.last = torch.nn.Linear(4, 2).double()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.first(x)
        return self.last(torch.erf(h / math.sqrt(2.0)))


def _refusal(convert: object) -> str:
    with pytest.raises(NetworkError) as caught:
        convert()  # type: ignore[operator]
    return str(caught.value)


def test_onnx_erf_names_gelu() -> None:
    buffer = io.BytesIO()
    torch.onnx.export(_gelu_model(), EXAMPLE, buffer, dynamo=False, opset_version=17)
    model = onnx.load_from_string(buffer.getvalue())
    assert "Erf" in [node.op_type for node in model.graph.node]
    message = _refusal(lambda: from_onnx(model))
    assert "unsupported ONNX operator 'Erf'" in message
    assert "Erf is what exact GELU becomes" in message
    assert SUPPORTED_ACTIVATIONS in message


@pytest.mark.parametrize(
    ("route", "reader_words"),
    [
        ("sequential", "unsupported module GELU"),
        ("torchscript", "unsupported TorchScript module GELU"),
        ("export", "unsupported operation 'gelu'"),
    ],
)
def test_torch_gelu_names_gelu(route: str, reader_words: str) -> None:
    model = _gelu_model()
    converted: torch.nn.Module = {
        "sequential": lambda: model,
        "torchscript": lambda: torch.jit.script(model),
        "export": lambda: torch.export.export(model, EXAMPLE).module(),
    }[route]()
    message = _refusal(lambda: from_torch(converted))
    assert reader_words in message
    assert "GELU (torch.nn.GELU) is not piecewise linear" in message
    assert SUPPORTED_ACTIVATIONS in message


def test_torch_erf_names_gelu() -> None:
    message = _refusal(lambda: from_torch(_ErfLayer().eval(), input_shape=3))
    assert "unsupported operation 'erf'" in message
    assert "Erf is what exact GELU becomes" in message
    assert SUPPORTED_ACTIVATIONS in message


def test_other_operators_get_no_gelu_hint() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh()).double().eval()
    message = _refusal(lambda: from_torch(model))
    assert "unsupported module Tanh" in message
    assert "GELU" not in message


class _Swish(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


class _HardSigmoidRewrite(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x / 6 + 0.5, 0, 1)


def _between(activation: torch.nn.Module) -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(3, 4), activation, torch.nn.Linear(4, 2)
    ).double().eval()


def _onnx(model: torch.nn.Module) -> onnx.ModelProto:
    buffer = io.BytesIO()
    torch.onnx.export(model, EXAMPLE, buffer, dynamo=False, opset_version=17)
    return onnx.load_from_string(buffer.getvalue())


@pytest.mark.parametrize(
    ("activation", "name"),
    [
        (torch.nn.Tanh(), "Tanh"),
        (torch.nn.ELU(), "ELU"),
        (torch.nn.SELU(), "SELU"),
        (torch.nn.Softplus(), "Softplus (also the first step of Mish)"),
        (torch.nn.SiLU(), "SiLU/Swish"),
        (torch.nn.Hardswish(), "HardSwish"),
    ],
)
def test_smooth_activations_are_named_on_every_torch_route(
    activation: torch.nn.Module, name: str
) -> None:
    model = _between(activation)
    for converted in (model, torch.export.export(model, EXAMPLE).module()):
        message = _refusal(lambda converted=converted: from_torch(converted))
        assert f"{name} is not piecewise linear" in message
        assert SUPPORTED_ACTIVATIONS in message


@pytest.mark.parametrize(
    ("activation", "operator"),
    [(torch.nn.Tanh(), "Tanh"), (torch.nn.ELU(), "Elu"), (torch.nn.Softplus(), "Softplus")],
)
def test_smooth_onnx_operators_are_named(activation: torch.nn.Module, operator: str) -> None:
    message = _refusal(lambda: from_onnx(_onnx(_between(activation))))
    assert f"unsupported ONNX operator '{operator}'" in message
    assert "is not piecewise linear" in message


def test_swish_as_a_product_is_named_at_the_product() -> None:
    for message in (
        _refusal(lambda: from_onnx(_onnx(_between(torch.nn.SiLU())))),
        _refusal(lambda: from_onnx(_onnx(_between(_Swish())))),
        _refusal(lambda: from_torch(torch.export.export(_between(_Swish()), EXAMPLE).module())),
    ):
        assert "SiLU/Swish (x * sigmoid(x))" in message
        assert SUPPORTED_ACTIVATIONS in message


class _Residual(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.block, self.last = (torch.nn.Linear(3, 4), torch.nn.Linear(4, 4),
                                             torch.nn.Linear(4, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.first(x))
        return self.last(hidden + torch.relu(self.block(hidden)))


def test_a_residual_connection_is_named_at_the_sum() -> None:
    """A skip connection's Add is refused saying what it is, on ONNX and torch.export."""
    model = _Residual().double().eval()
    for message in (
        _refusal(lambda: from_onnx(_onnx(model))),
        _refusal(lambda: from_torch(torch.export.export(model, EXAMPLE).module())),
    ):
        assert "combines two data tensors" in message
        assert "residual (skip) connection x + f(x)" in message


def test_hardsigmoid_hint_names_a_rewrite_that_converts_exactly() -> None:
    message = _refusal(lambda: from_torch(_between(torch.nn.Hardsigmoid())))
    assert "torch.clamp(x / 6 + 0.5, 0, 1)" in message
    torch.manual_seed(0)
    original = _between(torch.nn.Hardsigmoid())
    rewritten = _between(_HardSigmoidRewrite())
    rewritten.load_state_dict(original.state_dict())
    network = from_onnx(_onnx(rewritten))
    points = torch.rand(256, 3, dtype=torch.float64) * 20 - 10
    expected = original(points).detach().numpy()
    np.testing.assert_allclose(network.evaluate(points.numpy()), expected, rtol=0, atol=1e-12)
