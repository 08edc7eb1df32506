"""Classifier heads: a final Sigmoid, Softmax or LogSoftmax is read by every converter (the
model saved the ways users save it), recorded on the IR and honoured by its evaluation, JSON,
ONNX and torch export; anywhere but last it is refused naming its layer or node. Class readers
see the logits (classes equal the source model's argmax / 0.5 threshold on random and
tie-adjacent inputs); value readers bound the head soundly (checked by evaluation at random
points and box corners) or refuse naming it."""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from strategies import random_network

from pipeline_steps.cli import main
from verifier.bounds import compute_bounds
from verifier.convert import load_network, save_network
from verifier.convert.json_format import network_from_json, network_to_json
from verifier.convert.onnx_export import network_to_onnx
from verifier.convert.onnx_graph import from_onnx
from verifier.convert.torch_module import from_torch
from verifier.exact_arith import exact_outputs
from verifier.head_bounds import output_bounds
from verifier.network import Layer, Network, NetworkError, compose

HEAD_MODULES: dict[str, Callable[[], torch.nn.Module]] = {
    "sigmoid": torch.nn.Sigmoid,
    "softmax": lambda: torch.nn.Softmax(dim=1),
    "log_softmax": lambda: torch.nn.LogSoftmax(dim=-1),
}
CASES = [("sigmoid", 1), ("sigmoid", 3), ("softmax", 3), ("softmax", 2), ("log_softmax", 3)]
FORMATS = ("sequential", "fx", "script", "trace", "export", "onnx")


def headed_module(head: str, outputs: int, seed: int) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, outputs), HEAD_MODULES[head](),
    ).double().eval()


def saved(module: torch.nn.Module, fmt: str, tmp_path: Path) -> Network:
    """``module`` saved and read back the way a user would hand it to certgate."""
    example = torch.zeros(2, 4, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if fmt == "sequential":
            return from_torch(module)
        if fmt == "fx":
            return from_torch(torch.fx.symbolic_trace(module))
        if fmt in ("script", "trace"):
            path = tmp_path / f"{fmt}.pt"
            scripted = torch.jit.script(module) if fmt == "script" else torch.jit.trace(module,
                                                                                          example)
            torch.jit.save(scripted, str(path))
            return load_network(path)
        if fmt == "export":
            path = tmp_path / "model.pt2"
            torch.export.save(torch.export.export(
                module, (example,), dynamic_shapes=({0: torch.export.Dim.AUTO},)), str(path))
            return load_network(path)
        path = tmp_path / "model.onnx"
        torch.onnx.export(module, (example,), str(path), dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
        return load_network(path)


def source_classes(outputs: np.ndarray) -> np.ndarray:
    """The class the source model's own outputs give: the 0.5 threshold of one sigmoid
    output, else the argmax of the head's outputs."""
    if outputs.shape[1] == 1:
        return (outputs[:, 0] > 0.5).astype(int)
    return np.argmax(outputs, axis=1)


def tie_adjacent(network: Network, rng: np.random.Generator, count: int) -> np.ndarray:
    """Points within ~1e-7 of a decision boundary, on both sides: bisect segments between
    points of different classes (classes of the logits, computed without certgate's rule)."""
    logits = network.logits()

    def cls(points: np.ndarray) -> np.ndarray:
        z = logits.evaluate(points)
        return (z[:, 0] > 0).astype(int) if z.shape[1] == 1 else np.argmax(z, axis=1)

    found = []
    while len(found) < count:
        a, b = rng.normal(size=(2, 4)) * 2
        if cls(np.stack([a, b]))[0] == cls(np.stack([a, b]))[1]:
            continue
        low, high = 0.0, 1.0
        for _ in range(60):
            middle = (low + high) / 2
            same = cls(np.stack([a, a + middle * (b - a)]))
            low, high = (middle, high) if same[0] == same[1] else (low, middle)
        step = 1e-7 / np.linalg.norm(b - a)
        found += [a + (low - step) * (b - a), a + (high + step) * (b - a)]
    return np.array(found)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("head", "outputs"), CASES)
def test_converted_head_matches_the_source(head: str, outputs: int, fmt: str,
                                           tmp_path: Path) -> None:
    module = headed_module(head, outputs, seed=outputs)
    network = saved(module, fmt, tmp_path)
    assert network.head == head and network.output_size == outputs
    rng = np.random.default_rng(7)
    points = np.vstack([rng.normal(size=(300, 4)) * 3, tie_adjacent(network, rng, 60)])
    with torch.no_grad():
        expected = module(torch.from_numpy(points)).numpy()
    assert np.allclose(network.evaluate(points), expected, rtol=1e-9, atol=1e-12)
    assert np.array_equal(network.classify(points), source_classes(expected))
    assert network.as_classifier().head == "none"


@pytest.mark.parametrize(("head", "outputs"), CASES)
def test_json_onnx_and_torch_round_trips_keep_the_head(head: str, outputs: int) -> None:
    network = from_torch(headed_module(head, outputs, seed=11))
    points = np.random.default_rng(3).normal(size=(50, 4)) * 3
    for copy in (network_from_json(json.loads(json.dumps(network_to_json(network)))),
                 from_onnx(network_to_onnx(network)), from_torch(network.to_torch())):
        assert copy.head == head
        assert np.allclose(copy.evaluate(points), network.evaluate(points), rtol=1e-12,
                           atol=1e-15)
    assert "head" not in network_to_json(network.logits())


def test_head_before_another_layer_is_refused_naming_it(tmp_path: Path) -> None:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Sigmoid(),
                                 torch.nn.Linear(3, 2)).double().eval()
    expected = {"sequential": "sigmoid at module '1'", "script": "sigmoid at module '1'",
                "trace": "sigmoid at module '1'", "fx": "sigmoid at module '1'",
                "export": "sigmoid at node 'sigmoid'",
                "onnx": "sigmoid at Sigmoid node '/1/Sigmoid'"}
    for fmt in FORMATS:
        with pytest.raises(NetworkError) as raised:
            saved(module, fmt, tmp_path)
        assert expected[fmt] in str(raised.value), (fmt, str(raised.value))
        assert "followed by another operation" in str(raised.value)
    softmax_twice = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Softmax(dim=1),
                                        torch.nn.LogSoftmax(dim=1)).double().eval()
    with pytest.raises(NetworkError, match="softmax at module '1' is followed"):
        from_torch(softmax_twice)


def test_heads_that_are_not_classifier_heads_are_refused() -> None:
    single = torch.nn.Sequential(torch.nn.Linear(4, 1), torch.nn.Softmax(dim=1)).eval()
    with pytest.raises(NetworkError, match="softmax head over a single output is a constant"):
        from_torch(single)
    batch_wise = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Softmax(dim=0)).eval()
    with pytest.raises(NetworkError, match="softmax over dimension 0"):
        from_torch(batch_wise)
    with pytest.raises(NetworkError, match="unsupported head 'tanh'"):
        network_from_json({"layers": [{"weight": [[1.0]], "bias": [0.0],
                                       "activation": "none"}], "head": "tanh"})


def test_views_of_a_headed_network() -> None:
    network = from_torch(headed_module("sigmoid", 1, seed=5))
    logits = network.logits()
    assert logits.head == "none" and logits.layers == network.layers
    view = network.as_classifier()
    manual = network.logits()
    last = manual.layers[-1]
    explicit = Network([*manual.layers[:-1], Layer(np.vstack([np.zeros((1, 6)), last.weight]),
                                                    np.concatenate([[0.0], last.bias]))])
    points = np.random.default_rng(0).normal(size=(200, 4))
    assert np.array_equal(view.evaluate(points), explicit.evaluate(points))
    with pytest.raises(NetworkError, match="sigmoid head, which is not piecewise linear"):
        network.lowered()
    with pytest.raises(NetworkError, match="sigmoid head; evaluate its logits"):
        exact_outputs(network, [0.0] * 4)
    with pytest.raises(NetworkError, match="first network ends in a sigmoid head"):
        compose(network, Network([Layer(np.ones((1, 1)), np.zeros(1))]))
    renamed = network.renamed(["a", "b", "c", "d"])
    assert renamed.head == "sigmoid" and renamed.input_names == ["a", "b", "c", "d"]


def _corners_and_points(lo: np.ndarray, hi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    corners = np.array(list(itertools.product(*zip(lo, hi, strict=True))))
    inside = lo + rng.uniform(size=(400, lo.size)) * (hi - lo)
    return np.vstack([corners, inside])


@pytest.mark.parametrize("method", ["ibp", "crown", "alpha-crown"])
@pytest.mark.parametrize(("head", "outputs"), CASES)
def test_output_bounds_through_the_head_are_sound(head: str, outputs: int, method: str) -> None:
    rng = np.random.default_rng(outputs + len(head))
    for trial in range(12):
        base = random_network(rng, [3, 6, 6, outputs])
        network = Network(base.layers, head=head)  # type: ignore[arg-type]
        centre = rng.normal(size=3) * 2
        width = rng.uniform(0.01, 3.0, size=3) * (10.0 if trial % 4 == 0 else 1.0)
        lo, hi = centre - width, centre + width
        low, high = output_bounds(network, lo[None], hi[None], method)
        values = network.evaluate(_corners_and_points(lo, hi, rng))
        assert np.all(low[0] <= values) and np.all(values <= high[0]), (trial, low, high)
        if head != "log_softmax":
            assert np.all((low >= 0.0) & (high <= 1.0))
        point_low, point_high = output_bounds(network, centre[None], centre[None], method)
        value = network.evaluate(centre)
        assert np.all(point_low[0] <= value) and np.all(value <= point_high[0])
        assert np.all(point_high - point_low < 1e-6)


def test_output_bounds_with_infinite_inputs_are_the_heads_range() -> None:
    base = random_network(np.random.default_rng(4), [2, 5, 3])
    lo, hi = np.array([[-np.inf, 0.0]]), np.array([[np.inf, 1.0]])
    for head, (bottom, top) in {"sigmoid": (0.0, 1.0), "softmax": (0.0, 1.0),
                                "log_softmax": (-np.inf, 0.0)}.items():
        low, high = output_bounds(Network(base.layers, head=head), lo, hi)  # type: ignore[arg-type]
        assert np.all(low == bottom) and np.all(high == top), head


def test_bounds_cli_through_the_head_with_logits_and_spec(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    network = from_torch(headed_module("softmax", 3, seed=2))
    path = tmp_path / "softmax.json"
    save_network(network, path)
    box = ["--lower=-1,-1,-1,-1", "--upper", "1,1,1,1", "--json"]
    assert main(["bounds", "--model", str(path), *box]) == 0
    payload = json.loads(capsys.readouterr().out)
    low, high = output_bounds(network, -np.ones((1, 4)), np.ones((1, 4)))
    assert payload["lower"] == low[0].tolist() and payload["upper"] == high[0].tolist()
    assert main(["bounds", "--model", str(path), "--logits", *box]) == 0
    payload = json.loads(capsys.readouterr().out)
    logits = compute_bounds(network.logits(), -np.ones((1, 4)), np.ones((1, 4)))
    assert payload["lower"] == logits.lower[0].tolist()
    spec = tmp_path / "spec.json"
    spec.write_text("[[1, -1, 0]]")
    assert main(["bounds", "--model", str(path), "--spec", str(spec), *box]) == 2
    error = capsys.readouterr().err
    assert "softmax head" in error and "--logits" in error and error.count("\n") == 1
    assert main(["bounds", "--model", str(path), "--spec", str(spec), "--logits", *box]) == 0


def test_a_single_logit_with_per_neuron_slopes_keeps_one_slope_per_row() -> None:
    """The classifier view prepends a zero row; a last layer with one slope per neuron gets
    one for it too (before, the view raised: one slope for two rows)."""
    hidden = Layer(np.array([[1.0], [-1.0]]), np.zeros(2), "leaky_relu",
                   negative_slope=(0.0, 1.0))
    last = Layer(np.array([[1.0, 2.0]]), np.array([-0.5]), "none", negative_slope=(0.25,))
    view = Network([hidden, last]).as_classifier()
    assert view.layers[-1].negative_slope == (0.0, 0.25)
    assert view.classify(np.array([[-1.0], [0.0]])).tolist() == [1, 0]  # z = 1.5, -0.5
