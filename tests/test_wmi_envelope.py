"""Non-polynomial densities in WMI: certified intervals against closed forms and Monte Carlo."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm, truncnorm

from verifier.network import Layer, Network
from verifier.population import (
    BayesianNetwork,
    BayesNode,
    CPTRow,
    Discrete,
    Factor,
    Feature,
    Mixture,
    Normal,
    PopulationModel,
    Product,
    TruncatedNormal,
)
from verifier.population.fitting import fit_product, infer_features
from verifier.wmi import (
    WMIInputError,
    local_robustness,
    monotonicity,
    noise_robustness,
)
from verifier.wmi.marginals import Component, Density1D
from verifier.wmi.noise import triangular_noise

MC_SAMPLES = 1_000_000

# logit = relu(x − 1) + relu(−1 − x) − 0.3: class 1 iff |x| >= 1.3
TWO_SIDED = Network([Layer(np.array([[1.0], [-1.0]]), np.array([-1.0, -1.0]), "relu"),
                     Layer(np.array([[1.0, 1.0]]), np.array([-0.3]))])


def standard_normal() -> PopulationModel:
    return PopulationModel(features=[Feature(name="a", kind="continuous")],
                           distribution=Normal(mean=0.0, std=1.0))


def test_relu_under_standard_normal_contains_the_closed_form() -> None:
    """P(class 0) = 1 − 2 Φ(−1.3): the interval contains it and is at most 1e-3 wide."""
    exact = 1.0 - 2.0 * norm.cdf(-1.3)
    result = local_robustness(TWO_SIDED, standard_normal(), [0.0], 50.0, expected_class=0,
                              tolerance=1e-3, timeout_s=10.0)
    assert not result.exact
    assert result.probability_lower <= exact <= result.probability_upper
    assert result.probability_upper - result.probability_lower <= 1e-3


def test_time_budget_returns_the_interval_reached() -> None:
    """A zero budget still returns a sound (wide) interval, marked as timed out."""
    exact = 1.0 - 2.0 * norm.cdf(-1.3)
    result = local_robustness(TWO_SIDED, standard_normal(), [0.0], 50.0, expected_class=0,
                              timeout_s=0.0)
    assert result.timed_out and not result.exact
    assert result.probability_lower <= exact <= result.probability_upper


def random_net(seed: int, sizes: list[int]) -> Network:
    rng = np.random.default_rng(seed)
    layers = [Layer(rng.normal(size=(b, a)), rng.normal(scale=0.5, size=b), "relu")
              for a, b in itertools.pairwise(sizes[:-1])]
    layers.append(Layer(rng.normal(size=(sizes[-1], sizes[-2])), rng.normal(size=sizes[-1])))
    return Network(layers)


def fitted_prior(seed: int) -> PopulationModel:
    """Normal / truncated-normal and Gaussian-mixture marginals fitted to bimodal data."""
    rng = np.random.default_rng(seed)
    n = 4000
    frame = pd.DataFrame({
        "a": rng.normal(0.3, 0.8, n),
        "b": np.where(rng.random(n) < 0.4, rng.normal(-1.0, 0.4, n), rng.normal(1.0, 0.6, n)),
    })
    features = infer_features(frame, domains={"a": (-2.0, 2.5)})
    frame["a"] = frame["a"].clip(-2.0, 2.5)
    normal = fit_product(frame[["a"]], features[:1], continuous="normal")
    mixture = fit_product(frame[["b"]], features[1:], continuous="gaussian_mixture",
                          n_components=2)
    return PopulationModel(features=features, distribution=Product(factors=[
        Factor(columns=["a"], distribution=normal.distribution.factors[0].distribution),
        Factor(columns=["b"], distribution=mixture.distribution.factors[0].distribution)]))


def classes(net: Network, points: np.ndarray) -> np.ndarray:
    out = net.evaluate(points)
    return (out[:, 0] >= 0).astype(int) if out.shape[1] == 1 else out.argmax(axis=1)


def assert_contains(result, hits: np.ndarray) -> None:
    estimate = float(hits.mean())
    error = 4.0 * math.sqrt(max(estimate * (1 - estimate), 1e-12) / hits.size)
    assert result.probability_lower <= estimate + error
    assert estimate - error <= result.probability_upper


@pytest.mark.parametrize("seed", [0, 1])
def test_random_networks_under_fitted_marginals_agree_with_monte_carlo(seed: int) -> None:
    prior = fitted_prior(seed)
    net = random_net(seed, [2, 6, 2])
    result = local_robustness(net, prior, [0.0, 0.0], 100.0, expected_class=1, tolerance=3e-3,
                              timeout_s=120)
    assert not result.exact
    assert result.probability_upper - result.probability_lower <= 3e-3
    points = prior.sample(MC_SAMPLES, np.random.default_rng(seed + 10))
    assert_contains(result, classes(net, points) == 1)


def test_noise_robustness_under_a_mixture_agrees_with_monte_carlo() -> None:
    prior = fitted_prior(3)
    net = random_net(3, [2, 5, 1])
    result = noise_robustness(net, prior, triangular_noise(-0.3, 0.0, 0.3), [1],
                              tolerance=3e-3, timeout_s=60)
    rng = np.random.default_rng(4)
    points = prior.sample(MC_SAMPLES, rng)
    noisy = points.copy()
    noisy[:, 1] += rng.triangular(-0.3, 0.0, 0.3, MC_SAMPLES)
    assert_contains(result, classes(net, points) == classes(net, noisy))


def monotonicity_losses(net: Network, prior: PopulationModel, seed: int) -> np.ndarray:
    """Monte Carlo pairs for monotonicity in column 0: x from the prior, x′ equal but for an
    independent draw of column 0's marginal, kept where x_0 <= x′_0; True where the class
    1 at x is lost at x′."""
    rng = np.random.default_rng(seed)
    first = prior.sample(2 * MC_SAMPLES, rng)
    second = first.copy()
    second[:, 0] = prior.sample(2 * MC_SAMPLES, rng)[:, 0]
    kept = first[:, 0] <= second[:, 0]
    first, second = first[kept], second[kept]
    return (classes(net, first) == 1) & (classes(net, second) != 1)


def test_monotonicity_with_the_prior_agrees_with_monte_carlo() -> None:
    """x from the prior, x′_a an independent draw of a's marginal, pairs with x_a <= x′_a."""
    prior = fitted_prior(5)
    net = random_net(5, [2, 5, 1])
    result = monotonicity(net, prior, 0, use_prior=True, tolerance=3e-3, timeout_s=60)
    assert_contains(result, ~monotonicity_losses(net, prior, seed=6))


def protected_network_prior() -> PopulationModel:
    """A Bayesian network: binary s, then x | s normal with a mean depending on s."""
    return PopulationModel(
        features=[Feature(name="s", kind="binary"), Feature(name="x", kind="continuous")],
        distribution=BayesianNetwork(nodes=[
            BayesNode(name="s", cpt=[CPTRow(distribution=Discrete(values=[0.0, 1.0],
                                                                  probabilities=[0.6, 0.4]))]),
            BayesNode(name="x", parents=["s"], cpt=[
                CPTRow(condition={"s": (0.0, 0.0)}, distribution=Normal(mean=-0.5, std=1.0)),
                CPTRow(condition={"s": (1.0, 1.0)}, distribution=Normal(mean=1.0, std=0.5)),
            ])]))


def test_bayesian_network_prior_sums_over_the_parent() -> None:
    """Class 1 iff x >= 0.2: P = 0.6 (1 − Φ(0.7)) + 0.4 (1 − Φ(−1.6))."""
    net = Network([Layer(np.array([[0.0, 1.0]]), np.array([-0.2]))])
    exact = 0.6 * norm.sf(0.7) + 0.4 * norm.sf(-1.6)
    result = local_robustness(net, protected_network_prior(), [0.5, 0.0], 100.0, expected_class=1,
                              tolerance=1e-4)
    assert result.probability_lower <= exact <= result.probability_upper
    assert result.probability_upper - result.probability_lower <= 1e-4


def binned_parent_prior() -> PopulationModel:
    """y ~ N(0, 1); x | y <= 0 ~ N(−1, 0.5²), x | y > 0 ~ TN(1, 0.7², [−1, 4])."""
    return PopulationModel(
        features=[Feature(name="x", kind="continuous"), Feature(name="y", kind="continuous")],
        distribution=BayesianNetwork(nodes=[
            BayesNode(name="y", cpt=[CPTRow(distribution=Normal(mean=0.0, std=1.0))]),
            BayesNode(name="x", parents=["y"], cpt=[
                CPTRow(condition={"y": (None, 0.0)}, distribution=Normal(mean=-1.0, std=0.5)),
                CPTRow(condition={"y": (0.0, None)},
                       distribution=TruncatedNormal(mean=1.0, std=0.7, lower=-1.0, upper=4.0)),
            ])]))


def test_monotonicity_under_a_binned_bayesian_network_agrees_with_monte_carlo() -> None:
    """The copy x′ is drawn from x's marginal, a mixture weighted by the parent's bins."""
    prior = binned_parent_prior()
    net = random_net(7, [2, 6, 1])
    result = monotonicity(net, prior, 0, use_prior=True, tolerance=3e-3, timeout_s=60)
    assert result.probability_upper - result.probability_lower <= 3e-3
    assert_contains(result, ~monotonicity_losses(net, prior, seed=8))


def test_uniform_prior_refuses_an_unbounded_support() -> None:
    with pytest.raises(WMIInputError, match=r"column 'x' has support"):
        monotonicity(Network([Layer(np.array([[0.0, 1.0]]), np.array([0.0]))]),
                     protected_network_prior(), 1, use_prior=False)


@settings(max_examples=60, deadline=None)
@given(mean=st.floats(-3, 3), std=st.floats(0.05, 3), left=st.floats(-6, 6),
       width=st.floats(1e-3, 6), truncated=st.booleans(), weight=st.floats(0.05, 0.95))
def test_density_envelope_contains_the_density_and_the_mass(
        mean: float, std: float, left: float, width: float, truncated: bool,
        weight: float) -> None:
    """On [left, left + width]: L <= g <= U at sampled points and the mass enclosure holds
    scipy's value, for a mixture of a normal and a (truncated) normal."""
    second = (TruncatedNormal(mean=-mean, std=std, lower=-mean - std, upper=-mean + 2 * std)
              if truncated else Normal(mean=-mean, std=std))
    mixture = Mixture(weights=[weight, 1 - weight],
                      components=[Normal(mean=mean, std=std), second])
    density = Density1D((Component(1.0, 1.0, mixture),))
    right = left + width
    low, high = density.bounds(np.array([left]), np.array([right]))
    points = np.linspace(left, right, 101)
    if truncated:
        a, b = -1.0, 2.0
        other = truncnorm.pdf(points, a, b, loc=-mean, scale=std)
        other_mass = (truncnorm.cdf(right, a, b, loc=-mean, scale=std)
                      - truncnorm.cdf(left, a, b, loc=-mean, scale=std))
    else:
        other = norm.pdf(points, -mean, std)
        other_mass = norm.cdf(right, -mean, std) - norm.cdf(left, -mean, std)
    values = weight * norm.pdf(points, mean, std) + (1 - weight) * other
    assert np.all(low[0] <= values * (1 + 1e-12) + 1e-300)
    assert np.all(values <= high[0] * (1 + 1e-12) + 1e-300)
    mass = weight * (norm.cdf(right, mean, std) - norm.cdf(left, mean, std)) + \
        (1 - weight) * other_mass
    m_lo, m_hi = density.mass(np.array([left]), np.array([right]))
    assert m_lo[0] <= mass * (1 + 1e-12) + 1e-15 and mass <= m_hi[0] * (1 + 1e-12) + 1e-15


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_propagated_box_keeps_every_point_of_the_cell(rows: int, seed: int) -> None:
    """Constraint propagation never cuts off a point of ``{z in box : A z <= b}``."""
    from verifier.wmi.propagation import tightened

    rng = np.random.default_rng(seed)
    A = rng.normal(size=(rows, 3))
    b = rng.normal(size=rows)
    lower, upper = -rng.random(3) - 0.1, rng.random(3) + 0.1
    points = rng.uniform(lower, upper, size=(20_000, 3))
    inside = points[np.all(points @ A.T <= b, axis=1)]
    box = tightened(A, b, lower, upper)
    if box is None:
        assert inside.shape[0] == 0
    else:
        assert np.all(inside >= box[0]) and np.all(inside <= box[1])


@settings(max_examples=40, deadline=None)
@given(mean=st.floats(-2, 2), std=st.floats(0.1, 2), cut=st.floats(-3, 3),
       left=st.floats(-4, 0), width=st.floats(0.01, 5), other=st.floats(-1, 1))
def test_cell_bounds_contain_the_exact_mass(mean: float, std: float, cut: float, left: float,
                                            width: float, other: float) -> None:
    """A half-plane cell z_0 >= cut on a box, weight N(mean, std²)(z_0) · N(other, 1)(z_1):
    the certified bounds hold the exact product of normal CDF differences."""
    from verifier.wmi.engine import _integrate
    from verifier.wmi.envelope import Envelope, cell_bounds
    from verifier.wmi.polynomial import compiled, constant
    from verifier.wmi.regions import Counters, Region

    lower, upper = np.array([left, -1.0]), np.array([left + width, 2.0])
    A = np.array([[-1.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    b = np.array([-cut, upper[0], -lower[0], upper[1], -lower[1]])
    point = np.array([0.5 * (max(cut, left) + upper[0]), 0.5])
    if not (max(cut, left) < upper[0]):
        return
    region = Region(A, b, point, Counters())
    weight = compiled(constant(1.0, 2), 2)
    envelope = Envelope([0, 1], [Density1D((Component(1.0, 1.0, Normal(mean=mean, std=std)),)),
                                 Density1D((Component(1.0, 1.0, Normal(mean=other, std=1.0)),))],
                        constant(1.0, 2), lambda r: _integrate(r, weight))
    exact = ((norm.cdf(upper[0], mean, std) - norm.cdf(max(cut, left), mean, std))
             * (norm.cdf(2.0, other, 1.0) - norm.cdf(-1.0, other, 1.0)))
    low, high, _, _ = cell_bounds(envelope, region, lower, upper)
    assert low <= exact * (1 + 1e-12) + 1e-15 and exact <= high * (1 + 1e-12) + 1e-15


def test_every_property_honours_a_zero_time_budget() -> None:
    """With no time at all each property returns a sound, timed-out interval."""
    from verifier.wmi import equivalence

    prior = protected_network_prior()
    net = Network([Layer(np.array([[0.0, 1.0]]), np.array([-0.2]))])
    other = Network([Layer(np.array([[0.0, 1.0]]), np.array([-0.3]))])
    exact = 0.6 * norm.sf(0.7) + 0.4 * norm.sf(-1.6)
    results = [
        (local_robustness(net, prior, [0.5, 0.0], 100.0, expected_class=1, timeout_s=0.0), exact),
        (monotonicity(net, prior, 1, use_prior=True, timeout_s=0.0), 1.0),
        (noise_robustness(net, prior, triangular_noise(0.0, 0.0, 0.5), [1], timeout_s=0.0),
         None),
        (equivalence(net, other, prior, timeout_s=0.0), None),
    ]
    for result, value in results:
        assert result.timed_out and not result.exact
        assert 0.0 <= result.probability_lower <= result.probability_upper <= 1.0
        if value is not None:
            assert result.probability_lower <= value <= result.probability_upper
