"""CROWN's backward pass: linear rows pushed back through the relaxed layers to the input
box and concretised there, on a flat list of row pairs (a form and its negation: the lower
and the upper bound), each pair on one box, all sharing each layer's weight matrix (one
``matmul`` serves thousands of boxes; a pair's box is gathered once for both rows).

:func:`_backsubstitute` is the pass itself (with early stopping for pre-activation rows
already proven stable); :func:`_layer_rows` runs it on a hidden layer's pre-activations and
:func:`_crown_spec` on the specification rows, both in chunks of :data:`ROW_CHUNK`.
"""

from __future__ import annotations

import numpy as np

from verifier.arrays import (
    Array,
    astype,
    namespace,
    nonzero,
    repeat,
    replace_nonfinite,
    size,
    take,
)
from verifier.bounds.activation import _Relaxation, _through_relaxation
from verifier.bounds.affine import _Affine, _halves, _sanitise
from verifier.bounds.onehot import _group_extreme, _input_halves, _OneHot

# Rows back-substituted together: a chunk's (rows, inputs) tensors then stay in the core's
# cache (Adult-13 2x64, 2,000 boxes, one thread: 1.10 s per batch at 4,096 rows, 0.80 s at
# 1,024; 256 no faster).
ROW_CHUNK = 1 << 10


def _concretise_halves(
    coeffs: Array, const: Array, margin: Array,
    mid: Array, rad: Array,
) -> Array:
    """Lower bound of ``coeffs·h + const`` for ``h`` in the box of midpoints ``mid`` and radii
    ``rad`` (:func:`_halves`; rows over the last axis, the box broadcast to every row that
    shares it), widened by ``margin`` (see :func:`_row_margins`); NaN (an overflow) becomes
    ``−∞``."""
    xp = namespace(coeffs)
    product = coeffs * mid
    value = xp.sum(product, axis=-1)
    spread = xp.sum(xp.multiply(xp.abs(coeffs, out=product), rad, out=product), axis=-1)
    xp.subtract(value, spread, out=value)
    xp.add(value, const, out=value)
    xp.subtract(value, margin, out=value)
    return replace_nonfinite(value, nan=-np.inf, posinf=-np.inf, neginf=-np.inf)


def _concretise_input(
    coeffs: Array, const: Array, margin: Array,
    mid: Array, rad: Array, onehot: _OneHot | None, box: Array,
) -> Array:
    """:func:`_concretise_halves` of paired rows ``(2, R, inputs)`` against the input box,
    every usable one-hot group at its best allowed category (``mid``/``rad``:
    :func:`_input_halves` of each pair's box ``(R, inputs)``, ``box[r]``: pair ``r``'s box
    among ``onehot``'s records); returns ``(2, R)``."""
    value = _concretise_halves(coeffs, const, margin, mid, rad)
    if onehot is None:
        return value
    value = value + _group_extreme(coeffs[:, :, None], onehot, rows=box)[:, :, 0]
    return namespace(value).nan_to_num(value, nan=-np.inf, posinf=-np.inf, neginf=-np.inf)


def _backsubstitute(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], layer: int,
    rows: Array, bias: Array, margin: Array, box: Array,
    inputs_lo: list[Array], inputs_hi: list[Array], *, stop_early: bool = False,
    onehot: _OneHot | None = None,
    halves: dict[int, Array] | None = None,
) -> tuple[Array, Array]:
    """Lower bounds of the paired rows ``±(rows·h + bias)``, ``h`` the input of layer
    ``layer``: ``[0, r]`` bounds ``rows[r]·h + bias[r]`` from below, ``[1, r]`` its negation
    (so ``−[1, r]`` is an upper bound).

    Pair ``r`` belongs to box ``box[r]`` and is widened by ``margin[r]``, the margin of its
    real terms down to the input box (:func:`_row_margins`), which also covers every partial
    concretisation; ``inputs_lo[j]``/``inputs_hi[j]`` bound the input of layer ``j`` for every
    box (``j = 0``: the box itself); ``halves`` caches their midpoints and radii per layer
    side by side, ``(B, 2, n)``, filled on first use (:func:`_halves`; for ``j = 0``
    :func:`_input_halves`). Returns the sound lower bounds ``(2, R)`` and the input
    coefficients ``(2, R', inputs)`` of the pairs that reached the input (all pairs, in
    order, unless ``stop_early``).

    The two rows of a pair share their box, so each layer's relaxation and each box's
    midpoints and radii are gathered once per pair and broadcast to both rows (the same
    products as gathering them per row). With ``stop_early`` the pairs are the lower and
    negated upper bound of pre-activations: after every step the partial bound is
    concretised against the bounds of the current layer's input (sound, and far cheaper than
    a step); a neuron proven stable there stops, since a stable neuron's relaxation is exact
    whatever its bounds. Only undecided neurons pay for the full depth.
    """
    xp = namespace(rows)
    coeffs = xp.stack([rows, -rows])
    const = xp.stack([bias, -bias])
    result = xp.empty((2, rows.shape[0]), dtype=rows.dtype)
    pair_ids = xp.arange(rows.shape[0])
    if halves is None:
        halves = {}
    for index in range(layer - 1, -1, -1):
        affine = affines[index]
        relaxation = relaxations.get(index)
        if relaxation is not None:
            parts = take(relaxation.stacked, box)
            coeffs, const = _through_relaxation(
                coeffs, const, parts[:, 0], parts[:, 1], parts[:, 2], in_place=True
            )
        const = const + coeffs @ affine.bias
        coeffs = coeffs @ affine.weight
        if not stop_early or index == 0:
            continue
        if index not in halves:
            halves[index] = xp.stack(_halves(inputs_lo[index], inputs_hi[index]), axis=1)
        mid_rad = take(halves[index], box)
        partial = _concretise_halves(coeffs, const, margin, mid_rad[:, 0], mid_rad[:, 1])
        decided = xp.any(partial >= 0.0, axis=0)
        if not bool(decided.any()):
            continue
        done = nonzero(decided)[0]
        result[:, take(pair_ids, done)] = take(partial, done, axis=1)
        keep = nonzero(~decided)[0]
        coeffs, const = take(coeffs, keep, axis=1), take(const, keep, axis=1)
        margin, box, pair_ids = (take(t, keep) for t in (margin, box, pair_ids))
        if size(pair_ids) == 0:
            return result, coeffs
    if 0 not in halves:
        halves[0] = xp.stack(_input_halves(inputs_lo[0], inputs_hi[0], onehot), axis=1)
    mid_rad = take(halves[0], box)
    result[:, pair_ids] = _concretise_input(
        coeffs, const, margin, mid_rad[:, 0], mid_rad[:, 1], onehot, box
    )
    return result, coeffs


_RowSetup = tuple[list[_Affine], dict[int, _Relaxation], list[Array],
                  list[Array], _OneHot | None, Array]


def _layer_rows(
    setup: _RowSetup, layer: int, box: Array, neuron: Array,
    halves: dict[int, Array],
) -> tuple[Array, Array]:
    """CROWN's sound lower and upper bounds (float64) of the pre-activations ``(box[r],
    neuron[r])`` of ``layer``, back-substituted in the float type of ``setup`` (affine maps,
    relaxations, layer bounds, one-hot records and per box and neuron margins of that type)
    in chunks of :data:`ROW_CHUNK`; ``halves``: the cache of :func:`_backsubstitute`."""
    affines, relaxations, inputs_lo, inputs_hi, onehot, margins = setup
    affine = affines[layer]
    xp = namespace(affine.weight)
    lower = xp.empty(size(box), dtype=xp.float64)
    upper = xp.empty_like(lower)
    for start in range(0, size(box), ROW_CHUNK):
        part = slice(start, start + ROW_CHUNK)
        b, n = box[part], neuron[part]
        rows = take(affine.weight, n)
        bias = take(affine.bias, n)
        margin = margins[b, n]
        bound, _ = _backsubstitute(
            affines, relaxations, layer, rows, bias, margin, b, inputs_lo, inputs_hi,
            stop_early=True, onehot=onehot, halves=halves,
        )
        lower[part] = astype(bound[0], xp.float64)
        upper[part] = -astype(bound[1], xp.float64)
    return lower, upper


def _crown_spec(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], spec: Array,
    spec_margin: Array, inputs_lo: list[Array], inputs_hi: list[Array],
    onehot: _OneHot | None, needed: Array | None = None,
    halves: dict[int, Array] | None = None,
) -> tuple[Array, Array, Array, tuple[Array, ...]]:
    """CROWN bounds of ``spec @ net(x)`` given the relaxations of all kink layers,
    ``|A_lower| + |A_upper|`` per box, row and input (how much each input drives the gap), and
    ``(A_lower, A_upper)`` themselves (signed). ``needed`` ``(B, S)``: the (box, row) pairs to
    bound; the others get ``(−∞, +∞)`` and zero coefficients; ``halves``: the cache of
    :func:`_backsubstitute`."""
    xp = namespace(spec)
    batch, rows, _ = spec.shape
    last = affines[-1]
    folded = (spec @ last.weight).reshape(batch * rows, -1)
    folded_bias = (spec @ last.bias).reshape(-1)
    margin = spec_margin.reshape(-1)
    box = repeat(xp.arange(batch), rows)
    width = inputs_lo[0].shape[1]
    lower = xp.full((batch * rows,), -np.inf, dtype=xp.float64)
    upper = xp.full((batch * rows,), np.inf, dtype=xp.float64)
    sensitivity = xp.zeros((batch * rows, width), dtype=xp.float64)
    signed = xp.zeros((batch * rows, width), dtype=xp.float64)
    signed_upper = xp.zeros((batch * rows, width), dtype=xp.float64)
    pairs = xp.arange(batch * rows)
    if needed is not None:
        pairs = pairs[needed.reshape(-1)]
    halves = {} if halves is None else halves
    for start in range(0, size(pairs), ROW_CHUNK):
        part = pairs[start : start + ROW_CHUNK]
        b = box[part]
        bound, coeffs = _backsubstitute(
            affines, relaxations, len(affines) - 1, folded[part], folded_bias[part],
            margin[part], b, inputs_lo, inputs_hi, onehot=onehot, halves=halves,
        )
        lower[part] = bound[0]
        upper[part] = -bound[1]
        sensitivity[part] = xp.abs(coeffs[0]) + xp.abs(coeffs[1])
        signed[part] = coeffs[0]
        signed_upper[part] = -coeffs[1]
    lower, upper = _sanitise(lower, upper)
    return (
        lower.reshape(batch, rows), upper.reshape(batch, rows),
        sensitivity.reshape(batch, rows, width),
        (signed.reshape(batch, rows, width), signed_upper.reshape(batch, rows, width)),
    )
