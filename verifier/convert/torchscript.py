"""TorchScript modules to the IR, Sequential-style.

A scripted or traced module keeps, for every submodule, the name of its original class
(``original_name``) and that class's qualified name (``__torch__.torch.nn.modules.linear.
Linear`` for torch's own). The converter rebuilds the model as plain ``torch.nn`` modules from
torch's own classes and their tensors (a user's class that merely shares a name, say a
``ReLU`` of its own, is refused: its forward is not torch's, and a check on random inputs
cannot prove it is), converts that with :mod:`verifier.convert.torch_module`, and checks the
result against the TorchScript module itself. Hyper-parameters (slopes, clip bounds, ``eps``)
are attributes of scripted modules; traced modules inline them as constants of their single
aten call, where they are read from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from verifier.convert.torch_layers import apply_module, check_against_module, module_chain
from verifier.convert.unsupported import operator_hint
from verifier.network import Network, NetworkError


def _constant_argument(module: torch.jit.ScriptModule, op: str, position: int) -> tuple[bool, Any]:
    """``(True, value)`` when argument ``position`` of the first ``aten::<op>`` call in the
    module's graph is a constant (a traced module inlines its hyper-parameters so), else
    ``(False, None)``. The position is the schema's: ``aten::batch_norm``'s ``eps`` is argument
    7 whether or not its ``weight`` and ``bias`` are the constant ``None``."""
    for node in module.graph.nodes():
        if node.kind() == f"aten::{op}":
            arguments = list(node.inputs())
            if position < len(arguments) and arguments[position].node().kind() == "prim::Constant":
                return True, arguments[position].toIValue()
            break
    return False, None


def _attribute(module: torch.jit.ScriptModule, name: str, op: str, position: int) -> Any:
    """A hyper-parameter: the scripted attribute, else argument ``position`` of the traced
    ``aten::<op>`` call (:func:`_constant_argument`)."""
    try:
        return getattr(module, name)
    except AttributeError:
        found, value = _constant_argument(module, op, position)
    if not found:
        raise NetworkError(f"TorchScript {module.original_name}: no aten::{op} call with a "
                           f"constant argument {position} in its graph")
    return value


def _tensor(module: torch.jit.ScriptModule, name: str) -> torch.Tensor | None:
    value = getattr(module, name, None)
    return value.detach().clone() if isinstance(value, torch.Tensor) else None


def _linear(module: torch.jit.ScriptModule) -> torch.nn.Module:
    weight = _tensor(module, "weight")
    if weight is None or weight.ndim != 2:
        raise NetworkError("TorchScript Linear without a 2-D weight")
    bias = _tensor(module, "bias")
    linear = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    linear = linear.to(weight.dtype)
    with torch.no_grad():
        linear.weight.copy_(weight)
        if bias is not None:
            linear.bias.copy_(bias)
    return linear


def _leaky_relu(module: torch.jit.ScriptModule) -> torch.nn.Module:
    return torch.nn.LeakyReLU(float(_attribute(module, "negative_slope", "leaky_relu", 1)))


def _prelu(module: torch.jit.ScriptModule) -> torch.nn.Module:
    weight = _tensor(module, "weight")
    if weight is None:
        raise NetworkError("TorchScript PReLU without a weight")
    prelu = torch.nn.PReLU(weight.numel()).to(weight.dtype)
    with torch.no_grad():
        prelu.weight.copy_(weight.reshape(-1))
    return prelu


def _hardtanh(module: torch.jit.ScriptModule) -> torch.nn.Module:
    lower = float(_attribute(module, "min_val", "hardtanh", 1))
    upper = float(_attribute(module, "max_val", "hardtanh", 2))
    return torch.nn.Hardtanh(lower, upper)


def _flatten(module: torch.jit.ScriptModule) -> torch.nn.Module:
    start = int(_attribute(module, "start_dim", "flatten", 1))
    end = int(_attribute(module, "end_dim", "flatten", 2))
    return torch.nn.Flatten(start, end)


def _batch_norm(module: torch.jit.ScriptModule) -> torch.nn.Module:
    mean, variance = _tensor(module, "running_mean"), _tensor(module, "running_var")
    if mean is None or variance is None:
        raise NetworkError("TorchScript BatchNorm1d without running statistics")
    eps = float(_attribute(module, "eps", "batch_norm", 7))
    weight, bias = _tensor(module, "weight"), _tensor(module, "bias")
    norm = torch.nn.BatchNorm1d(mean.numel(), eps=eps, affine=weight is not None).to(mean.dtype)
    with torch.no_grad():
        norm.running_mean.copy_(mean)
        norm.running_var.copy_(variance)
        if weight is not None and bias is not None:
            norm.weight.copy_(weight)
            norm.bias.copy_(bias)
    return norm.eval()


def _softmax(module: torch.jit.ScriptModule) -> torch.nn.Module:
    dim = _attribute(module, "dim", "softmax", 1)
    return torch.nn.Softmax(None if dim is None else int(dim))


def _log_softmax(module: torch.jit.ScriptModule) -> torch.nn.Module:
    dim = _attribute(module, "dim", "log_softmax", 1)
    return torch.nn.LogSoftmax(None if dim is None else int(dim))


REBUILDERS: dict[str, Callable[[torch.jit.ScriptModule], torch.nn.Module]] = {
    "Linear": _linear,
    "ReLU": lambda module: torch.nn.ReLU(),
    "LeakyReLU": _leaky_relu,
    "PReLU": _prelu,
    "Hardtanh": _hardtanh,
    "ReLU6": lambda module: torch.nn.ReLU6(),
    "Identity": lambda module: torch.nn.Identity(),
    "Dropout": lambda module: torch.nn.Dropout().eval(),
    "Flatten": _flatten,
    "BatchNorm1d": _batch_norm,
    "Sigmoid": lambda module: torch.nn.Sigmoid(),
    "Softmax": _softmax,
    "LogSoftmax": _log_softmax,
}
"""Rebuilt ``torch.nn`` module per TorchScript class; the heads (``Sigmoid``, ``Softmax``,
``LogSoftmax``) are accepted only as the last module by the converter of the rebuilt model."""


TRAINING_ARGUMENT = {"Dropout": ("dropout", 2), "BatchNorm1d": ("batch_norm", 5)}
"""Per module class, its aten call and the position of the call's ``training`` argument."""


TORCH_NN_PREFIX = ("__torch__", "torch", "nn", "modules")
"""Where torch's own ``torch.nn`` classes live in TorchScript's qualified type names."""


def _qualified_name(module: torch.jit.ScriptModule) -> str:
    """The qualified name of the module's TorchScript type, without the ``___torch_mangle_N``
    parts TorchScript inserts to tell apart types of the same name."""
    parts = module._c._type().qualified_name().split(".")
    return ".".join(part for part in parts if not part.startswith("___torch_mangle_"))


def _torch_class_name(module: torch.jit.ScriptModule, name: str) -> str:
    """The ``torch.nn`` class the module was compiled from; a class of the same name defined
    elsewhere is an error naming its path and qualified name."""
    kind = module.original_name
    parts = _qualified_name(module).split(".")
    if tuple(parts[:len(TORCH_NN_PREFIX)]) != TORCH_NN_PREFIX or parts[-1] != kind:
        raise NetworkError(
            f"TorchScript module {kind} at {name or '<root>'!r} is the class "
            f"{_qualified_name(module).removeprefix('__torch__.')}, not torch.nn's own: its "
            "forward is not read from its name; script a torch.nn.Sequential of torch.nn "
            "layers, or export the model with torch.onnx.export")
    return kind


def rebuild(module: torch.jit.ScriptModule, name: str = "") -> torch.nn.Module:
    """Plain ``torch.nn`` modules equivalent to a TorchScript ``Sequential`` of supported
    ``torch.nn`` layers; any other class, or a class of a supported name not from
    ``torch.nn``, is an error naming it and its path."""
    kind = module.original_name
    if kind == "Sequential" or kind in REBUILDERS:
        kind = _torch_class_name(module, name)
    if kind == "Sequential":
        children = [
            rebuild(child, f"{name}.{child_name}" if name else child_name)
            for child_name, child in module.named_children()
        ]
        return torch.nn.Sequential(*children)
    rebuilder = REBUILDERS.get(kind)
    if rebuilder is None:
        raise NetworkError(
            f"unsupported TorchScript module {kind} at {name or '<root>'!r}; supported: "
            f"Sequential, {', '.join(REBUILDERS)}{operator_hint(kind)}"
        )
    if kind in TRAINING_ARGUMENT:
        op, position = TRAINING_ARGUMENT[kind]
        if module.training:
            raise NetworkError(f"TorchScript {kind} at {name!r} is in training mode")
        if _constant_argument(module, op, position) == (True, True):
            raise NetworkError(
                f"TorchScript {kind} at {name!r} was traced in training mode: its graph computes "
                "batch statistics or drops units whatever .eval() says afterwards; call "
                "model.eval() before torch.jit.trace")
    return rebuilder(module)


def from_torchscript(
    module: torch.jit.ScriptModule,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    *,
    verify: bool = True,
) -> Network:
    """Convert a TorchScript ``Sequential`` (scripted or traced) to the IR; with ``verify``
    the IR is checked against the TorchScript module on random inputs."""
    rebuilt = rebuild(module)
    chain = module_chain(module)
    apply_module(chain, rebuilt, "")
    network = chain.network(input_names, output_names)
    if verify:
        input_shape = chain.input_shape or (network.input_size,)
        check_against_module(network, module, input_shape, f"TorchScript {module.original_name}",
                             own_dtype=chain.rounded_scalars)
    return network
