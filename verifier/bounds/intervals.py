"""Interval bound propagation (IBP): sound interval images of affine maps and activations,
layer by layer, infinity-safe (never ``0·∞``), one-hot groups exact on the first layer, known
signs narrowing the pre-activations."""

from __future__ import annotations

import math

import numpy as np

from verifier.arrays import Array, astype, namespace, shared_rows
from verifier.bounds.activation import _activate_interval
from verifier.bounds.affine import (
    _Affine,
    _apply,
    _folded,
    _halves,
    _nonzero_inputs,
    _restricted,
    _widened,
)
from verifier.bounds.carried import _with_carried
from verifier.bounds.onehot import (
    _group_extreme,
    _input_halves,
    _OneHot,
    _shared_group_extremes,
)

GROUP_CHUNK = 1 << 22


def _interval_affine(
    affine: _Affine, lo: Array, hi: Array
) -> tuple[Array, Array]:
    """Sound interval image of ``weight @ x + bias`` for ``x`` in ``[lo, hi]`` (batched; the
    map may be shared or one per box).

    Finite rows use the midpoint/radius form; rows with infinite coordinates use
    infinity-safe arithmetic: an infinite coordinate contributes ±∞ only through a non-zero
    weight, never ``0·∞``. Widened by the margin rule and sanitised
    (:mod:`verifier.bounds.affine`).
    """
    xp = namespace(lo)
    finite = xp.all(xp.isfinite(lo), axis=1) & xp.all(xp.isfinite(hi), axis=1)
    if bool(finite.all()):
        return _finite_interval_affine(affine, lo, hi)
    out_lo = xp.empty((lo.shape[0], affine.weight.shape[-2]), dtype=xp.float64)
    out_hi = xp.empty_like(out_lo)
    if finite.any():
        out_lo[finite], out_hi[finite] = _finite_interval_affine(
            _restricted(affine, finite), lo[finite], hi[finite]
        )
    infinite = ~finite
    if infinite.any():
        part = _restricted(affine, infinite)
        i_lo, i_hi = lo[infinite], hi[infinite]
        positive, negative = part.positive, part.negative
        lo_f = xp.where(xp.isfinite(i_lo), i_lo, xp.zeros_like(i_lo))
        hi_f = xp.where(xp.isfinite(i_hi), i_hi, xp.zeros_like(i_hi))
        c_lo, c_hi = _widened(
            part,
            _apply(positive, lo_f) + _apply(negative, hi_f) + part.bias,
            _apply(positive, hi_f) + _apply(negative, lo_f) + part.bias,
            lo_f, hi_f, _nonzero_inputs(i_lo, i_hi),
        )
        lo_inf = astype(i_lo == -np.inf, xp.float64)
        hi_inf = astype(i_hi == np.inf, xp.float64)
        has_pos, has_neg = part.may_be_positive, part.may_be_negative
        to_minus = (_apply(has_pos, lo_inf) + _apply(has_neg, hi_inf)) > 0
        to_plus = (_apply(has_pos, hi_inf) + _apply(has_neg, lo_inf)) > 0
        c_lo[to_minus] = -np.inf
        c_hi[to_plus] = np.inf
        out_lo[infinite], out_hi[infinite] = c_lo, c_hi
    return out_lo, out_hi


def _finite_interval_affine(
    affine: _Affine, lo: Array, hi: Array
) -> tuple[Array, Array]:
    """:func:`_interval_affine` on boxes whose coordinates are all finite (midpoint/radius)."""
    mid, rad = _halves(lo, hi)
    center = _apply(affine.weight, mid) + affine.bias
    radius = _apply(affine.abs_weight, rad)
    return _widened(affine, center - radius, center + radius, lo, hi)


def _first_interval(
    affine: _Affine, lo: Array, hi: Array, onehot: _OneHot | None
) -> tuple[Array, Array]:
    """:func:`_interval_affine` of a map applied to the input box, with every usable one-hot
    group bounded exactly by its allowed categories (boxes with an infinite coordinate keep
    the plain interval image). The margin's magnitude comes from the whole box, which holds
    every allowed one-hot vector, so it still dominates the rounding."""
    xp = namespace(lo)
    if onehot is None or not bool(xp.isfinite(lo).all() & xp.isfinite(hi).all()):
        return _interval_affine(affine, lo, hi)
    mid, rad = _input_halves(lo, hi, onehot)
    center = _apply(affine.weight, mid) + affine.bias
    radius = _apply(affine.abs_weight, rad)
    low, high = center - radius, center + radius
    if affine.weight.ndim == 2:
        group_low, group_high = _shared_group_extremes(affine.weight, onehot)
        return _widened(affine, low + group_low, high + group_high, lo, hi)
    step = max(1, GROUP_CHUNK // max(1, affine.weight.shape[-2] * math.prod(onehot.index.shape)))
    for start in range(0, lo.shape[0], step):
        part = slice(start, start + step)
        records = onehot.select(part)
        low[part] += _group_extreme(affine.weight[part], records)
        high[part] += _group_extreme(affine.weight[part], records, largest=True)
    return _widened(affine, low, high, lo, hi)


def _spec_interval(
    spec: Array, last: _Affine, lo: Array, hi: Array,
    onehot: _OneHot | None = None,
) -> tuple[Array, Array]:
    """IBP bound of ``spec @ (W h + b)`` with the spec folded into the last layer (the margin
    comes from the unfolded ``|spec|·|W|``, so cancellation in the fold is covered);
    ``onehot`` when ``h`` is the input box itself (a one-layer network)."""
    matrix = spec[0] if shared_rows(spec) else spec
    return _first_interval(_folded(matrix, last), lo, hi, onehot)


def _with_signs(
    z_lo: Array, z_hi: Array, signs: Array | None
) -> tuple[Array, Array]:
    """Pre-activation bounds narrowed by known signs (``1``: ``z >= 0`` on the box, ``-1``:
    ``z <= 0``, ``0``: nothing known); ``None`` leaves them as they are."""
    if signs is None:
        return z_lo, z_hi
    xp = namespace(z_lo)
    return (
        xp.where(signs > 0, xp.clip(z_lo, min=0.0), z_lo),
        xp.where(signs < 0, xp.clip(z_hi, max=0.0), z_hi),
    )


def _layer_signs(
    signs: Array | None, affines: list[_Affine]
) -> list[Array | None]:
    """``signs`` ``(B, N)`` cut into one ``(B, n_k)`` block per layer but the last (``None``
    for layers without a kink, or when no signs are known)."""
    blocks: list[Array | None] = []
    start = 0
    for affine in affines[:-1]:
        if signs is None or affine.slope is None:
            blocks.append(None)
            continue
        width = affine.weight.shape[0]
        blocks.append(signs[:, start : start + width])
        start += width
    return blocks


def _ibp_layers(
    affines: list[_Affine], lo: Array, hi: Array, onehot: _OneHot | None = None,
    signs: list[Array | None] | None = None,
    carried: list[tuple[Array, Array] | None] | None = None,
) -> tuple[list[Array], list[Array]]:
    """Pre-activation IBP bounds of every layer but the last (narrowed by known signs and
    intersected with carried bounds, :mod:`verifier.bounds.carried`)."""
    pre_lo, pre_hi = [], []
    h_lo, h_hi = lo, hi
    for index, affine in enumerate(affines[:-1]):
        if index == 0:
            z_lo, z_hi = _first_interval(affine, h_lo, h_hi, onehot)
        else:
            z_lo, z_hi = _interval_affine(affine, h_lo, h_hi)
        if signs is not None:
            z_lo, z_hi = _with_signs(z_lo, z_hi, signs[index])
        if carried is not None:
            z_lo, z_hi = _with_carried(z_lo, z_hi, carried[index])
        pre_lo.append(z_lo)
        pre_hi.append(z_hi)
        h_lo, h_hi = _activate_interval(z_lo, z_hi, affine.slope)
    return pre_lo, pre_hi


def _post_activation(
    affines: list[_Affine], pre_lo: list[Array], pre_hi: list[Array],
    lo: Array, hi: Array, index: int,
) -> tuple[Array, Array]:
    """Bounds of the input to layer ``index`` (the box, or the previous layer's activation)."""
    if index == 0:
        return lo, hi
    return _activate_interval(pre_lo[index - 1], pre_hi[index - 1], affines[index - 1].slope)
