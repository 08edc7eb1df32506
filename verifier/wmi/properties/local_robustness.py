"""Local robustness (paper 002, Eq. 5):
``P(class(x) = expected_class | ‖x − center‖∞ <= ε)`` under the prior, by region enumeration
or, for a network on a prior the enumeration cannot list, by box branching
(:func:`verifier.wmi.branched.local_robustness`).
"""

from __future__ import annotations

import math
from concurrent.futures import Executor
from functools import partial
from typing import Any

import numpy as np

from verifier.wmi import branched
from verifier.wmi.encode import OtherClass
from verifier.wmi.engine import DEFAULT_TOLERANCE, Query, WMIResult
from verifier.wmi.properties.models import as_model, checked_class, input_size, read_columns
from verifier.wmi.properties.queries import prior_termset
from verifier.wmi.properties.run import decide, run_options
from verifier.wmi.properties.single_copy import centred_box, single_copy_queries
from verifier.wmi.terms import Prior


def local_robustness_queries(model: Any, prior: Prior, center: Any, epsilon: float | np.ndarray,
                             expected_class: int | None = None, bound_method: str = "crown", *,
                             deadline: float = math.inf, max_roots: int | None = None,
                             finite_sum: bool = False) -> tuple[list[Query], int]:
    """The queries of :func:`local_robustness` and the expected class checked;
    :class:`~verifier.wmi.terms.TooManyRoots` when the prior's pieces meeting the ε-box make
    more than ``max_roots`` roots; :class:`~verifier.wmi.terms.AllDiscrete` as
    :func:`~verifier.wmi.properties.queries.points_only` says."""
    wrapped = as_model(model, bound_method)
    point = np.asarray(center, dtype=np.float64).reshape(-1)
    dimension = input_size(wrapped)
    box_lo, box_hi = centred_box(dimension, point, epsilon)
    termset = prior_termset(prior, dimension, read_columns(wrapped), (box_lo, box_hi))
    chosen = checked_class(wrapped, bound_method, point, expected_class)
    return single_copy_queries([wrapped], termset, point.size, box_lo, box_hi,
                               OtherClass(chosen), deadline=deadline,
                               max_roots=max_roots, finite_sum=finite_sum), chosen


def local_robustness(model: Any, prior: Prior, center: Any, epsilon: float | np.ndarray,
                     expected_class: int | None = None, *, stop_at: float | None = None,
                     executor: Executor | None = None, bound_method: str = "crown",
                     timeout_s: float | None = None, tolerance: float = DEFAULT_TOLERANCE,
                     prove: bool = False) -> WMIResult:
    """``P(class(x) = expected_class | ‖x − center‖∞ <= ε)`` under ``prior`` (Eq. 5);
    ``expected_class`` defaults to the model's prediction at the centre (reported as the
    result's ``extra["expected_class"]``). ``epsilon`` may give one half-width per column
    (``(d,)``, each > 0): the box ``center ± epsilon``. ``prove``: a float-computed result
    gets box branching's proven result as its ``proof`` in the time left
    (:func:`verifier.wmi.properties.run.decide`)."""
    engine = run_options(stop_at, executor, bound_method, timeout_s, tolerance)

    def queries(**limits: Any) -> list[Query]:
        found, _ = local_robustness_queries(model, prior, center, epsilon, expected_class,
                                            bound_method, **limits)
        return found

    result = decide((model,), engine, queries,
                    partial(_branched, model, prior, center, epsilon, expected_class, engine),
                    prove=prove)
    result.extra["expected_class"] = checked_class(model, bound_method, center, expected_class)
    return result


def _branched(model: Any, prior: Prior, center: Any, epsilon: float | np.ndarray,
              expected_class: int | None, engine: branched.Engine) -> WMIResult:
    """:func:`local_robustness` by box branching (a network on a prior the region
    enumeration cannot list)."""
    point = np.asarray(center, dtype=np.float64).reshape(-1)
    chosen = checked_class(model, engine["bound_method"], point, expected_class)
    lower, upper = centred_box(point.size, point, epsilon)
    return branched.local_robustness(model, prior, lower, upper, chosen, engine=engine)
