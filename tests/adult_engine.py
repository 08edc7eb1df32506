"""Shared by the tests that need PV's engine on an Adult-k instance: the skip when the census
data is missing and the engine built the way the demographic-parity audit builds it."""

from __future__ import annotations

import pytest

from benchmarks.adult_instances import AdultDataError, AdultInstance, build_instance, census_path
from verifier.audits.probability import spec_network
from verifier.pv import PVSettings, population_domain
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
