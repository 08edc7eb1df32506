"""Equivalence (paper 002, Eq. 6): ``P(c₁(x) = c₂(x))`` under the prior, globally or in the
ε-box around a centre, by region enumeration or, for two networks on a prior the enumeration
cannot list, by box branching (:func:`verifier.wmi.branched.equivalence`).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Executor
from functools import partial
from typing import Any

import numpy as np

from verifier.network import Network
from verifier.wmi import branched
from verifier.wmi.encode import Disagreement, WMIInputError
from verifier.wmi.engine import DEFAULT_TOLERANCE, Query, WMIResult
from verifier.wmi.measures import JointMeasure
from verifier.wmi.properties.models import as_model, input_size, read_columns
from verifier.wmi.properties.queries import prior_termset
from verifier.wmi.properties.run import decide, run_options
from verifier.wmi.properties.single_copy import centred_box, single_copy_queries
from verifier.wmi.terms import Prior


def equivalence_queries(model: Any, surrogate: Any, prior: Prior, center: Any = None,
                        epsilon: float | np.ndarray | None = None, bound_method: str = "crown", *,
                        deadline: float = math.inf, max_roots: int | None = None,
                        finite_sum: bool = False) -> list[Query]:
    """The queries of :func:`equivalence`; :class:`~verifier.wmi.terms.TooManyRoots` when the
    prior's pieces (meeting the ε-box, if any) make more than ``max_roots`` roots;
    :class:`~verifier.wmi.terms.AllDiscrete` as
    :func:`~verifier.wmi.properties.queries.points_only` says."""
    first, second = as_model(model, bound_method), as_model(surrogate, bound_method)
    dimension = input_size(first, second)
    box_lo, box_hi = centred_box(dimension, center, epsilon)
    termset = prior_termset(prior, dimension, read_columns(first) | read_columns(second),
                            (box_lo, box_hi))
    return single_copy_queries([first, second], termset, termset.dimension, box_lo, box_hi,
                               Disagreement(), deadline=deadline, max_roots=max_roots,
                               finite_sum=finite_sum)


def equivalence(model: Any, surrogate: Any, prior: Prior, center: Any = None,
                epsilon: float | np.ndarray | None = None, *, stop_at: float | None = None,
                executor: Executor | None = None, bound_method: str = "crown",
                timeout_s: float | None = None, tolerance: float = DEFAULT_TOLERANCE,
                prove: bool = False) -> WMIResult:
    """``P(c₁(x) = c₂(x))`` under ``prior``, globally or in the ε-box around ``center``
    (Eq. 6). ``prove``: a float-computed result gets box branching's proven result as its
    ``proof`` in the time left (:func:`verifier.wmi.properties.run.decide`). A surrogate that
    is the model's classifier (:func:`same_classifier`) agrees with probability 1, proven,
    without enumeration (:func:`_agreement_everywhere`)."""
    engine = run_options(stop_at, executor, bound_method, timeout_s, tolerance)
    if same_classifier(model, surrogate):
        agreed = _agreement_everywhere(model, surrogate, prior, center, epsilon)
        if agreed is not None:
            return agreed
    return decide((model, surrogate), engine,
                  partial(equivalence_queries, model, surrogate, prior, center, epsilon,
                          bound_method),
                  partial(_branched, model, surrogate, prior, center, epsilon, engine),
                  prove=prove)


def same_classifier(model: Any, surrogate: Any) -> bool:
    """True when both are networks whose classifier views have the same layers, value for
    value: they compute the same logits at every input in real arithmetic, so the same class
    (ties included). A folded network (:attr:`~verifier.network.Network.folded`, e.g. a
    BatchNorm merged into a Linear) stands for a computation its floats only approximate,
    which another network with the same floats need not share, so it is never the same.
    False says nothing: other networks may compute the same function."""
    if not (isinstance(model, Network) and isinstance(surrogate, Network)):
        return False
    first, second = model.as_classifier(), surrogate.as_classifier()
    return not first.folded and not second.folded and len(first.layers) == len(
        second.layers) and all(
        a.activation == b.activation and np.array_equal(a.weight, b.weight)
        and np.array_equal(a.bias, b.bias)
        and np.array_equal(np.asarray(a.negative_slope), np.asarray(b.negative_slope))
        and (a.min_val, a.max_val) == (b.min_val, b.max_val)
        for a, b in zip(first.layers, second.layers, strict=True))


def _agreement_everywhere(model: Network, surrogate: Network, prior: Prior, center: Any,
                          epsilon: float | np.ndarray | None) -> WMIResult | None:
    """Probability 1, proven, for two networks of the same classifier (:func:`same_classifier`):
    no input is a disagreement. ``None`` when the ε-box's mass under the prior is not proven
    positive (the probability is then conditioned on an event that may have mass 0; the
    general path decides or refuses it).

    Raises:
        WMIInputError: the prior's width is not the networks', or the box has no mass.
    """
    started = time.perf_counter()
    dimension = branched.sized(prior, model, surrogate)
    lower, upper = centred_box(dimension, center, epsilon)
    low, high = JointMeasure([prior], lower, upper).restricted_mass()
    if not high > 0:
        raise WMIInputError("the precondition has probability zero under the prior")
    if not low > 0:
        return None
    return WMIResult(probability=1.0, violation_probability=0.0, total_mass=low,
                     violation_mass=0.0, regions=0, integrals=0, lps=0,
                     elapsed_s=time.perf_counter() - started, probability_lower=1.0,
                     probability_upper=1.0, exact=True, proven=True,
                     extra={"method": "the same classifier: the surrogate's layers are the "
                                      "model's, so they agree at every input"})


def _branched(model: Any, surrogate: Any, prior: Prior, center: Any,
              epsilon: float | np.ndarray | None, engine: branched.Engine) -> WMIResult:
    """:func:`equivalence` by box branching (two networks on a prior the region enumeration
    cannot list)."""
    lower, upper = centred_box(len(prior.support()[0]), center, epsilon)
    return branched.equivalence(model, surrogate, prior, lower, upper, engine=engine)
