"""Noise robustness with discrete noise: each noise value shifts its feature by a constant in
the second copy, on a discrete (integer) column or a continuous one; continuous noise on a
discrete column stays refused. Oracles: enumeration with Fraction arithmetic (closed-form
1-D lengths) and 10⁶-sample Monte Carlo."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tests.test_wmi_discrete_monotone import (
    PROBABILITIES,
    V_SHAPE,
    VALUES,
    integer_and_uniform,
    mixed_prior,
    random_network,
    threshold,
)
from verifier.population import Discrete
from verifier.wmi import WMIInputError, noise_robustness
from verifier.wmi.noise import uniform_noise

SHIFTS = [-1, 0, 1]
SHIFT_PROBABILITIES = [Fraction(1, 4), Fraction(1, 2), Fraction(1, 4)]


def _clipped(value: Fraction) -> Fraction:
    return min(max(value, Fraction(0)), Fraction(1))


def test_integer_noise_on_an_integer_column_matches_enumeration() -> None:
    """class(x, k) = [x >= t(k)] with x ~ U[0, 1]: the classes of (x, k) and (x, k + d)
    differ on a set of length |t(k) − t(k + d)| (t stays in [0, 1] for k + d in −1..4)."""
    noise = Discrete(values=SHIFTS, probabilities=[float(q) for q in SHIFT_PROBABILITIES])
    result = noise_robustness(V_SHAPE, integer_and_uniform(), noise, [0])
    assert result.exact
    expected = Fraction(1)
    for k, p in zip(VALUES, PROBABILITIES, strict=True):
        for d, q in zip(SHIFTS, SHIFT_PROBABILITIES, strict=True):
            expected -= p * q * abs(_clipped(threshold(k)) - _clipped(threshold(k + d)))
    assert expected < 1
    assert result.probability == pytest.approx(float(expected), abs=1e-9)


def test_discrete_noise_on_a_continuous_column_matches_enumeration() -> None:
    """Shifting x by d flips the class for x in [t − d, t) (d > 0) or [t, t − d) (d < 0),
    intersected with [0, 1]."""
    shifts = [Fraction(-1, 10), Fraction(1, 5)]
    noise = Discrete(values=[float(d) for d in shifts], probabilities=[0.5, 0.5])
    result = noise_robustness(V_SHAPE, integer_and_uniform(), noise, [1])
    assert result.exact
    expected = Fraction(1)
    for k, p in zip(VALUES, PROBABILITIES, strict=True):
        t = threshold(k)
        for d in shifts:
            low, high = (t - d, t) if d > 0 else (t, t - d)
            expected -= p * Fraction(1, 2) * max(Fraction(0), _clipped(high) - _clipped(low))
    assert result.probability == pytest.approx(float(expected), abs=1e-9)


def test_continuous_noise_on_a_discrete_column_is_refused() -> None:
    with pytest.raises(WMIInputError, match="column 'k' needs a continuous column or a "
                                            "discrete noise distribution"):
        noise_robustness(V_SHAPE, integer_and_uniform(), uniform_noise(-0.5, 0.5), [0])


@pytest.mark.parametrize("seed", [0, 7])
def test_random_networks_with_integer_noise_contain_monte_carlo(seed: int) -> None:
    """k ∈ {0..4} shifted by −1 / +1 / +2 under normal / truncated-normal marginals (seed 0
    ends at its budget: the containment asserted holds at any budget)."""
    net, prior = random_network(seed, 3), mixed_prior()
    shifts, weights = [-1.0, 1.0, 2.0], [0.3, 0.5, 0.2]
    result = noise_robustness(net, prior, Discrete(values=shifts, probabilities=weights), [0],
                              timeout_s=15, tolerance=1e-3)
    assert not result.exact
    rng = np.random.default_rng(seed)
    samples = 1_000_000
    x = prior.sample(samples, rng)
    noisy = x.copy()
    noisy[:, 0] += rng.choice(shifts, size=samples, p=weights)
    same = np.argmax(net.evaluate(x), axis=1) == np.argmax(net.evaluate(noisy), axis=1)
    estimate = float(same.mean())
    error = float(np.sqrt(max(estimate * (1 - estimate), 1.0 / samples) / samples))
    assert result.probability_lower - 4 * error <= estimate
    assert estimate <= result.probability_upper + 4 * error
    assert 0.0 < estimate < 1.0
