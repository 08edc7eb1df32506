"""Audit settings that name a coded column's values (value = offset + step·k) in the data's
units, written in codes by :mod:`verifier.audits.coded_values`: parity's protected column and
privileged value, causal fairness's protected values, query and domain, local robustness's
centre, events thresholding one coded column. Oracles: exact enumeration in rationals of the
original network at the real points ``offset + step·k``, and the same audit on an
equivalent population written with plain values (odd integers, no code)."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline_steps.cli import main
from tests.test_causal_ties import _oracle_class
from tests.test_grid_columns import (
    _grid_population,
    _network,
    _points,
    _real_point,
    grid_table,
)
from verifier.audits import run_audit
from verifier.audits.binding import bind
from verifier.audits.causal_fairness import CausalFairnessSettings
from verifier.audits.coded_values import code_interval, spec_in_codes, value_code
from verifier.audits.demographic_parity import demographic_parity_audit
from verifier.audits.local_robustness import LocalRobustnessSettings
from verifier.audits.noise_robustness import NoiseRobustnessSettings
from verifier.errors import CertgateInputError
from verifier.network import Layer, Network
from verifier.population import PopulationModel, load_population, population_from_json
from verifier.pv import PVSettings
from verifier.spec import Atom, Names, atoms_of, evaluate_event, parse_event

GRIDS = [(0.5, 0.0), (2.0, 0.5), (0.75, -0.5), (3.0, -7.0)]
"""Grids whose values are floats, as every fitted grid's are (a value given in a setting is a
float)."""
SCORE_PROBABILITIES = [0.0625, 0.125, 0.25, 0.25, 0.1875, 0.125]


def _plain_population() -> PopulationModel:
    """The population of ``_grid_population(2.0, 1.0)`` written with plain values: score is
    an integer feature whose table holds the values 1, 3, …, 11 themselves."""
    return population_from_json({
        "format": "certgate.population/v1",
        "features": [{"name": "sex", "kind": "binary"},
                     {"name": "score", "kind": "integer", "domain": [1, 11]},
                     {"name": "level", "kind": "integer", "domain": [0, 2]}],
        "distribution": {"kind": "product", "factors": [
            {"columns": ["sex"], "distribution": {
                "kind": "discrete", "values": [0, 1], "probabilities": [0.375, 0.625]}},
            {"columns": ["score"], "distribution": {
                "kind": "discrete", "values": [1, 3, 5, 7, 9, 11],
                "probabilities": SCORE_PROBABILITIES}},
            {"columns": ["level"], "distribution": {
                "kind": "discrete", "values": [0, 1, 2],
                "probabilities": [0.25, 0.5, 0.25]}}]}})


def _value(step: float, offset: float, k: int) -> float:
    value = Fraction(offset) + Fraction(step) * k
    assert Fraction(float(value)) == value
    return float(value)


# ------------------------------------------------------------------ the translation


@pytest.mark.parametrize(("step", "offset"), [*GRIDS, (0.7, 0.3)])
def test_intervals_hold_exactly_the_grid_values_they_held(step: float, offset: float) -> None:
    population = _grid_population(step, offset)
    rng = np.random.default_rng(int(step * 100))
    ks = range(-20, 40)                         # every code the random intervals reach
    values = [Fraction(offset) + Fraction(step) * k for k in ks]
    for _ in range(200):
        low, high = sorted(float(v) for v in rng.uniform(offset - 3, offset + 9 * step, 2))
        if rng.random() < 0.3:                           # ends on grid points
            low = float(values[int(rng.integers(17, 26))])
        inside = [k for k, v in zip(ks, values, strict=True)
                  if Fraction(low) <= v <= Fraction(high)]
        if not inside:
            with pytest.raises(CertgateInputError, match="holds no value of the coded column"):
                code_interval(population, "score", low, high, "query")
            continue
        assert code_interval(population, "score", low, high, "query") == (inside[0],
                                                                            inside[-1])
    assert code_interval(population, "level", 0.5, 1.5, "query") == (0.5, 1.5)   # not coded
    if Fraction(float(values[24])) == values[24]:
        assert value_code(population, "score", float(values[24]), "privileged") == 4.0


@pytest.mark.parametrize(("step", "offset"), GRIDS)
def test_events_on_one_coded_column_hold_at_the_same_points(step: float, offset: float) -> None:
    """``x.score OP t`` and its negation, for thresholds on and between grid points, written
    in codes, hold at exactly the codes whose real values satisfy the original event."""
    population = _grid_population(step, offset)
    names = Names.of(list(population.columns), ["no", "yes"])
    thresholds = [_value(step, offset, k) for k in (-1, 0, 2, 5, 6)] + \
        [float(Fraction(offset) + Fraction(step) * Fraction(5, 2)), offset - 0.1, 1.0, -7.3]
    codes = np.zeros((9, 3))
    codes[:, 1] = np.arange(-1, 8)
    reals = [Fraction(offset) + Fraction(step) * int(k) for k in codes[:, 1]]
    for threshold, op in itertools.product(thresholds, (">=", ">", "<=", "<", "==", "!=")):
        text = f"x.score {op} {threshold!r}"
        event = parse_event(text, names)
        translated = spec_in_codes(_spec_of(event, text), population)
        [term] = translated.probabilities.values()
        truth = {atom: np.array([_atom_holds(atom, (0, v, 0)) for v in reals])
                 for atom in atoms_of(event)}
        expected = evaluate_event(event, truth)
        got = evaluate_event(term.event, {atom: np.array(
            [_atom_holds(atom, tuple(row)) for row in codes]) for atom in atoms_of(term.event)})
        assert np.array_equal(expected, got), text
        assert all(float(a.constant).is_integer() for a in atoms_of(term.event))


@given(st.integers(1, 2**20), st.integers(-12, 4), st.integers(-2**20, 2**20),
       st.integers(-12, 4), st.floats(-1e4, 1e4), st.sampled_from([1.0, -1.0, 0.75, -3.0]),
       st.booleans())
@settings(max_examples=300, deadline=None)
def test_a_bound_on_one_coded_column_holds_at_the_same_codes(
        step_mantissa: int, step_exponent: int, offset_mantissa: int, offset_exponent: int,
        threshold: float, coefficient: float, strict: bool) -> None:
    """``c·x + t > 0`` (or ``>= 0``) on ``x = offset + step·k``, for dyadic steps and
    offsets and any float threshold, becomes a bound on ``k`` with an integer threshold that
    holds at exactly the codes whose real values satisfy the original atom."""
    from verifier.audits.coded_values import _atom_in_codes

    step = Fraction(step_mantissa) * Fraction(2) ** step_exponent
    offset = Fraction(offset_mantissa) * Fraction(2) ** offset_exponent
    assume((step, offset) != (1, 0))                     # a column with a code
    atom = Atom((0.0,), (0.0, coefficient), threshold, strict)
    coded = _atom_in_codes(atom, "event", np.array([1.0, float(step)]),
                           np.array([0.0, float(offset)]))
    assert float(coded.constant).is_integer() and coded.input_coeffs[1] in (1.0, -1.0)
    centre = int((Fraction(-threshold) / Fraction(coefficient) - offset) / step)
    for k in range(centre - 3, centre + 4):
        value = offset + step * k
        assert _atom_holds(atom, (0, value)) == _atom_holds(coded, (0, k)), k


def test_an_inexact_event_over_two_columns_is_refused() -> None:
    """With step 0.7 and offset 0.3, ``x.score + x.level >= 1`` needs ``0.3 − 1`` as its
    threshold in codes, which is not a float: refused, naming the event."""
    population = _grid_population(0.7, 0.3)
    network, bound = bind(_network(0), population, None, "test")
    with pytest.raises(CertgateInputError,
                       match=r"the event .*x\.score \+ x\.level >= 1\).* coded column"):
        demographic_parity_audit(network, bound, protected="sex", privileged=1.0,
                                 favorable_class=1, gamma=0.5,
                                 qualified="x.score + x.level >= 1")


def _spec_of(event: object, text: str) -> object:
    from verifier.spec import ProbabilityTerm, Ref, Specification

    term = ProbabilityTerm(event, None, text, "")
    return Specification({"p": term}, Ref("p"), "p", None, None)


def _atom_holds(atom: object, point: tuple) -> bool:
    value = sum((Fraction(c) * Fraction(v) for c, v in zip(atom.input_coeffs, point,
                                                           strict=True)),
                Fraction(atom.constant))
    return value > 0 if atom.strict else value >= 0


# ------------------------------------------------------------------ demographic parity


@pytest.mark.parametrize(("step", "offset", "k"), [(0.5, 0.0, 2), (3.0, -7.0, 3),
                                                   (0.75, -0.5, 1)])
def test_parity_of_a_coded_protected_column_equals_enumeration(step: float, offset: float,
                                                               k: int) -> None:
    """protected = the coded column, privileged = one of its values: the certified ratio
    contains the ratio enumerated at the real points, and both sides of it are decided."""
    population = _grid_population(step, offset)
    original = _network(0)
    network, bound = bind(original, population, None, "test")
    favourable = {True: Fraction(0), False: Fraction(0)}
    group = {True: Fraction(0), False: Fraction(0)}
    for codes, weight in _points(population):
        privileged = codes[1] == k
        group[privileged] += weight
        if _oracle_class(original, _real_point(population, codes)) == 1:
            favourable[privileged] += weight
    assert favourable[True] > 0 and favourable[False] > 0
    ratio = (favourable[False] / group[False]) / (favourable[True] / group[True])
    for gamma, verdict in ((float(ratio) - 1e-6, "satisfied"), (float(ratio) + 1e-6,
                                                                "violated")):
        if gamma > 1.0:
            continue
        certificate = demographic_parity_audit(
            network, bound, protected="score", privileged=_value(step, offset, k),
            favorable_class=1, gamma=gamma, settings=PVSettings(timeout_s=60.0))
        low, high = certificate.bounds["value"]
        assert Fraction(low) <= ratio <= Fraction(high)
        assert certificate.verdict == verdict, (low, high, float(ratio))


def test_parity_on_a_coded_column_agrees_with_the_plain_population() -> None:
    """The same question on score = 1 + 2·k (coded) and on score ∈ {1, 3, …, 11} (plain):
    both certificates contain the difference enumerated at the values and agree."""
    coded = _grid_population(2.0, 1.0)
    original = _network(3)
    results = []
    for population in (coded, _plain_population()):
        network, bound = bind(original, population, None, "test")
        certificate = demographic_parity_audit(
            network, bound, protected="score", privileged=5.0, favorable_class=1,
            gamma=0.9, form="difference", settings=PVSettings(timeout_s=60.0, precision=1e-9))
        results.append(certificate)
    favourable = {True: Fraction(0), False: Fraction(0)}
    group = {True: Fraction(0), False: Fraction(0)}
    for codes, weight in _points(coded):
        point = _real_point(coded, codes)
        group[point[1] == 5] += weight
        favourable[point[1] == 5] += weight * (_oracle_class(original, point) == 1)
    truth = abs(favourable[False] / group[False] - favourable[True] / group[True])
    for certificate in results:
        low, high = certificate.bounds["value"]
        assert Fraction(low) <= truth <= Fraction(high)
        assert high - low <= 1e-6
    assert results[0].verdict == results[1].verdict


@pytest.mark.parametrize("privileged", [0.75, 3.1, 0.1])
def test_a_privileged_value_off_the_grid_is_named(privileged: float) -> None:
    population = _grid_population(0.5, 0.0)
    network, bound = bind(_network(1), population, None, "test")
    with pytest.raises(CertgateInputError, match=rf"privileged: {privileged!r} is not a value "
                                                  r"of the coded column 'score'"):
        demographic_parity_audit(network, bound, protected="score", privileged=privileged,
                                 favorable_class=1, gamma=0.5)


# ------------------------------------------------------------------ causal fairness


def _causal_oracle(original: object, population: PopulationModel, protected: str,
                   protected_codes: list[int], kept: dict[str, list[int]]
                   ) -> tuple[Fraction, Fraction]:
    """The uniform and population biased shares over the kept codes of the other columns,
    each point's classes evaluated exactly at its real values at every protected code (the
    population share weighs a point by its mass over those codes: all of them, for sex)."""
    columns = list(population.columns)
    weights = dict(_points(population))
    others = [name for name in columns if name != protected]
    biased = total = 0
    mass = biased_mass = Fraction(0)
    for combo in itertools.product(*(kept[name] for name in others)):
        def codes(value: int, combo: tuple = combo) -> tuple[int, ...]:
            return tuple(value if name == protected else combo[others.index(name)]
                         for name in columns)
        classes = {_oracle_class(original, _real_point(population, codes(v)))
                   for v in protected_codes}
        weight = sum((weights.get(codes(v), Fraction(0)) for v in protected_codes),
                     Fraction(0))
        total += 1
        mass += weight
        if len(classes) > 1:
            biased += 1
            biased_mass += weight
    return Fraction(biased, total), biased_mass / mass


@pytest.mark.parametrize(("step", "offset"), GRIDS)
def test_causal_query_and_protected_values_in_values_equal_enumeration(
        step: float, offset: float) -> None:
    population = _grid_population(step, offset)
    checked = 0
    for seed in range(3):
        original = _network(seed)
        network, bound = bind(original, population, None, "test")
        # a query on the coded column, its ends between grid points
        low = float(Fraction(offset) + Fraction(step) * Fraction(3, 4))
        high = float(Fraction(offset) + Fraction(step) * Fraction(17, 4))
        certificate = run_audit(CausalFairnessSettings(
            kind="causal_fairness", protected=["sex"], query={"score": (low, high)},
            measure="population", max_biased_share=0.5, timeout_s=30), network, bound)
        uniform, weighted = _causal_oracle(original, population, "sex", [0, 1],
                                           {"sex": [0, 1], "score": [1, 2, 3, 4],
                                            "level": [0, 1, 2]})
        for key, truth in (("biased_share", uniform), ("biased_share_population", weighted)):
            lower, upper = certificate.bounds[key]
            assert Fraction(lower) - Fraction(1, 10**9) <= truth <= \
                Fraction(upper) + Fraction(1, 10**9), key
            assert upper - lower <= 1e-6
        # the coded column protected, compared at two of its values, on a domain in values
        values = [_value(step, offset, 1), _value(step, offset, 4)]
        certificate = run_audit(CausalFairnessSettings(
            kind="causal_fairness", protected=["score"], protected_values=values,
            domain={"sex": (0, 1), "score": (offset - step / 3, _value(step, offset, 5)),
                    "level": (0, 2)},
            max_biased_share=0.5, timeout_s=30), network, bound)
        uniform, _ = _causal_oracle(original, population, "score", [1, 4],
                                    {"sex": [0, 1], "score": [1, 4], "level": [0, 1, 2]})
        lower, upper = certificate.bounds["biased_share"]
        assert Fraction(lower) - Fraction(1, 10**9) <= uniform <= \
            Fraction(upper) + Fraction(1, 10**9)
        checked += uniform > 0
    assert checked > 0                     # the oracle is not trivially fair


def test_causal_on_a_coded_column_agrees_with_the_plain_population() -> None:
    """The population measure of the same question (protected sex, a query on score in
    values) on the coded and on the plain population: the same certified share."""
    original = _network(2)
    shares = []
    for population in (_grid_population(2.0, 1.0), _plain_population()):
        network, bound = bind(original, population, None, "test")
        certificate = run_audit(CausalFairnessSettings(
            kind="causal_fairness", protected=["sex"], query={"score": (2.0, 9.5)},
            measure="population", max_biased_share=0.5, timeout_s=30), network, bound)
        shares.append(certificate.bounds["biased_share_population"])
    (low_a, high_a), (low_b, high_b) = shares
    assert max(low_a, low_b) <= min(high_a, high_b) + 1e-9
    assert high_a - low_a <= 1e-6 and high_b - low_b <= 1e-6


@pytest.mark.parametrize(("field", "value", "message"), [
    ("protected_values", [0.75, 1.0], r"protected_values: 0\.75 is not a value of the coded "
                                      r"column 'score'"),
    ("query", {"score": (0.6, 0.9)}, r"query: \[0\.6, 0\.9\] holds no value of the coded "
                                     r"column 'score'"),
    ("domain", {"score": (1.1, 1.4), "sex": (0, 1), "level": (0, 2)},
     r"domain: \[1\.1, 1\.4\] holds no value of the coded column 'score'"),
    ("integer_inputs", ["level"], r"integer_inputs leaves out the coded column\(s\) score"),
])
def test_causal_values_off_the_grid_are_named(field: str, value: object,
                                              message: str) -> None:
    population = _grid_population(0.5, 0.0)
    network, bound = bind(_network(0), population, None, "test")
    protected = ["score"] if field == "protected_values" else ["sex"]
    extra = {"query": {"score": (0.0, 1.0)}} if field == "integer_inputs" else {}
    settings = CausalFairnessSettings(kind="causal_fairness", protected=protected,
                                      max_biased_share=0.5, **{field: value, **extra})
    with pytest.raises(CertgateInputError, match=message):
        run_audit(settings, network, bound)


# ------------------------------------------------------------------ local robustness


def _robust_oracle(original: object, population: PopulationModel, center: list[float],
                   epsilon: float, expected: int) -> Fraction:
    """``P(class = expected | ‖x − center‖∞ <= ε)`` over the population's points, by their
    real values."""
    inside = robust = Fraction(0)
    for codes, weight in _points(population):
        point = _real_point(population, codes)
        if all(abs(v - Fraction(c)) <= Fraction(epsilon)
               for v, c in zip(point, center, strict=True)):
            inside += weight
            robust += weight * (_oracle_class(original, point) == expected)
    return robust / inside


@pytest.mark.parametrize(("step", "offset"), GRIDS)
def test_local_robustness_around_a_center_in_values_equals_enumeration(
        step: float, offset: float) -> None:
    population = _grid_population(step, offset)
    for seed, (k, reach) in itertools.product(range(3), [(2, 1.0), (3, 0.4), (1, 2.2)]):
        original = _network(seed)
        network, bound = bind(original, population, None, "test")
        center = [1.0, _value(step, offset, k), 1.0]
        epsilon = float(Fraction(step) * Fraction(reach).limit_denominator(10))
        expected = _oracle_class(original, _real_point(population, (1, k, 1)))
        truth = _robust_oracle(original, population, center, epsilon, expected)
        certificate = run_audit(LocalRobustnessSettings(
            kind="local_robustness", center=center, epsilon=epsilon, min_probability=0.0),
            network, bound)
        assert certificate.details["expected_class"] == expected
        low, high = certificate.bounds["probability"]
        assert low - 1e-9 <= float(truth) <= high + 1e-9, (step, offset, seed, k, reach)
        # a centre between grid points, with the class given
        between = [1.0, float(Fraction(offset) + Fraction(step) * Fraction(2 * k + 1, 2)), 1.0]
        wider = epsilon + step / 2                   # reaches a grid point on either side
        truth = _robust_oracle(original, population, between, wider, 1)
        certificate = run_audit(LocalRobustnessSettings(
            kind="local_robustness", center=between, epsilon=wider, expected_class=1,
            min_probability=0.0), network, bound)
        low, high = certificate.bounds["probability"]
        assert low - 1e-9 <= float(truth) <= high + 1e-9


def test_local_robustness_on_a_coded_column_agrees_with_the_plain_population() -> None:
    original = _network(4)
    probabilities = []
    for population in (_grid_population(2.0, 1.0), _plain_population()):
        network, bound = bind(original, population, None, "test")
        certificate = run_audit(LocalRobustnessSettings(
            kind="local_robustness", center=[0.0, 5.0, 1.0], epsilon=2.5, min_probability=0.0),
            network, bound)
        probabilities.append((certificate.bounds["probability"],
                              certificate.details["expected_class"]))
    (bounds_a, class_a), (bounds_b, class_b) = probabilities
    assert class_a == class_b
    assert bounds_a == pytest.approx(bounds_b, abs=1e-9)


def test_a_center_off_the_grid_needs_the_expected_class() -> None:
    population = _grid_population(0.5, 0.0)
    network, bound = bind(_network(0), population, None, "test")
    with pytest.raises(CertgateInputError, match=r"center \(the expected class is the class "
                                                  r"there\): 1\.2 is not a value of the coded "
                                                  r"column 'score'"):
        run_audit(LocalRobustnessSettings(kind="local_robustness", center=[1.0, 1.2, 1.0],
                                          epsilon=0.5, min_probability=0.5), network, bound)
    with pytest.raises(CertgateInputError, match=r"center ± epsilon \(0\.1\): \[1\.1, 1\.3\] "
                                                  r"holds no value of the coded column 'score'"):
        run_audit(LocalRobustnessSettings(kind="local_robustness", center=[1.0, 1.2, 1.0],
                                          epsilon=0.1, expected_class=1, min_probability=0.5),
                  network, bound)


# ------------------------------------------------------------------ noise


def test_continuous_noise_on_a_coded_column_is_refused_as_on_any_discrete_column() -> None:
    """A density moves a coded column off its grid, as it moves an integer column off its
    integers: the engine's rule for discrete columns refuses both, with the same reason."""
    population = _grid_population(0.5, 0.0)
    network, bound = bind(_network(0), population, None, "test")
    for feature in ("score", "level"):
        with pytest.raises(CertgateInputError, match=rf"noise on column '{feature}' needs a "
                                                      r"continuous column .* it is discrete"):
            run_audit(NoiseRobustnessSettings(kind="noise_robustness", features=[feature],
                                              noise_uniform=(-0.2, 0.2), min_probability=0.5),
                      network, bound)


def _mixed_population(coded: bool) -> PopulationModel:
    """score (1 + 2·k coded, or the odd integers 1…11 plain) beside a continuous income:
    the WMI engine integrates over income instead of summing points."""
    score = {"name": "score", "kind": "integer", "domain": [0, 5], "step": 2.0, "offset": 1.0} \
        if coded else {"name": "score", "kind": "integer", "domain": [1, 11]}
    return population_from_json({
        "format": "certgate.population/v1",
        "features": [{"name": "sex", "kind": "binary"}, score,
                     {"name": "level", "kind": "continuous", "domain": [0, 2]}],
        "distribution": {"kind": "product", "factors": [
            {"columns": ["sex"], "distribution": {
                "kind": "discrete", "values": [0, 1], "probabilities": [0.375, 0.625]}},
            {"columns": ["score"], "distribution": {
                "kind": "discrete",
                "values": [0, 1, 2, 3, 4, 5] if coded else [1, 3, 5, 7, 9, 11],
                "probabilities": SCORE_PROBABILITIES}},
            {"columns": ["level"], "distribution": {
                "kind": "uniform", "lower": 0, "upper": 2}}]}})


@pytest.mark.parametrize("seed", range(3))
def test_local_robustness_with_a_continuous_column_agrees_with_the_plain_population(
        seed: int) -> None:
    """Region enumeration (a continuous column beside the coded one): the box in codes, with
    its half-widths per column, gives the plain population's exact probability, and both
    contain dense Monte Carlo at the values."""
    original = _network(seed)
    found = []
    for coded in (True, False):
        network, bound = bind(original, _mixed_population(coded), None, "test")
        certificate = run_audit(LocalRobustnessSettings(
            kind="local_robustness", center=[1.0, 5.0, 1.0], epsilon=2.5, min_probability=0.0),
            network, bound)
        found.append((certificate.bounds["probability"], certificate.details["expected_class"]))
    (bounds_a, class_a), (bounds_b, class_b) = found
    assert class_a == class_b
    assert bounds_a == pytest.approx(bounds_b, abs=1e-9)
    rng = np.random.default_rng(seed)
    n = 200_000
    points = np.column_stack([rng.choice([0.0, 1.0], n, p=[0.375, 0.625]),
                              rng.choice([3.0, 5.0, 7.0], n,
                                                     p=np.array([0.125, 0.25, 0.25]) / 0.625),
                              rng.uniform(0.0, 2.0, n)])
    hits = original.classify(points) == class_a
    error = hits.std() / np.sqrt(n)
    assert bounds_a[0] - 4 * error <= hits.mean() <= bounds_a[1] + 4 * error


# ------------------------------------------------------------------ scikit-learn models


@pytest.mark.parametrize("seed", range(3))
def test_a_tree_on_a_coded_population_is_read_at_the_values(seed: int) -> None:
    """A tree fitted on the data's values, audited on the coded population, gives what it
    gives on the plain population (local robustness, population-weighted monotonicity), and
    local robustness equals enumeration with the tree's own ``predict`` at the values."""
    from sklearn.tree import DecisionTreeClassifier

    from verifier.audits.monotonicity import MonotonicitySettings

    coded, plain = _grid_population(2.0, 1.0), _plain_population()
    rng = np.random.default_rng(seed)
    drawn = coded.sample(2000, rng)
    labels = (drawn[:, 1] + 2 * drawn[:, 0] - drawn[:, 2] + rng.normal(0, 2, len(drawn)) > 5)
    tree = DecisionTreeClassifier(max_depth=4, random_state=seed).fit(drawn, labels.astype(int))
    names = list(coded.columns)
    center = [1.0, 5.0, 1.0]
    results = []
    for population in (coded, plain):
        robust = run_audit(LocalRobustnessSettings(
            kind="local_robustness", center=center, epsilon=2.5, min_probability=0.0),
            tree, population, input_names=names)
        monotone = run_audit(MonotonicitySettings(
            kind="monotonicity", feature="score", use_prior=True, min_probability=0.0),
            tree, population, input_names=names)
        results.append((robust.bounds["probability"], robust.details["expected_class"],
                        monotone.bounds["probability"]))
    assert results[0][1] == results[1][1]
    for first, second in ((results[0][0], results[1][0]), (results[0][2], results[1][2])):
        assert first == pytest.approx(second, abs=1e-9)
    expected = results[0][1]
    inside = hits = Fraction(0)
    for codes, weight in _points(coded):
        point = np.array([float(v) for v in _real_point(coded, codes)])
        if np.all(np.abs(point - center) <= 2.5):
            inside += weight
            hits += weight * (int(tree.predict(point[None, :])[0]) == expected)
    low, high = results[0][0]
    assert low - 1e-9 <= float(hits / inside) <= high + 1e-9


def test_a_tree_split_between_grid_values_goes_by_the_value() -> None:
    """``x <= t`` with ``t`` between, on and beyond grid values: the code's threshold is
    ⌊(t − offset)/step⌋, so every code goes where its value goes."""
    from verifier.audits.coded_values import split_thresholds_in_codes

    step, offset = np.array([1.0, 0.75]), np.array([0.0, -0.5])
    thresholds = np.array([0.3, 0.25, 0.2499999, 1.6, -0.5, -0.51, 7.0])
    features = np.array([0, 1, 1, 1, 1, 1, -2])
    written = split_thresholds_in_codes(features, thresholds, step, offset)
    assert written.tolist() == [0.3, 1.0, 0.0, 2.0, 0.0, -1.0, 7.0]
    for t, k_threshold in zip(thresholds[1:6], written[1:6], strict=True):
        for k in range(-3, 6):
            value = Fraction(-1, 2) + Fraction(3, 4) * k
            assert (value <= Fraction(float(t))) == (k <= k_threshold)


# ------------------------------------------------------------------ the user's flow


def test_verify_parity_of_a_coded_column_from_a_csv(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """CSV → ``population fit`` (score coded on its 0.5 grid) → ``verify demographic-parity
    --protected score --privileged 1.5`` with the data: the certified rates contain the rates
    of 200k population draws at the values, the fidelity check reads the coded protected
    column in values (consistent); ``--privileged 1.25`` exits 2 naming it."""
    frame = grid_table(600, seed=3)
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "pop.json"
    assert main(["population", "fit", str(data), "--out", str(out), "--protected", "sex"]) == 0
    rng = np.random.default_rng(1)
    weights = [rng.normal(size=(5, 4)).tolist(), rng.normal(size=(2, 5)).tolist()]
    network = Network([Layer(np.array(weights[0]), rng.normal(size=5), "relu"),
                       Layer(np.array(weights[1]), np.zeros(2))],
                      list(frame.columns), ["no", "yes"])
    net = tmp_path / "net.json"
    net.write_text(json.dumps({"inputs": list(frame.columns), "outputs": ["no", "yes"],
                               "layers": [{"weight": layer.weight.tolist(),
                                           "bias": layer.bias.tolist(),
                                           "activation": layer.activation}
                                          for layer in network.layers]}))
    capsys.readouterr()
    code = main(["verify", "demographic-parity", "--model", str(net), "--population", str(out),
                 "--protected", "score", "--privileged", "1.5", "--favorable-class", "1",
                 "--gamma", "0.5", "--timeout", "60", "--precision", "1e-6", "--data",
                 str(data), "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code in (0, 1), payload
    assert payload["population_fidelity"]["status"] == "consistent", payload
    population = load_population(out)
    drawn = population.sample(200_000, np.random.default_rng(2))
    granted = network.classify(drawn) == 1
    privileged = drawn[:, list(population.columns).index("score")] == 1.5
    for name, members in (("p_privileged", privileged), ("p_unprivileged", ~privileged)):
        hits = granted[members]
        error = hits.std() / np.sqrt(hits.size)
        low, high = payload["probabilities"][name]
        assert low - 5 * error <= hits.mean() <= high + 5 * error
    code = main(["verify", "demographic-parity", "--model", str(net), "--population", str(out),
                 "--protected", "score", "--privileged", "1.25", "--favorable-class", "1",
                 "--gamma", "0.5", "--timeout", "20"])
    assert code == 2
    assert "privileged: 1.25 is not a value of the coded column 'score'" in \
        capsys.readouterr().err


@pytest.mark.parametrize("seed", range(3))
def test_box_branching_reads_a_half_integer_box_as_its_codes(seed: int) -> None:
    """Local robustness hands a coded column's codes ``[k_low, k_high]`` to the engine as the
    box ``[k_low − 1/2, k_high + 1/2]``; box branching (the path for populations it cannot
    enumerate) gives on it exactly what it gives on the integer box."""
    from verifier.wmi import branched
    from verifier.wmi.properties.run import run_options

    network, bound = bind(_network(seed), _grid_population(0.5, 0.0), None, "test")
    found = []
    for lower, upper in (([-0.5, 0.5, -0.5], [1.5, 3.5, 2.5]), ([0.0, 1.0, 0.0],
                                                                [1.0, 3.0, 2.0])):
        result = branched.local_robustness(network, bound, np.array(lower), np.array(upper), 1,
                                           engine=run_options(None, None, "crown", 60.0, 1e-9))
        found.append((result.probability_lower, result.probability_upper))
    assert found[0] == found[1]


def _noise_document(shifts: dict[str, tuple[list[float], list[float]]]) -> dict:
    """A noise population with one discrete factor per column: ``name: (values, probs)``,
    an integer feature when its values are whole numbers."""
    def feature(name: str, values: list[float]) -> dict:
        if all(float(v).is_integer() for v in values):
            return {"name": name, "kind": "integer", "domain": [min(values), max(values)]}
        return {"name": name, "kind": "continuous"}

    return {"format": "certgate.population/v1",
            "features": [feature(name, values) for name, (values, _) in shifts.items()],
            "distribution": {"kind": "product", "factors": [
                {"columns": [name], "distribution": {"kind": "discrete", "values": values,
                                                     "probabilities": probabilities}}
                for name, (values, probabilities) in shifts.items()]}}


def test_noise_on_codes_is_refused_unless_written_in_codes() -> None:
    """A noise population that codes its own column would have its codes added as shifts,
    and shifts in the data's units added to a coded column's codes would move it elsewhere:
    the engine refuses both, naming the column, unless told the shifts are code shifts."""
    from verifier.wmi import noise_robustness

    halves = _noise_document({"n": ([-1.0, 1.0], [0.5, 0.5])})
    halves["features"][0].update(kind="integer", domain=[-1, 1], step=0.5)
    network, bound = bind(_network(0), _plain_population(), None, "test")
    with pytest.raises(CertgateInputError, match="the noise population codes columns"):
        noise_robustness(network, bound, population_from_json(halves), [2])
    coded_network, coded_bound = bind(_network(0), _grid_population(0.5, 0.0), None, "test")
    shifts = population_from_json(_noise_document({"n": ([-1.0, 1.0], [0.5, 0.5])}))
    with pytest.raises(CertgateInputError, match="score is a coded column of the population"):
        noise_robustness(coded_network, coded_bound, shifts, [1])


def _noise_oracle(original: Network, population: PopulationModel,
                  shifts: dict[int, tuple[list[float], list[float]]]) -> Fraction:
    """``P(class(x) = class(x + n))`` by enumeration: every code point at its real value, every
    combination of the shifts (``column: (values, probabilities)``, in the data's units),
    classes in rationals."""
    columns = sorted(shifts)
    tables = [[(Fraction(v), Fraction(p)) for v, p in zip(*shifts[c], strict=True)]
              for c in columns]
    kept = Fraction(0)
    for codes, weight in _points(population):
        point = _real_point(population, codes)
        before = _oracle_class(original, point)
        for combination in itertools.product(*tables):
            moved = list(point)
            share = weight
            for column, (shift, probability) in zip(columns, combination, strict=True):
                moved[column] += shift
                share *= probability
            if _oracle_class(original, tuple(moved)) == before:
                kept += share
    return kept


@pytest.mark.parametrize(("step", "offset"), [(0.5, 0.0), (0.75, -0.5), (0.7, 0.3)])
def test_a_noise_file_on_a_coded_column_equals_enumeration_at_the_values(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], step: float, offset: float) -> None:
    """Shifts given in the data's units that are multiples of the step (−step, 0, 2·step on
    score; −1, 1 on the plain level) are written as code shifts by the verb: the certified
    probability holds the enumeration of the original network at the real points and their
    shifted values."""
    from verifier.convert import save_network
    from verifier.population import save_population

    population = _grid_population(step, offset)
    score = [float(-Fraction(step)), 0.0, float(2 * Fraction(step))]
    noise = _noise_document({"n_score": (score, [0.25, 0.5, 0.25]),
                             "n_level": ([-1.0, 1.0], [0.5, 0.5])})
    save_network(_network(1), tmp_path / "net.json")
    save_population(population, tmp_path / "pop.json")
    (tmp_path / "noise.json").write_text(json.dumps(noise))
    capsys.readouterr()
    code = main(["verify", "noise-robustness", "--model", str(tmp_path / "net.json"),
                 "--population", str(tmp_path / "pop.json"), "--features", "score,level",
                 "--noise", str(tmp_path / "noise.json"), "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 0, payload
    expected = _noise_oracle(_network(1), population,
                             {1: (score, [0.25, 0.5, 0.25]), 2: ([-1.0, 1.0], [0.5, 0.5])})
    low, high = payload["probability_interval"]
    assert low <= expected <= high and high - low < 1e-5
    assert 0 < expected < 1


def test_a_shift_off_the_grid_is_refused_naming_the_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from verifier.audits.coded_values import noise_in_codes
    from verifier.convert import save_network
    from verifier.population import save_population

    population = _grid_population(0.5, 0.0)
    save_network(_network(0), tmp_path / "net.json")
    save_population(population, tmp_path / "pop.json")
    (tmp_path / "noise.json").write_text(json.dumps(
        _noise_document({"n": ([0.0, 0.3], [0.5, 0.5])})))
    capsys.readouterr()
    code = main(["verify", "noise-robustness", "--model", str(tmp_path / "net.json"),
                 "--population", str(tmp_path / "pop.json"), "--features", "score",
                 "--noise", str(tmp_path / "noise.json")])
    assert code == 2
    assert "coded column 'score': the shift 0.3 is not a multiple of its step 0.5" in \
        capsys.readouterr().err
    mixed = population_from_json({
        "format": "certgate.population/v1", "features": [{"name": "n", "kind": "continuous"}],
        "distribution": {"kind": "mixture", "weights": [0.5, 0.5], "components": [
            {"kind": "point", "value": 0.5}, {"kind": "uniform", "lower": 0, "upper": 1}]}})
    with pytest.raises(CertgateInputError, match=r"noise on the coded column 'score'.*a factor "
                                                 r"of its own.*not a mixture"):
        noise_in_codes(mixed, population, ["score"])
    plain = population_from_json(_noise_document({"n": ([0.3], [1.0])}))
    assert noise_in_codes(plain, population, ["level"]) is plain


def test_the_equivalence_verb_with_a_tree_and_a_center_on_a_coded_population(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``verify equivalence`` of a network and a tree surrogate fitted on values, around a
    centre given in values, on the coded population: the agreement probability equals
    enumeration of both models at the real points in the box."""
    import pickle

    from sklearn.tree import DecisionTreeClassifier

    from verifier.convert import save_network
    from verifier.population import save_population

    population = _grid_population(0.5, 0.0)
    original = _network(0)
    drawn = population.sample(3000, np.random.default_rng(0))
    tree = DecisionTreeClassifier(max_depth=2, random_state=0).fit(
        drawn, original.classify(drawn))
    save_network(original, tmp_path / "net.json")
    save_population(population, tmp_path / "pop.json")
    with open(tmp_path / "tree.pkl", "wb") as handle:
        pickle.dump(tree, handle)
    center, epsilon = [0.5, 1.25, 1.0], 1.0            # score 0.5 … 2.0: codes 1 … 4
    capsys.readouterr()
    code = main(["verify", "equivalence", "--model", str(tmp_path / "net.json"),
                 "--population", str(tmp_path / "pop.json"), "--surrogate",
                 str(tmp_path / "tree.pkl"), "--center", ",".join(map(str, center)),
                 "--epsilon", str(epsilon), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0, document
    inside = agree = Fraction(0)
    for codes, weight in _points(population):
        point = _real_point(population, codes)
        if all(abs(v - Fraction(c)) <= Fraction(epsilon) for v, c in zip(point, center,
                                                                            strict=True)):
            values = np.array([[float(v) for v in point]])
            inside += weight
            agree += weight * (_oracle_class(original, point) == int(tree.predict(values)[0]))
    assert 0 < agree < inside                             # the models disagree somewhere
    low, high = document["probability_interval"]
    assert low - 1e-9 <= float(agree / inside) <= high + 1e-9
