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
  ``satisfied`` is wrong) and 1e-3 either side, in the ratio and difference forms;
- ``verify probability`` of strict and non-strict orders of outputs that tie exactly, a
  negated order and a condition on the protected column, their sum and difference against
  thresholds at the exact value and 1e-3 either side.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import numpy as np
import pytest

from pipeline_steps.cli import main
from tests.bound_oracles import contains, rational_outputs
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
    return rational_outputs(network, [point[name] for name in INPUTS])


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
        assert contains(*bounds["p_unprivileged"], unprivileged_rate), (offset, bounds)
        assert contains(*bounds["p_privileged"], privileged_rate), (offset, bounds)
        assert contains(*bounds["value"], exact), (offset, bounds)
        passes = exact > Fraction(gamma) if form == "ratio" else exact < Fraction(gamma)
        if offset == 0.0:
            assert certificate.verdict in ("satisfied" if passes else "violated", "unknown")
        else:
            assert certificate.verdict == ("satisfied" if passes else "violated"), (
                offset, float(exact), bounds)


SPEC_EVENTS = {
    "p1": ("y.o0 > y.o1", lambda out, point: out[0] > out[1]),
    "p2": ("y.o2 >= y.o0 and x.g != 1", lambda out, point: out[2] >= out[0] and point["g"] != 1),
    "p3": ("not (y.o1 >= y.o2)", lambda out, point: not out[1] >= out[2]),
}
"""Strict and non-strict orders of outputs that tie exactly at some points, and a negation."""


def _conditional(network: Network) -> dict[str, Fraction]:
    """Exact ``P[event | a >= 1]`` for each of :data:`SPEC_EVENTS`."""
    hits = dict.fromkeys(SPEC_EVENTS, Fraction(0))
    total = Fraction(0)
    for point, mass in _points():
        if point["a"] < 1:
            continue
        outputs = _exact_outputs(network, point)
        total += mass
        for name, (_, holds) in SPEC_EVENTS.items():
            hits[name] += mass * holds(outputs, point)
    return {name: hit / total for name, hit in hits.items()}


def _tied_orders(network: Network) -> Fraction:
    """The mass of the points where an order the events read is an exact tie."""
    return sum((mass for point, mass in _points()
                if len({*_exact_outputs(network, point)[:3]}) < 3), Fraction(0))


@pytest.mark.parametrize("comparison", [">=", "<"])
def test_probability_of_tied_output_orders_against_enumeration(
        tmp_path, capsys, comparison: str) -> None:
    network = _network(149, [4, 4, 3], 4)
    assert _tied_orders(network) > Fraction(1, 100)
    exact = _conditional(network)
    value = exact["p1"] - exact["p2"] + exact["p3"]
    model, population = tmp_path / "net.json", tmp_path / "population.json"
    model.write_text(json.dumps({
        "inputs": INPUTS, "outputs": [f"o{k}" for k in range(4)],
        "layers": [{"weight": layer.weight.tolist(), "bias": layer.bias.tolist(),
                    "activation": layer.activation} for layer in network.layers]}))
    population.write_text(json.dumps(_population()))
    for offset in (-1e-3, 0.0, 1e-3):
        threshold = float(value) + offset
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps({
            "probabilities": {name: {"event": text, "given": "x.a >= 1"}
                              for name, (text, _) in SPEC_EVENTS.items()},
            "expression": "p1 - p2 + p3", "comparison": comparison, "threshold": threshold}))
        code = main(["verify", "probability", "--model", str(model), "--population",
                     str(population), "--spec", str(spec), "--json", "--no-progress",
                     "--timeout", "60"])
        payload = json.loads(capsys.readouterr().out)
        for name, rate in exact.items():
            assert contains(*payload["probabilities"][name], rate), (name, payload)
        assert contains(*payload["value"], value), payload
        passes = value >= Fraction(threshold) if comparison == ">=" else value < Fraction(threshold)
        expected = "satisfied" if passes else "violated"
        if offset == 0.0:
            assert payload["verdict"] in (expected, "unknown"), payload
        else:
            assert payload["verdict"] == expected, (offset, float(value), payload)
            assert code == (0 if passes else 1)


CONTINUOUS = {
    "format": "certgate.population/v1",
    "features": [{"name": "s", "kind": "binary"}, {"name": "x", "kind": "continuous"},
                 {"name": "y", "kind": "continuous"}, {"name": "z", "kind": "continuous"}],
    "distribution": {"kind": "bayesian_network", "nodes": [
        {"name": "s", "cpt": [{"distribution": {
            "kind": "discrete", "values": [0, 1], "probabilities": [0.749, 0.251]}}]},
        {"name": "x", "parents": ["s"], "cpt": [
            {"condition": {"s": [0, 0]},
             "distribution": {"kind": "normal", "mean": 0.672, "std": 1.039}},
            {"condition": {"s": [1, 1]},
             "distribution": {"kind": "normal", "mean": 0.967, "std": 1.829}}]},
        {"name": "y", "parents": ["x"], "cpt": [
            {"condition": {"x": [None, -0.453]},
             "distribution": {"kind": "normal", "mean": 0.306, "std": 0.39}},
            {"condition": {"x": [-0.453, None]},
             "distribution": {"kind": "truncated_normal", "mean": -0.191, "std": 0.911,
                              "lower": -0.753, "upper": None}}]},
        {"name": "z", "parents": ["s"], "cpt": [
            {"condition": {"s": [group, group]}, "distribution": {
                "kind": "mixture", "weights": [atom, 1 - atom], "components": [
                    {"kind": "point", "value": 0.0},
                    {"kind": "uniform", "lower": low, "upper": high}]}}
            for group, (atom, low, high) in enumerate([(0.073, -0.999, 1.13),
                                                       (0.074, -0.784, 1.93)])]}]}}
"""A continuous child of a continuous parent (y's rows cut x at -0.453, the upper row a
truncated normal), and z an atom at 0 beside a uniform density, both under s."""


def _sample_continuous(group: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Draws of (s, x, y, z) given s = group, sampled from the parameters above by numpy and
    scipy (not by certgate)."""
    from scipy.stats import truncnorm

    mean, std = [(0.672, 1.039), (0.967, 1.829)][group]
    x = rng.normal(mean, std, draws)
    below = x <= -0.453
    y = np.empty(draws)
    y[below] = rng.normal(0.306, 0.39, int(below.sum()))
    y[~below] = truncnorm.rvs((-0.753 + 0.191) / 0.911, np.inf, loc=-0.191, scale=0.911,
                              size=int((~below).sum()), random_state=rng)
    atom, low, high = [(0.073, -0.999, 1.13), (0.074, -0.784, 1.93)][group]
    z = np.where(rng.random(draws) < atom, 0.0, rng.uniform(low, high, draws))
    return np.stack([np.full(draws, float(group)), x, y, z], axis=1)


def _torch_classes(network: Network, points: np.ndarray) -> np.ndarray:
    """The argmax class of each point, computed by torch in float64."""
    import torch

    values = torch.tensor(points, dtype=torch.float64)
    for layer in network.layers:
        values = values @ torch.tensor(layer.weight).T + torch.tensor(layer.bias)
        if layer.activation == "relu":
            values = torch.relu(values)
    return torch.argmax(values, dim=1).numpy()


def _continuous_network(seed: int, hidden: list[int], outputs: int) -> Network:
    rng = np.random.default_rng(seed)
    sizes = [4, *hidden, outputs]
    layers = [Layer(np.round(rng.normal(0.0, 0.8, (n_out, n_in)), 4),
                    np.round(rng.normal(0.0, 0.3, n_out), 4),
                    "relu" if k < len(sizes) - 2 else "none")
              for k, (n_in, n_out) in enumerate(itertools.pairwise(sizes))]
    return Network(layers, input_names=["s", "x", "y", "z"],
                   output_names=[f"o{k}" for k in range(outputs)])


@pytest.mark.parametrize(("seed", "hidden", "outputs", "favourable", "privileged"), [
    (6, [4, 4, 3, 5], 3, 1, 0),
    (0, [5, 4, 4], 5, 0, 0),
])
def test_continuous_child_and_atom_beside_density_against_monte_carlo(
        seed: int, hidden: list[int], outputs: int, favourable: int, privileged: int) -> None:
    """Every certified rate holds the rate of 10⁶ draws per group (5 standard errors), and
    γ 5 % either side of the sampled ratio is decided on its side."""
    network = _continuous_network(seed, hidden, outputs)
    rng = np.random.default_rng(20261130)
    draws = 1_000_000
    rate = {group: float(np.mean(_torch_classes(network, _sample_continuous(group, draws, rng))
                                 == favourable)) for group in (0, 1)}
    sampled = {"p_privileged": rate[privileged], "p_unprivileged": rate[1 - privileged]}
    ratio = sampled["p_unprivileged"] / sampled["p_privileged"]
    assert 0.1 < ratio < 0.9
    net, population = bind(network, population_from_json(CONTINUOUS), None, "test")
    for gamma, expected in ((ratio * 0.95, "satisfied"), (ratio * 1.05, "violated")):
        certificate = demographic_parity_audit(
            net, population, protected="s", privileged=privileged, favorable_class=favourable,
            gamma=gamma, settings=PVSettings(timeout_s=60.0))
        for name, estimate in sampled.items():
            low, high = certificate.bounds[name]
            error = 5 * np.sqrt(estimate * (1 - estimate) / draws)
            assert low - error <= estimate <= high + error, (name, estimate, low, high)
        assert certificate.verdict == expected, (gamma, ratio, certificate.bounds)
