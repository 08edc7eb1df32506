"""PV's per-call set-up built once (the events' truth table, the quantile table's kept masses,
the prepared network) against oracles independent of certgate, where it could go wrong:

- qualified parity whose events have 9, 10 and 11 atoms (either side of the table's
  ``TABLED_ATOMS`` = 10), against exact enumeration in ``Fraction`` of a small discrete
  population and a network with dyadic weights (its classes exact in rationals);
- a Bayesian network with normal CPT rows whose child is conditioned on cells meeting at
  ``-0.0``/``0.0``, the network's threshold at a quantile-table entry (an earlier cut) and
  one float either side of it, against the closed form in ``mpmath``.

γ is put just below and above the exact ratio, so each verdict needs the interval on the
right side of the truth; every certified interval must hold the truth.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from tests.bound_oracles import rational_outputs
from verifier.audits.binding import bind
from verifier.audits.demographic_parity import demographic_parity_audit
from verifier.network import Layer, Network
from verifier.population import population_from_json
from verifier.pv import PVSettings, population_domain
from verifier.pv.atoms import TABLED_ATOMS
from verifier.pv.events import TrackedEvents
from verifier.pv.quantiles import QUANTILE_LEVELS, MarginalQuantiles
from verifier.spec import Names, demographic_parity

COLUMNS = ["s", "a", "b", "c", "d"]
CONDITIONS = ["a >= 1", "b <= 2", "c >= 1", "d <= 2"]
VALUES = [0, 1, 2, 3]
WEIGHTS = {"a": [1, 2, 3, 2], "b": [3, 1, 1, 3], "c": [2, 2, 1, 3], "d": [1, 3, 2, 2]}
CLASSES = 4


def _discrete_population() -> dict[str, object]:
    factors = [{"columns": ["s"], "distribution": {
        "kind": "discrete", "values": [0, 1], "probabilities": [0.375, 0.625]}}]
    factors += [{"columns": [name], "distribution": {
        "kind": "discrete", "values": VALUES,
        "probabilities": [w / sum(weights) for w in weights]}}
        for name, weights in WEIGHTS.items()]
    return {"format": "certgate.population/v1",
            "features": [{"name": "s", "kind": "binary"}] + [
                {"name": name, "kind": "integer", "domain": [0, 3]} for name in WEIGHTS],
            "distribution": {"kind": "product", "factors": factors}}


def _dyadic_network() -> Network:
    rng = np.random.default_rng(1)
    first = rng.integers(-8, 9, (8, 5)) / 8.0, rng.integers(-8, 9, 8) / 8.0
    second = rng.integers(-8, 9, (CLASSES, 8)) / 8.0, rng.integers(-8, 9, CLASSES) / 8.0
    return Network([Layer(*first, "relu"), Layer(*second, "none")], input_names=COLUMNS,
                   output_names=[f"o{k}" for k in range(CLASSES)])


def _exact_class(network: Network, point: tuple[int, ...]) -> int:
    """The argmax class (the lowest index on a tie) in rationals."""
    values = rational_outputs(network, point)
    return max(range(len(values)), key=lambda k: (values[k], -k))


def _exact_rates(network: Network, favourable: int, conditions: int) -> dict[int, Fraction]:
    """``P[class = favourable | s, qualified]`` for s = 0 and 1, enumerated exactly."""
    share = {name: [Fraction(w, sum(weights)) for w in weights]
             for name, weights in WEIGHTS.items()}
    tests = [lambda p: p[1] >= 1, lambda p: p[2] <= 2, lambda p: p[3] >= 1,
             lambda p: p[4] <= 2][:conditions]
    favoured = {0: Fraction(0), 1: Fraction(0)}
    total = {0: Fraction(0), 1: Fraction(0)}
    for point in itertools.product([0, 1], *[VALUES] * len(WEIGHTS)):
        if not all(test(point) for test in tests):
            continue
        mass = [Fraction(3, 8), Fraction(5, 8)][point[0]]
        for name, value in zip(WEIGHTS, point[1:], strict=True):
            mass *= share[name][value]
        total[point[0]] += mass
        if _exact_class(network, point) == favourable:
            favoured[point[0]] += mass
    return {group: favoured[group] / total[group] for group in (0, 1)}


def _holds(interval: tuple[float, float], exact: Fraction | mpmath.mpf) -> bool:
    """Whether the float interval holds ``exact`` (each end read exactly)."""
    low, high = interval
    if isinstance(exact, Fraction):
        return Fraction(low) <= exact <= Fraction(high)
    return mpmath.mpf(low) <= exact <= mpmath.mpf(high)


def _check(certificate: object, exact: dict[str, object], gamma: float, ratio: object) -> None:
    for name, value in exact.items():
        assert _holds(certificate.bounds[name], value), (name, certificate.bounds[name], value)
    expected = "satisfied" if ratio > gamma else "violated"
    assert certificate.verdict == expected, (gamma, float(ratio), certificate.bounds)


@pytest.mark.parametrize("conditions", [2, 3, 4])
@pytest.mark.parametrize("side", [-1, 1])
def test_qualified_parity_either_side_of_the_tabled_atoms(conditions: int, side: int) -> None:
    network = _dyadic_network()
    qualified = " and ".join(CONDITIONS[:conditions])
    names = Names(COLUMNS, [f"o{k}" for k in range(CLASSES)])
    spec = demographic_parity(names, protected="s", privileged=1, favorable_class=2,
                              gamma=0.5, qualified=qualified)
    atoms = len(TrackedEvents(spec).atoms)
    assert atoms == {2: TABLED_ATOMS - 1, 3: TABLED_ATOMS, 4: TABLED_ATOMS + 1}[conditions]
    rates = _exact_rates(network, 2, conditions)
    privileged = 1 if rates[0] <= rates[1] else 0
    exact = {"p_privileged": rates[privileged], "p_unprivileged": rates[1 - privileged]}
    ratio = exact["p_unprivileged"] / exact["p_privileged"]
    assert 0 < ratio < Fraction(99, 100)
    gamma = float(ratio) + side * 1e-3
    net, population = bind(network, population_from_json(_discrete_population()), None, "test")
    certificate = demographic_parity_audit(
        net, population, protected="s", privileged=privileged, favorable_class=2, gamma=gamma,
        qualified=qualified, settings=PVSettings(timeout_s=60.0))
    _check(certificate, {**exact, "value": ratio}, gamma, ratio)


NORMAL_ROWS = {"format": "certgate.population/v1",
               "features": [{"name": "s", "kind": "binary"},
                            {"name": "x", "kind": "continuous"},
                            {"name": "y", "kind": "continuous"}],
               "distribution": {"kind": "bayesian_network", "nodes": [
                   {"name": "s", "cpt": [{"distribution": {
                       "kind": "discrete", "values": [0, 1], "probabilities": [0.4, 0.6]}}]},
                   {"name": "x", "parents": ["s"], "cpt": [
                       {"condition": {"s": [0, 0]},
                        "distribution": {"kind": "normal", "mean": -0.3, "std": 1.7}},
                       {"condition": {"s": [1, 1]},
                        "distribution": {"kind": "normal", "mean": 0.2, "std": 0.9}}]},
                   {"name": "y", "parents": ["x"], "cpt": [
                       {"condition": {"x": [None, -0.0]},
                        "distribution": {"kind": "normal", "mean": 1.0, "std": 2.0}},
                       {"condition": {"x": [0.0, None]},
                        "distribution": {"kind": "normal", "mean": -1.0, "std": 0.5}}]}]}}
"""y's rows meet at x = -0.0 / 0.0 (a point of no mass)."""


def _normal_rate(t: float, group: int) -> mpmath.mpf:
    """``P[y > t | s = group]`` in closed form (40 digits)."""
    with mpmath.workdps(40):
        mean, std = [(-0.3, 1.7), (0.2, 0.9)][group]
        below = mpmath.ncdf((0 - mpmath.mpf(mean)) / mpmath.mpf(std))
        return (below * (1 - mpmath.ncdf((mpmath.mpf(t) - 1) / 2))
                + (1 - below) * (1 - mpmath.ncdf((mpmath.mpf(t) + 1) / mpmath.mpf(0.5))))


def _median_of_y() -> float:
    population = population_from_json(NORMAL_ROWS)
    table = MarginalQuantiles(*population_domain(population)).values[2]
    return float(table[np.searchsorted(QUANTILE_LEVELS, 0.5)])


@pytest.mark.parametrize("where", ["negative zero", "entry", "float above", "float below"])
@pytest.mark.parametrize("side", [-1, 1])
def test_normal_rows_cut_at_signed_zero_and_at_table_entries(where: str, side: int) -> None:
    median = _median_of_y()
    t = {"negative zero": -0.0, "entry": median, "float above": np.nextafter(median, 1.0),
         "float below": np.nextafter(median, -1.0)}[where]
    network = Network([Layer(np.array([[0.0, 0.0, 1.0]]), np.array([-t]), "none")],
                      input_names=["s", "x", "y"])
    exact = {"p_privileged": _normal_rate(t, 0), "p_unprivileged": _normal_rate(t, 1)}
    ratio = exact["p_unprivileged"] / exact["p_privileged"]
    gamma = float(ratio) + side * 1e-3
    net, population = bind(network, population_from_json(NORMAL_ROWS), None, "test")
    certificate = demographic_parity_audit(
        net, population, protected="s", privileged=0, favorable_class=1, gamma=gamma,
        settings=PVSettings(timeout_s=60.0))
    _check(certificate, {**exact, "value": ratio}, gamma, ratio)
