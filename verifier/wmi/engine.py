"""Exact WMI of a violation condition: top-level regions, enumeration, integration, early stop.

``P(violation | pre) = Σ_cells ∫ w / Σ_roots ∫ w`` where the roots (products of density pieces,
each a box, intersected with the precondition) partition the precondition up to measure zero,
and the cells (model regions intersected with the violation condition) partition the
violating set. With ``stop_at = k`` the enumeration stops as soon as the violating mass reaches
``k`` times the total (the early stop of the paper's Algorithm 1); the reported probability is
then a lower bound on the violation probability (``stopped_early``). Roots are processed in
parallel through an executor when one is given (no early stop across roots then, except between
completed roots).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verifier.wmi.encode import Placement, Root, WeightFactor, WMIInputError
from verifier.wmi.integrate import integrate_simplices
from verifier.wmi.polynomial import compiled, constant, embed, multiply
from verifier.wmi.polytope import box_constraints, make_polytope, triangulate
from verifier.wmi.regions import Counters, NetworkModel, Outputs, Region

ViolationCondition = Any  # callable: list[Outputs] -> list[(A, b)]


@dataclass(frozen=True)
class Query:
    """Integration space of dimension ``dimension``, roots, placed models, violation."""

    dimension: int
    roots: list[Root]
    placements: list[Placement]
    violation: ViolationCondition


@dataclass
class WMIResult:
    """Exact probabilities with work counters."""

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

    def as_json(self) -> dict[str, Any]:
        """The CLI's JSON document."""
        document: dict[str, Any] = {
            "probability": self.probability, "violation_probability": self.violation_probability,
            "regions": self.regions, "integrals": self.integrals, "lps": self.lps,
            "elapsed_s": self.elapsed_s, "stopped_early": self.stopped_early,
        }
        if self.verdict is not None:
            document["verdict"] = self.verdict
        document.update(self.extra)
        return document


def build_roots(dimension: int, factors: list[WeightFactor], pre_lower: np.ndarray,
                pre_upper: np.ndarray, pre_A: np.ndarray | None = None,
                pre_b: np.ndarray | None = None) -> list[Root]:
    """One root per combination of pieces whose boxes meet inside the precondition box
    ``[pre_lower, pre_upper]`` (extra precondition rows ``pre_A z <= pre_b``)."""
    if not (np.isfinite(pre_lower).all() and np.isfinite(pre_upper).all()):
        raise WMIInputError("the integration domain is unbounded: every coordinate needs a "
                            "bounded support or precondition box")
    pre_A = np.zeros((0, dimension)) if pre_A is None else np.asarray(pre_A, np.float64)
    pre_b = np.zeros(0) if pre_b is None else np.asarray(pre_b, np.float64)
    roots = []
    for combination in itertools.product(*(factor.pieces for factor in factors)):
        lower, upper = pre_lower.copy(), pre_upper.copy()
        weight = constant(1.0, dimension)
        for factor, piece in zip(factors, combination, strict=True):
            positions = factor.positions
            lower[positions] = np.maximum(lower[positions], piece.lower)
            upper[positions] = np.minimum(upper[positions], piece.upper)
            weight = multiply(weight, embed(piece.polynomial, positions, dimension))
        if np.all(lower < upper):
            roots.append(Root(lower, upper, pre_A, pre_b, weight))
    return roots


def _integrate(region: Region, weight: tuple[np.ndarray, np.ndarray]) -> float:
    polytope = region.polytope()
    return 0.0 if polytope is None else integrate_simplices(triangulate(polytope), *weight)


def _root_region(root: Root, counters: Counters) -> Region | None:
    A, b = box_constraints(root.lower, root.upper)
    A, b = np.vstack([A, root.A]), np.concatenate([b, root.b])
    counters.lps += 1
    poly = make_polytope(A, b)
    return None if poly is None else Region(poly.A, poly.b, poly.point, counters)


def _combined(query: Query, region: Region, root: Root, index: int,
              outputs: list[Outputs]) -> Iterator[tuple[Region, list[Outputs]]]:
    """Regions where every placement from ``index`` on is affine, with all outputs; the
    violation's ``prefix_cell`` (if any) prunes regions after the first placement."""
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
        yield from _combined(query, piece, root, index + 1, [*outputs, out])


def root_masses(query: Query, index: int, stop_mass: float = np.inf
                ) -> tuple[float, float, Counters, bool]:
    """``(total mass, violating mass, counters, stopped)`` of root ``index``; enumeration stops
    once the violating mass reaches ``stop_mass``."""
    counters = Counters()
    root = query.roots[index]
    region = _root_region(root, counters)
    if region is None:
        return 0.0, 0.0, counters, False
    weight = compiled(root.weight, query.dimension)
    total = _integrate(region, weight)
    counters.integrals += 1
    violating = 0.0
    for leaf, outputs in _combined(query, region, root, 0, []):
        counters.regions += 1
        for A, b in query.violation(outputs):
            cell = leaf.restrict(A, b)
            if cell is None:
                continue
            violating += _integrate(cell, weight)
            counters.integrals += 1
            if violating >= stop_mass:
                return total, violating, counters, True
    return total, violating, counters, False


def solve(queries: Query | list[Query], stop_at: float | None = None,
          executor: Executor | None = None) -> WMIResult:
    """Exact ``P(no violation | pre)`` and ``P(violation | pre)`` over the union of the
    queries' roots (one query per value of the discrete columns; see module docstring)."""
    started = time.perf_counter()
    batch = [queries] if isinstance(queries, Query) else list(queries)
    jobs = [(query, index) for query in batch for index in range(len(query.roots))]
    counters = Counters()
    if executor is None or stop_at is not None:
        totals = []
        for query, index in jobs:
            counters.lps += 1
            region = _root_region(query.roots[index], Counters())
            totals.append(0.0 if region is None else
                          _integrate(region, compiled(query.roots[index].weight,
                                                      query.dimension)))
        grand_total = float(sum(totals))
        if grand_total <= 0:
            raise WMIInputError("the precondition has probability zero under the prior")
        stop_mass = np.inf if stop_at is None else stop_at * grand_total
        violating, stopped = 0.0, False
        for (query, index), total in zip(jobs, totals, strict=True):
            if total <= 0:
                continue
            _, mass, work, stopped = root_masses(query, index, stop_mass - violating)
            violating += mass
            counters.add(work)
            if stopped:
                break
    else:
        futures = [executor.submit(root_masses, query, index) for query, index in jobs]
        results = [future.result() for future in futures]
        grand_total = float(sum(result[0] for result in results))
        if grand_total <= 0:
            raise WMIInputError("the precondition has probability zero under the prior")
        violating = float(sum(result[1] for result in results))
        for result in results:
            counters.add(result[2])
        stopped = False
    share = min(1.0, max(0.0, violating / grand_total))
    return WMIResult(
        probability=1.0 - share, violation_probability=share, total_mass=grand_total,
        violation_mass=violating, regions=counters.regions, integrals=counters.integrals,
        lps=counters.lps, elapsed_s=time.perf_counter() - started, stopped_early=stopped,
    )
