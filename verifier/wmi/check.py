"""Before running: can a WMI property run on this model and population?

:func:`check_wmi_property` builds the property's queries exactly as the property function
would (prior terms, discrete values, density envelopes, roots) without enumerating a single
region, so it is cheap (no LP) and raises the same one-line :class:`WMIInputError` the run
would raise: a column WMI cannot handle (named), a feature index out of range, continuous
noise on a discrete feature, a monotone one-hot column, a missing noise distribution, an
unbounded support with ``use_prior=False``, a prior of more than 20 000 terms that no
branching can take instead (a scikit-learn model). Config validation
calls it so a bad audit fails before any audit runs.

Without a model (``model=None``: ``certgate config check`` on a configuration whose model
lives in a registry but whose population file is local), the check runs on the population
alone: every column counts as read by the model, so the population-side refusals (a column or
feature WMI cannot handle, an unbounded support, too many prior terms) are the same; a model
that turns out to have another number of inputs is refused later, when it is fetched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from verifier.population.base import Distribution
from verifier.wmi import branched
from verifier.wmi.encode import WMIInputError
from verifier.wmi.engine import Query
from verifier.wmi.properties.equivalence import equivalence_queries
from verifier.wmi.properties.local_robustness import local_robustness_queries
from verifier.wmi.properties.monotonicity import monotonicity_queries
from verifier.wmi.properties.noise_robustness import noise_robustness_queries
from verifier.wmi.properties.run import root_limit
from verifier.wmi.regions import PiecewiseAffineModel
from verifier.wmi.terms import NotEnumerable, Prior

WMI_KINDS = ("monotonicity", "noise_robustness", "local_robustness", "equivalence")


class InputsOnly(PiecewiseAffineModel):
    """A model known only by its number of inputs, all of them read. It enumerates no region:
    its queries can be built, checked and counted, never solved."""

    def __init__(self, input_size: int) -> None:
        self.input_size = input_size
        self.output_size = 0


@dataclass(frozen=True)
class WMIPlan:
    """What a run will do: ``exact`` when every weight is piecewise polynomial (the result is
    then exact if it finishes in time; otherwise a certified interval), the number of queries
    (prior terms after merging) and of top-level roots. ``method`` is ``enumeration``, or
    ``branching`` when the prior's discrete values are too many to enumerate and a network is
    audited by box branching (:mod:`verifier.wmi.branching`; no queries, never exact)."""

    kind: str
    exact: bool
    queries: int
    roots: int
    method: str = "enumeration"


def check_wmi_property(kind: str, model: Any, prior: Prior, *, feature: int | None = None,
                       decreasing: bool = False, use_prior: bool = False,
                       features: list[int] | None = None, noise: Distribution | None = None,
                       center: Any = None, epsilon: float | np.ndarray | None = None,
                       expected_class: int | None = None, surrogate: Any = None) -> WMIPlan:
    """The :class:`WMIPlan` of property ``kind`` (one of :data:`WMI_KINDS`) with the
    arguments its function takes; raises :class:`WMIInputError` if it cannot run. ``model``
    ``None`` checks the population side only (module docstring)."""
    try:
        return _plan(kind, model, prior, feature=feature, decreasing=decreasing,
                     use_prior=use_prior, features=features, noise=noise, center=center,
                     epsilon=epsilon, expected_class=expected_class, surrogate=surrogate)
    except NotEnumerable:
        models = [m for m in (model, surrogate) if m is not None]
        if not branched.branchable(*models):
            raise
        dimension = len(prior.support()[0])
        if kind == "monotonicity" and feature is not None:
            branched.monotonicity_arguments(prior, feature, dimension)
        if kind == "noise_robustness" and noise is not None:
            branched.noise_arguments(prior, noise, list(features or []), dimension)
        return WMIPlan(kind, False, 0, 0, "branching")


def _plan(kind: str, model: Any, prior: Prior, *, feature: int | None, decreasing: bool,
          use_prior: bool, features: list[int] | None, noise: Distribution | None,
          center: Any, epsilon: float | np.ndarray | None, expected_class: int | None,
          surrogate: Any
          ) -> WMIPlan:
    queries: list[Query]
    limit = root_limit(*(m for m in (model, surrogate) if m is not None))
    if model is None:
        model = InputsOnly(prior.dimension)
        if expected_class is None:
            expected_class = 0  # the centre's class needs the model; it changes nothing checked
    if kind == "monotonicity":
        if feature is None:
            raise WMIInputError("monotonicity needs a feature")
        queries = monotonicity_queries(model, prior, feature, decreasing=decreasing,
                                       use_prior=use_prior, max_roots=limit)
    elif kind == "noise_robustness":
        queries = noise_robustness_queries(model, prior, noise, list(features or []),
                                           max_roots=limit)
    elif kind == "local_robustness":
        if center is None or epsilon is None:
            raise WMIInputError("local robustness needs a center and an epsilon")
        queries, _ = local_robustness_queries(model, prior, center, epsilon, expected_class,
                                              max_roots=limit)
    elif kind == "equivalence":
        if surrogate is None:
            raise WMIInputError("equivalence needs a surrogate model")
        queries = equivalence_queries(model, surrogate, prior, center, epsilon, max_roots=limit)
    else:
        raise WMIInputError(f"unknown WMI property {kind!r}; expected one of "
                            f"{', '.join(WMI_KINDS)}")
    if not queries:
        raise WMIInputError(f"{kind}: the precondition has probability zero under the prior")
    exact = all(not q.envelopes and q.lost == 0 for q in queries)
    return WMIPlan(kind, exact, len(queries), sum(len(q.roots) for q in queries))
