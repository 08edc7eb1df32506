"""The affine maps bounds propagate through, and the margin rule (DESIGN D2).

:class:`_Affine` is one layer (or a specification folded into the last layer) as numpy
arrays or torch tensors (the backend, :func:`_prepare`), with the magnitudes and supports of
its *real* terms beside the float coefficients, so that cancellation in a fold is never
mistaken for an exact zero. :func:`_widened` and :func:`_row_margins` widen a computed
bound by ``rel_margin × magnitude + SOUNDNESS_ABS_MARGIN`` (through
:func:`verifier.numerics.tensor.magnitude_margin`), where :func:`_prepare` sets
``rel_margin`` per network (:func:`_network_rel_margin`), and :func:`_sanitise` turns an
overflowed or NaN bound into the infinite one on its side; the package docstring
(:mod:`verifier.bounds`) states the guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from verifier.arrays import Array, astype, from_numpy, namespace
from verifier.network import Layer, Network
from verifier.numerics import SOUNDNESS_REL_MARGIN, network_rel_margin, network_roundings
from verifier.numerics.tensor import magnitude_margin


@dataclass(frozen=True)
class _Affine:
    """One affine map as arrays of one backend, with what the margin rule needs about it.

    ``weight``/``bias`` are the (possibly folded) float coefficients used for values;
    ``mag_weight``/``mag_bias`` are entrywise upper bounds of the absolute values of the real
    terms that make them up (``|C|·|W|`` for a folded ``C·W``); ``support_weight`` (0/1) and
    ``support_bias`` (bool) say which real coefficients may be non-zero (structurally).
    ``rel_margin``: the relative margin of every bound computed through the network this
    map belongs to (:func:`_network_rel_margin`); ``fold_roundings``: that network's
    :attr:`~verifier.network.Network.fold_roundings` (0: no fold; ``None``: not counted).
    """

    weight: Array
    bias: Array
    abs_weight: Array
    slope: Array | None  # per-neuron left slope of the kink; None: no activation
    mag_weight: Array
    mag_bias: Array
    support_weight: Array
    support_bias: Array
    rel_margin: float = SOUNDNESS_REL_MARGIN
    fold_roundings: int | None = 0

    @cached_property
    def positive(self) -> Array:
        """The weight's positive part (``max(w, 0)``)."""
        return namespace(self.weight).clip(self.weight, min=0.0)

    @cached_property
    def negative(self) -> Array:
        """The weight's negative part (``min(w, 0)``)."""
        return namespace(self.weight).clip(self.weight, max=0.0)

    @cached_property
    def may_be_positive(self) -> Array:
        """1.0 where the real coefficient may be positive: its float is positive and not
        within rounding of zero, or it is within rounding of zero with a real term that may
        be non-zero (a folded coefficient there has an unknown real sign)."""
        return self._signed_support(self.positive > 0)

    @cached_property
    def may_be_negative(self) -> Array:
        """1.0 where the real coefficient may be negative (see :attr:`may_be_positive`)."""
        return self._signed_support(self.negative < 0)

    def _signed_support(self, signed: Array) -> Array:
        xp = namespace(self.weight)
        certain = xp.abs(self.weight) > SOUNDNESS_REL_MARGIN * self.mag_weight
        unsure = (self.support_weight > 0) & ~certain
        return astype(signed & certain | unsure, xp.float64)


def _affine(
    weight: Array, bias: Array, slope: Array | None = None,
    weight_magnitude: Array | None = None, bias_magnitude: Array | None = None,
    rel_margin: float = SOUNDNESS_REL_MARGIN, fold_roundings: int | None = 0,
) -> _Affine:
    """An affine map whose real coefficients' terms have the given magnitudes (default: the
    coefficients' absolute values, for coefficients that are not folded), in a network whose
    bounds take the relative margin ``rel_margin`` and whose folds left ``fold_roundings``."""
    xp = namespace(weight)
    abs_weight = xp.abs(weight)
    mag_weight = abs_weight if weight_magnitude is None else weight_magnitude
    mag_bias = xp.abs(bias) if bias_magnitude is None else bias_magnitude
    return _Affine(
        weight, bias, abs_weight, slope, mag_weight, mag_bias,
        astype(mag_weight != 0, xp.float64), mag_bias != 0, rel_margin, fold_roundings,
    )


def _folded(spec: Array, last: _Affine) -> _Affine:
    """``spec @ last`` as one affine map (``spec``: ``(S, n)``, or ``(B, S, n)`` for one
    matrix per box), keeping the unfolded magnitudes and supports so that cancellation in
    ``spec @ W`` is never mistaken for an exact zero."""
    xp = namespace(spec)
    weight = spec @ last.weight
    spec_abs = xp.abs(spec)
    spec_support = astype(spec != 0, xp.float64)
    return _Affine(
        weight, spec @ last.bias, xp.abs(weight), None,
        spec_abs @ last.mag_weight, spec_abs @ last.mag_bias,
        astype((spec_support @ last.support_weight) > 0, xp.float64),
        (spec_support @ astype(last.support_bias, xp.float64)) > 0, last.rel_margin,
        last.fold_roundings,
    )


def _restricted(affine: _Affine, mask: Array) -> _Affine:
    """The affine map for the boxes in ``mask`` (itself when shared by every box)."""
    if affine.weight.ndim == 2:
        return affine
    return _Affine(
        affine.weight[mask], affine.bias[mask], affine.abs_weight[mask], None,
        affine.mag_weight[mask], affine.mag_bias[mask], affine.support_weight[mask],
        affine.support_bias[mask], affine.rel_margin, affine.fold_roundings,
    )


def _apply(matrix: Array, vectors: Array) -> Array:
    """``matrix @ v`` for every row ``v`` of ``vectors``: ``matrix`` shared ``(S, n)`` or one
    per row ``(B, S, n)``."""
    if matrix.ndim == 2:
        return vectors @ matrix.T
    return (matrix @ vectors[..., None])[..., 0]


class PreparedNetwork:
    """A network as the bounds read it, built once: lowered, with its affine maps per
    backend (:func:`_prepare`, on first use) and the input columns it reads. Passed to
    :func:`verifier.bounds.compute_bounds` in place of the network, every call reuses them
    (the same arrays, so the same bounds bit for bit) instead of rebuilding them; the caller
    must leave the network's arrays unchanged. A copy for another process (pickling) carries
    the network only and builds its own maps there."""

    def __init__(self, network: Network) -> None:
        self.network = network
        self._maps: dict[bool, tuple[Network, list[_Affine]]] = {}
        self._read: np.ndarray | None = None

    def maps(self, use_torch: bool) -> tuple[Network, list[_Affine]]:
        """:func:`_prepare` of the network on the chosen backend, built on first use."""
        if use_torch not in self._maps:
            self._maps[use_torch] = _prepare(self.network, use_torch)
        return self._maps[use_torch]

    def read_inputs(self) -> np.ndarray:
        """:meth:`Network.read_inputs`, computed on first use."""
        if self._read is None:
            self._read = self.network.read_inputs()
        return self._read

    def __getstate__(self) -> dict[str, object]:
        return {"network": self.network, "_maps": {}, "_read": None}


def _prepare(network: Network, use_torch: bool = True) -> tuple[Network, list[_Affine]]:
    """Lower the network and make sure the last layer is linear (append identity if not);
    its maps as torch tensors (``use_torch``) or numpy arrays, sharing the layers' memory."""
    lowered = network.lowered()
    layers = list(lowered.layers)
    if layers[-1].activation != "none":
        width = layers[-1].out_features
        layers.append(Layer(np.eye(width), np.zeros(width), "none"))
        lowered = Network(layers, list(lowered.input_names), list(lowered.output_names))
    affines = []
    relative, folds = _network_rel_margin(lowered), lowered.fold_roundings
    for layer in layers:
        slope = (
            None if layer.activation == "none"
            else from_numpy(layer.negative_slope_effective, use_torch)
        )
        assert layer.weight_magnitude is not None and layer.bias_magnitude is not None
        affines.append(
            _affine(
                from_numpy(layer.weight, use_torch), from_numpy(layer.bias, use_torch),
                slope,
                from_numpy(layer.weight_magnitude, use_torch),
                from_numpy(layer.bias_magnitude, use_torch), relative, folds,
            )
        )
    return lowered, affines


def _network_rel_margin(network: Network) -> float:
    """The relative margin of every bound of ``network`` (lowered): ``2·gamma(r + F)`` with
    ``r`` the roundings a real term meets through every map and a specification folded into
    the last (:func:`~verifier.numerics.rounding.network_roundings`, at most ``inputs / 2``
    one-hot groups) and ``F`` the roundings its folds left in its coefficients
    (:attr:`~verifier.network.Network.fold_roundings`, 0 where they are the model's own).

    Why ``F`` is enough: a bound is a float evaluation of a sum of products of one
    coefficient per layer (and box coordinates, relaxation factors); a folded coefficient is
    ``Σ t·(1 + θ_f)`` over real terms ``t`` of the model's real coefficient, so the bound is
    a float evaluation of the real network's terms in which each meets at most ``r + F``
    roundings (``(1 + θ_a)(1 + θ_b) = 1 + θ_{a+b}``), and the magnitude it is widened by is a
    float evaluation of those terms' absolute values with the same count (the recorded
    magnitudes are, :class:`~verifier.network.Layer`): the argument of
    :func:`~verifier.numerics.rounding.network_rel_margin` with ``r + F`` for ``r``. A folded
    network with a layer not counted (``F`` is ``None``: a constant the model's graph
    computed, a normalisation a ``.nnet`` file merges, a fold that may have underflowed)
    keeps :data:`~verifier.numerics.SOUNDNESS_REL_MARGIN` (``1e-9``). The counted margin is
    far smaller: ``1.47e-12`` on Adult RQ4's 32 × 40 network, where ``1e-9`` widened the
    bounds of the last layers by several output units (docs/decisions.md, issue 35), and
    about ``1e-13`` on a small network with a batch norm folded into it, where ``1e-9`` left
    near-tie points undecided."""
    folds = network.fold_roundings
    if folds is None:
        return SOUNDNESS_REL_MARGIN
    fan_ins = [layer.in_features for layer in network.layers] + [network.output_size]
    return network_rel_margin(
        network_roundings(fan_ins, network.input_size, network.input_size // 2) + folds)


def _sanitise(lower: Array, upper: Array) -> tuple[Array, Array]:
    """Replace bounds that overflowed or became NaN by the infinite bound on their side.

    A lower bound of ``+∞`` or NaN (an overflow, or ``∞ − ∞``) becomes ``−∞``, an upper bound
    of ``−∞`` or NaN becomes ``+∞``: always sound, never a finite value from a broken sum.
    """
    xp = namespace(lower)
    lower = xp.nan_to_num(lower, nan=-np.inf, posinf=-np.inf, neginf=-np.inf)
    upper = xp.nan_to_num(upper, nan=np.inf, posinf=np.inf, neginf=np.inf)
    return lower, upper


def _halves(lo: Array, hi: Array) -> tuple[Array, Array]:
    """Midpoint and radius of ``[lo, hi]`` without overflow (``lo/2 + hi/2``, ``hi/2 − lo/2``);
    the radius is never negative. Their rounding is covered by the margin rule."""
    return lo * 0.5 + hi * 0.5, hi * 0.5 - lo * 0.5


def _nonzero_inputs(lo: Array, hi: Array) -> Array:
    """1.0 where a box coordinate may be non-zero (its interval is not exactly ``{0}``)."""
    return astype((lo != 0) | (hi != 0), namespace(lo).float64)


def _widened(
    affine: _Affine, lower: Array, upper: Array,
    lo: Array, hi: Array, nonzero: Array | None = None,
) -> tuple[Array, Array]:
    """``[lower, upper]`` (values of ``affine`` over the finite box ``[lo, hi]``) widened by
    the margin rule, with the magnitude from the affine map's real terms, and sanitised.
    ``nonzero``: which coordinates may be non-zero, when ``[lo, hi]`` stands for a box whose
    infinite sides were replaced by zeros (default: from ``lo``/``hi``)."""
    xp = namespace(lo)
    magnitude = _apply(affine.mag_weight, xp.maximum(xp.abs(lo), xp.abs(hi))) + affine.mag_bias

    def support() -> Array:
        inputs = _nonzero_inputs(lo, hi) if nonzero is None else nonzero
        reach = _apply(affine.support_weight, inputs)
        return (reach > 0) | affine.support_bias

    margin = magnitude_margin(magnitude, support, affine.rel_margin)
    return _sanitise(lower - margin, upper + margin)


def _row_margins(magnitude: Array, support: Array, relative: float) -> Array:
    """Margins of rows with real-term magnitudes ``magnitude`` (the margin rule, relative
    margin ``relative``)."""
    return magnitude_margin(magnitude, lambda: support > 0, relative)
