"""The PV loop: select the heaviest open boxes, refine them, bound the new ones, and credit
the mass of every box on which an event is decided (see :mod:`verifier.pv`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from verifier.errors import CertgateInputError
from verifier.executor import abandon, default_workers, make_executor, running
from verifier.network import Network
from verifier.numerics import add_down, add_up, sum_lower, sum_upper
from verifier.pv.atoms import AtomBounds, Known
from verifier.pv.boxpool import Boxes, BoxPool, directed_count
from verifier.pv.credit import ExcessFunction, WantedSides
from verifier.pv.direction import verdict_weights
from verifier.pv.domain import InputDomain, MassFunction
from verifier.pv.evaluation import BoxEvaluation, DistributedEvaluation
from verifier.pv.events import TrackedEvents
from verifier.pv.inflight import Round, RoundsInFlight
from verifier.pv.pace import CostPace, Pace
from verifier.pv.result import PVProgress, PVResult
from verifier.pv.settings import PVSettings
from verifier.pv.splitting import Splitter
from verifier.spec import Interval, Specification, interval_eval
from verifier.stop_request import stop_requested

Refuter = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``(lo, hi) -> [n_boxes] bool``: ``True`` only where the event is false at every point of
the box (a proof the caller owns, e.g. :mod:`verifier.wmi.monotone_slopes`); such a box's
mass is credited to the event's complement."""


class ProbabilityBranchAndBound:
    """Shared-tree branch and bound for all events of one specification."""

    def __init__(
        self, network: Network, spec: Specification, masses: MassFunction,
        domain: InputDomain, settings: PVSettings, excess: ExcessFunction | None = None,
        refute: Refuter | None = None, clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if domain.lower.size != network.input_size:
            raise CertgateInputError(
                f"the population has {domain.lower.size} columns, the network "
                f"{network.input_size} inputs"
            )
        self.network = network
        self.spec = spec
        self.masses = masses
        self.domain = domain
        self.settings = settings
        self.clock = clock
        self.tracked = TrackedEvents(spec)
        if refute is not None and len(self.tracked.events) != 1:
            raise CertgateInputError("a refuter decides the one event of a specification of one "
                                     f"probability, not {len(self.tracked.events)} events")
        self.refute = refute
        self.atoms = AtomBounds(network, self.tracked, domain.groups)
        self.splitter = Splitter(network.layers[0].weight, self.atoms, masses, domain, settings)
        self.directed = settings.selection == "directed" and spec.threshold is not None
        self.evaluation = BoxEvaluation(
            masses, self.atoms, excess if settings.linear_credit else None, self.directed)
        self.credit_pace = CostPace(settings.credit_cost_share)
        self.crown_pace = CostPace(settings.crown_cost_share)

    def _refuted(self, lo: np.ndarray, hi: np.ndarray, pending: np.ndarray,
                 truth: np.ndarray) -> np.ndarray:
        """``truth`` with the event false (``-1``) on every open box the refuter proves it
        false on."""
        if self.refute is None:
            return truth
        rows = np.flatnonzero(pending[:, 0] & (truth[:, 0] == 0))
        if rows.size:
            truth = truth.copy()
            truth[rows[self.refute(lo[rows], hi[rows])], 0] = -1
        return truth

    def _evaluate(self, lo: np.ndarray, hi: np.ndarray, pending: np.ndarray,
                  depth: np.ndarray, evaluate: DistributedEvaluation,
                  method: str | None = None, known: Known | None = None,
                  wanted: WantedSides | None = None, deadline: float | None = None,
                  crown_share: float = 1.0,
                  complement: Complement | None = None,
                  ) -> tuple[Callable[[], Boxes], list[Future]]:
        """Start bounding new boxes (with ``method``, default the settings'; ``known``: what
        their parents proved; ``wanted``: the credits to bound, None for all; ``deadline``:
        in-process, no part of the batch starts after it; ``crown_share``: the share of the
        boxes whose last hidden layer CROWN tightens, see
        :meth:`~verifier.pv.atoms.AtomBounds.bounds_and_drive`; ``complement``: the boxes
        whose mass is their parent's less their sibling's, see :class:`Complement`); the
        returned call waits for the bounds and records what PV keeps about each box, the
        futures are the tasks'."""
        given = None if complement is None else complement.stand_in()
        under_way = evaluate.submit(lo, hi, method or self.settings.method, known, wanted,
                                    deadline, crown_share, given)

        def record() -> Boxes:
            (mass_lo, mass_hi, low, high, guide, signs, credit_true,
             credit_false, share, carried, cost) = under_way.result()
            if complement is not None:
                mass_lo, mass_hi = complement.masses(mass_lo, mass_hi)
                loose = complement.loose(mass_lo, mass_hi)
                if loose.any():
                    direct_lo, direct_hi = self.evaluation.masses(lo[loose], hi[loose])
                    mass_lo[loose] = np.maximum(mass_lo[loose], direct_lo)
                    mass_hi[loose] = np.minimum(mass_hi[loose], direct_hi)
            credited = lo.shape[0] if wanted is None else int(
                (wanted.true | wanted.false).any(axis=1).sum())
            credit_s, crown_s, rest_s = (float(part) for part in cost[:, :3].sum(axis=0))
            self.credit_pace.observe(credit_s, credited, crown_s + rest_s, lo.shape[0])
            self.crown_pace.observe(crown_s, float(cost[:, 3].sum()), credit_s + rest_s,
                                    lo.shape[0])
            undecided = self.atoms.undecided(low, high)
            truth = self._refuted(lo, hi, pending, self.atoms.truth(low, high))
            open_events = pending & (truth == 0)
            credit_true = np.where(open_events, credit_true, 0.0)
            credit_false = np.where(open_events, credit_false, 0.0)
            uncredited = np.where(
                open_events, np.maximum(mass_hi[:, None] - credit_true - credit_false, 0.0),
                0.0)
            return Boxes(lo, hi, mass_lo, mass_hi, pending, depth, undecided, guide, truth,
                         signs, low, high, credit_true, credit_false,
                         uncredited.max(axis=1, initial=0.0), share * uncredited,
                         (1.0 - share) * uncredited, carried)

        return record, under_way.futures

    def run(self, progress: Callable[[PVProgress], None] | None = None) -> PVResult:
        """Refine until the verdict is proven, the precision is reached, the time budget or
        the box budget runs out, the open boxes reach :meth:`PVSettings.open_box_limit`
        (their records would outgrow the memory), or no undecided box is left. Anytime:
        ``progress`` gets every new (monotonically tightening) set of intervals. The
        bounding of each batch runs on the settings' executor.

        The time budget is wall time from this call to its return, the executor's start and
        end included (DESIGN D20): each round is sized to the time left
        (:class:`~verifier.pv.pace.Pace`), a round still running at the deadline is abandoned
        (the bounds reported count its parents' credits, as with any stop), and the
        executor is left without waiting for its running tasks
        (:func:`verifier.executor.abandon`). ``elapsed_s`` is that whole time. In-process a
        round runs in chunks sized to the time left and no chunk starts after the deadline
        (:class:`~verifier.pv.evaluation.DistributedEvaluation`). Every time is read from the
        constructor's ``clock`` (:func:`time.perf_counter` by default)."""
        settings = self.settings
        started = self.clock()
        executor = make_executor(settings.executor, settings.workers)
        try:
            evaluate = DistributedEvaluation(
                self.evaluation, executor, settings.workers or default_workers(),
                settings.min_boxes_per_task, self.clock,
            )
            try:
                result = self._run(evaluate, progress, started)
            finally:
                evaluate.close()
        finally:
            abandon(executor)
        result.elapsed_s = self.clock() - started
        return result

    def _run(self, evaluate: DistributedEvaluation,
             progress: Callable[[PVProgress], None] | None, started: float) -> PVResult:
        settings = self.settings
        pace = Pace(None if settings.timeout_s is None else started + settings.timeout_s)
        events = len(self.tracked.events)
        root_lo, root_hi = self.domain.lower[None, :].copy(), self.domain.upper[None, :].copy()
        self.splitter.snap(root_lo, root_hi)
        new = self._evaluate(
            root_lo, root_hi, np.ones((1, events), dtype=bool), np.zeros(1, dtype=np.int64),
            evaluate,
        )[0]()
        pace.last_collected = self.clock()
        if new.mass_hi[0] <= 0.0:
            raise CertgateInputError("the population model gives the input domain probability 0")
        total = float(new.mass_hi[0])
        lower = np.zeros(events)
        violated = np.zeros(events)
        holds_high = np.zeros(events)
        best_proven, best_upper = np.zeros(events), np.ones(events)
        unsettled = np.zeros(events)  # pending points no exact reading decides (_refine)
        pool = BoxPool()
        flight = RoundsInFlight()
        processed = iterations = 0
        open_limit: int | None = None
        history: list[tuple[float, Interval]] = []
        while True:
            sat = new.pending & (new.truth == 1)
            viol = new.pending & (new.truth == -1)
            terms = new.mass_lo.shape[0]
            lower = add_down(lower, sum_lower((sat * new.mass_lo[:, None]).sum(axis=0), terms))
            violated = add_down(violated,
                                sum_lower((viol * new.mass_lo[:, None]).sum(axis=0), terms))
            holds_high = add_up(holds_high,
                                sum_upper((sat * new.mass_hi[:, None]).sum(axis=0), terms))
            new.pending = new.pending & (new.truth == 0)
            pool.add(new.select(new.pending.any(axis=1) & (new.mass_hi > 0.0)))
            if self.evaluation.excess is not None:
                pool_true, pool_false = pool.credits(events)
                held_true, held_false = flight.credits(events)
                credit_true = add_down(pool_true, held_true)
                credit_false = add_down(pool_false, held_false)
            else:
                credit_true, credit_false = np.zeros(events), np.zeros(events)
            # every round's ends are sound for the same probabilities, so the best ends seen
            # are too: credit dropped when a credited box is split (its parts credited less,
            # or not at all, see CostPace) never widens what was reported
            proven = np.maximum(best_proven, add_down(lower, credit_true))
            refuted = add_down(violated, credit_false)
            # two sound upper ends: the whole mass less what is proven false, and what is
            # proven true plus every open box where the event is pending — the second keeps
            # an event of tiny mass (a protected group of 1e-12) off the total's rounding
            possible = add_up(holds_high, add_up(add_up(pool.pending_mass(events),
                                                        flight.pending_mass(events)), unsettled))
            upper = np.maximum(np.minimum(np.minimum(np.minimum(
                add_up(total, -refuted), 1.0), possible), best_upper), proven)
            best_proven, best_upper = proven, upper
            probabilities = self.tracked.probabilities(proven, upper)
            value = interval_eval(self.spec.expression, probabilities)
            verdict = self.spec.decide(value)
            elapsed = self.clock() - started
            history.append((elapsed, value))
            open_boxes = pool.size + flight.boxes
            if progress is not None:
                progress(PVProgress(probabilities, value, verdict, processed, open_boxes, elapsed))
            iterations += 1
            if open_limit is None and pool.record_bytes:
                open_limit = settings.open_box_limit(pool.record_bytes)
            stopped_by = self._stop_reason(verdict, open_boxes, probabilities, elapsed, processed,
                                           open_limit)
            if stopped_by is not None:
                break
            while len(flight) < settings.rounds_ahead(pool.size) and pool.size > 0:
                now = self.clock()
                count = pace.size(min(settings.round_size(pool.size), pool.size), now,
                                   len(flight) > 0)
                if count == 0:
                    break
                weights = None
                if self.directed:
                    weights = verdict_weights(
                        self.spec, self.tracked, proven, upper,
                        pool.open_estimate(events) + flight.open_estimate(events), total)
                directed = 0 if weights is None else directed_count(count, pool.size)
                chosen = pool.pop_heaviest(count, weights)
                wanted = self._credit_capped(
                    chosen, _wanted_credits(weights, directed, chosen.lo.shape[0]))
                pace.started(count, now, len(flight) > 0)
                parts, futures, stuck = self._refine(chosen, evaluate, wanted, pace.deadline)
                unsettled = add_up(unsettled, stuck)
                flight.start(Round(chosen, parts, futures, now))
            if len(flight) == 0:
                stopped_by = "timeout"
                break
            if not flight.oldest.wait(None if pace.deadline is None
                                      else pace.deadline - self.clock(), evaluate.executor):
                stopped_by = ("interrupted" if stop_requested() else
                              "timeout" if running(evaluate.executor) else "executor_lost")
                break
            oldest = flight.oldest
            new = flight.collect_oldest()
            pace.collected(oldest.parents.lo.shape[0], oldest.started, self.clock())
            processed += new.lo.shape[0]
        return PVResult(
            verdict=verdict,
            value=value,
            probabilities=probabilities,
            boxes=processed,
            iterations=iterations,
            elapsed_s=self.clock() - started,
            stopped_by=stopped_by,
            specification=self.spec,
            history=history,
            settings=settings,
        )

    def _refine(self, chosen: Boxes, evaluate: DistributedEvaluation,
                wanted: WantedSides | None = None, deadline: float | None = None,
                ) -> tuple[list[Callable[[], Boxes]], list[Future], np.ndarray]:
        """Start the next boxes from the chosen ones (the calls that wait for them, the
        futures of the tasks bounding them, and an upper bound per event of the mass of the
        points left unsettled): single points are decided exactly, boxes with few discrete
        points are replaced by all their points (bounded by IBP, exact at a point up to the
        rounding margin), the others are split. ``wanted``: per chosen box, the credits its
        successors bound (None: all); ``deadline``: see :meth:`_evaluate`. A point no exact
        reading decides is never refined again: its mass leaves the open boxes, so the caller
        keeps it in the event's upper end through the returned bound."""
        splitter = self.splitter
        masks = splitter.group_masks(chosen.lo, chosen.hi)
        candidates = splitter.candidates(chosen.lo, chosen.hi, masks)
        points = ~candidates.any(axis=1)
        counts = splitter.point_counts(chosen.lo, chosen.hi, masks)
        small = ~points & (counts <= self.settings.enumerate_points)
        small &= np.cumsum(np.where(small, counts, 0.0)) <= self.settings.max_points_per_batch
        parts: list[Callable[[], Boxes]] = []
        unsettled = np.zeros(len(self.tracked.events))
        futures: list[Future] = []
        if points.any():
            decided = chosen.select(points)
            decided.truth = self.atoms.decide_points(decided.lo, decided.hi, decided.low,
                                                     decided.high)
            # a point no exact reading decides (a tie within a folded network's rounding)
            # cannot be refined: its mass stays uncredited, and pending for the upper ends
            stuck = decided.pending & (decided.truth == 0)
            unsettled = sum_upper(decided.mass_hi @ stuck, decided.lo.shape[0])
            decided.pending = decided.pending & (decided.truth != 0)
            parts.append(lambda: decided)
        if small.any():
            boxes = chosen.select(small)
            lo, hi, parent = splitter.enumerate(boxes.lo, boxes.hi)
            record, started = self._evaluate(
                lo, hi, boxes.pending[parent], boxes.depth[parent] + 1, evaluate, "ibp",
                splitter.inherited(boxes, parent, lo, hi),
                None if wanted is None else wanted.select(np.flatnonzero(small)[parent]),
                deadline,
            )
            parts.append(record)
            futures += started
        rest = ~points & ~small
        if rest.any():
            # a round whose chosen boxes are all split (the common case) copies nothing here
            every = bool(rest.all())
            boxes = chosen if every else chosen.select(rest)
            rest_masks = masks if every else [allowed[rest] for allowed in masks]
            lo, hi = splitter.split(boxes, rest_masks, candidates if every else candidates[rest])
            n = boxes.lo.shape[0]
            parent = np.tile(np.arange(n), 2)
            complement = Complement(
                np.concatenate([np.zeros(n, dtype=bool),
                                splitter.partitioned(boxes.lo, boxes.hi, lo, hi,
                                                     rest_masks)]),
                np.concatenate([np.arange(n, 2 * n), np.arange(n)]),
                boxes.mass_lo[parent], boxes.mass_hi[parent])
            record, started = self._evaluate(
                lo, hi, np.concatenate([boxes.pending, boxes.pending]),
                np.concatenate([boxes.depth, boxes.depth]) + 1, evaluate,
                known=splitter.inherited(boxes, parent, lo, hi),
                wanted=None if wanted is None else wanted.select(np.flatnonzero(rest)[parent]),
                deadline=deadline,
                crown_share=self.crown_pace.allowed_count(lo.shape[0]) / max(lo.shape[0], 1),
                complement=complement,
            )
            parts.append(record)
            futures += started
        return parts, futures, unsettled

    def _credit_capped(self, chosen: Boxes, wanted: WantedSides | None
                       ) -> WantedSides | None:
        """``wanted`` with the credit kept only on the heaviest chosen boxes, as many as
        :meth:`~verifier.pv.pace.CostPace.allowed_count` allows (unchanged without
        credit or when it allows all)."""
        count = chosen.lo.shape[0]
        if self.evaluation.excess is None:
            return wanted
        allowed = self.credit_pace.allowed_count(count)
        if allowed >= count:
            return wanted
        keep = np.zeros(count, dtype=bool)
        keep[np.argsort(-chosen.mass_hi, kind="stable")[:allowed]] = True
        if wanted is None:
            events = len(self.tracked.events)
            wanted = WantedSides(np.ones((count, events), dtype=bool),
                                 np.ones((count, events), dtype=bool))
        return WantedSides(wanted.true & keep[:, None], wanted.false & keep[:, None])

    def _stop_reason(self, verdict: str, open_boxes: int, probabilities: dict[str, Interval],
                     elapsed: float, processed: int, open_limit: int | None) -> str | None:
        settings = self.settings
        if verdict != "unknown":
            return "decided"
        if open_boxes == 0:
            return "exhausted"
        if stop_requested():
            return "interrupted"
        if settings.precision is not None and all(
            high - low <= settings.precision for low, high in probabilities.values()
        ):
            return "precision"
        if settings.timeout_s is not None and elapsed >= settings.timeout_s:
            return "timeout"
        if settings.max_boxes is not None and processed >= settings.max_boxes:
            return "max_boxes"
        if open_limit is not None and open_boxes >= open_limit:
            return "max_open_boxes"
        return None


DERIVED_WIDTH = 2.0 ** -10
"""A derived child mass wider than this share of its upper end is evaluated after all
(:meth:`Complement.loose`)."""


@dataclass(frozen=True)
class Complement:
    """Split children whose mass is their parent's less their sibling's: the population's
    mass evaluation, a fifth of PV's CPU on Adult-13 1×16, is spared for them.

    ``derived[i]``: child ``i``'s mass is derived (never its sibling's as well);
    ``sibling[i]``: the index of child ``i``'s sibling in the batch;
    ``parent_lo``/``parent_hi``: the enclosure of child ``i``'s parent's mass. Sound where
    the two children partition their parent's mass exactly
    (:meth:`~verifier.pv.splitting.Splitter.partitioned`): the child's mass is then
    ``P(parent) − P(sibling)`` in real arithmetic, which ``[parent_lo − sibling_hi,
    parent_hi − sibling_lo]``, rounded outward and clipped to ``[0, parent_hi]``, encloses."""

    derived: np.ndarray
    sibling: np.ndarray
    parent_lo: np.ndarray
    parent_hi: np.ndarray

    def stand_in(self) -> np.ndarray:
        """Per child, NaN where the evaluation computes its mass, else its parent's upper
        mass (an upper bound of its own), which stands in for it during the evaluation."""
        return np.where(self.derived, self.parent_hi, np.nan)

    def loose(self, mass_lo: np.ndarray, mass_hi: np.ndarray) -> np.ndarray:
        """Per child, whether its mass is derived and its enclosure (from :meth:`masses`)
        wider than :data:`DERIVED_WIDTH` of its upper end: a child far lighter than its
        parent (a protected group of mass 1e-12 split off a box of mass 1) inherits the
        parent's absolute rounding, [0, 4e-12], which its own evaluation avoids."""
        return self.derived & (mass_hi - mass_lo > DERIVED_WIDTH * mass_hi)

    def masses(self, mass_lo: np.ndarray, mass_hi: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """The batch's mass enclosures with every derived child's replaced by its parent's
        less its sibling's."""
        rows = np.flatnonzero(self.derived)
        if rows.size == 0:
            return mass_lo, mass_hi
        mass_lo, mass_hi = mass_lo.copy(), mass_hi.copy()
        sibling = self.sibling[rows]
        parent_lo, parent_hi = self.parent_lo[rows], self.parent_hi[rows]
        mass_lo[rows] = np.maximum(add_down(parent_lo, -mass_hi[sibling]), 0.0)
        mass_hi[rows] = np.minimum(add_up(parent_hi, -mass_lo[sibling]), parent_hi)
        return mass_lo, mass_hi


def _wanted_credits(
    weights: tuple[np.ndarray, np.ndarray] | None, directed: int, chosen: int,
) -> WantedSides | None:
    """The credits the successors of each chosen box bound: for the first ``directed`` boxes
    (chosen by worth), only those whose weight is positive — a credit the deciding end does
    not read cannot move it; for the others (chosen by uncredited mass, the guard against a
    wrong guess of the verdict), all. None (all) without weights."""
    if weights is None or directed == 0:
        return None
    by_worth = (np.arange(chosen) < directed)[:, None]
    return WantedSides(np.where(by_worth, weights[0][None, :] > 0.0, True),
                       np.where(by_worth, weights[1][None, :] > 0.0, True))


def verify(
    network: Network, spec: Specification, masses: MassFunction, domain: InputDomain,
    settings: PVSettings | None = None, progress: Callable[[PVProgress], None] | None = None,
    excess: ExcessFunction | None = None, refute: Refuter | None = None,
) -> PVResult:
    """Run PV on ``spec``: sound intervals for every probability and the expression, and the
    verdict if (and only if) it is proven. See :class:`ProbabilityBranchAndBound`;
    ``excess``: the population's :meth:`~verifier.population.model.PopulationModel.
    prob_excess_lower`, for linear credit (:mod:`verifier.pv.credit`); ``refute``: for a
    specification of one unconditioned probability, a second reading of its event on boxes
    bound propagation leaves open (``Refuter``)."""
    engine = ProbabilityBranchAndBound(
        network, spec, masses, domain, settings or PVSettings(), excess, refute)
    return engine.run(progress)


