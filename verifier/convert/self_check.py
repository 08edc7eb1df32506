"""Every converter checks its result against the source model on random inputs.

The check evaluates the source (torch, onnxruntime, a direct numpy reading of a file) and the
IR on the same inputs and raises :class:`~verifier.network.NetworkError` when they disagree.

Tolerance, per sample row ``i``: ``max_j |ir_ij − source_ij| ≤ rtol · scale_i`` with ``scale_i =
max(1, max_j |source_ij|, max_j |ir_ij|, max_j m_ij)``, where ``m`` is the absolute-value forward
pass (``m ← |W|·m + |b|`` from ``m = |x|``; an activation bounds ``m`` by
``max(m, |min_val|, |max_val|)``): the size of the sums a floating-point evaluation rounds, so
the tolerance is relative to the magnitudes the source actually computed with, and absolute
for outputs near zero. ``rtol`` is :data:`FLOAT32_RTOL` for float32 sources (whose own rounding
is about 1e-7 per operation) and :data:`FLOAT64_RTOL` for float64 sources. Inputs are rounded to the
source's dtype first, so both sides see exactly the same numbers.

A network with a classifier head is compared with its source after the head on both sides
(like with like). Sigmoid and softmax are 1-Lipschitz, so a logit error shows at most as large
after the head: where they saturate (inputs of standard deviation 100), the comparison is
weaker than on logits, and the standard-normal half of the inputs carries the check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from verifier.errors import first_line
from verifier.network import Network, NetworkError

FLOAT32_RTOL = 1e-5
FLOAT64_RTOL = 1e-9
CHECK_ROWS = 64
CHECK_SEED = 20240601


def rtol_for(dtype: np.dtype | type) -> float:
    """The tolerance for a source computing in ``dtype``."""
    resolved = np.dtype(dtype)
    if resolved == np.float64:
        return FLOAT64_RTOL
    if resolved == np.float32:
        return FLOAT32_RTOL
    raise NetworkError(f"cannot check a source computing in {resolved}: use float32 or float64")


def check_inputs(
    input_shape: Sequence[int], dtype: np.dtype | type, rows: int = CHECK_ROWS
) -> np.ndarray:
    """Deterministic check inputs ``(rows, *input_shape)`` in ``dtype``: half standard normal,
    half with standard deviation 100 (to reach kinks far from the origin)."""
    rng = np.random.default_rng(CHECK_SEED)
    values = rng.normal(size=(rows, *input_shape))
    values[rows // 2 :] *= 100.0
    return values.astype(dtype)


def magnitude(network: Network, x: np.ndarray) -> np.ndarray:
    """Per row, the largest entry of the absolute-value forward pass (module docstring): an
    upper bound on every partial sum a floating-point evaluation of the network forms."""
    bound = np.abs(x)
    for layer in network.layers:
        bound = bound @ np.abs(layer.weight).T + np.abs(layer.bias)
        if layer.activation == "hardtanh":
            bound = np.maximum(bound, max(abs(layer.min_val), abs(layer.max_val)))
    return bound.max(axis=1)


def assert_agrees(
    network: Network,
    source: Callable[[np.ndarray], np.ndarray],
    input_shape: Sequence[int],
    dtype: np.dtype | type,
    what: str,
    *,
    batch_size: int | None = None,
    rows: int = CHECK_ROWS,
) -> None:
    """Raise :class:`NetworkError` unless ``network`` reproduces ``source`` within the
    tolerance stated in the module docstring.

    ``source`` maps an array ``(batch, *input_shape)`` of ``dtype`` to outputs ``(batch, ...)``;
    ``batch_size`` is the fixed batch size a source demands (``None``: any).
    """
    rtol = rtol_for(dtype)
    rows = max(rows, batch_size or 0)
    inputs = check_inputs(input_shape, dtype, rows)
    step = batch_size or rows
    usable = rows - rows % step
    try:
        chunks = [source(inputs[start : start + step]) for start in range(0, usable, step)]
    except (RuntimeError, TypeError, ValueError) as error:
        raise NetworkError(f"{what}: the source model fails on the check inputs: "
                           f"{type(error).__name__}: {first_line(error)}") from error
    expected = np.concatenate(
        [np.asarray(chunk, dtype=np.float64).reshape(step, -1) for chunk in chunks]
    )
    flat = inputs[:usable].reshape(usable, -1).astype(np.float64)
    if expected.shape[1] != network.output_size:
        raise NetworkError(
            f"{what}: the source gives {expected.shape[1]} outputs per sample, the converted "
            f"network {network.output_size}"
        )
    actual = network.evaluate_numpy(flat)
    if not np.all(np.isfinite(expected)):
        raise NetworkError(f"{what}: the source model gives non-finite outputs on check inputs")
    scale = np.maximum.reduce(
        [
            np.ones(usable),
            np.abs(expected).max(axis=1),
            np.abs(actual).max(axis=1),
            magnitude(network, flat),
        ]
    )
    error = np.abs(actual - expected).max(axis=1) / scale
    worst = int(np.argmax(error))
    if error[worst] > rtol:
        raise NetworkError(
            f"{what}: the converted network disagrees with the source model: relative error "
            f"{error[worst]:.3g} > {rtol:g} on check input row {worst} (source "
            f"{expected[worst].tolist()}, converted {actual[worst].tolist()})"
        )
