"""The neutral JSON format, the benchmark files, file dispatch and the converters' self-check.

Oracles: exact equality for round trips (float ``repr`` is exact), a literal numpy evaluation
of the JSON layers (including max pooling), and the benchmark README's layer sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import networks

from verifier.convert import load_network, network_from_json, network_to_json, save_network
from verifier.convert.nnet import read_nnet
from verifier.convert.self_check import FLOAT32_RTOL, assert_agrees
from verifier.network import Layer, Network, NetworkError

BENCHMARKS = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
needs_benchmarks = pytest.mark.skipif(not BENCHMARKS.is_dir(), reason="no shared/benchmarks")


def _assert_identical(first: Network, second: Network) -> None:
    assert first.input_names == second.input_names
    assert first.output_names == second.output_names
    assert len(first.layers) == len(second.layers)
    for left, right in zip(first.layers, second.layers, strict=True):
        assert np.array_equal(left.weight, right.weight)
        assert np.array_equal(left.bias, right.bias)
        assert left.activation == right.activation
        if left.activation == "leaky_relu":
            assert left.negative_slope == right.negative_slope
        if left.activation == "hardtanh":
            assert (left.min_val, left.max_val) == (right.min_val, right.max_val)


@given(network=networks())
def test_json_round_trip_is_exact(network: Network) -> None:
    text = json.dumps(network_to_json(network))
    _assert_identical(network_from_json(json.loads(text)), network)


def test_middle_linear_layers_are_kept_not_merged(tmp_path: Path) -> None:
    """A JSON file's layers are the IR's layers, even an activation-free one in the middle."""
    rng = np.random.default_rng(0)
    network = Network(
        [
            Layer(rng.normal(size=(3, 2)) / 3.0, rng.normal(size=3) / 7.0, "none"),
            Layer(rng.normal(size=(2, 3)) / 3.0, rng.normal(size=2) / 7.0, "relu"),
        ],
        ["a", "b"],
        ["p", "q"],
    )
    path = tmp_path / "net.json"
    save_network(network, path)
    _assert_identical(load_network(path), network)


@needs_benchmarks
def test_fairsquare_networks_file() -> None:
    path = BENCHMARKS / "fairsquare" / "networks.json"
    features = ["age", "education_num", "sex", "capital_gain", "capital_loss", "hours_per_week"]
    hidden = {"NN_2_1": 1, "NN_2_2": 2, "NN_3_2": 2}
    for key, width in hidden.items():
        network = load_network(f"{path}#{key}")
        assert network.input_names == features
        assert network.output_names == ["o1", "o2"]
        assert [layer.activation for layer in network.layers] == ["none", "relu", "relu"]
        assert network.layers[1].out_features == width
    with pytest.raises(NetworkError, match=r"holds 3 networks.*NN_2_1, NN_2_2, NN_3_2"):
        load_network(path)
    with pytest.raises(NetworkError, match="no network 'NN_9'"):
        load_network(f"{path}#NN_9")
    # the normalisation layer of NN_2_1 maps age to (age - 49.85) / 7.3
    age = np.zeros((1, 6))
    age[0, 0] = 57.15
    first = Network([load_network(f"{path}#NN_2_1").layers[0]])
    assert first.evaluate(age)[0, 0] == pytest.approx(1.0, abs=1e-12)


@needs_benchmarks
@pytest.mark.parametrize(
    ("dataset", "inputs", "outputs"),
    [("toy", 2, 2), ("german", 17, 2), ("compas", 19, 3), ("census", 23, 2), ("japanese", 17, 2)],
)
def test_libra_networks_load(dataset: str, inputs: int, outputs: int) -> None:
    files = sorted((BENCHMARKS / "libra" / dataset / "networks").glob("*.json"))
    assert files
    for path in files:
        network = load_network(path)
        document = json.loads(path.read_text())
        assert network.input_size == inputs
        assert network.output_size == outputs
        assert network.input_names == document["inputs"]
        assert len(network.layers) == len(document["layers"])


def _maxpool_document(rng: np.random.Generator, windows: list[list[int]]) -> dict:
    return {
        "inputs": ["u", "v", "w"],
        "layers": [
            {
                "type": "dense",
                "weight": rng.normal(size=(7, 3)).tolist(),
                "bias": rng.normal(size=7).tolist(),
                "activation": "relu",
            },
            {"type": "maxpool1d", "windows": windows},
            {
                "weight": rng.normal(size=(2, len(windows))).tolist(),
                "bias": rng.normal(size=2).tolist(),
                "activation": "linear",
            },
        ],
    }


@given(
    seed=st.integers(0, 2**31 - 1),
    windows=st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=5), min_size=1, max_size=6),
)
def test_maxpool_windows_are_exact(seed: int, windows: list[list[int]]) -> None:
    """The ReLU tournament equals ``max`` over each window on random points (float64: up to
    a few roundings of the differences)."""
    rng = np.random.default_rng(seed)
    document = _maxpool_document(rng, windows)
    network = network_from_json(document)
    x = rng.normal(scale=3.0, size=(100, 3))
    hidden = np.maximum(
        x @ np.array(document["layers"][0]["weight"]).T + document["layers"][0]["bias"], 0.0
    )
    pooled = np.stack([hidden[:, window].max(axis=1) for window in windows], axis=1)
    expected = pooled @ np.array(document["layers"][2]["weight"]).T + document["layers"][2]["bias"]
    scale = np.maximum(1.0, np.abs(expected))
    assert np.all(np.abs(network.evaluate(x) - expected) <= 1e-12 * scale * len(windows))


@pytest.mark.parametrize(
    ("layer", "message"),
    [
        ({"bias": [0.0], "activation": "relu"}, r"layers\[0\]: a dense layer needs 'weight'"),
        ({"weight": [[1.0]], "bias": [0.0, 1.0], "activation": "relu"}, r"layers\[0\]\.bias"),
        ({"weight": [[1.0]], "bias": [0.0]}, "missing 'activation'"),
        ({"weight": [[1.0]], "bias": [0.0], "activation": "sigmoid"}, "unsupported 'sigmoid'"),
        ({"type": "conv1d"}, r"layers\[0\]: unsupported layer type 'conv1d'"),
        ({"weight": [[1.0], [2.0, 3.0]], "bias": [0.0], "activation": "none"}, "rows"),
        ({"type": "maxpool1d", "windows": [[0, 5]]}, "window index outside"),
    ],
)
def test_json_errors_name_the_layer(layer: dict, message: str) -> None:
    document = {"name": "bad", "inputs": ["a"], "layers": [layer]}
    with pytest.raises(NetworkError, match=message):
        network_from_json(document)


def test_multi_network_layouts() -> None:
    single = {"layers": [{"weight": [[2.0]], "bias": [1.0], "activation": "relu"}]}
    as_list = {"networks": [{"name": "a", **single}, {"name": "b", **single}]}
    as_dict = {"first": single, "second": single, "note": "metadata"}
    assert network_from_json(as_list, "b").evaluate([[1.0]]).tolist() == [[3.0]]
    assert network_from_json(as_dict, "second").evaluate([[-1.0]]).tolist() == [[0.0]]
    with pytest.raises(NetworkError, match="first, second"):
        network_from_json(as_dict)
    with pytest.raises(NetworkError, match="no network"):
        network_from_json({"networks": {}})


def test_load_network_dispatch_errors(tmp_path: Path) -> None:
    with pytest.raises(NetworkError, match="network file not found"):
        load_network(tmp_path / "missing.onnx")
    unknown = tmp_path / "model.h5"
    unknown.write_bytes(b"\x00")
    with pytest.raises(NetworkError, match=r"suffix '\.h5'.*\.onnx"):
        load_network(unknown)
    nnet = tmp_path / "net.nnet"
    nnet.write_text("// comment\n2,1,1,1,\n1,1,1,\n0,\n")
    with pytest.raises(NetworkError, match=r"#KEY.*selects a network in a JSON file"):
        load_network(f"{nnet}#KEY")
    with pytest.raises(NetworkError, match="file ends before the input minimums"):
        read_nnet(nnet)
    network = Network([Layer(np.eye(1), np.zeros(1))])
    with pytest.raises(NetworkError, match="format 'nnet' is not supported here"):
        save_network(network, tmp_path / "out.nnet")
    garbage = tmp_path / "broken.json"
    garbage.write_text("{not json")
    with pytest.raises(NetworkError, match="not valid JSON"):
        load_network(garbage)
    with pytest.raises(NetworkError, match="bad option"):
        load_network(garbage, activation="relu")


def test_self_check_tolerance() -> None:
    """A float32-sized discrepancy passes the float32 check; one of 1e-3 fails it, naming the
    row; a float64 source is held to its own precision."""
    rng = np.random.default_rng(1)
    network = Network([Layer(rng.normal(size=(2, 3)), rng.normal(size=2), "relu")])

    def shifted(by: float):
        return lambda x: network.evaluate(x.astype(np.float64)) * (1.0 + by)

    assert_agrees(network, shifted(FLOAT32_RTOL / 10), (3,), np.float32, "close")
    with pytest.raises(NetworkError, match=r"wrong: the converted network disagrees.*row"):
        assert_agrees(network, shifted(1e-3), (3,), np.float32, "wrong")
    with pytest.raises(NetworkError, match="disagrees"):
        assert_agrees(network, shifted(1e-6), (3,), np.float64, "float64")
    with pytest.raises(NetworkError, match="gives 1 outputs per sample"):
        assert_agrees(network, lambda x: np.zeros((len(x), 1)), (3,), np.float64, "shape")
