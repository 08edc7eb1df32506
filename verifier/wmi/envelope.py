"""Certified masses of convex cells under a weight with non-polynomial 1-D factors.

The weight of a query is ``p(z) · Π_{j ∈ E} g_j(z_j)``: ``p`` an exact polynomial on the
other coordinates (1 if none) and ``g_j`` the :class:`~verifier.wmi.marginals.Density1D` of an
*envelope coordinate* ``j ∈ E``. For a cell ``P`` (a polytope from the region enumeration) and a
box ``B`` whose envelope sides are a partition cell, with

* ``v = ∫_{P∩B} p`` and ``V = ∫_B p`` (exact polynomial integrals),
* ``L <= Π g_j <= U`` on ``B`` (:meth:`Density1D.bounds`),
* ``M ∈ [M_lo, M_hi]`` the mass ``∫_B p Π g_j`` (``∫ p`` over ``B``'s other sides, times the
  certified interval probabilities of the ``g_j``),

the mass of ``P ∩ B`` lies in ``[max(L v, M_lo − U (V − v)), min(U v, M_hi − L (V − v))]``:
the weight is between ``L`` and ``U`` both on ``P ∩ B`` and on its complement in ``B``. A box
inside ``P`` (interval arithmetic on ``P``'s rows) gets ``[M_lo, M_hi]``, a box outside it 0.
The uncertainty comes only from boxes that ``P``'s boundary cuts, where it is at most
``(U − L) · min(v, V − v)``: second order in the box width. :func:`refine` bisects the box with
the widest interval (along the envelope side whose density varies most) until a width target,
a step limit or a deadline. Each polytope integral is widened by :data:`VOLUME_MARGIN` of the
box's mass bound (the float error of triangulation; no cell is dropped unless proven of
measure zero, see :mod:`verifier.wmi.polytope`).
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from verifier.wmi.marginals import Density1D
from verifier.wmi.polynomial import Polynomial, box_bound, box_integral, compiled
from verifier.wmi.polytope import box_constraints
from verifier.wmi.propagation import tightened
from verifier.wmi.regions import Region

VOLUME_MARGIN = 1e-9
Integrator = Callable[[Region], tuple[float, float]]  # an enclosure of ∫_region p


@dataclass(frozen=True)
class Envelope:
    """The envelope coordinates of a query and the polynomial part of its weight."""

    positions: list[int]
    densities: list[Density1D]
    poly: Polynomial
    integrate: Integrator


@dataclass
class BoxSummary:
    """Polynomial integral ``V``, mass enclosure, density bounds and per-side spreads of a
    box."""

    volume: float
    mass_lo: float
    mass_hi: float
    low: float
    high: float
    spread: np.ndarray


def box_summary(envelope: Envelope, lower: np.ndarray, upper: np.ndarray) -> BoxSummary:
    """The :class:`BoxSummary` of ``[lower, upper]`` (see the module docstring)."""
    q = max(box_integral(envelope.poly, lower, upper, envelope.positions), 0.0)
    widths = np.array([upper[j] - lower[j] for j in envelope.positions])
    mass_lo, mass_hi, low, high = q, q, 1.0, 1.0
    spread = np.empty(len(envelope.positions))
    for k, (j, density) in enumerate(zip(envelope.positions, envelope.densities, strict=True)):
        m_lo, m_hi = density.mass(np.array([lower[j]]), np.array([upper[j]]))
        l_j, u_j = density.bounds(np.array([lower[j]]), np.array([upper[j]]))
        mass_lo *= float(m_lo[0])
        mass_hi *= float(m_hi[0])
        low *= float(l_j[0])
        high *= float(u_j[0])
        spread[k] = (float(u_j[0]) - float(l_j[0])) * widths[k]
    return BoxSummary(q * float(np.prod(widths)), mass_lo, mass_hi, low, high, spread)


def _cutting_rows(region: Region, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Rows of the region that some point of the box violates (the others are implied by
    the box and can be left out of the clipped polytope)."""
    centre, radius = (upper + lower) / 2, (upper - lower) / 2
    reach = region.A @ centre + np.abs(region.A) @ radius
    return reach > region.b


def _position(region: Region, lower: np.ndarray, upper: np.ndarray) -> str:
    """``inside`` / ``outside`` / ``cut``: where the box lies relative to the region."""
    centre, radius = (upper + lower) / 2, (upper - lower) / 2
    middle = region.A @ centre
    reach = np.abs(region.A) @ radius
    slack = 1e-12 * (np.abs(region.b) + np.abs(region.A) @ (np.abs(centre) + radius))
    if np.any(middle - reach > region.b + slack):
        return "outside"
    if np.all(middle + reach <= region.b - slack):
        return "inside"
    return "cut"


def cell_bounds(envelope: Envelope, region: Region, lower: np.ndarray, upper: np.ndarray,
                clip: bool = True) -> tuple[float, float, BoxSummary | None, str]:
    """Enclosure of ``∫_{region ∩ box} p Π g_j`` (module docstring) and where the box lies
    (``outside`` / ``inside`` / ``cut``; ``clipped`` when a cut box's polytope integral was
    taken). Without ``clip`` a cut box gets the cheap ``[0, min(M_hi, U V)]`` (no LP)."""
    where = _position(region, lower, upper)
    if where == "outside":
        return 0.0, 0.0, None, where
    summary = box_summary(envelope, lower, upper)
    margin = VOLUME_MARGIN * summary.high * summary.volume
    if where == "inside":
        return summary.mass_lo, summary.mass_hi, summary, where
    if not clip:
        # a thin cell's volume bound caps it without an LP (box_bound: sup |p| · volume)
        cap = summary.high * box_bound(*compiled(envelope.poly, lower.size), lower, upper,
                                       region.volume)
        high = min(summary.mass_hi, summary.high * summary.volume, cap)
        return 0.0, high + margin, summary, where
    A, b = box_constraints(lower, upper)
    cutting = _cutting_rows(region, lower, upper)
    relaxed = Region(region.A[cutting], region.b[cutting], region.point, region.counters)
    clipped = relaxed.restrict(A, b)
    inner_lo, inner_hi = (0.0, 0.0) if clipped is None else envelope.integrate(clipped)
    inner_lo = min(max(inner_lo, 0.0), summary.volume)
    inner_hi = min(max(inner_hi, inner_lo), summary.volume)
    low = max(summary.low * inner_lo, summary.mass_lo - summary.high * (summary.volume - inner_lo))
    high = min(summary.high * inner_hi, summary.mass_hi - summary.low * (summary.volume - inner_hi))
    return max(0.0, low - margin), max(high, 0.0) + margin, summary, "clipped"


@dataclass(order=True)
class Item:
    """A cell–box pair waiting for refinement, ordered by its weighted width (largest
    first)."""

    priority: float
    serial: int
    envelope: Envelope = field(compare=False)
    region: Region = field(compare=False)
    lower: np.ndarray = field(compare=False)
    upper: np.ndarray = field(compare=False)
    low: float = field(compare=False)
    high: float = field(compare=False)
    summary: BoxSummary | None = field(compare=False)
    scale: tuple[float, float] = field(compare=False)
    tag: tuple = field(compare=False)
    clipped: bool = field(compare=False)


class Refiner:
    """A priority queue of items; ``low``/``high`` are the running sums of the scaled
    bounds per tag ``(kind, key)``, ``kind_low``/``kind_high`` per kind."""

    def __init__(self) -> None:
        self._heap: list[Item] = []
        self._serial = itertools.count()
        self.low: dict[tuple, float] = {}
        self.high: dict[tuple, float] = {}
        self.kind_low: dict[object, float] = {}
        self.kind_high: dict[object, float] = {}
        self.steps = 0

    def _count(self, tag: tuple, low: float, high: float) -> None:
        self.low[tag] = self.low.get(tag, 0.0) + low
        self.high[tag] = self.high.get(tag, 0.0) + high
        self.kind_low[tag[0]] = self.kind_low.get(tag[0], 0.0) + low
        self.kind_high[tag[0]] = self.kind_high.get(tag[0], 0.0) + high

    def add(self, envelope: Envelope, region: Region, lower: np.ndarray, upper: np.ndarray,
            scale: tuple[float, float], tag: tuple, clip: bool = False) -> None:
        """Bound the cell on the box (first shrunk around the cell by constraint
        propagation) and queue it when a cut box's bound is not tight. Boxes inside the cell
        are final (their width is the CDF enclosure's only)."""
        box = tightened(region.A, region.b, lower, upper)
        if box is None:
            self._count(tag, 0.0, 0.0)
            return
        lower, upper = box
        low, high, summary, where = cell_bounds(envelope, region, lower, upper, clip)
        scaled_low, scaled_high = scale[0] * low, scale[1] * high
        self._count(tag, scaled_low, scaled_high)
        width = scaled_high - scaled_low
        if where in ("cut", "clipped") and width > 0:
            heapq.heappush(self._heap, Item(-width, next(self._serial), envelope, region,
                                            lower, upper, low, high, summary, scale, tag,
                                            where == "clipped"))

    def widest(self) -> float:
        return -self._heap[0].priority if self._heap else 0.0

    def step(self) -> bool:
        """Clip the widest item if its bound is the cheap one, else bisect it; ``False``
        when nothing is left to refine."""
        if not self._heap:
            return False
        item = heapq.heappop(self._heap)
        self.steps += 1
        self._count(item.tag, -item.scale[0] * item.low, -item.scale[1] * item.high)
        if not item.clipped:
            self.add(item.envelope, item.region, item.lower, item.upper, item.scale, item.tag,
                     clip=True)
            return True
        positions = item.envelope.positions
        spread = item.summary.spread
        axis = positions[int(np.argmax(spread))]
        middle = 0.5 * (item.lower[axis] + item.upper[axis])
        left_upper, right_lower = item.upper.copy(), item.lower.copy()
        left_upper[axis], right_lower[axis] = middle, middle
        self.add(item.envelope, item.region, item.lower, left_upper, item.scale, item.tag)
        self.add(item.envelope, item.region, right_lower, item.upper, item.scale, item.tag)
        return True

    def drop(self, tag: tuple) -> None:
        """Forget every item of ``tag`` (their lower ends stay in the sums, their upper ends
        leave them: the caller accounts for the tag's upper end itself)."""
        self._heap = [item for item in self._heap if item.tag != tag]
        heapq.heapify(self._heap)
        self._count(tag, 0.0, -self.high.get(tag, 0.0))


def refine_until(refiner: Refiner, done: Callable[[], bool], deadline: float,
                 max_steps: int, clock: Callable[[], float] = time.perf_counter) -> bool:
    """Refine until ``done()``, the deadline (on ``clock``) or ``max_steps``; ``True`` if
    ``done()``."""
    while True:
        if done():
            return True
        if clock() >= deadline or refiner.steps >= max_steps:
            return False
        if not refiner.step():
            return done()
