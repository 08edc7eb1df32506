"""The neutral JSON network format.

One network::

    {"inputs": [names], "outputs": [names],            # both optional
     "layers": [{"weight": [[...]], "bias": [...],     # out × in, PyTorch's Linear layout
                 "activation": "relu" | "none" | "leaky_relu" | "hardtanh",
                 "negative_slope": 0.01,               # leaky_relu: one slope or one per neuron
                 "min_val": -1.0, "max_val": 1.0}],    # hardtanh
     "head": "sigmoid" | "softmax" | "log_softmax"}    # optional classifier head

A layer computes ``activation(W·h + b)``; ``"linear"`` is accepted for ``"none"``. Layer objects
may carry metadata (``name``, ``neurons``, ...) and a ``type``: ``"dense"`` (the default) or
``"maxpool1d"`` with ``"windows"`` (lists of the previous layer's unit indices; unit ``i`` is
the maximum over window ``i``), which converts exactly into ReLU layers. ``head`` (default
``"none"``) is applied to the outputs after the last layer (:data:`verifier.network.HEADS`).

A file may hold several networks: ``{"networks": {key: network, ...}}`` (as in the FairSquare
benchmark), ``{"networks": [network with "name", ...]}``, or a plain ``{key: network}`` object;
a key selects one.

Numbers round-trip exactly: Python writes floats with ``repr`` precision and reads them back to
the same float64.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from verifier.convert.affine_chain import AffineChain
from verifier.convert.self_check import assert_agrees
from verifier.network import ACTIVATIONS, HEADS, Layer, Network, NetworkError, apply_head_numpy
from verifier.text_files import read_text

ACTIVATION_ALIASES = {"linear": "none"}
LAYER_TYPES = ("dense", "maxpool1d")


def _matrix(value: Any, where: str) -> np.ndarray:
    try:
        matrix = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise NetworkError(f"{where}: expected a list of numeric rows") from error
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise NetworkError(f"{where}: expected a non-empty list of rows of equal length")
    return matrix


def _vector(value: Any, size: int, where: str) -> np.ndarray:
    try:
        vector = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise NetworkError(f"{where}: expected a list of numbers") from error
    if vector.shape != (size,):
        raise NetworkError(f"{where}: expected {size} numbers, got shape {vector.shape}")
    return vector


def _dense(chain: AffineChain, layer: Mapping[str, Any], where: str) -> None:
    if "weight" not in layer or "bias" not in layer:
        raise NetworkError(f"{where}: a dense layer needs 'weight' and 'bias'")
    weight = _matrix(layer["weight"], f"{where}.weight")
    bias = _vector(layer["bias"], weight.shape[0], f"{where}.bias")
    activation = layer.get("activation")
    if activation is None:
        raise NetworkError(f"{where}: missing 'activation' ({', '.join(ACTIVATIONS)})")
    activation = ACTIVATION_ALIASES.get(activation, activation)
    if activation not in ACTIVATIONS:
        raise NetworkError(
            f"{where}.activation: unsupported {layer['activation']!r}; supported: "
            f"{', '.join(ACTIVATIONS)} ('linear' = 'none')"
        )
    slope = layer.get("negative_slope", 0.01)
    try:
        chain.append_layer(
            Layer(
                weight,
                bias,
                activation,
                negative_slope=tuple(slope) if isinstance(slope, list) else float(slope),
                min_val=float(layer.get("min_val", -1.0)),
                max_val=float(layer.get("max_val", 1.0)),
            )
        )
    except (NetworkError, TypeError, ValueError) as error:
        raise NetworkError(f"{where}: {error}") from error


def _windows(layer: Mapping[str, Any], where: str) -> list[list[int]]:
    windows = layer.get("windows")
    if not isinstance(windows, list) or not all(isinstance(window, list) for window in windows):
        raise NetworkError(f"{where}: a maxpool1d layer needs 'windows' (lists of unit indices)")
    if not all(isinstance(index, int) for window in windows for index in window):
        raise NetworkError(f"{where}.windows: indices must be integers")
    return windows


def _maxpool(chain: AffineChain, layer: Mapping[str, Any], where: str) -> None:
    windows = _windows(layer, where)
    try:
        chain.window_max(windows, (len(windows),))
    except NetworkError as error:
        raise NetworkError(f"{where}: {error}") from error


def _layers(network: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    layers = network.get("layers")
    if not isinstance(layers, list) or not layers:
        raise NetworkError(f"{where}: 'layers' must be a non-empty list")
    for index, layer in enumerate(layers):
        if not isinstance(layer, Mapping):
            raise NetworkError(f"{where}.layers[{index}]: expected an object")
        kind = layer.get("type", "dense")
        if kind not in LAYER_TYPES:
            raise NetworkError(
                f"{where}.layers[{index}]: unsupported layer type {kind!r}; supported: "
                f"{', '.join(LAYER_TYPES)}"
            )
    return layers


def _names(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise NetworkError(f"{where}: expected a list of names")
    return list(value)


def select_network(document: Any, key: str | None = None) -> tuple[str | None, Mapping[str, Any]]:
    """The network object (and its key) in a JSON document of one or several networks."""
    if not isinstance(document, Mapping):
        raise NetworkError("a JSON network document must be an object")
    if "layers" in document:
        name = document.get("name")
        if key is not None and key != name:
            raise NetworkError(f"the JSON document holds one network ({name!r}), not {key!r}")
        return name, document
    container = document.get("networks", document)
    if isinstance(container, list):
        candidates = {
            str(item.get("name", index)): item
            for index, item in enumerate(container)
            if isinstance(item, Mapping)
        }
    elif isinstance(container, Mapping):
        candidates = {
            str(name): item
            for name, item in container.items()
            if isinstance(item, Mapping) and "layers" in item
        }
    else:
        candidates = {}
    if not candidates:
        raise NetworkError("no network (an object with 'layers') in the JSON document")
    if key is None:
        if len(candidates) == 1:
            return next(iter(candidates.items()))
        raise NetworkError(
            f"the JSON document holds {len(candidates)} networks; select one with "
            f"'file.json#KEY', KEY one of: {', '.join(candidates)}"
        )
    if key not in candidates:
        raise NetworkError(
            f"no network {key!r} in the JSON document; keys: {', '.join(candidates)}"
        )
    return key, candidates[key]


def network_from_json(
    document: Any,
    key: str | None = None,
    *,
    verify: bool = True,
) -> Network:
    """Convert a JSON network document (see the module docstring) to the IR.

    With ``verify`` the IR is compared with a direct numpy evaluation of the document's layers
    on random inputs (float64 tolerance of :mod:`verifier.convert.self_check`).
    """
    name, network = select_network(document, key)
    where = f"network {name!r}" if name else "network"
    layers = _layers(network, where)
    input_names = _names(network.get("inputs"), f"{where}.inputs")
    chain = AffineChain((len(input_names),) if input_names else None)
    for index, layer in enumerate(layers):
        layer_where = f"{where}.layers[{index}]"
        if layer.get("type", "dense") == "dense":
            _dense(chain, layer, layer_where)
        else:
            _maxpool(chain, layer, layer_where)
    head = _head(network.get("head", "none"), f"{where}.head")
    if head != "none":
        chain.head(head, f"{where}.head")
    result = chain.network(input_names, _names(network.get("outputs"), f"{where}.outputs"))
    if verify:
        source = _numpy_source(layers, head)
        assert_agrees(result, source, (result.input_size,), np.float64, f"JSON {where}")
    return result


def _activate(values: np.ndarray, layer: Mapping[str, Any]) -> np.ndarray:
    activation = ACTIVATION_ALIASES.get(layer["activation"], layer["activation"])
    if activation == "relu":
        return np.maximum(values, 0.0)
    if activation == "leaky_relu":
        slope = np.asarray(layer.get("negative_slope", 0.01), dtype=np.float64)
        return np.where(values < 0.0, slope * values, values)
    if activation == "hardtanh":
        return np.clip(values, float(layer.get("min_val", -1.0)), float(layer.get("max_val", 1.0)))
    return values


def _head(value: Any, where: str) -> str:
    if value not in HEADS:
        raise NetworkError(f"{where}: unsupported head {value!r}; supported: {', '.join(HEADS)}")
    return str(value)


def _numpy_source(
    layers: Sequence[Mapping[str, Any]], head: str
) -> Callable[[np.ndarray], np.ndarray]:
    """Evaluate the document's layers and head literally with numpy (the self-check's
    reference)."""

    def run(inputs: np.ndarray) -> np.ndarray:
        hidden = inputs
        for layer in layers:
            if layer.get("type", "dense") == "maxpool1d":
                hidden = np.stack([hidden[:, window].max(axis=1) for window in layer["windows"]], 1)
                continue
            weight = np.asarray(layer["weight"], dtype=np.float64)
            bias = np.asarray(layer["bias"], dtype=np.float64)
            hidden = _activate(hidden @ weight.T + bias, layer)
        return apply_head_numpy(head, hidden)

    return run


def network_to_json(network: Network) -> dict[str, Any]:
    """The JSON document of ``network``; :func:`network_from_json` reads it back exactly."""
    layers = []
    for layer in network.layers:
        entry: dict[str, Any] = {
            "weight": layer.weight.tolist(),
            "bias": layer.bias.tolist(),
            "activation": layer.activation,
        }
        if layer.activation == "leaky_relu":
            slope = layer.negative_slope
            entry["negative_slope"] = list(slope) if isinstance(slope, tuple) else float(slope)
        if layer.activation == "hardtanh":
            entry["min_val"] = float(layer.min_val)
            entry["max_val"] = float(layer.max_val)
        layers.append(entry)
    document: dict[str, Any] = {
        "inputs": list(network.input_names),
        "outputs": list(network.output_names),
        "layers": layers,
    }
    if network.head != "none":
        document["head"] = network.head
    return document


def read_json_network(path: str | Path, key: str | None = None, *, verify: bool = True) -> Network:
    """Read a network from a JSON file (``key`` selects one of several)."""
    path = Path(path)
    if not path.is_file():
        raise NetworkError(f"JSON network file not found: {path}")
    try:
        document = json.loads(read_text(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise NetworkError(f"{path}: not valid JSON: {error}") from error
    try:
        return network_from_json(document, key, verify=verify)
    except NetworkError as error:
        raise NetworkError(f"{path}: {error}") from error


def write_json_network(network: Network, path: str | Path) -> None:
    """Write ``network`` as a JSON document (exact float round trip)."""
    Path(path).write_text(json.dumps(network_to_json(network)) + "\n", encoding="utf-8")
