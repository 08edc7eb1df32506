"""PV on populations with one-hot groups (simplex-aware bounds, category-halving splits):
every certified probability interval contains the exact probability, computed by
enumerating every point of the population in exact rational arithmetic."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import random_network

from verifier.audits import check_population_fits, demographic_parity_audit
from verifier.exact_arith import exact_outputs
from verifier.network import Layer, Network
from verifier.population.fitting import fit_bayesian_network, infer_features
from verifier.population.model import PopulationModel
from verifier.pv import ProbabilityBranchAndBound, PVSettings, population_domain
from verifier.pv.domain import InputDomain
from verifier.pv.splitting import Splitter
from verifier.spec import demographic_parity

COLUMNS = ["sex", "job=a", "job=b", "job=c", "job=d", "edu=x", "edu=y", "edu=z", "hours"]


def _population(seed: int) -> PopulationModel:
    rng = np.random.default_rng(seed)
    rows = 400
    sex = rng.integers(0, 2, rows)
    job = (rng.integers(0, 4, rows) + sex) % 4
    edu = rng.integers(0, 3, rows)
    hours = rng.integers(0, 4, rows) + edu
    frame = pd.DataFrame({"sex": sex})
    for j, name in enumerate("abcd"):
        frame[f"job={name}"] = (job == j).astype(int)
    for e, name in enumerate("xyz"):
        frame[f"edu={name}"] = (edu == e).astype(int)
    frame["hours"] = hours.astype(int)
    features = infer_features(
        frame, categorical={"job": COLUMNS[1:5], "edu": COLUMNS[5:8]},
        domains={"hours": (0, 6)},
    )
    return fit_bayesian_network(frame, features, {"job": ["sex"], "hours": ["edu"]}, min_rows=5)


def _exact_rates(
    network: Network, population: PopulationModel, column: int = 0
) -> tuple[Fraction, Fraction]:
    """P[class 1 | x[column] = 0] and P[class 1 | x[column] = 1] (column 0: sex), exactly,
    over every population point."""
    favourable = {0: Fraction(0), 1: Fraction(0)}
    total = {0: Fraction(0), 1: Fraction(0)}
    for sex, job, edu, hours in itertools.product(range(2), range(4), range(3), range(7)):
        x = np.zeros(9)
        x[0], x[1 + job], x[5 + edu], x[8] = sex, 1.0, 1.0, hours
        mass = Fraction(float(population.prob_boxes(x[None], x[None])[0]))
        if mass == 0:
            continue
        outputs = exact_outputs(network, x.tolist())
        group = int(x[column])
        total[group] += mass
        if outputs[1] > outputs[0]:
            favourable[group] += mass
    return favourable[0] / total[0], favourable[1] / total[1]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("budget", [0.3, 20.0])
@pytest.mark.parametrize(("split", "enumerate_points"), [
    ("smear-longest-edge", 0), ("smear-longest-edge", 40), ("babsb-longest-edge", 0),
    ("longest-edge", 1000),
])
def test_pv_intervals_contain_the_enumerated_rates(
    seed: int, budget: float, split: str, enumerate_points: int
) -> None:
    rng = np.random.default_rng(seed)
    network = random_network(rng, [9, 8, 6, 2])
    network = Network(network.layers, COLUMNS, ["no", "yes"])
    population = _population(seed)
    unprivileged, privileged = _exact_rates(network, population)
    # a threshold at the exact difference can never be proven either way: PV refines to the end
    gamma = float(abs(unprivileged - privileged)) or 0.05
    certificate = demographic_parity_audit(
        network, population, protected="sex", privileged=1, favorable_class=1, gamma=gamma,
        form="difference", settings=PVSettings(timeout_s=budget, batch_size=64, split=split,
                            enumerate_points=enumerate_points),
    )
    # the point masses above are float enclosure midpoints: allow their relative 1e-12 rounding
    slack = Fraction(1, 10**9)
    low, high = certificate.bounds["p_unprivileged"]
    assert Fraction(low) - slack <= unprivileged <= Fraction(high) + slack
    low, high = certificate.bounds["p_privileged"]
    assert Fraction(low) - slack <= privileged <= Fraction(high) + slack
    if certificate.details["stopped_by"] == "exhausted":  # every box decided: exact up to rounding
        for name in ("p_unprivileged", "p_privileged"):
            low, high = certificate.bounds[name]
            assert high - low < 1e-9


def test_enumerating_a_box_gives_each_of_its_points_once_and_all_its_mass() -> None:
    population = _population(3)
    network = Network(random_network(np.random.default_rng(3), [9, 5, 2]).layers, COLUMNS,
                      ["no", "yes"])
    names = check_population_fits(network, population)
    spec = demographic_parity(names, protected="sex", privileged=1, favorable_class=1, gamma=0.8)
    masses, domain = population_domain(population)
    engine = ProbabilityBranchAndBound(network, spec, masses, domain, PVSettings())
    lo, hi = domain.lower.copy(), domain.upper.copy()
    hi[1] = 0.0  # job=a excluded: 3 jobs left
    lo[8], hi[8] = 2.0, 4.0  # hours in {2, 3, 4}
    assert engine.splitter.point_counts(lo[None], hi[None])[0] == 2 * 3 * 3 * 3
    point_lo, point_hi, parent = engine.splitter.enumerate(lo[None], hi[None])
    assert point_lo.shape[0] == 54 and (parent == 0).all()
    assert np.array_equal(point_lo, point_hi)
    assert len({tuple(p) for p in point_lo}) == 54
    total_lo, total_hi = masses(lo[None], hi[None])
    mass_lo, mass_hi = masses(point_lo, point_hi)
    assert mass_lo.sum() <= total_hi[0] and total_lo[0] <= mass_hi.sum()


def test_sparse_integer_supports_are_snapped_and_enumerated_exactly() -> None:
    """A column whose values are a few scattered integers (capital gains: mostly 0): boxes are
    shrunk to those values and cut between them; the exhausted interval is the exact rate."""
    from verifier.population.distributions import Discrete
    from verifier.population.model import PopulationModel
    from verifier.population.product import Factor, Product
    from verifier.population.schema import Feature

    gains = [0.0, 114.0, 3103.0, 99999.0]
    weights = [0.9, 0.04, 0.05, 0.01]
    population = PopulationModel(
        features=[Feature(name="sex", kind="binary"),
                  Feature(name="gain", kind="integer", domain=(0, 99999))],
        distribution=Product(factors=[
            Factor(columns=["sex"], distribution=Discrete(values=[0, 1],
                                                          probabilities=[0.4, 0.6])),
            Factor(columns=["gain"], distribution=Discrete(values=gains,
                                                           probabilities=weights)),
        ]),
    )
    assert population.column_atoms()[1].tolist() == gains
    layers = random_network(np.random.default_rng(5), [2, 6, 2]).layers
    first = layers[0]
    layers[0] = Layer(first.weight * np.array([1.0, 1e-3]), first.bias, first.activation)
    network = Network(layers, ["sex", "gain"], ["no", "yes"])
    rates = {}
    for sex in (0, 1):
        outputs = [exact_outputs(network, [float(sex), g]) for g in gains]
        rates[sex] = sum(Fraction(w) for w, y in zip(weights, outputs, strict=True)
                         if y[1] > y[0]) / sum(Fraction(w) for w in weights)
    certificate = demographic_parity_audit(
        network, population, protected="sex", privileged=1, favorable_class=1,
        gamma=float(abs(rates[0] - rates[1])) or 0.05, form="difference",
        settings=PVSettings(timeout_s=20, batch_size=8),
    )
    slack = Fraction(1, 10**9)
    for name, sex in (("p_unprivileged", 0), ("p_privileged", 1)):
        low, high = certificate.bounds[name]
        assert Fraction(low) - slack <= rates[sex] <= Fraction(high) + slack
        assert high - low < 1e-9
    assert certificate.cost["boxes"] <= 16  # 2 sexes x 4 gains, never an empty gain range
    # the first cut of the gain column cuts off the value holding 90 % of its mass alone
    names = check_population_fits(network, population)
    spec = demographic_parity(names, protected="sex", privileged=1, favorable_class=1, gamma=0.8)
    masses, domain = population_domain(population)
    splitter = ProbabilityBranchAndBound(network, spec, masses, domain, PVSettings()).splitter
    lo, hi = domain.lower[None].copy(), domain.upper[None].copy()
    order = np.zeros_like(lo)
    left_lo, left_hi, right_lo, right_hi = splitter.children(lo, hi, np.array([1]), order)
    assert (left_lo[0, 1], left_hi[0, 1], right_lo[0, 1], right_hi[0, 1]) == (0, 0, 114, 99999)


@pytest.mark.parametrize("seed", range(3))
def test_a_one_hot_column_named_name_equals_value_can_be_the_protected_attribute(
        seed: int) -> None:
    """`population fit` names one-hot columns NAME=VALUE: such a column is a protected
    attribute like any other (its events are written x["job=b"])."""
    rng = np.random.default_rng(seed)
    network = Network(random_network(rng, [9, 8, 2]).layers, COLUMNS, ["no", "yes"])
    population = _population(seed)
    unprivileged, privileged = _exact_rates(network, population, COLUMNS.index("job=b"))
    certificate = demographic_parity_audit(
        network, population, protected="job=b", privileged=1, favorable_class=1, gamma=0.5,
        form="difference", settings=PVSettings(timeout_s=20.0, batch_size=64),
    )
    slack = Fraction(1, 10**9)
    for name, exact in (("p_unprivileged", unprivileged), ("p_privileged", privileged)):
        low, high = certificate.bounds[name]
        assert Fraction(low) - slack <= exact <= Fraction(high) + slack


def _skewed_population() -> PopulationModel:
    """Like :func:`_population`, but job ``a`` holds about 70 % of the mass."""
    rng = np.random.default_rng(11)
    rows = 600
    sex = rng.integers(0, 2, rows)
    job = rng.choice(4, size=rows, p=[0.7, 0.1, 0.1, 0.1])
    edu = rng.integers(0, 3, rows)
    frame = pd.DataFrame({"sex": sex})
    for j, name in enumerate("abcd"):
        frame[f"job={name}"] = (job == j).astype(int)
    for e, name in enumerate("xyz"):
        frame[f"edu={name}"] = (edu == e).astype(int)
    frame["hours"] = (rng.integers(0, 4, rows) + edu).astype(int)
    features = infer_features(
        frame, categorical={"job": COLUMNS[1:5], "edu": COLUMNS[5:8]},
        domains={"hours": (0, 6)},
    )
    return fit_bayesian_network(frame, features, {"job": ["sex"], "hours": ["edu"]}, min_rows=5)


def _splitter(population: PopulationModel) -> tuple[Splitter, InputDomain]:
    network = Network(random_network(np.random.default_rng(2), [9, 5, 2]).layers, COLUMNS,
                      ["no", "yes"])
    names = check_population_fits(network, population)
    spec = demographic_parity(names, protected="sex", privileged=1, favorable_class=1, gamma=0.8)
    masses, domain = population_domain(population)
    return ProbabilityBranchAndBound(network, spec, masses, domain, PVSettings()).splitter, domain


def test_a_category_holding_half_the_open_mass_is_cut_off_alone() -> None:
    splitter, domain = _splitter(_skewed_population())
    lo, hi = domain.lower[None].copy(), domain.upper[None].copy()
    order = np.zeros_like(lo)
    order[0, 1:5] = [0.0, 3.0, 1.0, 2.0]
    left_lo, left_hi, right_lo, right_hi = splitter.children(lo, hi, np.array([1]), order)
    assert left_lo[0, 1:5].tolist() == [1, 0, 0, 0] and left_hi[0, 1:5].tolist() == [1, 0, 0, 0]
    assert right_lo[0, 1:5].tolist() == [0, 0, 0, 0] and right_hi[0, 1:5].tolist() == [0, 1, 1, 1]
    # without job a, no open category holds half the mass: halves in coefficient order
    hi[0, 1] = 0.0
    left_lo, left_hi, right_lo, right_hi = splitter.children(lo, hi, np.array([1]), order)
    assert left_lo[0, 1:5].tolist() == [0, 0, 1, 0] and left_hi[0, 1:5].tolist() == [0, 0, 1, 0]
    assert right_lo[0, 1:5].tolist() == [0, 0, 0, 0] and right_hi[0, 1:5].tolist() == [0, 1, 0, 1]


def test_the_split_guide_holds_the_order_on_the_splitters_group_columns_only() -> None:
    """The one array a box keeps for splitting: on the columns the splitter splits as one-hot
    groups, the signed coefficients of the undecided atom with the largest total drive
    (which order the categories), elsewhere the largest drive over the undecided atoms
    (which smear multiplies by the width)."""
    splitter, _ = _splitter(_skewed_population())
    atoms = splitter.atoms
    rng = np.random.default_rng(5)
    boxes, count, width = 6, atoms.constants.size, splitter.group_of.size
    drive = rng.uniform(0.0, 3.0, size=(boxes, count, width))
    signed = rng.normal(size=(boxes, count, width))
    undecided = rng.random((boxes, count)) < 0.7
    undecided[:, 0] = True
    guide = atoms.split_guide(drive, signed, undecided)
    assert guide.dtype == np.float32 and guide.shape == (boxes, width)
    grouped = splitter.group_of >= 0
    assert grouped.any() and not grouped.all()
    for box in range(boxes):
        live = np.where(undecided[box][:, None], drive[box], 0.0)
        leading = int(np.argmax(live.sum(axis=1)))
        np.testing.assert_array_equal(guide[box, grouped],
                                      signed[box, leading, grouped].astype(np.float32))
        np.testing.assert_array_equal(guide[box, ~grouped],
                                      live.max(axis=0)[~grouped].astype(np.float32))


@given(st.data())
def test_category_halves_partition_the_open_categories(data: st.DataObject) -> None:
    splitter, _ = _splitter(_skewed_population())
    boxes = data.draw(st.integers(1, 20))
    allowed = np.array(data.draw(st.lists(
        st.lists(st.booleans(), min_size=4, max_size=4).filter(lambda row: sum(row) >= 2),
        min_size=boxes, max_size=boxes)))
    coefficients = np.array(data.draw(st.lists(
        st.lists(st.floats(-5, 5), min_size=4, max_size=4), min_size=boxes, max_size=boxes)))
    zero_mass = data.draw(st.booleans())
    if zero_mass:  # categories the population gives no mass: the coefficient halves still apply
        splitter.category_mass[:] = 0.0
    first, second = splitter._halve_categories(allowed, np.zeros(boxes, np.int64), coefficients)
    assert not (first & second).any()
    assert ((first | second) == allowed).all()
    assert first.any(axis=1).all() and second.any(axis=1).all()


@given(st.data())
def test_one_group_on_every_box_allows_what_the_per_box_rule_allows(
    data: st.DataObject
) -> None:
    splitter, domain = _splitter(_skewed_population())
    boxes = data.draw(st.integers(1, 30))
    ends = st.sampled_from([-0.5, 0.0, 0.5, 1.0, 1.5])
    corners = np.array(data.draw(st.lists(
        st.lists(st.tuples(ends, ends), min_size=domain.lower.size, max_size=domain.lower.size),
        min_size=boxes, max_size=boxes)))
    lo, hi = corners.min(axis=2), corners.max(axis=2)
    for group in range(len(domain.groups)):
        expected = splitter.allowed(lo, hi, np.full(boxes, group))
        own = len(domain.groups[group])
        assert np.array_equal(splitter.group_allowed(lo, hi, group), expected[:, :own])
        assert not expected[:, own:].any()


def test_a_group_with_a_heavy_category_scores_its_share_of_mass() -> None:
    """Job's heaviest category holds ~70 % of its mass, so fixing it removes job's whole
    coefficient range on that share: job (range 1.0) is split before education (range 1.2,
    no heavy category), which coefficient halving alone would prefer."""
    splitter, domain = _splitter(_skewed_population())
    share = splitter.category_mass[0].max() / splitter.category_mass[0].sum()
    assert 0.6 < share < 0.8
    lo, hi = domain.lower[None].copy(), domain.upper[None].copy()
    order = np.zeros_like(lo)
    order[0, 1:5] = [0.0, 1.0, 0.5, 0.5]
    order[0, 5:8] = [0.0, 1.2, 0.6]
    undecided = np.ones((1, splitter.atoms.constants.size), dtype=bool)
    dims = splitter.choose_dims(lo, hi, np.zeros(1, np.int64), undecided, order)
    assert dims.tolist() == [1]
    order[0, 5:8] = [0.0, 1.6, 0.6]  # now education's range beats job's 2 × 0.7 × 1.0
    dims = splitter.choose_dims(lo, hi, np.zeros(1, np.int64), undecided, order)
    assert dims.tolist() == [5]
