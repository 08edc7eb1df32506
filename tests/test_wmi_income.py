"""The income demo's population (paper 002 §V): a Bayesian network with a binary protected
feature and normal / truncated-normal nodes, fitted the way ``certgate demo`` fits it, gets a
decided monotonicity and noise-robustness result."""

import pytest

from pipeline_steps.demo import income_prior, train_classifier
from pipeline_steps.income_data import FEATURES, PROTECTED, generate_income_data
from verifier.convert.torch_module import from_torch
from verifier.population import PopulationModel
from verifier.wmi import WMIInputError, check_wmi_property, monotonicity, noise_robustness
from verifier.wmi.noise import triangular_noise

COLUMNS = (PROTECTED, *FEATURES)  # female, hpw, yexp, hw
MIN_PROBABILITY = 0.95


def income_population() -> PopulationModel:
    """The demo's own fit: hw depends on female and yexp (cut at 10..30), the rest
    independent."""
    return income_prior(generate_income_data(10_000, variant="biased", seed=2))


def income_network():
    """The demo's own 4-8-2 ReLU classifier on raw features (female's weights zero)."""
    frame = generate_income_data(5_000, variant="biased", seed=1)
    return from_torch(train_classifier(frame, seed=0, steps=200), input_shape=(4,))


def decided(result) -> bool:
    return (result.probability_lower >= MIN_PROBABILITY
            or result.probability_upper < MIN_PROBABILITY)


@pytest.fixture(scope="module")
def case():
    return income_network(), income_population()


def test_monotonicity_in_hours_is_decided(case) -> None:
    net, prior = case
    plan = check_wmi_property("monotonicity", net, prior, feature=1, use_prior=True)
    assert not plan.exact and plan.queries >= 2
    result = monotonicity(net, prior, 1, use_prior=True, stop_at=1 - MIN_PROBABILITY,
                          timeout_s=120)
    assert not result.exact
    assert decided(result), (result.probability_lower, result.probability_upper)


def test_noise_robustness_in_experience_is_decided(case) -> None:
    net, prior = case
    noise = triangular_noise(0.0, 0.0, 15.0)
    check_wmi_property("noise_robustness", net, prior, features=[2], noise=noise)
    result = noise_robustness(net, prior, noise, [2], stop_at=1 - MIN_PROBABILITY,
                              timeout_s=120)
    assert decided(result), (result.probability_lower, result.probability_upper)


def test_config_time_checks_name_what_cannot_run(case) -> None:
    net, prior = case
    with pytest.raises(WMIInputError, match="'hw'"):
        check_wmi_property("monotonicity", net, prior, feature=1, use_prior=False)
    with pytest.raises(WMIInputError, match="noise"):
        check_wmi_property("noise_robustness", net, prior, features=[2])
    with pytest.raises(WMIInputError, match="'female'"):
        check_wmi_property("noise_robustness", net, prior, features=[0],
                           noise=triangular_noise(0.0, 0.0, 1.0))
