"""PV cuts a box at a point mass of a column that also has a density.

A zero-inflated amount (an atom at 0 beside a density) and a network whose class changes at
the atom (``x > 0``, a tie at 0 with class 0) left PV undecided: bisection never reduced
``[0, c]`` to the point ``{0}``, so the atom's mass stayed in a box holding both classes.
Splits along such a column now cut at its listed point masses (``[t, t]`` and ``[t⁺, b]``,
or ``[a, t⁻]`` and ``[t, b]``).

Oracles: closed forms in ``Fraction`` (point masses plus uniform or normal densities), exact
box masses of the split children, and 1,000,000 draws of a default-fit population through
the torch model.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from certgate.population_data import fit_population
from verifier.audits.binding import bind
from verifier.audits.demographic_parity import demographic_parity_audit
from verifier.audits.probability import spec_network
from verifier.convert.json_format import network_from_json
from verifier.convert.torch_module import from_torch
from verifier.population import population_from_json
from verifier.pv import PVSettings, population_domain
from verifier.pv.engine import ProbabilityBranchAndBound
from verifier.spec import Names, demographic_parity

POINTS = (10.0, 40.0, 70.0)
WEIGHTS = {0: (Fraction(1, 10), Fraction(2, 10), Fraction(1, 10)),
           1: (Fraction(1, 20), Fraction(1, 10), Fraction(1, 20))}
"""Per value of ``s``: the weights of the point masses at :data:`POINTS` beside U[0, 100]."""


def _population(rows: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """``s`` ~ Bernoulli(½); ``x | s`` as ``rows[s]``."""
    return {
        "format": "certgate.population/v1",
        "features": [{"name": "s", "kind": "binary"}, {"name": "x", "kind": "continuous"}],
        "distribution": {"kind": "bayesian_network", "nodes": [
            {"name": "s", "cpt": [{"distribution": {
                "kind": "discrete", "values": [0, 1], "probabilities": [0.5, 0.5]}}]},
            {"name": "x", "parents": ["s"], "cpt": [
                {"condition": {"s": [s, s]}, "distribution": rows[s]} for s in (0, 1)]}]},
    }


def _mixture(points: tuple[float, ...], weights: tuple[Fraction, ...],
             density: dict[str, Any]) -> dict[str, Any]:
    rest = 1 - sum(weights, Fraction(0))
    return {"kind": "mixture", "weights": [float(w) for w in (*weights, rest)],
            "components": [*({"kind": "point", "value": v} for v in points), density]}


UNIFORM = {"kind": "uniform", "lower": 0.0, "upper": 100.0}
ZERO_INFLATED = _population({s: _mixture((0.0,), (w,), UNIFORM)
                             for s, w in ((0, Fraction(3, 10)), (1, Fraction(1, 10)))})
"""``x | s`` = w·δ₀ + (1 − w)·U[0, 100], w = 3/10 (s = 0) or 1/10 (s = 1)."""
THREE_POINTS = _population({s: _mixture(POINTS, WEIGHTS[s], UNIFORM) for s in (0, 1)})
NORMAL_BESIDE_ZERO = _population({
    s: _mixture((0.0,), (w,), {"kind": "normal", "mean": 0.0, "std": 1.0})
    for s, w in ((0, Fraction(3, 10)), (1, Fraction(1, 10)))})
"""An unbounded density: the root side is cut at quantiles, the atom at 0 inside it."""


def _network(layers: list[dict[str, Any]]) -> dict[str, Any]:
    return {"inputs": ["s", "x"], "outputs": ["yes"], "layers": layers}


def _linear(bias: float) -> dict[str, Any]:
    """Favourable iff ``x + bias > 0``: a tie at ``x = −bias`` has class 0."""
    return _network([{"weight": [[0.0, 1.0]], "bias": [bias], "activation": "none"}])


KINKED = _network([
    {"weight": [[0.0, 1.0], [0.0, 1.0]], "bias": [-10.0, -70.0], "activation": "relu"},
    {"weight": [[1.0, 1.0]], "bias": [-30.0], "activation": "none"}])
"""``relu(x − 10) + relu(x − 70) − 30``: kinks at the atoms 10 and 70, favourable iff
``x > 40`` (a tie at the atom 40)."""


def _uniform_above(t: Fraction) -> Fraction:
    """``P(U[0, 100] > t)`` for ``0 <= t <= 100``."""
    return (100 - t) / 100


def _row(population: dict[str, Any], s: int) -> tuple[list[Fraction], list[float]]:
    """The weights of ``x | s``'s mixture as the file's floats, exactly, over their exact
    sum (the density's last), and its points."""
    row = population["distribution"]["nodes"][1]["cpt"][s]["distribution"]
    weights = [Fraction(w) for w in row["weights"]]
    return ([w / sum(weights) for w in weights],
            [float(c["value"]) for c in row["components"][:-1]])


def _exact_rate(population: dict[str, Any], s: int, threshold: Fraction) -> Fraction:
    """``P(x > threshold | s)`` in closed form: the listed points above it plus the density's
    share above it (uniform: its length; the standard normal: ½ at 0)."""
    row = population["distribution"]["nodes"][1]["cpt"][s]["distribution"]
    weights, points = _row(population, s)
    density = row["components"][-1]
    above = Fraction(1, 2) if density["kind"] == "normal" else _uniform_above(threshold)
    assert density["kind"] != "normal" or threshold == 0
    return sum((w for w, p in zip(weights, points, strict=False) if p > threshold),
               Fraction(0)) + weights[-1] * above


def _audit(population: dict[str, Any], network: dict[str, Any], gamma: float) -> Any:
    net, pop = bind(network_from_json(network), population_from_json(population), None, "test")
    return demographic_parity_audit(net, pop, protected="s", privileged=1, favorable_class=1,
                                    gamma=gamma, settings=PVSettings(timeout_s=60.0))


def _holds(interval: tuple[float, float], exact: Fraction) -> bool:
    return Fraction(interval[0]) <= exact <= Fraction(interval[1])


CASES = [
    ("atom at 0, x > 0", ZERO_INFLATED, _linear(0.0), Fraction(0)),
    ("interior atom, x > 40", THREE_POINTS, _linear(-40.0), Fraction(40)),
    ("kinks at atoms, x > 40", THREE_POINTS, KINKED, Fraction(40)),
    ("normal beside 0, x > 0", NORMAL_BESIDE_ZERO, _linear(0.0), Fraction(0)),
]


def test_a_threshold_at_a_point_mass_is_decided_on_both_sides_of_the_exact_ratio() -> None:
    """γ 0.01 either side of the exact ratio: each verdict follows, and every certified
    interval holds the exact rates and ratio (before: unknown at every budget on the first
    case, ``[0.70, 1.0]`` and ``[0.90, 1.0]`` after 1.26M boxes in 60 s)."""
    for name, population, network, threshold in CASES:
        unprivileged = _exact_rate(population, 0, threshold)
        privileged = _exact_rate(population, 1, threshold)
        ratio = unprivileged / privileged
        for gamma, verdict in ((float(ratio) - 0.01, "satisfied"),
                               (float(ratio) + 0.01, "violated")):
            certificate = _audit(population, network, gamma)
            assert certificate.verdict == verdict, (name, gamma, certificate.bounds)
            assert _holds(certificate.bounds["p_unprivileged"], unprivileged), name
            assert _holds(certificate.bounds["p_privileged"], privileged), name
            assert _holds(certificate.bounds["value"], ratio), name


def _splitter_of(population: dict[str, Any]) -> Any:
    model = population_from_json(population)
    network = network_from_json(_linear(-40.0)).as_classifier()
    names = Names.of(["s", "x"], list(network.output_names))
    spec = demographic_parity(names, protected="s", privileged=1, favorable_class=1,
                              gamma=0.8)
    masses, domain = population_domain(model)
    engine = ProbabilityBranchAndBound(spec_network(network, spec), spec, masses, domain,
                                       PVSettings(), model.prob_excess_lower)
    return engine.splitter, model


THREE_POINTS_SPLITTER = _splitter_of(THREE_POINTS)
SIDE_ENDS = st.one_of(st.sampled_from([*POINTS, 0.0, 100.0]), st.floats(0.0, 100.0),
                      st.sampled_from(POINTS).map(lambda p: math.nextafter(p, -math.inf)),
                      st.sampled_from(POINTS).map(lambda p: math.nextafter(p, math.inf)))
"""Side ends inside the root box ``[0, 100]``: at the points, a float beside one, anywhere."""


def _exact_mass(lo: float, hi: float) -> Fraction:
    """``P(lo <= x <= hi)`` of :data:`THREE_POINTS` (``s`` integrated out), in closed form."""
    total = Fraction(0)
    for s in (0, 1):
        weights, points = _row(THREE_POINTS, s)
        listed = sum((w for w, p in zip(weights, points, strict=False) if lo <= p <= hi),
                     Fraction(0))
        low, high = max(lo, 0.0), min(hi, 100.0)
        length = Fraction(high) - Fraction(low) if high > low else Fraction(0)
        total += Fraction(1, 2) * (listed + weights[-1] * length / 100)
    return total


@settings(max_examples=300, deadline=None)
@given(SIDE_ENDS, SIDE_ENDS)
def test_a_split_isolates_a_listed_point_and_its_children_hold_the_exact_masses(
        a: float, b: float) -> None:
    """Any side ``[a, b]`` (``a < b``; ends at the points, a float beside them, anywhere)
    split along ``x``: the children are ``[a, l]`` and ``[r, b]`` with ``r`` the float after
    ``l`` (they do not meet and no float is lost); where the side holds a listed point, one
    child is that point alone or starts at it, so the point lies in one child only; and the
    population's enclosures of the children hold their exact masses, which add up to the side's."""
    if not a < b:
        return
    splitter, model = THREE_POINTS_SPLITTER
    lo = np.array([[0.0, a]])
    hi = np.array([[1.0, b]])
    left_lo, left_hi, right_lo, right_hi = splitter.children(
        lo, hi, np.array([1]), np.zeros((1, 2)))
    left, right = float(left_hi[0, 1]), float(right_lo[0, 1])
    assert left_lo[0, 1] == a and right_hi[0, 1] == b
    assert a <= left < right <= b and right == math.nextafter(left, math.inf)
    inside = [p for p in POINTS if a <= p <= b]
    if inside:
        assert any(left_lo[0, 1] == left == p or right == p for p in inside)
    masses = []
    for child_lo, child_hi in ((left_lo, left_hi), (right_lo, right_hi)):
        lower, upper = model.prob_boxes_interval(child_lo, child_hi)
        exact = _exact_mass(float(child_lo[0, 1]), float(child_hi[0, 1]))
        assert Fraction(lower[0]) <= exact <= Fraction(upper[0])
        masses.append(exact)
    assert sum(masses) == _exact_mass(a, b) - _float_gap_mass(left, right)


def _float_gap_mass(left: float, right: float) -> Fraction:
    """The density's mass strictly between two adjacent floats (no listed point there)."""
    return _exact_mass(left, right) - _exact_mass(left, left) - _exact_mass(right, right)


NORMAL_SPLITTER = _splitter_of(NORMAL_BESIDE_ZERO)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.sampled_from([-math.inf, 0.0, -5e-324]), st.floats(-50.0, 50.0)),
       st.one_of(st.sampled_from([math.inf, 0.0, 5e-324]), st.floats(-50.0, 50.0)))
def test_an_unbounded_side_is_cut_at_the_point_it_holds(a: float, b: float) -> None:
    """The normal beside an atom at 0: sides with infinite ends are cut at quantiles by the
    rule; one holding 0 is cut at 0 instead, into two closed float boxes that do not meet,
    0 alone or at the start of the right one."""
    if not a < b:
        return
    splitter, _ = NORMAL_SPLITTER
    left_lo, left_hi, right_lo, right_hi = splitter.children(
        np.array([[0.0, a]]), np.array([[1.0, b]]), np.array([1]), np.zeros((1, 2)))
    left, right = float(left_hi[0, 1]), float(right_lo[0, 1])
    assert left_lo[0, 1] == a and right_hi[0, 1] == b
    assert a <= left < right <= b and right == math.nextafter(left, math.inf)
    if a <= 0.0 <= b:
        assert (a == left == 0.0) or right == 0.0


def test_the_splitter_lists_the_points_beside_a_density() -> None:
    splitter, _ = _splitter_of(ZERO_INFLATED)
    assert [(c, list(p)) for c, p in splitter.point_columns] == [(1, [0.0])]
    three, _ = THREE_POINTS_SPLITTER
    assert [(c, list(p)) for c, p in three.point_columns] == [(1, list(POINTS))]


def _amount_table(rows: int = 6000, seed: int = 3) -> pd.DataFrame:
    """``sex`` ~ Bernoulli(½); ``gain`` = 0.0 with probability 0.95 (sex 0) or 0.90 (sex 1),
    else a lognormal amount in cents; ``age`` an integer in 18..69."""
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, rows)
    zero = rng.random(rows) < np.where(sex == 1, 0.90, 0.95)
    gain = np.where(zero, 0.0, np.round(rng.lognormal(8.0, 1.0, rows), 2))
    return pd.DataFrame({"sex": sex, "age": rng.integers(18, 70, rows), "gain": gain})


def _granting_model(columns: list[str]) -> torch.nn.Sequential:
    """``yes − no = 0.001·relu(gain) + 0.5·relu(age − 45)``: grants iff any gain or an age
    over 45; a tie (class 0) at gain 0 for every age up to 45, a kink at the atom."""
    model = torch.nn.Sequential(torch.nn.Linear(len(columns), 2), torch.nn.ReLU(),
                                torch.nn.Linear(2, 2)).double()
    with torch.no_grad():
        for layer in (model[0], model[2]):
            layer.weight.zero_()
            layer.bias.zero_()
        model[0].weight[0, columns.index("gain")] = 1.0
        model[0].weight[1, columns.index("age")] = 1.0
        model[0].bias[1] = -45.0
        model[2].weight[1, 0] = 0.001
        model[2].weight[1, 1] = 0.5
    return model.eval()


def test_default_fit_with_a_zero_inflated_amount_against_monte_carlo() -> None:
    """The default fit keeps the zeros as an atom beside histogram bins; 1,000,000 draws of
    the fitted population through the torch model (``yes > no``: a tie is class 0) give the
    rates; γ 0.03 either side of the draws' ratio is decided and the certified intervals
    hold the draws' rates within 5 standard errors."""
    model = fit_population(_amount_table(), protected="sex")
    columns = list(model.columns)
    torch_model = _granting_model(columns)
    draws = model.sample(1_000_000, np.random.default_rng(11))
    with torch.no_grad():
        logits = torch_model(torch.from_numpy(draws)).numpy()
    favourable = logits[:, 1] > logits[:, 0]
    sex = draws[:, columns.index("sex")]
    rates = [float(favourable[sex == s].mean()) for s in (0, 1)]
    errors = [math.sqrt(r * (1 - r) / float((sex == s).sum())) for s, r in zip((0, 1), rates,
                                                                              strict=True)]
    ratio = rates[0] / rates[1]
    network = from_torch(torch_model, columns, ["no", "yes"])
    for gamma, verdict in ((ratio - 0.03, "satisfied"), (min(ratio + 0.03, 1.0), "violated")):
        certificate = demographic_parity_audit(
            network, model, protected="sex", privileged=1, favorable_class=1, gamma=gamma,
            settings=PVSettings(timeout_s=60.0))
        assert certificate.verdict == verdict, certificate.bounds
        for key, rate, error in (("p_unprivileged", rates[0], errors[0]),
                                 ("p_privileged", rates[1], errors[1])):
            low, high = certificate.bounds[key]
            assert low - 5 * error <= rate <= high + 5 * error, (key, low, high, rate)
