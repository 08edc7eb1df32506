"""PV's demographic parity on what earlier oracles did not reach, against exact enumeration in
``Fraction`` (independent of certgate's bounds):

- networks of 3 and 4 hidden ReLU layers with dyadic weights, so that exact ties happen at
  the population's points: a one-logit head (a logit of exactly 0 is class 0) and a 4-logit
  head (equal largest outputs go to the lowest index), the favourable class among them;
- a protected attribute of 4 categories (an integer column, ``privileged`` naming one
  value, the other three the unprivileged group) and of 3 one-hot columns (one column
  protected, privileged 0: the other two categories are the privileged group);
- a Bayesian network whose one-hot group the network reads only in part (one of its three
  columns unread);
- γ at the exact ratio (a tie of the requirement: ``ratio > γ`` fails there, so
  ``satisfied`` is wrong) and 1e-3 either side, in the ratio and difference forms.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from verifier.audits.binding import bind
from verifier.audits.demographic_parity import demographic_parity_audit
from verifier.network import Layer, Network
from verifier.population import population_from_json
from verifier.pv import PVSettings

H_COLUMNS = ["h=x", "h=y", "h=z"]
G_SHARES = [Fraction(3, 16), Fraction(5, 16), Fraction(6, 16), Fraction(2, 16)]
H_GIVEN_G = [[Fraction(8, 16), Fraction(4, 16), Fraction(4, 16)],
             [Fraction(2, 16), Fraction(7, 16), Fraction(7, 16)],
             [Fraction(5, 16), Fraction(5, 16), Fraction(6, 16)],
             [Fraction(1, 16), Fraction(3, 16), Fraction(12, 16)]]
A_GIVEN_H = [[Fraction(4, 16), Fraction(4, 16), Fraction(4, 16), Fraction(4, 16)],
             [Fraction(1, 16), Fraction(3, 16), Fraction(5, 16), Fraction(7, 16)],
             [Fraction(9, 16), Fraction(3, 16), Fraction(3, 16), Fraction(1, 16)]]


def _population() -> dict[str, object]:
    """g (4 integer values) → h (one-hot, 3 categories) → a (integer 0..3); every
    probability a multiple of 1/16, so its float is the rational."""
    def floats(row: list[Fraction]) -> list[float]:
        return [float(p) for p in row]

    return {"format": "certgate.population/v1",
            "features": [{"name": "g", "kind": "integer", "domain": [0, 3]},
                         {"name": "h", "kind": "categorical", "columns": H_COLUMNS},
                         {"name": "a", "kind": "integer", "domain": [0, 3]}],
            "distribution": {"kind": "bayesian_network", "nodes": [
                {"name": "g", "cpt": [{"distribution": {
                    "kind": "discrete", "values": [0, 1, 2, 3],
                    "probabilities": floats(G_SHARES)}}]},
                {"name": "h", "columns": H_COLUMNS, "parents": ["g"], "cpt": [
                    {"condition": {"g": [g, g]}, "distribution": {
                        "kind": "categorical", "probabilities": floats(H_GIVEN_G[g])}}
                    for g in range(4)]},
                {"name": "a", "parents": ["h"], "cpt": [
                    {"condition": {"h": [h, h]}, "distribution": {
                        "kind": "discrete", "values": [0, 1, 2, 3],
                        "probabilities": floats(A_GIVEN_H[h])}}
                    for h in range(3)]}]}}


INPUTS = ["a", "h=y", "g", "h=x"]
"""The network's inputs: ``h=z`` is not read, and the order is not the population's."""


def _points() -> list[tuple[dict[str, int], Fraction]]:
    """Every point of the population with its exact probability."""
    points = []
    for g, h, a in itertools.product(range(4), range(3), range(4)):
        columns = {"g": g, "a": a} | {name: int(h == k) for k, name in enumerate(H_COLUMNS)}
        points.append((columns, G_SHARES[g] * H_GIVEN_G[g][h] * A_GIVEN_H[h][a]))
    return points


def _network(seed: int, hidden: list[int], outputs: int) -> Network:
    """Dyadic weights (quarters) and biases: every output is exact in a few bits."""
    rng = np.random.default_rng(seed)
    sizes = [len(INPUTS), *hidden, outputs]
    layers = [Layer(rng.integers(-3, 4, (n_out, n_in)) / 4.0, rng.integers(-2, 5, n_out) / 4.0,
                    "relu" if k < len(sizes) - 2 else "none")
              for k, (n_in, n_out) in enumerate(itertools.pairwise(sizes))]
    return Network(layers, input_names=INPUTS,
                   output_names=[f"o{k}" for k in range(outputs)])


def _exact_outputs(network: Network, point: dict[str, int]) -> list[Fraction]:
    values = [Fraction(point[name]) for name in INPUTS]
    for layer in network.layers:
        values = [sum((Fraction(float(w)) * v for w, v in zip(row, values, strict=True)),
                      Fraction(float(b)))
                  for row, b in zip(layer.weight, layer.bias, strict=True)]
        if layer.activation == "relu":
            values = [max(Fraction(0), v) for v in values]
    return values


def _exact_class(outputs: list[Fraction]) -> tuple[int, bool]:
    """The class (a logit of exactly 0 is class 0; equal largest outputs: the lowest index)
    and whether the point is a tie."""
    if len(outputs) == 1:
        return int(outputs[0] > 0), outputs[0] == 0
    top = max(outputs)
    return outputs.index(top), outputs.count(top) > 1


def _rates(network: Network, protected: str, privileged: int, favourable: int
           ) -> tuple[Fraction, Fraction, Fraction]:
    """Exact ``P[fav | unprivileged]``, ``P[fav | privileged]`` and the mass of the tied
    points."""
    favoured = {True: Fraction(0), False: Fraction(0)}
    total = {True: Fraction(0), False: Fraction(0)}
    tied = Fraction(0)
    for point, mass in _points():
        group = point[protected] == privileged
        label, tie = _exact_class(_exact_outputs(network, point))
        total[group] += mass
        favoured[group] += mass * (label == favourable)
        tied += mass * tie
    return favoured[False] / total[False], favoured[True] / total[True], tied


def _holds(interval: tuple[float, float], exact: Fraction) -> bool:
    low, high = (float(end) for end in interval)
    return (low == -np.inf or Fraction(low) <= exact) and (high == np.inf
                                                           or exact <= Fraction(high))


CASES = {
    # name: (network seed, hidden widths, outputs, favourable class, protected, privileged);
    # each seed drawn so that ties hold 5-54 % of the mass and P[fav | unprivileged] is the
    # smaller rate (γ ≤ 1 in the ratio form)
    "3 hidden, one logit, class 0 favourable, g = 2 privileged": (235, [5, 4, 3], 1, 0, "g", 2),
    "4 hidden, one logit, g = 3 privileged": (119, [5, 4, 4, 3], 1, 1, "g", 3),
    "4 hidden, 4 logits, g = 0 privileged": (61, [5, 4, 4, 3], 4, 2, "g", 0),
    "3 hidden, 5 logits, g = 1 privileged": (6, [4, 4, 3], 5, 3, "g", 1),
    "3 hidden, 4 logits, h=y protected, 0 privileged": (149, [4, 4, 3], 4, 0, "h=y", 0),
}


@pytest.mark.parametrize("form", ["ratio", "difference"])
@pytest.mark.parametrize("case", list(CASES))
def test_deep_heads_and_many_categories_against_enumeration(case: str, form: str) -> None:
    seed, hidden, outputs, favourable, protected, privileged = CASES[case]
    network = _network(seed, hidden, outputs)
    unprivileged_rate, privileged_rate, tied = _rates(network, protected, privileged,
                                                      favourable)
    assert tied > Fraction(1, 100)  # the exact ties are exercised
    exact = (unprivileged_rate / privileged_rate if form == "ratio"
             else privileged_rate - unprivileged_rate)
    assert 0 < exact < 1
    net, population = bind(network, population_from_json(_population()), None, "test")
    for offset in (-1e-3, 0.0, 1e-3):
        gamma = float(exact) + offset
        certificate = demographic_parity_audit(
            net, population, protected=protected, privileged=privileged,
            favorable_class=favourable, gamma=gamma, form=form,
            settings=PVSettings(timeout_s=60.0))
        bounds = certificate.bounds
        assert _holds(bounds["p_unprivileged"], unprivileged_rate), (offset, bounds)
        assert _holds(bounds["p_privileged"], privileged_rate), (offset, bounds)
        assert _holds(bounds["value"], exact), (offset, bounds)
        passes = exact > Fraction(gamma) if form == "ratio" else exact < Fraction(gamma)
        if offset == 0.0:
            assert certificate.verdict in ("satisfied" if passes else "violated", "unknown")
        else:
            assert certificate.verdict == ("satisfied" if passes else "violated"), (
                offset, float(exact), bounds)
