"""Demographic parity under the default fit of a heavy-tailed count, whose refined integer
histogram has bins that span only their rows' values (gaps between a split bin's halves) and
one-integer bins for common values. Oracle: the population's CPT rows read in `Fraction`
(``P(X > t | group)`` summed bin by bin, uniform over each bin's integers); the network
grants iff the count exceeds t, so each group's favourable rate is exactly that sum. The
threshold is put inside a gap, at a bin's edge and inside a bin."""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest

import certgate
from verifier.network import Layer, Network
from verifier.population.histogram import IntegerHistogram


def _population() -> object:
    rng = np.random.default_rng(5)
    women = rng.random(4000) < 0.4
    followers = np.minimum(np.where(women, rng.zipf(1.5, 4000), rng.zipf(1.7, 4000)) - 1, 10**6)
    common = rng.random(4000) < 0.03
    followers = np.where(common, 777, followers)
    return certgate.fit_population(
        pd.DataFrame({"sex": np.where(women, "F", "M"), "followers": followers}),
        protected="sex")


def _rate_above(histogram: IntegerHistogram, t: int) -> Fraction:
    total = sum(Fraction(p) for p in histogram.probabilities)
    above = sum((Fraction(p) * max(0, high - max(low - 1, t)) / (high - low + 1)
                 for (low, high), p in zip(histogram.bins, histogram.probabilities, strict=True)),
                Fraction(0))
    return above / total


@pytest.mark.parametrize("side", [-1, 1])
@pytest.mark.parametrize("where", ["gap", "edge", "inside"])
def test_parity_over_split_integer_bins_holds_the_exact_rates(where: str, side: int) -> None:
    """γ is put 1e-4 below or above the exact ratio, so the verdict needs the interval
    within 1e-4 of the truth, on the side the truth lies."""
    population = _population()
    node = next(n for n in population.distribution.nodes if n.name == "followers")
    rows = {int(row.condition["sex"][0]): row.distribution for row in node.cpt}
    women = rows[0]
    assert isinstance(women, IntegerHistogram)
    bins = women.bins
    gaps = [(a[1], b[0]) for a, b in pairwise(bins) if b[0] > a[1] + 1]
    assert gaps and any(low == high == 777 for low, high in bins)
    middle = bins[len(bins) // 2 + 1]
    t = {"gap": gaps[0][0], "edge": bins[len(bins) // 2][1],
         "inside": (middle[0] + middle[1]) // 2}[where]
    names = list(population.columns)
    weights = np.zeros(len(names))
    weights[names.index("followers")] = 1.0
    network = Network([Layer(np.stack([np.zeros(len(names)), weights]),
                             np.array([0.0, -(t + 0.5)]), "relu"),
                       Layer(np.eye(2), np.zeros(2), "none")], input_names=names)
    exact = {"p_privileged": _rate_above(women, t), "p_unprivileged": _rate_above(rows[1], t)}
    ratio = exact["p_unprivileged"] / exact["p_privileged"]
    gamma = float(ratio) + side * 1e-4
    [certificate] = certgate.audit(network, population, [{
        "kind": "demographic_parity", "protected": "sex=F", "privileged": 1,
        "favorable_class": 1, "gamma": gamma, "timeout_s": 60}])
    assert certificate.verdict == ("violated" if side > 0 else "satisfied"), certificate.bounds
    for name, value in exact.items():
        low, high = certificate.bounds[name]
        assert Fraction(low) <= value <= Fraction(high), (where, t, name, low, value, high)
    low, high = certificate.bounds["value"]
    assert Fraction(low) <= ratio <= Fraction(high), (where, t, low, ratio, high)
