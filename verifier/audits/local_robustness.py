"""Probabilistic local robustness (:func:`verifier.wmi.local_robustness`): settings, runner
and verdict (:mod:`verifier.audits.exact_probability`) in one place."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from verifier.audits.exact_probability import (  # the contract members all WMI kinds share
    PROGRESS as PROGRESS,
)
from verifier.audits.exact_probability import (
    ProbabilitySettings,
    model_inputs,
    probability_certificate,
    wmi_stop_at,
)
from verifier.audits.exact_probability import engine_options as engine_options
from verifier.audits.exact_probability import work_done as work_done
from verifier.audits.population_fit import refuse_coded
from verifier.audits.requirement import NAME_PATTERN, effective_timeout
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

    refuse_coded(population, model_inputs(model, population, None), "center")
    check_wmi_property(KIND, model, population, center=settings.center,
                       epsilon=settings.epsilon, expected_class=settings.expected_class)


def run(settings: LocalRobustnessSettings, model: Any, population: Any,
        budget: float | None = None, progress: Any = None, *,
        input_names: Sequence[str] | None = None, bound_method: str = "crown",
        executor: Any = None) -> Certificate:
    """Exact ``P(class(x) = expected_class | ‖x − center‖∞ <= ε)``; ``input_names`` name the
    inputs of a model that is not an IR network; ``progress`` is not called."""
    from verifier.wmi import local_robustness

    names = model_inputs(model, population, None if input_names is None else list(input_names))
    refuse_coded(population, names, "center")
    if len(settings.center) != len(names):
        raise CertgateInputError(
            f"center has {len(settings.center)} values, the network {len(names)} "
            f"inputs ({', '.join(names)})"
        )
    stop_at = wmi_stop_at(settings.min_probability)
    timeout_s = effective_timeout(settings.timeout_s, budget)
    result = local_robustness(model, population, settings.center, settings.epsilon,
                              settings.expected_class, stop_at=stop_at, executor=executor,
                              bound_method=bound_method, timeout_s=timeout_s)
    expression = (f"P(class(x) = {result.extra['expected_class']} | ‖x − center‖∞ <= "
                  f"{settings.epsilon:g})")
    return probability_certificate(settings.kind, settings.requirement, result, expression,
                                   stop_at, budget, bound_method, timeout_s)
