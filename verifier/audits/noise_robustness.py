"""Robustness to additive noise (:func:`verifier.wmi.noise_robustness`): settings, runner and
verdict (:mod:`verifier.audits.exact_probability`) in one place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

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
from verifier.audits.fidelity import noise_check
from verifier.audits.requirement import NAME_PATTERN, effective_timeout
from verifier.certificate import Certificate

KIND = "noise_robustness"
EMPIRICAL_CHECK = noise_check


class NoiseRobustnessSettings(ProbabilitySettings):
    """Robustness to additive noise: ``P(class(x) = class(x + n))`` with ``x`` drawn from the
    population and ``n`` added to the one input in ``features``, uniform on
    ``noise_uniform: [low, high]`` or triangular with ``noise_triangular: [low, mode, high]``
    (exactly one of the two). Passes when ``P >= min_probability`` is proven.
    """

    kind: Literal["noise_robustness"]
    name: str = Field(default="noise_robustness", pattern=NAME_PATTERN)
    features: list[str] = Field(min_length=1)
    noise_uniform: tuple[float, float] | None = None
    noise_triangular: tuple[float, float, float] | None = None

    def referenced_inputs(self) -> tuple[str, ...]:
        """Input names this audit reads (checked against the model before anything runs)."""
        return tuple(self.features)

    @model_validator(mode="after")
    def _one_noise(self) -> NoiseRobustnessSettings:
        if (self.noise_uniform is None) == (self.noise_triangular is None):
            raise ValueError("give exactly one of noise_uniform: [low, high] and "
                             "noise_triangular: [low, mode, high]")
        if len(self.features) != 1:
            raise ValueError(f"noise_uniform/noise_triangular describe the noise on one "
                             f"feature, got features {self.features}")
        if self.noise_uniform is not None and not self.noise_uniform[0] < self.noise_uniform[1]:
            raise ValueError(f"noise_uniform needs low < high, got {list(self.noise_uniform)}")
        if self.noise_triangular is not None:
            low, mode, high = self.noise_triangular
            if not (low <= mode <= high and low < high):
                raise ValueError("noise_triangular needs low <= mode <= high and low < high, "
                                 f"got {list(self.noise_triangular)}")
        return self

    def noise(self) -> tuple[Any, str]:
        """The noise density and its description."""
        from verifier.wmi.noise import triangular_noise, uniform_noise

        if self.noise_uniform is not None:
            return uniform_noise(*self.noise_uniform), f"uniform{list(self.noise_uniform)}"
        assert self.noise_triangular is not None
        return (triangular_noise(*self.noise_triangular),
                f"triangular{list(self.noise_triangular)}")


SETTINGS = NoiseRobustnessSettings


def check(settings: NoiseRobustnessSettings, model: Any, population: Any) -> None:
    """Raise a one-line input error now if weighted model integration cannot run this audit
    on this model and population (a column it cannot handle, a missing noise density)."""
    from verifier.wmi.check import check_wmi_property

    names = model_inputs(model, population, None)
    model = model_on_codes(model, population)
    features = [input_position(names, "features", name) for name in settings.features]
    check_wmi_property(KIND, model, population, features=features,
                       noise=settings.noise()[0])


def run(settings: NoiseRobustnessSettings, model: Any, population: Any,
        budget: float | None = None, progress: Any = None, *,
        input_names: Sequence[str] | None = None, bound_method: str = "crown",
        executor: Any = None) -> Certificate:
    """Exact ``P(class(x) = class(x + n))``; ``input_names`` name the inputs of a model that is
    not an IR network; ``progress`` is not called."""
    from verifier.wmi import noise_robustness

    names = model_inputs(model, population, None if input_names is None else list(input_names))
    model = model_on_codes(model, population)
    features = [input_position(names, "features", name) for name in settings.features]
    noise, described = settings.noise()
    stop_at = wmi_stop_at(settings.min_probability)
    timeout_s = effective_timeout(settings.timeout_s, budget)
    result = noise_robustness(model, population, noise, features, stop_at=stop_at,
                              executor=executor, bound_method=bound_method,
                              timeout_s=timeout_s, prove=True)
    expression = (f"P(class(x) = class(x + n)), n ~ {described} on "
                  f"{', '.join(settings.features)}")
    return probability_certificate(settings.kind, settings.requirement, result, expression,
                                   stop_at, budget, bound_method, timeout_s)
