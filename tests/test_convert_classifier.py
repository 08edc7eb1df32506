"""Single-output networks as binary classifiers, and ``.nnet`` files with their domain."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from verifier.convert import load_classifier, read_nnet
from verifier.exact_arith import exact_outputs
from verifier.network import Layer, Network, NetworkError

FAIRQUANT = Path("/work/shared/benchmarks/fairquant")


def _logit_network(seed: int) -> Network:
    rng = np.random.default_rng(seed)
    return Network([Layer(rng.normal(size=(5, 3)), rng.normal(size=5), "relu"),
                    Layer(rng.normal(size=(1, 5)), rng.normal(size=1), "none")])


def test_classifier_view_is_class_one_iff_the_logit_is_positive() -> None:
    network = _logit_network(0)
    view = network.as_classifier()
    assert view.output_size == 2 and view.output_names == ["y0 <= 0", "y0 > 0"]
    points = np.random.default_rng(1).normal(size=(2000, 3)) * 3
    logit = network.evaluate(points)[:, 0]
    outputs = view.evaluate(points)
    assert np.array_equal(outputs[:, 0], np.zeros(len(points)))
    # in real arithmetic the view's difference is the logit itself (float matmuls of a
    # different shape may sum in another order, so compare exactly in rationals)
    for point in points[:40]:
        exact_view = exact_outputs(view, point)
        assert exact_view[0] == 0 and exact_view[1] == exact_outputs(network, point)[0]
    assert np.allclose(outputs[:, 1], logit, rtol=1e-12, atol=1e-12)
    clear = np.abs(logit) > 1e-9
    assert np.array_equal(view.classify(points)[clear], (logit[clear] > 0).astype(int))
    assert not view.folded


def test_classifier_view_leaves_multi_output_networks_alone() -> None:
    rng = np.random.default_rng(2)
    network = Network([Layer(rng.normal(size=(3, 2)), rng.normal(size=3), "none")])
    assert network.as_classifier() is network


def test_classifier_view_refuses_an_activated_single_output() -> None:
    network = Network([Layer(np.ones((1, 2)), np.zeros(1), "relu")])
    with pytest.raises(NetworkError, match="single output passes through relu"):
        network.as_classifier()


def test_nnet_loads_with_its_domain_and_both_input_readings(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    w0, b0 = rng.normal(size=(4, 2)), rng.normal(size=4)
    w1, b1 = rng.normal(size=(1, 4)), rng.normal(size=1)
    lines = ["// test", "2,2,1,4,", "2,4,1,", "0,", "0,1,", "3,10,", "1,5,0,", "2,5,1,"]
    lines += [",".join(map(str, row)) + "," for row in w0] + [f"{v}," for v in b0]
    lines += [",".join(map(str, row)) + "," for row in w1] + [f"{v}," for v in b1]
    path = tmp_path / "small.nnet"
    path.write_text("\n".join(lines) + "\n")
    points = np.array([[0.0, 1.0], [3.0, 10.0], [2.0, 4.0]])

    def reference(x: np.ndarray) -> np.ndarray:
        return np.maximum(x @ w0.T + b0, 0.0) @ w1.T + b1

    raw, domain = load_classifier(path, nnet_normalises_inputs=False)
    assert domain is not None
    assert domain[0].tolist() == [0.0, 1.0] and domain[1].tolist() == [3.0, 10.0]
    assert np.allclose(raw.evaluate(points)[:, 1], reference(points)[:, 0], rtol=1e-12)
    normalised, _ = load_classifier(path)
    scaled = read_nnet(path).normalise(points)
    assert np.allclose(normalised.evaluate(points)[:, 1], reference(scaled)[:, 0], rtol=1e-12)
    assert normalised.folded  # the merged division is rounded: bounds keep margins for it


@pytest.mark.skipif(not FAIRQUANT.is_dir(), reason="FairQuant benchmark folder not present")
def test_fairquant_network_loads_unchanged() -> None:
    network, domain = load_classifier(FAIRQUANT / "GC-3.nnet", nnet_normalises_inputs=False)
    assert domain is not None and network.input_size == 20 and network.output_size == 2
    assert domain[1][4] == 20000.0 and domain[0][7] == 1.0
