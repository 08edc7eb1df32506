"""Monotonicity (paper 002, Eq. 9) by self-composition: ``x`` and ``x′`` agree except on the
feature, where ``x_i <= x′_i`` (``>=`` when decreasing); ``x′_i`` is
:mod:`~verifier.wmi.properties.second_draw`'s independent draw. Box branching
(:func:`verifier.wmi.branched.monotonicity`) takes a network on a prior the enumeration cannot
list.
"""

from __future__ import annotations

import math
from concurrent.futures import Executor
from functools import partial
from typing import Any

import numpy as np

from verifier.wmi import branched
from verifier.wmi.arguments import check_feature, check_ordered_feature, check_uniform_support
from verifier.wmi.encode import Decrease, LostFavorable, WeightPiece, WMIInputError
from verifier.wmi.engine import DEFAULT_TOLERANCE, Query, WMIResult
from verifier.wmi.polynomial import constant
from verifier.wmi.properties.layout import root_count
from verifier.wmi.properties.models import as_model, input_size, read_columns
from verifier.wmi.properties.queries import (
    check_roots,
    deadline_passed,
    points_only,
    prior_termset,
    with_lost,
)
from verifier.wmi.properties.run import decide, run_options
from verifier.wmi.properties.second_draw import SecondDraw
from verifier.wmi.properties.term_mass import SkippedMass
from verifier.wmi.roots import DeadlineReached
from verifier.wmi.terms import PolyFactor, Prior, Term, TermSet, combinations


def monotonicity_queries(model: Any, prior: Prior, feature: int, *, decreasing: bool = False,
                         favorable_class: int = 1, output: int | None = None,
                         use_prior: bool = False, bound_method: str = "crown",
                         deadline: float = math.inf, max_roots: int | None = None,
                         finite_sum: bool = False) -> list[Query]:
    """The queries of :func:`monotonicity`: for each (merged) prior term ``x``, one per part
    of the feature's second draw ``x′_i`` that the order admits — its density part (the
    terms leaving the feature free) and each of its values (the terms fixing it) — with
    ``x_i <= x′_i`` (``>=`` when ``decreasing``) as the precondition, strict where both
    sides are values (equal values cannot violate and leave it, as the measure-zero
    diagonal does between densities). A column with values beside a density (a fitted
    histogram's atoms) takes all four combinations. Terms reached after ``deadline`` are
    left out as ``lost`` mass (:func:`~verifier.wmi.properties.queries.deadline_passed`);
    :class:`~verifier.wmi.terms.TooManyRoots` beyond ``max_roots`` roots;
    :class:`~verifier.wmi.terms.AllDiscrete` as
    :func:`~verifier.wmi.properties.queries.points_only` says."""
    wrapped = as_model(model, bound_method, values=output is not None)
    dimension = input_size(wrapped)
    check_feature(feature, dimension)
    termset = prior_termset(prior, dimension, read_columns(wrapped) | {feature})
    if not use_prior:
        termset = uniform_terms(prior, termset)
    check_ordered_feature(feature, termset.groups, termset.name(feature))
    violation = LostFavorable(favorable_class) if output is None else Decrease(output)
    copy = SecondDraw(termset, feature, decreasing)
    check_roots((root_count(term, dimension) * copy.root_factor(term)
                 for term in termset.terms), max_roots)
    queries: list[Query] = []
    skipped = SkippedMass()
    for term in termset.terms:
        parts = copy.parts(term)
        for part in parts:
            if deadline_passed(deadline):
                skipped.add(term, copy.mass(part, termset))
                continue
            try:
                queries.append(copy.query(wrapped, term, part, dimension, violation,
                                          deadline))
            except DeadlineReached:
                skipped.add(term, copy.mass(part, termset))
    if not queries and not skipped.total:
        raise WMIInputError(f"column {termset.name(feature)!r} takes a single value: no pair "
                            "differs in it")
    return with_lost(points_only(queries, finite_sum), 2 * termset.lost + skipped.total)


def monotonicity(model: Any, prior: Prior, feature: int, *, decreasing: bool = False,
                 favorable_class: int = 1, output: int | None = None,
                 use_prior: bool = False, stop_at: float | None = None,
                 executor: Executor | None = None, bound_method: str = "crown",
                 timeout_s: float | None = None, tolerance: float = DEFAULT_TOLERANCE,
                 prove: bool = False) -> WMIResult:
    """Monotonicity in input ``feature`` by self-composition (Eq. 9): ``x`` and ``x′`` agree
    except on ``feature``, where ``x_i <= x′_i`` (``>=`` when ``decreasing``).

    Classifier (``output`` None): ``P(c(x) = positive ⇒ c(x′) = positive)``. Regressor
    (``output`` given): ``P(f(x)[output] <= f(x′)[output])``. Pairs: ``x`` from the prior and
    ``x′_i`` an independent draw of the feature's marginal (``use_prior``), or both from the
    uniform prior on the support box (continuous columns uniform on their support interval,
    discrete groups uniform over their values; an unbounded support is refused). Discrete
    columns take the same value in both copies. A discrete (binary or integer) ``feature`` is
    compared on its values: ``x′_i`` is drawn from the values the feature takes and pairs
    with ``x_i < x′_i`` (``>`` when ``decreasing``) form the precondition; a column of a
    one-hot group is refused. A column with values beside a density (a fitted histogram's
    atoms; uniform on its support interval when not ``use_prior``) is compared both ways:
    ties between its values leave the precondition, as between a discrete feature's.
    ``prove``: a float-computed result gets box branching's proven result as its ``proof``
    in the time left (:func:`verifier.wmi.properties.run.decide`).
    """
    engine = run_options(stop_at, executor, bound_method, timeout_s, tolerance)
    pairs = {"decreasing": decreasing, "favorable_class": favorable_class, "output": output,
             "use_prior": use_prior}
    return decide((model,), engine,
                  partial(monotonicity_queries, model, prior, feature, bound_method=bound_method,
                          **pairs),
                  partial(branched.monotonicity, model, prior, feature, engine=engine, **pairs),
                  prove=prove)


def uniform_terms(prior: Prior, termset: TermSet) -> TermSet:
    """The uniform prior on the support box: every continuous column uniform on its support
    interval, every discrete group uniform over the values it takes. Raises
    :class:`WMIInputError` naming a continuous column with an unbounded support."""
    lower, upper = prior.support()
    discrete = set(termset.discrete_columns())
    pieces = []
    for j in range(termset.dimension):
        if j in discrete:
            continue
        check_uniform_support(termset.name(j), float(lower[j]), float(upper[j]))
        height = 1.0 / (float(upper[j]) - float(lower[j]))
        pieces.append(PolyFactor((j,), (WeightPiece(np.array([lower[j]]), np.array([upper[j]]),
                                                    constant(height, 1)),)))
    values = combinations(termset)
    share = 1.0 / len(values)
    terms = [Term((share, share, share), atoms, list(pieces)) for atoms in values]
    return TermSet(termset.dimension, terms, 0.0, termset.names, termset.groups)
