"""The WMI properties by branching (:mod:`verifier.wmi.branching`), for priors whose discrete
value combinations exact WMI cannot enumerate (:class:`verifier.wmi.terms.TooManyTerms`).

Each function states the same probability as its namesake in :mod:`verifier.wmi.properties`'s
modules (the same pairs, precondition and class rule) and returns a certified interval
(:class:`~verifier.wmi.engine.WMIResult` with ``exact`` false). Only networks are branched:
PV bounds networks, not scikit-learn trees, which keep the refusal.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from verifier.network import Network
from verifier.population.base import Distribution
from verifier.spec import And, Not
from verifier.wmi.arguments import (
    check_feature,
    check_noise_features,
    check_noise_kind,
    check_noise_width,
    check_ordered_feature,
)
from verifier.wmi.branching import Copies, branch, input_atom, timed_out_before_branching
from verifier.wmi.encode import WMIInputError
from verifier.wmi.engine import WMIResult
from verifier.wmi.measures import (
    ColumnMarginal,
    JointMeasure,
    SupportUniform,
    strict_order_probability,
)
from verifier.wmi.monotone_slopes import MonotoneBoxes, margin_rows
from verifier.wmi.roots import DeadlineReached

Engine = dict[str, Any]  # stop_at, deadline, tolerance, executor, bound_method


def branchable(*models: Any) -> bool:
    """Whether every model is a network (PV bounds networks only)."""
    return all(isinstance(model, Network) for model in models)


def _names(prior: Any, dimension: int) -> list[str]:
    names = getattr(prior, "columns", None) or (prior.column_names()
                                                 if hasattr(prior, "column_names") else None)
    return list(names) if names else [f"column {j}" for j in range(dimension)]


def sized(prior: Any, *models: Network) -> int:
    dimension = len(prior.support()[0])
    sizes = [model.input_size for model in models]
    if set(sizes) != {dimension}:
        which = ("the model" if len(models) == 1
                 else "the models (in the order given)")
        raise WMIInputError(f"the prior has {dimension} columns, {which} "
                            f"{', '.join(map(str, sizes))} inputs")
    return dimension


def _selection(rows: int, width: int) -> np.ndarray:
    """``x = z[:rows]``: the identity on the first ``rows`` coordinates of ``z``."""
    return np.eye(rows, width)


def monotonicity_arguments(prior: Any, feature: int, dimension: int) -> list[str]:
    """The prior's column names, once ``feature`` is checked: a column of the prior, not
    one of a one-hot group (:class:`WMIInputError` otherwise)."""
    check_feature(feature, dimension)
    names = _names(prior, dimension)
    check_ordered_feature(feature, prior.onehot_groups(), names[feature])
    return names


def noise_arguments(prior: Any, noise: Distribution, features: list[int],
                    dimension: int) -> list[str]:
    """The prior's column names, once the noise is checked: one noise column per feature, and
    continuous noise only on continuous columns (:class:`WMIInputError` otherwise)."""
    check_noise_features(features, dimension)
    check_noise_width(noise.dimension, features)
    names = _names(prior, dimension)
    integer, noise_integer = prior.integer_columns(), noise.integer_columns()
    for position, f in enumerate(features):
        check_noise_kind(names[f], bool(integer[f]), bool(noise_integer[position]))
    return names


def monotonicity(model: Network, prior: Any, feature: int, *, decreasing: bool,
                 favorable_class: int, output: int | None, use_prior: bool,
                 engine: Engine) -> WMIResult:
    """Monotonicity in ``feature`` (:func:`verifier.wmi.monotonicity`): ``x`` from
    the prior (or the uniform prior on the support box), ``x′_i`` an independent draw of the
    same measure's marginal of the feature, pairs with ``x_i < x′_i`` (``>`` when
    ``decreasing``; equal values cannot violate and leave the precondition). A deadline
    that passes while the uniform measure lists the values of positive probability ends the
    run there, timed out with ``[0, 1]``."""
    started = time.perf_counter()
    dimension = sized(prior, model)
    names = monotonicity_arguments(prior, feature, dimension)
    try:
        base = prior if use_prior else SupportUniform(prior, names, engine["deadline"])
    except DeadlineReached:
        return timed_out_before_branching(started)
    measure = JointMeasure([base, ColumnMarginal(base, feature)])
    width = dimension + 1
    first = _selection(dimension, width)
    second = first.copy()
    second[feature, feature], second[feature, dimension] = 0.0, 1.0
    copies = Copies([model, model], [first, second], [*names, f"{names[feature]}′"],
                    values=output is not None)
    outputs = int(copies.offsets[-1])
    view = copies.views[0]
    if output is None:
        violation = And((copies.is_class(0, favorable_class),
                         Not(copies.is_class(1, favorable_class))))
        rows = margin_rows(view.output_size, favorable_class)
    else:
        violation = copies.decrease(output)
        rows = np.eye(view.output_size)[[output]]
    sign = -1.0 if decreasing else 1.0
    ordered = input_atom({dimension: sign, feature: -sign}, 0.0, width, True, outputs)
    method = "ibp" if engine["bound_method"] == "none" else engine["bound_method"]
    refute = MonotoneBoxes(view, feature, rows, decreasing=decreasing,
                           groups=prior.onehot_groups(), method=method)
    return branch("monotonicity", copies, measure, And((violation, ordered)),
                  strict_order_probability(measure.parts[1], engine["deadline"]),
                  refute=refute, **engine)


def noise_robustness(model: Network, prior: Any, noise: Distribution, features: list[int],
                     *, engine: Engine) -> WMIResult:
    """``P(c(x) = c(x + n))`` (:func:`verifier.wmi.noise_robustness`): ``n`` is
    added to ``features``; continuous noise on a discrete column is refused."""
    dimension = sized(prior, model)
    names = noise_arguments(prior, noise, features, dimension)
    width = dimension + len(features)
    first = _selection(dimension, width)
    second = first.copy()
    for position, f in enumerate(features):
        second[f, dimension + position] = 1.0
    copies = Copies([model, model], [first, second],
                    [*names, *(f"noise.{names[f]}" for f in features)])
    return branch("noise_robustness", copies, JointMeasure([prior, noise]),
                  copies.disagree(0, 1), (1.0, 1.0), **engine)


def local_robustness(model: Network, prior: Any, lower: np.ndarray, upper: np.ndarray,
                     expected_class: int, *, engine: Engine) -> WMIResult:
    """``P(class(x) = expected_class | lower <= x <= upper)``
    (:func:`verifier.wmi.local_robustness`)."""
    dimension = sized(prior, model)
    copies = Copies([model], [np.eye(dimension)], _names(prior, dimension))
    measure = JointMeasure([prior], lower, upper)
    return branch("local_robustness", copies, measure, Not(copies.is_class(0, expected_class)),
                  measure.restricted_mass(), **engine)


def equivalence(model: Network, surrogate: Network, prior: Any, lower: np.ndarray,
                upper: np.ndarray, *, engine: Engine) -> WMIResult:
    """``P(c₁(x) = c₂(x))`` (:func:`verifier.wmi.equivalence`), in the box
    ``[lower, upper]`` (infinite ends: everywhere)."""
    dimension = sized(prior, model, surrogate)
    copies = Copies([model, surrogate], [np.eye(dimension)] * 2, _names(prior, dimension))
    measure = JointMeasure([prior], lower, upper)
    return branch("equivalence", copies, measure, copies.disagree(0, 1),
                  measure.restricted_mass(), **engine)
