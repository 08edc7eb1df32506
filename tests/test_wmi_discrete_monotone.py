"""Monotonicity in a discrete (binary or integer) feature: pairs ``x``, ``x′`` agree except on
the feature, whose values are ordered strictly (``x_i < x′_i``), ``x′_i`` an independent draw
of the feature's marginal. Oracles: exact enumeration over the value pairs with Fraction
arithmetic (closed-form 1-D lengths), and 10⁶-sample Monte Carlo for random networks under
normal / truncated-normal and Bayesian-network priors."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tests.test_wmi_discrete import three_categories
from verifier.network import Layer, Network
from verifier.population import (
    Discrete,
    Factor,
    Feature,
    Normal,
    PopulationModel,
    Product,
    TruncatedNormal,
    Uniform,
)
from verifier.wmi import WMIInputError, check_wmi_property, monotonicity

VALUES = [0, 1, 2, 3]
PROBABILITIES = [Fraction(1, 10), Fraction(2, 10), Fraction(3, 10), Fraction(4, 10)]


def integer_and_uniform() -> PopulationModel:
    """k ∈ {0, 1, 2, 3} with probabilities 0.1 / 0.2 / 0.3 / 0.4, x ~ U[0, 1]."""
    return PopulationModel(
        features=[Feature(name="k", kind="integer"), Feature(name="x", kind="continuous")],
        distribution=Product(factors=[
            Factor(columns=["k"], distribution=Discrete(
                values=VALUES, probabilities=[float(p) for p in PROBABILITIES])),
            Factor(columns=["x"], distribution=Uniform(lower=0.0, upper=1.0))]))


# class 1 (single logit) iff x >= t(k) = 1/5 + 3/10 · |k − 3/2|: t = 13/20, 7/20, 7/20, 13/20
V_SHAPE = Network([
    Layer(np.array([[0.0, 1.0], [1.0, 0.0], [-1.0, 0.0]]), np.array([0.0, -1.5, 1.5]), "relu"),
    Layer(np.array([[1.0, -0.3, -0.3]]), np.array([-0.2]))])


def threshold(k: int) -> Fraction:
    return Fraction(1, 5) + Fraction(3, 10) * abs(Fraction(k) - Fraction(3, 2))


def enumerated(weights: list[Fraction], decreasing: bool) -> Fraction:
    """P(class(x) = 1 ⇒ class(x′) = 1 | k < k′) by enumeration: a pair (k, k′) with x ~ U[0, 1]
    loses the positive class on [t(k), t(k′)) when t(k) < t(k′)."""
    violating = total = Fraction(0)
    for k, p in zip(VALUES, weights, strict=True):
        for other, q in zip(VALUES, weights, strict=True):
            if (other < k) if decreasing else (other > k):
                total += p * q
                violating += p * q * max(Fraction(0), threshold(other) - threshold(k))
    return 1 - violating / total


@pytest.mark.parametrize("decreasing", [False, True])
@pytest.mark.parametrize("use_prior", [False, True])
def test_integer_feature_matches_enumeration(use_prior: bool, decreasing: bool) -> None:
    weights = PROBABILITIES if use_prior else [Fraction(1, 4)] * 4
    result = monotonicity(V_SHAPE, integer_and_uniform(), 0, use_prior=use_prior,
                          decreasing=decreasing)
    assert result.exact
    expected = enumerated(weights, decreasing)
    assert expected < 1
    assert result.probability == pytest.approx(float(expected), abs=1e-9)


def test_a_one_hot_column_and_a_single_value_are_refused() -> None:
    net = Network([Layer(np.array([[-0.2, -0.5, -0.8, 1.0]]), np.array([0.0]))])
    with pytest.raises(WMIInputError, match="'c1' belongs to a one-hot group"):
        check_wmi_property("monotonicity", net, three_categories(), feature=1, use_prior=True)
    single = PopulationModel(
        features=[Feature(name="k", kind="integer"), Feature(name="x", kind="continuous")],
        distribution=Product(factors=[
            Factor(columns=["k"], distribution=Discrete(values=[2], probabilities=[1.0])),
            Factor(columns=["x"], distribution=Uniform(lower=0.0, upper=1.0))]))
    with pytest.raises(WMIInputError, match="'k' takes a single value"):
        monotonicity(V_SHAPE, single, 0, use_prior=True)


def random_network(seed: int, inputs: int) -> Network:
    rng = np.random.default_rng(seed)
    return Network([Layer(rng.normal(size=(6, inputs)), rng.normal(scale=0.5, size=6), "relu"),
                    Layer(rng.normal(size=(2, 6)), rng.normal(scale=0.3, size=2))])


def mixed_prior() -> PopulationModel:
    """k ∈ {0, 1, 2, 3, 4} (integer), x ~ N(0, 1), y ~ TruncatedNormal(0.2, 0.5) on [−1, 1]."""
    return PopulationModel(
        features=[Feature(name="k", kind="integer"), Feature(name="x", kind="continuous"),
                  Feature(name="y", kind="continuous", domain=(-1, 1))],
        distribution=Product(factors=[
            Factor(columns=["k"], distribution=Discrete(values=[0, 1, 2, 3, 4],
                                                        probabilities=[0.3, 0.1, 0.2, 0.25,
                                                                       0.15])),
            Factor(columns=["x"], distribution=Normal(mean=0.0, std=1.0)),
            Factor(columns=["y"], distribution=TruncatedNormal(mean=0.2, std=0.5, lower=-1.0,
                                                               upper=1.0))]))


def monte_carlo(net: Network, prior: PopulationModel, feature: int, samples: int,
                seed: int) -> tuple[float, float]:
    """Estimate and standard error of P(class(x) = 1 ⇒ class(x′) = 1 | x_i < x′_i), x′_i an
    independent draw of the feature's marginal."""
    rng = np.random.default_rng(seed)
    x = prior.sample(samples, rng)
    other = prior.sample(samples, rng)[:, feature]
    ordered = x[:, feature] < other
    first = x[ordered]
    second = first.copy()
    second[:, feature] = other[ordered]
    before = np.argmax(net.evaluate(first), axis=1)
    after = np.argmax(net.evaluate(second), axis=1)
    holds = ~((before == 1) & (after != 1))
    estimate = float(holds.mean())
    return estimate, float(np.sqrt(max(estimate * (1 - estimate), 1.0 / holds.size)
                                   / holds.size))


@pytest.mark.parametrize("seed", [0, 7])  # networks not monotone in k (P < 0.9)
def test_random_networks_under_normal_marginals_contain_monte_carlo(seed: int) -> None:
    net, prior = random_network(seed, 3), mixed_prior()
    result = monotonicity(net, prior, 0, use_prior=True, timeout_s=60, tolerance=1e-3)
    assert not result.exact
    estimate, error = monte_carlo(net, prior, 0, 1_000_000, seed)
    assert result.probability_lower - 4 * error <= estimate
    assert estimate <= result.probability_upper + 4 * error
    assert 0.0 < estimate < 1.0


def test_a_binary_feature_of_a_bayesian_network_contains_monte_carlo() -> None:
    """The income demo's population (female binary, hw depending on female and yexp) and a
    random network reading female: monotonicity in female."""
    from pipeline_steps.demo import income_prior
    from pipeline_steps.income_data import generate_income_data

    prior = income_prior(generate_income_data(5_000, variant="biased", seed=2))
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(5, 4)) * np.array([3.0, 1 / 20, 1 / 10, 1 / 10])
    centred = -(weight @ prior.sample(2_000, 1).mean(axis=0)) + rng.normal(size=5)
    net = Network([Layer(weight, centred, "relu"),
                   Layer(rng.normal(size=(2, 5)), rng.normal(scale=0.3, size=2))])
    # the run ends at the tolerance's width, not at a wall-clock budget (0.03 wide after 20 s
    # quiet; at load 11-15 a 20-s budget ended wider than 0.1): the budget is only a backstop
    result = monotonicity(net, prior, 0, use_prior=True, timeout_s=600, tolerance=0.05)
    estimate, error = monte_carlo(net, prior, 0, 1_000_000, 6)
    assert result.probability_lower - 4 * error <= estimate
    assert estimate <= result.probability_upper + 4 * error
    assert not result.timed_out
    assert result.probability_upper - result.probability_lower <= 0.05
    assert 0.2 < estimate < 0.8
