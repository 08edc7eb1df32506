"""``certgate selfcorrect apply | wrap | describe``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline_steps.cli import main, selfcorrect_cmd
from verifier.convert import save_network
from verifier.errors import CertgateInputError
from verifier.network import Layer, Network
from verifier.selfcorrect import SelfCorrectingLayer, load_constraints
from verifier.selfcorrect.conventions import negate_outputs
from verifier.selfcorrect.export import load_torchscript

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TOY = EXAMPLES / "constraints_toy.yaml"


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="certgate")
    commands = parser.add_subparsers(dest="command", required=True)
    selfcorrect_cmd.register(commands)
    args = parser.parse_args(["selfcorrect", *argv])
    return int(args.func(args))


def _toy_data(tmp_path: Path, rows: int = 200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.uniform(-2.0, 2.0, size=(rows, 2))
    y = rng.normal(size=(rows, 3))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "x.json").write_text(json.dumps(x.tolist()))
    (tmp_path / "y.json").write_text(json.dumps(y.tolist()))
    return x, y


@pytest.mark.parametrize("suffix", [".npy", ".json"])
def test_apply_json_output_matches_the_layer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    x, y = _toy_data(tmp_path)
    code = run(
        [
            "apply",
            "--constraints",
            str(TOY),
            "--inputs",
            str(tmp_path / f"x{suffix}"),
            "--logits",
            str(tmp_path / f"y{suffix}"),
            "--json",
        ]
    )
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) == {"logits", "bottom", "changed"}
    layer = SelfCorrectingLayer(load_constraints(TOY), 3)
    corrected, bottom = layer(torch.from_numpy(x), torch.from_numpy(y))
    assert payload["logits"] == corrected.tolist()
    assert payload["bottom"] == bottom.tolist()
    assert payload["changed"] == (corrected != torch.from_numpy(y)).any(dim=1).tolist()
    assert any(payload["changed"]) and not all(payload["changed"])


def test_apply_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _toy_data(tmp_path)
    assert (
        run(
            [
                "apply",
                "--constraints",
                str(TOY),
                "--inputs",
                str(tmp_path / "x.npy"),
                "--logits",
                str(tmp_path / "y.npy"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("200 row(s), 6 constraint(s) over 3 classes:")
    assert "corrected:" in out and "bottom (constraints unsatisfiable, left unchanged):" in out


@pytest.mark.parametrize(
    ("inputs", "logits", "message"),
    [
        ("x.npy", "short.npy", "--inputs has 200 rows but --logits has 3"),
        ("x.txt", "y.npy", r"--inputs .*x\.txt: expected a \.npy or \.json file"),
        ("flat.json", "y.npy", r"--inputs .*flat\.json: expected rows \(2-D\)"),
        ("x.npy", "wide.npy", "declares 3 classes but the model has 4"),
    ],
)
def test_apply_rejects_bad_input(tmp_path: Path, inputs: str, logits: str, message: str) -> None:
    _toy_data(tmp_path)
    np.save(tmp_path / "short.npy", np.zeros((3, 3)))
    np.save(tmp_path / "wide.npy", np.zeros((200, 4)))
    (tmp_path / "x.txt").write_text("0")
    (tmp_path / "flat.json").write_text("[1, 2, 3]")
    with pytest.raises(CertgateInputError, match=message):
        run(
            [
                "apply",
                "--constraints",
                str(TOY),
                "--inputs",
                str(tmp_path / inputs),
                "--logits",
                str(tmp_path / logits),
            ]
        )


def test_describe(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["describe", "--constraints", str(TOY)]) == 0
    assert "6 safe-ordering constraint(s) over 3 classes (low, medium, high)" in (
        capsys.readouterr().out
    )


def _argmin_network(tmp_path: Path) -> tuple[Network, Path]:
    """A small 2-input, 3-output network saved as JSON (its class is the argmin)."""
    rng = np.random.default_rng(5)
    network = Network(
        [
            Layer(rng.normal(size=(8, 2)), rng.normal(size=8), "relu"),
            Layer(rng.normal(size=(3, 8)), rng.normal(size=3), "none"),
        ]
    )
    path = tmp_path / "net.json"
    save_network(network, path)
    return network, path


def test_wrap_writes_a_torchscript_scnet_and_the_constraints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    network, path = _argmin_network(tmp_path)
    out = tmp_path / "wrapped"
    code = run(
        [
            "wrap",
            "--model",
            str(path),
            "--constraints",
            str(TOY),
            "--out",
            str(out),
            "--negate-outputs",
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["written"]) == {"model.pt", "constraints.yaml"}
    assert "torch.onnx.export cannot express this module" in report["onnx_error"]
    assert not (out / "model.onnx").exists()
    assert load_constraints(out / "constraints.yaml") == load_constraints(TOY)
    loaded = load_torchscript(out / "model.pt")
    x = torch.from_numpy(np.random.default_rng(1).uniform(-2, 2, size=(300, 2)))
    layer = SelfCorrectingLayer(load_constraints(TOY), 3)
    with torch.no_grad():
        expected, bottom = layer(x, negate_outputs(network).forward(x))
        got, got_bottom = loaded.forward_with_bottom(x)
    assert torch.equal(got, expected) and torch.equal(got_bottom, bottom)


def test_wrap_summary_and_input_size_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _argmin_network(tmp_path)
    assert (
        run(
            [
                "wrap",
                "--model",
                str(path),
                "--constraints",
                str(TOY),
                "--out",
                str(tmp_path / "o"),
                "--on-bottom",
                "abstain",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "2 inputs -> 4 outputs, 6 constraint(s), on_bottom=abstain" in out
    assert "model.onnx not written:" in out
    wide = tmp_path / "wide.yaml"
    wide.write_text(
        "num_classes: 3\nconstraints:\n  - name: c\n    precondition: {kind: box, "
        "lower: [0, 0, 0], upper: [1, 1, 1]}\n    postcondition: [[y0 < y1]]\n"
    )
    with pytest.raises(CertgateInputError, match="read 3 inputs but the model has 2"):
        run(
            [
                "wrap",
                "--model",
                str(path),
                "--constraints",
                str(wide),
                "--out",
                str(tmp_path / "o2"),
            ]
        )


def test_negate_outputs_needs_a_linear_last_layer() -> None:
    network = Network([Layer(np.eye(2), np.zeros(2), "relu")])
    with pytest.raises(CertgateInputError, match="last layer has activation 'relu'"):
        negate_outputs(network)
    linear = Network([Layer(np.array([[1.0, -2.0]]), np.array([0.5]), "none")])
    assert negate_outputs(linear).evaluate([[3.0, 1.0]]).tolist() == [[-1.5]]


def test_the_wrapped_model_takes_the_float32_rows_the_model_was_served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model trained and served in float32 is wrapped around its float64 network: its rows
    are widened exactly (every float32 is a float64), so the wrapped model answers a float32
    batch as it answers the same rows in float64, where it stopped with PyTorch's "mat1 and
    mat2 must have the same dtype"."""
    _, path = _argmin_network(tmp_path)
    out = tmp_path / "wrapped"
    assert run(["wrap", "--model", str(path), "--constraints", str(TOY), "--out", str(out),
                "--negate-outputs", "--json"]) == 0
    capsys.readouterr()
    loaded = load_torchscript(out / "model.pt")
    x = torch.from_numpy(np.random.default_rng(2).uniform(-2, 2, size=(300, 2))).float()
    with torch.no_grad():
        wide, wide_bottom = loaded.forward_with_bottom(x.double())
        got, got_bottom = loaded.forward_with_bottom(x)
        plain = loaded(x)
    assert got.dtype == torch.float64
    assert torch.equal(got, wide) and torch.equal(got_bottom, wide_bottom)
    assert torch.equal(plain, wide)


@pytest.mark.parametrize("as_json", [True, False])
def test_wrap_without_onnx_says_why_and_what_to_do_and_dumps_no_graph(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], as_json: bool
) -> None:
    # the exporter logged the whole TorchScript graph (~700 lines) on file descriptor 1 when
    # it failed: on stdout in text mode, on stderr with --json; capfd reads the descriptors
    _, path = _argmin_network(tmp_path)
    argv = ["selfcorrect", "wrap", "--model", str(path), "--constraints", str(TOY),
            "--out", str(tmp_path / "o"), *(["--json"] if as_json else [])]
    assert main(argv) == 0
    out, err = capfd.readouterr()
    assert "Torch IR graph" not in out + err and "%x.1" not in out + err
    assert len(out.splitlines()) == (1 if as_json else 4)
    if as_json:
        message = json.loads(out)["onnx_error"]
    else:
        (line,) = [line for line in out.splitlines() if "model.onnx" in line]
        message = line.removeprefix("  model.onnx not written: ")
    assert message.startswith("torch.onnx.export cannot express this module (")
    assert message.endswith(
        "). The self-correcting layer's control flow depends on each batch, which the ONNX "
        "exporter cannot express. model.pt is the wrapped model: load it with torch.jit.load "
        "(no certgate needed), or register it in MLflow with --out models:/NAME.")
    assert "\n" not in message and "bug report" not in message
    assert (tmp_path / "o" / "model.pt").exists() and not (tmp_path / "o" / "model.onnx").exists()
