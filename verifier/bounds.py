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
  outward by ``SOUNDNESS_REL_MARGIN × magnitude + SOUNDNESS_ABS_MARGIN``
  (:mod:`verifier.numerics.margins`). The *magnitude* is the network (and
  the specification) evaluated in absolute values — ``|C|·|W_L|·…·|W_1|·max(|lo|, |hi|)``
  plus the absolute biases and relaxation intercepts — computed from the unfolded factors,
  never from float products that may have cancelled (``C·W`` can round to an exact zero
  that is not zero in real arithmetic). The forward error of any float evaluation of a sum
  of products is at most ``γ_n`` times that magnitude (``n·2⁻⁵³`` for ``n`` factors and
  terms), so the margin dominates rounding by orders of magnitude for networks up to ~10⁵
  neurons. The margin is skipped only when every term is zero *in real arithmetic*, decided
  structurally (a product is zero iff one of its float factors is exactly zero; a ReLU whose
  sound upper bound is ``<= 0`` outputs exactly zero), never because a float rounded to zero.
* Intermediate CROWN rows (a hidden layer's pre-activation bounds) run in float32 where
  :mod:`verifier.single_precision` proves it safe, widened by its float32 margin (the same
  rule with ``u = 2⁻²⁴``, plus range and underflow conditions); their results are float64
  from there on, and every final bound is computed in float64.
* Overflow: a bound whose float evaluation overflowed or became NaN is replaced by ``−∞``
  (lower) or ``+∞`` (upper), never a finite value; CROWN runs only on boxes whose IBP
  intermediate bounds are all finite (the others keep their IBP bounds).

Work for CROWN is proportional to the number of *unstable* neurons: stable neurons (decided by
IBP from the previous layer's CROWN bounds, or known from an enclosing box through
``known_signs``) are never back-substituted, and back-substitution
runs on a flat list of ``(box, row)`` pairs that share each layer's weight matrix, so one
``matmul`` serves thousands of boxes at once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from verifier.errors import CertgateInputError
from verifier.network import Layer, Network
from verifier.numerics import SOUNDNESS_ABS_MARGIN, SOUNDNESS_REL_MARGIN
from verifier.numerics.tensor import magnitude_margin
from verifier.single_precision import single_margins

Method = Literal["ibp", "crown", "alpha-crown"]
METHODS: tuple[str, ...] = ("ibp", "crown", "alpha-crown")

# Rows back-substituted together: a chunk's (rows, inputs) tensors then stay in the core's
# cache (Adult-13 2x64, 2,000 boxes, one thread: 1.10 s per batch at 4,096 rows, 0.80 s at
# 1,024; 256 no faster).
ROW_CHUNK = 1 << 10
GROUP_CHUNK = 1 << 22
# A float32 row's margin may take at most this share of its bound width, or the row is
# redone in float64 (see _crown_layer_bounds).
SINGLE_SHARE = 0.01
# Rows tried in float32 before a layer's batch is committed to it, and the share of them
# that may need float64 (each costs both).
SINGLE_TRIAL = 64
SINGLE_TRIAL_MISSES = 0.1

ACTIVE, UNSTABLE, INACTIVE = 1, 0, -1


@dataclass
class LinearBounds:
    """CROWN's final linear bounds of ``C·net(x)`` on each box, as pointwise functions.

    For every box ``b``, row ``s`` and every ``x`` in the box (for a one-hot group of the
    bounding, every one-hot point of it), in real arithmetic::

        lower_value + A_l·x − min_box(A_l·x)  <=  (C·net(x))_s
        (C·net(x))_s  <=  upper_value + A_u·x − max_box(A_u·x)

    with ``A_l = lower_coefficients[b, s]``, ``A_u = upper_coefficients[b, s]`` (float
    numbers, taken exactly) and the extremes over the box's intervals and, for a usable
    one-hot group, over its allowed categories (the concretisation CROWN itself did).
    ``lower_value``/``upper_value`` are CROWN's bounds *before* they are intersected with
    IBP's (``−∞``/``+∞`` and zero coefficients where CROWN did not bound the row). Why this
    holds despite float coefficients: the margin of the row (module docstring) dominates
    both the rounding of the concretisation and ``|A_float − A_real|·|x|`` at any point of
    the box, since both are at most ``γ_n`` times the row's magnitude, which is computed with
    ``max(|lo|, |hi|)`` over the box.
    """

    lower_coefficients: np.ndarray
    lower_value: np.ndarray
    upper_coefficients: np.ndarray
    upper_value: np.ndarray


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
    (zero for boxes bounded by IBP only); ``linear`` holds CROWN's final linear bounds
    themselves (:class:`LinearBounds`).
    """

    lower: np.ndarray
    upper: np.ndarray
    method: str
    network: Network
    pre_lower: dict[int, np.ndarray] = field(default_factory=dict)
    pre_upper: dict[int, np.ndarray] = field(default_factory=dict)
    elapsed_s: float = 0.0
    sensitivity: np.ndarray | None = None
    linear: LinearBounds | None = None

    @property
    def lower_coefficients(self) -> np.ndarray | None:
        """``A_lower``, signed (``(B, S, inputs)``; CROWN methods only)."""
        return None if self.linear is None else self.linear.lower_coefficients

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

    def signs(self) -> np.ndarray:
        """:meth:`activation_status` of every kink layer side by side, ``(B, N)`` int8 over
        the ``N`` kink neurons in layer order: what :func:`compute_bounds` accepts as
        ``known_signs`` for boxes inside these ones."""
        if not self.pre_lower:
            return np.zeros((self.lower.shape[0], 0), dtype=np.int8)
        return np.concatenate(
            [self.activation_status(layer) for layer in self.kink_layers], axis=1
        )

    def unstable_count(self) -> np.ndarray:
        """Number of unstable neurons per box, over all kink layers."""
        total = np.zeros(self.lower.shape[0], dtype=np.int64)
        for layer in self.kink_layers:
            total += (self.activation_status(layer) == UNSTABLE).sum(axis=1)
        return total


@dataclass(frozen=True)
class _Affine:
    """One affine map as torch tensors, with what the margin rule needs about it.

    ``weight``/``bias`` are the (possibly folded) float coefficients used for values;
    ``mag_weight``/``mag_bias`` are entrywise upper bounds of the absolute values of the real
    terms that make them up (``|C|·|W|`` for a folded ``C·W``); ``support_weight`` (0/1) and
    ``support_bias`` (bool) say which real coefficients may be non-zero (structurally).
    """

    weight: torch.Tensor
    bias: torch.Tensor
    abs_weight: torch.Tensor
    slope: torch.Tensor | None  # per-neuron left slope of the kink; None: no activation
    mag_weight: torch.Tensor
    mag_bias: torch.Tensor
    support_weight: torch.Tensor
    support_bias: torch.Tensor


def _affine(
    weight: torch.Tensor, bias: torch.Tensor, slope: torch.Tensor | None = None,
    weight_magnitude: torch.Tensor | None = None, bias_magnitude: torch.Tensor | None = None,
) -> _Affine:
    """An affine map whose real coefficients' terms have the given magnitudes (default: the
    coefficients' absolute values, for coefficients that are not folded)."""
    abs_weight = weight.abs()
    mag_weight = abs_weight if weight_magnitude is None else weight_magnitude
    mag_bias = bias.abs() if bias_magnitude is None else bias_magnitude
    return _Affine(
        weight, bias, abs_weight, slope, mag_weight, mag_bias,
        (mag_weight != 0).to(torch.float64), mag_bias != 0,
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
        (spec_support @ last.support_bias.to(torch.float64)) > 0,
    )


def _restricted(affine: _Affine, mask: torch.Tensor) -> _Affine:
    """The affine map for the boxes in ``mask`` (itself when shared by every box)."""
    if affine.weight.ndim == 2:
        return affine
    return _Affine(
        affine.weight[mask], affine.bias[mask], affine.abs_weight[mask], None,
        affine.mag_weight[mask], affine.mag_bias[mask], affine.support_weight[mask],
        affine.support_bias[mask],
    )


@dataclass(frozen=True)
class _OneHot:
    """One-hot groups of input columns and, per box, which categories it still allows.

    A group's columns hold a one-hot vector (exactly one 1). Over a box, category ``c`` of a
    group is *allowed* when ``e_c`` fits the box's columns of that group; the group's part of
    a linear form ``a·x`` then ranges exactly over ``{a_c : c allowed}`` (a vertex set, not the
    ``[0, 1]^g`` box). A group with no allowed category (the box holds no one-hot vector of
    it, so no point of the population) keeps the box relaxation, which is sound for any box.
    ``index``: ``(G, m)`` group columns, padded by repeating the first; ``allowed``:
    ``(B, G, m)``; ``usable``: ``(B, G)`` groups bounded by their categories; ``free``:
    ``(B, D)`` 1.0 for columns bounded by the box, 0.0 for columns of usable groups;
    ``shut``: ``(B, D)`` ``+∞`` on the columns of usable groups whose category is not
    allowed, 0 elsewhere (added to a coefficient row, it masks them out); ``columns``: each
    group's columns, a slice where they are contiguous (a view, no copy).
    """

    index: torch.Tensor
    allowed: torch.Tensor
    usable: torch.Tensor
    free: torch.Tensor
    shut: torch.Tensor
    columns: tuple[slice | torch.Tensor, ...]

    def select(self, rows: torch.Tensor) -> _OneHot:
        """The records of the boxes ``rows`` (a mask or an index)."""
        return _OneHot(self.index, self.allowed[rows], self.usable[rows], self.free[rows],
                       self.shut[rows], self.columns)



def _onehot(
    groups: Sequence[Sequence[int]], lo: torch.Tensor, hi: torch.Tensor
) -> _OneHot | None:
    """The one-hot records of the boxes ``[lo, hi]`` (None without groups)."""
    if not groups:
        return None
    width = max(len(group) for group in groups)
    index = torch.tensor([[*g, *([g[0]] * (width - len(g)))] for g in groups], dtype=torch.long)
    valid = torch.tensor([[True] * len(g) + [False] * (width - len(g)) for g in groups])
    g_lo, g_hi = lo[:, index], hi[:, index]
    zero_fails = ~((g_lo <= 0.0) & (g_hi >= 0.0)) & valid
    one_fits = (g_lo <= 1.0) & (g_hi >= 1.0) & valid
    others_fail = zero_fails.sum(dim=2, keepdim=True) - zero_fails.to(torch.long)
    allowed = one_fits & (others_fail == 0)
    usable = allowed.any(dim=2)
    # per input column: its group and its slot there (-1 / 0 outside every group)
    member = torch.full((lo.shape[1],), -1, dtype=torch.long)
    slot = torch.zeros(lo.shape[1], dtype=torch.long)
    for number, group in enumerate(groups):
        member[list(group)] = number
        slot[list(group)] = torch.arange(len(group))
    grouped = usable[:, member.clamp(min=0)] & (member >= 0)
    free = (~grouped).to(lo.dtype)
    closed = grouped & ~allowed[:, member.clamp(min=0), slot]
    shut = torch.zeros_like(lo).masked_fill_(closed, np.inf)
    columns = tuple(
        slice(g[0], g[-1] + 1) if list(g) == list(range(g[0], g[-1] + 1))
        else torch.tensor(list(g), dtype=torch.long)
        for g in groups
    )
    return _OneHot(index, allowed, usable, free, shut, columns)


def _input_halves(
    lo: torch.Tensor, hi: torch.Tensor, onehot: _OneHot | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_halves` of the input boxes with the columns of usable one-hot groups set to
    zero: their part of a linear form is added by :func:`_group_extreme` instead."""
    if onehot is None:
        return _halves(lo, hi)
    return _halves(lo * onehot.free, hi * onehot.free)


def _group_extreme(
    coeffs: torch.Tensor, onehot: _OneHot, largest: bool = False,
    rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """``Σ`` over usable groups of ``min`` (``max`` if ``largest``) over allowed categories of
    the coefficients: ``coeffs`` ``(R, K, D)``, row ``r`` on box ``rows[r]`` of ``onehot``
    (box ``r`` without ``rows``); returns ``(R, K)``. The categories that are not allowed are
    masked out over the input columns once, by adding ``±∞`` (no per-group gather of the
    coefficients; an addition, where a select took 3× as long on one thread), and only the
    two records read are gathered per row. A coefficient that is already infinite may give
    NaN, which every caller turns into the infinite bound on its side."""
    shut = onehot.shut if rows is None else onehot.shut.index_select(0, rows)
    usable = onehot.usable if rows is None else onehot.usable[rows]
    masked = coeffs - shut[:, None, :] if largest else coeffs + shut[:, None, :]
    extremes = torch.stack([
        masked[:, :, columns].amax(dim=2) if largest else masked[:, :, columns].amin(dim=2)
        for columns in onehot.columns
    ], dim=2)
    return extremes.masked_fill(~usable[:, None, :], 0.0).sum(dim=2)


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
            )
        )
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


def _checked_signs(
    signs: np.ndarray | None, affines: list[_Affine], batch: int
) -> torch.Tensor | None:
    """Known signs as an int8 ``(B, N)`` tensor, checked against the kink neuron count."""
    if signs is None:
        return None
    neurons = sum(a.weight.shape[0] for a in affines[:-1] if a.slope is not None)
    array = np.asarray(signs)
    if array.shape != (batch, neurons):
        raise CertgateInputError(
            f"known signs must have shape ({batch}, {neurons}), got {array.shape}"
        )
    if not np.isin(array, (-1, 0, 1)).all():
        raise CertgateInputError("known signs must be -1, 0 or 1")
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.int8))


def _checked_needed(needed: np.ndarray, batch: int, rows: int) -> torch.Tensor:
    """The ``needed`` mask as a bool ``(B, S)`` tensor, checked."""
    array = np.asarray(needed)
    if array.shape != (batch, rows) or array.dtype != np.bool_:
        raise CertgateInputError(
            f"needed must be a boolean array of shape ({batch}, {rows}), got "
            f"{array.dtype} {array.shape}"
        )
    return torch.from_numpy(np.ascontiguousarray(array))


def _checked_groups(groups: Sequence[Sequence[int]], width: int) -> list[list[int]]:
    """The one-hot groups as lists of column indices, checked: at least two columns each,
    within the input, no column in two groups."""
    checked = [[int(c) for c in group] for group in groups]
    seen: set[int] = set()
    for group in checked:
        if len(group) < 2 or any(not 0 <= c < width for c in group):
            raise CertgateInputError(
                f"one-hot group {group} must name at least 2 of the {width} input columns"
            )
        if seen & set(group) or len(set(group)) != len(group):
            raise CertgateInputError(f"one-hot group {group} repeats a column")
        seen |= set(group)
    return checked


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


def _interval_affine(
    affine: _Affine, lo: torch.Tensor, hi: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sound interval image of ``weight @ x + bias`` for ``x`` in ``[lo, hi]`` (batched; the
    map may be shared or one per box).

    Finite rows use the midpoint/radius form; rows with infinite coordinates use
    infinity-safe arithmetic: an infinite coordinate contributes ±∞ only through a non-zero
    weight, never ``0·∞``. Widened by the margin rule and sanitised (module doc).
    """
    finite = torch.isfinite(lo).all(dim=1) & torch.isfinite(hi).all(dim=1)
    if bool(finite.all()):
        return _finite_interval_affine(affine, lo, hi)
    out_lo = torch.empty(lo.shape[0], affine.weight.shape[-2], dtype=torch.float64)
    out_hi = torch.empty_like(out_lo)
    if finite.any():
        out_lo[finite], out_hi[finite] = _finite_interval_affine(
            _restricted(affine, finite), lo[finite], hi[finite]
        )
    infinite = ~finite
    if infinite.any():
        part = _restricted(affine, infinite)
        i_lo, i_hi = lo[infinite], hi[infinite]
        positive = part.weight.clamp(min=0.0)
        negative = part.weight.clamp(max=0.0)
        lo_f = torch.where(torch.isfinite(i_lo), i_lo, torch.zeros_like(i_lo))
        hi_f = torch.where(torch.isfinite(i_hi), i_hi, torch.zeros_like(i_hi))
        c_lo, c_hi = _widened(
            part,
            _apply(positive, lo_f) + _apply(negative, hi_f) + part.bias,
            _apply(positive, hi_f) + _apply(negative, lo_f) + part.bias,
            lo_f, hi_f, _nonzero_inputs(i_lo, i_hi),
        )
        lo_inf = (i_lo == -np.inf).to(torch.float64)
        hi_inf = (i_hi == np.inf).to(torch.float64)
        # a folded coefficient within rounding of zero has an unknown real sign
        certain = part.weight.abs() > SOUNDNESS_REL_MARGIN * part.mag_weight
        unsure = (part.support_weight > 0) & ~certain
        has_pos = ((positive > 0) & certain | unsure).to(torch.float64)
        has_neg = ((negative < 0) & certain | unsure).to(torch.float64)
        to_minus = (_apply(has_pos, lo_inf) + _apply(has_neg, hi_inf)) > 0
        to_plus = (_apply(has_pos, hi_inf) + _apply(has_neg, lo_inf)) > 0
        c_lo[to_minus] = -np.inf
        c_hi[to_plus] = np.inf
        out_lo[infinite], out_hi[infinite] = c_lo, c_hi
    return out_lo, out_hi


def _finite_interval_affine(
    affine: _Affine, lo: torch.Tensor, hi: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_interval_affine` on boxes whose coordinates are all finite (midpoint/radius)."""
    mid, rad = _halves(lo, hi)
    center = _apply(affine.weight, mid) + affine.bias
    radius = _apply(affine.abs_weight, rad)
    return _widened(affine, center - radius, center + radius, lo, hi)


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

    margin = magnitude_margin(magnitude, support)
    return _sanitise(lower - margin, upper + margin)


def _first_interval(
    affine: _Affine, lo: torch.Tensor, hi: torch.Tensor, onehot: _OneHot | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_interval_affine` of a map applied to the input box, with every usable one-hot
    group bounded exactly by its allowed categories (boxes with an infinite coordinate keep
    the plain interval image). The margin's magnitude comes from the whole box, which holds
    every allowed one-hot vector, so it still dominates the rounding."""
    if onehot is None or not bool(torch.isfinite(lo).all() & torch.isfinite(hi).all()):
        return _interval_affine(affine, lo, hi)
    mid, rad = _input_halves(lo, hi, onehot)
    center = _apply(affine.weight, mid) + affine.bias
    radius = _apply(affine.abs_weight, rad)
    low, high = center - radius, center + radius
    if affine.weight.ndim == 2:
        group_low, group_high = _shared_group_extremes(affine.weight, onehot)
        return _widened(affine, low + group_low, high + group_high, lo, hi)
    step = max(1, GROUP_CHUNK // max(1, affine.weight.shape[-2] * onehot.index.numel()))
    for start in range(0, lo.shape[0], step):
        part = slice(start, start + step)
        records = onehot.select(part)
        low[part] += _group_extreme(affine.weight[part], records)
        high[part] += _group_extreme(affine.weight[part], records, largest=True)
    return _widened(affine, low, high, lo, hi)


def _distinct_rows(masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct rows of a boolean ``(B, m)`` matrix and each row's index among them
    (rows of up to 62 entries are compared as packed integers, much faster than rows)."""
    if masks.shape[1] > 62:
        return torch.unique(masks, dim=0, return_inverse=True)
    weights = torch.ones(masks.shape[1], dtype=torch.long) << torch.arange(masks.shape[1])
    keys, inverse = torch.unique((masks.long() * weights).sum(dim=1), return_inverse=True)
    patterns = ((keys[:, None] & weights) != 0)
    return patterns, inverse


def _shared_group_extremes(
    weight: torch.Tensor, onehot: _OneHot
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per box and row of a weight matrix shared by every box: the sums over usable groups of
    the smallest and largest weight over the allowed categories, ``(B, rows)`` each.

    Boxes of a batch share few distinct sets of allowed categories per group, so each set's
    extremes are computed once and gathered."""
    batch = onehot.allowed.shape[0]
    low = torch.zeros(batch, weight.shape[0], dtype=torch.float64)
    high = torch.zeros_like(low)
    for group in range(onehot.index.shape[0]):
        patterns, inverse = _distinct_rows(onehot.allowed[:, group])
        values = weight[:, onehot.index[group]]  # (rows, m)
        allowed = patterns[:, None, :]
        smallest = torch.where(allowed, values[None], np.inf).amin(dim=2)
        largest = torch.where(allowed, values[None], -np.inf).amax(dim=2)
        usable = onehot.usable[:, group, None]
        low += torch.where(usable, smallest[inverse], 0.0)
        high += torch.where(usable, largest[inverse], 0.0)
    return low, high


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
    spec: torch.Tensor, last: _Affine, lo: torch.Tensor, hi: torch.Tensor,
    onehot: _OneHot | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """IBP bound of ``spec @ (W h + b)`` with the spec folded into the last layer (the margin
    comes from the unfolded ``|spec|·|W|``, so cancellation in the fold is covered);
    ``onehot`` when ``h`` is the input box itself (a one-layer network)."""
    matrix = spec[0] if spec.stride(0) == 0 else spec
    return _first_interval(_folded(matrix, last), lo, hi, onehot)


def _with_signs(
    z_lo: torch.Tensor, z_hi: torch.Tensor, signs: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pre-activation bounds narrowed by known signs (``1``: ``z >= 0`` on the box, ``-1``:
    ``z <= 0``, ``0``: nothing known); ``None`` leaves them as they are."""
    if signs is None:
        return z_lo, z_hi
    return (
        torch.where(signs > 0, z_lo.clamp(min=0.0), z_lo),
        torch.where(signs < 0, z_hi.clamp(max=0.0), z_hi),
    )


def _layer_signs(
    signs: torch.Tensor | None, affines: list[_Affine]
) -> list[torch.Tensor | None]:
    """``signs`` ``(B, N)`` cut into one ``(B, n_k)`` block per layer but the last (``None``
    for layers without a kink, or when no signs are known)."""
    blocks: list[torch.Tensor | None] = []
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
    affines: list[_Affine], lo: torch.Tensor, hi: torch.Tensor, onehot: _OneHot | None = None,
    signs: list[torch.Tensor | None] | None = None,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Pre-activation IBP bounds of every layer but the last (narrowed by known signs)."""
    pre_lo, pre_hi = [], []
    h_lo, h_hi = lo, hi
    for index, affine in enumerate(affines[:-1]):
        if index == 0:
            z_lo, z_hi = _first_interval(affine, h_lo, h_hi, onehot)
        else:
            z_lo, z_hi = _interval_affine(affine, h_lo, h_hi)
        if signs is not None:
            z_lo, z_hi = _with_signs(z_lo, z_hi, signs[index])
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
    ``slope_bound`` bounds every lower slope alpha-CROWN may choose and the upper slope
    (used for magnitudes).
    """

    lower_slope: torch.Tensor
    upper_slope: torch.Tensor
    upper_intercept: torch.Tensor
    slope_bound: torch.Tensor


def _relax(lo: torch.Tensor, hi: torch.Tensor, slope: torch.Tensor) -> _Relaxation:
    """CROWN's linear relaxation of a one-kink activation with left slope ``slope``.

    Unstable neurons get the chord through ``(l, slope·l)`` and ``(u, u)`` as upper bound and
    the adaptive lower slope (1 when ``u >= -l``, else ``slope``). Bounds must be finite; the
    chord is computed on halved values where ``u − l`` would overflow.
    """
    unstable = (lo < 0) & (hi > 0)
    active = lo >= 0
    slope = slope.expand_as(lo)
    stable_slope = torch.where(active, torch.ones_like(lo), slope)
    width = hi - lo
    rise = hi - slope * lo
    overflow = ~torch.isfinite(width) | ~torch.isfinite(rise)
    if bool(overflow.any()):
        width = torch.where(overflow, hi * 0.5 - lo * 0.5, width)
        rise = torch.where(overflow, hi * 0.5 - (slope * 0.5) * lo, rise)
    width = torch.where(unstable, width, torch.ones_like(lo))
    chord = torch.where(unstable, rise / width, stable_slope)
    intercept = torch.where(unstable, hi * (1.0 - chord), torch.zeros_like(lo))
    adaptive = torch.where(hi >= -lo, torch.ones_like(lo), slope)
    lower_slope = torch.where(unstable, adaptive, stable_slope)
    steepest = torch.maximum(torch.maximum(chord, lower_slope), torch.ones_like(lo))
    slope_bound = torch.where(unstable, steepest, stable_slope)
    return _Relaxation(lower_slope, chord, intercept, slope_bound)


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
            negative = coeffs.clamp(max=0.0)
            const = const + (negative * relaxation.upper_intercept.index_select(0, box)).sum(
                dim=1
            )
            # the lower slope for a non-negative coefficient, the upper one for a negative one
            # (by clamped parts: the same products; a select took 4x as long on one thread)
            coeffs = (coeffs.clamp(min=0.0) * relaxation.lower_slope.index_select(0, box)
                      + negative * relaxation.upper_slope.index_select(0, box))
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


@dataclass
class _Magnitudes:
    """Per box, for the pre-activations of every layer: an upper bound of the sum of the
    absolute values of the real terms that make them up (the network evaluated in absolute
    values from ``max(|lo|, |hi|)``, relaxations included), and whether any such term may be
    non-zero (structurally: non-zero factors only, dead ReLUs output exactly zero)."""

    value: list[torch.Tensor] = field(default_factory=list)
    support: list[torch.Tensor] = field(default_factory=list)

    def push(
        self, affine: _Affine, value_in: torch.Tensor, support_in: torch.Tensor
    ) -> None:
        """Add the pre-activations of ``affine`` given its input's magnitude and support."""
        self.value.append(value_in @ affine.mag_weight.T + affine.mag_bias)
        reach = support_in @ affine.support_weight.T
        self.support.append(((reach > 0) | affine.support_bias).to(torch.float64))

    def activated(
        self, relaxation: _Relaxation | None, dead: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Magnitude and support of the last pushed layer's output (after its activation)."""
        value, support = self.value[-1], self.support[-1]
        if relaxation is None:
            return value, support
        value = relaxation.slope_bound * value + relaxation.upper_intercept
        return value, torch.where(dead, 0.0, support)


def _row_margins(magnitude: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """Margins of rows with real-term magnitudes ``magnitude`` (the margin rule)."""
    return magnitude_margin(magnitude, lambda: support > 0)


def _single_rows(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], layer: int,
    inputs_lo: list[torch.Tensor], inputs_hi: list[torch.Tensor], onehot: _OneHot | None,
    magnitude: torch.Tensor, support: torch.Tensor,
) -> tuple[list[_Affine], dict[int, _Relaxation], list[torch.Tensor], list[torch.Tensor],
           _OneHot | None, torch.Tensor] | None:
    """Float32 copies of what back-substituting ``layer``'s rows reads, with the float32
    margins of :func:`verifier.single_precision.single_margins`; ``None`` where float32 is
    not safe for them."""
    below = range(layer)
    margins = single_margins(
        [affines[j].weight for j in range(layer + 1)], [affines[j].bias for j in range(layer + 1)],
        [relaxations[j].slope_bound if j in relaxations else None for j in below],
        [relaxations[j].upper_intercept if j in relaxations else None for j in below],
        [*inputs_lo, *inputs_hi], 0 if onehot is None else onehot.index.shape[0],
        magnitude, support, SOUNDNESS_ABS_MARGIN,
    )
    if margins is None:
        return None
    single = torch.float32
    single_affines = [
        _Affine(a.weight.to(single), a.bias.to(single), a.abs_weight, a.slope, a.mag_weight,
                a.mag_bias, a.support_weight, a.support_bias)
        for a in affines[: layer + 1]
    ]
    single_relaxations = {
        j: _Relaxation(r.lower_slope.to(single), r.upper_slope.to(single),
                       r.upper_intercept.to(single), r.slope_bound)
        for j, r in relaxations.items()
    }
    single_onehot = None if onehot is None else _OneHot(
        onehot.index, onehot.allowed, onehot.usable, onehot.free.to(single),
        onehot.shut.to(single), onehot.columns,
    )
    return (single_affines, single_relaxations, [t.to(single) for t in inputs_lo],
            [t.to(single) for t in inputs_hi], single_onehot, margins)


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


def _crown_layer_bounds(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], layer: int,
    ibp_lo: torch.Tensor, ibp_hi: torch.Tensor, magnitude: torch.Tensor,
    support: torch.Tensor, inputs_lo: list[torch.Tensor], inputs_hi: list[torch.Tensor],
    onehot: _OneHot | None, halves: dict[torch.dtype, dict[int, tuple[torch.Tensor, ...]]],
    active: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
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
    unstable = (ibp_lo < 0) & (ibp_hi > 0) & active[:, None]
    box, neuron = torch.nonzero(unstable, as_tuple=True)
    out_lo, out_hi = ibp_lo.clone(), ibp_hi.clone()
    if box.numel() == 0:
        return out_lo, out_hi
    single = None
    if layer == len(affines) - 2:
        single = _single_rows(affines, relaxations, layer, inputs_lo, inputs_hi, onehot,
                              magnitude, support)
    coarse = torch.ones(box.numel(), dtype=torch.bool)
    lower = torch.full((box.numel(),), -np.inf, dtype=torch.float64)
    upper = torch.full((box.numel(),), np.inf, dtype=torch.float64)
    if single is not None:
        trial = slice(0, SINGLE_TRIAL)
        cache = halves.setdefault(torch.float32, {})
        margin = single[-1][box, neuron].to(torch.float64)
        lower[trial], upper[trial] = _layer_rows(single, layer, box[trial], neuron[trial], cache)
        coarse[trial] = margin[trial] > SINGLE_SHARE * (upper[trial] - lower[trial])
        if float(coarse[trial].to(torch.float64).mean()) <= SINGLE_TRIAL_MISSES:
            rest = slice(SINGLE_TRIAL, None)
            lower[rest], upper[rest] = _layer_rows(single, layer, box[rest], neuron[rest], cache)
            coarse = margin > SINGLE_SHARE * (upper - lower)
        else:
            coarse[:] = True
    if bool(coarse.any()):
        double = (affines, relaxations, inputs_lo, inputs_hi, onehot,
                  _row_margins(magnitude, support))
        b, n = box[coarse], neuron[coarse]
        redo_lo, redo_hi = _layer_rows(double, layer, b, n, halves.setdefault(torch.float64, {}))
        lower[coarse] = torch.maximum(lower[coarse], redo_lo)
        upper[coarse] = torch.minimum(upper[coarse], redo_hi)
    out_lo[box, neuron] = torch.maximum(out_lo[box, neuron], lower)
    out_hi[box, neuron] = torch.minimum(out_hi[box, neuron], upper)
    return out_lo, out_hi


def _crown_finite(
    affines: list[_Affine], spec: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
    onehot: _OneHot | None, signs: list[torch.Tensor | None], needed: torch.Tensor | None,
    first: tuple[torch.Tensor, torch.Tensor] | None, give_up_saturated: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor],
           dict[int, _Relaxation], torch.Tensor, tuple[torch.Tensor, ...], torch.Tensor]:
    """CROWN with CROWN intermediate bounds on boxes whose IBP bounds are finite; also
    returns ``|A_lower| + |A_upper|``, the final linear bounds ``(A_lower, CROWN's lower
    bound, A_upper, CROWN's upper bound)`` before the intersection with IBP (see
    :class:`LinearBounds`) and the margins of the spec rows (for alpha-CROWN). Neurons whose sign
    is known (``signs``, per layer) are stable: no back-substitution runs for them. Spec rows
    not ``needed`` (per box) keep their IBP bounds. With ``give_up_saturated``, a box with a
    kink layer whose every neuron is unstable keeps IBP bounds from the next layer on (spec
    rows included; the first layer, bounded exactly by intervals, is not counted).
    ``first``: the first layer's pre-activation bounds on these boxes, the caller's IBP ones
    narrowed by the known signs (exact intervals, so CROWN has nothing to add; None without
    a hidden layer)."""
    relaxations: dict[int, _Relaxation] = {}
    active = torch.ones(lo.shape[0], dtype=torch.bool)
    pre_lo: list[torch.Tensor] = []
    pre_hi: list[torch.Tensor] = []
    inputs_lo, inputs_hi = [lo], [hi]
    halves: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    layer_halves: dict[torch.dtype, dict[int, tuple[torch.Tensor, ...]]] = {
        torch.float64: halves
    }
    magnitudes = _Magnitudes()
    value_in = torch.maximum(lo.abs(), hi.abs())
    support_in = _nonzero_inputs(lo, hi)
    for index, affine in enumerate(affines[:-1]):
        if index == 0:
            assert first is not None
            z_lo, z_hi = first
        else:
            z_lo, z_hi = _with_signs(
                *_interval_affine(affine, inputs_lo[index], inputs_hi[index]), signs[index])
        magnitudes.push(affine, value_in, support_in)
        if index > 0 and affine.slope is not None:
            z_lo, z_hi = _crown_layer_bounds(
                affines, relaxations, index, z_lo, z_hi,
                magnitudes.value[-1], magnitudes.support[-1],
                inputs_lo, inputs_hi, onehot, layer_halves, active,
            )
        pre_lo.append(z_lo)
        pre_hi.append(z_hi)
        dead = None
        if affine.slope is not None:
            relaxations[index] = _relax(z_lo, z_hi, affine.slope)
            dead = (affine.slope == 0) & (z_hi <= 0)
            if give_up_saturated and index > 0:
                active &= ~((z_lo < 0) & (z_hi > 0)).all(dim=1)
        value_in, support_in = magnitudes.activated(relaxations.get(index), dead)
        h_lo, h_hi = _activate_interval(z_lo, z_hi, affine.slope)
        inputs_lo.append(h_lo)
        inputs_hi.append(h_hi)
    last = len(affines) - 1
    magnitudes.push(affines[last], value_in, support_in)
    spec_margin = _row_margins(
        (spec.abs() @ magnitudes.value[-1].unsqueeze(-1)).squeeze(-1),
        ((spec != 0).to(torch.float64) @ magnitudes.support[-1].unsqueeze(-1)).squeeze(-1),
    )
    if not bool(active.all()):
        rows = spec.shape[1]
        kept = active[:, None].expand(-1, rows)
        needed = kept if needed is None else needed & kept
    lower, upper, coefficients, (signed_lower, signed_upper) = _crown_spec(
        affines, relaxations, spec, spec_margin, inputs_lo, inputs_hi, onehot, needed, halves
    )
    ibp_lower, ibp_upper = _spec_interval(
        spec, affines[last], inputs_lo[last], inputs_hi[last], onehot if last == 0 else None
    )
    return (
        torch.maximum(lower, ibp_lower), torch.minimum(upper, ibp_upper),
        pre_lo, pre_hi, relaxations, coefficients,
        (signed_lower, lower, signed_upper, upper), spec_margin,
    )


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


def _alpha_optimise(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], spec: torch.Tensor,
    spec_margin: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, steps: int,
    learning_rate: float, onehot: _OneHot | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Best lower/upper spec bounds over ``steps`` Adam steps on the lower slopes.

    Every lower slope in ``[slope, 1]`` gives a sound relaxation, so every iterate's bound is
    sound and the best one over the iterations is returned (starting from CROWN's slopes).
    The margins are CROWN's: their magnitudes already allow any slope in that range.
    """
    batch, rows, _ = spec.shape
    both = torch.cat([spec, -spec], dim=1)  # lower bounds of both signs: (B, 2S, out)
    margin = torch.cat([spec_margin, spec_margin], dim=1)
    kink = sorted(relaxations)
    minimum = {k: affines[k].slope for k in kink}
    params = {
        k: relaxations[k].lower_slope.unsqueeze(1).expand(batch, 2 * rows, -1).clone()
        .requires_grad_(True)
        for k in kink
    }
    optimiser = torch.optim.Adam(list(params.values()), lr=learning_rate)
    best = torch.full((batch, 2 * rows), -np.inf, dtype=torch.float64)
    mid, rad = _input_halves(lo, hi, onehot)
    mid, rad = mid.unsqueeze(1), rad.unsqueeze(1)
    for _ in range(steps + 1):
        coeffs = both @ affines[-1].weight
        const = both @ affines[-1].bias
        for index in range(len(affines) - 2, -1, -1):
            if index in params:
                relaxation = relaxations[index]
                positive = coeffs.clamp(min=0.0)
                negative = coeffs.clamp(max=0.0)
                intercept = relaxation.upper_intercept.unsqueeze(1)
                const = const + (negative * intercept).sum(dim=-1)
                coeffs = positive * params[index] + negative * relaxation.upper_slope.unsqueeze(1)
            const = const + coeffs @ affines[index].bias
            coeffs = coeffs @ affines[index].weight
        bound = (coeffs * mid).sum(-1) - (coeffs.abs() * rad).sum(-1) + const - margin
        if onehot is not None:
            bound = bound + _group_extreme(coeffs, onehot)
        usable = bound.detach()
        best = torch.maximum(best, torch.where(torch.isnan(usable), -np.inf, usable))
        if steps == 0:
            break
        optimiser.zero_grad()
        (-bound.sum()).backward()
        optimiser.step()
        with torch.no_grad():
            for k, param in params.items():
                param.copy_(torch.maximum(param.clamp(max=1.0), minimum[k]))
    best = torch.where(best == np.inf, -np.inf, best)
    return best[:, :rows], -best[:, rows:]


def compute_bounds(
    network: Network, lower: np.ndarray, upper: np.ndarray, spec: np.ndarray | None = None,
    method: Method = "crown", *, alpha_steps: int = 20, alpha_lr: float = 0.1,
    groups: Sequence[Sequence[int]] = (), known_signs: np.ndarray | None = None,
    needed: np.ndarray | None = None, give_up_saturated: bool = False,
) -> BoundsResult:
    """Sound bounds of ``spec @ network(x)`` over each box ``[lower[b], upper[b]]``.

    ``lower``/``upper``: ``(B, inputs)`` (a single box may be 1-D). ``method``: ``ibp``,
    ``crown`` (CROWN intermediate bounds) or ``alpha-crown`` (``alpha_steps`` Adam steps on the
    lower slopes of the final bound). Boxes with infinite coordinates that the network reads
    are bounded by IBP only. ``groups``: one-hot groups of input columns (the inputs of
    interest hold exactly one 1 in each): the bounds then hold over the one-hot points of each
    box, and a group's part of every linear bound is exact over its allowed categories.
    ``known_signs``: ``(B, N)`` int8 over the kink neurons of the lowered network (the layout
    of :meth:`BoundsResult.signs`), ``1`` where the pre-activation is known to be ``>= 0`` on
    the whole box, ``-1`` where ``<= 0``, ``0`` where nothing is known — typically the signs
    proven on an enclosing box (a parent in a branch and bound). The caller guarantees them;
    they narrow the pre-activation bounds and spare CROWN's back-substitution for those
    neurons (a stable neuron's relaxation is exact whatever its bounds). See the module
    ``needed``: ``(B, S)`` bool, the (box, row) pairs whose bounds the caller uses; CROWN
    spares the final back-substitution of the others, which keep their IBP bounds (still
    sound, with zero ``sensitivity``; alpha-CROWN optimises every row).
    ``give_up_saturated``: CROWN stops tightening a box after a kink layer (not the first)
    whose every neuron it leaves unstable (a saturated layer); the box's later layers and
    spec rows keep IBP bounds (sound, looser, zero ``sensitivity``; its unstable count can
    only be larger).
    For deep networks, where a box that saturates one layer saturates all later ones and
    would otherwise back-substitute every neuron through every layer for nothing. See the
    module docstring for the guarantees.
    """
    if method not in METHODS:
        raise CertgateInputError(
            f"unknown bound method {method!r}; use one of {', '.join(METHODS)}"
        )
    started = time.perf_counter()
    lowered, affines = _prepare(network)
    lo, hi = _as_boxes(network, lower, upper)
    onehot = _onehot(_checked_groups(groups, network.input_size),
                     torch.as_tensor(np.atleast_2d(np.asarray(lower, dtype=np.float64))),
                     torch.as_tensor(np.atleast_2d(np.asarray(upper, dtype=np.float64))))
    batch = lo.shape[0]
    spec_tensor = _as_spec(spec, network.output_size, batch)
    signs = _checked_signs(known_signs, affines, batch)
    with torch.no_grad():
        pre_lo, pre_hi = _ibp_layers(affines, lo, hi, onehot, _layer_signs(signs, affines))
        h_lo, h_hi = _post_activation(affines, pre_lo, pre_hi, lo, hi, len(affines) - 1)
        out_lo, out_hi = _spec_interval(
            spec_tensor, affines[-1], h_lo, h_hi, onehot if len(affines) == 1 else None
        )
        crownable = torch.isfinite(lo).all(dim=1) & torch.isfinite(hi).all(dim=1)
        for z_lo, z_hi in zip(pre_lo, pre_hi, strict=True):
            crownable &= torch.isfinite(z_lo).all(dim=1) & torch.isfinite(z_hi).all(dim=1)
        run_crown = method != "ibp" and bool(crownable.any())
        sensitivity = linear = None
        f_onehot = None
        if run_crown:
            f_lo, f_hi = lo[crownable], hi[crownable]
            if spec_tensor.stride(0) == 0:
                f_spec = spec_tensor[0].expand(f_lo.shape[0], *spec_tensor.shape[1:])
            else:
                f_spec = spec_tensor[crownable]
            f_onehot = None if onehot is None else onehot.select(crownable)
            f_signs = None if signs is None else signs[crownable]
            f_needed = None if needed is None else _checked_needed(
                needed, batch, spec_tensor.shape[1]
            )[crownable]
            (c_lo, c_hi, c_pre_lo, c_pre_hi, relaxations, c_sensitivity, c_linear,
             spec_margin) = _crown_finite(
                affines, f_spec, f_lo, f_hi, f_onehot, _layer_signs(f_signs, affines), f_needed,
                (pre_lo[0][crownable], pre_hi[0][crownable]) if pre_lo else None,
                give_up_saturated,
            )
            sensitivity = np.zeros((batch, spec_tensor.shape[1], network.input_size))
            sensitivity[crownable.numpy()] = c_sensitivity.numpy()
            linear = _linear_bounds(crownable.numpy(), c_linear, sensitivity.shape)
            out_lo[crownable], out_hi[crownable] = c_lo, c_hi
            for index in range(len(pre_lo)):
                pre_lo[index][crownable] = c_pre_lo[index]
                pre_hi[index][crownable] = c_pre_hi[index]
    if run_crown and method == "alpha-crown" and relaxations:
        a_lo, a_hi = _alpha_optimise(
            affines, relaxations, f_spec, spec_margin, f_lo, f_hi, alpha_steps, alpha_lr,
            f_onehot,
        )
        out_lo[crownable] = torch.maximum(out_lo[crownable], a_lo)
        out_hi[crownable] = torch.minimum(out_hi[crownable], a_hi)
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
        linear=linear,
    )


def _linear_bounds(
    crownable: np.ndarray, linear: tuple[torch.Tensor, ...], shape: tuple[int, ...]
) -> LinearBounds:
    """The :class:`LinearBounds` of a batch from CROWN's on its ``crownable`` boxes (the
    others: infinite values, zero coefficients)."""
    signed_lower, lower, signed_upper, upper = (part.numpy() for part in linear)
    result = LinearBounds(
        np.zeros(shape), np.full(shape[:2], -np.inf), np.zeros(shape), np.full(shape[:2], np.inf)
    )
    result.lower_coefficients[crownable] = signed_lower
    result.lower_value[crownable] = lower
    result.upper_coefficients[crownable] = signed_upper
    result.upper_value[crownable] = upper
    return result


def pairwise_difference_spec(classes: int) -> np.ndarray:
    """Specification rows ``e_c − e_d`` for every ordered pair ``c ≠ d`` of ``classes``
    outputs, grouped by ``c`` (``d`` ascending): ``(classes·(classes − 1), classes)``."""
    rows = []
    for c in range(classes):
        for d in range(classes):
            if d != c:
                row = np.zeros(classes)
                row[c], row[d] = 1.0, -1.0
                rows.append(row)
    return np.array(rows)


def kink_neurons(network: Network) -> int:
    """How many kink neurons the lowered network has: the width of
    :meth:`BoundsResult.signs` and of ``known_signs``."""
    _, affines = _prepare(network)
    return sum(a.weight.shape[0] for a in affines[:-1] if a.slope is not None)


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
    out_lo, out_hi = _interval_affine(
        _affine(weight, torch.zeros(weight.shape[0], dtype=torch.float64)), lo, hi
    )
    return out_lo.numpy(), out_hi.numpy()
