"""ONNX graphs to the IR and back, checked against onnxruntime.

Oracle: onnxruntime on fresh random inputs (not the converter's self-check inputs). Stated
tolerance, element-wise: ``|ir − ort| ≤ rtol · max(1, |ort|)`` with ``rtol`` 1e-9 for float64
graphs and 1e-5 for float32 graphs; the ACAS Xu networks use ``rtol`` 1e-6 (the brief's bound).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from hypothesis import given, settings
from onnx import TensorProto, helper, numpy_helper
from strategies import networks

from verifier.convert import load_network, read_nnet, save_network
from verifier.convert.json_format import read_json_network
from verifier.convert.onnx_export import network_to_onnx
from verifier.convert.onnx_graph import from_onnx
from verifier.network import Layer, Network, NetworkError

BENCHMARKS = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
ACAS = BENCHMARKS / "acasxu"
COLLISION = BENCHMARKS / "collision"
IR_VERSIONS = {8: 4, 11: 6, 13: 7, 17: 8, 21: 10}
RTOL = {TensorProto.DOUBLE: 1e-9, TensorProto.FLOAT: 1e-5}
NUMPY = {TensorProto.DOUBLE: np.float64, TensorProto.FLOAT: np.float32}

needs_benchmarks = pytest.mark.skipif(not ACAS.is_dir(), reason="shared/benchmarks not present")


def _model(
    nodes: list[onnx.NodeProto],
    constants: dict[str, np.ndarray],
    input_shape: list[int | str],
    *,
    opset: int = 13,
    elem: int = TensorProto.DOUBLE,
) -> onnx.ModelProto:
    dtype = NUMPY[elem]
    initializers = [
        numpy_helper.from_array(value.astype(dtype) if value.dtype.kind == "f" else value, name)
        for name, value in constants.items()
    ]
    graph = helper.make_graph(
        nodes,
        "test",
        [helper.make_tensor_value_info("x", elem, input_shape)],
        [helper.make_tensor_value_info("y", elem, None)],
        initializers,
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSIONS[opset]
    )


def _session(model: onnx.ModelProto) -> onnxruntime.InferenceSession:
    """A single-threaded session that does not busy-wait (it would starve torch)."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = _session(model)
    name = session.get_inputs()[0].name
    return np.asarray(session.run(None, {name: x})[0])


def _assert_matches_ort(model: onnx.ModelProto, network: Network | None = None) -> Network:
    network = network or from_onnx(model)
    value = model.graph.input[0]
    elem = value.type.tensor_type.elem_type
    shape = [dim.dim_value for dim in value.type.tensor_type.shape.dim[1:]]
    x = np.random.default_rng(11).normal(scale=3.0, size=(40, *shape)).astype(NUMPY[elem])
    expected = _ort(model, x).reshape(40, -1).astype(np.float64)
    actual = network.evaluate(x.reshape(40, -1).astype(np.float64))
    bound = RTOL[elem] * np.maximum(1.0, np.abs(expected))
    assert np.all(np.abs(actual - expected) <= bound), np.abs(actual - expected).max()
    return network


def _rng_constants(seed: int, **shapes: tuple[int, ...]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.normal(size=shape) for name, shape in shapes.items()}


def test_gemm_attribute_variants() -> None:
    constants = _rng_constants(1, W1=(5, 3), C1=(5,), W2=(5, 4), C2=(1, 4), W3=(2, 4), C3=(1,))
    constants["W4"] = np.random.default_rng(2).normal(size=(2, 3))
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "C1"], ["h1"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Gemm", ["h1", "W2", "C2"], ["h2"], alpha=-1.5),
        helper.make_node("Gemm", ["h2", "W3", "C3"], ["h3"], transB=1, beta=0.25),
        helper.make_node("Gemm", ["h3", "W4"], ["y"], name="no_bias"),
    ]
    network = _assert_matches_ort(_model(nodes, constants, ["N", 3]))
    assert len(network.layers) == 1  # four affine maps merged


def test_matmul_add_and_constant_arithmetic() -> None:
    constants = _rng_constants(3, W=(4, 6), B=(6,), W2=(6, 2), mean=(4,), scale=(6,))
    constants.update(std=np.array([2.0, 0.5, 4.0, 1.5]), s=np.array(3.0), c=np.array(0.75))
    nodes = [
        helper.make_node("Sub", ["x", "mean"], ["a"]),
        helper.make_node("Div", ["a", "std"], ["b"]),
        helper.make_node("MatMul", ["b", "W"], ["c1"]),
        helper.make_node("Add", ["B", "c1"], ["c2"]),
        helper.make_node("Mul", ["scale", "c2"], ["c3"]),
        helper.make_node("Relu", ["c3"], ["r"]),
        helper.make_node("Sub", ["c", "r"], ["d"]),
        helper.make_node("Mul", ["d", "s"], ["e"]),
        helper.make_node("MatMul", ["e", "W2"], ["y"]),
    ]
    network = _assert_matches_ort(_model(nodes, constants, ["N", 4]))
    assert [layer.activation for layer in network.layers] == ["relu", "none"]


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        (["lo", "hi"], ["hardtanh", "none"]),
        (["zero"], ["relu", "none"]),
        (["lo"], ["relu", "none"]),
        (["", "hi"], ["relu", "none"]),
        ([], ["none"]),
    ],
)
def test_clip_forms(inputs: list[str], expected: list[str]) -> None:
    constants = _rng_constants(4, W=(3, 5), W2=(5, 2))
    constants.update(lo=np.array(-0.5), hi=np.array(1.25), zero=np.array(0.0))
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("Clip", ["h", *inputs], ["c"]),
        helper.make_node("MatMul", ["c", "W2"], ["y"]),
    ]
    network = _assert_matches_ort(_model(nodes, constants, ["N", 3]))
    assert [layer.activation for layer in network.layers] == expected


def test_clip_attributes_at_opset_8() -> None:
    constants = _rng_constants(5, W=(3, 4), B=(4,))
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("Add", ["h", "B"], ["a"]),
        helper.make_node("Clip", ["a"], ["c"], min=-0.25, max=0.5),
        helper.make_node("Clip", ["c"], ["y"], min=0.0),
    ]
    model = _model(nodes, constants, ["N", 3], opset=8, elem=TensorProto.FLOAT)
    network = _assert_matches_ort(model)
    assert network.layers[0].activation == "hardtanh"
    assert (network.layers[0].min_val, network.layers[0].max_val) == (0.0, 0.5)


def test_leaky_relu_and_prelu() -> None:
    constants = _rng_constants(6, W=(3, 4), W2=(4, 2))
    constants.update(slopes=np.array([0.0, 0.25, 1.0, 0.5]), slope=np.array([0.1]))
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("LeakyRelu", ["h"], ["l"], alpha=0.3),
        helper.make_node("MatMul", ["l", "W2"], ["m"]),
        helper.make_node("PRelu", ["m", "slope"], ["p"]),
        helper.make_node("Gemm", ["p", "W2"], ["q"], transB=1),
        helper.make_node("PRelu", ["q", "slopes"], ["y"]),
    ]
    network = _assert_matches_ort(_model(nodes, constants, ["N", 3], opset=17))
    assert network.layers[2].negative_slope == (0.0, 0.25, 1.0, 0.5)


def test_flatten_reshape_and_shape_arithmetic() -> None:
    constants = _rng_constants(7, W=(6, 4), W2=(4, 3))
    constants.update(
        flat=np.array([-1, 6], dtype=np.int64),
        keep=np.array([0, -1], dtype=np.int64),
        zero=np.array([0], dtype=np.int64),
        minus=np.array([-1], dtype=np.int64),
    )
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"], axis=1),
        helper.make_node("Reshape", ["f", "flat"], ["r"]),
        helper.make_node("MatMul", ["r", "W"], ["m"]),
        helper.make_node("Relu", ["m"], ["a"]),
        helper.make_node("Reshape", ["a", "keep"], ["k"]),
        helper.make_node("Shape", ["k"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
        helper.make_node("Concat", ["batch", "minus"], ["target"], axis=0),
        helper.make_node("Reshape", ["k", "target"], ["t"]),
        helper.make_node("MatMul", ["t", "W2"], ["y"]),
    ]
    _assert_matches_ort(_model(nodes, constants, ["N", 2, 3]))


def test_batch_normalization_dropout_identity() -> None:
    rng = np.random.default_rng(8)
    constants = {
        "scale": rng.normal(size=2),
        "bias": rng.normal(size=2),
        "mean": rng.normal(size=2),
        "var": rng.uniform(0.5, 2.0, size=2),
        "W": rng.normal(size=(6, 3)),
        "ratio": np.array(0.4),
        "training": np.array(False),
    }
    nodes = [
        helper.make_node(
            "BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["n"], epsilon=1e-3
        ),
        helper.make_node("Dropout", ["n", "ratio", "training"], ["d"]),
        helper.make_node("Identity", ["d"], ["i"]),
        helper.make_node("Flatten", ["i"], ["f"]),
        helper.make_node("MatMul", ["f", "W"], ["y"]),
    ]
    network = _assert_matches_ort(_model(nodes, constants, ["N", 2, 3]))
    assert len(network.layers) == 1


@pytest.mark.parametrize("opset", [11, 13, 21])
def test_max_pool_is_exact(opset: int) -> None:
    """1-D pooling with padding and overlapping windows, and 2-D pooling, against ORT."""
    constants = _rng_constants(9, W=(3, 8), W2=(4, 2), W3=(8, 16))
    constants.update(
        shape=np.array([0, 1, 8], dtype=np.int64),
        square=np.array([0, 1, 4, 4], dtype=np.int64),
    )
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("Reshape", ["h", "shape"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3], strides=[2], pads=[1, 1]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "W2"], ["y"]),
    ]
    _assert_matches_ort(_model(nodes, constants, ["N", 3], opset=opset))
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("MatMul", ["a", "W3"], ["h"]),
        helper.make_node("Reshape", ["h", "square"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "W2"], ["y"]),
    ]
    _assert_matches_ort(_model(nodes, constants, ["N", 8], opset=opset))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torch_onnx_export() -> None:
    """A torch model exported with the TorchScript-based exporter (no onnxscript needed)."""
    torch.manual_seed(5)
    module = torch.nn.Sequential(
        torch.nn.Linear(4, 6),
        torch.nn.BatchNorm1d(6),
        torch.nn.LeakyReLU(0.2),
        torch.nn.Dropout(0.3),
        torch.nn.Linear(6, 5),
        torch.nn.Hardtanh(-1.0, 2.0),
        torch.nn.Flatten(),
        torch.nn.Linear(5, 3),
        torch.nn.ReLU6(),
        torch.nn.Linear(3, 2),
    ).eval()
    buffer = io.BytesIO()
    torch.onnx.export(
        module,
        (torch.randn(2, 4),),
        buffer,
        dynamo=False,
        input_names=["features"],
        output_names=["logits"],
        dynamic_axes={"features": {0: "N"}},
        opset_version=13,
    )
    model = onnx.load_from_string(buffer.getvalue())
    network = _assert_matches_ort(model)
    assert network.input_names == [f"features[{index}]" for index in range(4)]
    assert network.output_names == ["logits[0]", "logits[1]"]


def _single_node(op: str, **attributes: object) -> onnx.ModelProto:
    constants = _rng_constants(10, W=(3, 3))
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="first"),
        helper.make_node(op, ["h"], ["y"], name="the_node", **attributes),
    ]
    return _model(nodes, constants, ["N", 3])


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (_single_node("Softplus"), r"'Softplus' at node 'the_node'.*Gemm"),
        (_single_node("Tanh"), r"'Tanh' at node 'the_node'"),
        (_single_node("Flatten", axis=0), r"Flatten node 'the_node'.*merge the batch"),
        (_single_node("LeakyRelu", alpha=2.0), r"LeakyRelu node 'the_node'.*outside \[0, 1\]"),
        (_single_node("Cast", to=TensorProto.FLOAT),
         r"Cast node 'the_node': casts the float64 data tensor to another type.*changes the "
         r"precision the model computes in"),
        (_model([helper.make_node("Add", ["x", "c"], ["y"], name="the_node")],
                {"c": np.ones((3, 1))}, ["N", 3]),
         r"Add node 'the_node': a constant of shape \(3, 1\) broadcast against one sample of "
         r"shape \(1, 3\) gives shape \(3, 3\)"),
    ],
)
def test_unsupported_nodes_are_named(model: onnx.ModelProto, message: str) -> None:
    with pytest.raises(NetworkError, match=message):
        from_onnx(model)


def test_conv_branches_and_bad_graphs() -> None:
    kernel = {"K": np.ones((1, 1, 2))}
    conv = [helper.make_node("Conv", ["x", "K"], ["y"], name="conv1")]
    with pytest.raises(NetworkError, match=r"'Conv' at node 'conv1'"):
        from_onnx(_model(conv, kernel, ["N", 1, 4]))
    residual = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Add", ["x", "r"], ["y"], name="skip"),
    ]
    with pytest.raises(NetworkError, match=r"skip.*two data tensors.*residual \(skip\) connection"):
        from_onnx(_model(residual, {}, ["N", 3]))
    divide = [helper.make_node("Div", ["c", "x"], ["y"], name="inverse")]
    with pytest.raises(NetworkError, match=r"inverse.*not affine"):
        from_onnx(_model(divide, {"c": np.array(1.0)}, ["N", 3]))
    old = _model([helper.make_node("Relu", ["x"], ["y"])], {}, ["N", 3], opset=8)
    old.opset_import[0].version = 7
    with pytest.raises(NetworkError, match="opset 7 is not supported"):
        from_onnx(old)
    integer = _model([helper.make_node("Relu", ["x"], ["y"])], {}, ["N", 3])
    integer.graph.input[0].type.tensor_type.elem_type = TensorProto.INT64
    with pytest.raises(NetworkError, match="INT64"):
        from_onnx(integer)
    two_inputs = _model([helper.make_node("Add", ["x", "z"], ["y"])], {}, ["N", 3])
    two_inputs.graph.input.append(helper.make_tensor_value_info("z", TensorProto.DOUBLE, ["N", 3]))
    with pytest.raises(NetworkError, match="2 inputs without initializers"):
        from_onnx(two_inputs)


def test_self_check_catches_a_wrong_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    """If a rule were wrong, the comparison with onnxruntime would refuse the result."""
    from verifier.convert import onnx_graph

    def wrong_relu(walk: onnx_graph._Walk) -> object:
        walk.take(walk.input(0))
        walk.chain.leaky_relu(0.01)
        return walk.advance()

    monkeypatch.setitem(onnx_graph.ONNX_RULES, "Relu", wrong_relu)
    model = _single_node("Relu")
    with pytest.raises(NetworkError, match="disagrees with the source model"):
        from_onnx(model)
    assert from_onnx(model, verify=False).layers[0].activation == "leaky_relu"


@settings(max_examples=25)
@given(network=networks())
def test_export_round_trip(network: Network) -> None:
    """IR → ONNX: onnxruntime computes the same function (float64), and reading it back gives
    the identical IR with its names."""
    network = Network(
        network.layers,
        [f"in_{index}" for index in range(network.input_size)],
        [f"out_{index}" for index in range(network.output_size)],
    )
    model = network_to_onnx(network)
    _assert_matches_ort(model, network)
    back = from_onnx(model)
    assert back.input_names == network.input_names
    assert back.output_names == network.output_names
    assert len(back.layers) == len(network.layers)
    for original, converted in zip(network.layers, back.layers, strict=True):
        assert np.array_equal(original.weight, converted.weight)
        assert np.array_equal(original.bias, converted.bias)
        assert original.activation == converted.activation
        if original.activation == "leaky_relu":
            assert np.array_equal(
                original.negative_slope_effective, converted.negative_slope_effective
            )


def test_save_network_onnx_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    network = Network(
        [
            Layer(
                rng.normal(size=(4, 3)), rng.normal(size=4), "hardtanh", min_val=-0.3, max_val=0.9
            ),
            Layer(rng.normal(size=(2, 4)), rng.normal(size=2), "leaky_relu", negative_slope=0.1),
        ]
    )
    path = tmp_path / "net.onnx"
    save_network(network, path)
    _assert_matches_ort(onnx.load(str(path)), network)
    loaded = load_network(path)
    assert np.array_equal(loaded.layers[0].weight, network.layers[0].weight)
    assert loaded.layers[1].negative_slope == 0.1


def _acas_pairs() -> list[tuple[Path, Path]]:
    pairs = []
    for a in range(1, 6):
        for b in range(1, 10):
            stem = f"ACASXU_run2a_{a}_{b}_batch_2000"
            pairs.append((ACAS / "onnx" / f"{stem}.onnx", ACAS / "nnet" / f"{stem}.nnet"))
    return pairs


@needs_benchmarks
def test_all_acas_xu_networks_agree_with_onnxruntime() -> None:
    """All 45 networks, from ONNX and from .nnet: on 100 uniform points of the normalised input
    domain each, ``|ir − ort| ≤ 1e-6 · max(1, |ort|)`` element-wise. The ONNX weights are the
    float32 roundings of the .nnet weights, exactly."""
    rng = np.random.default_rng(20240601)
    for onnx_path, nnet_path in _acas_pairs():
        from_graph = from_onnx(onnx_path)
        parsed = read_nnet(nnet_path)
        low = parsed.normalise(parsed.input_mins)
        high = parsed.normalise(parsed.input_maxs)
        x = rng.uniform(low, high, size=(100, 5))
        model = onnx.load(str(onnx_path))
        session = _session(model)
        expected = np.concatenate(
            [
                session.run(None, {"input": row.reshape(1, 1, 1, 5).astype(np.float32)})[0]
                for row in x
            ]
        ).astype(np.float64)
        inputs = x.astype(np.float32).astype(np.float64)
        bound = 1e-6 * np.maximum(1.0, np.abs(expected))
        for network in (from_graph, parsed.network):
            difference = np.abs(network.evaluate(inputs) - expected)
            assert np.all(difference <= bound), (onnx_path.name, difference.max())
        for graph_layer, nnet_layer in zip(from_graph.layers, parsed.network.layers, strict=True):
            rounded = nnet_layer.weight.astype(np.float32).astype(np.float64)
            assert np.array_equal(graph_layer.weight, rounded)


@needs_benchmarks
def test_acas_nnet_input_normalisation() -> None:
    parsed = read_nnet(ACAS / "nnet" / "ACASXU_run2a_1_1_batch_2000.nnet")
    assert parsed.output_mean == 7.5188840201005975
    assert parsed.output_range == 373.94992
    assert parsed.input_ranges.tolist() == [60261.0, 6.28318530718, 6.28318530718, 1100.0, 1200.0]
    raw = np.random.default_rng(1).uniform(parsed.input_mins, parsed.input_maxs, size=(200, 5))
    on_raw = parsed.network_with_input_normalisation()
    expected = parsed.network.evaluate(parsed.normalise(raw))
    assert np.allclose(on_raw.evaluate(raw), expected, rtol=1e-9, atol=1e-9)
    outside = parsed.input_maxs + 100.0
    assert np.array_equal(parsed.normalise(outside), parsed.normalise(parsed.input_maxs))
    loaded = load_network(
        ACAS / "nnet" / "ACASXU_run2a_1_1_batch_2000.nnet", with_input_normalisation=True
    )
    assert np.array_equal(loaded.layers[0].weight, on_raw.layers[0].weight)


@needs_benchmarks
def test_collision_model_max_pooling_onnx_and_json() -> None:
    """The collision model (Dense → MaxPool1D → Dense → Dense): ONNX with MaxPool and the JSON
    with ``maxpool1d`` windows agree with onnxruntime on the 3,000 test points."""
    data = np.loadtxt(COLLISION / "test.csv", delimiter=",", skiprows=1)
    x, labels = data[:, :6], data[:, 6]
    model = onnx.load(str(COLLISION / "model.onnx"))
    expected = _ort(model, x.astype(np.float32)).astype(np.float64)
    inputs = x.astype(np.float32).astype(np.float64)
    bound = 1e-5 * np.maximum(1.0, np.abs(expected).max(axis=1, keepdims=True))
    for network in (from_onnx(model), read_json_network(COLLISION / "model.json")):
        assert np.all(np.abs(network.evaluate(inputs) - expected) <= bound)
        assert np.array_equal(network.classify(inputs), expected.argmax(axis=1))
    accuracy = float(np.mean(network.classify(x) == labels))
    assert accuracy == pytest.approx(0.9987, abs=5e-4)  # benchmarks/README.md §4


def test_float64_torch_export_with_leaky_relu_agrees_with_torch() -> None:
    """A float64 torch model exported with default options: onnxruntime has no float64
    LeakyRelu kernel, so the self-check reads the graph with the ONNX reference evaluator.
    Oracle: the torch module itself on fresh inputs, in float64, with the slope the file
    stores (ONNX float attributes are float32: the graph's slope is float32(0.2))."""
    torch.manual_seed(8)
    module = torch.nn.Sequential(
        torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.LeakyReLU(0.2),
        torch.nn.Linear(8, 1),
    ).double().eval()
    buffer = io.BytesIO()
    torch.onnx.export(module, (torch.zeros(3, 5, dtype=torch.float64),), buffer, dynamo=False,
                      input_names=["x"], dynamic_axes={"x": {0: "N"}})
    network = from_onnx(onnx.load_from_string(buffer.getvalue()))
    module[3].negative_slope = float(np.float32(0.2))
    x = np.random.default_rng(12).normal(scale=5.0, size=(200, 5))
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    bound = RTOL[TensorProto.DOUBLE] * np.maximum(1.0, np.abs(expected))
    assert np.all(np.abs(network.evaluate(x) - expected) <= bound)


class _SqueezedSigmoid(torch.nn.Module):
    """A single-logit head as often written: ``sigmoid(logit).squeeze(-1)``."""

    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Linear(5, 6), torch.nn.ReLU(), torch.nn.Linear(6, 6), torch.nn.ReLU(),
            torch.nn.Linear(6, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.body(x).unsqueeze(1)).squeeze(1).squeeze(-1)


@pytest.mark.parametrize("opset", [11, 17])
def test_squeezed_single_logit_head_reads_torch_class(opset: int) -> None:
    """Oracle: the torch module on fresh inputs: the loaded network's values agree, and its
    class (the classifier view's argmax) is torch's ``probability > 0.5`` wherever the
    probability is not 0.5."""
    torch.manual_seed(9)
    module = _SqueezedSigmoid().eval()
    buffer = io.BytesIO()
    torch.onnx.export(module, (torch.zeros(3, 5),), buffer, dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {0: "N"}}, opset_version=opset)
    network = from_onnx(onnx.load_from_string(buffer.getvalue()))
    assert network.head == "sigmoid"
    x = np.random.default_rng(13).normal(scale=3.0, size=(500, 5)).astype(np.float32)
    with torch.no_grad():
        probability = module(torch.from_numpy(x)).numpy().astype(np.float64)
    values = network.evaluate(x.astype(np.float64))[:, 0]
    assert np.all(np.abs(values - probability) <= RTOL[TensorProto.FLOAT])
    classes = network.as_classifier().evaluate(x.astype(np.float64)).argmax(axis=1)
    decided = probability != 0.5
    assert decided.sum() > 400
    assert np.array_equal(classes[decided], (probability > 0.5)[decided].astype(int))
    assert 0 < classes.sum() < len(x)


def test_squeeze_needs_axes_off_the_batch() -> None:
    constants = _rng_constants(10, W=(3, 1))
    for node, message in [
        (helper.make_node("Squeeze", ["h"], ["y"], name="s"), "explicit axes"),
        (helper.make_node("Squeeze", ["h", "axes"], ["y"], name="s"), "batch dimension"),
    ]:
        model = _model([helper.make_node("MatMul", ["x", "W"], ["h"], name="m"), node],
                       {**constants, "axes": np.array([0], dtype=np.int64)}, ["N", 3])
        with pytest.raises(NetworkError, match=message):
            from_onnx(model)


def test_cast_like_of_constants_and_of_the_data() -> None:
    """``CastLike(c, x)`` is the constant in the data's type: a product the graph computes
    exactly stays exact (its real value, 1 + 2⁻¹⁹ + 2⁻⁴⁰, which float32 cannot hold), a
    float64 constant is rounded to float32 as the operator defines; a cast of the data to its
    own type is the identity, to another type refused by name."""
    factor = np.float32(1 + 2.0**-20)
    constants = {"a": np.array([factor]), "b": np.array([factor]), "shift": np.array([0.1])}
    nodes = [
        helper.make_node("Mul", ["a", "b"], ["c"]),
        helper.make_node("CastLike", ["c", "x"], ["c_like"]),
        helper.make_node("CastLike", ["shift64", "x"], ["shift_like"]),
        helper.make_node("Mul", ["x", "c_like"], ["h"]),
        helper.make_node("CastLike", ["h", "x"], ["h_like"], name="identity"),
        helper.make_node("Add", ["h_like", "shift_like"], ["y"]),
    ]
    model = _model(nodes, constants, ["N", 1], opset=17, elem=TensorProto.FLOAT)
    model.graph.initializer.append(numpy_helper.from_array(np.array([0.1]), "shift64"))
    network = _assert_matches_ort(model)
    assert network.layers[0].weight[0, 0] == 1 + 2.0**-19 + 2.0**-40
    assert network.layers[0].bias[0] == float(np.float32(0.1))
    nodes[-2] = helper.make_node("CastLike", ["h", "shift64"], ["h_like"], name="widening")
    model = _model(nodes, constants, ["N", 1], opset=17, elem=TensorProto.FLOAT)
    model.graph.initializer.append(numpy_helper.from_array(np.array([0.1]), "shift64"))
    with pytest.raises(NetworkError, match=r"CastLike node 'widening': casts the float32 data"):
        from_onnx(model)


def test_max_and_min_read_one_constant_bound_only() -> None:
    """``Max``/``Min`` of the data and a constant with equal entries is a one-sided clip;
    a bound that differs between features, or a third operand, is refused naming the node."""
    constants = {"W": np.eye(3), "zero": np.zeros((1, 3)), "cap": np.array(0.7),
                 "mixed": np.array([[0.0, 1.0, 2.0]])}
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]),
             helper.make_node("Max", ["h", "zero"], ["m"]),
             helper.make_node("Min", ["cap", "m"], ["y"])]
    for elem in (TensorProto.FLOAT, TensorProto.DOUBLE):
        _assert_matches_ort(_model(nodes, constants, ["N", 3], elem=elem))
    for node in (helper.make_node("Max", ["h", "mixed"], ["y"], name="per_feature"),
                 helper.make_node("Max", ["h", "zero", "cap"], ["y"], name="per_feature")):
        with pytest.raises(NetworkError, match="Max node 'per_feature'"):
            from_onnx(_model([nodes[0], node], constants, ["N", 3]))


def test_absent_float_attributes_are_their_float32_defaults() -> None:
    """An ONNX float attribute is a float32, its default too: LeakyRelu without ``alpha``
    multiplies by float32(0.01) and BatchNormalization without ``epsilon`` adds float32(1e-5),
    in a float64 graph as well. Read as the Python floats 0.01 and 1e-5, the single logit
    ``−leaky(x) − float32(0.01)`` was +2.2e-10 at ``x = −1`` (class 1) where the runtime
    computes exactly 0 (class 0); the batch norm was off by 1.2e-8 relative, under the
    self-check's tolerance. Oracle: the runtime's float64 outputs (exact at these points)."""
    slope = float(np.float32(0.01))
    leaky = _model([helper.make_node("LeakyRelu", ["x"], ["h"]),
                    helper.make_node("Mul", ["h", "minus"], ["n"]),
                    helper.make_node("Sub", ["n", "c"], ["y"])],
                   {"minus": np.array([-1.0]), "c": np.array([slope])}, ["N", 1])
    network = from_onnx(leaky)
    point = np.array([[-1.0]])
    assert _ort_or_reference(leaky, point)[0, 0] == 0.0
    assert network.evaluate(point)[0, 0] == 0.0
    assert network.as_classifier().classify(point).tolist() == [0]
    norm = _model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
                  {"s": np.ones(1), "b": np.zeros(1), "m": np.zeros(1), "v": np.array([1e-6])},
                  ["N", 1], opset=17)
    expected = _ort_or_reference(norm, np.array([[1.0]]))[0, 0]
    assert expected == 1.0 / np.sqrt(1e-6 + float(np.float32(1e-5)))
    assert abs(from_onnx(norm).evaluate(np.array([[1.0]]))[0, 0] - expected) <= 1e-15 * expected


def _ort_or_reference(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """The runtime's outputs: onnxruntime, or the ONNX reference evaluator where onnxruntime
    has no kernel (float64 LeakyRelu)."""
    from verifier.convert.onnx_graph import onnx_source

    return onnx_source(model, "x")(x)
