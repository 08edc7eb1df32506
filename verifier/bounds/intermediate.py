"""CROWN with CROWN intermediate bounds: every hidden layer's pre-activation bounds are
tightened in turn on its unstable neurons (IBP-stable or sign-known neurons are never
back-substituted), its activations relaxed, and the specification rows bounded last.

Also the magnitudes of every layer's real terms (:class:`_Magnitudes`, the margin rule's
input) and the float32 rows of the last hidden layer where
:mod:`verifier.single_precision` proves them safe.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verifier.arrays import Array, astype, copy, namespace, nonzero, size
from verifier.bounds.activation import (
    LowerSlopes,
    _activate_interval,
    _dead,
    _relax,
    _Relaxation,
)
from verifier.bounds.affine import _Affine, _nonzero_inputs, _row_margins
from verifier.bounds.backward import _crown_spec
from verifier.bounds.box_rows import layer_rows
from verifier.bounds.carried import _with_carried
from verifier.bounds.intervals import _interval_affine, _spec_interval, _with_signs
from verifier.bounds.onehot import _OneHot
from verifier.numerics import SOUNDNESS_ABS_MARGIN
from verifier.single_precision import single_margins

# A float32 row's margin may take at most this share of its bound width, or the row is
# redone in float64 (see _crown_layer_bounds).
SINGLE_SHARE = 0.01
# Rows tried in float32 before a layer's batch is committed to it, and the share of them
# that may need float64 (each costs both).
SINGLE_TRIAL = 64
SINGLE_TRIAL_MISSES = 0.1


@dataclass
class _Magnitudes:
    """Per box, for the pre-activations of every layer: an upper bound of the sum of the
    absolute values of the real terms that make them up (the network evaluated in absolute
    values from ``max(|lo|, |hi|)``, relaxations included), and whether any such term may be
    non-zero (structurally: non-zero factors only, dead ReLUs output exactly zero)."""

    value: list[Array] = field(default_factory=list)
    support: list[Array] = field(default_factory=list)

    def push(
        self, affine: _Affine, value_in: Array, support_in: Array
    ) -> None:
        """Add the pre-activations of ``affine`` given its input's magnitude and support."""
        self.value.append(value_in @ affine.mag_weight.T + affine.mag_bias)
        reach = support_in @ affine.support_weight.T
        self.support.append(astype((reach > 0) | affine.support_bias, namespace(reach).float64))

    def activated(
        self, relaxation: _Relaxation | None, dead: Array | None
    ) -> tuple[Array, Array]:
        """Magnitude and support of the last pushed layer's output (after its activation)."""
        value, support = self.value[-1], self.support[-1]
        if relaxation is None:
            return value, support
        value = relaxation.slope_bound * value + relaxation.upper_intercept
        return value, namespace(value).where(dead, 0.0, support)


def _single_rows(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], layer: int,
    inputs_lo: list[Array], inputs_hi: list[Array], onehot: _OneHot | None,
    magnitude: Array, support: Array,
) -> tuple[list[_Affine], dict[int, _Relaxation], list[Array], list[Array],
           _OneHot | None, Array] | None:
    """Float32 copies of what back-substituting ``layer``'s rows reads, with the float32
    margins of :func:`verifier.single_precision.single_margins`; ``None`` where float32 is
    not safe for them."""
    below = range(layer)
    margins = single_margins(
        [affines[j].weight for j in range(layer + 1)], [affines[j].bias for j in range(layer + 1)],
        [relaxations[j].slope_bound if j in relaxations else None for j in below],
        [relaxations[j].upper_intercept if j in relaxations else None for j in below],
        [*inputs_lo, *inputs_hi], 0 if onehot is None else onehot.index.shape[0],
        magnitude, support, SOUNDNESS_ABS_MARGIN, affines[0].fold_roundings,
    )
    if margins is None:
        return None
    single = namespace(magnitude).float32
    single_affines = [
        _Affine(astype(a.weight, single), astype(a.bias, single), a.abs_weight, a.slope,
                a.mag_weight, a.mag_bias, a.support_weight, a.support_bias, a.rel_margin,
                a.fold_roundings)
        for a in affines[: layer + 1]
    ]
    single_relaxations = {
        j: _Relaxation(astype(r.lower_slope, single), astype(r.upper_slope, single),
                       astype(r.upper_intercept, single), r.slope_bound)
        for j, r in relaxations.items()
    }
    single_onehot = None if onehot is None else _OneHot(
        onehot.index, onehot.allowed, onehot.usable, astype(onehot.free, single),
        astype(onehot.shut, single), onehot.columns,
    )
    return (single_affines, single_relaxations, [astype(t, single) for t in inputs_lo],
            [astype(t, single) for t in inputs_hi], single_onehot, margins)


def _crown_layer_bounds(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], layer: int,
    ibp_lo: Array, ibp_hi: Array, magnitude: Array,
    support: Array, inputs_lo: list[Array], inputs_hi: list[Array],
    onehot: _OneHot | None, halves: dict[Any, dict[int, Array]],
    active: Array,
) -> tuple[Array, Array]:
    """Tighten the IBP pre-activation bounds of ``layer`` by CROWN on its unstable neurons
    (``magnitude``/``support``: per box and neuron, the magnitude of the neuron's real terms
    and whether one may be non-zero; ``halves``: per float type, the cache of
    :func:`_backsubstitute`; ``active``: the boxes to tighten, the others keep their IBP
    bounds).

    The last hidden layer's rows run in float32 where :func:`_single_rows` allows it and the
    margin is at most :data:`SINGLE_SHARE` of the row's bound width; rows where it is more
    are redone in float64 (both results are sound, and are intersected). The first
    :data:`SINGLE_TRIAL` rows are a trial: when more than :data:`SINGLE_TRIAL_MISSES` of them
    would be redone, the whole layer runs in float64 and the trial is all float32 costs.
    Earlier layers stay in float64: a float32 margin there widens every later layer's
    relaxation (ACAS Xu N4,3 on 2 workers, 60 s: 688k boxes in float64, 526k–578k with
    float32 rows in any earlier layer, and a wider interval)."""
    xp = namespace(ibp_lo)
    unstable = (ibp_lo < 0) & (ibp_hi > 0) & active[:, None]
    box, neuron = nonzero(unstable)
    out_lo, out_hi = copy(ibp_lo), copy(ibp_hi)
    rows = size(box)
    if rows == 0:
        return out_lo, out_hi
    single = None
    if layer == len(affines) - 2:
        single = _single_rows(affines, relaxations, layer, inputs_lo, inputs_hi, onehot,
                              magnitude, support)
    coarse = xp.ones(rows, dtype=xp.bool)
    lower = xp.full((rows,), -np.inf, dtype=xp.float64)
    upper = xp.full((rows,), np.inf, dtype=xp.float64)
    if single is not None:
        trial = slice(0, SINGLE_TRIAL)
        cache = halves.setdefault(xp.float32, {})
        margin = astype(single[-1][box, neuron], xp.float64)
        lower[trial], upper[trial] = layer_rows(single, layer, box[trial], neuron[trial], cache)
        coarse[trial] = margin[trial] > SINGLE_SHARE * (upper[trial] - lower[trial])
        if float(xp.mean(astype(coarse[trial], xp.float64))) <= SINGLE_TRIAL_MISSES:
            rest = slice(SINGLE_TRIAL, None)
            lower[rest], upper[rest] = layer_rows(single, layer, box[rest], neuron[rest], cache)
            coarse = margin > SINGLE_SHARE * (upper - lower)
        else:
            coarse[:] = True
    if bool(coarse.any()):
        double = (affines, relaxations, inputs_lo, inputs_hi, onehot,
                  _row_margins(magnitude, support, affines[layer].rel_margin))
        b, n = box[coarse], neuron[coarse]
        redo_lo, redo_hi = layer_rows(double, layer, b, n, halves.setdefault(xp.float64, {}))
        lower[coarse] = xp.maximum(lower[coarse], redo_lo)
        upper[coarse] = xp.minimum(upper[coarse], redo_hi)
    out_lo[box, neuron] = xp.maximum(out_lo[box, neuron], lower)
    out_hi[box, neuron] = xp.minimum(out_hi[box, neuron], upper)
    return out_lo, out_hi


def _crown_finite(
    affines: list[_Affine], spec: Array, lo: Array, hi: Array,
    onehot: _OneHot | None, signs: list[Array | None], needed: Array | None,
    ibp: tuple[list[Array], list[Array]], give_up_saturated: bool = False,
    tighten: Array | None = None, lower_slopes: LowerSlopes = "adaptive",
    carried: list[tuple[Array, Array] | None] | None = None,
) -> tuple[Array, Array, list[Array], list[Array],
           dict[int, _Relaxation], Array, tuple[Array, ...], Array,
           float]:
    """CROWN with CROWN intermediate bounds on boxes whose IBP bounds are finite; also
    returns ``|A_lower| + |A_upper|``, the final linear bounds ``(A_lower, CROWN's lower
    bound, A_upper, CROWN's upper bound)`` before the intersection with IBP (see
    :class:`LinearBounds`) and the margins of the spec rows (for alpha-CROWN). Neurons whose sign
    is known (``signs``, per layer) are stable: no back-substitution runs for them. Spec rows
    not ``needed`` (per box) keep their IBP bounds. With ``give_up_saturated``, a box with a
    kink layer whose every neuron is unstable keeps IBP bounds from the next layer on (spec
    rows included; the first layer, bounded exactly by intervals, is not counted).
    ``ibp``: (lower list, upper list), the caller's IBP pre-activation bounds of the first
    one or two layers on these boxes, narrowed by the known signs and intersected with the
    carried bounds (empty lists without a hidden layer). The first layer's are exact
    intervals, so CROWN has nothing to add; the second layer's are the interval image of the
    first layer's activation, which this loop would recompute from the same arrays by the
    same operations (the same bits), before CROWN tightens them. A later layer's interval
    reads CROWN-tightened inputs, so it is computed here. ``tighten``: the boxes whose last
    hidden layer CROWN tightens (None: all; the others keep their IBP pre-activation bounds
    there; earlier layers are tightened on every box). ``lower_slopes``: the relaxations'
    lower-slope rule (:func:`_relax`).
    ``carried``: per layer, bounds carried from an enclosing box (None where none,
    :mod:`verifier.bounds.carried`), intersected with the layer's bounds before it is
    tightened. Last in the result: the CPU seconds of the hidden layers' tightening."""
    xp = namespace(lo)
    relaxations: dict[int, _Relaxation] = {}
    active = xp.ones(lo.shape[0], dtype=xp.bool)
    tightened = active if tighten is None else tighten
    tightening = 0.0
    pre_lo: list[Array] = []
    pre_hi: list[Array] = []
    inputs_lo, inputs_hi = [lo], [hi]
    halves: dict[int, Array] = {}
    layer_halves: dict[Any, dict[int, Array]] = {
        xp.float64: halves
    }
    magnitudes = _Magnitudes()
    value_in = xp.maximum(xp.abs(lo), xp.abs(hi))
    support_in = _nonzero_inputs(lo, hi)
    for index, affine in enumerate(affines[:-1]):
        if index < len(ibp[0]):
            z_lo, z_hi = ibp[0][index], ibp[1][index]
        else:
            z_lo, z_hi = _with_signs(
                *_interval_affine(affine, inputs_lo[index], inputs_hi[index]), signs[index])
            if carried is not None:
                z_lo, z_hi = _with_carried(z_lo, z_hi, carried[index])
        magnitudes.push(affine, value_in, support_in)
        if index > 0 and affine.slope is not None:
            started = time.process_time()
            z_lo, z_hi = _crown_layer_bounds(
                affines, relaxations, index, z_lo, z_hi,
                magnitudes.value[-1], magnitudes.support[-1],
                inputs_lo, inputs_hi, onehot, layer_halves,
                active & tightened if index == len(affines) - 2 else active,
            )
            tightening += time.process_time() - started
        pre_lo.append(z_lo)
        pre_hi.append(z_hi)
        dead = None
        if affine.slope is not None:
            relaxations[index] = _relax(z_lo, z_hi, affine.slope, lower_slopes)
            dead = _dead(z_hi, affine.slope)
            if give_up_saturated and index > 0:
                active &= ~xp.all((z_lo < 0) & (z_hi > 0), axis=1)
        value_in, support_in = magnitudes.activated(relaxations.get(index), dead)
        h_lo, h_hi = _activate_interval(z_lo, z_hi, affine.slope)
        inputs_lo.append(h_lo)
        inputs_hi.append(h_hi)
    last = len(affines) - 1
    magnitudes.push(affines[last], value_in, support_in)
    spec_margin = _row_margins(
        (xp.abs(spec) @ magnitudes.value[-1][..., None])[..., 0],
        (astype(spec != 0, xp.float64) @ magnitudes.support[-1][..., None])[..., 0],
        affines[last].rel_margin,
    )
    if not bool(active.all()):
        rows = spec.shape[1]
        kept = xp.broadcast_to(active[:, None], (active.shape[0], rows))
        needed = kept if needed is None else needed & kept
    lower, upper, coefficients, (signed_lower, signed_upper) = _crown_spec(
        affines, relaxations, spec, spec_margin, inputs_lo, inputs_hi, onehot, needed, halves
    )
    ibp_lower, ibp_upper = _spec_interval(
        spec, affines[last], inputs_lo[last], inputs_hi[last], onehot if last == 0 else None
    )
    return (
        xp.maximum(lower, ibp_lower), xp.minimum(upper, ibp_upper),
        pre_lo, pre_hi, relaxations, coefficients,
        (signed_lower, lower, signed_upper, upper), spec_margin, tightening,
    )
