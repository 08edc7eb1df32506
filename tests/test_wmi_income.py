"""The income demo's population (paper 002 §V): a Bayesian network with a binary sensitive
feature and normal / truncated-normal nodes, fitted the way ``certgate demo`` fits it, gets a
decided monotonicity and noise-robustness result."""

import numpy as np
import pytest
import torch

from pipeline_steps.income_data import FEATURES, SENSITIVE, generate_income_data
from verifier.convert import from_torch
from verifier.population import PopulationModel
from verifier.population.fitting import fit_bayesian_network, infer_features
from verifier.wmi import WMIInputError, check_wmi_property, monotonicity, noise_robustness
from verifier.wmi.noise import triangular_noise

COLUMNS = (SENSITIVE, *FEATURES)  # female, hpw, yexp, hw
MIN_PROBABILITY = 0.95


def income_population() -> PopulationModel:
    """As the demo: hw depends on female and yexp (cut at 10..30), the rest independent."""
    frame = generate_income_data(10_000, variant="biased", seed=2)[list(COLUMNS)]
    features = infer_features(frame, domains={"hpw": (10.0, 60.0), "yexp": (0.0, 55.0)})
    return fit_bayesian_network(frame, features, parents={"hw": [SENSITIVE, "yexp"]},
                                bins={"yexp": [10.0, 15.0, 20.0, 25.0, 30.0]})


def income_network():
    """A 4-8-2 ReLU classifier on raw features (female's weights zero), trained as the demo
    trains it (Adam, standardised inputs folded into the first layer)."""
    torch.set_num_threads(1)
    frame = generate_income_data(5_000, variant="biased", seed=1)
    features = frame[list(FEATURES)].to_numpy(dtype=np.float64)
    mean, std = features.mean(axis=0), features.std(axis=0) + 1e-9
    torch.manual_seed(0)
    hidden, output = torch.nn.Linear(3, 8), torch.nn.Linear(8, 2)
    model = torch.nn.Sequential(hidden, torch.nn.ReLU(), output)
    inputs = torch.tensor((features - mean) / std, dtype=torch.float32)
    targets = torch.tensor(frame["y"].to_numpy(dtype=np.int64))
    optimiser = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(200):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()
        optimiser.step()
    first = torch.nn.Linear(4, 8)
    with torch.no_grad():
        weight = hidden.weight / torch.tensor(std, dtype=torch.float32)
        first.weight.zero_()
        first.weight[:, 1:] = weight
        first.bias.copy_(hidden.bias - weight @ torch.tensor(mean, dtype=torch.float32))
    return from_torch(torch.nn.Sequential(first, torch.nn.ReLU(), output).eval(),
                      input_shape=(4,))


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
        check_wmi_property("monotonicity", net, prior, feature=0, use_prior=True)
