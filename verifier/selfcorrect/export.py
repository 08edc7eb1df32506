"""Export of SC-Nets: TorchScript (always) and ONNX (when the exporter can express the module).

TorchScript: :class:`~verifier.selfcorrect.scnet.SelfCorrectingNetwork` and
:class:`~verifier.selfcorrect.layer.SelfCorrectingLayer` compile with ``torch.jit.script``; the
compiled module computes the same outputs and ⊥ flags as the eager one (tested), keeps the
``forward_with_bottom``/``satisfied`` methods and loads with ``torch.jit.load`` without certgate.
torch 2.13 marks TorchScript deprecated in favour of ``torch.export``, which cannot capture the
layer's data-dependent control flow; these helpers silence that deprecation warning only.

ONNX: the SC-layer's control flow depends on the data (rows that are already safe skip the
search; rows are grouped by which constraints are active; ⊥ and bad input are checked per
batch), which ``torch.onnx.export`` cannot express: the TorchScript-based exporter rejects the
scripted module (its table cache is a ``Dict[str, List[Tensor]]`` constant; the stable sort has
no ONNX symbolic either), and the ``torch.export``-based exporter (which also needs
``onnxscript``) stops at the first data-dependent branch. :func:`export_onnx` therefore
raises :class:`OnnxExportError` for SC-Nets, with the exporter's reason; for modules it can
export, the file is checked against the torch module with onnxruntime before it is kept.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from verifier.errors import CertgateInputError
from verifier.native_output import native_stdout_silenced

ONNX_CHECK_ROWS = 64
ONNX_CHECK_RTOL = 1e-5
ONNX_CHECK_ATOL = 1e-6


class ExportError(CertgateInputError):
    """A module cannot be exported in the requested format; the message says why."""


class OnnxExportError(ExportError):
    """``torch.onnx.export`` cannot express the module, or its ONNX output disagrees."""


class OnnxNotExpressible(OnnxExportError):
    """``torch.onnx.export`` cannot express the module (always so for an SC-Net)."""


@contextlib.contextmanager
def _torchscript_deprecation_silenced() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.\w+` is deprecated", category=DeprecationWarning
        )
        yield


def script_module(module: torch.nn.Module) -> torch.jit.ScriptModule:
    """``torch.jit.script(module)`` in eval mode.

    Raises:
        ExportError: the module (e.g. a wrapped model with unsupported Python) does not compile.
    """
    module.eval()
    try:
        with _torchscript_deprecation_silenced():
            return torch.jit.script(module)
    except (RuntimeError, torch.jit.frontend.NotSupportedError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise ExportError(f"TorchScript compilation failed: {first_line}") from error


def save_torchscript(module: torch.nn.Module, path: str | Path) -> Path:
    """Compile ``module`` with TorchScript and save it to ``path`` (``torch.jit.load`` reads it)."""
    target = Path(path)
    scripted = script_module(module)
    with _torchscript_deprecation_silenced():
        torch.jit.save(scripted, str(target))
    return target


def load_torchscript(path: str | Path) -> torch.jit.ScriptModule:
    """``torch.jit.load`` of a file written by :func:`save_torchscript`."""
    with _torchscript_deprecation_silenced():
        return torch.jit.load(str(path))


def export_onnx(
    module: torch.nn.Module, path: str | Path, example_input: torch.Tensor, opset: int = 17
) -> Path:
    """Export ``module`` to ONNX with a dynamic batch axis and check it with onnxruntime.

    The module is compiled with TorchScript first and the *scripted* graph is exported, never a
    trace: tracing would record only the branches the example input happens to take and freeze
    them into the graph. The file is kept only if onnxruntime reproduces the module's outputs
    (``rtol=1e-5``, ``atol=1e-6``) on ``example_input`` and on ``ONNX_CHECK_ROWS`` standard-normal
    rows of the same width.

    Raises:
        OnnxExportError: the exporter cannot express the module (the reason is in the message),
            or onnxruntime's output differs; no file is left behind.
    """
    target = Path(path)
    scripted = script_module(module)
    try:
        # the exporter logs the whole TorchScript graph to stdout when it fails
        with warnings.catch_warnings(), native_stdout_silenced():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                scripted,
                (example_input,),
                str(target),
                dynamo=False,
                opset_version=opset,
                input_names=["x"],
                output_names=["logits"],
                dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
            )
    except Exception as error:  # the exporter raises many unrelated types
        target.unlink(missing_ok=True)
        raise OnnxNotExpressible(
            f"torch.onnx.export cannot express this module ({_first_sentence(error)})"
        ) from error
    generator = torch.Generator().manual_seed(0)
    random_rows = torch.randn(
        (ONNX_CHECK_ROWS, *example_input.shape[1:]),
        generator=generator,
        dtype=example_input.dtype,
    )
    for inputs in (example_input, random_rows):
        _check_onnx(module, target, inputs)
    return target


def _first_sentence(error: Exception) -> str:
    """The exception's type and the first sentence of its message: the exporter's messages
    go on with a request to report a bug to PyTorch and a dump of the graph node."""
    text = " ".join(str(error).split())
    sentence = text.split(". ")[0].rstrip(".") if text else repr(error)
    return f"{type(error).__name__}: {sentence}"


def _check_onnx(module: torch.nn.Module, path: Path, example_input: torch.Tensor) -> None:
    """onnxruntime must reproduce ``module(example_input)``; otherwise the file is removed."""
    try:
        import onnxruntime
    except ImportError as error:
        path.unlink(missing_ok=True)
        raise OnnxExportError(
            "onnxruntime is needed to check the exported file (pip install 'certgate[dev]')"
        ) from error
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: example_input.detach().cpu().numpy()}
    got = session.run(None, feed)[0]
    with torch.no_grad():
        expected = module(example_input).detach().cpu().numpy()
    if got.shape != expected.shape:
        path.unlink(missing_ok=True)
        raise OnnxExportError(
            f"the exported ONNX graph returns shape {got.shape}, the module {expected.shape}"
        )
    if not np.allclose(got, expected, rtol=ONNX_CHECK_RTOL, atol=ONNX_CHECK_ATOL):
        path.unlink(missing_ok=True)
        raise OnnxExportError(
            "the exported ONNX graph disagrees with the torch module on the example input "
            f"(largest difference {float(np.max(np.abs(got - expected))):.3g})"
        )
