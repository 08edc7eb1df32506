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
import torch

from verifier.bounds.activation import _Relaxation, _through_relaxation
from verifier.bounds.affine import _Affine, _halves, _sanitise
from verifier.bounds.onehot import _group_extreme, _input_halves, _OneHot

# Rows back-substituted together: a chunk's (rows, inputs) tensors then stay in the core's
# cache (Adult-13 2x64, 2,000 boxes, one thread: 1.10 s per batch at 4,096 rows, 0.80 s at
# 1,024; 256 no faster).
ROW_CHUNK = 1 << 10


def _concretise_halves(
    coeffs: torch.Tensor, const: torch.Tensor, margin: torch.Tensor,
    mid: torch.Tensor, rad: torch.Tensor,
) -> torch.Tensor:
    """Lower bound of ``coeffs·h + const`` for ``h`` in the box of midpoints ``mid`` and radii
    ``rad`` (:func:`_halves`; rows over the last axis, the box broadcast to every row that
    shares it), widened by ``margin`` (see :func:`_row_margins`); NaN (an overflow) becomes
    ``−∞``."""
    product = coeffs * mid
    value = product.sum(dim=-1)
    spread = torch.abs(coeffs, out=product).mul_(rad).sum(dim=-1)
    value = value.sub_(spread).add_(const).sub_(margin)
    return value.nan_to_num_(nan=-np.inf, posinf=-np.inf, neginf=-np.inf)


def _concretise_input(
    coeffs: torch.Tensor, const: torch.Tensor, margin: torch.Tensor,
    mid: torch.Tensor, rad: torch.Tensor, onehot: _OneHot | None, box: torch.Tensor,
) -> torch.Tensor:
    """:func:`_concretise_halves` of paired rows ``(2, R, inputs)`` against the input box,
    every usable one-hot group at its best allowed category (``mid``/``rad``:
    :func:`_input_halves` of each pair's box ``(R, inputs)``, ``box[r]``: pair ``r``'s box
    among ``onehot``'s records); returns ``(2, R)``."""
    value = _concretise_halves(coeffs, const, margin, mid, rad)
    if onehot is None:
        return value
    value = value + _group_extreme(coeffs.unsqueeze(2), onehot, rows=box).squeeze(2)
    return value.nan_to_num(nan=-np.inf, posinf=-np.inf, neginf=-np.inf)


def _backsubstitute(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], layer: int,
    rows: torch.Tensor, bias: torch.Tensor, margin: torch.Tensor, box: torch.Tensor,
    inputs_lo: list[torch.Tensor], inputs_hi: list[torch.Tensor], *, stop_early: bool = False,
    onehot: _OneHot | None = None,
    halves: dict[int, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
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
    coeffs = torch.stack([rows, -rows])
    const = torch.stack([bias, -bias])
    result = torch.empty(2, rows.shape[0], dtype=rows.dtype)
    pair_ids = torch.arange(rows.shape[0])
    if halves is None:
        halves = {}
    for index in range(layer - 1, -1, -1):
        affine = affines[index]
        relaxation = relaxations.get(index)
        if relaxation is not None:
            parts = relaxation.stacked.index_select(0, box)
            coeffs, const = _through_relaxation(
                coeffs, const, parts[:, 0], parts[:, 1], parts[:, 2], in_place=True
            )
        const = const + coeffs @ affine.bias
        coeffs = coeffs @ affine.weight
        if not stop_early or index == 0:
            continue
        if index not in halves:
            halves[index] = torch.stack(_halves(inputs_lo[index], inputs_hi[index]), dim=1)
        mid_rad = halves[index].index_select(0, box)
        partial = _concretise_halves(coeffs, const, margin, mid_rad[:, 0], mid_rad[:, 1])
        decided = (partial >= 0.0).any(dim=0)
        if not bool(decided.any()):
            continue
        done = decided.nonzero().squeeze(1)
        result[:, pair_ids.index_select(0, done)] = partial.index_select(1, done)
        keep = (~decided).nonzero().squeeze(1)
        coeffs, const = coeffs.index_select(1, keep), const.index_select(1, keep)
        margin, box, pair_ids = (t.index_select(0, keep) for t in (margin, box, pair_ids))
        if pair_ids.numel() == 0:
            return result, coeffs
    if 0 not in halves:
        halves[0] = torch.stack(_input_halves(inputs_lo[0], inputs_hi[0], onehot), dim=1)
    mid_rad = halves[0].index_select(0, box)
    result[:, pair_ids] = _concretise_input(
        coeffs, const, margin, mid_rad[:, 0], mid_rad[:, 1], onehot, box
    )
    return result, coeffs


_RowSetup = tuple[list[_Affine], dict[int, _Relaxation], list[torch.Tensor],
                  list[torch.Tensor], _OneHot | None, torch.Tensor]


def _layer_rows(
    setup: _RowSetup, layer: int, box: torch.Tensor, neuron: torch.Tensor,
    halves: dict[int, torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """CROWN's sound lower and upper bounds (float64) of the pre-activations ``(box[r],
    neuron[r])`` of ``layer``, back-substituted in the float type of ``setup`` (affine maps,
    relaxations, layer bounds, one-hot records and per box and neuron margins of that type)
    in chunks of :data:`ROW_CHUNK`; ``halves``: the cache of :func:`_backsubstitute`."""
    affines, relaxations, inputs_lo, inputs_hi, onehot, margins = setup
    affine = affines[layer]
    lower = torch.empty(box.numel(), dtype=torch.float64)
    upper = torch.empty_like(lower)
    for start in range(0, box.numel(), ROW_CHUNK):
        part = slice(start, start + ROW_CHUNK)
        b, n = box[part], neuron[part]
        rows = affine.weight.index_select(0, n)
        bias = affine.bias.index_select(0, n)
        margin = margins[b, n]
        bound, _ = _backsubstitute(
            affines, relaxations, layer, rows, bias, margin, b, inputs_lo, inputs_hi,
            stop_early=True, onehot=onehot, halves=halves,
        )
        lower[part] = bound[0].to(torch.float64)
        upper[part] = -bound[1].to(torch.float64)
    return lower, upper


def _crown_spec(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], spec: torch.Tensor,
    spec_margin: torch.Tensor, inputs_lo: list[torch.Tensor], inputs_hi: list[torch.Tensor],
    onehot: _OneHot | None, needed: torch.Tensor | None = None,
    halves: dict[int, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """CROWN bounds of ``spec @ net(x)`` given the relaxations of all kink layers,
    ``|A_lower| + |A_upper|`` per box, row and input (how much each input drives the gap), and
    ``(A_lower, A_upper)`` themselves (signed). ``needed`` ``(B, S)``: the (box, row) pairs to
    bound; the others get ``(−∞, +∞)`` and zero coefficients; ``halves``: the cache of
    :func:`_backsubstitute`."""
    batch, rows, _ = spec.shape
    last = affines[-1]
    folded = (spec @ last.weight).reshape(batch * rows, -1)
    folded_bias = (spec @ last.bias).reshape(-1)
    margin = spec_margin.reshape(-1)
    box = torch.arange(batch).repeat_interleave(rows)
    width = inputs_lo[0].shape[1]
    lower = torch.full((batch * rows,), -np.inf, dtype=torch.float64)
    upper = torch.full((batch * rows,), np.inf, dtype=torch.float64)
    sensitivity = torch.zeros(batch * rows, width, dtype=torch.float64)
    signed = torch.zeros(batch * rows, width, dtype=torch.float64)
    signed_upper = torch.zeros(batch * rows, width, dtype=torch.float64)
    pairs = torch.arange(batch * rows)
    if needed is not None:
        pairs = pairs[needed.reshape(-1)]
    halves = {} if halves is None else halves
    for start in range(0, pairs.numel(), ROW_CHUNK):
        part = pairs[start : start + ROW_CHUNK]
        b = box[part]
        bound, coeffs = _backsubstitute(
            affines, relaxations, len(affines) - 1, folded[part], folded_bias[part],
            margin[part], b, inputs_lo, inputs_hi, onehot=onehot, halves=halves,
        )
        lower[part] = bound[0]
        upper[part] = -bound[1]
        sensitivity[part] = coeffs[0].abs() + coeffs[1].abs()
        signed[part] = coeffs[0]
        signed_upper[part] = -coeffs[1]
    lower, upper = _sanitise(lower, upper)
    return (
        lower.reshape(batch, rows), upper.reshape(batch, rows),
        sensitivity.reshape(batch, rows, width),
        (signed.reshape(batch, rows, width), signed_upper.reshape(batch, rows, width)),
    )
