"""PV gives the same intervals whichever executor bounds its batches (in-process, a local
process pool, a 2-worker Dask cluster): the work is cut into tasks and put back in order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from strategies import random_network

from verifier.audits import demographic_parity_audit
from verifier.network import Layer, Network
from verifier.population.fitting import fit_product, infer_features
from verifier.pv import PVSettings

COLUMNS = ["sex", "job=a", "job=b", "job=c", "hours", "age"]


def _population():
    rng = np.random.default_rng(0)
    rows = 500
    job = rng.integers(0, 3, rows)
    frame = pd.DataFrame({"sex": rng.integers(0, 2, rows)})
    for j, name in enumerate("abc"):
        frame[f"job={name}"] = (job == j).astype(int)
    frame["hours"] = rng.integers(0, 300, rows)
    frame["age"] = rng.integers(18, 90, rows)
    features = infer_features(frame, categorical={"job": COLUMNS[1:4]},
                              domains={"hours": (0, 299), "age": (18, 89)})
    return fit_product(frame, features)


def instance() -> tuple[Network, object]:
    """The network (6-16-8-2, its class boundary through the population) and the product
    population of hours and age (integers) that the executors are compared on."""
    layers = random_network(np.random.default_rng(7), [6, 16, 8, 2]).layers
    first = layers[0]
    scale = np.array([1.0, 1.0, 1.0, 1.0, 1 / 150, 1 / 35])  # hours and age to unit range
    centre = np.array([0.0, 0.0, 0.0, 0.0, 150.0, 54.0])
    layers[0] = Layer(first.weight * scale, first.bias - (first.weight * scale) @ centre,
                      first.activation)
    population = _population()
    samples = population.sample(2000, 0)
    outputs = Network(layers).evaluate(samples)
    last = layers[-1]
    shift = np.median(outputs[:, 1] - outputs[:, 0])  # the class boundary through the population
    layers[-1] = Layer(last.weight, last.bias - np.array([0.0, shift]), last.activation)
    return Network(layers, COLUMNS, ["no", "yes"]), population


def _intervals(executor: str, rounds: int) -> tuple:
    network, population = instance()
    # a threshold at a dense Monte Carlo estimate of the difference keeps PV refining
    points = population.sample(2_000_000, 1)
    favourable = network.evaluate(points).argmax(axis=1) == 1
    male = points[:, 0] == 1
    gamma = abs(favourable[~male].mean() - favourable[male].mean())
    settings = PVSettings(timeout_s=None, max_boxes=3000, batch_size=64, executor=executor,
                          workers=2, min_boxes_per_task=16, rounds_in_flight=rounds)
    certificate = demographic_parity_audit(
        network, population, protected="sex", privileged=1, favorable_class=1, gamma=gamma,
        form="difference", settings=settings,
    )
    return (certificate.verdict, certificate.bounds["p_unprivileged"],
            certificate.bounds["p_privileged"], certificate.cost["boxes"])


@pytest.mark.parametrize("rounds", [1, 2])
def test_local_process_and_dask_agree(rounds: int) -> None:
    """Also with two rounds in flight (the pools' default): the next round is chosen and
    started before the last one is collected, in the same order on every executor."""
    local = _intervals("local", rounds)
    assert local[3] > 300  # a dozen batches of 32 boxes or more, each cut into two tasks
    assert _intervals("process", rounds) == local
    assert _intervals("dask", rounds) == local
