"""Monotonicity by self-composition (:func:`verifier.wmi.monotonicity`): settings, runner and
verdict (:mod:`verifier.audits.exact_probability`) in one place."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from verifier.audits.exact_probability import (  # the contract members all WMI kinds share
    PROGRESS as PROGRESS,
)
from verifier.audits.exact_probability import (
    ProbabilitySettings,
    input_position,
    model_inputs,
    model_on_codes,
    probability_certificate,
    wmi_stop_at,
)
from verifier.audits.exact_probability import engine_options as engine_options
from verifier.audits.exact_probability import work_done as work_done
from verifier.audits.fidelity import monotonicity_check
from verifier.audits.requirement import NAME_PATTERN, check_class, effective_timeout
from verifier.certificate import Certificate

KIND = "monotonicity"
EMPIRICAL_CHECK = monotonicity_check


class MonotonicitySettings(ProbabilitySettings):
    """Monotonicity in the input ``feature`` by self-composition: the probability that
    ``class(x) = favorable_class`` implies ``class(x') = favorable_class`` for pairs that agree
    except on ``feature``, where ``x <= x'`` (``x >= x'`` when ``decreasing``; on a discrete
    feature strictly ``x < x'``, since a pair with equal values holds the implication
    trivially). Pairs are
    uniform on the population's support box, or weighted by the population density when
    ``use_prior``. Passes when ``P >= min_probability`` is proven (see
    :class:`~verifier.audits.exact_probability.ProbabilitySettings`). The old key
    ``positive_class`` is refused, naming ``favorable_class``.
    """

    RENAMED: ClassVar[Mapping[str, str]] = {"positive_class": "favorable_class"}

    kind: Literal["monotonicity"]
    name: str = Field(default="monotonicity", pattern=NAME_PATTERN)
    feature: str = Field(min_length=1)
    decreasing: bool = False
    favorable_class: int = Field(default=1, ge=0)
    use_prior: bool = False

    def referenced_inputs(self) -> tuple[str, ...]:
        """Input names this audit reads (checked against the model before anything runs)."""
        return (self.feature,)


SETTINGS = MonotonicitySettings


def check(settings: MonotonicitySettings, model: Any, population: Any) -> None:
    """Raise a one-line input error now if weighted model integration cannot run this audit
    on this model and population (a column it cannot handle, an unbounded support, a
    favourable class the network does not have)."""
    from verifier.wmi.check import check_wmi_property

    check_class("favorable_class", settings.favorable_class, model)
    names = model_inputs(model, population, None)
    model = model_on_codes(model, population)
    check_wmi_property(KIND, model, population,
                       feature=input_position(names, "feature", settings.feature),
                       decreasing=settings.decreasing, use_prior=settings.use_prior)


def run(settings: MonotonicitySettings, model: Any, population: Any,
        budget: float | None = None, progress: Any = None, *,
        input_names: Sequence[str] | None = None, output: int | None = None,
        bound_method: str = "crown", executor: Any = None) -> Certificate:
    """Exact monotonicity probability in ``settings.feature``. ``output`` asks the regressor
    form instead, ``P(f(x)[output] <= f(x′)[output])``; ``input_names`` name the inputs of a
    model that is not an IR network (a scikit-learn model); ``progress`` is not called. A
    favourable class the network does not have is an input error naming the field."""
    from verifier.wmi import monotonicity

    if output is None:
        check_class("favorable_class", settings.favorable_class, model)
    names = model_inputs(model, population, None if input_names is None else list(input_names))
    model = model_on_codes(model, population)
    feature = input_position(names, "feature", settings.feature)
    stop_at = wmi_stop_at(settings.min_probability)
    timeout_s = effective_timeout(settings.timeout_s, budget)
    result = monotonicity(model, population, feature, decreasing=settings.decreasing,
                          favorable_class=settings.favorable_class, output=output,
                          use_prior=settings.use_prior, stop_at=stop_at, executor=executor,
                          bound_method=bound_method, timeout_s=timeout_s, prove=True)
    order = ">=" if settings.decreasing else "<="
    pairs = "population-weighted" if settings.use_prior else "uniform on the support box"
    if output is None:
        c = settings.favorable_class
        event = f"P(class(x) = {c} ⇒ class(x′) = {c})"
    else:
        event = f"P(f(x)[{output}] <= f(x′)[{output}])"
    expression = (f"{event}, x′ = x except x.{settings.feature} {order} x′.{settings.feature}, "
                  f"pairs {pairs}")
    return probability_certificate(settings.kind, settings.requirement, result, expression,
                                   stop_at, budget, bound_method, timeout_s)
