"""A toy audit kind, ``favorable_rate``: the certified probability that the network predicts
``favorable_class`` under the population model, which must be at least ``min_rate``.

It is a whole kind in one module — settings, runner (PV on a one-term specification), verdict
(PV's, on ``p >= min_rate``), unit of progress, line of the report and no empirical check —
and ``tests/test_audit_kinds.py`` copies it into a copy of the packages beside the registered
kinds, changes the registry and nothing else, and runs it through ``certgate run``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import Field

from verifier.audits.kind import counted, elapsed_text, stopped_text
from verifier.audits.population_fit import check_population_fits
from verifier.audits.probability import run_specification
from verifier.audits.requirement import (
    NAME_PATTERN,
    Requirement,
    StrictSettings,
    effective_timeout,
)
from verifier.certificate import Certificate
from verifier.errors import CertgateInputError
from verifier.spec import ProbabilityTerm, Ref, Specification, class_event

KIND = "favorable_rate"
PROGRESS = "boxes"
EMPIRICAL_CHECK = "the toy kind computes no empirical counterpart"


class FavorableRateSettings(StrictSettings):
    """``P[class = favorable_class] >= min_rate``, certified by PV."""

    kind: Literal["favorable_rate"]
    name: str = Field(default="favorable_rate", pattern=NAME_PATTERN)
    favorable_class: int = Field(ge=0)
    min_rate: float = Field(ge=0.0, le=1.0)
    timeout_s: float | None = Field(default=60.0, gt=0)
    precision: float | None = Field(default=None, gt=0)

    def referenced_inputs(self) -> tuple[str, ...]:
        """Input names this audit reads: none."""
        return ()

    @property
    def requirement(self) -> Requirement:
        return Requirement(quantity="value", label="rate", comparison=">=",
                           threshold=self.min_rate)


SETTINGS = FavorableRateSettings


def engine_options(executor: str, workers: int | None) -> None:
    """Whole toy audits run on the configured executor."""
    return None


def check(settings: FavorableRateSettings, network: Any, population: Any) -> None:
    """The favourable class must be a class of the network (when the network is at hand)."""
    if network is None:
        return
    classes = network.as_classifier().output_size
    if settings.favorable_class >= classes:
        raise CertgateInputError(
            f"favorable_class {settings.favorable_class} is not a class of a network with "
            f"{classes} classes")


def work_done(certificate: Certificate) -> str:
    """PV's boxes bounded."""
    if "boxes" not in certificate.cost:
        return ""
    return (f"{counted(certificate.cost['boxes'], 'box')} bounded "
            f"({elapsed_text(certificate)}){stopped_text(certificate)}")


def run(settings: FavorableRateSettings, network: Any, population: Any,
        budget: float | None = None, progress: Any = None, **engine: Any) -> Certificate:
    """PV's certificate of ``P[class = favorable_class] >= min_rate``."""
    from verifier.pv import PVSettings

    network = network.as_classifier()
    check(settings, network, population)
    names = check_population_fits(network, population)
    event = f"class == {settings.favorable_class}"
    spec = Specification(
        {"p": ProbabilityTerm(class_event(settings.favorable_class, names), None, event, "")},
        Ref("p"), "p", ">=", settings.min_rate, name=KIND)
    pv = replace(engine.get("engine") or PVSettings(),
                 timeout_s=effective_timeout(settings.timeout_s, budget),
                 precision=settings.precision)
    return run_specification(network, population, spec, pv, progress)
