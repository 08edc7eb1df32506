"""Export the IR to ONNX: one ``Gemm`` per layer followed by its activation.

``relu`` → ``Relu``; ``leaky_relu`` → ``PRelu`` with the slope(s) as a tensor (``LeakyRelu``
would store its slope as a float32 attribute); ``hardtanh`` → ``Clip(min, max)``; ``none`` →
nothing. The graph input is ``input`` ``[N, inputs]`` and the output ``output``
``[N, outputs]``; a head is a final ``Sigmoid``, ``Softmax`` or ``LogSoftmax`` (``axis=-1``),
which :func:`verifier.convert.onnx_graph.from_onnx` reads back as the head. Column names are
stored in the model metadata (``certgate.input_names``,
``certgate.output_names``: JSON lists), where :func:`verifier.convert.onnx_graph.from_onnx`
reads them back.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import helper, numpy_helper

from verifier.convert.onnx_graph import INPUT_NAMES_KEY, OUTPUT_NAMES_KEY
from verifier.network import Layer, Network, NetworkError

EXPORT_OPSET = 17
EXPORT_IR_VERSION = 8
_ELEMENT_TYPES = {
    np.dtype(np.float64): onnx.TensorProto.DOUBLE,
    np.dtype(np.float32): onnx.TensorProto.FLOAT,
}


def network_to_onnx(network: Network, *, dtype: type = np.float64) -> onnx.ModelProto:
    """An ONNX model computing ``network`` in ``dtype`` (float64 keeps the weights exact)."""
    resolved = np.dtype(dtype)
    element_type = _ELEMENT_TYPES.get(resolved)
    if element_type is None:
        raise NetworkError(f"ONNX export supports float32 and float64, not {resolved}")
    nodes: list[onnx.NodeProto] = []
    initializers: list[onnx.TensorProto] = []
    current = "input"
    last = len(network.layers) - 1 if network.head == "none" else len(network.layers)
    for index, layer in enumerate(network.layers):
        prefix = f"layer{index}"
        initializers += [
            numpy_helper.from_array(layer.weight.astype(resolved), f"{prefix}_weight"),
            numpy_helper.from_array(layer.bias.astype(resolved), f"{prefix}_bias"),
        ]
        has_activation = layer.activation != "none"
        affine_out = "output" if index == last and not has_activation else f"{prefix}_affine"
        nodes.append(
            helper.make_node(
                "Gemm",
                [current, f"{prefix}_weight", f"{prefix}_bias"],
                [affine_out],
                name=f"{prefix}_gemm",
                transB=1,
            )
        )
        current = affine_out
        if not has_activation:
            continue
        activated = "output" if index == last else f"{prefix}_act"
        nodes.append(_activation_node(layer, prefix, current, activated, resolved, initializers))
        current = activated
    if network.head != "none":
        nodes.append(_head_node(network.head, current))
    graph = helper.make_graph(
        nodes,
        "certgate_network",
        [helper.make_tensor_value_info("input", element_type, ["N", network.input_size])],
        [helper.make_tensor_value_info("output", element_type, ["N", network.output_size])],
        initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", EXPORT_OPSET)],
        ir_version=EXPORT_IR_VERSION,
        producer_name="certgate",
    )
    helper.set_model_props(
        model,
        {
            INPUT_NAMES_KEY: json.dumps(list(network.input_names)),
            OUTPUT_NAMES_KEY: json.dumps(list(network.output_names)),
        },
    )
    onnx.checker.check_model(model)
    return model


def _head_node(head: str, source: str) -> onnx.NodeProto:
    if head == "sigmoid":
        return helper.make_node("Sigmoid", [source], ["output"], name="head_sigmoid")
    op = "Softmax" if head == "softmax" else "LogSoftmax"
    return helper.make_node(op, [source], ["output"], name=f"head_{head}", axis=-1)


def _activation_node(
    layer: Layer,
    prefix: str,
    source: str,
    target: str,
    dtype: np.dtype,
    initializers: list[onnx.TensorProto],
) -> onnx.NodeProto:
    activation = layer.activation
    name = f"{prefix}_{activation}"
    if activation == "relu":
        return helper.make_node("Relu", [source], [target], name=name)
    if activation == "leaky_relu":
        slopes = np.atleast_1d(np.asarray(layer.negative_slope, dtype=dtype))
        initializers.append(numpy_helper.from_array(slopes, f"{prefix}_slope"))
        return helper.make_node("PRelu", [source, f"{prefix}_slope"], [target], name=name)
    initializers += [
        numpy_helper.from_array(np.asarray(layer.min_val, dtype=dtype), f"{prefix}_min"),
        numpy_helper.from_array(np.asarray(layer.max_val, dtype=dtype), f"{prefix}_max"),
    ]
    return helper.make_node("Clip", [source, f"{prefix}_min", f"{prefix}_max"], [target], name=name)
