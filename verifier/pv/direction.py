"""Which open boxes PV refines first when a specification has a threshold: the boxes whose
mass, once proven, moves the end of the expression's enclosure that has to cross the
threshold for the verdict the current estimates point to.

A demographic-parity ratio ``P[fav | unprivileged] / P[fav | privileged] >= γ`` whose true
value lies below ``γ`` is proven violated only by the upper end of its enclosure, which falls
with mass proven favourable among the privileged and unfavourable among the unprivileged;
mass proven the other way only tightens the lower end. Paper 003's SelectProb refines the
heaviest boxes whatever they can prove. Choosing boxes never touches a bound: every interval
stays sound whatever the order.
"""

from __future__ import annotations

import numpy as np

from verifier.pv.events import TrackedEvents
from verifier.spec import Specification, interval_eval

STEP = 1e-4


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

    def deciding_end(event_lower: np.ndarray, event_upper: np.ndarray) -> float:
        value = interval_eval(spec.expression, tracked.probabilities(event_lower, event_upper))
        return value[0] if raise_low else -value[1]

    base = deciding_end(proven, upper)
    if not np.isfinite(base):
        return None
    step = STEP * total
    gain_true = np.zeros(proven.size)
    gain_false = np.zeros(proven.size)
    for event in range(proven.size):
        moved = min(step, upper[event] - proven[event])
        if not moved > 0.0:  # nothing open, or a step that underflows (a total of 5e-324)
            continue
        raised = proven.copy()
        raised[event] = min(proven[event] + moved, upper[event])
        lowered = upper.copy()
        lowered[event] = max(upper[event] - moved, proven[event])
        with np.errstate(over="ignore", invalid="ignore"):  # a subnormal step: not finite
            gain_true[event] = (deciding_end(raised, upper) - base) / moved
            gain_false[event] = (deciding_end(proven, lowered) - base) / moved
    gain_true = np.where(np.isfinite(gain_true), np.maximum(gain_true, 0.0), 0.0)
    gain_false = np.where(np.isfinite(gain_false), np.maximum(gain_false, 0.0), 0.0)
    if not (gain_true.any() or gain_false.any()):
        return None
    return gain_true, gain_false
