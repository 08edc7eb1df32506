"""Torch files, loaded without unpickling arbitrary objects.

* State dicts (``torch.save(model.state_dict(), path)``), read with
  ``torch.load(weights_only=True)``. A state dict holds only the ``Linear`` weights and biases
  of a ``Sequential`` (keys ``0.weight``, ``0.bias``, ``2.weight``, ... in module order); it does
  not record the activations, so the caller names one (``activation="relu"``), applied between
  consecutive Linear layers and not after the last one. Batch-norm statistics are rejected:
  where the normalisation sits relative to the activation is not recorded either.
* TorchScript archives (``torch.jit.save``), read with ``torch.jit.load`` and converted by
  :mod:`verifier.convert.torchscript`.
* ``torch.export`` archives (``.pt2``, ``torch.export.save``; MLflow's ``pt2`` format), read with
  ``torch.export.load`` and converted as fx graphs.

A file holding pickled Python objects (a whole ``nn.Module`` saved with ``torch.save``) is
refused rather than unpickled.
"""

from __future__ import annotations

import logging
import pickle
import warnings
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from verifier.convert.torch_fx import from_graph_module
from verifier.convert.torch_layers import refuse_reduced_precision
from verifier.convert.torch_module import from_torch
from verifier.convert.torchscript import from_torchscript
from verifier.errors import first_line
from verifier.network import Network, NetworkError

STATE_DICT_ACTIVATIONS = ("relu", "leaky_relu", "hardtanh", "none")


def _archive_names(path: Path) -> list[str]:
    if not zipfile.is_zipfile(path):
        return []
    with zipfile.ZipFile(path) as archive:
        return archive.namelist()


def is_torchscript(path: Path) -> bool:
    """TorchScript archives carry their compiled code under ``<archive>/code/``."""
    return any("/code/" in name for name in _archive_names(path))


def is_exported_program(path: Path) -> bool:
    """``torch.export.save`` archives carry ``<archive>/archive_format``."""
    return any(name.endswith("/archive_format") for name in _archive_names(path))


def load_torch_file(
    path: str | Path,
    *,
    activation: str | None = None,
    negative_slope: float = 0.01,
    min_val: float = -1.0,
    max_val: float = 1.0,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    verify: bool = True,
) -> Network:
    """Load a ``.pt``/``.pth``/``.ts`` file: a TorchScript archive, a ``torch.export`` archive
    or a state dict (see the module docstring for what ``activation`` and its parameters mean)."""
    path = Path(path)
    if not path.is_file():
        raise NetworkError(f"torch file not found: {path}")
    if is_torchscript(path):
        return from_torchscript(_torchscript_module(path), input_names, output_names,
                                verify=verify)
    if is_exported_program(path):
        return load_exported_program(path, input_names, output_names, verify=verify)
    state = _state_dict(path)
    return network_from_state_dict(
        state,
        activation=activation,
        negative_slope=negative_slope,
        min_val=min_val,
        max_val=max_val,
        input_names=input_names,
        output_names=output_names,
        verify=verify,
    )


def torch_file_module(path: Path) -> torch.nn.Module:
    """The module whose parameters a torch file holds, read as :func:`load_torch_file` and
    :func:`load_exported_program` read it: a TorchScript module, an exported program's module,
    or a state dict's float tensors as a ``ParameterList`` (their dtypes as stored), so that
    :func:`~verifier.selfcorrect.scnet.parameter_bits` reads the dtype the file computes in."""
    if is_torchscript(path):
        return _torchscript_module(path)
    if path.suffix.lower() == ".pt2" or is_exported_program(path):
        return _exported_program(path).module()
    return torch.nn.ParameterList(
        torch.nn.Parameter(value, requires_grad=False) for value in _state_dict(path).values()
        if isinstance(value, torch.Tensor) and value.is_floating_point())


def _torchscript_module(path: Path) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        # TorchScript is deprecated upstream, but it is the only reader of these archives
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.load(str(path), map_location="cpu")


def _state_dict(path: Path) -> Mapping[str, Any]:
    """The state dict a ``torch.save`` file holds (also under a ``state_dict`` key), read
    with ``weights_only=True``."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise NetworkError(
            f"{path} holds pickled Python objects (e.g. a whole module saved with torch.save), "
            "which certgate does not unpickle; save the state dict, a TorchScript archive "
            "(torch.jit.save) or a torch.export archive (torch.export.save) instead"
        ) from error
    except (RuntimeError, OSError, EOFError) as error:
        raise NetworkError(f"cannot read torch file {path}: {error}") from error
    if isinstance(state, Mapping) and isinstance(state.get("state_dict"), Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping):
        raise NetworkError(f"{path} holds a {type(state).__name__}, not a state dict")
    return state


LinearEntry = tuple[str, torch.Tensor, torch.Tensor | None]
"""A state dict's Linear layer: ``(module path, weight, bias)``."""


def _linear_layers(state: Mapping[str, Any]) -> list[LinearEntry]:
    """``(module path, weight, bias)`` per Linear layer, in forward order
    (:func:`_forward_order`)."""
    groups: dict[str, dict[str, Any]] = {}
    for key, value in state.items():
        prefix, _, name = str(key).rpartition(".")
        if name not in ("weight", "bias"):
            raise NetworkError(
                f"state dict entry {key!r} is not a Linear weight or bias; only Sequential "
                "stacks of Linear layers can be read from a state dict (batch-norm and other "
                "layers need a TorchScript, torch.export or ONNX file)"
            )
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            raise NetworkError(f"state dict entry {key!r} is not a floating-point tensor")
        groups.setdefault(prefix, {})[name] = value
    layers = []
    for prefix, tensors in groups.items():
        weight = tensors.get("weight")
        if weight is None or weight.ndim != 2:
            raise NetworkError(f"state dict module {prefix!r} has no 2-D weight")
        layers.append((prefix, weight, tensors.get("bias")))
    if not layers:
        raise NetworkError("the state dict is empty")
    return _forward_order(layers)


def _forward_order(layers: list[LinearEntry]) -> list[LinearEntry]:
    """The layers in the order a forward pass applies them. A ``Sequential``'s keys (one
    parent, integer indices) give it by index. Other names (``fc1``, ``out``) record only the
    modules' registration order, so the order is the one chain of shapes (each layer's inputs
    the previous layer's outputs) that uses every layer; :class:`NetworkError` when several
    chains fit (square layers could run in either order). With no chain, the registration
    order is returned and the caller names the first mismatch."""
    parents = {prefix.rpartition(".")[0] for prefix, _, _ in layers}
    if len(parents) == 1 and all(prefix.rpartition(".")[2].isdigit() for prefix, _, _ in layers):
        return sorted(layers, key=lambda layer: int(layer[0].rpartition(".")[2]))
    advice = ("save the model as a TorchScript (torch.jit.save), torch.export or ONNX file, "
              "or as an nn.Sequential's state dict")
    chains = _shape_chains(layers, limit=2)
    if chains is None:
        raise NetworkError(
            f"a state dict records no forward order, and its {len(layers)} Linear layers' "
            f"shapes admit too many orders to settle one; {advice}"
        )
    if len(chains) > 1:
        first, second = (" → ".join(layers[i][0] for i in chain) for chain in chains)
        raise NetworkError(
            "a state dict records no forward order, and its Linear layers' shapes chain in "
            f"more than one order ({first}; {second}); {advice}"
        )
    return [layers[i] for i in chains[0]] if chains else layers


SHAPE_CHAIN_STEPS = 100_000
"""How many partial orders :func:`_shape_chains` tries before it gives up."""


def _shape_chains(layers: list[LinearEntry], limit: int) -> list[list[int]] | None:
    """Up to ``limit`` orders of all ``layers`` in which each layer's input width is the
    previous layer's output width (depth-first, registration order first); ``None`` when
    :data:`SHAPE_CHAIN_STEPS` partial orders did not settle it."""
    found: list[list[int]] = []
    steps = 0

    def extend(chain: list[int], unused: set[int]) -> None:
        nonlocal steps
        steps += 1
        if len(found) >= limit or steps > SHAPE_CHAIN_STEPS:
            return
        if not unused:
            found.append(list(chain))
            return
        width = None if not chain else layers[chain[-1]][1].shape[0]
        for index in sorted(unused):
            if width is None or layers[index][1].shape[1] == width:
                chain.append(index)
                extend(chain, unused - {index})
                chain.pop()

    extend([], set(range(len(layers))))
    return None if steps > SHAPE_CHAIN_STEPS and len(found) < limit else found


def _activation_module(
    activation: str, negative_slope: float, min_val: float, max_val: float
) -> torch.nn.Module | None:
    if activation == "relu":
        return torch.nn.ReLU()
    if activation == "leaky_relu":
        return torch.nn.LeakyReLU(negative_slope)
    if activation == "hardtanh":
        return torch.nn.Hardtanh(min_val, max_val)
    return None


def network_from_state_dict(
    state: Mapping[str, Any],
    *,
    activation: str | None = None,
    negative_slope: float = 0.01,
    min_val: float = -1.0,
    max_val: float = 1.0,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    verify: bool = True,
) -> Network:
    """A network from a ``Sequential`` state dict of Linear layers with ``activation`` between
    consecutive layers (required when there are several) and none after the last. The
    activation's scalars are read as the model's kernels apply them: rounded to the weights'
    float type (a float32 model's LeakyReLU slope 0.2 is float32(0.2))."""
    layers = _linear_layers(state)
    refuse_reduced_precision(layers[0][1].dtype)
    kernel = torch.empty(0, dtype=layers[0][1].dtype).numpy().dtype.type
    negative_slope, min_val, max_val = (float(kernel(value))
                                        for value in (negative_slope, min_val, max_val))
    if len(layers) > 1 and activation is None:
        raise NetworkError(
            "a state dict does not record activations: pass activation='relu' (or "
            f"{', '.join(STATE_DICT_ACTIVATIONS[1:])}) to apply between its Linear layers"
        )
    if activation is not None and activation not in STATE_DICT_ACTIVATIONS:
        raise NetworkError(
            f"activation {activation!r} is not supported; use one of "
            f"{', '.join(STATE_DICT_ACTIVATIONS)}"
        )
    modules: list[torch.nn.Module] = []
    previous_width: int | None = None
    for prefix, weight, bias in layers:
        if previous_width is not None:
            if previous_width != weight.shape[1]:
                raise NetworkError(
                    f"state dict module {prefix!r} expects {weight.shape[1]} inputs, the "
                    f"previous layer has {previous_width}"
                )
            between = _activation_module(activation or "none", negative_slope, min_val, max_val)
            if between is not None:
                modules.append(between)
        linear = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
        linear = linear.to(torch.float64)
        with torch.no_grad():
            linear.weight.copy_(weight)
            if bias is not None:
                linear.bias.copy_(bias.reshape(-1))
        modules.append(linear)
        previous_width = int(weight.shape[0])
    return from_torch(torch.nn.Sequential(*modules), input_names, output_names, verify=verify)


@contextmanager
def quiet_logger(name: str) -> Iterator[None]:
    """Silence logger ``name`` in the body: torch logs a traceback of a failed read before it
    raises, and the error raised is what certgate reports (one line naming the file)."""
    logger = logging.getLogger(name)
    disabled, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = disabled


def load_exported_program(
    path: str | Path,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    *,
    verify: bool = True,
) -> Network:
    """Load a ``torch.export`` archive (``.pt2``) and convert its graph module."""
    path = Path(path)
    if not path.is_file():
        raise NetworkError(f"torch.export archive not found: {path}")
    program = _exported_program(path)
    return from_graph_module(program.module(), input_names, output_names, verify=verify)


def _exported_program(path: Path) -> torch.export.ExportedProgram:
    if not zipfile.is_zipfile(path):
        raise NetworkError(f"cannot read torch.export archive {path}: not a zip archive (the "
                           "file is truncated or is not a torch.export.save archive)")
    try:
        with quiet_logger("torch.export"):
            return torch.export.load(str(path))
    except (RuntimeError, OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        raise NetworkError(f"cannot read torch.export archive {path}: {first_line(error)}") \
            from error
