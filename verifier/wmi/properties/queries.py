"""The steps every property's query builder shares: the prior as terms checked against the
model, the columns no model reads summed out (:func:`prior_termset`), the root limit
(:func:`check_roots`), the deadline (:func:`deadline_passed`), and the mass the queries
leave out (:func:`with_lost`).

A term left out at the deadline, or the tails a prior's discretisation drops, enter the first
query's ``lost`` mass: the solver counts it as possibly violating, so leaving it out widens
the result's interval and never makes it wrong.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from verifier.wmi.encode import WMIInputError
from verifier.wmi.engine import Query
from verifier.wmi.terms import AllDiscrete, Prior, TermSet, TooManyRoots, prior_terms


def prior_termset(prior: Prior, dimension: int, read: Iterable[int],
                  box: tuple[np.ndarray, np.ndarray] | None = None) -> TermSet:
    """The prior's terms (:func:`~verifier.wmi.terms.prior_terms`) with the columns outside
    ``read`` summed out in the precondition ``box`` (:mod:`verifier.wmi.unread`);
    :class:`WMIInputError` unless it has one column per model input."""
    termset = prior_terms(prior, read, box)
    if termset.dimension != dimension:
        raise WMIInputError(f"the prior has {termset.dimension} columns, the model "
                            f"{dimension} inputs")
    return termset


def check_roots(counts: Iterable[int], max_roots: int | None) -> None:
    """Raise :class:`TooManyRoots` once the root counts (one per query a property would
    build, :func:`~verifier.wmi.properties.layout.root_count` times the pieces the property
    adds: a copy's marginal, the noise, the other values of a discrete feature) add up to
    more than ``max_roots`` (``None``: no limit). The counts are read lazily and only up to
    the limit."""
    if max_roots is None:
        return
    total = 0
    for count in counts:
        total += count
        if total > max_roots:
            raise TooManyRoots(f"the prior's pieces make more than {max_roots} root regions "
                               "for exact WMI")


def deadline_passed(deadline: float) -> bool:
    """Whether the deadline has passed: a term the builders then skip (or whose roots
    were being listed, :class:`~verifier.wmi.roots.DeadlineReached`) enters as ``lost`` mass
    (its whole mass, counted on both ends)."""
    return time.perf_counter() >= deadline


def points_only(queries: list[Query], finite_sum: bool) -> list[Query]:
    """``queries``; :class:`AllDiscrete` when every one reads fixed points (every column
    discrete) unless ``finite_sum``: the caller then branches a network's boxes, or asks
    again for the finite sum over the points."""
    if not finite_sum and queries and all(query.dimension == 0 for query in queries):
        raise AllDiscrete("every input column is discrete: nothing to integrate")
    return queries


def with_lost(queries: list[Query], lost: float) -> list[Query]:
    """``queries`` with ``lost`` (prior mass no term carries) added to the first query's."""
    if not queries or lost <= 0:
        return queries
    return [replace(queries[0], lost=queries[0].lost + lost), *queries[1:]]
