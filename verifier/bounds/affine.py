"""The affine maps bounds propagate through, and the margin rule (DESIGN D2).

:class:`_Affine` is one layer (or a specification folded into the last layer) as torch
tensors, with the magnitudes and supports of its *real* terms beside the float coefficients,
so that cancellation in a fold is never mistaken for an exact zero. :func:`_widened` and
:func:`_row_margins` widen a computed bound by ``rel_margin × magnitude +
SOUNDNESS_ABS_MARGIN`` (through :func:`verifier.numerics.tensor.magnitude_margin`), where
:func:`_prepare` sets ``rel_margin`` per network (:func:`_network_rel_margin`), and
:func:`_sanitise` turns an overflowed or NaN bound into the infinite one on its side; the
package docstring (:mod:`verifier.bounds`) states the guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from verifier.network import Layer, Network
from verifier.numerics import SOUNDNESS_REL_MARGIN, network_rel_margin, network_roundings
from verifier.numerics.tensor import magnitude_margin


@dataclass(frozen=True)
class _Affine:
    """One affine map as torch tensors, with what the margin rule needs about it.

    ``weight``/``bias`` are the (possibly folded) float coefficients used for values;
    ``mag_weight``/``mag_bias`` are entrywise upper bounds of the absolute values of the real
    terms that make them up (``|C|·|W|`` for a folded ``C·W``); ``support_weight`` (0/1) and
    ``support_bias`` (bool) say which real coefficients may be non-zero (structurally).
    ``rel_margin``: the relative margin of every bound computed through the network this
    map belongs to (:func:`_network_rel_margin`).
    """

    weight: torch.Tensor
    bias: torch.Tensor
    abs_weight: torch.Tensor
    slope: torch.Tensor | None  # per-neuron left slope of the kink; None: no activation
    mag_weight: torch.Tensor
    mag_bias: torch.Tensor
    support_weight: torch.Tensor
    support_bias: torch.Tensor
    rel_margin: float = SOUNDNESS_REL_MARGIN


def _affine(
    weight: torch.Tensor, bias: torch.Tensor, slope: torch.Tensor | None = None,
    weight_magnitude: torch.Tensor | None = None, bias_magnitude: torch.Tensor | None = None,
    rel_margin: float = SOUNDNESS_REL_MARGIN,
) -> _Affine:
    """An affine map whose real coefficients' terms have the given magnitudes (default: the
    coefficients' absolute values, for coefficients that are not folded), in a network whose
    bounds take the relative margin ``rel_margin``."""
    abs_weight = weight.abs()
    mag_weight = abs_weight if weight_magnitude is None else weight_magnitude
    mag_bias = bias.abs() if bias_magnitude is None else bias_magnitude
    return _Affine(
        weight, bias, abs_weight, slope, mag_weight, mag_bias,
        (mag_weight != 0).to(torch.float64), mag_bias != 0, rel_margin,
    )


def _folded(spec: torch.Tensor, last: _Affine) -> _Affine:
    """``spec @ last`` as one affine map (``spec``: ``(S, n)``, or ``(B, S, n)`` for one
    matrix per box), keeping the unfolded magnitudes and supports so that cancellation in
    ``spec @ W`` is never mistaken for an exact zero."""
    weight = spec @ last.weight
    spec_abs = spec.abs()
    spec_support = (spec != 0).to(torch.float64)
    return _Affine(
        weight, spec @ last.bias, weight.abs(), None,
        spec_abs @ last.mag_weight, spec_abs @ last.mag_bias,
        ((spec_support @ last.support_weight) > 0).to(torch.float64),
        (spec_support @ last.support_bias.to(torch.float64)) > 0, last.rel_margin,
    )


def _restricted(affine: _Affine, mask: torch.Tensor) -> _Affine:
    """The affine map for the boxes in ``mask`` (itself when shared by every box)."""
    if affine.weight.ndim == 2:
        return affine
    return _Affine(
        affine.weight[mask], affine.bias[mask], affine.abs_weight[mask], None,
        affine.mag_weight[mask], affine.mag_bias[mask], affine.support_weight[mask],
        affine.support_bias[mask], affine.rel_margin,
    )


def _apply(matrix: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """``matrix @ v`` for every row ``v`` of ``vectors``: ``matrix`` shared ``(S, n)`` or one
    per row ``(B, S, n)``."""
    if matrix.ndim == 2:
        return vectors @ matrix.T
    return (matrix @ vectors.unsqueeze(-1)).squeeze(-1)


def _prepare(network: Network) -> tuple[Network, list[_Affine]]:
    """Lower the network and make sure the last layer is linear (append identity if not)."""
    lowered = network.lowered()
    layers = list(lowered.layers)
    if layers[-1].activation != "none":
        width = layers[-1].out_features
        layers.append(Layer(np.eye(width), np.zeros(width), "none"))
        lowered = Network(layers, list(lowered.input_names), list(lowered.output_names))
    affines = []
    relative = _network_rel_margin(lowered)
    for layer in layers:
        slope = (
            None if layer.activation == "none"
            else torch.from_numpy(layer.negative_slope_effective)
        )
        assert layer.weight_magnitude is not None and layer.bias_magnitude is not None
        affines.append(
            _affine(
                torch.from_numpy(layer.weight), torch.from_numpy(layer.bias), slope,
                torch.from_numpy(layer.weight_magnitude), torch.from_numpy(layer.bias_magnitude),
                relative,
            )
        )
    return lowered, affines


def _network_rel_margin(network: Network) -> float:
    """The relative margin of every bound of ``network`` (lowered): where its coefficients
    are its own (not folded), ``2·gamma(r)`` with ``r`` the roundings a real term meets
    through every map and a specification folded into the last
    (:func:`~verifier.numerics.rounding.network_roundings`, at most ``inputs / 2`` one-hot
    groups); a folded network keeps :data:`~verifier.numerics.SOUNDNESS_REL_MARGIN`, which
    also covers its fold's own rounding. The counted margin is far smaller on deep networks:
    ``1.47e-12`` on Adult RQ4's 32 × 40 network, where ``1e-9`` widened the bounds of the
    last layers by several output units (docs/decisions.md, issue 35)."""
    if network.folded:
        return SOUNDNESS_REL_MARGIN
    fan_ins = [layer.in_features for layer in network.layers] + [network.output_size]
    return network_rel_margin(
        network_roundings(fan_ins, network.input_size, network.input_size // 2))


def _sanitise(lower: torch.Tensor, upper: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace bounds that overflowed or became NaN by the infinite bound on their side.

    A lower bound of ``+∞`` or NaN (an overflow, or ``∞ − ∞``) becomes ``−∞``, an upper bound
    of ``−∞`` or NaN becomes ``+∞``: always sound, never a finite value from a broken sum.
    """
    lower = lower.nan_to_num(nan=-np.inf, posinf=-np.inf, neginf=-np.inf)
    upper = upper.nan_to_num(nan=np.inf, posinf=np.inf, neginf=np.inf)
    return lower, upper


def _halves(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Midpoint and radius of ``[lo, hi]`` without overflow (``lo/2 + hi/2``, ``hi/2 − lo/2``);
    the radius is never negative. Their rounding is covered by the margin rule."""
    return lo * 0.5 + hi * 0.5, hi * 0.5 - lo * 0.5


def _nonzero_inputs(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """1.0 where a box coordinate may be non-zero (its interval is not exactly ``{0}``)."""
    return ((lo != 0) | (hi != 0)).to(torch.float64)


def _widened(
    affine: _Affine, lower: torch.Tensor, upper: torch.Tensor,
    lo: torch.Tensor, hi: torch.Tensor, nonzero: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[lower, upper]`` (values of ``affine`` over the finite box ``[lo, hi]``) widened by
    the margin rule, with the magnitude from the affine map's real terms, and sanitised.
    ``nonzero``: which coordinates may be non-zero, when ``[lo, hi]`` stands for a box whose
    infinite sides were replaced by zeros (default: from ``lo``/``hi``)."""
    magnitude = _apply(affine.mag_weight, torch.maximum(lo.abs(), hi.abs())) + affine.mag_bias

    def support() -> torch.Tensor:
        inputs = _nonzero_inputs(lo, hi) if nonzero is None else nonzero
        reach = _apply(affine.support_weight, inputs)
        return (reach > 0) | affine.support_bias

    margin = magnitude_margin(magnitude, support, affine.rel_margin)
    return _sanitise(lower - margin, upper + margin)


def _row_margins(magnitude: torch.Tensor, support: torch.Tensor, relative: float) -> torch.Tensor:
    """Margins of rows with real-term magnitudes ``magnitude`` (the margin rule, relative
    margin ``relative``)."""
    return magnitude_margin(magnitude, lambda: support > 0, relative)
