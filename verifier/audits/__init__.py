"""Audit kinds: a network, a population model and settings in, a certificate out.

One kind is one module that satisfies the contract :class:`~verifier.audits.kind.AuditKind`
— its pydantic settings (which ``configs.schema`` lists in its discriminated union and the
command line builds its options from), its runner, its verdict rule, its unit of progress,
its line of the report and its population-fidelity check:

* :mod:`~verifier.audits.demographic_parity` (PV),
* :mod:`~verifier.audits.causal_fairness` (input partitioning),
* :mod:`~verifier.audits.monotonicity`, :mod:`~verifier.audits.noise_robustness`,
  :mod:`~verifier.audits.local_robustness` (exact WMI; shared rule in
  :mod:`~verifier.audits.exact_probability`).

:data:`KIND_MODULES` is the one list of kinds; everything else is derived from it.
:func:`run_audit` dispatches on ``settings.kind``; the command line, ``certgate run``, the
Python API and the MLflow evaluator all call it, so two front doors cannot disagree. The
population model must already be bound to the network's inputs by name
(:mod:`verifier.audits.binding`).
"""

from __future__ import annotations

import time
from types import ModuleType
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
from verifier.audits.fidelity import (
    DataRows,
    FidelityOptions,
    NoData,
    population_assumptions,
    unchecked,
)
from verifier.audits.kind import AuditKind
from verifier.audits.local_robustness import LocalRobustnessSettings
from verifier.audits.monotonicity import MonotonicitySettings
from verifier.audits.noise_robustness import NoiseRobustnessSettings
from verifier.audits.population_fit import check_population_fits, population_columns
from verifier.audits.probability import probability_audit, run_specification
from verifier.audits.requirement import Requirement, judged_verdict
from verifier.certificate import Certificate
from verifier.errors import CertgateInputError

KIND_MODULES: tuple[ModuleType, ...] = (
    demographic_parity, causal_fairness, monotonicity, noise_robustness, local_robustness)
"""The registry: every audit kind's module, in the order the configuration schema lists
them. Adding a kind is adding its module here."""

KINDS: dict[str, ModuleType] = {module.KIND: module for module in KIND_MODULES}
"""The module of every audit kind, by ``kind``."""

SETTINGS_TYPES: tuple[type, ...] = tuple(module.SETTINGS for module in KIND_MODULES)
"""The settings model of every audit kind, in registry order."""


def kind_module(kind: str) -> AuditKind:
    """The module of audit kind ``kind``; raises :class:`CertgateInputError` naming the known
    kinds."""
    try:
        return KINDS[kind]  # type: ignore[return-value]
    except KeyError:
        raise CertgateInputError(
            f"unknown audit kind {kind!r}; known: {', '.join(sorted(KINDS))}") from None


def check_audit(settings: Any, network: Any, population: Any) -> None:
    """Raise the input error ``run_audit`` would meet that the kind can tell in advance,
    without running the audit (``network`` may be ``None``); errors name the audit."""
    try:
        kind_module(settings.kind).check(settings, network, population)
    except CertgateInputError as error:
        raise type(error)(f"audit {settings.name!r}: {error}") from error


def settings_in_full(settings: Any, population: Any) -> Any:
    """``settings`` with the inputs they name through the population model written as its
    columns, by the kind's optional ``in_full`` (a causal audit's categorical feature named
    alone, ``race``, is its one-hot columns); ``settings`` itself for the other kinds or
    without a population. Errors name the audit."""
    in_full = getattr(kind_module(settings.kind), "in_full", None)
    if in_full is None or population is None:
        return settings
    try:
        return in_full(settings, population)
    except CertgateInputError as error:
        raise type(error)(f"audit {settings.name!r}: {error}") from error


def run_audit(settings: Any, network: Any, population: Any, budget: float | None = None,
              progress: Any = None, **engine: Any) -> Certificate:
    """Run the audit ``settings`` describe (picklable: an executor may run it in another
    process). ``budget`` (seconds) tightens the settings' own time limit; ``engine`` passes
    engine-only options (PV tuning, an executor, a bound method) to the kind's runner. Input
    errors name the audit first (``audit 'name': …``, same error class). The network and
    population must be bound (:func:`verifier.audits.binding.bind`: population columns =
    network inputs, in order, and the network reading a coded column's integer codes); every
    door (``certgate.api``, the pipeline, the CLI) binds before calling this."""
    module = kind_module(settings.kind)
    try:
        return module.run(settings, network, population, budget, progress, **engine)
    except CertgateInputError as error:
        raise type(error)(f"audit {settings.name!r}: {error}") from error


def fidelity_check(settings: Any, certificate: Certificate, network: Any, population: Any,
                   data: DataRows | NoData, options: FidelityOptions | None = None
                   ) -> dict[str, Any]:
    """The population-fidelity record of ``certificate`` (:mod:`verifier.audits.fidelity`):
    the kind's ``EMPIRICAL_CHECK`` on the data rows, or an ``unchecked`` record saying why
    there is none. The network and population must be bound (population columns = network
    inputs, in order; the network reads the population's codes); the data rows are in the
    data's units and are turned into those codes here, exactly (a value off a coded column's
    grid is an input error naming the feature)."""
    options = options or FidelityOptions()
    assumptions = population_assumptions(population, settings.protected_feature())
    check = kind_module(settings.kind).EMPIRICAL_CHECK
    if isinstance(check, str):
        return unchecked(f"no check possible: {check}", assumptions,
                         data.source if isinstance(data, DataRows) else None)
    if isinstance(data, NoData):
        return unchecked(f"no check possible: {data.reason}", assumptions, data.source)
    uri = data.source.get("uri")
    where = "the data" if uri is None else f"the data ({uri})"
    data = DataRows(population.codes_of(data.rows, where), data.source)
    started = time.perf_counter()
    record = check(settings, certificate, network, population, data, options, assumptions)
    record["elapsed_s"] = time.perf_counter() - started
    return record


__all__ = [
    "KINDS",
    "KIND_MODULES",
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
    "fidelity_check",
    "judged_verdict",
    "kind_module",
    "population_columns",
    "probability_audit",
    "run_audit",
    "run_specification",
    "settings_in_full",
]
