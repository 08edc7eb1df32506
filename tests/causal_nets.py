"""Tiny networks whose biased sets are known in closed form, for the causal-fairness tests."""

from __future__ import annotations

import numpy as np

from verifier.network import Layer, Network
from verifier.population import (
    Discrete,
    Factor,
    Feature,
    PopulationModel,
    Product,
    Uniform,
)


def threshold_network(weights: list[float], bias: float, names: list[str]) -> Network:
    """Two classes: class 1 iff ``w·x + b > 0`` (hidden ReLUs ``relu(z)``, ``relu(−z)``)."""
    w = np.asarray(weights, dtype=float)
    hidden = Layer(np.stack([w, -w]), np.array([bias, -bias]), "relu")
    output = Layer(np.array([[0.0, 1.0], [1.0, 0.0]]), np.zeros(2), "none")
    return Network([hidden, output], input_names=names)


def threshold_population() -> PopulationModel:
    """The threshold network's population: ``x ~ U[0, 1]`` and a binary ``s`` with probability
    1/2 each, independent."""
    return PopulationModel(
        features=[Feature(name="x", kind="continuous", domain=(0, 1)),
                  Feature(name="s", kind="binary", domain=(0, 1))],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Uniform(lower=0, upper=1)),
            Factor(columns=["s"], distribution=Discrete(values=[0, 1],
                                                        probabilities=[0.5, 0.5]))]))


def random_network(inputs: int, hidden: list[int], seed: int) -> Network:
    """A random ReLU classifier with two classes whose decision boundary crosses the unit
    cube (the output bias is shifted by the mean score difference)."""
    rng = np.random.default_rng(seed)
    layers, width = [], inputs
    for size in hidden:
        layers.append(Layer(rng.normal(size=(size, width)), rng.normal(size=size) * 0.5, "relu"))
        width = size
    last = Layer(rng.normal(size=(2, width)), np.zeros(2), "none")
    names = [f"x{i}" for i in range(inputs)]
    scores = Network([*layers, last], input_names=names).evaluate(rng.uniform(size=(2000, inputs)))
    shift = float(np.mean(scores[:, 0] - scores[:, 1]))
    balanced = Layer(last.weight, np.array([0.0, shift]), "none")
    return Network([*layers, balanced], input_names=names)


def biased_by_grid(network: Network, points: np.ndarray, protected: list[int],
                   values: np.ndarray) -> np.ndarray:
    """``(N,)`` whether some two of the protected ``values`` ``(V, k)`` give different classes
    at each non-protected point (rows of ``points``; protected entries overwritten)."""
    count = values.shape[0]
    rows = np.repeat(points, count, axis=0)
    rows[:, protected] = np.tile(values, (points.shape[0], 1))
    classes = network.classify(rows).reshape(points.shape[0], count)
    return classes.min(axis=1) != classes.max(axis=1)


def assert_share_contains_estimate(network: Network, share: tuple[float, float],
                                   seed: int) -> None:
    """The certified biased share of the unit cube (protected input ``x2`` in [0, 1], the
    other two uniform) contains a 4,000-point Monte Carlo estimate ± 4 standard errors
    (each point's bias decided on a grid of 201 protected values)."""
    low, high = share
    rng = np.random.default_rng(seed)
    points = rng.uniform(size=(4000, 3))
    estimate = biased_by_grid(network, points, [2], np.linspace(0, 1, 201)[:, None]).mean()
    error = 4 * np.sqrt(max(estimate * (1 - estimate), 1e-4) / points.shape[0])
    assert low - error <= estimate <= high + error
