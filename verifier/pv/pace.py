"""Rounds sized to the time left (DESIGN D20: a budget is the wall time the user waits).

A PV round's cost grows with its boxes and with the network: on a 102-column 787-69 network
two workers bound a box in ~3.5 ms of wall time, so a full round of 4,096 boxes takes ~14 s,
and a round started just before the deadline used to run ~20–50 % past a 30–60 s budget.
:class:`Pace` measures each round's wall time per chosen box and caps the next round so that
it is expected to end by the deadline; a round that cannot fit an eighth of its boxes is
not started.

The measure is throughput: a round's duration is the time from the later of its start and
the previous collection to its own collection, so with two rounds in flight the second is
charged only the time it adds. The cost per box is the largest of the last
:data:`COST_MEMORY` rounds' (a round that slows down by the machine's load or by deeper,
costlier boxes is then not underestimated; the root box, whose time holds the executor's
start, is not counted), and rounds are planned back to back: a new
round starts its work when the rounds in flight are expected to end. In-process a round
runs in chunks sized to the time left, so one that turns out slower than planned is still
cut at the deadline (:class:`verifier.pv.evaluation.DistributedEvaluation`). Sizing never
touches a bound; it only chooses how many boxes a round refines.
"""

from __future__ import annotations

from collections import deque

COST_MEMORY = 3
"""Rounds whose cost per box the next round's size is planned on (the largest wins)."""
MIN_ROUND_SHARE = 0.125
"""A round cut to less than this share of the boxes wanted is not started: its fixed costs
(the caller's bookkeeping, the tasks' round trips, the bound's set-up) are not proportional
to its boxes, so its cost per box is underestimated (a 787-69 network in-process, at load
4.7: 7 boxes planned at 80 ms each took 1.8 s), and it would refine little."""
PLANNED_SHARE = 0.9
"""Share of the time left that a new round (with the rounds in flight) is planned to fill:
the rest absorbs a round costlier than the last ones and the loop's own bookkeeping."""


class Pace:
    """The cost per box of the last rounds and the size of the next one (see module)."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.costs: deque[float] = deque(maxlen=COST_MEMORY)
        self.planned_end: float | None = None
        self.last_collected: float | None = None

    def collected(self, boxes: int, started: float, now: float) -> None:
        """Record a collected round of ``boxes`` chosen boxes started at ``started``."""
        begin = started if self.last_collected is None else max(started, self.last_collected)
        self.last_collected = now
        if boxes > 0:
            self.costs.append(max(now - begin, 0.0) / boxes)

    def cost_per_box(self) -> float | None:
        """Seconds per chosen box planned on: the largest recent cost (None before any)."""
        return max(self.costs) if self.costs else None

    def size(self, wanted: int, now: float, in_flight: bool) -> int:
        """How many of ``wanted`` boxes the next round may refine so that it, after the
        rounds in flight (``in_flight``), is expected to end by the deadline; 0 if not one
        box fits or fewer than :data:`MIN_ROUND_SHARE` of ``wanted``. All of them without a
        deadline or before a cost is known."""
        cost = self.cost_per_box()
        if self.deadline is None or cost is None:
            return wanted
        begin = now
        if in_flight and self.planned_end is not None:
            begin = max(now, self.planned_end)
        available = PLANNED_SHARE * (self.deadline - now) - (begin - now)
        if cost <= 0.0:
            return wanted if available > 0.0 else 0
        count = min(wanted, int(max(available, 0.0) / cost))
        return count if count >= max(1.0, MIN_ROUND_SHARE * wanted) else 0

    def started(self, boxes: int, now: float, in_flight: bool) -> None:
        """Record a round of ``boxes`` started at ``now`` after the rounds in flight
        (``in_flight``): its expected end, where a later round's work would begin."""
        cost = self.cost_per_box() or 0.0
        begin = now
        if in_flight and self.planned_end is not None:
            begin = max(now, self.planned_end)
        self.planned_end = begin + boxes * cost


CREDIT_COST_SHARE = 0.75
"""The default largest share of the evaluation CPU that linear credit may take (see
:class:`CostPace`). Chosen on measured rows (docs/decisions.md, 2026-11-28, issue 37): at
0.75 Adult-13 1×16 (credit 70 % of the CPU) and Adult-8 2×32 run as with credit on every
box; 0.5 left Adult-13 1×16's deciding end at 0.949 instead of 0.80 at 30 CPU s."""
CROWN_COST_SHARE = 0.5
"""The default largest share of the evaluation CPU that CROWN's tightening of hidden layers
may take (see :class:`CostPace` and :meth:`verifier.pv.atoms.AtomBounds.bounds_and_drive`);
the other boxes are bounded by CROWN over IBP's bounds of the last hidden layer. It applies
only to a last hidden layer fed by a far wider one
(:func:`verifier.pv.atoms.wide_fed_last_layer`: the 103-787-69-2 Adult network, where that
tightening is 94 % of the CPU) and binds only where the tightening costs more than the rest
of a box's evaluation; every other measured network runs as before (docs/decisions.md,
2026-11-28, issue 37)."""
COST_DECAY = 0.5
"""Weight the earlier measurements keep at each new one: a step's cost per box falls as
boxes shrink (fewer cells of the population to eliminate, more stable neurons), so recent
rounds count most."""


class CostPace:
    """How many of a round's boxes get an optional costly step of their evaluation — linear
    credit (:mod:`verifier.pv.credit`), CROWN's tightening of hidden layers.

    Linear credit's population bound costs far more per box on some populations than bounding
    the box does (a learned 13-node Bayesian network: its eliminations took 87 % of PV's CPU,
    and a 103-10-2 network's ratio interval at 30 CPU s was [0.012, 1.002] with credit on
    every box, [0.040, 0.793] with none); CROWN's tightening of a 69-wide layer through a
    787-wide one costs ~10 times the rest of a box's evaluation. From the CPU seconds each
    evaluation reports (the step's and the rest's,
    :class:`verifier.pv.evaluation.BoxEvaluation`), the step is given to as many boxes of a
    round as keep its expected cost within ``share`` of the round's; where it is cheaper (or
    ``share`` is 1), every box gets it. Only which boxes get the step changes, never a bound:
    an uncredited box counts as open, a box not tightened keeps CROWN's sound bounds over
    IBP's bounds of the last hidden layer."""

    def __init__(self, share: float) -> None:
        self.share = share
        self.step_s = 0.0
        self.stepped = 0.0
        self.other_s = 0.0
        self.boxes = 0.0

    def observe(self, step_s: float, stepped: float, other_s: float, boxes: int) -> None:
        """Record an evaluation of ``boxes`` boxes, ``stepped`` of them given the step."""
        self.step_s = COST_DECAY * self.step_s + step_s
        self.stepped = COST_DECAY * self.stepped + stepped
        self.other_s = COST_DECAY * self.other_s + other_s
        self.boxes = COST_DECAY * self.boxes + boxes

    def allowed_count(self, boxes: int) -> int:
        """How many of ``boxes`` boxes the next round gives the step (all before a
        measurement)."""
        if (self.share >= 1.0 or self.stepped <= 0.0 or self.boxes <= 0.0
                or self.step_s <= 0.0):
            return boxes
        per_step = self.step_s / self.stepped
        per_box = self.other_s / self.boxes
        share = self.share / (1.0 - self.share) * per_box / per_step
        return min(boxes, max(1, int(share * boxes)))
