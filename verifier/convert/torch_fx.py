"""``torch.fx.GraphModule`` to the IR, node by node.

This covers ``torch.export.export(model, ...).module()`` (aten ops; what MLflow's ``pt2``
format loads back as) and ``torch.fx.symbolic_trace`` graphs (torch functions, tensor methods
and ``call_module`` nodes of the modules :mod:`verifier.convert.torch_module` supports).

The graph must be a chain: one input, one output, and every operation on data reads the most
recent data tensor (no branches such as residual connections). Operations whose arguments are
all constants (weights, buffers, literals) are evaluated with torch, so ``t``/``permute`` of a
weight feeding ``addmm`` are folded. The batch size, which exported graphs read with
``sym_size``, is kept symbolic and may only be used as the leading size of ``view``/``reshape``.
A final ``sigmoid``, ``softmax`` or ``log_softmax`` over the outputs is the network's classifier
head; anywhere else it is an error naming its node.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.fx

from verifier.convert.affine_chain import (
    AffineChain,
    computed_magnitudes,
    counted,
    exact_product,
)
from verifier.convert.constant_folding import (
    Computed,
    Unreadable,
    computed_refusal,
    folded_result,
    rational_result,
)
from verifier.convert.torch_layers import (
    apply_module,
    check_against_module,
    flatten_features,
    module_chain,
    prelu_slopes,
)
from verifier.convert.unsupported import PRODUCT_HINT, SUM_HINT, operator_hint
from verifier.network import HeadName, Network, NetworkError


@dataclass(frozen=True)
class _Data:
    """The data tensor after ``version`` operations; ``shape`` is its per-sample shape."""

    version: int
    shape: tuple[int, ...] | None


class _BatchSize:
    """The symbolic batch size."""


BATCH = _BatchSize()
_MISSING = object()


@dataclass
class _Walk:
    chain: AffineChain
    data: _Data
    node: torch.fx.Node

    def take(self, value: Any) -> None:
        """Check that ``value`` is the current data tensor (the graph does not branch)."""
        if not isinstance(value, _Data):
            raise NetworkError(f"node {self.node.name!r}: expected the data tensor")
        if value.version != self.data.version:
            raise NetworkError(
                f"node {self.node.name!r} reads an earlier data tensor: the graph branches, "
                "and only chains of operations are supported"
            )

    def advance(self) -> _Data:
        self.data = _Data(self.data.version + 1, self.chain.shape)
        return self.data


Rule = Callable[[_Walk, tuple[Any, ...], dict[str, Any], bool], Any]


def _arg(
    args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str, default: Any = _MISSING
) -> Any:
    if index < len(args):
        return args[index]
    if name in kwargs:
        return kwargs[name]
    if default is _MISSING:
        raise NetworkError(f"missing argument {name!r}")
    return default


def _constant(value: Any, what: str) -> np.ndarray:
    """A constant argument as float64; a :class:`Computed` one as its rounded values (the
    rules mark those, :func:`_computed`), an :class:`Unreadable` one refused."""
    if isinstance(value, Computed):
        return value.value
    if isinstance(value, Unreadable):
        raise value.refusal(what)
    if isinstance(value, _Data):
        raise NetworkError(f"{what} must be a constant, but it depends on the input")
    if value is BATCH:
        raise NetworkError(f"{what} depends on the batch size")
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().to(torch.float64).numpy()
    if isinstance(value, bool | int | float):
        return np.asarray(float(value))
    raise NetworkError(f"{what} must be a number or a tensor, got {type(value).__name__}")


def _computed(value: Any) -> bool:
    """Whether a constant argument is :class:`Computed` (its float values rounded)."""
    return isinstance(value, Computed)


def _scalar(value: Any, what: str) -> float | None:
    """A scalar argument (a slope, a clamp bound, a factor); a :class:`Computed` one is
    refused: the IR holds these without a magnitude to mark a rounded value with."""
    if value is None:
        return None
    if isinstance(value, Computed):
        raise computed_refusal(what)
    array = _constant(value, what)
    if array.size != 1:
        raise NetworkError(f"{what} must be a scalar, got shape {array.shape}")
    return float(array.reshape(()))


_NUMPY_FLOATS: dict[torch.dtype, type[np.floating]] = {
    torch.float32: np.float32, torch.float64: np.float64}


def _computing_dtype(walk: _Walk) -> type[np.floating] | None:
    """The float type the current node computes in, from the export's metadata (a
    ``torch.export`` graph records it); ``None`` (the chain's type) where it is not recorded."""
    return _NUMPY_FLOATS.get(getattr(walk.node.meta.get("val"), "dtype", None))


def _kernel_scalar(walk: _Walk, value: Any, what: str) -> float | None:
    """A scalar argument (an activation's slope or clamp bound, ``alpha``/``beta``) as the
    kernel applies it: :func:`_scalar` rounded to the float type the node computes in
    (:meth:`AffineChain.kernel_scalar`)."""
    scalar = _scalar(value, what)
    return None if scalar is None else walk.chain.kernel_scalar(scalar, _computing_dtype(walk))


def _operand(walk: _Walk, value: Any, what: str) -> np.ndarray:
    """A constant operand of an element-wise node as its kernel applies it. torch converts a
    Python number, and a tensor without dimensions, to the float type the node computes in
    (neither takes part in type promotion against the data tensor): a float32 model's
    ``x * 0.1`` multiplies by float32(0.1) = 0.100000001490116…, and ``x / 2.9`` divides by
    float32(2.9), so those are the values read (:func:`_kernel_scalar`). A tensor with
    dimensions is read as it is: its type is at most the node's."""
    if isinstance(value, bool | int | float) or (
            isinstance(value, torch.Tensor) and value.ndim == 0):
        return np.asarray(_kernel_scalar(walk, value, what))
    return _constant(value, what)


# -- rules: each gets (walk, args, kwargs, is_aten) and returns the node's value ---------------


def _linear(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    weight = _constant(_arg(args, kwargs, 1, "weight"), "linear weight")
    bias = _arg(args, kwargs, 2, "bias", None)
    walk.chain.linear_last_dim(weight, None if bias is None else _constant(bias, "linear bias"),
                               computed_weight=_computed(_arg(args, kwargs, 1, "weight")),
                               computed_bias=_computed(bias))
    return walk.advance()


def _matmul(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    weight = _constant(args[1], "matmul weight")
    if weight.ndim != 2:
        raise NetworkError(f"node {walk.node.name!r}: matmul with a {weight.ndim}-D constant")
    walk.chain.linear_last_dim(weight.T, None, computed_weight=_computed(args[1]))
    return walk.advance()


def _addmm(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[1])
    bias = _constant(args[0], "addmm bias")
    weight = _constant(args[2], "addmm weight")
    beta = _kernel_scalar(walk, kwargs.get("beta", 1.0), "addmm beta")
    alpha = _kernel_scalar(walk, kwargs.get("alpha", 1.0), "addmm alpha")
    if weight.ndim != 2 or (bias.ndim > 1 and bias.shape[0] != 1):
        raise NetworkError(
            f"node {walk.node.name!r}: addmm needs a 2-D weight and a per-feature bias"
        )
    walk.chain.linear_last_dim(weight.T, bias.reshape(-1), alpha, beta,
                               computed_weight=_computed(args[2]), computed_bias=_computed(args[0]))
    return walk.advance()


def _add(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool, sign: float = 1.0) -> _Data:
    left, right = args[0], args[1]
    alpha = _kernel_scalar(walk, kwargs.get("alpha", 1.0), "alpha")
    if isinstance(left, _Data) and isinstance(right, _Data):
        raise NetworkError(
            f"node {walk.node.name!r} combines two data tensors{SUM_HINT}"
        )
    if isinstance(left, _Data):
        walk.take(left)
        shift, exact = exact_product(sign * alpha, _operand(walk, right, "added constant"))
        walk.chain.elementwise(1.0, shift, None,
                               computed_magnitudes(shift, exact & (not _computed(right))),
                               None if _computed(right) else counted(1, shift))
    else:
        walk.take(right)
        shift = _operand(walk, left, "added constant")
        walk.chain.elementwise(sign * alpha, shift, None, computed_magnitudes(
            shift, np.full(shift.shape, not _computed(left))))
    return walk.advance()


def _sub(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    return _add(walk, args, kwargs, is_aten, sign=-1.0)


def _rsub(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    return _add(walk, (args[1], args[0]), kwargs, is_aten, sign=-1.0)


def _mul(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    left, right = args[0], args[1]
    if isinstance(left, _Data) and isinstance(right, _Data):
        raise NetworkError(f"node {walk.node.name!r} multiplies two data tensors{PRODUCT_HINT}")
    data, factor = (left, right) if isinstance(left, _Data) else (right, left)
    walk.take(data)
    scale = _operand(walk, factor, "multiplier")
    walk.chain.elementwise(scale, 0.0, computed_magnitudes(
        scale, np.full(scale.shape, not _computed(factor))))
    return walk.advance()


def _div(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    if kwargs.get("rounding_mode") is not None:
        raise NetworkError(f"node {walk.node.name!r}: division with rounding is not affine")
    divisor = _operand(walk, args[1], "divisor")
    if np.any(divisor == 0):
        raise NetworkError(f"node {walk.node.name!r}: division by zero")
    walk.chain.divide(divisor, computed=_computed(args[1]))
    return walk.advance()


def _neg(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    walk.chain.elementwise(-1.0, 0.0)
    return walk.advance()


def _relu(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    walk.chain.relu()
    return walk.advance()


def _relu6(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    walk.chain.clip(0.0, 6.0)
    return walk.advance()


def _leaky_relu(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    slope = _kernel_scalar(walk, _arg(args, kwargs, 1, "negative_slope", 0.01), "negative_slope")
    if slope is None or not 0.0 <= slope <= 1.0:
        raise NetworkError(f"node {walk.node.name!r}: leaky_relu slope {slope} outside [0, 1]")
    walk.chain.leaky_relu(slope)
    return walk.advance()


def _prelu(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    weight = _arg(args, kwargs, 1, "weight")
    if _computed(weight):
        raise computed_refusal(f"node {walk.node.name!r}: prelu weight")
    prelu_slopes(walk.chain, _constant(weight, "prelu weight"), f"node {walk.node.name!r}")
    return walk.advance()


def _hardtanh(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    lower = _kernel_scalar(walk, _arg(args, kwargs, 1, "min_val", -1.0), "min_val")
    upper = _kernel_scalar(walk, _arg(args, kwargs, 2, "max_val", 1.0), "max_val")
    walk.chain.clip(lower, upper)
    return walk.advance()


def _clamp(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    lower = _kernel_scalar(walk, _arg(args, kwargs, 1, "min", None), "clamp min")
    upper = _kernel_scalar(walk, _arg(args, kwargs, 2, "max", None), "clamp max")
    walk.chain.clip(lower, upper)
    return walk.advance()


def _clamp_min(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    walk.chain.clip(_kernel_scalar(walk, _arg(args, kwargs, 1, "min"), "clamp min"), None)
    return walk.advance()


def _clamp_max(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    walk.chain.clip(None, _kernel_scalar(walk, _arg(args, kwargs, 1, "max"), "clamp max"))
    return walk.advance()


def _flatten(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    start = int(_arg(args, kwargs, 1, "start_dim", 0))
    end = int(_arg(args, kwargs, 2, "end_dim", -1))
    flatten_features(walk.chain, start, end, walk.node.name)
    return walk.advance()


def _reshape(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    if len(args) == 2 and isinstance(args[1], list | tuple):
        sizes = args[1]
    else:
        sizes = args[1:] or kwargs.get("shape", kwargs.get("size", ()))
    target: list[int | None] = []
    for size in sizes:
        if size is BATCH:
            target.append(None)
        elif isinstance(size, int):
            target.append(size)
        else:
            raise NetworkError(f"node {walk.node.name!r}: reshape size {size!r} is not a constant")
    walk.chain.reshape(walk.chain.resolve_reshape(target))
    return walk.advance()


def _unsqueeze(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    shape = walk.chain.shape
    if shape is None:
        raise NetworkError(f"node {walk.node.name!r}: unsqueeze of a tensor of unknown shape")
    dim = int(_arg(args, kwargs, 1, "dim")) % (len(shape) + 2)
    if dim == 0:
        raise NetworkError(f"node {walk.node.name!r}: unsqueeze before the batch dimension")
    walk.chain.reshape((*shape[: dim - 1], 1, *shape[dim - 1 :]))
    return walk.advance()


def _squeeze(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    shape = walk.chain.shape
    dims = _arg(args, kwargs, 1, "dim", None)
    if shape is None or dims is None:
        raise NetworkError(
            f"node {walk.node.name!r}: squeeze needs explicit dims and a known shape"
        )
    rank = len(shape) + 1
    drop = {int(dim) % rank for dim in (dims if isinstance(dims, list | tuple) else [dims])}
    if 0 in drop:
        raise NetworkError(f"node {walk.node.name!r}: squeeze of the batch dimension")
    kept = tuple(size for index, size in enumerate(shape, 1) if index not in drop or size != 1)
    walk.chain.reshape(kept or (1,))
    return walk.advance()


def _dropout(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    probability = float(_arg(args, kwargs, 1, "p", 0.5))
    train = _arg(args, kwargs, 2, "train" if is_aten else "training", not is_aten)
    if train and probability > 0:
        raise NetworkError(f"node {walk.node.name!r}: dropout in training mode; call model.eval()")
    return walk.data


def _identity(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    return walk.data


def _batch_norm(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    if is_aten:  # aten: input, weight, bias, running_mean, running_var, training, momentum, eps
        names = ("weight", "bias", "running_mean", "running_var", "training", "momentum", "eps")
    else:  # torch.nn.functional: input, running_mean, running_var, weight, bias, training, ...
        names = ("running_mean", "running_var", "weight", "bias", "training", "momentum", "eps")
    values = {name: _arg(args, kwargs, index, name, None) for index, name in enumerate(names, 1)}
    if values["training"] or values["running_mean"] is None:
        raise NetworkError(
            f"node {walk.node.name!r}: batch norm with batch statistics; call model.eval()"
        )
    eps = 1e-5 if values["eps"] is None else float(values["eps"])
    walk.chain.batch_norm(
        _constant(values["running_mean"], "running_mean"),
        _constant(values["running_var"], "running_var"),
        None if values["weight"] is None else _constant(values["weight"], "batch norm weight"),
        None if values["bias"] is None else _constant(values["bias"], "batch norm bias"),
        eps,
        f"node {walk.node.name!r}",
        computed=any(_computed(value) for value in values.values()),
    )
    return walk.advance()


def _batch_norm_no_training(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> tuple:
    """``_native_batch_norm_legit_no_training(input, weight, bias, mean, var, momentum, eps)``
    returns ``(output, save_mean, save_invstd)``; only the output is used."""
    walk.take(args[0])
    walk.chain.batch_norm(
        _constant(args[3], "running_mean"),
        _constant(args[4], "running_var"),
        None if args[1] is None else _constant(args[1], "batch norm weight"),
        None if args[2] is None else _constant(args[2], "batch norm bias"),
        float(_arg(args, kwargs, 6, "eps")),
        f"node {walk.node.name!r}",
        computed=any(_computed(value) for value in args[1:5]),
    )
    return (walk.advance(), None, None)


def _size(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> Any:
    data = args[0]
    if not isinstance(data, _Data):
        raise NetworkError(f"node {walk.node.name!r}: size of a constant should have been folded")
    dim = _arg(args, kwargs, 1, "dim", None)
    if data.shape is None:
        raise NetworkError(f"node {walk.node.name!r}: size of a tensor of unknown shape")
    sizes: list[Any] = [BATCH, *data.shape]
    if dim is None:
        return sizes
    return sizes[int(dim) % len(sizes)]


def _getattr(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> Any:
    """Attributes of the data tensor used to build constants: ``dtype`` is reported as
    float64 (the IR's precision), ``device`` as the CPU, ``shape``/``ndim`` per sample with a
    symbolic batch size."""
    data, name = args[0], args[1]
    if not isinstance(data, _Data):
        raise NetworkError(f"node {walk.node.name!r}: attribute of a constant should be folded")
    if name == "dtype":
        return torch.float64
    if name == "device":
        return torch.device("cpu")
    if name in ("shape", "ndim") and data.shape is not None:
        return [BATCH, *data.shape] if name == "shape" else len(data.shape) + 1
    raise NetworkError(f"node {walk.node.name!r}: attribute {name!r} of the data tensor")


def _getitem(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> Any:
    container, index = args
    if isinstance(container, tuple | list):
        return container[index]
    raise NetworkError(f"node {walk.node.name!r}: indexing the data tensor is not supported")


def _sigmoid(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
    walk.take(args[0])
    walk.chain.head("sigmoid", f"node {walk.node.name!r}")
    return walk.advance()


def _softmax_head(kind: HeadName) -> Rule:
    """``softmax``/``log_softmax`` (torch, tensor method, aten ``softmax.int`` and
    ``_softmax``) as the network's head; ``dim`` is argument 1."""

    def rule(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> _Data:
        walk.take(args[0])
        dim = _arg(args, kwargs, 1, "dim", None)
        walk.chain.head(kind, f"node {walk.node.name!r}", None if dim is None else int(dim))
        return walk.advance()

    return rule


def _no_op(walk: _Walk, args: tuple, kwargs: dict, is_aten: bool) -> None:
    """Runtime assertions of exported graphs: nothing to convert."""
    return None


FX_RULES: dict[str, Rule] = {
    "linear": _linear,
    "addmm": _addmm,
    "mm": _matmul,
    "matmul": _matmul,
    "add": _add,
    "iadd": _add,
    "sub": _sub,
    "isub": _sub,
    "rsub": _rsub,
    "mul": _mul,
    "imul": _mul,
    "div": _div,
    "truediv": _div,
    "itruediv": _div,
    "neg": _neg,
    "relu": _relu,
    "relu6": _relu6,
    "leaky_relu": _leaky_relu,
    "prelu": _prelu,
    "_prelu_kernel": _prelu,
    "hardtanh": _hardtanh,
    "clamp": _clamp,
    "clip": _clamp,
    "clamp_min": _clamp_min,
    "clamp_max": _clamp_max,
    "flatten": _flatten,
    "view": _reshape,
    "reshape": _reshape,
    "_unsafe_view": _reshape,
    "unsqueeze": _unsqueeze,
    "squeeze": _squeeze,
    "dropout": _dropout,
    "identity": _identity,
    "clone": _identity,
    "contiguous": _identity,
    "alias": _identity,
    "detach": _identity,
    "batch_norm": _batch_norm,
    "sigmoid": _sigmoid,
    "softmax": _softmax_head("softmax"),
    "_softmax": _softmax_head("softmax"),
    "log_softmax": _softmax_head("log_softmax"),
    "_log_softmax": _softmax_head("log_softmax"),
    "_native_batch_norm_legit_no_training": _batch_norm_no_training,
    "sym_size": _size,
    "size": _size,
    "getitem": _getitem,
    "getattr": _getattr,
    "_assert_tensor_metadata": _no_op,
    "_assert_scalar": _no_op,
    "sym_constrain_range_for_size": _no_op,
}


def _op_name(node: torch.fx.Node) -> tuple[str, bool]:
    """Canonical op name (``relu_`` → ``relu``) and whether it is an aten op."""
    target = node.target
    is_aten = isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket)
    if node.op == "call_method":
        name = str(target)
    elif isinstance(target, torch._ops.OpOverload):
        name = target._schema.name.split("::")[-1]
    elif isinstance(target, torch._ops.OpOverloadPacket):
        name = target._qualified_op_name.split("::")[-1]
    else:
        name = getattr(target, "__name__", str(target))
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    return name.strip("_") if name.startswith("__") else name, is_aten


def _contains(value: Any, kind: type | object) -> bool:
    if isinstance(value, list | tuple):
        return any(_contains(item, kind) for item in value)
    if isinstance(value, dict):
        return any(_contains(item, kind) for item in value.values())
    return value is kind if not isinstance(kind, type) else isinstance(value, kind)


def _foldable(node: torch.fx.Node) -> bool:
    """Only torch operators, torch functions and ``operator`` builtins are evaluated."""
    target = node.target
    if node.op == "call_method":
        return True
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return True
    module = getattr(target, "__module__", "") or ""
    return module.startswith("torch") or module == "_operator" or target in vars(operator).values()


COPYING_OPERATIONS = frozenset({
    "view", "reshape", "_unsafe_view", "t", "transpose", "permute", "expand", "expand_as",
    "clone", "detach", "contiguous", "alias", "to", "_to_copy", "unsqueeze", "squeeze",
    "flatten", "getitem", "select", "slice", "cat", "concat", "stack", "lift_fresh_copy",
    "lift_fresh", "float", "double", "type", "type_as", "zeros", "ones", "full", "tensor",
    "scalar_tensor", "arange", "zeros_like", "ones_like", "full_like", "repeat",
    "index_select", "narrow", "split", "chunk", "unbind", "flip", "size", "sym_size",
    "getattr",
})
"""Operations whose float results copy their inputs' values (or, for a dtype conversion,
round them as the operation defines): on the model's own constants they give its own."""

_FOLDED_NAMES = {"truediv": "div", "div": "div", "add": "add", "sub": "sub", "mul": "mul",
                 "neg": "neg", "reciprocal": "reciprocal", "sqrt": "sqrt", "rsqrt": "rsqrt"}


def _fold(node: torch.fx.Node, name: str, args: tuple, kwargs: dict) -> Any:
    """Evaluate a node on constants, keeping what a float result is in real arithmetic
    (:mod:`verifier.convert.constant_folding`): exact for a rational operation and a float64
    stand-in for a square root (:class:`Computed` where float64 cannot hold it), the graph's
    own for a copy of its own constants, :class:`Unreadable` otherwise."""
    if _contains((args, kwargs), BATCH):
        raise NetworkError(f"node {node.name!r} ({node.target}) computes with the batch size")
    if not _foldable(node):
        raise NetworkError(f"node {node.name!r}: cannot evaluate {node.target!r} on constants")
    plain_args, plain_kwargs = torch.fx.node.map_aggregate((args, kwargs), _plain)
    with torch.no_grad():
        if node.op == "call_method":
            result = getattr(plain_args[0], str(node.target))(*plain_args[1:], **plain_kwargs)
        else:
            result = node.target(*plain_args, **plain_kwargs)
    if not (isinstance(result, float) or (isinstance(result, torch.Tensor)
                                          and result.is_floating_point())):
        return result
    exact = _exact_fold(name, args, kwargs)
    if isinstance(exact, Computed):
        return exact
    if exact is not None:
        return torch.from_numpy(exact) if isinstance(result, torch.Tensor) else float(exact)
    derived = _contains((args, kwargs), Computed) or _contains((args, kwargs), Unreadable)
    if name in COPYING_OPERATIONS and not derived:
        return result
    return Unreadable(f"{name} node {node.name!r}", result)


def _plain(value: Any) -> Any:
    """A folded constant as the graph computed it (for operations on it: shapes, copies)."""
    if isinstance(value, Computed):
        return torch.from_numpy(value.value)
    return value.value if isinstance(value, Unreadable) else value


def _exact_fold(name: str, args: tuple, kwargs: dict) -> Any:
    """:func:`~verifier.convert.constant_folding.folded_result` of an fx arithmetic
    operation (``add``/``sub``'s ``alpha`` included, ``rsub`` reversed), or ``None``."""
    operator_name = _FOLDED_NAMES.get("sub" if name == "rsub" else name)
    if operator_name is None or kwargs.get("rounding_mode") is not None or (
            set(kwargs) - {"alpha"}):
        return None
    operands = list(args[::-1] if name == "rsub" else args)
    if "alpha" in kwargs and operator_name in ("add", "sub") and len(operands) == 2:
        operands[1] = rational_result("mul", [kwargs["alpha"], operands[1]])
        if operands[1] is None:
            return None
    return folded_result(operator_name, operands)


def _fetch_attr(module: torch.nn.Module, target: str) -> Any:
    value: Any = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _supported() -> str:
    return ", ".join(sorted(name for name in FX_RULES if not name.startswith("_")))


def _placeholder_shape(node: torch.fx.Node) -> tuple[tuple[int, ...] | None, int | None]:
    """Per-sample shape and fixed batch size (``None`` if symbolic) from export metadata."""
    value = node.meta.get("val")
    shape = getattr(value, "shape", None)
    if shape is None or len(shape) < 1:
        return None, None
    batch = shape[0] if isinstance(shape[0], int) else None
    rest = tuple(shape[1:])
    if not all(isinstance(size, int) for size in rest):
        return None, batch
    return tuple(int(size) for size in rest), batch


def from_graph_module(
    graph_module: torch.fx.GraphModule,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    *,
    input_shape: Sequence[int] | None = None,
    verify: bool = True,
) -> Network:
    """Convert a chain-shaped fx graph (see the module docstring) to the IR.

    ``input_shape`` (per sample) is taken from the export metadata when present. With
    ``verify`` the IR is checked against the graph module on random inputs (float64 when the
    graph runs in float64, else in its own dtype).
    """
    placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    if len(placeholders) != 1:
        raise NetworkError(
            f"the graph has {len(placeholders)} inputs "
            f"({', '.join(node.name for node in placeholders)}); exactly one is supported"
        )
    meta_shape, batch_size = _placeholder_shape(placeholders[0])
    shape = tuple(input_shape) if input_shape is not None else meta_shape
    chain = module_chain(graph_module, shape,
                         getattr(placeholders[0].meta.get("val"), "dtype", None))
    walk = _Walk(chain, _Data(0, chain.shape), placeholders[0])
    values: dict[torch.fx.Node, Any] = {}
    result: Any = _MISSING
    for node in graph_module.graph.nodes:
        walk.node = node
        if node.op == "placeholder":
            values[node] = walk.data
        elif node.op == "get_attr":
            values[node] = _fetch_attr(graph_module, str(node.target))
        elif node.op == "output":
            result = torch.fx.node.map_arg(node.args[0], values.__getitem__)
        else:
            values[node] = _convert_node(walk, node, graph_module, values)
    outputs = list(result) if isinstance(result, list | tuple) else [result]
    if len(outputs) != 1 or not isinstance(outputs[0], _Data):
        raise NetworkError("the graph must return exactly one tensor computed from its input")
    walk.take(outputs[0])
    network = chain.network(input_names, output_names)
    if verify:
        check_against_module(
            network,
            graph_module,
            chain.input_shape or (network.input_size,),
            "torch fx graph",
            batch_size=batch_size,
            own_dtype=chain.rounded_scalars,
        )
    return network


def _convert_node(
    walk: _Walk,
    node: torch.fx.Node,
    graph_module: torch.fx.GraphModule,
    values: dict[torch.fx.Node, Any],
) -> Any:
    args = tuple(torch.fx.node.map_arg(node.args, values.__getitem__))
    kwargs = dict(torch.fx.node.map_arg(node.kwargs, values.__getitem__))
    if node.op == "call_module":
        submodule = graph_module.get_submodule(str(node.target))
        if type(submodule).__name__ == "GuardsFn":
            return None
        if len(args) != 1 or kwargs:
            raise NetworkError(f"node {node.name!r}: module call with several arguments")
        walk.take(args[0])
        apply_module(walk.chain, submodule, str(node.target))
        return walk.advance()
    name, is_aten = _op_name(node)
    if not _contains((args, kwargs), _Data):
        if name in ("_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size"):
            return None
        return _fold(node, name, args, kwargs)
    rule = FX_RULES.get(name)
    if rule is None:
        raise NetworkError(
            f"unsupported operation {name!r} at node {node.name!r}; supported on the data "
            f"tensor: {_supported()}, and modules of verifier.convert.torch_module"
            f"{operator_hint(name)}"
        )
    try:
        return rule(walk, args, kwargs, is_aten)
    except NetworkError as error:
        message = str(error)
        if node.name in message:
            raise
        raise NetworkError(f"node {node.name!r} ({name}): {message}") from error
