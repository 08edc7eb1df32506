"""A small PV engine on a fitted three-column population (sex, hours, age) and a random ReLU
network, for tests of where and how PV runs (executors, shared values, lost schedulers)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from strategies import random_network

from verifier.audits.probability import spec_network
from verifier.network import Network
from verifier.population.fitting import fit_product, infer_features
from verifier.pv import PVSettings, population_domain
from verifier.pv.engine import ProbabilityBranchAndBound
from verifier.spec import Names, demographic_parity


def small_engine(settings: PVSettings | None = None, network_seed: int = 5
                 ) -> ProbabilityBranchAndBound:
    """Demographic parity (γ 0.8, sex 1 privileged, class 1 favourable) of a 3-8-2 network
    drawn with ``network_seed``, over a product population fitted to 400 seeded rows."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"sex": rng.integers(0, 2, 400), "hours": rng.integers(0, 100, 400),
                          "age": rng.integers(18, 90, 400)})
    population = fit_product(frame, infer_features(
        frame, domains={"hours": (0, 99), "age": (18, 89)}))
    network = Network(random_network(np.random.default_rng(network_seed), [3, 8, 2]).layers,
                      ["sex", "hours", "age"], ["no", "yes"])
    names = Names.of(["sex", "hours", "age"], ["no", "yes"])
    spec = demographic_parity(names, protected="sex", privileged=1, favorable_class=1,
                              gamma=0.8)
    masses, domain = population_domain(population)
    return ProbabilityBranchAndBound(spec_network(network, spec), spec, masses, domain,
                                     settings or PVSettings(), population.prob_excess_lower)
