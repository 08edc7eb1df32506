"""Which open boxes PV refines first when a specification has a threshold: the boxes whose
mass, once proven, moves the end of the expression's enclosure that has to cross the
threshold for the verdict the current estimates point to.

A demographic-parity ratio ``P[fav | unprivileged] / P[fav | privileged] >= γ`` whose true
value lies below ``γ`` is proven violated only by the upper end of its enclosure, which falls
with mass proven favourable among the privileged and unfavourable among the unprivileged;
mass proven the other way only tightens the lower end. Paper 003's SelectProb refines the
heaviest boxes whatever they can prove. Of the boxes whose mass moves that end, a split
gains most on those whose linear credit already proves part of it (:func:`split_gain`).
Choosing boxes never touches a bound: every interval stays sound whatever the order.
"""

from __future__ import annotations

import numpy as np

from verifier.pv.events import TrackedEvents
from verifier.spec import Specification, interval_eval

STEP = 1e-4
CREDIT_SCALE = 0.1
"""The credit on the deciding side, as a share of a box's worth, at which a split's expected
gain is halfway between :data:`UNCREDITED_GAIN`'s share of the worth and all of it (see
:func:`split_gain`)."""
UNCREDITED_GAIN = 0.2
"""The share of its worth that a split of a box with no credit on the deciding side is
expected to gain, against one whose credit there far exceeds its worth (see
:func:`split_gain`)."""


def verdict_weights(
    spec: Specification, tracked: TrackedEvents, proven: np.ndarray, upper: np.ndarray,
    open_true: np.ndarray, total: float,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per event, how much a unit of mass proven where the event holds (first array) or fails
    (second) moves the deciding end of the expression's enclosure towards the threshold
    (finite differences of :data:`STEP` times the total mass; never negative).

    ``proven``/``upper``: the events' current bounds; ``open_true``: an estimate of the open
    mass where each event holds (:meth:`verifier.pv.boxpool.BoxPool.open_estimate`). The
    estimated value is the expression at ``proven + open_true``; where it lies above the
    threshold the lower end must rise past it, where below the upper end must fall. None
    (refine by mass) without a threshold, when the estimate sits on the threshold, when the
    deciding end is not finite yet, or when no event moves it."""
    if spec.threshold is None or spec.comparison is None:
        return None
    estimate = np.minimum(proven + open_true, upper)
    low, high = interval_eval(spec.expression, tracked.probabilities(estimate, estimate))
    guess = 0.5 * (low + high)
    if not np.isfinite(guess) or guess == spec.threshold:
        return None
    raise_low = guess > spec.threshold

    def deciding_ends(event_lower: np.ndarray, event_upper: np.ndarray) -> list[float]:
        values = [interval_eval(spec.expression, probabilities) for probabilities
                  in tracked.probability_rows(event_lower, event_upper)]
        return [value[0] if raise_low else -value[1] for value in values]

    base = deciding_ends(proven[None, :], upper[None, :])[0]
    if not np.isfinite(base):
        return None
    step = STEP * total
    gain_true = np.zeros(proven.size)
    gain_false = np.zeros(proven.size)
    moved = np.minimum(step, upper - proven)
    # nothing open, or a step that underflows (a total of 5e-324)
    moving = np.flatnonzero(moved > 0.0)
    if moving.size:
        rows = np.arange(moving.size)
        raised = np.repeat(proven[None, :], moving.size, axis=0)
        raised[rows, moving] = np.minimum(proven[moving] + moved[moving], upper[moving])
        lowered = np.repeat(upper[None, :], moving.size, axis=0)
        lowered[rows, moving] = np.maximum(upper[moving] - moved[moving], proven[moving])
        ends = deciding_ends(
            np.concatenate([raised, np.repeat(proven[None, :], moving.size, axis=0)]),
            np.concatenate([np.repeat(upper[None, :], moving.size, axis=0), lowered]))
        with np.errstate(over="ignore", invalid="ignore"):  # a subnormal step: not finite
            gain_true[moving] = (np.array(ends[: moving.size]) - base) / moved[moving]
            gain_false[moving] = (np.array(ends[moving.size :]) - base) / moved[moving]
    gain_true = np.where(np.isfinite(gain_true), np.maximum(gain_true, 0.0), 0.0)
    gain_false = np.where(np.isfinite(gain_false), np.maximum(gain_false, 0.0), 0.0)
    if not (gain_true.any() or gain_false.any()):
        return None
    return gain_true, gain_false


def split_gain(worth: np.ndarray, credit: np.ndarray) -> np.ndarray:
    """Per open box, the expected gain of splitting it for the deciding end, from its
    ``worth`` (the estimated uncredited mass the end reads, each event's side weighed by
    :func:`verdict_weights`) and its ``credit`` there (the same weights on its linear
    credits): ``worth · (r + UNCREDITED_GAIN·CREDIT_SCALE) / (r + CREDIT_SCALE)`` with ``r =
    credit / worth``, 0 where the worth is 0. For choosing boxes only, never a bound.

    Why (docs/decisions.md, 2026-11-30, PV: a split's expected gain): measured over 88k
    directed splits of Adult-13 1×16 at γ 0.5935, what one split moved the deciding end per
    unit of the parent's worth rose from 0.045 for boxes whose deciding side held no credit
    (their line proves none of it: halves rarely do better) to 0.24 where that credit
    exceeded the worth (a line close to the boundary, which halving tightens); the worth
    alone ranked both alike."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        share = credit / worth
        factor = np.where(np.isfinite(share), (share + UNCREDITED_GAIN * CREDIT_SCALE)
                          / (share + CREDIT_SCALE), 1.0)
    return np.where(worth > 0.0, worth * factor, 0.0)
