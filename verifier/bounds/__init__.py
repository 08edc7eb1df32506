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
* CROWN and alpha-CROWN are intersected with IBP (the final and every intermediate layer),
  and alpha-CROWN with CROWN, so each is never looser than the cheaper method.
* Floating point (DESIGN D2): every computed bound — intermediate and final — is widened
  outward by ``rel × magnitude + SOUNDNESS_ABS_MARGIN`` (:mod:`verifier.numerics.margins`),
  ``rel`` counted per network: ``2·gamma(r)`` (``8·r·u``) for ``r`` the roundings a real
  term meets through every layer (:func:`verifier.numerics.network_roundings`) where the
  coefficients are the network's own, ``2·gamma(r + F)`` where some are folded and every
  fold counted the ``F`` roundings it left in them
  (:attr:`verifier.network.Network.fold_roundings`), ``SOUNDNESS_REL_MARGIN`` (``1e-9``)
  where a folded layer is not counted. The *magnitude* is the network (and
  the specification) evaluated in absolute values — ``|C|·|W_L|·…·|W_1|·max(|lo|, |hi|)``
  plus the absolute biases and relaxation intercepts — computed from the unfolded factors,
  never from float products that may have cancelled (``C·W`` can round to an exact zero
  that is not zero in real arithmetic). The forward error of any float evaluation of a sum
  of products is at most ``γ_r`` times that magnitude (``r·2⁻⁵³`` for ``r`` roundings per
  term), so the counted margin is eight times the rounding it covers (the rest covers the
  magnitude's own float evaluation and CROWN's linear bounds read at points). The margin is
  skipped only when every term is zero *in real arithmetic*, decided
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

Layout (one module per job; this module is the public API)
----------------------------------------------------------
Every propagator is written once against the array namespace that numpy and torch share;
the few operations spelled differently go through :mod:`verifier.arrays`. ``backend``
(which arrays a call computes on: numpy unless torch is already imported or alpha-CROWN is
asked for, so a process that never needed torch never imports it), ``results`` (what a
call returns), ``inputs`` (argument checks), ``carried`` (bounds of the last hidden layer carried
from an enclosing box), ``affine`` (affine maps
with their real-term magnitudes, the margin rule), ``activation`` (the one-kink activation:
interval image, relaxation, its backward rule, alpha's slope range), ``onehot`` (exact
one-hot groups), ``intervals`` (IBP), ``backward`` (CROWN's back-substitution and
concretisation), ``box_rows`` (the second map's rows box by box, one product per box over
its free input columns), ``intermediate`` (CROWN layer by layer, float32 rows), ``alpha``
(alpha-CROWN: autograd, torch only, imported when asked for). Names with a leading
underscore are private to the package.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from verifier.arrays import (
    Array,
    from_numpy,
    namespace,
    no_grad,
    shared_rows,
    to_numpy,
)
from verifier.bounds.activation import LOWER_SLOPES, LowerSlopes
from verifier.bounds.affine import PreparedNetwork, _affine, _prepare
from verifier.bounds.backend import BACKENDS, Backend, _use_torch
from verifier.bounds.backward import ROW_CHUNK
from verifier.bounds.carried import (
    CARRIED_DTYPE,
    _layer_carried,
    carried_bounds,
    carried_width,
)
from verifier.bounds.inputs import (
    _as_boxes,
    _as_spec,
    _checked_carried,
    _checked_groups,
    _checked_needed,
    _checked_signs,
)
from verifier.bounds.intermediate import (
    SINGLE_SHARE,
    SINGLE_TRIAL,
    SINGLE_TRIAL_MISSES,
    _crown_finite,
)
from verifier.bounds.intervals import (
    GROUP_CHUNK,
    _ibp_layers,
    _interval_affine,
    _layer_signs,
    _post_activation,
    _spec_interval,
)
from verifier.bounds.onehot import _onehot
from verifier.bounds.results import (
    ACTIVE,
    INACTIVE,
    METHODS,
    UNSTABLE,
    BoundsResult,
    LinearBounds,
    Method,
    pack_signs,
    unpack_signs,
)
from verifier.errors import CertgateInputError
from verifier.network import Network

__all__ = [
    "ACTIVE",
    "BACKENDS",
    "CARRIED_DTYPE",
    "GROUP_CHUNK",
    "INACTIVE",
    "LOWER_SLOPES",
    "METHODS",
    "ROW_CHUNK",
    "SINGLE_SHARE",
    "SINGLE_TRIAL",
    "SINGLE_TRIAL_MISSES",
    "UNSTABLE",
    "Backend",
    "BoundsResult",
    "LinearBounds",
    "LowerSlopes",
    "Method",
    "PreparedNetwork",
    "alpha_crown",
    "carried_bounds",
    "carried_width",
    "compute_bounds",
    "crown",
    "ibp",
    "kink_neurons",
    "linear_interval",
    "pack_signs",
    "pairwise_difference_spec",
    "unpack_signs",
]


def compute_bounds(
    network: Network | PreparedNetwork, lower: np.ndarray, upper: np.ndarray,
    spec: np.ndarray | None = None,
    method: Method = "crown", *, alpha_steps: int = 20, alpha_lr: float = 0.1,
    groups: Sequence[Sequence[int]] = (), known_signs: np.ndarray | None = None,
    needed: np.ndarray | None = None, give_up_saturated: bool = False,
    tighten: np.ndarray | None = None, lower_slopes: LowerSlopes = "adaptive",
    backend: Backend = "auto", carried: np.ndarray | None = None,
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
    spec rows keep IBP bounds (sound, usually looser than CROWN's though not always: IBP
    from the layers CROWN bounded; zero ``sensitivity``; its unstable count can only be
    larger).
    For deep networks, where a box that saturates one layer saturates all later ones and
    would otherwise back-substitute every neuron through every layer for nothing.
    ``tighten``: ``(B,)`` bool, the boxes whose last hidden layer CROWN tightens (None: all;
    earlier hidden layers are tightened on every box); the others keep IBP's pre-activation
    bounds there (sound, looser) and still get CROWN on the spec rows over the relaxations
    of those bounds (CROWN-IBP at the last layer), at a fraction of the cost where a wide
    layer feeds the last one. The result's ``tighten_s`` is the CPU time of
    the hidden layers' tightening.
    ``lower_slopes``: CROWN's lower slope of an unstable neuron, ``adaptive`` (1 when
    ``u >= −l``, else the left slope) or ``left`` (the left piece's slope, 0 for a ReLU;
    :data:`LOWER_SLOPES`); both are sound, neither is tighter on every box (alpha-CROWN starts
    from it). ``backend``: the arrays the propagators compute on, ``numpy``, ``torch`` or
    ``auto`` (:mod:`verifier.bounds.backend`: torch for alpha-CROWN and when torch is already
    imported, else numpy); both run the same code and give sound bounds, equal but for the
    summation order of matrix products. ``carried``: ``(B, 2, n)``, sound bounds of the last
    hidden layer's pre-activations on each box (``[:, 0]`` lower, ``[:, 1]`` upper; ``n`` is
    :func:`carried_width`), typically an enclosing box's (:func:`carried_bounds` of its
    result), ``−∞``/``+∞`` where nothing is known; the caller guarantees them. They are
    intersected with IBP's bounds of that layer before CROWN tightens it, so a box not
    tightened (``tighten``) keeps the tighter of the two (:mod:`verifier.bounds.carried`).
    ``network`` may be a :class:`PreparedNetwork`: the
    same bounds, bit for bit, without rebuilding its maps on every call. See the module
    docstring for the guarantees.
    """
    if method not in METHODS:
        raise CertgateInputError(
            f"unknown bound method {method!r}; use one of {', '.join(METHODS)}"
        )
    if lower_slopes not in LOWER_SLOPES:
        raise CertgateInputError(
            f"unknown lower-slope rule {lower_slopes!r}; use one of {', '.join(LOWER_SLOPES)}"
        )
    if backend not in BACKENDS:
        raise CertgateInputError(
            f"unknown bounds backend {backend!r}; use one of {', '.join(BACKENDS)}"
        )
    started = time.perf_counter()
    box_lo = np.atleast_2d(np.asarray(lower, dtype=np.float64))
    use_torch = _use_torch(backend, method)
    prepared = network if isinstance(network, PreparedNetwork) else PreparedNetwork(network)
    network = prepared.network
    lowered, affines = prepared.maps(use_torch)
    lo, hi = _as_boxes(network, lower, upper, use_torch, prepared.read_inputs())
    onehot = _onehot(_checked_groups(groups, network.input_size),
                     from_numpy(box_lo, use_torch),
                     from_numpy(np.atleast_2d(np.asarray(upper, dtype=np.float64)), use_torch))
    batch = lo.shape[0]
    spec_tensor = _as_spec(spec, network.output_size, batch, use_torch)
    signs = _checked_signs(known_signs, affines, batch, use_torch)
    known_layer = _checked_carried(carried, affines, batch, use_torch)
    xp = namespace(lo)
    with no_grad(lo):
        pre_lo, pre_hi = _ibp_layers(affines, lo, hi, onehot, _layer_signs(signs, affines),
                                     _layer_carried(known_layer, affines))
        h_lo, h_hi = _post_activation(affines, pre_lo, pre_hi, lo, hi, len(affines) - 1)
        out_lo, out_hi = _spec_interval(
            spec_tensor, affines[-1], h_lo, h_hi, onehot if len(affines) == 1 else None
        )
        crownable = xp.all(xp.isfinite(lo), axis=1) & xp.all(xp.isfinite(hi), axis=1)
        for z_lo, z_hi in zip(pre_lo, pre_hi, strict=True):
            crownable &= xp.all(xp.isfinite(z_lo), axis=1) & xp.all(xp.isfinite(z_hi), axis=1)
        run_crown = method != "ibp" and bool(crownable.any())
        sensitivity = linear = None
        tighten_s = 0.0
        f_onehot = None
        if run_crown:
            f_lo, f_hi = lo[crownable], hi[crownable]
            if shared_rows(spec_tensor):
                f_spec = xp.broadcast_to(spec_tensor[0], (f_lo.shape[0], *spec_tensor.shape[1:]))
            else:
                f_spec = spec_tensor[crownable]
            f_onehot = None if onehot is None else onehot.select(crownable)
            f_signs = None if signs is None else signs[crownable]
            f_needed = None if needed is None else _checked_needed(
                needed, batch, spec_tensor.shape[1], use_torch
            )[crownable]
            (c_lo, c_hi, c_pre_lo, c_pre_hi, relaxations, c_sensitivity, c_linear,
             spec_margin, tighten_s) = _crown_finite(
                affines, f_spec, f_lo, f_hi, f_onehot, _layer_signs(f_signs, affines), f_needed,
                # the IBP chain's first two layers: _crown_finite's own start from them
                ([z[crownable] for z in pre_lo[:2]], [z[crownable] for z in pre_hi[:2]]),
                give_up_saturated,
                None if tighten is None else from_numpy(
                    np.asarray(tighten, dtype=bool), use_torch)[crownable],
                lower_slopes,
                _layer_carried(None if known_layer is None else known_layer[crownable], affines),
            )
            sensitivity = np.zeros((batch, spec_tensor.shape[1], network.input_size))
            crown_rows = to_numpy(crownable)
            sensitivity[crown_rows] = to_numpy(c_sensitivity)
            linear = _linear_bounds(crown_rows, c_linear, sensitivity.shape)
            # intersected with the IBP chain's bounds: CROWN's own IBP step reads its tighter
            # intermediate bounds, but a float evaluation can still land an ulp outside
            out_lo[crownable] = xp.maximum(out_lo[crownable], c_lo)
            out_hi[crownable] = xp.minimum(out_hi[crownable], c_hi)
            for index in range(len(pre_lo)):
                pre_lo[index][crownable] = xp.maximum(pre_lo[index][crownable], c_pre_lo[index])
                pre_hi[index][crownable] = xp.minimum(pre_hi[index][crownable], c_pre_hi[index])
    if run_crown and method == "alpha-crown" and relaxations:
        from verifier.bounds.alpha import _alpha_optimise  # autograd: torch only

        a_lo, a_hi = _alpha_optimise(
            affines, relaxations, f_spec, spec_margin, f_lo, f_hi, alpha_steps, alpha_lr,
            f_onehot,
        )
        out_lo[crownable] = xp.maximum(out_lo[crownable], a_lo)
        out_hi[crownable] = xp.minimum(out_hi[crownable], a_hi)
    kinks = [index for index, affine in enumerate(affines[:-1]) if affine.slope is not None]
    return BoundsResult(
        lower=to_numpy(out_lo),
        upper=to_numpy(out_hi),
        method=method,
        network=lowered,
        pre_lower={k: to_numpy(pre_lo[k]) for k in kinks},
        pre_upper={k: to_numpy(pre_hi[k]) for k in kinks},
        elapsed_s=time.perf_counter() - started,
        sensitivity=sensitivity,
        linear=linear,
        tighten_s=tighten_s,
    )


def _linear_bounds(
    crownable: np.ndarray, linear: tuple[Array, ...], shape: tuple[int, ...]
) -> LinearBounds:
    """The :class:`LinearBounds` of a batch from CROWN's on its ``crownable`` boxes (the
    others: infinite values, zero coefficients)."""
    signed_lower, lower, signed_upper, upper = (to_numpy(part) for part in linear)
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
    _, affines = _prepare(network, use_torch=False)
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
    weight = np.asarray(matrix, dtype=np.float64)
    lo = np.ascontiguousarray(lower, dtype=np.float64)
    hi = np.ascontiguousarray(upper, dtype=np.float64)
    with np.errstate(all="ignore"):
        out_lo, out_hi = _interval_affine(_affine(weight, np.zeros(weight.shape[0])), lo, hi)
    return out_lo, out_hi
