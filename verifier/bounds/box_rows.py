"""CROWN's bounds of the second map's pre-activations computed box by box: all of a box's
rows in one product, over the input columns the box leaves free.

A row of the second map's pre-activations is back-substituted through the first map's
relaxation to the input: ``±W2[n]`` meets the relaxation (a non-negative coefficient takes
the lower slope, a negative one the upper slope and its intercept), then the first map
``W1``. Per box, with ``P``/``N`` the positive and negative parts of ``W2``, ``λl``/``λu``
the lower and upper slopes and ``μ`` the upper intercepts, the lower row of neuron ``n`` is
``(P[n]·diag(λl) + N[n]·diag(λu))·W1`` and its constant ``N[n]·μ`` (the upper row, the
lower bound of ``−z_n``, swaps ``P`` and ``−N``): one shared matrix ``[[P, N], [−N, −P]]``
times a per-box factor ``[[λl⊙W1], [λu⊙W1]]``. Only the box's free columns of ``W1`` enter
the factor; the columns it holds at one value (``lo == hi``) are summed into one more column
(their values times ``W1``, plus the first map's bias), and the intercepts ride in another.
The factors of many boxes sit side by side in one product.

Every real term of a bound is a term of the row-by-row back-substitution (the sign split is
exact: each coefficient meets its own relaxation slope, the other block holds an exact zero,
and adding an exact zero rounds nothing), so its value is the same in real arithmetic and
each term meets at most the roundings the margin rule counts for any order of summation
(:func:`verifier.numerics.rounding.network_roundings`): the margins of the row-by-row pass
apply unchanged. A fixed column's coefficient is zero in the concretisation, which then adds
nothing for it (its radius is zero; a one-hot group's allowed categories are the box's, and a
fixed column of a usable group holds 1 only at its one allowed category).

The product multiplies ``2·m × 2·n`` by ``2·n × (free + 2)`` per box against ``2 × n`` by
``n × inputs`` per unstable row (``m`` rows, ``n`` first-map neurons): cheaper where a box
leaves few inputs free (a late PV box on a 103-column model leaves ~15, with ~69 rows), and
it skips the per-row gathers and clamps of the relaxation. :func:`cheaper_by_box` chooses.
"""

from __future__ import annotations

from verifier.arrays import Array, astype, namespace, nonzero, size, take, unique_values
from verifier.bounds.activation import _Relaxation
from verifier.bounds.affine import _Affine
from verifier.bounds.backward import _concretise_input, _layer_rows, _RowSetup
from verifier.bounds.onehot import _input_halves, _OneHot

# Boxes whose factors share one product (a chunk's factor holds at most
# 2·n × (inputs + 2) × BOX_CHUNK entries: 21 MB in float32 on the 787-69 net).
BOX_CHUNK = 32
# The first map must be this many times wider than the second for the box product: below
# it the per-box spreading and gathers outweigh the product saved (Adult-13 2×64, ratio 1:
# the tightening took ~20 % more CPU by box; the 787-69 net, ratio 11.4: 50–70 % less).
WIDE_RATIO = 4


def layer_rows(
    setup: _RowSetup, layer: int, box: Array, neuron: Array, halves: dict[int, Array],
) -> tuple[Array, Array]:
    """:func:`verifier.bounds.backward._layer_rows` (the same arguments and guarantee), with
    the second map's rows (``layer`` 1 behind a relaxation) of the boxes where
    :func:`cheaper_by_box` says so computed by :func:`second_map_rows`."""
    affines, relaxations, inputs_lo, inputs_hi, onehot, margins = setup
    if layer != 1 or 0 not in relaxations or size(box) == 0:
        return _layer_rows(setup, layer, box, neuron, halves)
    by_box = cheaper_by_box(box, inputs_lo[0], inputs_hi[0], affines[1].weight.shape[0],
                            affines[0].weight.shape[0])
    if not bool(by_box.any()):
        return _layer_rows(setup, layer, box, neuron, halves)
    xp = namespace(box)
    lower = xp.empty(size(box), dtype=xp.float64)
    upper = xp.empty_like(lower)
    chosen, rest = nonzero(by_box)[0], nonzero(~by_box)[0]
    lower[chosen], upper[chosen] = second_map_rows(
        affines, relaxations, inputs_lo[0], inputs_hi[0], onehot, margins,
        take(box, chosen), take(neuron, chosen), halves)
    if size(rest):
        lower[rest], upper[rest] = _layer_rows(
            setup, layer, take(box, rest), take(neuron, rest), halves)
    return lower, upper


def cheaper_by_box(box: Array, lo: Array, hi: Array, rows: int, first: int) -> Array:
    """Per pair (``box[r]``, a box of the input bounds ``lo``/``hi``): whether its box's
    product (:func:`second_map_rows`: ``2·rows × (free + 2)`` entries, each an inner product
    of length ``2·first``) takes fewer multiply-adds than its pairs' row-by-row products (``2
    × (inputs + 1)`` entries per pair, of length ``first``), on a first map of ``first``
    neurons at least :data:`WIDE_RATIO` times the second's ``rows`` (none otherwise). On the
    787-69 net's batches the threshold's factor 2 made no measurable difference against 1;
    the per-row gathers and clamps the box product skips are not counted."""
    xp = namespace(lo)
    if first < WIDE_RATIO * rows:
        return xp.zeros(box.shape[0], dtype=xp.bool)
    boxes, inverse = unique_values(box)
    pairs = xp.bincount(inverse)
    free = xp.sum(take(lo, boxes) < take(hi, boxes), axis=1)
    return take(2 * rows * (free + 2) < pairs * (lo.shape[1] + 1), inverse)


def second_map_rows(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], lo: Array, hi: Array,
    onehot: _OneHot | None, margins: Array, box: Array, neuron: Array,
    halves: dict[int, Array],
) -> tuple[Array, Array]:
    """CROWN's sound lower and upper bounds (float64) of the pre-activations ``(box[r],
    neuron[r])`` of ``affines[1]`` through the relaxation ``relaxations[0]`` of the first
    map's output, over the input boxes ``lo``/``hi`` (one-hot groups by their allowed
    categories), each widened by ``margins[box, neuron]``; computed in the float type of
    the maps (module docstring). ``halves``: the cache of
    :func:`verifier.bounds.backward._backsubstitute` (its entry 0 is read or filled)."""
    first, second = affines[0], affines[1]
    xp = namespace(first.weight)
    if 0 not in halves:
        halves[0] = xp.stack(_input_halves(lo, hi, onehot), axis=1)
    positive, negative = second.positive, second.negative
    shared = xp.concatenate([xp.concatenate([positive, negative], axis=1),
                             xp.concatenate([-negative, -positive], axis=1)], axis=0)
    bias = xp.stack([second.bias, -second.bias])[:, :, None]
    rows, width = second.weight.shape[0], lo.shape[1]
    lower = xp.empty(size(box), dtype=xp.float64)
    upper = xp.empty_like(lower)
    boxes, inverse = unique_values(box)
    for start in range(0, boxes.shape[0], BOX_CHUNK):
        group = boxes[start : start + BOX_CHUNK]
        count = group.shape[0]
        free = take(lo, group) < take(hi, group)
        owner, column = nonzero(free)
        held = xp.where(free, xp.zeros_like(lo[:1]), take(lo, group))
        shifted = held @ first.weight.T + first.bias
        parts = take(relaxations[0].stacked, group)
        inputs = take(first.weight, column, axis=1)
        factor = xp.concatenate([
            xp.concatenate([take(parts[:, 0], owner).T * inputs, (parts[:, 0] * shifted).T,
                            xp.zeros_like(shifted.T)], axis=1),
            xp.concatenate([take(parts[:, 1], owner).T * inputs, (parts[:, 1] * shifted).T,
                            parts[:, 2].T], axis=1),
        ], axis=0)
        product = (shared @ factor).reshape(2, rows, -1)
        spread = xp.zeros((2, rows, count, width), dtype=product.dtype)
        columns = size(column)
        spread[:, :, owner, column] = product[:, :, :columns]
        const = (product[:, :, columns : columns + count]
                 + product[:, :, columns + count :] + bias)
        pairs = nonzero((inverse >= start) & (inverse < start + count))[0]
        local, n, b = take(inverse, pairs) - start, take(neuron, pairs), take(box, pairs)
        mid_rad = take(halves[0], b)
        value = _concretise_input(spread[:, n, local], const[:, n, local], margins[b, n],
                                  mid_rad[:, 0], mid_rad[:, 1], onehot, b)
        lower[pairs] = astype(value[0], xp.float64)
        upper[pairs] = -astype(value[1], xp.float64)
    return lower, upper
