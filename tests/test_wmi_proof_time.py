"""A float enumeration whose result box branching must prove leaves the proof time: it gets
half the budget (:func:`verifier.wmi.properties.run.decide`), and one stopped there before it
integrated anything is replaced by box branching's result.

Before, a population whose roots fit under the root limit but take minutes to enumerate (a
default fit's histograms beside a few discrete columns) spent the whole budget enumerating
and certified ``[0, 1]``: "box branching did not run: the enumeration used the whole time
budget". Oracle: dense Monte Carlo (400 000 draws, ± 4 standard errors) of the noise
robustness ``P(c(x) = c(x + n))``."""

from __future__ import annotations

import math

import numpy as np

from tests.test_wmi_root_limit import histograms, network
from verifier.population import Factor, Feature, PopulationModel, Product, Uniform
from verifier.wmi import noise_robustness

SAMPLES = 400_000
BUDGET_S = 10.0


def uniform_noise() -> PopulationModel:
    return PopulationModel(
        features=[Feature(name="n", kind="continuous", domain=(-1.0, 1.0))],
        distribution=Product(factors=[Factor(columns=["n"],
                                             distribution=Uniform(lower=-1.0, upper=1.0))]))


def test_a_slow_enumeration_leaves_box_branching_time_to_prove() -> None:
    net, prior = network(), histograms(10)
    result = noise_robustness(net, prior, uniform_noise(), [0], stop_at=0.5,
                              timeout_s=BUDGET_S, prove=True)
    proven = result if result.proven else result.proof
    assert proven is not None, result.extra
    assert "proof_skipped" not in result.extra
    assert proven.probability_lower > 0.0

    rng = np.random.default_rng(7)
    x = prior.sample(SAMPLES, rng)
    moved = x.copy()
    moved[:, 0] += rng.uniform(-1.0, 1.0, SAMPLES)
    same = net.classify(x) == net.classify(moved)
    estimate = float(same.mean())
    error = math.sqrt(max(estimate * (1 - estimate), 1 / SAMPLES) / SAMPLES)
    assert proven.probability_lower - 4 * error <= estimate <= proven.probability_upper + 4 * error
