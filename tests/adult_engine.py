"""Shared by the tests that need PV's engine on an Adult-k instance: the skip when the census
data is missing, the engine built the way the demographic-parity audit builds it, and the
audit's every report checked against exact enumeration."""

from __future__ import annotations

import itertools

import pytest

from benchmarks.adult_instances import (
    AdultDataError,
    AdultInstance,
    build_instance,
    census_path,
    exact_reference,
)
from verifier.audits import demographic_parity_audit
from verifier.audits.probability import spec_network
from verifier.pv import PVProgress, PVSettings, population_domain
from verifier.pv.engine import ProbabilityBranchAndBound
from verifier.spec import Names, demographic_parity


def _census_available() -> bool:
    try:
        census_path()
    except AdultDataError:
        return False
    return True


needs_census = pytest.mark.skipif(
    not _census_available(),
    reason="the Adult census data (../shared/benchmarks/libra/census) is not next to the checkout",
)


def parity_engine(k: int, hidden: tuple[int, ...], seed: int = 7
                  ) -> tuple[AdultInstance, ProbabilityBranchAndBound]:
    """The Adult-``k`` instance (one training epoch, no cache) and PV's engine for its
    demographic parity at γ = 0.8."""
    instance = build_instance(k, hidden, seed, epochs=1, cache_dir=None)
    names = Names.of(list(instance.columns), list(instance.network.output_names))
    spec = demographic_parity(names, protected=instance.protected,
                              privileged=instance.privileged,
                              favorable_class=instance.favorable_class, gamma=0.8)
    masses, domain = population_domain(instance.population)
    engine = ProbabilityBranchAndBound(
        spec_network(instance.network, spec), spec, masses, domain, PVSettings(),
        instance.population.prob_excess_lower)
    return instance, engine


def assert_reports_hold_the_exact_value(instance: AdultInstance, settings: PVSettings) -> None:
    """Runs the demographic-parity audit (γ = 0.8) on ``instance`` with ``settings`` and
    asserts that every interval PV reports, anytime and final, holds the exactly enumerated
    value (within the reference's float error), and that each report's intervals lie within
    the previous one's (the best ends seen are kept)."""
    reference = exact_reference(instance)
    truth = {"p_unprivileged": reference.p_unprivileged,
             "p_privileged": reference.p_privileged, "value": reference.ratio}
    seen: list[tuple[str, tuple[float, float]]] = []
    reports: list[dict[str, tuple[float, float]]] = []

    def record(progress: PVProgress) -> None:
        seen.extend(progress.probabilities.items())
        seen.append(("value", progress.value))
        reports.append({**progress.probabilities, "value": progress.value})

    certificate = demographic_parity_audit(
        instance.network, instance.population, protected=instance.protected,
        privileged=instance.privileged, favorable_class=instance.favorable_class, gamma=0.8,
        progress=record, settings=settings)
    seen.extend(certificate.bounds.items())
    for earlier, later in itertools.pairwise(reports):
        for name, (low, high) in later.items():
            assert earlier[name][0] <= low and high <= earlier[name][1], (name, earlier, later)
    error = reference.error * (1.0 + abs(reference.ratio)) / reference.p_privileged
    for name, (low, high) in seen:
        assert low - error <= truth[name] <= high + error, (name, low, high, truth[name])
