"""WMI on columns with point masses beside a density (a fitted histogram's atoms).

Such a column is fixed in some prior terms and integrated in others; the integral splits into
each atom's weight times the integrand at its value plus the density's integral, and a term
fixing every column is read at its point in exact arithmetic.

Oracles: closed forms computed with ``Fraction`` (ties at an atom decided by the class rule: a
logit of exactly 0 is class 0), dense Monte Carlo (± 4 standard errors) on a random ReLU
network, and, on the default fit of a seeded table, Monte Carlo on the fitted population.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from certgate.population_data import fit_population
from tests.causal_nets import random_network, threshold_network
from tests.test_population_float_atoms import balance_table
from verifier.audits import run_audit
from verifier.audits.monotonicity import MonotonicitySettings
from verifier.population import (
    Discrete,
    Factor,
    Feature,
    Mixture,
    PointMass,
    PopulationModel,
    Product,
    Uniform,
)
from verifier.wmi import branched, equivalence, local_robustness, monotonicity, noise_robustness
from verifier.wmi.measures import ColumnMarginal, strict_order_probability
from verifier.wmi.noise import uniform_noise
from verifier.wmi.properties.run import run_options
from verifier.wmi.terms import prior_terms


def _mixed(atoms: dict[float, float], lower: float = 0.0, upper: float = 1.0) -> Mixture:
    """Point masses ``value: weight`` and the rest uniform on ``[lower, upper]``."""
    rest = 1.0 - sum(atoms.values())
    return Mixture(weights=[*atoms.values(), rest],
                   components=[*(PointMass(value=v) for v in atoms),
                               Uniform(lower=lower, upper=upper)])


def _population(columns: dict[str, object]) -> PopulationModel:
    return PopulationModel(
        features=[Feature(name=name, kind="continuous") for name in columns],
        distribution=Product(factors=[Factor(columns=[name], distribution=distribution)
                                      for name, distribution in columns.items()]))


ATOM_AND_UNIFORM = {0.25: 0.4}          # x = 1/4 with weight 2/5, else U(0, 1)
TWO_ATOMS = {0.25: 0.3, 0.75: 0.2}      # x = 1/4 (3/10), x = 3/4 (1/5), else U(0, 1)


def _exact(result, expected: Fraction) -> None:
    assert result.exact
    assert result.probability == pytest.approx(float(expected), abs=1e-12)


def test_the_prior_keeps_the_column_mixed() -> None:
    terms = prior_terms(_population({"x": _mixed(TWO_ATOMS), "y": Uniform(lower=0, upper=1)}))
    assert terms.mixed_columns() == [0] and terms.discrete_columns() == []


def test_equivalence_splits_into_the_atom_and_the_density() -> None:
    """c₁ = [x + y > 1], c₂ = [y > 3/4]. At x = 1/4 they agree everywhere; under x ~ U(0, 1)
    they disagree between y = 1 − x and y = 3/4: ∫|1/4 − x| dx = 5/16. So P(agree) =
    2/5 + 3/5 · 11/16 = 13/16."""
    prior = _population({"x": _mixed(ATOM_AND_UNIFORM), "y": Uniform(lower=0, upper=1)})
    first = threshold_network([1.0, 1.0], -1.0, ["x", "y"])
    second = threshold_network([0.0, 1.0], -0.75, ["x", "y"])
    _exact(equivalence(first, second, prior), Fraction(13, 16))


def test_a_tie_on_the_atom_is_the_class_rule() -> None:
    """c₁ = [x > 1/4] is class 0 on the atom x = 1/4 (a logit of exactly 0), c₂ = [x > 1/5]
    class 1: they disagree on the atom (2/5) and on (1/5, 1/4] of the density (3/5 · 1/20).
    A reading that integrated the atom away would give 1 − 3/100."""
    prior = _population({"x": _mixed(ATOM_AND_UNIFORM)})
    first = threshold_network([1.0], -0.25, ["x"])
    second = threshold_network([1.0], -0.2, ["x"])
    _exact(equivalence(first, second, prior), 1 - Fraction(2, 5) - Fraction(3, 5) * Fraction(1, 20))


def test_local_robustness_counts_the_atom_inside_the_box() -> None:
    """Box [0.2, 0.4] around 0.3 (class 1 under [x > 1/4]): P(box) = 2/5 + 3/5 · 1/5, class 1
    on (1/4, 0.4]: 3/5 · 3/20; the atom is class 0."""
    prior = _population({"x": _mixed(ATOM_AND_UNIFORM)})
    network = threshold_network([1.0], -0.25, ["x"])
    result = local_robustness(network, prior, [0.3], 0.1)
    box = Fraction(2, 5) + Fraction(3, 5) * (Fraction(0.4) - Fraction(0.2))
    kept = Fraction(3, 5) * (Fraction(0.4) - Fraction(1, 4))
    assert result.extra["expected_class"] == 1
    _exact(result, kept / box)


def _order_oracle(decreasing: bool) -> Fraction:
    """c = [x < 1/2] (logit 1/2 − x), x from TWO_ATOMS, x′ an independent draw. Increasing:
    the violation c(x) = 1, c(x′) = 0 is x < 1/2 <= x′, which implies x < x′; the
    precondition P(x < x′) = (1 − Σ w²)/2 leaves the ties between atoms out. Decreasing: no
    pair with x > x′ has x < 1/2 <= x′."""
    if decreasing:
        return Fraction(1)
    below = Fraction(3, 10) + Fraction(1, 2) * Fraction(1, 2)
    above = Fraction(1, 5) + Fraction(1, 2) * Fraction(1, 2)
    ordered = (1 - Fraction(3, 10) ** 2 - Fraction(1, 5) ** 2) / 2
    return 1 - below * above / ordered


@pytest.mark.parametrize("decreasing", [False, True])
def test_monotonicity_in_a_mixed_feature_takes_every_pair_of_parts(decreasing: bool) -> None:
    prior = _population({"x": _mixed(TWO_ATOMS)})
    network = threshold_network([-1.0], 0.5, ["x"])
    result = monotonicity(network, prior, 0, decreasing=decreasing, use_prior=True)
    _exact(result, _order_oracle(decreasing))


def test_the_tie_probability_of_a_mixed_column_is_its_atoms_squared() -> None:
    prior = _population({"x": _mixed(TWO_ATOMS)})
    marginal = ColumnMarginal(prior, 0)
    assert list(marginal.point_masses()) == [0.25, 0.75]
    low, high = strict_order_probability(marginal)
    ordered = (1 - Fraction(3, 10) ** 2 - Fraction(1, 5) ** 2) / 2
    assert low <= ordered <= high and high - low < 1e-12


def test_box_branching_monotonicity_in_a_mixed_feature() -> None:
    """The branching path (priors too large to enumerate) states the same probability."""
    prior = _population({"x": _mixed(TWO_ATOMS), "y": Uniform(lower=0, upper=1)})
    network = threshold_network([-1.0, 0.0], 0.5, ["x", "y"])
    result = branched.monotonicity(network, prior, 0, decreasing=False, favorable_class=1,
                                   output=None, use_prior=True,
                                   engine=run_options(None, None, "crown", 60.0, 1e-6))
    expected = float(_order_oracle(False))
    assert result.probability_lower <= expected <= result.probability_upper
    assert result.probability_upper - result.probability_lower < 1e-3


def test_monotonicity_on_the_support_box_reads_a_mixed_column_as_uniform() -> None:
    """use_prior false: x uniform on [0, 1] (its atoms are a population fact, not the box's):
    P(x < 1/2 <= x′ | x < x′) = (1/4) / (1/2)."""
    prior = _population({"x": _mixed(TWO_ATOMS)})
    network = threshold_network([-1.0], 0.5, ["x"])
    _exact(monotonicity(network, prior, 0, use_prior=False), Fraction(1, 2))


def test_noise_moves_atoms_onto_a_tie() -> None:
    """c = [x < 1/2]; noise 0 or 1/4 (½ each). The atom 1/4 moved by 1/4 lands on the tie
    1/2 (class 0): 3/10 · 1/2 changes; the atom 3/4 stays class 0; the density changes on
    [1/4, 1/2): 1/2 · 1/4 · 1/2. A uniform noise on [−1/10, 1/10] moves no atom across and
    changes the density's class on a band of width |n|: 1/2 · E|n| = 1/2 · 1/20."""
    prior = _population({"x": _mixed(TWO_ATOMS)})
    network = threshold_network([-1.0], 0.5, ["x"])
    shifts = Discrete(values=[0.0, 0.25], probabilities=[0.5, 0.5])
    changed = Fraction(3, 10) / 2 + Fraction(1, 2) * Fraction(1, 4) / 2
    _exact(noise_robustness(network, prior, shifts, [0]), 1 - changed)
    _exact(noise_robustness(network, prior, uniform_noise(-0.1, 0.1), [0]),
           1 - Fraction(1, 2) * Fraction(1, 20))


def test_a_shifted_atom_is_read_at_its_real_value() -> None:
    """c = [11 x > C] with C = 3.3000000000000003 (a float); the atom 0.1 (weight 1/2) beside
    U(0, 1) moved by the noise 0.2 (probability 1/2, else 0). In real arithmetic
    11 (0.1 + 0.2) < C, so the moved atom stays class 0 like the atom; the float sum
    0.1 + 0.2 = 0.30000000000000004 is class 1. Only the density changes class, on
    (C/11 − 0.2, C/11]: 1/2 · 1/2 · 0.2. A result that read the atom at the float sum would
    claim exactly 1/4 less; the certified interval must contain the real probability."""
    bound = 3.3000000000000003
    atom, shift = 0.1, 0.2
    assert 11 * (Fraction(atom) + Fraction(shift)) < Fraction(bound) < 11 * Fraction(atom + shift)
    prior = _population({"x": _mixed({atom: 0.5})})
    network = threshold_network([11.0], -bound, ["x"])
    result = noise_robustness(network, prior,
                              Discrete(values=[0.0, shift], probabilities=[0.5, 0.5]), [0])
    expected = 1 - Fraction(1, 2) * Fraction(1, 2) * Fraction(shift)
    slack = 1e-12
    assert result.probability_lower - slack <= expected <= result.probability_upper + slack


def test_box_branching_reads_a_shifted_value_at_its_real_sum() -> None:
    """The same network on x ∈ {0.1, 0.5} (½ each), all discrete, so boxes are branched:
    x and the noise stay separate coordinates, their sum is formed inside the stacked network
    and single points are decided in rationals. In real arithmetic no shift changes a class
    (11 · 0.7 > C too): P = 1; the float sum would flip the pair (0.1, 0.2): 3/4."""
    network = threshold_network([11.0], -3.3000000000000003, ["x"])
    prior = _population({"x": Discrete(values=[0.1, 0.5], probabilities=[0.5, 0.5])})
    result = noise_robustness(network, prior,
                              Discrete(values=[0.0, 0.2], probabilities=[0.5, 0.5]), [0],
                              timeout_s=60)
    assert result.extra["method"] == "box branching (PV)"
    assert result.probability_lower > 0.75 + 1e-6 and result.probability_upper == 1.0


def _random_prior() -> PopulationModel:
    """x0 with atoms at 0.3 (0.35) and 0.8 (0.15) beside U(0, 1); x1 in {0, 1}; x2 with an
    atom at 0 (0.5) beside U(−1, 1)."""
    return _population({"x0": _mixed({0.3: 0.35, 0.8: 0.15}),
                        "x1": Discrete(values=[0.0, 1.0], probabilities=[0.6, 0.4]),
                        "x2": _mixed({0.0: 0.5}, -1.0, 1.0)})


def _classes(network, points: np.ndarray) -> np.ndarray:
    return network.classify(points)


def _within(result, estimate: float, count: int) -> None:
    """The certified interval (a sliver region of float-rounding width may keep it from being
    one value) contains the estimate ± 4 standard errors."""
    assert result.probability_upper - result.probability_lower < 1e-9
    error = math.sqrt(max(estimate * (1 - estimate), 1e-12) / count)
    assert result.probability_lower - 4 * error <= estimate <= result.probability_upper + 4 * error


DRAWS = 200_000


@pytest.mark.parametrize("seed", [2, 7])
def test_random_network_against_dense_monte_carlo(seed: int) -> None:
    prior = _random_prior()
    network = random_network(3, [6], seed)
    other = random_network(3, [5], seed + 10)
    rng = np.random.default_rng(seed)
    x = prior.sample(DRAWS, rng)
    classes = _classes(network, x)

    result = equivalence(network, other, prior)
    _within(result, float(np.mean(classes == _classes(other, x))), DRAWS)

    second = x.copy()
    second[:, 0] = prior.sample(DRAWS, rng)[:, 0]
    ordered = x[:, 0] < second[:, 0]
    lost = (classes == 1) & (_classes(network, second) != 1)
    result = monotonicity(network, prior, 0, use_prior=True)
    assert result.probability_upper < 0.99
    _within(result, 1 - float(np.mean(lost[ordered])), int(ordered.sum()))

    moved = x.copy()
    moved[:, 2] += rng.uniform(-0.3, 0.3, size=DRAWS)
    result = noise_robustness(network, prior, uniform_noise(-0.3, 0.3), [2])
    _within(result, float(np.mean(classes == _classes(network, moved))), DRAWS)


def test_default_fit_monotonicity_in_a_balance_with_an_atom() -> None:
    """The default fit keeps balance = 0.0 (46 % of the rows) as an atom beside histogram
    bins. Class 1 iff balance < 100: increasing monotonicity fails exactly on pairs with
    balance < 100 <= balance′; the computed probability (its float interval) contains a
    Monte Carlo estimate on the fitted population (pairs with a strictly smaller balance)."""
    model = fit_population(balance_table(), protected="female")
    columns = list(model.columns)
    weights = [-1.0 if name == "balance" else 0.0 for name in columns]
    network = threshold_network(weights, 100.0, columns)
    result = run_audit(MonotonicitySettings(kind="monotonicity", feature="balance",
                                            min_probability=0.1, use_prior=True,
                                            timeout_s=120), network, model)
    # float64 quadrature, not proven; the certificate's interval is box branching's proof
    assert result.details["proven"] is False
    assert result.details["proven_by"] == "box branching (PV)"
    proven_low, proven_high = result.bounds["probability"]
    low, high = result.details["float_interval"]
    rng = np.random.default_rng(3)
    first = pd.DataFrame(model.sample(DRAWS, rng), columns=columns).balance.to_numpy()
    second = pd.DataFrame(model.sample(DRAWS, rng), columns=columns).balance.to_numpy()
    ordered = first < second
    kept = 1 - float(np.mean((first < 100.0)[ordered] & (second >= 100.0)[ordered]))
    error = math.sqrt(kept * (1 - kept) / int(ordered.sum()))
    assert low - 4 * error <= kept <= high + 4 * error
    assert high - low < 3e-6  # the exact result ± the float allowance
    assert proven_low - 4 * error <= kept <= proven_high + 4 * error
