"""Demographic parity on population files written by hand (not by ``population fit``),
against exact enumeration in Fractions: the certified intervals must hold the exact rates and
ratio, and a valid file must be audited, not refused."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from verifier.audits.binding import bind
from verifier.audits.demographic_parity import demographic_parity_audit
from verifier.audits.population_fit import check_population_fits
from verifier.convert.json_format import network_from_json
from verifier.population import population_from_json
from verifier.pv import PVSettings, population_domain
from verifier.pv.engine import ProbabilityBranchAndBound
from verifier.spec import demographic_parity


def _audit(population: dict[str, Any], network: dict[str, Any], gamma: float,
           favorable_class: int, protected: str = "s") -> Any:
    net, pop = bind(network_from_json(network), population_from_json(population), None, "test")
    return demographic_parity_audit(net, pop, protected=protected, privileged=1,
                                    favorable_class=favorable_class, gamma=gamma,
                                    settings=PVSettings(timeout_s=30.0))


def _holds(interval: tuple[float, float], exact: Fraction) -> bool:
    return Fraction(interval[0]) <= exact <= Fraction(interval[1])


TIED_ON_A_ROUNDED_GRID = {
    "format": "certgate.population/v1",
    "features": [{"name": "s", "kind": "binary"},
                 {"name": "r", "kind": "integer", "domain": [0, 4], "step": 0.1}],
    "distribution": {"kind": "product", "factors": [
        {"columns": ["s"], "distribution":
            {"kind": "discrete", "values": [0, 1], "probabilities": [0.4, 0.6]}},
        {"columns": ["r"], "distribution":
            {"kind": "discrete", "values": [0, 1, 2, 3, 4],
             "probabilities": [0.2, 0.2, 0.2, 0.2, 0.2]}}]},
}
"""``r = 0.1·k``: a step that is not a power of two, so the code map folded into the first
layer rounds (the bound network is flagged folded)."""

EQUAL_LOGITS = {
    "inputs": ["s", "r"], "outputs": ["no", "yes"],
    "layers": [{"weight": [[0.5, 1.0], [0.0, 0.3]], "bias": [0.0, 0.0], "activation": "relu"},
               {"weight": [[0.0, 1.0], [0.0, 1.0]], "bias": [0.0, 0.0], "activation": "none"}],
}
"""Both logits are ``relu(0.3·r)``: a tie at every input, so the class is 0 everywhere (the
lowest index wins) and both groups' class-0 rates are exactly 1."""


def test_a_tie_under_a_rounded_code_map_is_left_open_not_refused() -> None:
    """The tie cannot be decided exactly through the rounded fold; the audit used to stop
    with an input error ("move its threshold off the tie": demographic parity has none).
    The tied points now stay undecided: a sound interval, never a wrong verdict."""
    certificate = _audit(TIED_ON_A_ROUNDED_GRID, EQUAL_LOGITS, gamma=0.9, favorable_class=0)
    assert certificate.verdict in ("satisfied", "unknown")
    assert _holds(certificate.bounds["p_unprivileged"], Fraction(1))
    assert _holds(certificate.bounds["p_privileged"], Fraction(1))
    assert _holds(certificate.bounds["value"], Fraction(1))
    favourable = _audit(TIED_ON_A_ROUNDED_GRID, EQUAL_LOGITS, gamma=0.5, favorable_class=1)
    assert favourable.verdict == "unknown"          # the ratio 0/0 is not defined
    assert _holds(favourable.bounds["p_unprivileged"], Fraction(0))
    assert _holds(favourable.bounds["p_privileged"], Fraction(0))


def _fraction(value: float) -> Fraction:
    return Fraction(value)


POINT_BESIDE_A_TABLE = {
    "format": "certgate.population/v1",
    "features": [{"name": "s", "kind": "binary"},
                 {"name": "a", "kind": "integer", "domain": [0, 3]},
                 {"name": "b", "kind": "integer", "domain": [0, 2]}],
    "distribution": {"kind": "bayesian_network", "nodes": [
        {"name": "s", "cpt": [{"distribution":
            {"kind": "discrete", "values": [0, 1], "probabilities": [0.3, 0.7]}}]},
        {"name": "a", "parents": ["s"], "cpt": [
            {"condition": {"s": [0, 0]}, "distribution": {"kind": "mixture", "weights": [0.8, 0.2],
             "components": [{"kind": "point", "value": 1},
                            {"kind": "discrete", "values": [0, 1, 2, 3],
                             "probabilities": [0.1, 0.2, 0.3, 0.4]}]}},
            {"condition": {"s": [1, 1]}, "distribution":
                {"kind": "discrete", "values": [0, 1, 2, 3],
                 "probabilities": [0.25, 0.25, 0.25, 0.25]}}]},
        {"name": "b", "parents": ["a"], "cpt": [
            {"condition": {"a": [None, 0]}, "distribution":
                {"kind": "discrete", "values": [0, 1, 2], "probabilities": [0.5, 0.3, 0.2]}},
            {"condition": {"a": [1, None]}, "distribution":
                {"kind": "discrete", "values": [0, 1, 2], "probabilities": [0.1, 0.1, 0.8]}}]}]},
}
"""A CPT row that mixes a point with a discrete table (all its mass on integers), with a
child whose rows cut its parent between 0 and 1."""


def _exact_joint() -> dict[tuple[int, int, int], Fraction]:
    f = _fraction
    s_p = {0: f(0.3), 1: f(0.7)}
    table = {0: f(0.1), 1: f(0.2), 2: f(0.3), 3: f(0.4)}
    a_p = {0: {v: f(0.2) * table[v] + (f(0.8) if v == 1 else 0) for v in range(4)},
           1: {v: f(0.25) for v in range(4)}}
    b_p = {0: {0: f(0.5), 1: f(0.3), 2: f(0.2)}, 1: {0: f(0.1), 1: f(0.1), 2: f(0.8)}}
    return {(s, a, b): s_p[s] * a_p[s][a] * b_p[min(a, 1)][b]
            for s in range(2) for a in range(4) for b in range(3)}


def test_a_row_mixing_a_point_with_a_table_has_tight_box_masses() -> None:
    """The elimination read such a row as neither atomless nor purely atomic, so an open gap
    cell (0, 1) took the closed [0, 1]'s mass as its upper end: P(s = 0) was enclosed in
    [0.3, 0.52], and PV stopped with every box bounded (``exhausted``) and a ratio interval
    tens of times wider than its points allow."""
    population = population_from_json(POINT_BESIDE_A_TABLE)
    joint = _exact_joint()
    lo, hi = population.support()
    for column, value in ((0, 0), (0, 1), (1, 1), (2, 0), (2, 2)):
        box_lo, box_hi = lo.copy(), hi.copy()
        box_lo[column] = box_hi[column] = value
        lower, upper = population.prob_boxes_interval(box_lo[None, :], box_hi[None, :])
        exact = sum(p for point, p in joint.items() if point[column] == value)
        assert Fraction(lower[0]) <= exact <= Fraction(upper[0])
        assert upper[0] - lower[0] < 1e-9


def test_pv_on_a_row_mixing_a_point_with_a_table_reaches_the_exact_ratio() -> None:
    network = {"inputs": ["s", "a", "b"], "outputs": ["logit"],
               "layers": [{"weight": [[1.0, -1.0, 0.5], [-0.5, 1.0, 1.0]],
                           "bias": [0.25, -1.25], "activation": "relu"},
                          {"weight": [[1.0, -1.0]], "bias": [0.25], "activation": "none"}]}
    joint = _exact_joint()

    def favourable(s: int, a: int, b: int) -> bool:
        h = np.maximum(np.array([s - a + 0.5 * b + 0.25, -0.5 * s + a + b - 1.25]), 0.0)
        return bool(h[0] - h[1] + 0.25 > 0)   # every value is a multiple of 1/4: exact

    rate = {g: sum(p for (s, a, b), p in joint.items() if s == g and favourable(s, a, b))
            / sum(p for (s, _, _), p in joint.items() if s == g) for g in (0, 1)}
    ratio = rate[0] / rate[1]
    below = _audit(POINT_BESIDE_A_TABLE, network, gamma=float(ratio) * 0.999, favorable_class=1)
    above = _audit(POINT_BESIDE_A_TABLE, network, gamma=min(float(ratio) * 1.001, 1.0),
                   favorable_class=1)
    for certificate in (below, above):
        assert _holds(certificate.bounds["p_unprivileged"], rate[0])
        assert _holds(certificate.bounds["p_privileged"], rate[1])
        assert _holds(certificate.bounds["value"], ratio)
    assert below.verdict == "satisfied"
    assert above.verdict == "violated"


def test_a_split_between_adjacent_floats_leaves_no_empty_child() -> None:
    """A column with an atom beside a density (a point in a mixture with a normal) is cut at
    ``[lo, cut]`` and ``[next float after cut, hi]``. On a box one float wide whose midpoint
    rounds up to ``hi`` the right child was ``[next(hi), hi]``, empty, and CROWN refused it
    ("empty box: lower > upper"), stopping the audit (a mixture of products reached such a
    box in a normal's far tail). The two children must be boxes that cover both floats."""
    population = population_from_json({
        "format": "certgate.population/v1",
        "features": [{"name": "s", "kind": "binary"}, {"name": "x", "kind": "continuous"}],
        "distribution": {"kind": "product", "factors": [
            {"columns": ["s"], "distribution":
                {"kind": "discrete", "values": [0, 1], "probabilities": [0.5, 0.5]}},
            {"columns": ["x"], "distribution": {"kind": "mixture", "weights": [0.5, 0.5],
             "components": [{"kind": "point", "value": 0.1},
                            {"kind": "normal", "mean": 0.0, "std": 1.0}]}}]}})
    network = network_from_json({
        "inputs": ["s", "x"], "outputs": ["logit"],
        "layers": [{"weight": [[1.0, 1.0]], "bias": [0.0], "activation": "relu"},
                   {"weight": [[1.0]], "bias": [-0.5], "activation": "none"}]}).as_classifier()
    names = check_population_fits(network, population)
    spec = demographic_parity(names, protected="s", privileged=1, favorable_class=1, gamma=0.8)
    masses, domain = population_domain(population)
    splitter = ProbabilityBranchAndBound(network, spec, masses, domain,
                                         PVSettings()).splitter
    assert not domain.atomless[1] and not domain.integer[1]
    low = math.nextafter(1.0, 2.0)                      # an odd last bit:
    high = math.nextafter(low, 2.0)                     # the midpoint rounds up to high
    assert (low + high) / 2 == high
    lo, hi = np.array([[0.0, low]]), np.array([[1.0, high]])
    left_lo, left_hi, right_lo, right_hi = splitter.children(
        lo, hi, np.array([1]), np.zeros_like(lo))
    assert (left_lo <= left_hi).all() and (right_lo <= right_hi).all()
    assert left_lo[0, 1] == low and right_hi[0, 1] == high
    assert left_hi[0, 1] < right_lo[0, 1]
