"""Models exported as users export them: plain ``torch.onnx.export(model, args, path)``.

Under torch 2.13 that is the torch.export-based exporter (onnxscript). Its graphs differ from
the TorchScript exporter's: it folds a BatchNorm1d after a Linear into the Gemm, writes a
negation as ``Neg``, keeps ``CastLike`` nodes and constant subgraphs when called with
``optimize=False``, and puts the weights of larger models in a ``.onnx.data`` file beside
the model.

Oracles: onnxruntime on fresh random rows (``|ir − ort| ≤ rtol · max(1, |ort|)``, ``rtol``
1e-5 for float32 graphs and 1e-9 for float64), and the network's formula evaluated in
``Fraction`` with the constants its kernels apply (float32 ones for a float32 graph), which
the certified bounds must contain at every point checked.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto

from verifier.bounds import compute_bounds
from verifier.convert import load_network, model_companions
from verifier.convert.onnx_graph import from_onnx, onnx_source
from verifier.network import Network, NetworkError

RTOL = {TensorProto.DOUBLE: 1e-9, TensorProto.FLOAT: 1e-5}
FEATURES = 5


def _export(module: torch.nn.Module, path: Path, dtype: torch.dtype = torch.float32,
            **options: object) -> onnx.ModelProto:
    """``module`` exported by plain ``torch.onnx.export`` (the default exporter) to ``path``
    and loaded back (with its external data, if any); the exporter's progress lines are
    silenced."""
    example = (torch.randn(3, FEATURES, dtype=dtype),)
    with contextlib.redirect_stdout(io.StringIO()):
        torch.onnx.export(module.to(dtype).eval(), example, str(path), **options)
    return onnx.load(str(path))


def _against_onnxruntime(model: onnx.ModelProto, network: Network, rows: int = 300) -> None:
    """The IR's outputs are onnxruntime's within the stated tolerance on fresh rows (the
    graph's batch size when it fixes one), and its classes are onnxruntime's wherever
    onnxruntime's top two outputs differ by more than that tolerance."""
    value = model.graph.input[0]
    elem = value.type.tensor_type.elem_type
    fixed = value.type.tensor_type.shape.dim[0].dim_value or rows
    x = np.random.default_rng(21).normal(scale=4.0, size=(rows - rows % fixed, FEATURES))
    x = x.astype(np.float32 if elem == TensorProto.FLOAT else np.float64)
    run = onnx_source(model, value.name)
    expected = np.concatenate([run(x[start:start + fixed]).reshape(fixed, -1)
                               for start in range(0, len(x), fixed)]).astype(np.float64)
    actual = network.evaluate(x.astype(np.float64))
    bound = RTOL[elem] * np.maximum(1.0, np.abs(expected))
    assert np.all(np.abs(actual - expected) <= bound), np.abs(actual - expected).max()
    if expected.shape[1] > 1:
        ordered = np.sort(expected, axis=1)
        clear = ordered[:, -1] - ordered[:, -2] > 2 * bound.max(axis=1)
        assert np.array_equal(actual.argmax(1)[clear], expected.argmax(1)[clear])


class _Standardised(torch.nn.Module):
    """``body((x − μ)/σ)`` with μ, σ buffers, or Python floats (``constants="floats"``)."""

    def __init__(self, body: torch.nn.Module, constants: str) -> None:
        super().__init__()
        self.body, self.constants = body, constants
        self.register_buffer("mean", torch.linspace(-1.0, 2.0, FEATURES))
        self.register_buffer("std", torch.linspace(0.5, 3.0, FEATURES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.constants == "floats":
            return self.body((x - 0.37) / 2.9)
        return self.body((x - self.mean) / self.std)


class _Negated(torch.nn.Module):
    """``−body(x)``: the default exporter writes the negation as ``Neg``."""

    def __init__(self, body: torch.nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -self.body(x)


class _Squeezed(torch.nn.Module):
    def __init__(self, body: torch.nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x).squeeze(-1)


def _mlp(hidden: list[int], outputs: int, *, activation: Callable[[], torch.nn.Module] =
         torch.nn.ReLU, bias: bool = True, batch_norm: bool = False, dropout: bool = False,
         head: torch.nn.Module | None = None, flatten: bool = False) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = [torch.nn.Flatten()] if flatten else []
    width = FEATURES
    for size in hidden:
        layers.append(torch.nn.Linear(width, size, bias=bias))
        if batch_norm:
            norm = torch.nn.BatchNorm1d(size)
            with torch.no_grad():
                norm.running_mean.normal_()
                norm.running_var.uniform_(0.2, 3.0)
                norm.weight.normal_()
                norm.bias.normal_()
            layers.append(norm)
        layers.append(activation())
        if dropout:
            layers.append(torch.nn.Dropout(0.3))
        width = size
    layers.append(torch.nn.Linear(width, outputs, bias=bias))
    return torch.nn.Sequential(*layers, *([head] if head is not None else []))


MODELS: dict[str, Callable[[], torch.nn.Module]] = {
    "relu-2-hidden-2-outputs": lambda: _mlp([8, 8], 2),
    "no-bias-3-hidden-3-outputs": lambda: _mlp([8, 6, 4], 3, bias=False),
    "leaky-4-hidden-1-output": lambda: _mlp([6, 6, 6, 6], 1,
                                            activation=lambda: torch.nn.LeakyReLU(0.1)),
    "batch-norm-dropout": lambda: _mlp([8, 8], 3, batch_norm=True, dropout=True),
    "flatten-sigmoid-head": lambda: _mlp([8], 1, flatten=True, head=torch.nn.Sigmoid()),
    "squeezed-single-logit": lambda: _Squeezed(_mlp([8, 8], 1)),
    "softmax-head": lambda: _mlp([8, 8], 3, head=torch.nn.Softmax(dim=1)),
    "log-softmax-head": lambda: _mlp([8, 8], 2, head=torch.nn.LogSoftmax(dim=-1)),
    "standardised-by-buffers": lambda: _Standardised(_mlp([8, 8], 2, batch_norm=True), "buffers"),
    "standardised-by-floats": lambda: _Standardised(_mlp([8], 2), "floats"),
    "negated": lambda: _Negated(_mlp([8], 2)),
}


FLOAT64_MODELS = ("batch-norm-dropout", "leaky-4-hidden-1-output", "negated",
                  "standardised-by-floats")


@pytest.mark.parametrize(("name", "dtype"), [
    *((name, torch.float32) for name in sorted(MODELS)),
    *((name, torch.float64) for name in FLOAT64_MODELS)])
def test_default_exports_read_as_onnxruntime_runs_them(name: str, dtype: torch.dtype,
                                                       tmp_path: Path) -> None:
    """Every model users build, exported by default (a fixed batch of 3; every other model
    with a dynamic batch and a named input instead), is read from its file, and its outputs
    and classes are onnxruntime's."""
    index = sorted(MODELS).index(name)
    torch.manual_seed(index)
    dynamic = index % 2 == 1
    options: dict[str, object] = {"input_names": ["features"], "dynamic_shapes": (
        {0: torch.export.Dim("batch")},)} if dynamic else {}
    model = _export(MODELS[name](), tmp_path / "model.onnx", dtype, **options)
    network = load_network(tmp_path / "model.onnx")
    _against_onnxruntime(model, network)
    if dynamic:
        assert network.input_names == [f"features[{feature}]" for feature in range(FEATURES)]


@pytest.mark.parametrize("opset", [22, 23])
def test_opsets_22_and_23_are_read(opset: int, tmp_path: Path) -> None:
    """``opset_version=22`` or ``23``, which the exporter accepts, changed only the types the
    operators read accepts (bfloat16, float4…), not their attributes or inputs; such a file
    was refused ("opset 23 is not supported (8 to 21)")."""
    torch.manual_seed(opset)
    model = _export(_Negated(_mlp([8, 8], 3, batch_norm=True, dropout=True,
                                  activation=lambda: torch.nn.LeakyReLU(0.2))),
                    tmp_path / "model.onnx", opset_version=opset)
    assert model.opset_import[0].version == opset
    _against_onnxruntime(model, from_onnx(model))


def _exact_forward(layers: list[tuple[np.ndarray, np.ndarray]], point: np.ndarray,
                   clip: tuple[Fraction, Fraction] | None = None,
                   scale: list[Fraction] | None = None) -> list[Fraction]:
    """``W₂·act(W₁·(s ⊙ x) + b₁) + b₂`` in ``Fraction``: ``act`` ReLU, or a clip to
    ``clip``; ``s`` the per-feature factors ``scale`` (1 if absent)."""
    values = [Fraction(float(value)) for value in point]
    if scale is not None:
        values = [factor * value for factor, value in zip(scale, values, strict=True)]
    for index, (weight, bias) in enumerate(layers):
        values = [sum((Fraction(float(w)) * v for w, v in zip(row, values, strict=True)),
                      Fraction(float(b))) for row, b in zip(weight, bias, strict=True)]
        if index < len(layers) - 1:
            values = ([max(v, Fraction(0)) for v in values] if clip is None
                      else [min(max(v, clip[0]), clip[1]) for v in values])
    return values


def _assert_bounds_hold(network: Network, points: np.ndarray,
                        exact: Callable[[np.ndarray], list[Fraction]]) -> None:
    """CROWN bounds on each point (a box of width 0) and on the box around all of them
    contain the exact outputs at those points."""
    lower, upper = points.min(axis=0), points.max(axis=0)
    box = compute_bounds(network, lower[None, :], upper[None, :], method="crown")
    at_points = compute_bounds(network, points, points, method="crown")
    for row, point in enumerate(points):
        for output, value in enumerate(exact(point)):
            for low, high in ((box.lower[0, output], box.upper[0, output]),
                              (at_points.lower[row, output], at_points.upper[row, output])):
                assert Fraction(float(low)) <= value <= Fraction(float(high))


def _weights(module: torch.nn.Module) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(layer.weight.detach().double().numpy(), layer.bias.detach().double().numpy())
            for layer in module.modules() if isinstance(layer, torch.nn.Linear)]


def test_a_negated_network_is_read_exactly(tmp_path: Path) -> None:
    """``−fc₂(relu(fc₁(x)))``, exported as ``… Gemm → Neg``, was refused ("unsupported ONNX
    operator 'Neg'"). On an integer grid with dyadic weights every float operation is exact:
    the IR's classes are the exact formula's (a tie, class 0, included), and the bounds
    contain its values."""
    body = _mlp([4], 2)
    with torch.no_grad():
        body[0].weight.copy_(torch.tensor([
            [1.0, -0.5, 0.25, 0.0, 1.0], [0.5, 0.5, -1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, -0.75, 0.5], [-1.0, 0.0, 0.5, 0.5, 0.0]]))
        body[0].bias.copy_(torch.tensor([0.0, -0.5, 0.25, 0.0]))
        body[2].weight.copy_(torch.tensor([[1.0, -1.0, 0.5, 0.0], [0.0, 1.0, -0.5, 1.0]]))
        body[2].bias.copy_(torch.tensor([0.0, 0.0]))
    model = _export(_Negated(body), tmp_path / "negated.onnx", dynamic_shapes=(
        {0: torch.export.Dim("batch")},))
    assert "Neg" in {node.op_type for node in model.graph.node}
    network = from_onnx(model)
    _against_onnxruntime(model, network)
    grid = np.array(np.meshgrid(*[[-1.0, 0.0, 2.0]] * FEATURES)).reshape(FEATURES, -1).T

    def exact(point: np.ndarray) -> list[Fraction]:
        return [-value for value in _exact_forward(_weights(body), point)]

    values = [exact(point) for point in grid]
    truth = [0 if first >= second else 1 for first, second in values]
    assert network.as_classifier().classify(grid).tolist() == truth
    assert any(first == second for first, second in values)
    _assert_bounds_hold(network, grid[::9], exact)


class _Clamped(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = torch.nn.Linear(FEATURES, 4), torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.nn.functional.hardtanh(self.first(x), -0.5, 0.7))


class _Reciprocal(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(FEATURES, 2)
        self.register_buffer("std", torch.linspace(0.3, 2.9, FEATURES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x * (1.0 / self.std))


def test_an_unoptimised_export_casts_its_constants_like_the_data(tmp_path: Path) -> None:
    """``torch.onnx.export(..., optimize=False)`` writes a clamp's bounds as
    ``CastLike(constant, data)`` and ``x * (1/σ)`` as a constant subgraph ``Reciprocal → Mul``
    before the data's ``Mul``. Both were refused (``CastLike`` unsupported; the subgraph's
    ``Mul`` "cannot evaluate it on constants: float64 != float32", its float32 operand beside
    the exact reciprocal). Oracle: the formula in ``Fraction`` with the clamp bounds the
    float32 kernel applies (float32(0.7)) and the real reciprocals of the float32 σ."""
    torch.manual_seed(3)
    clamped = _Clamped()
    model = _export(clamped, tmp_path / "clamped.onnx", optimize=False)
    assert "CastLike" in {node.op_type for node in model.graph.node}
    network = from_onnx(model)
    _against_onnxruntime(model, network)
    bounds = (Fraction(-1, 2), Fraction(float(np.float32(0.7))))
    points = np.random.default_rng(4).normal(scale=2.0, size=(24, FEATURES)).astype(np.float32)
    _assert_bounds_hold(network, points.astype(np.float64),
                        lambda point: _exact_forward(_weights(clamped), point, bounds))

    divided = _Reciprocal()
    model = _export(divided, tmp_path / "reciprocal.onnx", optimize=False)
    assert "Reciprocal" in {node.op_type for node in model.graph.node}
    network = from_onnx(model)
    _against_onnxruntime(model, network)
    assert network.folded
    scale = [1 / Fraction(float(value)) for value in divided.std.double().numpy()]
    _assert_bounds_hold(network, points.astype(np.float64),
                        lambda point: _exact_forward(_weights(divided), point, scale=scale))


class _MaximumMinimum(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = torch.nn.Linear(FEATURES, 4), torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.first(x)
        hidden = torch.maximum(hidden, torch.zeros_like(hidden))
        return self.second(torch.minimum(hidden, torch.full_like(hidden, 0.7)))


@pytest.mark.parametrize("dynamic", [False, True])
def test_maximum_and_minimum_with_a_constant_are_one_sided_clips(dynamic: bool,
                                                                 tmp_path: Path) -> None:
    """``torch.maximum(h, zeros_like(h))`` and ``torch.minimum(h, full_like(h, 0.7))`` export
    to ``Max``/``Min`` of the data and a constant (batch-shaped at a fixed batch, an
    ``Expand`` of a scalar with a dynamic one); they were refused ("unsupported ONNX operator
    'Max'"). Oracle: the formula in ``Fraction`` clipped to [0, float32(0.7)]."""
    torch.manual_seed(5)
    module = _MaximumMinimum()
    options: dict[str, object] = {"dynamic_shapes": ({0: torch.export.Dim("batch")},)} if (
        dynamic) else {}
    model = _export(module, tmp_path / "model.onnx", **options)
    assert {"Max", "Min"} <= {node.op_type for node in model.graph.node}
    network = from_onnx(model)
    _against_onnxruntime(model, network)
    bounds = (Fraction(0), Fraction(float(np.float32(0.7))))
    points = np.random.default_rng(6).normal(scale=2.0, size=(24, FEATURES)).astype(np.float32)
    _assert_bounds_hold(network, points.astype(np.float64),
                        lambda point: _exact_forward(_weights(module), point, bounds))


def test_external_data_outside_the_models_directory_or_missing_is_refused(tmp_path: Path
                                                                          ) -> None:
    """The weights a default export keeps in ``model.onnx.data`` are listed for the
    certificate's digests only as regular files inside the model's directory; a location
    outside it (raised by onnx as a ValidationError, which escaped as a traceback) or a
    missing data file is one ``NetworkError`` naming the file."""
    torch.manual_seed(7)
    module = torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(),
                                 torch.nn.Linear(64, 2))
    _export(module, tmp_path / "model.onnx")
    assert model_companions(tmp_path / "model.onnx") == [tmp_path / "model.onnx.data"]
    inside = tmp_path / "inside"
    inside.mkdir()
    proto = onnx.load(str(tmp_path / "model.onnx"), load_external_data=False)
    for tensor in proto.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../model.onnx.data"
    onnx.save(proto, str(inside / "model.onnx"))
    assert model_companions(inside / "model.onnx") == []
    with pytest.raises(NetworkError, match=r"cannot read ONNX file .*points outside"):
        load_network(inside / "model.onnx")
    (tmp_path / "model.onnx.data").unlink()
    assert model_companions(tmp_path / "model.onnx") == []
    with pytest.raises(NetworkError, match="cannot read ONNX file"):
        load_network(tmp_path / "model.onnx")


class _RowStandardised(torch.nn.Module):
    def __init__(self, norm: bool) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(FEATURES) if norm else None
        self.fc = torch.nn.Linear(FEATURES, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm is not None:
            return self.fc(self.norm(x))
        return self.fc(x - x.mean(dim=1, keepdim=True))


@pytest.mark.parametrize(("norm", "message"), [
    (False, r"'ReduceMean' at node '\w+'.*x\.mean\(dim=1\).*standardise with constants"),
    (True, r"'LayerNormalization' at node '\w+'.*LayerNorm divides each row")])
def test_a_row_standardised_by_its_own_statistics_is_refused_saying_so(
        norm: bool, message: str, tmp_path: Path) -> None:
    """``x − x.mean(1)`` and LayerNorm export to ``ReduceMean`` and ``LayerNormalization``:
    refused naming the node and what the user wrote."""
    model = _export(_RowStandardised(norm), tmp_path / "model.onnx")
    with pytest.raises(NetworkError, match=message):
        from_onnx(model)

