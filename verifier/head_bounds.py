"""Sound bounds of a network's outputs through its classifier head.

The bound propagators (:mod:`verifier.bounds`) bound piecewise-linear networks; a head
(:data:`verifier.network.HEADS`) is bounded here from sound bounds of the logits, in the order
the head is applied:

* ``sigmoid`` is increasing per output: ``σ(z) ∈ [σ(l), σ(u)]`` for ``z ∈ [l, u]``.
* ``softmax`` and ``log_softmax`` read differences of logits: with ``d_ij = z_j − z_i`` bounded
  by ``[dl_ij, du_ij]`` (one specification row ``e_j − e_i`` per pair, which bounds the
  difference directly and is tighter than subtracting two logit bounds),
  ``S_i = Σ_{j≠i} exp(d_ij) ∈ [Σ exp(dl_ij), Σ exp(du_ij)]``, ``softmax_i = 1/(1 + S_i)`` and
  ``log_softmax_i = −log(1 + S_i)``, both decreasing in ``S_i``.

Floating point: ``exp``, ``log1p`` and the float operations are each within a few units in the
last place of the real value (IEEE operations within half a unit; numpy's ``exp``/``log1p``
within 4); every intermediate is widened outward by the relative ``FUNCTION_REL_MARGIN``
(:mod:`verifier.numerics`; about 4,500 units in the last place) plus ``n·2⁻⁵²`` for a sum
of ``n`` terms, and then by one more float step, so rounding can only loosen a bound.
Results are clipped to the head's range (``[0, 1]`` for sigmoid and softmax, ``(−∞, 0]`` for
log-softmax). Infinite logit bounds give the range's ends, never NaN.
"""

from __future__ import annotations

import numpy as np

from verifier.bounds import Method, compute_bounds, pairwise_difference_spec
from verifier.network import Network
from verifier.numerics import EPS, FUNCTION_REL_MARGIN, widened_down, widened_up


def sigmoid_bounds(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ``sigmoid(z)`` for every ``z`` in ``[lower, upper]`` (element-wise, any
    shape; infinite ends allowed)."""
    with np.errstate(over="ignore"):
        low = widened_down(1.0 / widened_up(1.0 + widened_up(np.exp(-lower))))
        high = widened_up(1.0 / widened_down(1.0 + widened_down(np.exp(-upper))))
    return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)


def _exp_sums(lower: np.ndarray, upper: np.ndarray,
              outputs: int) -> tuple[np.ndarray, np.ndarray]:
    """``[S_lo, S_hi]`` of ``S_i = Σ_{j≠i} exp(z_j − z_i)`` from the difference bounds
    ``[n_boxes, outputs·(outputs − 1)]``: row ``(i, j)`` bounds ``z_j − z_i``, ``i``-major
    (``j ≠ i`` ascending)."""
    shape = (lower.shape[0], outputs, outputs - 1)
    rel = FUNCTION_REL_MARGIN + outputs * EPS
    with np.errstate(over="ignore"):
        s_lo = widened_down(widened_down(np.exp(lower.reshape(shape))).sum(axis=2), rel)
        s_hi = widened_up(widened_up(np.exp(upper.reshape(shape))).sum(axis=2), rel)
    return np.maximum(s_lo, 0.0), s_hi


def softmax_bounds(diff_lower: np.ndarray, diff_upper: np.ndarray,
                   outputs: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``[n_boxes, outputs]`` of ``softmax(z)`` from bounds of its differences."""
    s_lo, s_hi = _exp_sums(diff_lower, diff_upper, outputs)
    low = widened_down(1.0 / widened_up(1.0 + s_hi))
    high = widened_up(1.0 / widened_down(1.0 + s_lo))
    return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)


def log_softmax_bounds(diff_lower: np.ndarray, diff_upper: np.ndarray,
                       outputs: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``[n_boxes, outputs]`` of ``log_softmax(z)`` from bounds of its differences."""
    s_lo, s_hi = _exp_sums(diff_lower, diff_upper, outputs)
    low = -widened_up(np.log1p(s_hi))
    high = -widened_down(np.log1p(s_lo))
    return low, np.minimum(high, 0.0)


def output_bounds(network: Network, lower: np.ndarray, upper: np.ndarray,
                  method: Method = "crown") -> tuple[np.ndarray, np.ndarray]:
    """Sound bounds ``[n_boxes, outputs]`` of the network's outputs, head included, over the
    boxes ``[lower, upper]`` (``[n_boxes, inputs]``).

    Guarantee: for every box ``b`` and every real ``x`` in it, the real-arithmetic output
    ``y = head(logits(x))`` satisfies ``result[0][b] <= y <= result[1][b]`` (module docstring
    for the float model). Not guaranteed: tightness; softmax bounds treat the differences of
    one output with the others as independent.
    """
    logits = network.logits()
    if network.head == "none":
        result = compute_bounds(logits, lower, upper, None, method)
        return result.lower, result.upper
    if network.head == "sigmoid":
        result = compute_bounds(logits, lower, upper, None, method)
        return sigmoid_bounds(result.lower, result.upper)
    outputs = network.output_size
    # rows z_i − z_j (i-major) negated are the z_j − z_i the bounds below take
    result = compute_bounds(logits, lower, upper, pairwise_difference_spec(outputs), method)
    bound = softmax_bounds if network.head == "softmax" else log_softmax_bounds
    return bound(-result.upper, -result.lower, outputs)
