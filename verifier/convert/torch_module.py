"""``torch.nn`` models to the IR: ``Sequential`` containers (nested allowed) of supported layers.

Supported modules: ``Linear``, ``ReLU``, ``LeakyReLU`` (and the IR's own
``PerNeuronLeakyReLU``), ``PReLU`` (slopes in [0, 1]), ``Hardtanh`` (``ReLU6`` is
``hardtanh(0, 6)``), ``Identity``, ``Flatten``, ``Dropout`` (identity in eval mode) and
``BatchNorm1d`` in eval mode (folded into the neighbouring affine maps), and as the last
module only, a classifier head ``Sigmoid``, ``Softmax`` or ``LogSoftmax`` over the outputs
(recorded as the network's ``head``; elsewhere they are an error naming the module). ``torch.fx``
graph modules (what ``torch.export`` and MLflow's ``pt2`` format give back) and TorchScript
modules are dispatched to :mod:`verifier.convert.torch_fx` and
:mod:`verifier.convert.torchscript`. Any other module is an error naming it; a custom module
can still be converted when its input shape is given, through ``torch.export``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from verifier.convert.self_check import assert_agrees
from verifier.convert.torch_fx import from_graph_module
from verifier.convert.torch_layers import (
    MODULE_RULES,
    SUPPORTED_MODULES,
    apply_module,
    check_against_module,
    module_chain,
    parameter_dtype,
    torch_source,
)
from verifier.convert.torchscript import from_torchscript
from verifier.network import Network, NetworkError


def _shape_tuple(input_shape: int | Sequence[int] | None) -> tuple[int, ...] | None:
    if input_shape is None:
        return None
    if isinstance(input_shape, int):
        return (input_shape,)
    return tuple(int(size) for size in input_shape)


def needs_export(module: torch.nn.Module) -> bool:
    """Whether :func:`from_torch` converts ``module`` through ``torch.export`` (and so needs
    its per-sample input shape): anything but a TorchScript module, an fx graph, a
    ``Sequential`` or one supported layer — e.g. a module whose ``forward`` standardises its
    input first."""
    return not (isinstance(module, torch.jit.ScriptModule | torch.fx.GraphModule)
                or type(module) is torch.nn.Sequential or type(module) in MODULE_RULES)


def from_torch(
    module: torch.nn.Module,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    *,
    input_shape: int | Sequence[int] | None = None,
    verify: bool = True,
) -> Network:
    """Convert a torch model to the IR.

    ``module`` is a ``Sequential`` of the supported layers (or one such layer), a
    ``torch.fx.GraphModule`` (e.g. ``torch.export.export(...).module()``), or a TorchScript
    module. Another module is converted through ``torch.export`` when ``input_shape`` (the
    per-sample input shape) is given, and rejected otherwise. ``input_shape`` is also needed
    when a ``Sequential`` starts with layers that do not fix the input width (an activation).

    With ``verify`` the result is checked against the module on random inputs (see
    :mod:`verifier.convert.self_check`); a disagreement raises :class:`NetworkError`.
    """

    shape = _shape_tuple(input_shape)
    if isinstance(module, torch.jit.ScriptModule):
        return from_torchscript(module, input_names, output_names, verify=verify)
    if isinstance(module, torch.fx.GraphModule):
        return from_graph_module(
            module, input_names, output_names, input_shape=shape, verify=verify
        )
    if needs_export(module):
        if shape is None:
            raise NetworkError(
                f"cannot convert a {type(module).__name__}: only torch.nn.Sequential containers "
                f"of {', '.join(SUPPORTED_MODULES[1:])} are converted directly; pass "
                "input_shape=... to convert it through torch.export"
            )
        return _from_export(module, shape, input_names, output_names, verify)
    chain = module_chain(module, shape)
    apply_module(chain, module, "")
    network = chain.network(input_names, output_names)
    if verify:
        input_shape = chain.input_shape or (network.input_size,)
        check_against_module(network, module, input_shape, f"torch {type(module).__name__}",
                             own_dtype=chain.rounded_scalars)
    return network


def _from_export(
    module: torch.nn.Module,
    shape: tuple[int, ...],
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None,
    verify: bool,
) -> Network:
    if module.training:
        raise NetworkError(
            f"{type(module).__name__} is in training mode; call model.eval() before converting"
        )
    example = torch.zeros((2, *shape), dtype=parameter_dtype(module))
    dynamic = {0: torch.export.Dim.AUTO}
    try:
        exported = torch.export.export(module, (example,), dynamic_shapes=(dynamic,))
    except (RuntimeError, TypeError, ValueError) as error:
        raise NetworkError(
            f"torch.export could not trace {type(module).__name__}: {error}"
        ) from error
    _refuse_batch_guards(exported, type(module).__name__)
    network = from_graph_module(
        exported.module(), input_names, output_names, input_shape=shape, verify=verify
    )
    if verify:
        assert_agrees(network, torch_source(module), shape,
                      torch.empty(0, dtype=parameter_dtype(module)).numpy().dtype,
                      f"torch {type(module).__name__} run one row at a time", batch_size=1)
    return network


def _refuse_batch_guards(exported: torch.export.ExportedProgram, kind: str) -> None:
    """Refuse a module whose ``forward`` branches on the batch size.

    certgate certifies one function of each row; a branch on ``x.shape[0]`` makes the class of
    a row depend on the rows served with it. ``torch.export`` traces one branch and records the
    batch sizes it holds for: anything narrower than ``[2, ∞)`` (its default, batch sizes 0 and
    1 being specialised) is such a branch. A branch on batch size 1 itself is invisible to the
    trace; :func:`_from_export` catches it by checking the module one row at a time."""
    inputs = [node for node in exported.graph.nodes if node.op == "placeholder"
              and node.name in exported.graph_signature.user_inputs]
    size = inputs[0].meta["val"].shape[0]
    if isinstance(size, torch.SymInt):
        bounds = exported.range_constraints.get(size.node.expr)
        lower, upper = (2.0, math.inf) if bounds is None else (float(bounds.lower),
                                                                float(bounds.upper))
    else:
        lower = upper = float(size)
    if lower > 2 or math.isfinite(upper):
        raise NetworkError(
            f"the forward of {kind} depends on the batch size: torch.export traced it for "
            f"batch sizes {lower:g} to {upper:g} only, so a row's class would depend on the "
            "rows served with it; certgate certifies a model that computes each row alike "
            "at every batch size"
        )
