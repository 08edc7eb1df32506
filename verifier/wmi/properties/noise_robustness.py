"""Robustness to noise (paper 002, Eq. 10): ``P(c(x) = c(x + n))`` with ``x`` from the prior
and ``n`` from the noise on some features, by region enumeration (one query per pair of a
prior term and a noise term) or, for a network on a prior the enumeration cannot list, by box
branching (:func:`verifier.wmi.branched.noise_robustness`).
"""

from __future__ import annotations

import math
from concurrent.futures import Executor
from functools import partial
from typing import Any

import numpy as np

from verifier.numerics import two_sum
from verifier.population.base import Distribution
from verifier.wmi import branched
from verifier.wmi.arguments import check_noise_features, check_noise_kind, check_noise_width
from verifier.wmi.encode import Disagreement, Placement, WMIInputError
from verifier.wmi.engine import DEFAULT_TOLERANCE, Query, WMIResult, point_query
from verifier.wmi.points import point_placement
from verifier.wmi.properties.layout import place_term, root_count, term_offset
from verifier.wmi.properties.models import as_model, input_size, read_columns
from verifier.wmi.properties.queries import (
    check_roots,
    deadline_passed,
    points_only,
    prior_termset,
    with_lost,
)
from verifier.wmi.properties.run import decide, run_options
from verifier.wmi.properties.term_mass import SkippedMass, factor_mass
from verifier.wmi.regions import PiecewiseAffineModel
from verifier.wmi.roots import DeadlineReached, build_roots
from verifier.wmi.terms import PolyFactor, Prior, Term, prior_terms, times


def noise_robustness_queries(model: Any, prior: Prior, noise: Distribution | None,
                             features: list[int], bound_method: str = "crown", *,
                             deadline: float = math.inf, max_roots: int | None = None,
                             finite_sum: bool = False, noise_in_codes: bool = False
                             ) -> list[Query]:
    """The queries of :func:`noise_robustness` (pairs reached after ``deadline`` left out
    as ``lost`` mass, :func:`deadline_passed`); :class:`~verifier.wmi.terms.TooManyRoots`
    beyond ``max_roots`` roots; :class:`~verifier.wmi.terms.AllDiscrete` as
    :func:`points_only` says. A column with values beside a density takes a density noise
    as a continuous column does (its values move off)."""
    wrapped = as_model(model, bound_method)
    dimension = input_size(wrapped)
    _check_noise(prior, noise, features, dimension, noise_in_codes)
    termset = prior_termset(prior, dimension, read_columns(wrapped) | set(features))
    noise_set = prior_terms(noise)
    check_noise_width(noise_set.dimension, features)
    discrete_noise = set(noise_set.discrete_columns())
    for position, f in enumerate(features):
        check_noise_kind(termset.name(f), f in termset.discrete_columns(),
                         position in discrete_noise)
    extra = sum(root_count(noise_term, len(features)) for noise_term in noise_set.terms)
    check_roots((root_count(term, dimension) * extra for term in termset.terms), max_roots)
    queries: list[Query] = []
    skipped = SkippedMass()
    for term in termset.terms:
        for noise_term in noise_set.terms:
            if deadline_passed(deadline):
                skipped.add(term, noise_term.coefficient[2] * factor_mass(noise_term))
                continue
            try:
                queries.append(_noise_query(wrapped, term, noise_term, features, dimension,
                                            deadline))
            except (DeadlineReached, InexactShift):
                skipped.add(term, noise_term.coefficient[2] * factor_mass(noise_term))
    return with_lost(points_only(queries, finite_sum),
                     termset.lost + noise_set.lost + skipped.total)


def noise_robustness(model: Any, prior: Prior, noise: Distribution, features: list[int], *,
                     stop_at: float | None = None, executor: Executor | None = None,
                     bound_method: str = "crown", timeout_s: float | None = None,
                     tolerance: float = DEFAULT_TOLERANCE, noise_in_codes: bool = False,
                     prove: bool = False) -> WMIResult:
    """``P(c(x) = c(x + n))`` with ``x ~ prior`` and ``n ~ noise`` added to ``features``
    (Eq. 10); ``noise`` has dimension ``len(features)``: a density (piecewise polynomial, or
    normal-type: then the result is a certified interval) or discrete values (each shifts its
    feature by a constant). A discrete feature of the prior takes discrete noise only (a
    density would move it off its values); on a coded column of the prior the shifts must be
    code shifts, said by ``noise_in_codes`` (:func:`_check_noise`). A shifted fixed value
    whose sum float64 cannot hold keeps its pair's mass as lost (:func:`_shifted`).
    ``prove``: a float-computed result gets box branching's proven result as its ``proof``
    in the time left (:func:`verifier.wmi.properties.run.decide`)."""
    engine = run_options(stop_at, executor, bound_method, timeout_s, tolerance)
    return decide((model,), engine,
                  partial(noise_robustness_queries, model, prior, noise, features, bound_method,
                          noise_in_codes=noise_in_codes),
                  partial(branched.noise_robustness, model, prior, noise, features,
                          engine=engine), prove=prove)


def _noise_query(wrapped: PiecewiseAffineModel, term: Term, noise_term: Term,
                 features: list[int], dimension: int, deadline: float = math.inf) -> Query:
    """One (prior term, noise term) query: the prior's free columns, then the noise's
    continuous columns as integration coordinates; a discrete noise value shifts its feature
    in the second copy by a constant (a point query when nothing is left to integrate)."""
    free = [j for j in range(dimension) if j not in term.atoms]
    moving = [p for p in range(len(features)) if p not in noise_term.atoms]
    width = len(free) + len(moving)
    offset = term_offset(term, dimension)
    moved = _shifted(offset, noise_term, features)
    coefficient = times(term.coefficient, noise_term.coefficient)
    if width == 0:
        return point_query([point_placement(wrapped, offset), point_placement(wrapped, moved)],
                           Disagreement(), coefficient)
    index = {j: k for k, j in enumerate(free)}
    layout = place_term(term, index, width)
    coordinate = {p: len(free) + k for k, p in enumerate(moving)}
    shifted_noise = Term(noise_term.coefficient, {}, [
        PolyFactor(tuple(coordinate[p] for p in f.positions), f.pieces)
        for f in noise_term.poly], {coordinate[p]: d for p, d in noise_term.densities.items()})
    noise_layout = place_term(shifted_noise, {k: k for k in coordinate.values()}, width)
    lower = np.where(np.isfinite(layout.lower), layout.lower, noise_layout.lower)
    upper = np.where(np.isfinite(layout.upper), layout.upper, noise_layout.upper)
    envelopes = tuple(layout.envelopes + noise_layout.envelopes)
    roots, mass_bound = build_roots(width, layout.factors + noise_layout.factors, lower, upper,
                                    deadline=deadline, envelopes=envelopes)
    first = np.zeros((dimension, width))
    for j, k in index.items():
        first[j, k] = 1.0
    shifted = first.copy()
    for p, k in coordinate.items():
        shifted[features[p], k] = 1.0
    lost = (layout.lost * noise_term.coefficient[2] * factor_mass(noise_term)
            + noise_layout.lost * term.coefficient[2] * factor_mass(term))
    return Query(width, roots, [Placement(wrapped, first, offset),
                                Placement(wrapped, shifted, moved)],
                 Disagreement(), coefficient, envelopes, lost, mass_bound=mass_bound)


class InexactShift(Exception):
    """A discrete noise value added to a fixed value has no float64 equal to the real sum."""


def _shifted(offset: np.ndarray, noise_term: Term, features: list[int]) -> np.ndarray:
    """``offset`` with each discrete noise value of ``noise_term`` added to its feature, each
    sum exactly the real one; :class:`InexactShift` otherwise (a float atom moved off the
    float grid, e.g. 0.1 + 0.2): a model read at the rounded sum could fall on the other side
    of a boundary, so the caller keeps the pair's mass as lost (possibly violating, the
    interval widens) instead of deciding it at the wrong point. Integers and shifts of a
    free column (offset 0) are always exact."""
    moved = offset.copy()
    for p, value in noise_term.atoms.items():
        total, error = two_sum(np.float64(offset[features[p]]), np.float64(value))
        if error != 0:
            raise InexactShift(f"{offset[features[p]]!r} + {value!r} is not a float64")
        moved[features[p]] = total
    return moved


def _check_noise(prior: Prior, noise: Distribution | None, features: list[int],
                 dimension: int, noise_in_codes: bool) -> None:
    """Refuse a missing noise, bad feature indices, a noise population that codes its own
    columns, and shifts (point masses of the noise) on a coded column of the prior unless
    ``noise_in_codes`` says they are code shifts already
    (:func:`verifier.audits.coded_values.noise_in_codes`,
    which the ``--noise`` verb applies): a shift in the data's units added to a code would
    move the input elsewhere. Checked before the prior is expanded, so that no path (box
    branching included) reads a shift as a code shift."""
    if noise is None:
        raise WMIInputError("noise robustness needs a noise distribution")
    check_noise_features(features, dimension)
    if getattr(getattr(noise, "feature_schema", None), "coded", False):
        raise WMIInputError("the noise population codes columns (value = offset + step·k): "
                            "its codes would be added as the shifts; write the noise's values "
                            "without a step or offset")
    shifting = [f for f, atomless in zip(features, noise.atomless_columns(), strict=False)
                if not atomless]  # a density noise is refused on any discrete column later
    coded = [] if noise_in_codes else _coded_columns(prior, shifting)
    if coded:
        raise WMIInputError(f"{', '.join(coded)} is a coded column of the population (value = "
                            "offset + step·k): the noise's shifts in the data's units would be "
                            "added to its codes; write them as code shifts first "
                            "(verifier.audits.coded_values.noise_in_codes, which "
                            "`certgate verify noise-robustness --noise` applies)")


def _coded_columns(prior: Prior, features: list[int]) -> list[str]:
    """The names of the ``features`` (input positions) that ``prior`` codes (value
    ``offset + step·k``); empty for a prior without a schema."""
    schema = getattr(prior, "feature_schema", None)
    if schema is None:
        return []
    columns = schema.columns
    return [columns[f] for f in features
            if f < len(columns) and schema.feature_of(columns[f]).coded]
