"""Probabilistic local robustness (:func:`verifier.wmi.local_robustness`): settings, runner
and verdict (:mod:`verifier.audits.exact_probability`) in one place."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from verifier.audits.coded_values import code_interval, column_code, value_code
from verifier.audits.exact_probability import (  # the contract members all WMI kinds share
    PROGRESS as PROGRESS,
)
from verifier.audits.exact_probability import (
    ProbabilitySettings,
    model_inputs,
    model_on_codes,
    probability_certificate,
    wmi_stop_at,
)
from verifier.audits.exact_probability import engine_options as engine_options
from verifier.audits.exact_probability import work_done as work_done
from verifier.audits.requirement import NAME_PATTERN, check_class, effective_timeout
from verifier.certificate import Certificate
from verifier.errors import CertgateInputError

KIND = "local_robustness"
EMPIRICAL_CHECK = (
    "local robustness is a statement about the region around one point, which data rows "
    "do not sample"
)


class LocalRobustnessSettings(ProbabilitySettings):
    """Probabilistic local robustness: ``P(class(x) = expected_class | ‖x − center‖∞ <=
    epsilon)`` under the population model (``center``: one value per network input, in input
    order; ``expected_class`` defaults to the class predicted at ``center``). Passes when
    ``P >= min_probability`` is proven. The old key ``label`` is refused, naming
    ``expected_class``.
    """

    RENAMED: ClassVar[Mapping[str, str]] = {"label": "expected_class"}

    kind: Literal["local_robustness"]
    name: str = Field(default="local_robustness", pattern=NAME_PATTERN)
    center: list[float] = Field(min_length=1)
    epsilon: float = Field(gt=0)
    expected_class: int | None = Field(default=None, ge=0)


SETTINGS = LocalRobustnessSettings


def check(settings: LocalRobustnessSettings, model: Any, population: Any) -> None:
    """Raise a one-line input error now if weighted model integration cannot run this audit
    on this model and population."""
    from verifier.wmi.check import check_wmi_property

    names = model_inputs(model, population, None)
    model = model_on_codes(model, population)
    center, radius = ball_in_codes(settings.center, settings.epsilon, names, population,
                                   class_at_center=settings.expected_class is None)
    check_wmi_property(KIND, model, population, center=center, epsilon=radius,
                       expected_class=settings.expected_class)


def ball_in_codes(center: Sequence[float], epsilon: float, names: Sequence[str],
                  population: Any, *, class_at_center: bool
                  ) -> tuple[list[float], float | np.ndarray]:
    """The box ``‖x − center‖∞ <= ε`` (in the data's units) as the centre and half-widths
    the engine reads, in the population's codes: ``(center, epsilon)`` unchanged without a
    coded column; else a coded column's codes ``[k_low, k_high]`` whose values lie within ε
    of its centre value (:func:`~verifier.audits.coded_values.code_interval`, in rationals)
    as centre ``(k_low + k_high)/2`` and half-width ``(k_high − k_low)/2 + 1/2``, a box that
    holds exactly those codes (every other column keeps its centre and ε). With
    ``class_at_center`` (no ``expected_class``: the class at the centre is the expected one)
    a coded column's centre value must lie on its grid
    (:func:`~verifier.audits.coded_values.value_code`), and the box is then symmetric about
    its code, so the engine reads the class at the centre itself. (The equivalence verb's
    ``--center`` is read here too, with ``class_at_center`` false.)"""
    if len(center) != len(names):
        raise CertgateInputError(
            f"center has {len(center)} values, the network {len(names)} "
            f"inputs ({', '.join(names)})"
        )
    coded = [j for j, name in enumerate(names) if column_code(population, name)]
    if not coded:
        return list(center), epsilon
    middle = np.array(center, dtype=np.float64)
    radius = np.full(len(names), float(epsilon))
    reach = Fraction(epsilon)
    for j in coded:
        value = Fraction(center[j])
        if class_at_center:
            value_code(population, names[j], center[j],
                       "center (the expected class is the class there)")
        low, high = code_interval(population, names[j], value - reach, value + reach,
                                  f"center ± epsilon ({epsilon:g})")
        middle[j], radius[j] = (low + high) / 2, (high - low) / 2 + 0.5
    return middle.tolist(), radius


def run(settings: LocalRobustnessSettings, model: Any, population: Any,
        budget: float | None = None, progress: Any = None, *,
        input_names: Sequence[str] | None = None, bound_method: str = "crown",
        executor: Any = None) -> Certificate:
    """Exact ``P(class(x) = expected_class | ‖x − center‖∞ <= ε)``, the box written in the
    population's codes by :func:`ball_in_codes`; ``input_names`` name the inputs of a model
    that is not an IR network; ``progress`` is not called. An ``expected_class`` the network
    does not have is an input error naming the field."""
    from verifier.wmi import local_robustness

    if settings.expected_class is not None:
        check_class("expected_class", settings.expected_class, model)
    names = model_inputs(model, population, None if input_names is None else list(input_names))
    model = model_on_codes(model, population)
    center, radius = ball_in_codes(settings.center, settings.epsilon, names, population,
                                   class_at_center=settings.expected_class is None)
    stop_at = wmi_stop_at(settings.min_probability)
    timeout_s = effective_timeout(settings.timeout_s, budget)
    result = local_robustness(model, population, center, radius,
                              settings.expected_class, stop_at=stop_at, executor=executor,
                              bound_method=bound_method, timeout_s=timeout_s, prove=True)
    expression = (f"P(class(x) = {result.extra['expected_class']} | ‖x − center‖∞ <= "
                  f"{settings.epsilon:g})")
    return probability_certificate(settings.kind, settings.requirement, result, expression,
                                   stop_at, budget, bound_method, timeout_s)
