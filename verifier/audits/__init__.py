"""Audit kinds: a network, a population model and settings in, a certificate out.

One kind is one module — its pydantic settings (which ``configs.schema`` lists in its
discriminated union and the command line builds from its options), its runner
``run(settings, network, population, budget, progress) -> Certificate`` and its verdict
rule:

* :mod:`~verifier.audits.demographic_parity` (PV),
* :mod:`~verifier.audits.causal_fairness` (input partitioning),
* :mod:`~verifier.audits.monotonicity`, :mod:`~verifier.audits.noise_robustness`,
  :mod:`~verifier.audits.local_robustness` (exact WMI; shared rule in
  :mod:`~verifier.audits.exact_probability`).

:func:`run_audit` dispatches on ``settings.kind``; the command line, ``certgate run`` and the
Python API all call it, so two front doors cannot disagree. The population model must already
be bound to the network's inputs by name (:mod:`verifier.audits.binding`).
"""

from __future__ import annotations

from typing import Any

from verifier.audits import (
    causal_fairness,
    demographic_parity,
    local_robustness,
    monotonicity,
    noise_robustness,
)
from verifier.audits.causal_fairness import CausalFairnessSettings
from verifier.audits.demographic_parity import DemographicParitySettings, demographic_parity_audit
from verifier.audits.local_robustness import LocalRobustnessSettings
from verifier.audits.monotonicity import MonotonicitySettings
from verifier.audits.noise_robustness import NoiseRobustnessSettings
from verifier.audits.population_fit import check_population_fits, population_columns
from verifier.audits.probability import probability_audit, run_specification
from verifier.audits.requirement import Requirement, judged_verdict
from verifier.certificate import Certificate
from verifier.errors import CertgateInputError

KINDS = {module.KIND: module for module in (
    demographic_parity, causal_fairness, monotonicity, noise_robustness, local_robustness)}
"""The module of every audit kind, by ``kind``."""

SETTINGS_TYPES: tuple[type, ...] = (
    DemographicParitySettings,
    CausalFairnessSettings,
    MonotonicitySettings,
    NoiseRobustnessSettings,
    LocalRobustnessSettings,
)
"""The settings model of every audit kind, in the order the configuration schema lists them."""


def check_audit(settings: Any, network: Any, population: Any) -> None:
    """Raise the input error ``run_audit`` would meet, without running the audit, for the kinds
    that can tell in advance (the weighted-model-integration kinds); errors name the audit."""
    check = getattr(KINDS[settings.kind], "check", None)
    if check is None:
        return
    try:
        check(settings, network, population)
    except CertgateInputError as error:
        raise type(error)(f"audit {settings.name!r}: {error}") from error


def run_audit(settings: Any, network: Any, population: Any, budget: float | None = None,
              progress: Any = None, **engine: Any) -> Certificate:
    """Run the audit ``settings`` describe (picklable: an executor may run it in another
    process). ``budget`` (seconds) tightens the settings' own time limit; ``engine`` passes
    engine-only options (PV tuning, an executor, a bound method) to the kind's runner. Input
    errors name the audit first (``audit 'name': …``, same error class)."""
    module = KINDS[settings.kind]
    try:
        return module.run(settings, network, population, budget, progress, **engine)
    except CertgateInputError as error:
        raise type(error)(f"audit {settings.name!r}: {error}") from error


__all__ = [
    "KINDS",
    "SETTINGS_TYPES",
    "CausalFairnessSettings",
    "DemographicParitySettings",
    "LocalRobustnessSettings",
    "MonotonicitySettings",
    "NoiseRobustnessSettings",
    "Requirement",
    "check_audit",
    "check_population_fits",
    "demographic_parity_audit",
    "judged_verdict",
    "population_columns",
    "probability_audit",
    "run_audit",
    "run_specification",
]
