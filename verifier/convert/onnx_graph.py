"""ONNX graphs (opset 8 to 23) to the IR.

Supported ops on the data tensor: Gemm, MatMul (with a constant right operand), Add, Sub, Mul,
Div by constants (scalar or per-feature), Neg, Relu, LeakyRelu, PRelu (constant slopes in [0, 1]),
Clip (both bounds: hardtanh; one bound: a shifted ReLU), Max/Min of the data and one constant
bound (a one-sided clip), Flatten, Reshape and Squeeze/Unsqueeze
(explicit axes) that keep the batch dimension, Identity, Dropout (inference), BatchNormalization
(inference), MaxPool (exactly, as ReLU layers: see :meth:`AffineChain.window_max`), and Cast or
CastLike of the data to its own type (the identity: the torch.export-based exporter writes them
unoptimised); and
as the last operation only (reshapes aside, Squeeze included), a classifier head Sigmoid, Softmax
or LogSoftmax over the outputs, recorded as the network's ``head`` (elsewhere an error naming
its node). Nodes whose inputs are all constants (``Constant``, shape arithmetic, transposed
weights) are evaluated with the ONNX reference implementation, and ``CastLike`` of a constant to
the data tensor's type is that constant cast to the model's float type; ``Shape`` of the data tensor
reports a batch size of 1, which is exact for the per-sample IR and checked against the source
by the self-check.

Initializers may also be listed as graph inputs (IR version 3 files such as the ACAS Xu
networks): the model input is the one graph input without an initializer.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import helper, numpy_helper

from verifier.convert.affine_chain import AffineChain, computed_magnitudes
from verifier.convert.constant_folding import (
    Computed,
    Unreadable,
    computed_refusal,
    folded_result,
)
from verifier.convert.self_check import assert_agrees
from verifier.convert.unsupported import PRODUCT_HINT, SUM_HINT, operator_hint
from verifier.network import Network, NetworkError

MIN_OPSET = 8
MAX_OPSET = 23
INPUT_NAMES_KEY = "certgate.input_names"
OUTPUT_NAMES_KEY = "certgate.output_names"
_DTYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64}
FLOAT_ATTRIBUTE = np.float32
"""An ONNX float attribute is a float32, its default too: an absent LeakyRelu ``alpha`` is
float32(0.01) and an absent BatchNormalization ``epsilon`` float32(1e-5) in the runtimes'
kernels, in float64 graphs as well."""


@dataclass(frozen=True)
class _Data:
    """The data tensor after ``version`` operations."""

    version: int


@dataclass
class _Walk:
    chain: AffineChain
    data: _Data
    node: onnx.NodeProto
    opset: int
    values: dict[str, Any]
    dtype: np.dtype
    """The float type of the data tensor: the model input's (a cast to another is refused)."""
    computed: dict[str, Computed] = field(default_factory=dict)
    """The float constants the graph computes from others (rational arithmetic, roots) where
    float64 cannot hold them (:func:`_fold_constants`): their float values in :attr:`values`
    are rounded stand-ins, marked wherever used."""
    unreadable: dict[str, Unreadable] = field(default_factory=dict)
    """Float constants computed by other operators (a square root, a copy of a computed
    constant), refused wherever read."""
    graph_dtypes: dict[str, np.dtype] = field(default_factory=dict)
    """The graph's type of each folded constant whose :attr:`values` entry is a float64
    exact value or stand-in (:func:`_fold_constants`), for evaluating the nodes that read it."""

    @property
    def where(self) -> str:
        return f"{self.node.op_type} node {self.node.name or self.node.output[0]!r}"

    def input(self, index: int) -> Any:
        """Value of input ``index``, ``None`` for an absent optional input."""
        if index >= len(self.node.input) or not self.node.input[index]:
            return None
        name = self.node.input[index]
        if name not in self.values:
            raise NetworkError(f"{self.where}: input {name!r} is not computed by the graph")
        if name in self.unreadable:
            raise self.unreadable[name].refusal(f"{self.where}: input {name!r}")
        return self.values[name]

    def constant(self, index: int, what: str) -> np.ndarray:
        value = self.input(index)
        if not isinstance(value, np.ndarray):
            raise NetworkError(f"{self.where}: {what} must be a constant")
        return value

    def is_computed(self, index: int) -> bool:
        """Whether input ``index`` is a float constant whose float value rounds the real value
        the graph computes (:attr:`computed`)."""
        return index < len(self.node.input) and self.node.input[index] in self.computed

    def own_constant(self, index: int, what: str) -> np.ndarray:
        """:meth:`constant`, refused when computed: for a slope or a clamp bound, which the
        IR holds without a magnitude to mark a rounded value with."""
        if self.is_computed(index):
            raise computed_refusal(f"{self.where}: {what}")
        return self.constant(index, what)

    def take(self, value: Any) -> None:
        if not isinstance(value, _Data):
            raise NetworkError(f"{self.where}: expected the data tensor")
        if value.version != self.data.version:
            raise NetworkError(
                f"{self.where} reads an earlier data tensor: the graph branches, and only "
                "chains of operations are supported"
            )

    def advance(self) -> _Data:
        self.data = _Data(self.data.version + 1)
        return self.data

    def attribute(self, name: str, default: Any) -> Any:
        for attribute in self.node.attribute:
            if attribute.name == name:
                return helper.get_attribute_value(attribute)
        return default


Rule = Callable[[_Walk], Any]


def _float(array: np.ndarray) -> np.ndarray:
    return np.asarray(array, dtype=np.float64)


def _gemm(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    if walk.attribute("transA", 0):
        raise NetworkError(f"{walk.where}: transA=1 on the data tensor is not supported")
    shape = walk.chain.shape
    if shape is not None and len(shape) != 1:
        raise NetworkError(f"{walk.where}: Gemm on a tensor of per-sample shape {shape}")
    matrix = _float(walk.constant(1, "B"))
    if matrix.ndim != 2:
        raise NetworkError(f"{walk.where}: B must be 2-D, got shape {matrix.shape}")
    weight = matrix if walk.attribute("transB", 0) else matrix.T
    alpha = float(walk.attribute("alpha", 1.0))
    beta = float(walk.attribute("beta", 1.0))
    bias_value = walk.input(2)
    bias = None
    if bias_value is not None:
        bias_array = _float(walk.constant(2, "C"))
        if bias_array.size not in (1, weight.shape[0]):
            raise NetworkError(f"{walk.where}: C of shape {bias_array.shape} is not per-feature")
        bias = np.broadcast_to(bias_array.reshape(-1), (weight.shape[0],))
    walk.chain.linear_last_dim(weight, bias, alpha, beta, computed_weight=walk.is_computed(1),
                               computed_bias=walk.is_computed(2))
    return walk.advance()


def _matmul(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    matrix = _float(walk.constant(1, "the right operand"))
    if matrix.ndim != 2:
        raise NetworkError(f"{walk.where}: the constant operand must be 2-D, got {matrix.shape}")
    walk.chain.linear_last_dim(matrix.T, None, computed_weight=walk.is_computed(1))
    return walk.advance()


def _binary(walk: _Walk) -> tuple[np.ndarray | None, np.ndarray, bool]:
    """(the constant's magnitudes, the constant, data_first) for a binary element-wise node;
    the magnitudes are ``None`` for the model's own constant, :func:`computed_magnitudes`
    for a computed one."""
    left, right = walk.input(0), walk.input(1)
    if isinstance(left, _Data) and isinstance(right, _Data):
        raise NetworkError(
            f"{walk.where} combines two data tensors: only chains of operations are supported"
            + {"Mul": PRODUCT_HINT, "Add": SUM_HINT, "Sub": SUM_HINT}.get(walk.node.op_type, "")
        )
    data_first = isinstance(left, _Data)
    walk.take(left if data_first else right)
    constant = _float(right if data_first else left)
    computed = walk.is_computed(1 if data_first else 0)
    return (computed_magnitudes(constant, np.zeros(constant.shape, dtype=bool)) if computed
            else None), constant, data_first


def _add(walk: _Walk) -> _Data:
    magnitude, constant, _ = _binary(walk)
    walk.chain.elementwise(1.0, constant, None, magnitude)
    return walk.advance()


def _sub(walk: _Walk) -> _Data:
    magnitude, constant, data_first = _binary(walk)
    if data_first:
        walk.chain.elementwise(1.0, -constant, None, magnitude)
    else:
        walk.chain.elementwise(-1.0, constant, None, magnitude)
    return walk.advance()


def _mul(walk: _Walk) -> _Data:
    magnitude, constant, _ = _binary(walk)
    walk.chain.elementwise(constant, 0.0, magnitude)
    return walk.advance()


def _div(walk: _Walk) -> _Data:
    magnitude, constant, data_first = _binary(walk)
    if not data_first:
        raise NetworkError(f"{walk.where}: dividing by the data tensor is not affine")
    if np.any(constant == 0):
        raise NetworkError(f"{walk.where}: division by zero")
    walk.chain.divide(constant, computed=magnitude is not None)
    return walk.advance()


def _neg(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    walk.chain.elementwise(-1.0, 0.0)
    return walk.advance()


def _cast(walk: _Walk) -> _Data | np.ndarray:
    """``Cast`` (``to``) or ``CastLike`` (the second input's type) of the data tensor: the
    identity when the type is the data's own, refused otherwise (a cast rounds the data).
    ``CastLike`` of a constant to the data tensor is that constant in the data's type, rounded
    as the operator defines: the model's own constant (a computed one is refused, as any copy
    of it would be); a constant the graph computed exactly in the data's type is kept exact."""
    source = walk.input(0)
    if not isinstance(source, _Data):
        if walk.is_computed(0):
            raise computed_refusal(f"{walk.where}: the constant it casts")
        if walk.graph_dtypes.get(walk.node.input[0]) == walk.dtype:
            walk.graph_dtypes[walk.node.output[0]] = walk.dtype
            return source
        return np.asarray(source).astype(walk.dtype)
    walk.take(source)
    if walk.node.op_type == "Cast":
        target = _DTYPES.get(int(walk.attribute("to", 0)))
    else:
        like = walk.input(1)
        target = walk.dtype.type if isinstance(like, _Data) else like.dtype.type
    if target is not walk.dtype.type:
        raise NetworkError(
            f"{walk.where}: casts the {walk.dtype} data tensor to another type"
            f"{operator_hint('Cast')}")
    return walk.data


def _relu(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    walk.chain.relu()
    return walk.advance()


def _leaky_relu(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    slope = float(walk.attribute("alpha", FLOAT_ATTRIBUTE(0.01)))
    if not 0.0 <= slope <= 1.0:
        raise NetworkError(f"{walk.where}: alpha {slope} is outside [0, 1]")
    walk.chain.leaky_relu(slope)
    return walk.advance()


def _prelu(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    slopes = _float(walk.own_constant(1, "slope"))
    if not np.all((slopes >= 0.0) & (slopes <= 1.0)):
        raise NetworkError(f"{walk.where}: slopes must lie in [0, 1]")
    if slopes.size == 1:
        walk.chain.leaky_relu(float(slopes.reshape(-1)[0]))
    else:
        walk.chain.leaky_relu(slopes)
    return walk.advance()


def _clip(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    if walk.opset < 11:
        lower = float(walk.attribute("min", -math.inf))
        upper = float(walk.attribute("max", math.inf))
    else:
        lower_value, upper_value = walk.input(1), walk.input(2)
        lower = None if lower_value is None else float(walk.own_constant(1, "min").reshape(()))
        upper = None if upper_value is None else float(walk.own_constant(2, "max").reshape(()))
    walk.chain.clip(lower, upper)
    return walk.advance()


def _max_min(walk: _Walk) -> _Data:
    """``Max``/``Min`` of the data tensor and one constant whose entries are all equal (what
    ``torch.maximum(x, torch.zeros_like(x))`` and an unoptimised float64 ``clamp`` export
    to): a clip with that one bound, exact. Other forms are refused naming the node."""
    if len(walk.node.input) != 2:
        raise NetworkError(f"{walk.where}: only the data tensor and one constant are read")
    left, right = walk.input(0), walk.input(1)
    if isinstance(left, _Data) and isinstance(right, _Data):
        raise NetworkError(f"{walk.where} combines two data tensors{SUM_HINT}")
    index = 1 if isinstance(left, _Data) else 0
    walk.take(left if index == 1 else right)
    bound = _float(walk.own_constant(index, "bound")).reshape(-1)
    if bound.size == 0 or np.any(bound != bound[0]):
        raise NetworkError(f"{walk.where}: a bound that differs between entries is not read")
    if walk.node.op_type == "Max":
        walk.chain.clip(float(bound[0]), None)
    else:
        walk.chain.clip(None, float(bound[0]))
    return walk.advance()


def _flatten(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    shape = walk.chain.shape
    axis = int(walk.attribute("axis", 1))
    if shape is not None:
        axis %= len(shape) + 1
    if axis != 1:
        raise NetworkError(f"{walk.where}: Flatten with axis {axis} would merge the batch")
    walk.chain.reshape((walk.chain.width,))
    return walk.advance()


def _reshape(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    target = [int(size) for size in walk.constant(1, "shape").reshape(-1)]
    if walk.attribute("allowzero", 0) and 0 in target:
        raise NetworkError(f"{walk.where}: allowzero reshape to a zero-size dimension")
    walk.chain.reshape(walk.chain.resolve_reshape(target))
    return walk.advance()


def _axes(walk: _Walk) -> tuple[tuple[int, ...], list[int]]:
    """The per-sample shape reaching a Squeeze/Unsqueeze and its ``axes`` (an attribute
    before opset 13, a constant input from 13 on) as given, batch dimension 0 included;
    refused for an unknown shape or when absent (a Squeeze without axes would drop a batch of
    size 1)."""
    walk.take(walk.input(0))
    shape = walk.chain.shape
    axes = walk.attribute("axes", None) if walk.opset < 13 else (
        None if walk.input(1) is None else walk.constant(1, "axes"))
    if shape is None or axes is None:
        raise NetworkError(f"{walk.where}: needs explicit axes and a known shape")
    return shape, [int(axis) for axis in np.asarray(axes).reshape(-1)]


def _non_batch(walk: _Walk, axes: list[int], rank: int) -> set[int]:
    chosen = {axis % rank for axis in axes}
    if 0 in chosen:
        raise NetworkError(f"{walk.where}: acts on the batch dimension")
    return chosen


def _squeeze(walk: _Walk) -> _Data:
    """Drop size-1 feature dimensions (a single-logit head's ``squeeze(-1)``): a relabelling;
    a squeeze to no feature dimension keeps one feature."""
    shape, axes = _axes(walk)
    drop = _non_batch(walk, axes, len(shape) + 1)
    if any(shape[axis - 1] != 1 for axis in drop):
        raise NetworkError(f"{walk.where}: squeezes a dimension of size other than 1 in {shape}")
    walk.chain.reshape(
        tuple(size for axis, size in enumerate(shape, 1) if axis not in drop) or (1,))
    return walk.advance()


def _unsqueeze(walk: _Walk) -> _Data:
    """Insert size-1 feature dimensions: a relabelling."""
    shape, axes = _axes(walk)
    rank = len(shape) + 1 + len(axes)
    inserted = _non_batch(walk, axes, rank)
    sizes = iter(shape)
    walk.chain.reshape(tuple(1 if axis in inserted else next(sizes) for axis in range(1, rank)))
    return walk.advance()


def _identity(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    return walk.data


def _dropout(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    training = walk.input(2)
    if training is not None and (not isinstance(training, np.ndarray) or bool(training)):
        raise NetworkError(f"{walk.where}: dropout in training mode")
    if walk.opset < 7 and not walk.attribute("is_test", 0):
        raise NetworkError(f"{walk.where}: dropout in training mode (is_test=0)")
    return walk.data


def _batch_normalization(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    if walk.attribute("training_mode", 0) or sum(bool(name) for name in walk.node.output) > 1:
        raise NetworkError(f"{walk.where}: batch normalisation in training mode")
    scale, bias, mean, variance = (
        _float(walk.constant(index, name))
        for index, name in enumerate(("scale", "B", "mean", "var"), 1)
    )
    if walk.opset < 9 and walk.attribute("spatial", 1) == 0:
        raise NetworkError(f"{walk.where}: spatial=0 batch normalisation is not supported")
    eps = float(walk.attribute("epsilon", FLOAT_ATTRIBUTE(1e-5)))
    walk.chain.batch_norm(mean, variance, scale, bias, eps, walk.where,
                          computed=any(walk.is_computed(index) for index in range(1, 5)))
    return walk.advance()


def _max_pool(walk: _Walk) -> _Data:
    """MaxPool without indices output, ``ceil_mode=0`` and explicit or no padding (padding
    never wins a maximum, so padded positions are left out of their windows)."""
    walk.take(walk.input(0))
    if len(walk.node.output) > 1 and walk.node.output[1]:
        raise NetworkError(f"{walk.where}: the Indices output is not supported")
    if walk.attribute("ceil_mode", 0) or walk.attribute("auto_pad", b"NOTSET") not in (
        b"NOTSET",
        b"VALID",
        "NOTSET",
        "VALID",
    ):
        raise NetworkError(f"{walk.where}: only ceil_mode=0 with explicit or no padding")
    shape = walk.chain.shape
    kernel = [int(size) for size in walk.attribute("kernel_shape", [])]
    if shape is None or len(shape) != len(kernel) + 1:
        raise NetworkError(f"{walk.where}: kernel {kernel} does not fit per-sample shape {shape}")
    spatial = shape[1:]
    rank = len(kernel)
    strides = [int(value) for value in walk.attribute("strides", [1] * rank)]
    dilations = [int(value) for value in walk.attribute("dilations", [1] * rank)]
    pads = [int(value) for value in walk.attribute("pads", [0] * (2 * rank))]
    out_dims = [
        (spatial[axis] + pads[axis] + pads[axis + rank] - dilations[axis] * (kernel[axis] - 1) - 1)
        // strides[axis]
        + 1
        for axis in range(rank)
    ]
    if any(size <= 0 for size in out_dims):
        raise NetworkError(f"{walk.where}: the pooling output would be empty")
    offsets = list(itertools.product(*(range(size) for size in kernel)))
    windows = []
    for channel in range(shape[0]):
        for position in itertools.product(*(range(size) for size in out_dims)):
            window = []
            for offset in offsets:
                point = [
                    position[axis] * strides[axis] - pads[axis] + offset[axis] * dilations[axis]
                    for axis in range(rank)
                ]
                if all(0 <= point[axis] < spatial[axis] for axis in range(rank)):
                    window.append(int(np.ravel_multi_index((channel, *point), shape)))
            windows.append(window)
    walk.chain.window_max(windows, (shape[0], *out_dims))
    return walk.advance()


def _sigmoid(walk: _Walk) -> _Data:
    walk.take(walk.input(0))
    walk.chain.head("sigmoid", walk.where)
    return walk.advance()


def _softmax(walk: _Walk) -> _Data:
    """``Softmax``/``LogSoftmax`` as the network's head. Before opset 13 the input is coerced
    to 2-D at ``axis`` (default 1); from 13 on ``axis`` (default -1) is one dimension: on a
    ``(batch, outputs)`` tensor both mean the outputs."""
    walk.take(walk.input(0))
    kind = "softmax" if walk.node.op_type == "Softmax" else "log_softmax"
    axis = int(walk.attribute("axis", 1 if walk.opset < 13 else -1))
    walk.chain.head(kind, walk.where, axis)
    return walk.advance()


def _shape(walk: _Walk) -> np.ndarray:
    data = walk.input(0)
    if not isinstance(data, _Data):
        raise NetworkError(f"{walk.where}: expected the data tensor")
    shape = walk.chain.shape
    if data.version != walk.data.version or shape is None:
        raise NetworkError(f"{walk.where}: shape of an earlier or unknown-shape tensor")
    full = np.array([1, *shape], dtype=np.int64)
    start = int(walk.attribute("start", 0))
    end = walk.attribute("end", None)
    return full[start:end]


ONNX_RULES: dict[str, Rule] = {
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Add": _add,
    "Sub": _sub,
    "Mul": _mul,
    "Div": _div,
    "Neg": _neg,
    "Cast": _cast,
    "CastLike": _cast,
    "Relu": _relu,
    "LeakyRelu": _leaky_relu,
    "PRelu": _prelu,
    "Clip": _clip,
    "Max": _max_min,
    "Min": _max_min,
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Identity": _identity,
    "Dropout": _dropout,
    "BatchNormalization": _batch_normalization,
    "MaxPool": _max_pool,
    "Sigmoid": _sigmoid,
    "Softmax": _softmax,
    "LogSoftmax": _softmax,
    "Shape": _shape,
}


def _load(model: str | Path | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    if not path.is_file():
        raise NetworkError(f"ONNX file not found: {path}")
    try:
        return onnx.load(str(path))
    except (DecodeError, OSError, ValueError, onnx.checker.ValidationError) as error:
        # ValidationError: an external data location outside the model's directory
        raise NetworkError(f"cannot read ONNX file {path}: {error}") from error


def external_data_files(path: Path) -> list[Path]:
    """The files beside the ONNX model ``path`` that hold its external tensors (the default
    torch exporter writes ``model.onnx.data`` for every tensor above a few hundred bytes), in
    order, each once. Only regular files inside the model's directory are listed: a location
    outside it, or missing, is the model read's error to report (onnx refuses it), and an
    unreadable model lists none."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, OSError, ValueError):
        return []
    tensors = [*model.graph.initializer, *(
        attribute.t for node in model.graph.node for attribute in node.attribute
        if attribute.type == onnx.AttributeProto.TENSOR)]
    locations = [entry.value for tensor in tensors
                 if tensor.data_location == onnx.TensorProto.EXTERNAL
                 for entry in tensor.external_data if entry.key == "location"]
    base = path.parent.resolve()
    return [path.parent / location for location in dict.fromkeys(locations)
            if (path.parent / location).resolve().is_relative_to(base)
            and (path.parent / location).is_file()]


def _default_opset(model: onnx.ModelProto) -> int:
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return int(opset.version)
    raise NetworkError("the ONNX model imports no default-domain opset")


def _input_shape(value: onnx.ValueInfoProto) -> tuple[tuple[int, ...], int | None, np.dtype]:
    """Per-sample shape, fixed batch size (``None`` if symbolic) and dtype of a graph input."""
    tensor = value.type.tensor_type
    dtype = _DTYPES.get(tensor.elem_type)
    if dtype is None:
        name = onnx.TensorProto.DataType.Name(tensor.elem_type)
        raise NetworkError(f"input {value.name!r} has type {name}; FLOAT or DOUBLE is supported")
    dims = list(tensor.shape.dim)
    if len(dims) < 2:
        raise NetworkError(
            f"input {value.name!r} has rank {len(dims)}; expected (batch, features...)"
        )
    per_sample = []
    for index, dim in enumerate(dims[1:], 1):
        if not dim.HasField("dim_value") or dim.dim_value <= 0:
            raise NetworkError(f"input {value.name!r}: dimension {index} is not a fixed size")
        per_sample.append(int(dim.dim_value))
    batch = int(dims[0].dim_value) if dims[0].HasField("dim_value") else None
    return tuple(per_sample), batch or None, np.dtype(dtype)


def _fold(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int) -> list[np.ndarray]:
    """Evaluate a node whose inputs are all constants with the ONNX reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    initializers = [
        numpy_helper.from_array(np.asarray(value), name)
        for name, value in zip(node.input, inputs, strict=True)
        if name
    ]
    outputs = [onnx.ValueInfoProto(name=name) for name in node.output if name]
    graph = helper.make_graph([node], "fold", [], outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        return list(ReferenceEvaluator(model).run(None, {}))
    except (RuntimeError, ValueError, TypeError, KeyError, NotImplementedError) as error:
        raise NetworkError(
            f"{node.op_type} node {node.name!r}: cannot evaluate it on constants: {error}"
        ) from error


COPYING_OPERATORS = frozenset({
    "Constant", "ConstantOfShape", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
    "Transpose", "Concat", "Split", "Slice", "Gather", "Expand", "Tile", "Shape", "Size", "Cast",
    "CastLike",
})
"""Operators whose outputs are their inputs' values copied (or, for ``Cast`` and ``CastLike``,
rounded as the operator defines): on the model's own constants they give its own constants."""

def _fold_constants(walk: _Walk, node: onnx.NodeProto, inputs: list[Any], opset: int) -> None:
    """Fold a node whose inputs are all constants into :attr:`_Walk.values`, keeping what a
    float constant is in real arithmetic (:mod:`verifier.convert.constant_folding`): a copy of
    the model's own constants is its own; a rational operator's result is exact and a root's
    within three roundings (kept in :attr:`_Walk.computed` where float64 cannot hold it); any
    other float result, and a copy of a computed constant, is :attr:`_Walk.unreadable`."""
    names = [name for name in node.input if name]
    reads_computed = any(name in walk.computed for name in names)
    retyped = False
    try:
        outputs = _fold(node, inputs, opset)
    except NetworkError:
        if not any(name in walk.graph_dtypes for name in names):
            raise
        # a float64 exact value beside the graph's float32 operands: evaluated in the graph's
        # types (for shapes and types; the exact value comes from folded_result below)
        outputs = _fold(node, [value if name not in walk.graph_dtypes else
                               np.asarray(value).astype(walk.graph_dtypes[name])
                               for name, value in zip(node.input, inputs, strict=False)], opset)
        retyped = True
    graph_dtype = next((walk.graph_dtypes[name] for name in names if name in walk.graph_dtypes),
                       None)
    for name, value in zip(node.output, outputs, strict=False):
        walk.values[name] = np.asarray(value)
        if walk.values[name].dtype.kind != "f":
            continue
        exact = folded_result(node.op_type.lower(), [
            walk.computed.get(source, walk.values[source]) for source in names])
        if exact is not None:
            walk.graph_dtypes[name] = graph_dtype or walk.values[name].dtype
        if isinstance(exact, Computed):
            walk.values[name], walk.computed[name] = exact.value, exact
        elif exact is not None:
            walk.values[name] = exact
        elif reads_computed or retyped or node.op_type not in COPYING_OPERATORS:
            walk.unreadable[name] = Unreadable(
                f"{node.op_type} node {node.name or node.output[0]!r}", walk.values[name])


def _names(model: onnx.ModelProto, key: str, count: int, tensor: str) -> list[str]:
    for prop in model.metadata_props:
        if prop.key == key:
            names = json.loads(prop.value)
            if isinstance(names, list) and len(names) == count:
                return [str(name) for name in names]
    return [tensor] if count == 1 else [f"{tensor}[{index}]" for index in range(count)]


def from_onnx(
    model: str | Path | onnx.ModelProto,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    *,
    verify: bool = True,
) -> Network:
    """Convert an ONNX model (a path or a ``ModelProto``) to the IR.

    Column names default to names stored by :func:`verifier.convert.onnx_export.network_to_onnx`
    in the model metadata, else ``"<tensor>[i]"`` from the graph's input and output names.
    With ``verify`` the IR is checked against onnxruntime (the ONNX reference evaluator when
    onnxruntime is not installed) on random inputs in the model's input dtype.
    """
    proto = _load(model)
    opset = _default_opset(proto)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise NetworkError(f"ONNX opset {opset} is not supported ({MIN_OPSET} to {MAX_OPSET})")
    graph = proto.graph
    constants: dict[str, Any] = {
        tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer
    }
    inputs = [value for value in graph.input if value.name not in constants]
    if len(inputs) != 1:
        raise NetworkError(
            f"the ONNX graph has {len(inputs)} inputs without initializers "
            f"({', '.join(value.name for value in inputs)}); exactly one is supported"
        )
    if len(graph.output) != 1:
        raise NetworkError(f"the ONNX graph has {len(graph.output)} outputs; one is supported")
    shape, batch, dtype = _input_shape(inputs[0])
    chain = AffineChain(shape)
    values: dict[str, Any] = dict(constants)
    values[inputs[0].name] = _Data(0)
    walk = _Walk(chain, _Data(0), graph.node[0] if graph.node else onnx.NodeProto(), opset, values,
                 dtype)
    for node in graph.node:
        _convert_node(walk, node, opset)
    result = values.get(graph.output[0].name)
    if not isinstance(result, _Data):
        raise NetworkError(f"graph output {graph.output[0].name!r} is not computed from the input")
    walk.take(result)
    network = chain.network()
    names_in = input_names or _names(proto, INPUT_NAMES_KEY, network.input_size, inputs[0].name)
    names_out = output_names or _names(
        proto, OUTPUT_NAMES_KEY, network.output_size, graph.output[0].name
    )
    network = network.renamed(names_in, names_out)
    if verify:
        source = onnx_source(proto, inputs[0].name)
        assert_agrees(network, source, shape, dtype, "ONNX model", batch_size=batch)
    return network


def _convert_node(walk: _Walk, node: onnx.NodeProto, opset: int) -> None:
    walk.node = node
    if node.domain not in ("", "ai.onnx"):
        raise NetworkError(f"{walk.where}: operator domain {node.domain!r} is not supported")
    inputs = [walk.input(index) for index in range(len(node.input))]
    if not any(isinstance(value, _Data) for value in inputs):
        _fold_constants(walk, node, inputs, opset)
        return
    rule = ONNX_RULES.get(node.op_type)
    if rule is None:
        raise NetworkError(
            f"unsupported ONNX operator {node.op_type!r} at node {node.name or node.output[0]!r}; "
            f"supported: {', '.join(ONNX_RULES)}{operator_hint(node.op_type)}"
        )
    try:
        walk.values[node.output[0]] = rule(walk)
    except NetworkError as error:
        if walk.where in str(error):
            raise
        raise NetworkError(f"{walk.where}: {error}") from error


def onnx_source(model: onnx.ModelProto, input_name: str) -> Callable[[np.ndarray], np.ndarray]:
    """Evaluate ``model`` with onnxruntime, or the ONNX reference evaluator without it or where
    onnxruntime has no kernel for one of its nodes (float64 ``LeakyRelu``, as a float64 torch
    model exports it, has none)."""
    try:
        import onnxruntime
        from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as NoKernel
    except ImportError:
        return _reference_source(model, input_name)
    options = onnxruntime.SessionOptions()
    # one thread, no busy-waiting: a spinning pool would starve torch on small machines
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except NoKernel:
        return _reference_source(model, input_name)
    except (RuntimeError, ValueError) as error:
        raise NetworkError(f"onnxruntime cannot load the model: {error}") from error

    def run(inputs: np.ndarray) -> np.ndarray:
        return np.asarray(session.run(None, {input_name: inputs})[0])

    return run


def _reference_source(model: onnx.ModelProto,
                      input_name: str) -> Callable[[np.ndarray], np.ndarray]:
    """Evaluate ``model`` with the ONNX reference evaluator (numpy, every dtype)."""
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(model)

    def run(inputs: np.ndarray) -> np.ndarray:
        return np.asarray(evaluator.run(None, {input_name: inputs})[0])

    return run
