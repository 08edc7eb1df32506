"""A credit-scoring fixture: synthetic applicants, a small MLP and its population model.

The registry integration tests train and register this model (``tests/mlflow_server.py``);
``certgate demo`` uses the income classifier of ``pipeline_steps/income_data.py`` instead.

Applicants have an age, an income (k€), a debt ratio, a sex (binary, the protected feature)
and a housing situation (one-hot: own / rent). Credit is granted (class 1) when a hidden score
of income, debt, age and housing plus noise is positive; the *biased* variant also favours
``sex = 1``. A 6-8-2 ReLU network is trained on standardised inputs, and the standardisation
is folded into its first layer, so the logged network reads raw feature values.

Everything is seeded: the same call gives the same data, weights and population model.
"""

from __future__ import annotations

import numpy as np
import torch

from verifier.population import (
    Categorical,
    Discrete,
    Factor,
    Feature,
    PopulationModel,
    Product,
    TruncatedNormal,
    Uniform,
)

COLUMNS = ["age", "income", "debt_ratio", "sex", "housing_own", "housing_rent"]
HIDDEN = 8
SEX_BIAS = 2.5


def population_model() -> PopulationModel:
    """The applicant population: independent features, with declared domains."""
    return PopulationModel(
        name="credit applicants",
        features=[
            Feature(name="age", kind="continuous", domain=(18, 80)),
            Feature(name="income", kind="continuous", domain=(0, 150)),
            Feature(name="debt_ratio", kind="continuous", domain=(0, 1)),
            Feature(name="sex", kind="binary"),
            Feature(name="housing", kind="categorical", columns=["housing_own", "housing_rent"]),
        ],
        distribution=Product(factors=[
            Factor(columns=["age"],
                   distribution=TruncatedNormal(mean=40, std=12, lower=18, upper=80)),
            Factor(columns=["income"],
                   distribution=TruncatedNormal(mean=45, std=20, lower=0, upper=150)),
            Factor(columns=["debt_ratio"], distribution=Uniform(lower=0, upper=1)),
            Factor(columns=["sex"], distribution=Discrete(values=[0, 1],
                                                          probabilities=[0.5, 0.5])),
            Factor(columns=["housing_own", "housing_rent"],
                   distribution=Categorical(probabilities=[0.6, 0.4])),
        ]),
    )


def applicants(n: int, *, biased: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` applicants drawn from :func:`population_model` and their labels."""
    rng = np.random.default_rng(seed)
    x = population_model().sample(n, rng)
    age, income, debt, sex, own = x[:, 0], x[:, 1], x[:, 2], x[:, 3], x[:, 4]
    score = (0.05 * (income - 45) - 3.0 * (debt - 0.5) + 0.02 * (age - 40) + 0.6 * (own - 0.6)
             + rng.normal(0.0, 0.5, n))
    if biased:
        score = score + SEX_BIAS * (sex - 0.5)
    return x, (score > 0).astype(np.int64)


def train_classifier(*, biased: bool, seed: int = 0, samples: int = 2000,
                     steps: int = 150) -> torch.nn.Sequential:
    """A 6-8-2 ReLU classifier (float32) trained on :func:`applicants`; reads raw features.
    Trains on one thread (tiny tensors: more threads only contend)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(biased, seed, samples, steps)
    finally:
        torch.set_num_threads(threads)


def _train(biased: bool, seed: int, samples: int, steps: int) -> torch.nn.Sequential:
    x, y = applicants(samples, biased=biased, seed=seed)
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-6
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(len(COLUMNS), HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 2)
    )
    inputs = torch.as_tensor((x - mean) / std, dtype=torch.float32)
    targets = torch.as_tensor(y)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(steps):
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimiser.step()
    first = model[0]
    with torch.no_grad():
        scale = torch.as_tensor(1.0 / std, dtype=torch.float32)
        shift = torch.as_tensor(mean / std, dtype=torch.float32)
        first.bias -= first.weight @ shift
        first.weight *= scale
    return model.eval()


def accuracy(model: torch.nn.Module, *, biased: bool, seed: int = 1) -> float:
    """Accuracy on fresh applicants of the same variant."""
    x, y = applicants(2000, biased=biased, seed=seed)
    with torch.no_grad():
        predicted = model(torch.as_tensor(x, dtype=torch.float32)).argmax(dim=1).numpy()
    return float((predicted == y).mean())
