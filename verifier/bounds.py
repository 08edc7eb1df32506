"""Sound, batched bound propagation on the network IR: IBP, CROWN and alpha-CROWN.

All three bound a *specification matrix* ``C`` applied to the network output, ``C·net(x)``, for
every box ``[lo, hi]`` of a batch (``C`` is shared, shape ``(S, outputs)``, or per box,
``(B, S, outputs)``; ``None`` means the outputs themselves). Bounding ``logit_1 − logit_0`` as
one row is tighter than subtracting separately bounded logits.

Guarantees
----------
* For every ``x`` in box ``b``: ``lower[b] <= C·net(x) <= upper[b]`` (soundness), including
  boxes with infinite coordinates, which are bounded by IBP with infinity-safe interval
  arithmetic (never ``0·∞``) and never mixed into a CROWN batch. Input columns the network does
  not read (an all-zero column of the first weight matrix) may be infinite without effect.
* CROWN and alpha-CROWN are intersected with IBP on the final layer, and alpha-CROWN with CROWN,
  so each is never looser than the cheaper method.
* Floating point (DESIGN D2): every computed bound — intermediate and final — is widened
  outward by ``REL_MARGIN × (sum of the absolute values of all terms summed into it) +
  ABS_MARGIN`` (no widening when every term is exactly zero, e.g. behind dead ReLUs, since
  such a sum is exact). float64 accumulation error of a dot product of ``n`` terms is at most
  ``n·2⁻⁵³`` times that magnitude, so the margin dominates rounding by orders of magnitude for
  layers up to ~10⁵ neurons; rounding can only make a bound looser, never wrong.

Work for CROWN is proportional to the number of *unstable* neurons: stable neurons (decided by
IBP from the previous layer's CROWN bounds) are never back-substituted, and back-substitution
runs on a flat list of ``(box, row)`` pairs that share each layer's weight matrix, so one
``matmul`` serves thousands of boxes at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from verifier.errors import CertgateInputError
from verifier.network import Layer, Network

Method = Literal["ibp", "crown", "alpha-crown"]
METHODS: tuple[str, ...] = ("ibp", "crown", "alpha-crown")

REL_MARGIN = 1e-9
ABS_MARGIN = 1e-12
ROW_CHUNK = 1 << 12

ACTIVE, UNSTABLE, INACTIVE = 1, 0, -1


@dataclass
class BoundsResult:
    """Bounds of ``C·net(x)`` over each box, and the pre-activation bounds of every kink layer.

    ``lower``/``upper`` have shape ``(B, S)``. ``pre_lower[k]``/``pre_upper[k]`` bound the
    pre-activations of the ``k``-th layer of ``network`` (the lowered network actually
    bounded) for every layer index in ``kink_layers`` (input columns no output depends on are
    set to 0 before bounding, so the pre-activations of neurons that only such columns feed
    are not meaningful; every output bound is). ``sensitivity`` (CROWN methods only;
    shape ``(B, S, inputs)``) holds ``|A_lower| + |A_upper|``, the absolute input coefficients
    of the final linear bounds: times an input's width, how much of the gap that input drives
    (zero for boxes bounded by IBP only).
    """

    lower: np.ndarray
    upper: np.ndarray
    method: str
    network: Network
    pre_lower: dict[int, np.ndarray] = field(default_factory=dict)
    pre_upper: dict[int, np.ndarray] = field(default_factory=dict)
    elapsed_s: float = 0.0
    sensitivity: np.ndarray | None = None

    @property
    def kink_layers(self) -> list[int]:
        """Indices (in ``network.layers``) of layers with a ReLU/LeakyReLU activation."""
        return sorted(self.pre_lower)

    def activation_status(self, layer: int) -> np.ndarray:
        """Per box and neuron of kink layer ``layer``: ``1`` stable active (``l >= 0``),
        ``-1`` stable inactive (``u <= 0``), ``0`` unstable."""
        lower, upper = self.pre_lower[layer], self.pre_upper[layer]
        status = np.zeros(lower.shape, dtype=np.int8)
        status[upper <= 0.0] = INACTIVE
        status[lower >= 0.0] = ACTIVE
        return status

    def unstable_count(self) -> np.ndarray:
        """Number of unstable neurons per box, over all kink layers."""
        total = np.zeros(self.lower.shape[0], dtype=np.int64)
        for layer in self.kink_layers:
            total += (self.activation_status(layer) == UNSTABLE).sum(axis=1)
        return total


@dataclass(frozen=True)
class _Affine:
    """One affine map of the lowered network, as torch tensors, with its activation's slope."""

    weight: torch.Tensor
    bias: torch.Tensor
    abs_weight: torch.Tensor
    slope: torch.Tensor | None  # per-neuron left slope of the kink; None: no activation


def _prepare(network: Network) -> tuple[Network, list[_Affine]]:
    """Lower the network and make sure the last layer is linear (append identity if not)."""
    lowered = network.lowered()
    layers = list(lowered.layers)
    if layers[-1].activation != "none":
        width = layers[-1].out_features
        layers.append(Layer(np.eye(width), np.zeros(width), "none"))
        lowered = Network(layers, list(lowered.input_names), list(lowered.output_names))
    affines = []
    for layer in layers:
        weight = torch.from_numpy(layer.weight)
        slope = (
            None if layer.activation == "none"
            else torch.from_numpy(layer.negative_slope_effective)
        )
        affines.append(_Affine(weight, torch.from_numpy(layer.bias), weight.abs(), slope))
    return lowered, affines


def _as_boxes(network: Network, lower: np.ndarray, upper: np.ndarray) -> tuple[torch.Tensor, ...]:
    lo = np.atleast_2d(np.asarray(lower, dtype=np.float64))
    hi = np.atleast_2d(np.asarray(upper, dtype=np.float64))
    if lo.shape != hi.shape:
        raise CertgateInputError(f"box bounds differ in shape: {lo.shape} vs {hi.shape}")
    if lo.shape[1] != network.input_size:
        raise CertgateInputError(
            f"boxes have {lo.shape[1]} coordinates, the network has {network.input_size} inputs"
        )
    if np.isnan(lo).any() or np.isnan(hi).any():
        raise CertgateInputError("box bounds contain NaN")
    if (lo > hi).any():
        row, col = np.argwhere(lo > hi)[0]
        raise CertgateInputError(
            f"empty box: lower > upper at box {row}, input {network.input_names[col]!r}"
        )
    if (lo == np.inf).any() or (hi == -np.inf).any():
        raise CertgateInputError("a box's lower bound is +inf or its upper bound is -inf")
    unread = ~network.read_inputs()
    if unread.any():
        lo = lo.copy()
        hi = hi.copy()
        lo[:, unread] = 0.0
        hi[:, unread] = 0.0
    return torch.from_numpy(lo), torch.from_numpy(hi)


def _as_spec(spec: np.ndarray | None, outputs: int, batch: int) -> torch.Tensor:
    """The spec as a ``(B, S, outputs)`` tensor (a view when shared)."""
    if spec is None:
        return torch.eye(outputs, dtype=torch.float64).expand(batch, outputs, outputs)
    matrix = torch.as_tensor(np.asarray(spec, dtype=np.float64))
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    if matrix.shape[-1] != outputs:
        raise CertgateInputError(
            f"specification rows have {matrix.shape[-1]} entries, the network has {outputs} outputs"
        )
    if not torch.isfinite(matrix).all():
        raise CertgateInputError("specification matrix must be finite")
    if matrix.ndim == 2:
        return matrix.expand(batch, *matrix.shape)
    if matrix.ndim == 3 and matrix.shape[0] == batch:
        return matrix
    raise CertgateInputError(
        f"specification must have shape (S, {outputs}) or ({batch}, S, {outputs}), "
        f"got {tuple(matrix.shape)}"
    )


def _margin(magnitude: torch.Tensor) -> torch.Tensor:
    """The rounding margin for a sum whose terms have absolute values adding up to
    ``magnitude``: zero when every term was exactly zero (the sum is then exact)."""
    return torch.where(magnitude > 0, REL_MARGIN * magnitude + ABS_MARGIN, 0.0)


def _widen(lower: torch.Tensor, upper: torch.Tensor, magnitude: torch.Tensor) -> None:
    """Widen ``[lower, upper]`` in place by the floating-point margin (see module doc)."""
    margin = _margin(magnitude)
    lower.sub_(margin)
    upper.add_(margin)


def _interval_affine(
    weight: torch.Tensor, abs_weight: torch.Tensor, bias: torch.Tensor,
    lo: torch.Tensor, hi: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sound interval image of ``weight @ x + bias`` for ``x`` in ``[lo, hi]`` (batched).

    Finite rows use the midpoint/radius form; rows with infinite coordinates use
    infinity-safe arithmetic: an infinite coordinate contributes ±∞ only through a non-zero
    weight, never ``0·∞``.
    """
    finite = torch.isfinite(lo).all(dim=1) & torch.isfinite(hi).all(dim=1)
    out_lo = torch.empty(lo.shape[0], weight.shape[0], dtype=torch.float64)
    out_hi = torch.empty_like(out_lo)
    if finite.any():
        f_lo, f_hi = lo[finite], hi[finite]
        mid = (f_lo + f_hi) * 0.5
        rad = (f_hi - f_lo) * 0.5
        center = mid @ weight.T + bias
        radius = rad @ abs_weight.T
        magnitude = mid.abs() @ abs_weight.T + bias.abs() + radius
        c_lo, c_hi = center - radius, center + radius
        _widen(c_lo, c_hi, magnitude)
        out_lo[finite], out_hi[finite] = c_lo, c_hi
    infinite = ~finite
    if infinite.any():
        i_lo, i_hi = lo[infinite], hi[infinite]
        positive = weight.clamp(min=0.0)
        negative = weight.clamp(max=0.0)
        lo_f = torch.where(torch.isfinite(i_lo), i_lo, torch.zeros_like(i_lo))
        hi_f = torch.where(torch.isfinite(i_hi), i_hi, torch.zeros_like(i_hi))
        c_lo = lo_f @ positive.T + hi_f @ negative.T + bias
        c_hi = hi_f @ positive.T + lo_f @ negative.T + bias
        magnitude = torch.maximum(lo_f.abs(), hi_f.abs()) @ abs_weight.T + bias.abs()
        _widen(c_lo, c_hi, magnitude)
        lo_inf = (i_lo == -np.inf).to(torch.float64)
        hi_inf = (i_hi == np.inf).to(torch.float64)
        has_pos = (positive > 0).to(torch.float64)
        has_neg = (negative < 0).to(torch.float64)
        to_minus = (lo_inf @ has_pos.T + hi_inf @ has_neg.T) > 0
        to_plus = (hi_inf @ has_pos.T + lo_inf @ has_neg.T) > 0
        c_lo[to_minus] = -np.inf
        c_hi[to_plus] = np.inf
        out_lo[infinite], out_hi[infinite] = c_lo, c_hi
    return out_lo, out_hi


def _activate_interval(
    lo: torch.Tensor, hi: torch.Tensor, slope: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Interval image of a monotone one-kink activation (identity when ``slope`` is None)."""
    if slope is None:
        return lo, hi
    # a slope times an infinite bound is still infinite (slopes are > 0) or 0 (slope 0): never NaN
    return _leaky(lo, slope), _leaky(hi, slope)


def _leaky(z: torch.Tensor, slope: torch.Tensor) -> torch.Tensor:
    """``z`` where ``z >= 0`` else ``slope·z``; ``0·(−∞)`` is taken as 0."""
    scaled = torch.where(slope == 0.0, torch.zeros_like(z), z * slope)
    return torch.where(z < 0, scaled, z)


def _spec_interval(
    spec: torch.Tensor, last: _Affine, lo: torch.Tensor, hi: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """IBP bound of ``spec @ (W h + b)`` with the spec folded into the last layer."""
    if spec.stride(0) == 0:  # one matrix shared by every box
        shared = spec[0]
        folded = shared @ last.weight
        return _interval_affine(folded, folded.abs(), shared @ last.bias, lo, hi)
    batch, rows, _ = spec.shape
    folded_weight = spec @ last.weight  # (B, S, n)
    folded_bias = spec @ last.bias  # (B, S)
    abs_weight = folded_weight.abs()
    finite = torch.isfinite(lo).all(dim=1) & torch.isfinite(hi).all(dim=1)
    out_lo = torch.empty(batch, rows, dtype=torch.float64)
    out_hi = torch.empty_like(out_lo)
    if finite.any():
        mid = ((lo[finite] + hi[finite]) * 0.5).unsqueeze(-1)
        rad = ((hi[finite] - lo[finite]) * 0.5).unsqueeze(-1)
        center = (folded_weight[finite] @ mid).squeeze(-1) + folded_bias[finite]
        radius = (abs_weight[finite] @ rad).squeeze(-1)
        magnitude = (
            (abs_weight[finite] @ mid.abs()).squeeze(-1)
            + (spec[finite].abs() @ last.bias.abs())
            + radius
        )
        c_lo, c_hi = center - radius, center + radius
        _widen(c_lo, c_hi, magnitude)
        out_lo[finite], out_hi[finite] = c_lo, c_hi
    infinite = ~finite
    if infinite.any():
        i_lo, i_hi = lo[infinite].unsqueeze(-1), hi[infinite].unsqueeze(-1)
        weight = folded_weight[infinite]
        positive = weight.clamp(min=0.0)
        negative = weight.clamp(max=0.0)
        lo_f = torch.where(torch.isfinite(i_lo), i_lo, torch.zeros_like(i_lo))
        hi_f = torch.where(torch.isfinite(i_hi), i_hi, torch.zeros_like(i_hi))
        bias = folded_bias[infinite]
        c_lo = (positive @ lo_f + negative @ hi_f).squeeze(-1) + bias
        c_hi = (positive @ hi_f + negative @ lo_f).squeeze(-1) + bias
        magnitude = (
            (abs_weight[infinite] @ torch.maximum(lo_f.abs(), hi_f.abs())).squeeze(-1)
            + (spec[infinite].abs() @ last.bias.abs())
        )
        _widen(c_lo, c_hi, magnitude)
        lo_inf = (i_lo == -np.inf).to(torch.float64)
        hi_inf = (i_hi == np.inf).to(torch.float64)
        has_pos = (positive > 0).to(torch.float64)
        has_neg = (negative < 0).to(torch.float64)
        c_lo[(has_pos @ lo_inf + has_neg @ hi_inf).squeeze(-1) > 0] = -np.inf
        c_hi[(has_pos @ hi_inf + has_neg @ lo_inf).squeeze(-1) > 0] = np.inf
        out_lo[infinite], out_hi[infinite] = c_lo, c_hi
    return out_lo, out_hi


def _ibp_layers(
    affines: list[_Affine], lo: torch.Tensor, hi: torch.Tensor
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Pre-activation IBP bounds of every layer but the last."""
    pre_lo, pre_hi = [], []
    h_lo, h_hi = lo, hi
    for affine in affines[:-1]:
        z_lo, z_hi = _interval_affine(affine.weight, affine.abs_weight, affine.bias, h_lo, h_hi)
        pre_lo.append(z_lo)
        pre_hi.append(z_hi)
        h_lo, h_hi = _activate_interval(z_lo, z_hi, affine.slope)
    return pre_lo, pre_hi


def _post_activation(
    affines: list[_Affine], pre_lo: list[torch.Tensor], pre_hi: list[torch.Tensor],
    lo: torch.Tensor, hi: torch.Tensor, index: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds of the input to layer ``index`` (the box, or the previous layer's activation)."""
    if index == 0:
        return lo, hi
    return _activate_interval(pre_lo[index - 1], pre_hi[index - 1], affines[index - 1].slope)


@dataclass
class _Relaxation:
    """Per box and neuron of one kink layer: lower slope, upper slope and upper intercept.

    ``slope·z`` (through the origin) is a lower bound and ``upper_slope·z + upper_intercept``
    an upper bound of the activation on ``[l, u]``; both are exact on stable neurons.
    """

    lower_slope: torch.Tensor
    upper_slope: torch.Tensor
    upper_intercept: torch.Tensor


def _relax(lo: torch.Tensor, hi: torch.Tensor, slope: torch.Tensor) -> _Relaxation:
    """CROWN's linear relaxation of a one-kink activation with left slope ``slope``.

    Unstable neurons get the chord through ``(l, slope·l)`` and ``(u, u)`` as upper bound and
    the adaptive lower slope (1 when ``u >= -l``, else ``slope``).
    """
    unstable = (lo < 0) & (hi > 0)
    active = lo >= 0
    slope = slope.expand_as(lo)
    stable_slope = torch.where(active, torch.ones_like(lo), slope)
    width = torch.where(unstable, hi - lo, torch.ones_like(lo))
    chord = torch.where(unstable, (hi - slope * lo) / width, stable_slope)
    intercept = torch.where(unstable, hi * (1.0 - chord), torch.zeros_like(lo))
    adaptive = torch.where(hi >= -lo, torch.ones_like(lo), slope)
    lower_slope = torch.where(unstable, adaptive, stable_slope)
    return _Relaxation(lower_slope, chord, intercept)


def _concretise(
    coeffs: torch.Tensor, const: torch.Tensor, magnitude: torch.Tensor,
    h_lo: torch.Tensor, h_hi: torch.Tensor,
) -> torch.Tensor:
    """Widened lower bound of ``coeffs·h + const`` for ``h`` in ``[h_lo, h_hi]`` (row-wise)."""
    mid = (h_lo + h_hi) * 0.5
    rad = (h_hi - h_lo) * 0.5
    abs_coeffs = coeffs.abs()
    value = (coeffs * mid).sum(dim=1) - (abs_coeffs * rad).sum(dim=1) + const
    magnitude = magnitude + (abs_coeffs * (mid.abs() + rad)).sum(dim=1)
    return value - _margin(magnitude)


def _backsubstitute(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], layer: int,
    coeffs: torch.Tensor, const: torch.Tensor, box: torch.Tensor,
    inputs_lo: list[torch.Tensor], inputs_hi: list[torch.Tensor], *, paired: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lower bounds of rows ``coeffs·h + const``, ``h`` the input of layer ``layer``.

    Rows are flat: row ``r`` belongs to box ``box[r]``; ``inputs_lo[j]``/``inputs_hi[j]``
    bound the input of layer ``j`` for every box (``j = 0``: the box itself). Returns widened,
    sound lower bounds ``(R,)`` and the input coefficients of the rows that reached the input
    (all rows, in order, unless ``paired``).

    With ``paired=True`` the rows are ``[+w; −w]`` halves for the same neurons (lower and
    negated upper bound of a pre-activation). After every step the partial bound is
    concretised against the bounds of the current layer's input (sound, and far cheaper than
    a step); a neuron proven stable there stops, since a stable neuron's relaxation is exact
    whatever its bounds. Only undecided neurons pay for the full depth.
    """
    total = coeffs.shape[0]
    result = torch.empty(total, dtype=torch.float64)
    row_ids = torch.arange(total)
    magnitude = const.abs()
    for index in range(layer - 1, -1, -1):
        affine = affines[index]
        relaxation = relaxations.get(index)
        if relaxation is not None:
            positive = coeffs.clamp(min=0.0)
            negative = coeffs.clamp(max=0.0)
            shift = (negative * relaxation.upper_intercept.index_select(0, box)).sum(dim=1)
            const = const + shift
            magnitude = magnitude - shift
            coeffs = positive * relaxation.lower_slope.index_select(
                0, box
            ) + negative * relaxation.upper_slope.index_select(0, box)
        const = const + coeffs @ affine.bias
        magnitude = magnitude + coeffs.abs() @ affine.bias.abs()
        coeffs = coeffs @ affine.weight
        if not paired or index == 0:
            continue
        partial = _concretise(
            coeffs, const, magnitude,
            inputs_lo[index].index_select(0, box), inputs_hi[index].index_select(0, box),
        )
        half = partial.shape[0] // 2
        decided_neuron = (partial[:half] >= 0.0) | (partial[half:] >= 0.0)
        if not bool(decided_neuron.any()):
            continue
        decided = torch.cat([decided_neuron, decided_neuron])
        result[row_ids[decided]] = partial[decided]
        keep = ~decided
        coeffs, const, magnitude = coeffs[keep], const[keep], magnitude[keep]
        box, row_ids = box[keep], row_ids[keep]
        if row_ids.numel() == 0:
            return result, coeffs
    result[row_ids] = _concretise(
        coeffs, const, magnitude, inputs_lo[0].index_select(0, box),
        inputs_hi[0].index_select(0, box),
    )
    return result, coeffs


def _crown_layer_bounds(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], layer: int,
    ibp_lo: torch.Tensor, ibp_hi: torch.Tensor,
    inputs_lo: list[torch.Tensor], inputs_hi: list[torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tighten the IBP pre-activation bounds of ``layer`` by CROWN on its unstable neurons."""
    unstable = (ibp_lo < 0) & (ibp_hi > 0)
    box, neuron = torch.nonzero(unstable, as_tuple=True)
    out_lo, out_hi = ibp_lo.clone(), ibp_hi.clone()
    affine = affines[layer]
    for start in range(0, box.numel(), ROW_CHUNK):
        b = box[start : start + ROW_CHUNK]
        n = neuron[start : start + ROW_CHUNK]
        rows = affine.weight.index_select(0, n)
        bias = affine.bias.index_select(0, n)
        bound, _ = _backsubstitute(
            affines, relaxations, layer, torch.cat([rows, -rows]), torch.cat([bias, -bias]),
            torch.cat([b, b]), inputs_lo, inputs_hi, paired=True,
        )
        count = b.numel()
        out_lo[b, n] = torch.maximum(out_lo[b, n], bound[:count])
        out_hi[b, n] = torch.minimum(out_hi[b, n], -bound[count:])
    return out_lo, out_hi


def _crown_finite(
    affines: list[_Affine], spec: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor],
           dict[int, _Relaxation], torch.Tensor]:
    """CROWN with CROWN intermediate bounds on boxes with finite coordinates; also returns
    ``|A_lower| + |A_upper|``, the input coefficients of the final linear bounds."""
    relaxations: dict[int, _Relaxation] = {}
    pre_lo: list[torch.Tensor] = []
    pre_hi: list[torch.Tensor] = []
    inputs_lo, inputs_hi = [lo], [hi]
    for index, affine in enumerate(affines[:-1]):
        z_lo, z_hi = _interval_affine(
            affine.weight, affine.abs_weight, affine.bias, inputs_lo[index], inputs_hi[index]
        )
        if index > 0 and affine.slope is not None:
            z_lo, z_hi = _crown_layer_bounds(
                affines, relaxations, index, z_lo, z_hi, inputs_lo, inputs_hi
            )
        pre_lo.append(z_lo)
        pre_hi.append(z_hi)
        if affine.slope is not None:
            relaxations[index] = _relax(z_lo, z_hi, affine.slope)
        h_lo, h_hi = _activate_interval(z_lo, z_hi, affine.slope)
        inputs_lo.append(h_lo)
        inputs_hi.append(h_hi)
    last = len(affines) - 1
    lower, upper, coefficients = _crown_spec(affines, relaxations, spec, inputs_lo, inputs_hi)
    ibp_lower, ibp_upper = _spec_interval(spec, affines[last], inputs_lo[last], inputs_hi[last])
    return (
        torch.maximum(lower, ibp_lower), torch.minimum(upper, ibp_upper),
        pre_lo, pre_hi, relaxations, coefficients,
    )


def _crown_spec(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], spec: torch.Tensor,
    inputs_lo: list[torch.Tensor], inputs_hi: list[torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CROWN bounds of ``spec @ net(x)`` given the relaxations of all kink layers, and
    ``|A_lower| + |A_upper|`` per box, row and input (how much each input drives the gap)."""
    batch, rows, _ = spec.shape
    last = affines[-1]
    folded = (spec @ last.weight).reshape(batch * rows, -1)
    folded_bias = (spec @ last.bias).reshape(-1)
    box = torch.arange(batch).repeat_interleave(rows)
    lower = torch.empty(batch * rows, dtype=torch.float64)
    upper = torch.empty_like(lower)
    width = inputs_lo[0].shape[1]
    sensitivity = torch.empty(batch * rows, width, dtype=torch.float64)
    for start in range(0, box.numel(), ROW_CHUNK):
        part = slice(start, start + ROW_CHUNK)
        b = box[part]
        bound, coeffs = _backsubstitute(
            affines, relaxations, len(affines) - 1,
            torch.cat([folded[part], -folded[part]]),
            torch.cat([folded_bias[part], -folded_bias[part]]),
            torch.cat([b, b]), inputs_lo, inputs_hi,
        )
        count = b.numel()
        lower[part] = bound[:count]
        upper[part] = -bound[count:]
        sensitivity[part] = coeffs[:count].abs() + coeffs[count:].abs()
    return (
        lower.reshape(batch, rows), upper.reshape(batch, rows),
        sensitivity.reshape(batch, rows, width),
    )


def _alpha_optimise(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], spec: torch.Tensor,
    lo: torch.Tensor, hi: torch.Tensor, steps: int, learning_rate: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Best lower/upper spec bounds over ``steps`` Adam steps on the lower slopes.

    Every lower slope in ``[slope, 1]`` gives a sound relaxation, so every iterate's bound is
    sound and the best one over the iterations is returned (starting from CROWN's slopes).
    """
    batch, rows, _ = spec.shape
    both = torch.cat([spec, -spec], dim=1)  # lower bounds of both signs: (B, 2S, out)
    kink = sorted(relaxations)
    minimum = {k: affines[k].slope for k in kink}
    params = {
        k: relaxations[k].lower_slope.unsqueeze(1).expand(batch, 2 * rows, -1).clone()
        .requires_grad_(True)
        for k in kink
    }
    optimiser = torch.optim.Adam(list(params.values()), lr=learning_rate)
    best = torch.full((batch, 2 * rows), -np.inf, dtype=torch.float64)
    mid = ((lo + hi) * 0.5).unsqueeze(1)
    rad = ((hi - lo) * 0.5).unsqueeze(1)
    for _ in range(steps + 1):
        coeffs = both @ affines[-1].weight
        const = both @ affines[-1].bias
        magnitude = both.abs() @ affines[-1].bias.abs()
        for index in range(len(affines) - 2, -1, -1):
            if index in params:
                relaxation = relaxations[index]
                positive = coeffs.clamp(min=0.0)
                negative = coeffs.clamp(max=0.0)
                intercept = relaxation.upper_intercept.unsqueeze(1)
                const = const + (negative * intercept).sum(dim=-1)
                magnitude = magnitude + (negative.abs() * intercept.abs()).sum(dim=-1)
                coeffs = positive * params[index] + negative * relaxation.upper_slope.unsqueeze(1)
            const = const + coeffs @ affines[index].bias
            magnitude = magnitude + coeffs.abs() @ affines[index].bias.abs()
            coeffs = coeffs @ affines[index].weight
        value = (coeffs * mid).sum(-1) - (coeffs.abs() * rad).sum(-1) + const
        magnitude = magnitude + (coeffs.abs() * (mid.abs() + rad)).sum(-1)
        bound = value - _margin(magnitude)
        best = torch.maximum(best, bound.detach())
        if steps == 0:
            break
        optimiser.zero_grad()
        (-bound.sum()).backward()
        optimiser.step()
        with torch.no_grad():
            for k, param in params.items():
                param.copy_(torch.maximum(param.clamp(max=1.0), minimum[k]))
    return best[:, :rows], -best[:, rows:]


def compute_bounds(
    network: Network, lower: np.ndarray, upper: np.ndarray, spec: np.ndarray | None = None,
    method: Method = "crown", *, alpha_steps: int = 20, alpha_lr: float = 0.1,
) -> BoundsResult:
    """Sound bounds of ``spec @ network(x)`` over each box ``[lower[b], upper[b]]``.

    ``lower``/``upper``: ``(B, inputs)`` (a single box may be 1-D). ``method``: ``ibp``,
    ``crown`` (CROWN intermediate bounds) or ``alpha-crown`` (``alpha_steps`` Adam steps on the
    lower slopes of the final bound). Boxes with infinite coordinates that the network reads
    are bounded by IBP only. See the module docstring for the guarantees.
    """
    if method not in METHODS:
        raise CertgateInputError(
            f"unknown bound method {method!r}; use one of {', '.join(METHODS)}"
        )
    started = time.perf_counter()
    lowered, affines = _prepare(network)
    lo, hi = _as_boxes(network, lower, upper)
    batch = lo.shape[0]
    spec_tensor = _as_spec(spec, network.output_size, batch)
    with torch.no_grad():
        pre_lo, pre_hi = _ibp_layers(affines, lo, hi)
        h_lo, h_hi = _post_activation(affines, pre_lo, pre_hi, lo, hi, len(affines) - 1)
        out_lo, out_hi = _spec_interval(spec_tensor, affines[-1], h_lo, h_hi)
        finite = torch.isfinite(lo).all(dim=1) & torch.isfinite(hi).all(dim=1)
        run_crown = method != "ibp" and bool(finite.any())
        sensitivity = None
        if run_crown:
            f_lo, f_hi = lo[finite], hi[finite]
            if spec_tensor.stride(0) == 0:
                f_spec = spec_tensor[0].expand(f_lo.shape[0], *spec_tensor.shape[1:])
            else:
                f_spec = spec_tensor[finite]
            c_lo, c_hi, c_pre_lo, c_pre_hi, relaxations, c_sensitivity = _crown_finite(
                affines, f_spec, f_lo, f_hi
            )
            sensitivity = np.zeros((batch, spec_tensor.shape[1], network.input_size))
            sensitivity[finite.numpy()] = c_sensitivity.numpy()
            out_lo[finite], out_hi[finite] = c_lo, c_hi
            for index in range(len(pre_lo)):
                pre_lo[index][finite] = c_pre_lo[index]
                pre_hi[index][finite] = c_pre_hi[index]
    if run_crown and method == "alpha-crown" and relaxations:
        a_lo, a_hi = _alpha_optimise(
            affines, relaxations, f_spec, f_lo, f_hi, alpha_steps, alpha_lr
        )
        out_lo[finite] = torch.maximum(out_lo[finite], a_lo)
        out_hi[finite] = torch.minimum(out_hi[finite], a_hi)
    kinks = [index for index, affine in enumerate(affines[:-1]) if affine.slope is not None]
    return BoundsResult(
        lower=out_lo.numpy(),
        upper=out_hi.numpy(),
        method=method,
        network=lowered,
        pre_lower={k: pre_lo[k].numpy() for k in kinks},
        pre_upper={k: pre_hi[k].numpy() for k in kinks},
        elapsed_s=time.perf_counter() - started,
        sensitivity=sensitivity,
    )


def ibp(network: Network, lower: np.ndarray, upper: np.ndarray,
        spec: np.ndarray | None = None) -> BoundsResult:
    """Interval bound propagation (see :func:`compute_bounds`)."""
    return compute_bounds(network, lower, upper, spec, "ibp")


def crown(network: Network, lower: np.ndarray, upper: np.ndarray,
          spec: np.ndarray | None = None) -> BoundsResult:
    """CROWN with CROWN intermediate bounds (see :func:`compute_bounds`)."""
    return compute_bounds(network, lower, upper, spec, "crown")


def alpha_crown(network: Network, lower: np.ndarray, upper: np.ndarray,
                spec: np.ndarray | None = None, steps: int = 20,
                learning_rate: float = 0.1) -> BoundsResult:
    """alpha-CROWN: CROWN with optimised lower slopes, never looser than CROWN."""
    return compute_bounds(
        network, lower, upper, spec, "alpha-crown", alpha_steps=steps, alpha_lr=learning_rate
    )



def linear_interval(
    matrix: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sound bounds of ``matrix @ x`` for every box (rows of ``lower``/``upper``).

    Exact up to the floating-point margin; infinite box sides contribute ±∞ only through
    non-zero coefficients (never ``0·∞``).
    """
    weight = torch.as_tensor(np.asarray(matrix, dtype=np.float64))
    lo = torch.from_numpy(np.ascontiguousarray(lower, dtype=np.float64))
    hi = torch.from_numpy(np.ascontiguousarray(upper, dtype=np.float64))
    bias = torch.zeros(weight.shape[0], dtype=torch.float64)
    out_lo, out_hi = _interval_affine(weight, weight.abs(), bias, lo, hi)
    return out_lo.numpy(), out_hi.numpy()
