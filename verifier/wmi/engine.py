"""WMI of a violation condition: top-level regions, enumeration, integration, early stop,
envelope refinement and the time budget.

``P(violation | pre) = Σ_cells ∫ w / Σ_roots ∫ w`` where the roots (products of density pieces,
each a box, intersected with the precondition) partition the precondition up to measure zero,
and the cells (model regions intersected with the violation condition) partition the
violating set. One query per prior term; its masses are scaled by the term's probability
enclosure. Polynomial weights integrate exactly; a query with envelope coordinates queues its
cells for :mod:`verifier.wmi.envelope`, which refines certified bounds after the enumeration.
With ``stop_at = k`` the enumeration stops as soon as the violating mass is known to reach
``k`` times the total (the early stop of the paper's Algorithm 1; ``stopped_early``), and an
envelope refinement also stops once the violation is known to lie below ``k``. A deadline
(``timeout_s``) leaves every root not yet enumerated with violation in ``[0, its mass]`` and
returns the interval reached; the roots never reached are bounded together, by the query's
bound on all its roots' mass less what the reached roots are proven to hold
(:attr:`Query.mass_bound`, :func:`verifier.wmi.roots.roots_mass_bound`), so the work after
the deadline does not grow with their number.
Roots are processed in parallel through an executor when one is given and every weight is
polynomial (no early stop and no deadline then). A query with nothing to integrate (a term
fixing every coordinate, :func:`point_query`) adds its coefficient to the total and, where
its violation holds at its points (decided exactly, :mod:`verifier.wmi.points`), to the
violating mass.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verifier.errors import ExecutorLostError
from verifier.numerics import (
    add_down,
    add_up,
    mul_down,
    mul_up,
    probability_ratio,
    sum_upper,
)
from verifier.stop_request import stoppable
from verifier.wmi.encode import Placement, Root, WMIInputError
from verifier.wmi.envelope import Envelope, Refiner, box_summary, refine_until
from verifier.wmi.integrate import integrate_simplices
from verifier.wmi.marginals import Density1D
from verifier.wmi.points import PointOutputs
from verifier.wmi.polynomial import box_bound, compiled
from verifier.wmi.polytope import (
    TriangulationError,
    Undecided,
    box_constraints,
    enclosing_box,
    make_polytope,
    triangulate,
)
from verifier.wmi.regions import Counters, NetworkModel, Outputs, Region
from verifier.wmi.roots import DeadlineReached
from verifier.wmi.terms import ONE, Coefficient

ViolationCondition = Any  # callable: list[Outputs] -> list[(A, b)]
Mass = tuple[float, float]  # an enclosure (low, high) of a mass
Clock = Callable[[], float]  # seconds; time.perf_counter unless a test injects its own
DEFAULT_TOLERANCE = 1e-4
MAX_REFINEMENTS = 100_000


@dataclass(frozen=True)
class Query:
    """Integration space of dimension ``dimension``, roots, placed models, violation.

    ``coefficient`` scales every mass of the query (a prior term's probability, as an
    enclosure ``(lower, value, upper)``); ``envelopes`` lists the coordinates whose weight is
    a non-polynomial 1-D density (their root weight is 1 on a finite core interval, see
    :mod:`verifier.wmi.envelope`); ``lost`` bounds the prior mass the query leaves out (tails
    beyond the cores, already scaled); ``mass_bound`` is an upper bound of the sum of the
    roots' masses before scaling (the second value :func:`~verifier.wmi.roots.build_roots`
    returns). A query of ``dimension`` 0 has no roots: its placements read fixed points
    (:func:`point_query`)."""

    dimension: int
    roots: list[Root]
    placements: list[Placement]
    violation: ViolationCondition
    coefficient: Coefficient = ONE
    envelopes: tuple[tuple[int, Density1D], ...] = ()
    lost: float = 0.0
    mass_bound: float = field(kw_only=True)


@dataclass
class WMIResult:
    """Probabilities with work counters.

    ``exact``: every weight was polynomial and the enumeration completed, so ``probability``
    is exact in real arithmetic but computed in float64, and ``probability_lower ==
    probability_upper`` unless ``proven``. Otherwise ``[probability_lower,
    probability_upper]`` is an interval (envelopes of non-polynomial densities, a time-out, an
    early stop) and ``probability`` is its lower end (its upper end after an early stop, where
    only the violation's lower bound is known); ``violation_probability`` is then
    ``1 − probability``.

    ``proven``: ``[probability_lower, probability_upper]`` holds the probability in real
    arithmetic, float rounding included. Only results that integrated no cell are: box
    branching (PV's certified ends), a finite sum over the prior's points (outward-rounded
    sums of points decided exactly) and a time-out before any cell. A cell's integral is a
    float64 quadrature over Qhull's float vertices with no error bound (a vertex is off by
    about an ulp of its coordinates, which a cell holding much mass within few ulps turns into
    an error of any size), so a result that integrated a cell is not proven, whatever its
    width.

    ``proof``: for a result that is not ``proven``, box branching's proven result for the same
    probability when a time budget was left to run it (:func:`verifier.wmi.properties.run.
    decide` with ``prove``); its interval is the one a certificate may read, this result's
    float value is only reported beside it.
    """

    probability: float
    violation_probability: float
    total_mass: float
    violation_mass: float
    regions: int
    integrals: int
    lps: int
    elapsed_s: float
    stopped_early: bool = False
    verdict: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    probability_lower: float = 0.0
    probability_upper: float = 1.0
    exact: bool = True
    timed_out: bool = False
    refinements: int = 0
    proven: bool = False
    proof: WMIResult | None = None

    def as_json(self) -> dict[str, Any]:
        """The CLI's JSON document."""
        document: dict[str, Any] = {
            "probability": self.probability, "violation_probability": self.violation_probability,
            "probability_lower": self.probability_lower,
            "probability_upper": self.probability_upper, "exact": self.exact,
            "proven": self.proven,
            "timed_out": self.timed_out, "regions": self.regions,
            "integrals": self.integrals, "lps": self.lps, "refinements": self.refinements,
            "elapsed_s": self.elapsed_s, "stopped_early": self.stopped_early,
        }
        if self.verdict is not None:
            document["verdict"] = self.verdict
        document.update(self.extra)
        if self.proof is not None:
            document["proof"] = self.proof.as_json()
        return document


def point_query(placements: list[Placement], violation: ViolationCondition,
                coefficient: Coefficient, lost: float = 0.0) -> Query:
    """A query with nothing to integrate: every placement reads a fixed point
    (:func:`verifier.wmi.points.point_placement`). Its mass is ``coefficient`` and its
    violating mass all or nothing of it, decided exactly (:mod:`verifier.wmi.points`)."""
    return Query(0, [], placements, violation, coefficient, (), lost, mass_bound=1.0)


def _add_points(sums: _Sums, points: list[Query]) -> None:
    """Add the point queries' masses (each decided exactly) to ``sums``."""
    read = PointOutputs()
    for query in points:
        sums.add_exact(query.coefficient, (1.0, 1.0),
                       read.violating(query.placements, query.violation))


def _integrate(region: Region, weight: tuple[np.ndarray, np.ndarray]) -> Mass:
    """Enclosure ``(low, high)`` of ``∫_region weight``: one value when the region is proven
    to have an interior and triangulates (exact up to float64 rounding), else ``[0, ∫ |p|]``
    bounded over a box proven to hold it and a bound on its volume (its interior undecided,
    :class:`~verifier.wmi.polytope.Undecided`, or Qhull failing on it), counted in the
    region's ``counters.bounded``."""
    polytope = region.polytope()
    if polytope is None:
        return 0.0, 0.0
    if isinstance(polytope, Undecided):
        region.counters.bounded += 1
        return 0.0, box_bound(*weight, polytope.lower, polytope.upper, polytope.volume)
    try:
        value = integrate_simplices(triangulate(polytope), *weight)
    except TriangulationError:
        box = enclosing_box(polytope.A, polytope.b)
        if box is None:
            return 0.0, 0.0
        region.counters.bounded += 1
        return 0.0, box_bound(*weight, *box)
    return value, value


def _root_region(root: Root, counters: Counters) -> Region | None:
    A, b = box_constraints(root.lower, root.upper)
    A, b = np.vstack([A, root.A]), np.concatenate([b, root.b])
    counters.lps += 1
    poly = make_polytope(A, b)
    if poly is None:
        return None
    if isinstance(poly, Undecided):
        return Region(A, b, None, counters)
    return Region(poly.A, poly.b, poly.point, counters)


def _combined(query: Query, region: Region, root: Root, index: int,
              outputs: list[Outputs], deadline: float = np.inf,
              clock: Clock = time.perf_counter) -> Iterator[tuple[Region, list[Outputs]]]:
    """Regions where every placement from ``index`` on is affine, with all outputs; the
    violation's ``prefix_cell`` (if any) prunes regions after the first placement. The clock
    is read before each region of every placement, so a root whose regions the prefix
    prunes (no region reaches the caller) still stops: :class:`DeadlineReached` once
    ``deadline`` has passed."""
    if index == len(query.placements):
        yield region, outputs
        return
    prefix = getattr(query.violation, "prefix_cell", None)
    if index == 1 and prefix is not None:
        cell = prefix(outputs)
        narrowed = None if cell is None else region.restrict(*cell)
        if narrowed is None:
            return
        region = narrowed
    placement = query.placements[index]
    z_lo, z_hi = root.lower, root.upper
    if index > 0 and isinstance(placement.model, NetworkModel):
        # later copies are bounded over the current region, not the whole root
        region_lo, region_hi = region.bounding_box()
        z_lo, z_hi = np.maximum(z_lo, region_lo), np.minimum(z_hi, region_hi)
    for piece, out in placement.model.pieces(region, placement.matrix, placement.offset,
                                             z_lo, z_hi):
        if clock() >= deadline:
            raise DeadlineReached
        yield from _combined(query, piece, root, index + 1, [*outputs, out], deadline, clock)


def root_masses(query: Query, index: int, stop_mass: float = np.inf,
                deadline: float = np.inf, clock: Clock = time.perf_counter
                ) -> tuple[Mass, Mass, Counters, bool, bool]:
    """``(total mass, violating mass, counters, stopped, complete)`` of root ``index`` (a
    polynomial weight; masses as enclosures ``(low, high)``, see :func:`_integrate`);
    enumeration stops once the violating mass's lower end reaches ``stop_mass`` or at
    ``deadline`` (on ``clock``), leaving ``complete`` False."""
    counters = Counters()
    root = query.roots[index]
    region = _root_region(root, counters)
    if region is None:
        return (0.0, 0.0), (0.0, 0.0), counters, False, True
    weight = compiled(root.weight, query.dimension)
    total = _integrate(region, weight)
    counters.integrals += 1
    low = high = 0.0
    try:
        for leaf, outputs in _combined(query, region, root, 0, [], deadline, clock):
            counters.regions += 1
            for A, b in query.violation(outputs):
                cell = leaf.restrict(A, b)
                if cell is None:
                    continue
                mass = _integrate(cell, weight)
                low, high = low + mass[0], high + mass[1]
                counters.integrals += 1
                if low >= stop_mass:
                    return total, (low, high), counters, True, False
    except DeadlineReached:
        return total, (low, high), counters, False, False
    return total, (low, high), counters, False, True


def solve(queries: Query | list[Query], stop_at: float | None = None,
          executor: Executor | None = None, *, timeout_s: float | None = None,
          tolerance: float = DEFAULT_TOLERANCE, max_refinements: int = MAX_REFINEMENTS,
          clock: Clock = time.perf_counter) -> WMIResult:
    """``P(no violation | pre)`` and ``P(violation | pre)`` over the union of the queries'
    roots (one query per prior term; see the module docstring): exact when every weight is
    polynomial, else a certified interval refined until it is ``tolerance`` wide (or decided
    against ``stop_at``), ``max_refinements`` bisections or ``timeout_s`` seconds (read on
    ``clock``; every deadline check of the solver reads it, and also fires once a stop is
    requested: :func:`verifier.stop_request.stoppable`). Without a deadline or ``stop_at``,
    on an executor, the roots run in parallel to their end."""
    batch = [queries] if isinstance(queries, Query) else list(queries)
    if (executor is not None and stop_at is None and timeout_s is None
            and not any(query.envelopes for query in batch)):
        return _solve_parallel(batch, executor)
    return Solver(batch, stop_at, timeout_s, tolerance, max_refinements, clock).run()


def _solve_parallel(queries: list[Query], executor: Executor) -> WMIResult:
    started = time.perf_counter()
    batch = [query for query in queries if query.dimension > 0]
    jobs = [(query, index) for query in batch for index in range(len(query.roots))]
    futures = [executor.submit(root_masses, query, index) for query, index in jobs]
    sums = _Sums()
    _add_points(sums, [query for query in queries if query.dimension == 0])
    counters = Counters()
    for (query, _), future in zip(jobs, futures, strict=True):
        try:
            total, violating, work, _, _ = future.result()
        except CancelledError as error:
            raise ExecutorLostError(
                "the executor was lost (its Dask scheduler went away?) before every root's "
                "mass was integrated, and an exact probability needs them all; run again, or "
                "give a timeout: a run with one works in this process and reports the "
                "certified interval it reached") from error
        sums.add_exact(query.coefficient, total, violating)
        counters.add(work)
    sums.lost = sum(query.lost for query in queries)
    return sums.result(counters, started, stopped=False, timed_out=False, refinements=0,
                       exact=sums.lost == 0)


@dataclass
class _Sums:
    """Running enclosures of the total and violating masses, and their float values."""

    uncertain: bool = False
    total_lo: float = 0.0
    total_hi: float = 0.0
    total: float = 0.0
    violation_lo: float = 0.0
    violation_hi: float = 0.0
    violation: float = 0.0
    lost: float = 0.0

    def add_exact(self, coefficient: Coefficient, total: Mass, violating: Mass,
                  complete: bool = True) -> None:
        """Add a polynomial root's total and violating mass enclosures (``violating``'s
        upper end replaced by the total's when not ``complete``)."""
        self.add_total(coefficient, total)
        self.add_violation(coefficient, total[1], violating, complete)

    def add_total(self, coefficient: Coefficient, total: Mass) -> None:
        low, value, high = coefficient
        self.total_lo = float(add_down(self.total_lo, mul_down(low, total[0])))
        self.total_hi = float(add_up(self.total_hi, mul_up(high, total[1])))
        self.total += value * total[0]
        self.uncertain |= total[0] != total[1]

    def add_violation(self, coefficient: Coefficient, total: float, violating: Mass,
                      complete: bool = True) -> None:
        """Add a violating mass enclosure; ``total`` (an upper bound of the root's mass)
        replaces its upper end when not ``complete``."""
        low, value, high = coefficient
        self.violation_lo = float(add_down(self.violation_lo, mul_down(low, violating[0])))
        self.violation_hi = float(add_up(self.violation_hi,
                                         mul_up(high, violating[1] if complete else total)))
        self.violation += value * violating[0]
        self.uncertain |= violating[0] != violating[1]

    def share(self, extra: tuple[float, float, float, float] = (0, 0, 0, 0)
              ) -> tuple[float, float]:
        """Enclosure of the violation probability (``extra`` adds to the four sums; every
        sum and the quotient rounded outward by :mod:`verifier.numerics`)."""
        v_lo, v_hi = add_down(self.violation_lo, extra[0]), add_up(self.violation_hi, extra[1])
        t_lo, t_hi = add_down(self.total_lo, extra[2]), add_up(self.total_hi, extra[3])
        top = add_up(t_hi, self.lost)
        bottom = add_down(np.maximum(t_lo, v_hi), self.lost)
        low, high = probability_ratio(v_lo, add_up(v_hi, self.lost), bottom, top)
        return float(low), max(float(high), float(low))

    def result(self, counters: Counters, started: float, *, stopped: bool, timed_out: bool,
               refinements: int, exact: bool,
               extra: tuple[float, float, float, float] = (0, 0, 0, 0),
               clock: Clock = time.perf_counter) -> WMIResult:
        if self.total_hi + extra[3] + self.lost <= 0:
            raise WMIInputError("the precondition has probability zero under the prior")
        share_lo, share_hi = self.share(extra)
        exact = exact and not self.uncertain
        proven = counters.integrals == 0 and refinements == 0
        if exact:
            share = min(1.0, max(0.0, self.violation / self.total)) if self.total > 0 else 0.0
        else:
            share = share_lo if stopped else share_hi
        low, high = ((1.0 - share, 1.0 - share) if exact and not proven
                     else (1.0 - share_hi, 1.0 - share_lo))
        return WMIResult(
            probability=float(1.0 - share), violation_probability=float(share),
            total_mass=float(self.total), violation_mass=float(self.violation),
            regions=counters.regions,
            integrals=counters.integrals, lps=counters.lps,
            elapsed_s=clock() - started, stopped_early=stopped,
            probability_lower=float(low), probability_upper=float(high), exact=exact,
            timed_out=timed_out,
            refinements=refinements, proven=proven,
            extra={"cells_bounded": counters.bounded} if counters.bounded else {},
        )


class Solver:
    """The sequential solver: totals first, then each root's violating cells (exact
    integrals, or cells queued for envelope refinement), then refinement."""

    def __init__(self, batch: list[Query], stop_at: float | None, timeout_s: float | None,
                 tolerance: float, max_refinements: int,
                 clock: Clock = time.perf_counter) -> None:
        self.batch = [query for query in batch if query.dimension > 0]
        self.stop_at = stop_at
        self.wall_clock = clock
        self.clock = stoppable(clock)  # every deadline check also fires on a stop request
        self.started = clock()
        self.deadline = np.inf if timeout_s is None else self.started + float(timeout_s)
        self.tolerance = tolerance
        self.max_refinements = max_refinements
        self.sums = _Sums(lost=sum(query.lost for query in batch))
        _add_points(self.sums, [query for query in batch if query.dimension == 0])
        self.refiner = Refiner()
        self.counters = Counters()
        self.pending: dict[object, float] = {}  # envelope roots not enumerated: total upper
        self.late = False  # some root was never prepared (the deadline came first)

    def _extra(self) -> tuple[float, float, float, float]:
        r = self.refiner
        return (r.kind_low.get("v", 0.0), r.kind_high.get("v", 0.0) + sum(self.pending.values()),
                r.kind_low.get("t", 0.0), r.kind_high.get("t", 0.0))

    def _reached(self) -> bool:
        return self.stop_at is not None and self.sums.share(self._extra())[0] >= self.stop_at

    def _envelope(self, query: Query, root: Root) -> Envelope:
        weight = compiled(root.weight, query.dimension)
        return Envelope([j for j, _ in query.envelopes], [d for _, d in query.envelopes],
                        root.weight, lambda region: _integrate(region, weight))

    def _unprepared(self, query: Query, reached: float) -> None:
        """The query's roots the deadline left without their region (no LP ran), bounded
        together: scaled by the query's coefficient, their mass lies in
        ``[0, coefficient_hi · mass_bound − reached]`` (``reached`` a lower bound of the
        scaled mass of the query's roots prepared before, as the sums and the refiner count
        it), and so does their violation. One step per query, however many roots are left."""
        whole = mul_up(query.coefficient[2], query.mass_bound)
        rest = max(0.0, float(add_up(whole, -reached)))
        self.sums.total_hi = float(add_up(self.sums.total_hi, rest))
        self.sums.uncertain = True
        if query.envelopes:
            self.pending[(id(query), "unprepared")] = rest
        else:
            self.sums.violation_hi = float(add_up(self.sums.violation_hi, rest))

    def _totals(self) -> list[tuple[Query, int, Region | None, float]]:
        """Root regions and exact totals; envelope roots' totals go to the sums/refiner.
        A query's roots reached after the deadline are bounded together without an LP
        (:meth:`_unprepared`) and left out of the list (``self.late``)."""
        prepared = []
        for q, query in enumerate(self.batch):
            scale = (query.coefficient[0], query.coefficient[2])
            reached = 0.0  # lower bound of the scaled mass of this query's prepared roots
            for index, root in enumerate(query.roots):
                if self.clock() >= self.deadline:
                    self.late = True
                    self._unprepared(query, reached)
                    break
                region = _root_region(root, self.counters)
                total = 0.0
                if region is not None and not query.envelopes:
                    mass = _integrate(region, compiled(root.weight, query.dimension))
                    self.sums.add_total(query.coefficient, mass)
                    total = mass[1]
                    reached = float(add_down(reached, mul_down(scale[0], mass[0])))
                elif region is not None:
                    envelope = self._envelope(query, root)
                    if root.A.shape[0] == 0:
                        summary = box_summary(envelope, root.lower, root.upper)
                        self.sums.total_lo += scale[0] * summary.mass_lo
                        self.sums.total_hi += scale[1] * summary.mass_hi
                        self.sums.total += query.coefficient[1] * 0.5 * (summary.mass_lo
                                                                         + summary.mass_hi)
                        total = scale[1] * summary.mass_hi
                        reached = float(add_down(reached, mul_down(scale[0],
                                                                   summary.mass_lo)))
                    else:
                        tag = ("t", (q, index))
                        self.refiner.add(envelope, region, root.lower, root.upper, scale, tag)
                        total = self.refiner.high[tag]
                        reached = float(add_down(reached, self.refiner.low[tag]))
                prepared.append((query, index, region, total))
        return prepared

    def run(self) -> WMIResult:
        prepared = self._totals()
        for query, index, region, total in prepared:
            if region is not None and query.envelopes:
                self.pending[(id(query), index)] = total
        stopped, timed_out = False, self.late
        for q_index, (query, index, region, total) in enumerate(prepared):
            if region is None:
                continue
            if self.clock() >= self.deadline:
                timed_out = True
                self._give_up(prepared[q_index:])
                break
            if query.envelopes:
                complete = self._envelope_root(query, index, region)
                if complete:
                    self.pending.pop((id(query), index))
            else:
                complete, stopped = self._exact_root(query, index, total)
            if not complete:
                timed_out = True
                self._give_up(prepared[q_index + 1:])
                break
            if stopped or self._reached():
                stopped = True
                self._give_up(prepared[q_index + 1:])
                break
        exact = not timed_out and not stopped and self.sums.lost == 0 and not any(
            query.envelopes for query in self.batch)
        if not (timed_out or stopped or exact):
            decided = refine_until(self.refiner, self._refined, self.deadline,
                                   self.max_refinements, self.clock)
            stopped = self._reached()
            timed_out = not decided and self.clock() >= self.deadline
        return self.sums.result(self.counters, self.started, stopped=stopped,
                                timed_out=timed_out, refinements=self.refiner.steps,
                                exact=exact, extra=self._extra(), clock=self.wall_clock)

    def _refined(self) -> bool:
        low, high = self.sums.share(self._extra())
        if self.stop_at is not None and (low >= self.stop_at or high < self.stop_at):
            return True
        return high - low <= self.tolerance

    def _give_up(self, rest: list[tuple[Query, int, Region | None, float]]) -> None:
        """Roots never enumerated: violation anywhere in ``[0, total]``; their upper ends
        are added in one vectorised step (products rounded up, the sum by
        :func:`~verifier.numerics.sum_upper`)."""
        totals = [(query.coefficient[2], total) for query, _, region, total in rest
                  if region is not None and not query.envelopes]
        if not totals:
            return
        scales, masses = np.array(totals).T
        products = mul_up(scales, masses)
        bound = float(sum_upper(float(np.sum(products)), len(totals) - 1))
        self.sums.violation_hi = float(add_up(self.sums.violation_hi, bound))
        self.sums.uncertain = True

    def _exact_root(self, query: Query, index: int, total: float) -> tuple[bool, bool]:
        """Enumerate a polynomial root: ``(complete or stopped, stopped)``."""
        remaining = np.inf
        if self.stop_at is not None:
            low = query.coefficient[0]
            needed = self.stop_at * (self.sums.total_hi + self._extra()[3] + self.sums.lost)
            remaining = max(0.0, needed - self.sums.violation_lo - self._extra()[0]) / low \
                if low > 0 else np.inf
        _, violating, work, stopped, complete = root_masses(query, index, remaining,
                                                            self.deadline, self.clock)
        self.counters.add(work)
        self.sums.add_violation(query.coefficient, total, violating, complete or stopped)
        if stopped:
            self.sums.violation_hi += query.coefficient[2] * max(0.0, total - violating[1])
        return complete or stopped, stopped

    def _envelope_root(self, query: Query, index: int, region: Region) -> bool:
        root = query.roots[index]
        envelope = self._envelope(query, root)
        scale = (query.coefficient[0], query.coefficient[2])
        tag = ("v", (id(query), index))
        try:
            for leaf, outputs in _combined(query, region, root, 0, [], self.deadline,
                                           self.clock):
                self.counters.regions += 1
                for A, b in query.violation(outputs):
                    cell = leaf.restrict(A, b)
                    if cell is None:
                        continue
                    self.counters.integrals += 1
                    self.refiner.add(envelope, cell, root.lower, root.upper, scale, tag)
        except DeadlineReached:
            self.refiner.drop(tag)
            return False
        return True
