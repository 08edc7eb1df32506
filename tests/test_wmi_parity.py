"""Exact demographic parity with a discrete protected column: closed form, and inside PV's
certified interval on the same instance."""

import numpy as np
import pytest

from verifier.audits import demographic_parity_audit
from verifier.network import Layer, Network
from verifier.population import (
    Discrete,
    Factor,
    Feature,
    Leaf,
    PiecewiseDensity,
    PopulationModel,
    Product,
)
from verifier.wmi import demographic_parity, local_robustness, monotonicity


def population(continuous: object) -> PopulationModel:
    return PopulationModel(
        features=[Feature(name="x", kind="continuous"), Feature(name="y", kind="continuous"),
                  Feature(name="s", kind="integer")],
        distribution=Product(factors=[
            Factor(columns=["x", "y"], distribution=continuous),
            Factor(columns=["s"], distribution=Discrete(values=[0.0, 1.0],
                                                         probabilities=[0.4, 0.6]))]))


UNIFORM_2D = PiecewiseDensity(columns=["x", "y"],
                              leaves=[Leaf(lower=[0, 0], upper=[1, 1], constant=1.0)])


def test_parity_closed_form() -> None:
    """Class 0 iff x + 0.5 s >= 0.75 (two logits): P(fav|s=0) = 1/4, P(fav|s=1) = 3/4."""
    net = Network([Layer(np.array([[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]]),
                         np.array([-0.75, 0.0]))])
    result = demographic_parity(net, population(UNIFORM_2D), protected=2, privileged=1.0,
                                favorable_class=0)
    assert result.p_unprivileged == pytest.approx(0.25, abs=1e-12)
    assert result.p_privileged == pytest.approx(0.75, abs=1e-12)
    assert result.ratio == pytest.approx(1 / 3, abs=1e-12)


def test_parity_inside_pv_interval() -> None:
    rng = np.random.default_rng(9)
    net = Network([Layer(rng.normal(size=(6, 3)), rng.normal(scale=0.3, size=6), "relu"),
                   Layer(rng.normal(size=(2, 6)), rng.normal(scale=0.3, size=2))],
                  ["x", "y", "s"], ["a", "b"])
    prior = population(PiecewiseDensity(columns=["x", "y"], leaves=[
        Leaf(lower=[0, 0], upper=[0.5, 1], constant=0.6),
        Leaf(lower=[0.5, 0], upper=[1, 1], constant=1.4)]))
    exact = demographic_parity(net, prior, protected=2, privileged=0.0, favorable_class=0)
    assert 0.1 < exact.p_privileged < 0.9 and 0.1 < exact.p_unprivileged < 0.9
    certificate = demographic_parity_audit(net, prior, protected="s", privileged=0.0,
                                           favorable_class=0, gamma=0.74, timeout_s=20,
                                           precision=0.05)
    low, high = certificate.bounds["value"]
    assert low <= exact.ratio <= high
    for name, value in (("p_unprivileged", exact.p_unprivileged),
                        ("p_privileged", exact.p_privileged)):
        low, high = certificate.bounds[name]
        assert low <= value <= high


def test_local_robustness_sums_discrete_values() -> None:
    """Class 1 (single logit) iff x − s/2 >= 0: on the whole box P = 0.4·1 + 0.6·0.5."""
    net = Network([Layer(np.array([[1.0, 0.0, -0.5]]), np.array([0.0]))])
    result = local_robustness(net, population(UNIFORM_2D), [0.5, 0.5, 0.5], 0.5, label=1)
    assert result.probability == pytest.approx(0.4 + 0.6 * 0.5, abs=1e-12)


def test_self_composition_sums_discrete_columns_and_compares_a_discrete_feature() -> None:
    """Class 1 iff x >= s/2 is increasing in x for every s: probability exactly 1. In the
    binary s the only ordered pair is (0, 1), which loses the positive class exactly when
    x < 1/2: probability 1/2 increasing (either weighting), 1 decreasing."""
    net = Network([Layer(np.array([[1.0, 0.0, -0.5]]), np.array([0.0]))])
    assert monotonicity(net, population(UNIFORM_2D), 0).probability == 1.0
    for use_prior in (False, True):
        result = monotonicity(net, population(UNIFORM_2D), 2, use_prior=use_prior)
        assert result.exact and result.probability == pytest.approx(0.5, abs=1e-12)
    assert monotonicity(net, population(UNIFORM_2D), 2, decreasing=True).probability == 1.0
