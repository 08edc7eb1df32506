"""Demographic parity whose protected attribute is named by either column of a two-category
one-hot group (``group=majority`` privileged 1, or ``group=minority`` privileged 0: the same
two groups) on a population fitted from a raw string column, as ``certgate population fit``
writes it.

Oracle, closed form: the network's logit is ``2·has_car − group=minority − 0.6·n_late − 1``,
at most 0 for every minority point (``has_car <= 1``, ``n_late >= 0``), so
P[class 1 | minority] = 0 exactly and the ratio is 0: no certificate may prove it above γ.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

import certgate
from verifier.certificate import Certificate
from verifier.network import Layer, Network


def _case() -> tuple[Network, Any]:
    rng = np.random.default_rng(0)
    minority = rng.random(3000) < 0.35
    frame = pd.DataFrame({"n_late": np.where(rng.random(3000) < 0.6, 0, rng.integers(1, 6, 3000)),
                          "has_car": (rng.random(3000) < 0.7 - 0.2 * minority).astype(int),
                          "group": np.where(minority, "minority", "majority")})
    population = certgate.fit_population(frame, structure="independent")
    names = list(population.columns)
    weights = np.zeros(len(names))
    weights[names.index("has_car")] = 2.0
    weights[names.index("group=minority")] = -1.0
    weights[names.index("n_late")] = -0.6
    network = Network([Layer(np.stack([weights, -weights]), np.array([-1.0, 1.0]), "relu"),
                       Layer(np.array([[0.0, 1.0], [1.0, 0.0]]), np.zeros(2), "none")],
                      input_names=names)
    return network, population


def _certificate(protected: str, privileged: int) -> Certificate:
    network, population = _case()
    [certificate] = certgate.audit(network, population, [{
        "kind": "demographic_parity", "protected": protected, "privileged": privileged,
        "favorable_class": 1, "gamma": 0.5, "timeout_s": 30}])
    return certificate


def test_the_minority_column_spelling_holds_the_closed_form() -> None:
    certificate = _certificate("group=minority", 0)
    low, high = certificate.bounds["p_unprivileged"]
    assert low <= 0.0 <= high and certificate.verdict == "violated"


def test_the_majority_column_spelling_holds_the_closed_form() -> None:
    certificate = _certificate("group=majority", 1)
    low, high = certificate.bounds["p_unprivileged"]
    assert low <= 0.0 <= high and certificate.verdict == "violated"
