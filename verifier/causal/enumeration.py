"""Finite queries decided by exact enumeration, without partitioning (and without torch).

A query is *finite* when every non-protected input is integer-coded or part of a one-hot
group (no continuous input) and every protected cell is one value (integer, one-hot or
chosen values): then it is the finitely many integer points and categories of its box, each
compared at every protected value. FairQuant's COMPAS networks (6 inputs, 624 points) are
such queries. When its *work* (:func:`enumeration_work`: the point evaluations, points ×
protected values, times the cost of one) is at most :data:`ENUMERATION_WORK`, every point is
classified at every protected value by :func:`~verifier.causal.points.decide_points` (a
rigorous float64 enclosure, else exact rationals; the class rule of
:mod:`verifier.causal.classes`, ties included) and the certificate is exact: each point is a
cell, fair when every protected value gives it the same class, biased everywhere otherwise
with the pair as its witness. The enumeration runs to its end whatever the time budget (the
work limit keeps it under about half a CPU second).

Shares follow :func:`verifier.causal.partition.uniform_share` (integer points counted, one-hot
categories equally likely: every point of the query has the same weight), so the biased
share is ``biased points / points``: an exact rational, reported as the tightest float
interval holding it (``[q, q]`` when the quotient is a float, else one ulp wide) beside the
exact counts (``details["enumerated"]``).

Guarantee: the certificate's classes are the network's real-arithmetic classes at every
point. Returns ``None`` (the caller partitions) when the query is not finite, its work is
over the limit, or some class cannot be decided (a folded network, whose point bounds can
leave a tie undecided).
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from verifier.causal.codes import BIASED_EVERYWHERE, FAIR, SPLIT
from verifier.causal.partition import initial_partition
from verifier.causal.points import decide_points
from verifier.causal.problem import FairnessProblem
from verifier.causal.proof_tally import ProofTally
from verifier.causal.report import names_box, witness_record
from verifier.causal.share import ShareBounds, certified_shares, population_bounds
from verifier.certificate import Certificate
from verifier.numerics import down, up

ENUMERATION_WORK = 1 << 28
"""A finite query is enumerated when its point evaluations (points × protected values) times
the weights of one evaluation (:func:`enumeration_work`) are at most this; beyond it the
partitioning decides regions at a time. Measured on the CPU clock (BENCHMARKS.md, issue 35,
2026-11-29): :func:`~verifier.causal.points.decide_points` costs about 1.4–1.7 ns per network
weight and evaluation on FairQuant's compas-3 (81,600 weights) and about 4 µs per evaluation
on its compas-1 (240 weights, per-layer numpy overhead), so this limit is at most about
0.45 CPU s of enumeration."""
EVALUATION_OVERHEAD = 2500
"""The fixed cost of one point evaluation in weights (4 µs at 1.6 ns per weight)."""
BATCH_EVALUATIONS = 1 << 14
"""Point evaluations enclosed together (the enclosure's arrays stay about 13 MB each at 100
neurons a layer)."""


class _Limits(Protocol):
    """What the enumeration reads of :class:`~verifier.causal.certify.CausalSettings`."""

    enumeration_work: int
    max_regions: int
    max_witnesses: int

    def record(self, problem: FairnessProblem) -> dict[str, Any]: ...


def point_count(problem: FairnessProblem) -> int | None:
    """The number of non-protected points of a finite query (see the module docstring), or
    ``None`` when the query is not finite."""
    if not problem.point_cells or not all(problem.integer[i] for i in problem.continuous):
        return None
    count = 1
    for index in problem.continuous:
        count *= int(problem.query_upper[index] - problem.query_lower[index]) + 1
    for allowed in problem.query_allowed:
        count *= int(allowed.sum())
    return count


def query_points(problem: FairnessProblem, count: int) -> np.ndarray:
    """``(count, n)`` every non-protected point of a finite query (protected entries 0), the
    last input or group varying fastest."""
    factors: list[np.ndarray] = [
        np.arange(problem.query_lower[i], problem.query_upper[i] + 1.0)
        for i in problem.continuous
    ]
    factors += [np.flatnonzero(allowed) for allowed in problem.query_allowed]
    digits = np.unravel_index(np.arange(count), [factor.size for factor in factors])
    points = np.zeros((count, problem.inputs))
    for position, index in enumerate(problem.continuous):
        points[:, index] = factors[position][digits[position]]
    offset = len(problem.continuous)
    for g, group in enumerate(problem.onehot_groups):
        members = np.asarray(group)
        chosen = factors[offset + g][digits[offset + g]]
        points[np.arange(count), members[chosen]] = 1.0
    return points


def enumeration_work(problem: FairnessProblem, count: int) -> int:
    """Point evaluations × (network weights + :data:`EVALUATION_OVERHEAD`) of enumerating
    ``count`` points."""
    weights = sum(layer.weight.size for layer in problem.network.layers)
    return count * problem.cell_count * (weights + EVALUATION_OVERHEAD)


def enumerated_certificate(problem: FairnessProblem, settings: _Limits, population,
                           started: float) -> Certificate | None:
    """The exact certificate of a finite query within ``settings.enumeration_work``, or
    ``None`` (see the module docstring). ``started``: the run's ``time.monotonic()`` start."""
    count = point_count(problem)
    if count is None or enumeration_work(problem, count) > settings.enumeration_work:
        return None
    points = query_points(problem, count)
    step = max(BATCH_EVALUATIONS // problem.cell_count, 1)
    decided = [decide_points(problem, points[start:start + step], points[start:start + step])
               for start in range(0, count, step)]
    status, witness_a, witness_b, pairs = (np.concatenate(part) for part in zip(*decided,
                                                                               strict=True))
    if (status == SPLIT).any():
        return None
    biased_rows = np.flatnonzero(status == BIASED_EVERYWHERE)
    fair_count, biased_count = int((status == FAIR).sum()), int(biased_rows.size)
    fair = _exact_share(fair_count, count)
    biased = _exact_share(biased_count, count)
    shares = ShareBounds(fair=fair[0], biased=biased, excluded=0.0)
    shown = biased_rows[: max(settings.max_regions, settings.max_witnesses)]
    witnesses = [witness_record(witness_a[i], witness_b[i], (int(pairs[i, 0]), int(pairs[i, 1])))
                 for i in shown]
    regions = [{"kind": "biased_everywhere", "share": 1.0 / count,
                **names_box(problem, points[i], points[i]), "witness": witnesses[k]}
               for k, i in enumerate(shown[: settings.max_regions])]
    bounds = {"biased_share": biased}
    query_mass: dict[str, list[float]] = {}
    if population is not None:
        query_lo, query_hi = initial_partition(problem)
        population_share = population_bounds(
            problem, population, points, points, status, query_lo[0], query_hi[0])
        bounds["biased_share_population"] = population_share.share
        query_mass = {"query_mass_population": list(population_share.query_mass)}
    counts = {"fair": fair_count, "biased_everywhere": biased_count, "biased_witness": 0,
              "excluded": 0, "unresolved": 0, "refining": 0}
    return Certificate(
        audit="causal-fairness",
        verdict="biased" if biased_count else "fair",
        bounds=bounds,
        details={
            "certified_shares": certified_shares(shares, 0.0),
            "fair_fraction": shares.fair,
            "excluded_fraction": 0.0,
            "biased_everywhere_fraction": biased[0],
            "witnessed_fraction": 0.0,
            "refining_fraction": 0.0,
            "query_fraction": problem.query_fraction(),
            **query_mass,
            "partition_counts": counts,
            "regions": regions,
            "witnesses": witnesses[: settings.max_witnesses],
            "witness_count": biased_count,
            "enumerated": {"points": count, "protected_values": problem.cell_count,
                           "fair": fair_count, "biased": biased_count},
        },
        settings=settings.record(problem),
        cost={"elapsed_s": time.monotonic() - started, "partitions": float(count),
              "analysed_partitions": float(count), "enumerated_points": float(count),
              "point_evaluations": float(count * problem.cell_count), "milps": 0.0,
              **ProofTally().as_cost(), "rounds": 0.0,
              "coverage_done_s": time.monotonic() - started},
        algorithm="exact enumeration of every query point at every protected value "
                  "(rigorous float64 point enclosures, exact rationals where they tie)",
    )


def _exact_share(part: int, whole: int) -> tuple[float, float]:
    """The tightest float interval holding ``part / whole``: the quotient itself when it is a
    float, else the correctly rounded quotient and its neighbour on the exact value's side
    (compared in rationals; one ulp wide)."""
    quotient = part / whole
    exact, rounded = Fraction(part, whole), Fraction(quotient)
    if rounded == exact:
        return quotient, quotient
    return (quotient, up(quotient)) if rounded < exact else (down(quotient), quotient)
