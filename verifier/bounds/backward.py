"""CROWN's backward pass: linear rows pushed back through the relaxed layers to the input
box and concretised there, on a flat list of ``(box, row)`` pairs that share each layer's
weight matrix (one ``matmul`` serves thousands of boxes).

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
    ``rad`` (:func:`_halves`; row-wise), widened by ``margin`` (see :func:`_row_margins`);
    NaN (an overflow) becomes ``−∞``."""
    value = (coeffs * mid).sum(dim=1) - (coeffs.abs() * rad).sum(dim=1) + const - margin
    return value.nan_to_num(nan=-np.inf, posinf=-np.inf, neginf=-np.inf)


def _concretise_input(
    coeffs: torch.Tensor, const: torch.Tensor, margin: torch.Tensor,
    mid: torch.Tensor, rad: torch.Tensor, onehot: _OneHot | None, box: torch.Tensor,
) -> torch.Tensor:
    """:func:`_concretise_halves` against the input box, every usable one-hot group at its best
    allowed category (``mid``/``rad``: :func:`_input_halves` of each row's box, ``box[r]``:
    row ``r``'s box among ``onehot``'s records)."""
    value = _concretise_halves(coeffs, const, margin, mid, rad)
    if onehot is None:
        return value
    value = value + _group_extreme(coeffs[:, None, :], onehot, rows=box)[:, 0]
    return value.nan_to_num(nan=-np.inf, posinf=-np.inf, neginf=-np.inf)


def _backsubstitute(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], layer: int,
    coeffs: torch.Tensor, const: torch.Tensor, margin: torch.Tensor, box: torch.Tensor,
    inputs_lo: list[torch.Tensor], inputs_hi: list[torch.Tensor], *, paired: bool = False,
    onehot: _OneHot | None = None,
    halves: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lower bounds of rows ``coeffs·h + const``, ``h`` the input of layer ``layer``.

    Rows are flat: row ``r`` belongs to box ``box[r]`` and is widened by ``margin[r]``, the
    margin of its real terms down to the input box (:func:`_row_margins`), which also covers
    every partial concretisation; ``inputs_lo[j]``/``inputs_hi[j]`` bound the input of layer
    ``j`` for every box (``j = 0``: the box itself); ``halves`` caches their midpoints and
    radii per layer, filled on first use (:func:`_halves`; for ``j = 0``
    :func:`_input_halves`). Returns sound lower bounds ``(R,)`` and
    the input coefficients of the rows that reached the input (all rows, in order, unless
    ``paired``).

    With ``paired=True`` the rows are ``[+w; −w]`` halves for the same neurons (lower and
    negated upper bound of a pre-activation). After every step the partial bound is
    concretised against the bounds of the current layer's input (sound, and far cheaper than
    a step); a neuron proven stable there stops, since a stable neuron's relaxation is exact
    whatever its bounds. Only undecided neurons pay for the full depth.
    """
    total = coeffs.shape[0]
    result = torch.empty(total, dtype=coeffs.dtype)
    row_ids = torch.arange(total)
    for index in range(layer - 1, -1, -1):
        affine = affines[index]
        relaxation = relaxations.get(index)
        if relaxation is not None:
            coeffs, const = _through_relaxation(
                coeffs, const, relaxation.lower_slope.index_select(0, box),
                relaxation.upper_slope.index_select(0, box),
                relaxation.upper_intercept.index_select(0, box),
            )
        const = const + coeffs @ affine.bias
        coeffs = coeffs @ affine.weight
        if not paired or index == 0:
            continue
        if halves is None:
            halves = {}
        if index not in halves:
            halves[index] = _halves(inputs_lo[index], inputs_hi[index])
        mid, rad = halves[index]
        partial = _concretise_halves(
            coeffs, const, margin, mid.index_select(0, box), rad.index_select(0, box)
        )
        half = partial.shape[0] // 2
        decided_neuron = (partial[:half] >= 0.0) | (partial[half:] >= 0.0)
        if not bool(decided_neuron.any()):
            continue
        decided = torch.cat([decided_neuron, decided_neuron])
        result[row_ids[decided]] = partial[decided]
        keep = ~decided
        coeffs, const, margin = coeffs[keep], const[keep], margin[keep]
        box, row_ids = box[keep], row_ids[keep]
        if row_ids.numel() == 0:
            return result, coeffs
    if halves is None:
        halves = {}
    if 0 not in halves:
        halves[0] = _input_halves(inputs_lo[0], inputs_hi[0], onehot)
    mid, rad = halves[0]
    result[row_ids] = _concretise_input(
        coeffs, const, margin, mid.index_select(0, box), rad.index_select(0, box), onehot,
        box,
    )
    return result, coeffs


_RowSetup = tuple[list[_Affine], dict[int, _Relaxation], list[torch.Tensor],
                  list[torch.Tensor], _OneHot | None, torch.Tensor]


def _layer_rows(
    setup: _RowSetup, layer: int, box: torch.Tensor, neuron: torch.Tensor,
    halves: dict[int, tuple[torch.Tensor, ...]],
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
            affines, relaxations, layer, torch.cat([rows, -rows]), torch.cat([bias, -bias]),
            torch.cat([margin, margin]), torch.cat([b, b]), inputs_lo, inputs_hi, paired=True,
            onehot=onehot, halves=halves,
        )
        count = b.numel()
        lower[part] = bound[:count].to(torch.float64)
        upper[part] = -bound[count:].to(torch.float64)
    return lower, upper


def _crown_spec(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], spec: torch.Tensor,
    spec_margin: torch.Tensor, inputs_lo: list[torch.Tensor], inputs_hi: list[torch.Tensor],
    onehot: _OneHot | None, needed: torch.Tensor | None = None,
    halves: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None,
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
            affines, relaxations, len(affines) - 1,
            torch.cat([folded[part], -folded[part]]),
            torch.cat([folded_bias[part], -folded_bias[part]]),
            torch.cat([margin[part], margin[part]]),
            torch.cat([b, b]), inputs_lo, inputs_hi, onehot=onehot, halves=halves,
        )
        count = b.numel()
        lower[part] = bound[:count]
        upper[part] = -bound[count:]
        sensitivity[part] = coeffs[:count].abs() + coeffs[count:].abs()
        signed[part] = coeffs[:count]
        signed_upper[part] = -coeffs[count:]
    lower, upper = _sanitise(lower, upper)
    return (
        lower.reshape(batch, rows), upper.reshape(batch, rows),
        sensitivity.reshape(batch, rows, width),
        (signed.reshape(batch, rows, width), signed_upper.reshape(batch, rows, width)),
    )
