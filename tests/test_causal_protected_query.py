"""A causal query that names a protected input conditions the population measure on it.

Whether a point of the other inputs is biased compares every protected value (the query does
not change that), but ``P(biased | query)`` is the share *of the query's population*: with a
population where the protected input and the others depend on each other, the share among
``s = 1`` is not the share among everyone. Before, the query's protected range was dropped
and the share of everyone was reported for it (a gate passed at 0.6 on a group whose share is
1). Oracles: closed forms, exact enumeration in ``Fraction`` and dense Monte Carlo.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tests.causal_nets import threshold_network
from verifier.audits import causal_fairness
from verifier.population import (
    Categorical,
    Discrete,
    Factor,
    Feature,
    PopulationModel,
    Product,
    Uniform,
)
from verifier.population.mixture import Mixture

# class 1 iff x + 0.5 s − 1 > 0: biased (s = 0 vs s = 1 differ) iff x ∈ (0.5, 1]
SHIFTED = threshold_network([1.0, 0.5], -1.0, ["x", "s"])


def _group(s: int, low: float, high: float) -> Product:
    return Product(factors=[Factor(columns=["x"], distribution=Uniform(lower=low, upper=high)),
                            Factor(columns=["s"], distribution=Discrete(values=[s],
                                                                        probabilities=[1.0]))])


def segregated() -> PopulationModel:
    """Half the population has ``s = 0`` and ``x ~ U[0, 0.5]``, half ``s = 1`` and
    ``x ~ U[0.5, 1]``: every ``s = 1`` point is biased, no ``s = 0`` point is."""
    return PopulationModel(
        features=[Feature(name="x", kind="continuous", domain=(0, 1)),
                  Feature(name="s", kind="binary", domain=(0, 1))],
        distribution=Mixture(weights=[0.5, 0.5],
                             components=[_group(0, 0.0, 0.5), _group(1, 0.5, 1.0)]))


def _audit(query: dict[str, tuple[float, float]] | None, population: PopulationModel,
           protected: list[str], network=SHIFTED, **settings):
    audit = causal_fairness.CausalFairnessSettings(
        kind="causal_fairness", protected=protected, query=query, measure="population",
        max_biased_share=0.6, timeout_s=20, **settings)
    return causal_fairness.run(audit, network, population)


def _monte_carlo(query_s: float | None) -> float:
    """P(biased | s = query_s) by 400k draws, bias decided at both values of s."""
    draws = segregated().sample(400_000, np.random.default_rng(3))
    if query_s is not None:
        draws = draws[draws[:, 1] == query_s]
    classes = [SHIFTED.classify(np.column_stack([draws[:, 0], np.full(len(draws), s)]))
               for s in (0.0, 1.0)]
    return float(np.mean(classes[0] != classes[1]))


@pytest.mark.parametrize(("query", "share"), [
    (None, 0.5), ({"s": (1.0, 1.0)}, 1.0), ({"s": (0.0, 0.0)}, 0.0)])
def test_the_population_share_is_the_share_of_the_queried_protected_group(
        query: dict[str, tuple[float, float]] | None, share: float) -> None:
    certificate = _audit(query, segregated(), ["s"], integer_inputs=["s"])
    low, high = certificate.bounds["biased_share_population"]
    estimate = _monte_carlo(None if query is None else query["s"][0])
    assert low <= share <= high and high - low <= 0.01
    assert abs(estimate - share) <= 0.005
    mass_low, mass_high = certificate.details["query_mass_population"]
    assert mass_low <= (1.0 if query is None else 0.5) <= mass_high
    # the uniform share is over the other inputs alone: the same for every protected range
    uniform_low, uniform_high = certificate.bounds["biased_share"]
    assert uniform_low <= 0.5 <= uniform_high
    assert certificate.verdict == ("violated" if share > 0.6 else "satisfied")


def test_a_query_on_a_protected_category_is_enumerated_exactly() -> None:
    """x ∈ {0..3}, g a three-category protected feature; class 1 iff x + 3·g2 − 4 > 0, so a
    point is biased iff x ≥ 2. Half the population has g ~ (0.8, 0.1, 0.1) and x ∈ {0, 1},
    half g ~ (0.1, 0.1, 0.8) and x ∈ {2, 3}; P(biased | g = g2) by enumeration in
    Fraction."""
    network = threshold_network([1.0, 0.0, 0.0, 3.0], -4.0, ["x", "g0", "g1", "g2"])
    components = []
    for categories, values in (([0.8, 0.1, 0.1], [0, 1]), ([0.1, 0.1, 0.8], [2, 3])):
        components.append(Product(factors=[
            Factor(columns=["x"], distribution=Discrete(values=values,
                                                        probabilities=[0.5, 0.5])),
            Factor(columns=["g0", "g1", "g2"],
                   distribution=Categorical(probabilities=categories))]))
    population = PopulationModel(
        features=[Feature(name="x", kind="integer", domain=(0, 3)),
                  Feature(name="g", kind="categorical", columns=["g0", "g1", "g2"])],
        distribution=Mixture(weights=[0.5, 0.5], components=components))
    weights = {(0.8, 0.1, 0.1): [0, 1], (0.1, 0.1, 0.8): [2, 3]}
    joint = {(x, g): Fraction(1, 2) * Fraction(1, 2) * Fraction(str(probabilities[g]))
             for probabilities, xs in weights.items() for x in xs for g in range(3)}
    for category in range(3):
        in_query = {key: mass for key, mass in joint.items() if key[1] == category}
        expected = sum(mass for (x, _), mass in in_query.items() if x >= 2) / sum(
            in_query.values())
        certificate = _audit({f"g{category}": (1.0, 1.0)}, population, ["g0", "g1", "g2"],
                             network=network, protected_kind="one_hot")
        low, high = certificate.bounds["biased_share_population"]
        assert Fraction(low) <= expected <= Fraction(high)
        assert high - low <= 1e-9


@pytest.mark.parametrize(("band", "share"), [((0.6, 1.0), 1.0), ((0.0, 0.4), 0.0),
                                             ((0.4, 0.6), 0.5)])
def test_a_continuous_protected_range_conditions_the_share(band: tuple[float, float],
                                                           share: float) -> None:
    """s continuous: half the population has s ~ U[0, 0.5] with x ~ U[0, 0.5], half s ~
    U[0.5, 1] with x ~ U[0.5, 1]; a point is biased iff x > 0.5 (some s ∈ [0, 1] moves
    x + 0.5 s across 1). The share among s ∈ band is the mass of the second half in it."""
    halves = [Product(factors=[Factor(columns=["x"], distribution=Uniform(lower=low, upper=high)),
                               Factor(columns=["s"], distribution=Uniform(lower=low,
                                                                          upper=high))])
              for low, high in ((0.0, 0.5), (0.5, 1.0))]
    population = PopulationModel(
        features=[Feature(name="x", kind="continuous", domain=(0, 1)),
                  Feature(name="s", kind="continuous", domain=(0, 1))],
        distribution=Mixture(weights=[0.5, 0.5], components=halves))
    certificate = _audit({"s": band}, population, ["s"])
    low, high = certificate.bounds["biased_share_population"]
    draws = population.sample(400_000, np.random.default_rng(5))
    draws = draws[(draws[:, 1] >= band[0]) & (draws[:, 1] <= band[1])]
    biased = SHIFTED.classify(np.column_stack([draws[:, 0], np.zeros(len(draws))])) != \
        SHIFTED.classify(np.column_stack([draws[:, 0], np.ones(len(draws))]))
    assert low <= share <= high and high - low <= 0.01
    assert abs(float(biased.mean()) - share) <= 0.01
