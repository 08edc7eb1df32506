"""Queries of the properties that read one copy of the input, local robustness and
equivalence: one query per (merged) prior term inside the precondition box
(:func:`single_copy_queries`), the ε-box around a centre (:func:`centred_box`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from verifier.wmi.encode import Placement, WMIInputError
from verifier.wmi.engine import Query, point_query
from verifier.wmi.points import point_placement
from verifier.wmi.properties.layout import place_term, root_count, term_offset
from verifier.wmi.properties.queries import (
    check_roots,
    deadline_passed,
    points_only,
    with_lost,
)
from verifier.wmi.properties.term_mass import SkippedMass
from verifier.wmi.regions import PiecewiseAffineModel
from verifier.wmi.roots import DeadlineReached, build_roots
from verifier.wmi.terms import Term, TermSet


def single_copy_queries(models: list[PiecewiseAffineModel], termset: TermSet,
                        dimension: int, box_lo: np.ndarray, box_hi: np.ndarray,
                        violation: Any, deadline: float = math.inf,
                        max_roots: int | None = None, finite_sum: bool = False
                        ) -> list[Query]:
    """One query per term (the columns no model reads summed out in the box:
    :func:`~verifier.wmi.properties.queries.prior_termset`) whose atoms lie in the
    precondition box (a term fixing
    every column reads its point). Terms reached after ``deadline`` are left out as
    ``lost`` mass (:func:`deadline_passed`); :class:`~verifier.wmi.terms.TooManyRoots` when
    the pieces meeting the box make more than ``max_roots`` roots;
    :class:`~verifier.wmi.terms.AllDiscrete` as :func:`points_only` says."""
    terms = [t for t in termset.terms if _atoms_inside(t, box_lo, box_hi)]
    check_roots((root_count(term, dimension, box_lo, box_hi) for term in terms), max_roots)
    queries: list[Query] = []
    skipped = SkippedMass()
    for term in terms:
        if deadline_passed(deadline):
            skipped.add(term)
            continue
        free = [j for j in range(dimension) if j not in term.atoms]
        if not free:
            point = term_offset(term, dimension)
            queries.append(point_query([point_placement(model, point) for model in models],
                                       violation, term.coefficient))
            continue
        index = {j: k for k, j in enumerate(free)}
        layout = place_term(term, index, len(free))
        lo = np.maximum(layout.lower, box_lo[free])
        hi = np.minimum(layout.upper, box_hi[free])
        try:
            roots, mass_bound = build_roots(len(free), layout.factors, lo, hi,
                                            deadline=deadline, envelopes=tuple(layout.envelopes))
        except DeadlineReached:
            skipped.add(term)
            continue
        embed = np.eye(dimension)[:, free]
        offset = term_offset(term, dimension)
        placements = [Placement(model, embed, offset) for model in models]
        queries.append(Query(len(free), roots, placements, violation, term.coefficient,
                             tuple(layout.envelopes), layout.lost, mass_bound=mass_bound))
    return with_lost(points_only(queries, finite_sum), termset.lost + skipped.total)


def centred_box(dimension: int, center: Any, epsilon: float | np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray]:
    """The precondition box ``center ± epsilon`` (:func:`_half_widths`) on ``dimension``
    columns; the whole space (infinite ends) when ``center`` is None. Raises
    :class:`WMIInputError` for a centre of another size or an ``epsilon`` not > 0."""
    if center is None:
        return np.full(dimension, -np.inf), np.full(dimension, np.inf)
    point = np.asarray(center, dtype=np.float64).reshape(-1)
    if point.size != dimension:
        raise WMIInputError(f"the centre has {point.size} coordinates, expected {dimension}")
    radius = _half_widths(epsilon)
    return point - radius, point + radius


def _half_widths(epsilon: float | np.ndarray | None) -> float | np.ndarray:
    """The ε-box's half-width: one ``ε`` for every column, or one per column (``(d,)``, as a
    coded column's box in its codes, :mod:`verifier.audits.local_robustness`); each > 0."""
    if epsilon is None or not np.all(np.asarray(epsilon, dtype=np.float64) > 0):
        raise WMIInputError(f"epsilon must be > 0, got {epsilon}")
    return epsilon


def _atoms_inside(term: Term, box_lo: np.ndarray, box_hi: np.ndarray) -> bool:
    """Whether every column the term fixes takes a value inside ``[box_lo, box_hi]``."""
    return all(box_lo[j] <= v <= box_hi[j] for j, v in term.atoms.items())
