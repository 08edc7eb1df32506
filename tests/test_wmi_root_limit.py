"""A prior whose histogram pieces would make exact WMI list more than
:data:`verifier.wmi.terms.MAX_ROOTS` root regions sends a network's monotonicity and noise
audits to box branching (the income demo's default fit is such a prior); a small one stays
exact. Oracle: Monte Carlo (400 000 samples) inside each certified interval ± 4σ."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from verifier.network import Layer, Network
from verifier.population import Factor, Feature, Mixture, PopulationModel, Product, Uniform
from verifier.wmi import monotonicity, noise_robustness
from verifier.wmi.noise import uniform_noise
from verifier.wmi.properties import monotonicity_queries
from verifier.wmi.terms import MAX_ROOTS, TooManyRoots

SAMPLES = 400_000


def histograms(bins: int) -> PopulationModel:
    """Three continuous columns on [0, 16], each an independent histogram of ``bins`` bins
    with uneven masses."""
    edges = np.linspace(0.0, 16.0, bins + 1)
    masses = np.arange(1, bins + 1, dtype=np.float64)
    masses /= masses.sum()
    names = ["a", "b", "c"]

    def histogram() -> Mixture:
        return Mixture(weights=masses.tolist(), components=[
            Uniform(lower=float(lo), upper=float(hi)) for lo, hi in itertools.pairwise(edges)])

    return PopulationModel(
        features=[Feature(name=name, kind="continuous", domain=(0.0, 16.0)) for name in names],
        distribution=Product(factors=[Factor(columns=[name], distribution=histogram())
                                      for name in names]))


def network() -> Network:
    rng = np.random.default_rng(5)
    first = rng.normal(size=(6, 3)) / 4
    return Network([Layer(first, -first @ np.full(3, 8.0) + rng.normal(size=6) / 4, "relu"),
                    Layer(rng.normal(size=(2, 6)), np.zeros(2))], input_names=["a", "b", "c"])


def inside(result: object, hits: np.ndarray) -> None:
    estimate = float(hits.mean())
    error = math.sqrt(max(estimate * (1 - estimate), 1 / hits.size) / hits.size)
    assert result.probability_lower - 4 * error <= estimate  # type: ignore[attr-defined]
    assert estimate <= result.probability_upper + 4 * error  # type: ignore[attr-defined]


def test_too_many_roots_is_refused_to_exact_wmi() -> None:
    with pytest.raises(TooManyRoots, match=f"more than {MAX_ROOTS} root regions"):
        monotonicity_queries(network(), histograms(24), 0, use_prior=True,
                             max_roots=MAX_ROOTS)


@pytest.mark.parametrize("bins", [24, 2])
def test_histogram_priors_branch_only_beyond_the_root_limit(bins: int) -> None:
    net, prior = network(), histograms(bins)
    branched = bins == 24  # 24³ roots (×24 for the copy) against 2³
    rng = np.random.default_rng(2)
    x = prior.sample(SAMPLES, rng)

    result = monotonicity(net, prior, 0, use_prior=True, timeout_s=20, tolerance=1e-3)
    assert (result.extra.get("method") == "box branching (PV)") == branched
    other = prior.sample(SAMPLES, rng)[:, 0]
    ordered = x[:, 0] < other
    moved = x[ordered].copy()
    moved[:, 0] = other[ordered]
    inside(result, ~((net.classify(x[ordered]) == 1) & (net.classify(moved) != 1)))

    result = noise_robustness(net, prior, uniform_noise(0.0, 2.0), [1], timeout_s=20,
                              tolerance=1e-3)
    assert (result.extra.get("method") == "box branching (PV)") == branched
    shifted = x.copy()
    shifted[:, 1] += rng.uniform(0.0, 2.0, size=SAMPLES)
    inside(result, net.classify(x) == net.classify(shifted))
