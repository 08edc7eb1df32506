"""Certified bounds on the biased share from the final partition ledger.

Every partition of the query ends in exactly one class: proven fair, proven biased everywhere,
biased with a witness (some but maybe not all points biased), or excluded/unresolved. The
biased share (measure of non-protected points with two protected values giving different
classes, relative to the query) therefore lies in ``[mass(biased everywhere), 1 − mass(fair)]``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from verifier.causal.codes import BIASED_EVERYWHERE, FAIR
from verifier.causal.partition import uniform_share
from verifier.causal.problem import CausalInputError, FairnessProblem
from verifier.numerics import (
    add_down,
    add_up,
    nonnegative_quotient,
    sum_lower,
    sum_upper,
    up_array,
)

MEASURE_BLOCK = 2048
"""Partitions whose population masses :func:`population_bounds` computes in one call: one
call over a whole ledger held every box's copies and enclosure at once, and a deadline is
looked at between blocks (a block of a 72-input model under a fitted 21-node Bayesian
network takes 0.2–0.8 s, a call's fixed cost 15–20 ms). Each block also carries the query's
box, as the single call did: a block is all single points (the Bayesian network's
chain-rule path) only when the query is one too (docs/decisions.md, causal fairness keeps
its budget)."""


@dataclass(frozen=True)
class PartitionMasses:
    """The population masses of the first ``len(low)`` partitions handed to
    :func:`population_bounds`, in their order: ``low`` the summable lower ends (an atom on
    a shared face counted once, :func:`_disjoint_lower`), ``high`` the closed boxes' upper
    ends. Valid for the same problem, population and query, and for partitions that are
    final: a later call given them (``known``) measures only the partitions after them."""

    low: np.ndarray
    high: np.ndarray

    def first(self, count: int) -> PartitionMasses:
        """The masses of the first ``count`` partitions (at most those held)."""
        return PartitionMasses(self.low[:count], self.high[:count])


@dataclass(frozen=True)
class PopulationShare:
    """``share``: certified ``(lower, upper)`` of ``P(biased | query)``; ``query_mass``:
    certified ``(lower, upper)`` of ``P(query)``, whose lower end 0 (a query no float
    enclosure separates from 0) is why a share can stay ``[0, 1]``; ``measured``: the
    partitions whose masses were computed before the deadline (all of them without one),
    the first ``measured`` ones; ``masses``: theirs."""

    share: tuple[float, float]
    query_mass: tuple[float, float]
    measured: int
    masses: PartitionMasses = field(compare=False, repr=False)


@dataclass(frozen=True)
class ShareBounds:
    """Fractions of the query: ``fair``, ``biased`` = ``(lower, upper)``, ``excluded``."""

    fair: float
    biased: tuple[float, float]
    excluded: float


def uniform_bounds(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                   status: np.ndarray, excluded_mask: np.ndarray) -> ShareBounds:
    """Bounds under the uniform measure on the query box, rounded outward: each partition's
    share is a product of one quotient per input or group (a few roundings each) and the
    shares are summed, so a relative margin over that count is taken off the fair and
    biased-everywhere masses. The partitions tile the query, so the biased share is at most
    both ``1 − fair`` (rounded up) and the shares of the partitions not proven fair (with the
    margin added; exactly 0 when every partition is fair)."""
    weight = uniform_share(problem, lower, upper)
    return bounds_from_sums(problem, float(weight[status == FAIR].sum()),
                            float(weight[status == BIASED_EVERYWHERE].sum()),
                            float(weight[status != FAIR].sum()),
                            float(weight[excluded_mask].sum()), weight.size)


def bounds_from_sums(problem: FairnessProblem, fair: float, everywhere: float, unfair: float,
                     excluded: float, count: int) -> ShareBounds:
    """:func:`uniform_bounds` from the float sums of the ``count`` partitions' shares by class
    (in any order: the margin covers the rounding of any summation order)."""
    factors = len(problem.continuous) + len(problem.onehot_groups)
    roundings = 2 * (4 * factors + count + 4)
    fair = float(sum_lower(fair, roundings))
    everywhere = float(sum_lower(everywhere, roundings))
    unfair = float(sum_upper(unfair, roundings))
    high = min(1.0, float(add_up(1.0, -fair)), max(everywhere, unfair))
    return ShareBounds(fair=fair, biased=(min(everywhere, high), high), excluded=excluded)


def certified_shares(bounds: ShareBounds, contains_bias: float) -> dict[str, float]:
    """The headline shares of the query (uniform measure), proven first: ``fair`` and
    ``biased_everywhere`` (both certified: lower bounds from :func:`uniform_bounds`),
    ``decided`` their sum rounded down (the share proven one way or the other), then
    ``contains_bias`` (the partitions holding a re-checked witness but not proven biased
    everywhere, refinements still running included: covered, not decided) and ``undecided``
    (excluded or unresolved, ``bounds.excluded``). The last two are float sums of partition
    shares, not bounds; the five add up to one up to rounding."""
    decided = float(add_down(bounds.fair, bounds.biased[0]))
    return {"fair": bounds.fair, "biased_everywhere": bounds.biased[0],
            "decided": max(decided, 0.0), "contains_bias": contains_bias,
            "undecided": bounds.excluded}


def population_bounds(problem: FairnessProblem, population, lower: np.ndarray,
                      upper: np.ndarray, status: np.ndarray,
                      query_lower: np.ndarray, query_upper: np.ndarray,
                      deadline: float | None = None,
                      known: PartitionMasses | None = None) -> PopulationShare:
    """``P(biased | query)`` and ``P(query)`` bounds under ``population`` (columns =
    network inputs), from the sound box-probability enclosures of every partition (protected
    inputs over the query's range of them, ``problem.protected_query``: a query naming a
    protected input conditions the measure on it; an integer input's ``[lo, hi]`` as
    ``[lo − ½, hi + ½]``, the mass of its integers). The partitions tile the query with
    shared faces, so the upper sums read the closed boxes and the lower sums the disjoint
    ones of :func:`_disjoint_lower` (an atom on a face counted once). The partitions are
    measured in blocks of :data:`MEASURE_BLOCK`; none is begun once ``deadline``
    (``time.monotonic()``) has passed. A partition left unmeasured adds 0 to the lower sums
    and, unless proven fair, leaves the upper end to ``P(query) − P(fair)`` alone: both
    sound, only wider. ``known``: the masses of the first partitions from an earlier call
    (:attr:`PopulationShare.masses`), taken as they are; the query's box is measured again
    in every call."""
    if population.dimension != problem.inputs:
        raise CausalInputError(
            f"the population model has {population.dimension} columns, the network "
            f"{problem.inputs} inputs"
        )
    columns = getattr(population, "columns", None)
    if columns is not None and tuple(columns) != tuple(problem.network.input_names):
        raise CausalInputError(
            "the population model's columns must be the network's inputs in order: "
            f"{list(columns)} vs {problem.network.input_names}"
        )
    q_low = q_high = 0.0
    high = np.full(lower.shape[0], np.inf)
    low = np.zeros(lower.shape[0])
    measured = 0 if known is None else min(known.low.size, lower.shape[0])
    if measured:
        low[:measured], high[:measured] = known.low[:measured], known.high[:measured]
    first = measured
    for start in range(first, max(lower.shape[0], first + 1), MEASURE_BLOCK):
        late = deadline is not None and time.monotonic() >= deadline
        if late and start > first:
            break
        rows = slice(start, start if late else start + MEASURE_BLOCK)
        boxes_lo, boxes_hi = _population_boxes(problem, np.vstack([lower[rows], query_lower]),
                                               np.vstack([upper[rows], query_upper]))
        block_low, block_high = population.prob_boxes_interval(boxes_lo, boxes_hi)
        q_low, q_high = float(block_low[-1]), float(block_high[-1])
        high[rows] = block_high[:-1]
        low[rows] = _disjoint_lower(problem, population, boxes_lo[:-1], boxes_hi[:-1],
                                    query_lower, block_low[:-1])
        measured += boxes_lo.shape[0] - 1
    terms = len(status)
    biased_low = sum_lower(low[status == BIASED_EVERYWHERE].sum(), terms)
    not_fair_high = min(float(sum_upper(high[status != FAIR].sum(), terms)),
                        float(add_up(q_high, -sum_lower(low[status == FAIR].sum(), terms))))
    share_low, share_high = nonnegative_quotient(biased_low, max(not_fair_high, 0.0), q_low,
                                                 q_high, ceiling=1.0)
    return PopulationShare(share=(float(share_low), max(float(share_low), float(share_high))),
                           query_mass=(q_low, q_high), measured=measured,
                           masses=PartitionMasses(low[:measured], high[:measured]))


def _population_boxes(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The boxes whose population mass is a partition's ``[lower, upper]`` (``(B, n)``):
    the protected inputs over the query's range of them, an integer input's ``[lo, hi]`` as
    ``[lo − ½, hi + ½]``."""
    prot = list(problem.protected)
    boxes_lo, boxes_hi = lower.copy(), upper.copy()
    whole = problem.integer
    boxes_lo[:, whole] -= 0.5
    boxes_hi[:, whole] += 0.5
    boxes_lo[:, prot] = problem.protected_query[0] - 0.5 * problem.integer[prot]
    boxes_hi[:, prot] = problem.protected_query[1] + 0.5 * problem.integer[prot]
    return boxes_lo, boxes_hi


def _disjoint_lower(problem: FairnessProblem, population, lo: np.ndarray, hi: np.ndarray,
                    query_lower: np.ndarray, closed_low: np.ndarray) -> np.ndarray:
    """Lower mass bounds of the partitions ``[lo, hi]`` (``(B, n)``, as given to the
    population) that can be summed although the partitions share faces.

    A partition's lower face on a column the partitions bisect (``problem.continuous``: not
    protected, not in a one-hot group) that is not integer and has point masses
    (``atomless_columns()`` False, e.g. a fitted histogram's atom) is moved to the next float
    above it wherever it lies above the query's: two partitions that met on that face are
    then disjoint over the floats, where every atom lies, so no atom is counted twice. Each
    moved box lies inside its partition, so its lower mass is still a lower bound of the
    partition's (the density in the one-float gap is merely not credited); its class, proven
    on the closed partition, holds on it. Without such columns: ``closed_low`` unchanged."""
    faces = np.zeros(problem.inputs, dtype=bool)
    faces[list(problem.continuous)] = True
    faces &= ~np.asarray(population.atomless_columns(), dtype=bool) & ~problem.integer
    moved = faces[None, :] & (lo > query_lower[None, :])
    if not moved.any():
        return closed_low
    low, _ = population.prob_boxes_interval(np.where(moved, up_array(lo), lo), hi)
    return low
