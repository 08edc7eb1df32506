"""A prior whose histogram pieces would make exact WMI list more than
:data:`verifier.wmi.terms.MAX_ROOTS` root regions sends a network's monotonicity, noise,
local-robustness and equivalence audits to box branching (the income demo's default fit is
such a prior; local robustness counts only the pieces meeting its ε-box); a small one stays
exact. Oracle: Monte Carlo (400 000 samples) inside each certified interval ± 4σ."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from verifier.network import Layer, Network
from verifier.population import Factor, Feature, Mixture, PopulationModel, Product, Uniform
from verifier.wmi import equivalence, local_robustness, monotonicity, noise_robustness
from verifier.wmi.noise import uniform_noise
from verifier.wmi.properties.local_robustness import local_robustness_queries
from verifier.wmi.properties.monotonicity import monotonicity_queries
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


def budget_for(branched: bool) -> float:
    """Box branching runs to its budget on these priors and the containment asserted holds
    at any budget: 5 s; exact WMI ends when it has summed every root: a 20-s backstop."""
    return 5.0 if branched else 20.0


@pytest.mark.parametrize("bins", [24, 2])
def test_histogram_priors_branch_only_beyond_the_root_limit(bins: int) -> None:
    net, prior = network(), histograms(bins)
    branched = bins == 24  # 24³ roots (×24 for the copy) against 2³
    budget = budget_for(branched)
    rng = np.random.default_rng(2)
    x = prior.sample(SAMPLES, rng)

    result = monotonicity(net, prior, 0, use_prior=True, timeout_s=budget, tolerance=1e-3)
    assert (result.extra.get("method") == "box branching (PV)") == branched
    other = prior.sample(SAMPLES, rng)[:, 0]
    ordered = x[:, 0] < other
    moved = x[ordered].copy()
    moved[:, 0] = other[ordered]
    inside(result, ~((net.classify(x[ordered]) == 1) & (net.classify(moved) != 1)))

    result = noise_robustness(net, prior, uniform_noise(0.0, 2.0), [1], timeout_s=budget,
                              tolerance=1e-3)
    assert (result.extra.get("method") == "box branching (PV)") == branched
    shifted = x.copy()
    shifted[:, 1] += rng.uniform(0.0, 2.0, size=SAMPLES)
    inside(result, net.classify(x) == net.classify(shifted))


def second_network() -> Network:
    rng = np.random.default_rng(6)
    first = rng.normal(size=(6, 3)) / 4
    return Network([Layer(first, -first @ np.full(3, 8.0) + rng.normal(size=6) / 4, "relu"),
                    Layer(rng.normal(size=(2, 6)), np.zeros(2))], input_names=["a", "b", "c"])


@pytest.mark.parametrize(("bins", "epsilon", "branched"),
                         [(24, 8.0, True), (24, 1.0, False), (2, 8.0, False)])
def test_local_robustness_branches_only_beyond_the_root_limit(bins: int, epsilon: float,
                                                              branched: bool) -> None:
    """The ε-box counts: 24³ pieces on the whole support (ε = 8 around the centre) go to box
    branching, the few that meet a box of radius 1 (4 bins a side) stay exact, as
    does a 2-bin prior. Oracle: Monte Carlo of the conditional probability in the box."""
    net, prior = network(), histograms(bins)
    centre = np.array([8.0, 8.0, 8.0])
    result = local_robustness(net, prior, centre, epsilon, timeout_s=budget_for(branched),
                              tolerance=1e-3)
    assert (result.extra.get("method") == "box branching (PV)") == branched
    x = prior.sample(SAMPLES, np.random.default_rng(3))
    x = x[np.all(np.abs(x - centre) <= epsilon, axis=1)]
    inside(result, net.classify(x) == result.extra["expected_class"])


@pytest.mark.parametrize("bins", [24, 2])
def test_equivalence_branches_only_beyond_the_root_limit(bins: int) -> None:
    """Two networks compared on the whole support: 24³ roots go to box branching, 2³ stay
    exact. Oracle: Monte Carlo of the agreement."""
    first, second, prior = network(), second_network(), histograms(bins)
    result = equivalence(first, second, prior, timeout_s=budget_for(bins == 24),
                         tolerance=1e-3)
    assert (result.extra.get("method") == "box branching (PV)") == (bins == 24)
    x = prior.sample(SAMPLES, np.random.default_rng(4))
    inside(result, first.classify(x) == second.classify(x))


def test_the_limit_counts_the_pieces_meeting_the_box() -> None:
    """Local robustness refuses exact WMI on the whole support and accepts a box that meets
    4 bins a side (4³ = 64 roots)."""
    centre = np.array([8.0, 8.0, 8.0])
    with pytest.raises(TooManyRoots):
        local_robustness_queries(network(), histograms(24), centre, 8.0, max_roots=MAX_ROOTS)
    queries, _ = local_robustness_queries(network(), histograms(24), centre, 1.0,
                                          max_roots=MAX_ROOTS)
    assert sum(len(query.roots) for query in queries) == 4 ** 3


@pytest.mark.parametrize("bins", [24, 2])
def test_the_preflight_plans_the_method_the_run_takes(bins: int) -> None:
    """`config check` and `certgate run`'s pre-flight (:func:`check_wmi_property`) plan what
    the run does: beyond the root limit a network's audit is box-branched, so the plan stops
    listing roots there too. It listed every root (24³ × 24 for monotonicity's copy) and
    planned an enumeration the run never does: on the income demo's default fit
    (`configs/income_wmi.yaml`) the pre-flight took 65 CPU s before audits of 0.5 s each."""
    from verifier.wmi.check import check_wmi_property

    net, prior = network(), histograms(bins)
    run = monotonicity(net, prior, 0, use_prior=True, timeout_s=budget_for(bins == 24),
                       tolerance=1e-3)
    ran_branching = run.extra.get("method") == "box branching (PV)"
    plan = check_wmi_property("monotonicity", net, prior, feature=0, use_prior=True)
    assert (plan.method == "branching") == ran_branching == (bins == 24)
    plan = check_wmi_property("noise_robustness", net, prior, features=[1],
                              noise=uniform_noise(0.0, 2.0))
    assert (plan.method == "branching") == (bins == 24)
