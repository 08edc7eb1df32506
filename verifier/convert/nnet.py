"""Kyle Julian's ``.nnet`` text format (the ACAS Xu networks).

Layout after the ``//`` comment lines: ``layers,inputs,outputs,max_width``; the layer sizes
(inputs first); an unused flag; input minimums; maximums; means (one per input, then the output
mean); ranges (likewise); then for every layer the rows of ``W`` (out × in), one row per line,
followed by ``b``, one value per line. Hidden layers use ReLU, the last layer none.

The network reads *normalised* inputs ``(clip(x, min, max) − mean) / range`` and returns raw
scores (the same as the ACAS Xu ONNX files); de-normalised scores are ``y · output_range +
output_mean``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from verifier.convert.self_check import assert_agrees
from verifier.network import Layer, Network, NetworkError
from verifier.numerics import up_array


@dataclass(frozen=True)
class NNetFile:
    """A parsed ``.nnet`` file: the network on normalised inputs and the normalisation."""

    network: Network
    input_mins: np.ndarray
    input_maxs: np.ndarray
    input_means: np.ndarray
    input_ranges: np.ndarray
    output_mean: float
    output_range: float

    def normalise(self, x: np.ndarray, *, clip: bool = True) -> np.ndarray:
        """``(clip(x, min, max) − mean) / range`` row-wise, the reference evaluation's input
        normalisation (``clip=False`` skips the clipping); ``x`` is ``[n, inputs]`` or one row."""
        values = np.asarray(x, dtype=np.float64)
        if clip:
            values = np.clip(values, self.input_mins, self.input_maxs)
        return (values - self.input_means) / self.input_ranges

    def denormalise_outputs(self, y: np.ndarray) -> np.ndarray:
        """Raw scores to physical units: ``y · output_range + output_mean``."""
        return np.asarray(y, dtype=np.float64) * self.output_range + self.output_mean

    def network_with_input_normalisation(self) -> Network:
        """The network on raw inputs: the affine normalisation ``(x − mean)/range`` merged into
        layer 0. The clipping to ``[min, max]`` is a non-linearity the IR does not express and is
        NOT applied: the result equals the reference evaluation only for inputs inside the
        ``[input_mins, input_maxs]`` box, which callers must enforce (e.g. by bounding their
        input boxes to it)."""
        first = self.network.layers[0]
        weight = first.weight / self.input_ranges[None, :]
        bias = first.bias - weight @ self.input_means
        # the division and the shifted bias are rounded: their magnitudes (rounded up past the
        # float error of the sums) mark the layer as folded, so bounds keep rounding margins
        # for the real coefficients and nothing treats the floats as the model's exact values
        terms = first.in_features + 2
        widen = 1.0 + terms * 2.0**-52
        weight_magnitude = np.abs(first.weight) / np.abs(self.input_ranges[None, :]) * widen
        bias_magnitude = (np.abs(first.bias) + weight_magnitude @ np.abs(self.input_means)) * widen
        layer = Layer(
            weight,
            bias,
            first.activation,
            negative_slope=first.negative_slope,
            min_val=first.min_val,
            max_val=first.max_val,
            weight_magnitude=up_array(weight_magnitude),
            bias_magnitude=up_array(bias_magnitude),
        )
        return Network(
            [layer, *self.network.layers[1:]],
            list(self.network.input_names),
            list(self.network.output_names),
        )


def _numbers(line: str, path: Path, line_number: int) -> list[float]:
    fields = [field for field in line.strip().split(",") if field.strip()]
    try:
        return [float(field) for field in fields]
    except ValueError as error:
        raise NetworkError(
            f"{path}:{line_number}: not a list of numbers: {line.strip()!r}"
        ) from error


def _data_lines(path: Path) -> Iterator[tuple[int, list[float]]]:
    with path.open(encoding="utf-8") as stream:
        for line_number, line in enumerate(stream, 1):
            if line.startswith("//") or not line.strip():
                continue
            yield line_number, _numbers(line, path, line_number)


def _take(
    lines: Iterator[tuple[int, list[float]]], count: int, path: Path, what: str
) -> list[float]:
    try:
        line_number, values = next(lines)
    except StopIteration:
        raise NetworkError(f"{path}: file ends before the {what}") from None
    if len(values) < count:
        raise NetworkError(
            f"{path}:{line_number}: {what} has {len(values)} values, expected {count}"
        )
    return values[:count]


def read_nnet(
    path: str | Path,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    *,
    verify: bool = True,
) -> NNetFile:
    """Parse a ``.nnet`` file (see the module docstring).

    With ``verify`` the IR is compared with a direct numpy evaluation of the parsed weights on
    random normalised inputs (float64 tolerance of :mod:`verifier.convert.self_check`).
    """
    path = Path(path)
    if not path.is_file():
        raise NetworkError(f"nnet file not found: {path}")
    lines = _data_lines(path)
    header = _take(lines, 4, path, "header")
    layer_count, inputs, outputs = (int(value) for value in header[:3])
    sizes = [int(value) for value in _take(lines, layer_count + 1, path, "layer sizes")]
    if sizes[0] != inputs or sizes[-1] != outputs:
        raise NetworkError(
            f"{path}: layer sizes {sizes} do not match {inputs} inputs and {outputs} outputs"
        )
    _take(lines, 1, path, "unused flag")
    mins = np.array(_take(lines, inputs, path, "input minimums"))
    maxs = np.array(_take(lines, inputs, path, "input maximums"))
    means = np.array(_take(lines, inputs + 1, path, "means"))
    ranges = np.array(_take(lines, inputs + 1, path, "ranges"))
    if np.any(ranges[:inputs] == 0):
        raise NetworkError(f"{path}: an input range is zero")
    weights: list[np.ndarray] = []
    biases: list[np.ndarray] = []
    for index, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        rows = [_take(lines, fan_in, path, f"layer {index} weight row") for _ in range(fan_out)]
        bias = [_take(lines, 1, path, f"layer {index} bias")[0] for _ in range(fan_out)]
        weights.append(np.array(rows))
        biases.append(np.array(bias))
    layers = [
        Layer(weight, bias, "relu" if index < layer_count - 1 else "none")
        for index, (weight, bias) in enumerate(zip(weights, biases, strict=True))
    ]
    network = Network(layers, list(input_names or []), list(output_names or []))
    parsed = NNetFile(
        network,
        mins,
        maxs,
        means[:inputs],
        ranges[:inputs],
        float(means[inputs]),
        float(ranges[inputs]),
    )
    if verify:
        assert_agrees(
            network, _numpy_forward(weights, biases), (inputs,), np.float64, f"nnet {path.name}"
        )
    return parsed


def _numpy_forward(
    weights: list[np.ndarray], biases: list[np.ndarray]
) -> Callable[[np.ndarray], np.ndarray]:
    """The reference forward pass on normalised inputs: ReLU hidden layers, linear output."""

    def run(inputs: np.ndarray) -> np.ndarray:
        hidden = inputs
        for index, (weight, bias) in enumerate(zip(weights, biases, strict=True)):
            hidden = hidden @ weight.T + bias
            if index < len(weights) - 1:
                hidden = np.maximum(hidden, 0.0)
        return hidden

    return run
