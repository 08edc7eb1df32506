"""A float column's common values keep their own mass in the default fit (issue "float atoms").

The table: ``balance`` is exactly 0.0 on about 46 % of the rows (more often for ``female``
= 1) and a cents amount elsewhere; the network's favourable class is ``balance > 0.005``, so
it treats 0.0 apart. Before the fix the histogram spread the zeros over a uniform bin and
demographic parity was certified near 1 while the data's ratio is 0.64.

Oracles: exact counts of the data (the atom's weight is the data's share, compared as
``Fraction``s), the data's parity ratio, 200,000 Monte Carlo draws from the fitted population
(± 4 standard errors of the ratio, delta method), closed forms for a hand-made mixture with an
atom on a split face (causal shares), and a brute-force tally of the share bounds over a
hand-written ledger.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import torch

from certgate.population_data import fit_population
from tests.causal_nets import threshold_network
from verifier.audits import demographic_parity_audit, run_audit
from verifier.audits.causal_fairness import (
    CausalFairnessSettings,
    input_domain,
    integer_inputs,
)
from verifier.audits.fidelity import _is_discrete
from verifier.causal import CausalSettings, build_problem, certify_causal_fairness, share
from verifier.causal.certify import REFINING
from verifier.causal.codes import BIASED_EVERYWHERE, BIASED_WITNESS, FAIR
from verifier.causal.partition import initial_partition
from verifier.causal.share import population_bounds
from verifier.convert.torch_module import from_torch
from verifier.population import (
    BayesianNetwork,
    Categorical,
    Factor,
    Mixture,
    PointMass,
    PopulationModel,
    Product,
    Uniform,
)
from verifier.population.fitting import fit_continuous_histogram
from verifier.pv.domain import population_domain
from verifier.wmi.measures import ColumnMarginal
from verifier.wmi.terms import prior_terms

AUDIT = {"protected": "female", "privileged": 0, "favorable_class": 1, "gamma": 0.8,
         "timeout_s": 60}


def balance_table(rows: int = 4000, seed: int = 7) -> pd.DataFrame:
    """``female`` ~ Bernoulli(½); ``balance`` = 0.0 with probability 0.6 (female) or 0.32
    (male), else a lognormal amount rounded to cents; ``age`` an integer in 18..69."""
    rng = np.random.default_rng(seed)
    female = rng.integers(0, 2, size=rows)
    zero = rng.random(rows) < np.where(female == 1, 0.6, 0.32)
    balance = np.where(zero, 0.0, np.round(rng.lognormal(7.0, 1.0, size=rows), 2))
    return pd.DataFrame({"female": female, "balance": balance,
                         "age": rng.integers(18, 70, size=rows)})


def nonzero_network(columns: list[str], female_weight: float = 0.0):
    """Class 1 iff ``balance + female_weight·female − 0.005 > 0``: with weight 0, iff the
    balance is not 0.0 (the data's amounts are at least a cent)."""
    layer = torch.nn.Linear(len(columns), 2).double()
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias.zero_()
        layer.weight[1, columns.index("balance")] = 1.0
        layer.weight[1, columns.index("female")] = female_weight
        layer.bias[1] = -0.005
    return from_torch(torch.nn.Sequential(layer), columns, ["no", "yes"])


def data_ratio(frame: pd.DataFrame) -> float:
    favourable = frame.balance > 0.005
    return float(favourable[frame.female == 1].mean() / favourable[frame.female == 0].mean())


def monte_carlo_ratio(model: PopulationModel, draws: int = 200_000) -> tuple[float, float]:
    """The model's ratio ``P(fav | female) / P(fav | male)`` from ``draws`` draws and its
    standard error (delta method on the two independent group rates)."""
    sample = pd.DataFrame(model.sample(draws, np.random.default_rng(11)), columns=model.columns)
    favourable = sample.balance > 0.005
    women, men = favourable[sample.female == 1], favourable[sample.female == 0]
    p_w, p_m = float(women.mean()), float(men.mean())
    ratio = p_w / p_m
    error = ratio * math.sqrt((1 - p_w) / (p_w * women.size) + (1 - p_m) / (p_m * men.size))
    return ratio, error


def test_histogram_keeps_a_common_value_as_an_atom_with_the_datas_share() -> None:
    values = balance_table().balance.to_numpy()
    histogram = fit_continuous_histogram(values)
    zeros = int((values == 0.0).sum())
    atoms = [(w, c) for w, c in zip(histogram.weights, histogram.components, strict=True)
             if isinstance(c, PointMass)]
    assert [c.value for _, c in atoms] == [0.0]
    assert Fraction(atoms[0][0]) == Fraction(zeros / values.size)
    rest = values[values != 0.0]
    for weight, component in zip(histogram.weights, histogram.components, strict=True):
        if isinstance(component, Uniform):
            assert component.lower >= rest.min() and component.upper <= rest.max()
            inside = (rest >= component.lower) & (rest < component.upper)
            if component.upper == rest.max():
                inside |= rest == rest.max()
            assert weight == pytest.approx(inside.sum() / values.size, abs=1e-15)
    assert sum(histogram.weights) == pytest.approx(1.0, abs=1e-12)
    assert not histogram.atomless_columns()[0]
    assert histogram.column_atoms()[0] is None


def test_values_below_the_atom_share_stay_in_the_density() -> None:
    values = np.random.default_rng(3).exponential(2.0, size=2000)
    values[:60] = 1.5  # 3 % of the rows: not an atom
    histogram = fit_continuous_histogram(values)
    assert not any(isinstance(c, PointMass) for c in histogram.components)
    assert histogram.atomless_columns()[0]


@pytest.mark.parametrize("protected", [None, "female"])
def test_default_fit_puts_the_datas_share_on_zero_and_parity_matches(protected) -> None:
    frame = balance_table()
    model = fit_population(frame, protected=protected)
    assert isinstance(model.distribution, BayesianNetwork)
    column = model.columns.index("balance")
    assert not model.atomless_columns()[column]
    lo, hi = model.support()
    lo, hi = lo.copy(), hi.copy()
    lo[column] = hi[column] = 0.0
    low, high = model.prob_boxes_interval(lo[None, :], hi[None, :])
    share = float((frame.balance == 0.0).mean())
    assert low[0] <= share <= high[0] and high[0] - low[0] < 1e-9
    network = nonzero_network(list(model.columns))
    result = demographic_parity_audit(network, model, **AUDIT)
    certified_low, certified_high = result.bounds["value"]
    estimate, error = monte_carlo_ratio(model)
    assert certified_low - 4 * error <= estimate <= certified_high + 4 * error
    assert result.verdict == "violated"
    if protected == "female":  # balance's rows are fitted per female value: the data's ratio
        assert certified_low <= data_ratio(frame) * (1 + 1e-9)
        assert data_ratio(frame) <= certified_high * (1 + 1e-9)


def test_a_cut_of_a_continuous_parent_never_lies_on_its_atom() -> None:
    # A learned structure makes female balance's parent (a cut feature is no parent of one
    # read per value), so the edge is given here, with a cut on the atom 0.0 itself.
    frame = balance_table()
    median = float(frame.balance.median())
    model = fit_population(frame, parents={"female": ["balance"]},
                           bins={"balance": [0.0, median]})
    assert ("balance", "female") in model.distribution.edges()
    female = next(node for node in model.distribution.nodes if node.name == "female")
    ends = [end for row in female.cpt for end in row.interval("balance")]
    assert 0.0 not in ends and min(e for e in ends if e > -np.inf) > 0.0
    lower = [row.interval("balance")[0] for row in female.cpt]
    upper = [row.interval("balance")[1] for row in female.cpt]
    assert sum(lo <= 0.0 <= hi for lo, hi in zip(lower, upper, strict=True)) == 1


def test_pv_splits_the_atom_column_into_disjoint_boxes() -> None:
    model = fit_population(balance_table(), protected="female")
    _, domain = population_domain(model)
    column = model.columns.index("balance")
    assert not domain.atomless[column] and not domain.integer[column]


def _atom_on_the_midpoint() -> Product:
    """x = 0.5 (the domain's midpoint, the first split face) with probability ½, else
    Uniform(0, 1); s ~ Uniform(0, 1)."""
    mixed = Mixture(weights=[0.5, 0.5],
                    components=[PointMass(value=0.5), Uniform(lower=0.0, upper=1.0)])
    return Product(factors=[Factor(columns=["x"], distribution=mixed),
                            Factor(columns=["s"], distribution=Uniform(lower=0.0, upper=1.0))])


def test_causal_population_share_counts_an_atom_on_a_face_once() -> None:
    # class 1 iff x + s/2 > 3/4: s flips the class iff x in (1/4, 3/4]; P = ½ + ½·½ = 3/4
    problem = build_problem(threshold_network([1.0, 0.5], -0.75, ["x", "s"]), ["s"])
    certificate = certify_causal_fairness(problem, CausalSettings(timeout_s=20),
                                          population=_atom_on_the_midpoint())
    low, high = certificate.bounds["biased_share_population"]
    assert low <= 0.75 <= high and high - low < 1e-6


def test_share_bounds_of_a_ledger_against_a_brute_force_tally() -> None:
    """Tiles [0, ½] and [½, ¾] biased everywhere, [¾, 1] fair: the ledger's biased mass is
    P(x <= ¾) = ½ + ½·¾ = 7/8 however the atom at the shared face ½ is assigned; summing the
    closed tiles' masses counted it twice (9/8 → 1)."""
    problem = build_problem(threshold_network([1.0, 0.5], -0.75, ["x", "s"]), ["s"])
    lower = np.array([[0.0, 0.0], [0.5, 0.0], [0.75, 0.0]])
    upper = np.array([[0.5, 1.0], [0.75, 1.0], [1.0, 1.0]])
    status = np.array([BIASED_EVERYWHERE, BIASED_EVERYWHERE, FAIR])
    sample = _atom_on_the_midpoint().sample(200_000, np.random.default_rng(5))[:, 0]
    tile = np.argmax((sample[:, None] >= lower[None, :, 0])
                     & (sample[:, None] <= upper[None, :, 0]), axis=1)
    biased = float(np.isin(tile, [0, 1]).mean())
    assert abs(biased - 0.875) < 4 * math.sqrt(0.875 * 0.125 / sample.size)
    low, high = population_bounds(problem, _atom_on_the_midpoint(), lower, upper, status,
                                  np.array([0.0, 0.0]), np.array([1.0, 1.0])).share
    assert low <= 0.875 <= high and high - low < 1e-6


def test_default_flow_causal_fairness_share_contains_the_atoms_mass() -> None:
    frame = balance_table()
    model = fit_population(frame, protected="female")
    network = nonzero_network(list(model.columns), female_weight=0.01)
    result = run_audit(CausalFairnessSettings(
        kind="causal_fairness", protected=["female"], max_biased_share=0.01, timeout_s=60,
        measure="population"), network, model)
    low, high = result.bounds["biased_share_population"]
    # s flips the class iff balance < 0.005: the zeros only (the density starts at a cent)
    assert low <= float((frame.balance == 0.0).mean()) <= high


def test_fidelity_reads_a_columns_atoms_as_the_exact_engine_does() -> None:
    """Monotonicity's precondition is strict on a column the prior's terms fix (WMI's
    ``discrete_columns``); the data counterpart reads the same from the population: tenths
    kept as atoms are discrete although their feature is continuous."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"tenths": rng.choice([0.1, 0.2, 0.3, 0.4], 400),
                          "income": rng.lognormal(10.0, 0.5, 400),
                          "grade": rng.integers(0, 3, 400)})
    model = fit_population(frame, structure="independent")
    assert [f.kind for f in model.features] == ["continuous", "continuous", "integer"]
    termset = prior_terms(model)
    for column in model.columns:
        index = model.columns.index(column)
        assert _is_discrete(model, column) == (index in termset.discrete_columns())
    assert [_is_discrete(model, c) for c in model.columns] == [True, False, True]


def test_branched_monotonicity_lists_the_point_masses_of_a_mixed_column() -> None:
    """Box-branching WMI (priors too large to enumerate) bounds the tie probability of the
    feature's independent copy over its point masses: a column with an atom beside a
    density lists the atom (tests/test_wmi_mixed_columns.py checks the probabilities)."""
    model = fit_population(balance_table(), protected="female")
    assert list(ColumnMarginal(model, model.columns.index("balance")).point_masses()) == [0.0]
    assert ColumnMarginal(model, model.columns.index("age")).integer_columns()[0]


def _with_a_group() -> Product:
    """x as in :func:`_atom_on_the_midpoint`, a one-hot group of three equally likely
    categories, s ~ Uniform(0, 1)."""
    mixed = Mixture(weights=[0.5, 0.5],
                    components=[PointMass(value=0.5), Uniform(lower=0.0, upper=1.0)])
    return Product(factors=[
        Factor(columns=["x"], distribution=mixed),
        Factor(columns=["g0", "g1", "g2"],
               distribution=Categorical(probabilities=[1 / 3, 1 / 3, 1 / 3])),
        Factor(columns=["s"], distribution=Uniform(lower=0.0, upper=1.0))])


def test_causal_share_with_a_one_hot_group_beside_the_atom() -> None:
    """Class 1 iff x + 0.4 s − 0.5 − 2 g2 > 0: g0 and g1 are biased on x ∈ (0.1, 0.5], g2
    is fair, so the share is (2/3)·(½ + ½·0.4) = 7/15, the atom at 0.5 included."""
    network = threshold_network([1.0, 0.0, 0.0, -2.0, 0.4], -0.5, ["x", "g0", "g1", "g2", "s"])
    problem = build_problem(network, ["s"], onehot_groups=[["g0", "g1", "g2"]])
    certificate = certify_causal_fairness(problem, CausalSettings(timeout_s=30),
                                          population=_with_a_group())
    low, high = certificate.bounds["biased_share_population"]
    assert low <= 7 / 15 <= high


def test_only_bisected_columns_get_their_faces_moved() -> None:
    """A ledger over x × category: [0, ½] biased everywhere for g0 and g1, everything else
    fair. Its biased mass is (2/3)·P(x <= ½) = (2/3)·(¾) = ½ exactly; a single category's
    partition has lower face 1 on its column, which is no shared face and keeps its mass."""
    network = threshold_network([1.0, 0.0, 0.0, -2.0, 0.4], -0.5, ["x", "g0", "g1", "g2", "s"])
    problem = build_problem(network, ["s"], onehot_groups=[["g0", "g1", "g2"]])
    lower, upper, status = [], [], []
    for category in range(3):
        for x_low, x_high in ((0.0, 0.5), (0.5, 1.0)):
            onehot = [1.0 if c == category else 0.0 for c in range(3)]
            lower.append([x_low, *onehot, 0.0])
            upper.append([x_high, *onehot, 1.0])
            status.append(BIASED_EVERYWHERE if category < 2 and x_low == 0.0 else FAIR)
    low, high = population_bounds(problem, _with_a_group(), np.array(lower), np.array(upper),
                                  np.array(status), np.zeros(5), np.ones(5)).share
    assert low <= 0.5 <= high and high - low < 1e-6


def test_a_cell_holding_one_value_is_that_value() -> None:
    """Everyone unemployed has a balance of exactly 0.0: under the histogram fit that CPT
    row is the point mass at 0.0 (its data), not the pooled histogram."""
    rng = np.random.default_rng(4)
    employed = rng.integers(0, 2, size=1000)
    balance = np.where(employed == 1, np.round(rng.lognormal(6.0, 1.0, size=1000), 2), 0.0)
    frame = pd.DataFrame({"employed": employed, "balance": balance})
    model = fit_population(frame, parents={"balance": ["employed"]})
    node = next(n for n in model.distribution.nodes if n.name == "balance")
    unemployed = next(row for row in node.cpt if row.interval("employed") == (0.0, 0.0))
    assert unemployed.distribution == PointMass(value=0.0)
    low, high = model.prob_boxes_interval([[0.0, 0.0]], [[0.0, 0.0]])
    share = float(((frame.employed == 0) & (frame.balance == 0.0)).mean())
    assert low[0] <= share <= high[0]


def _bisected(problem, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``count`` partitions tiling the query: a random partition halved on a random bisected
    column, again and again (so neighbours share faces)."""
    lower, upper = (bound.copy() for bound in initial_partition(problem))
    columns = list(problem.continuous)
    while lower.shape[0] < count:
        row, column = int(rng.integers(lower.shape[0])), columns[int(rng.integers(len(columns)))]
        middle = 0.5 * (lower[row, column] + upper[row, column])
        left_upper, right_lower = upper[row].copy(), lower[row].copy()
        left_upper[column], right_lower[column] = middle, middle
        lower = np.vstack([lower, right_lower])
        upper = np.vstack([upper, upper[row]])
        upper[row] = left_upper
    return lower, upper


def _measured_ledger(fitted: bool, rng: np.random.Generator):
    """A problem, its population and 40 partitions tiling its query (and the query): under
    the fitted Bayesian network of the balance table (atoms on the partitions' shared faces:
    the disjoint lower sums) or under the mixture with a one-hot group."""
    if fitted:
        model = fit_population(balance_table(), protected="female")
        network = nonzero_network(list(model.columns), female_weight=0.01)
        settings = CausalFairnessSettings(kind="causal_fairness", protected=["female"],
                                          max_biased_share=0.5, measure="population")
        problem = build_problem(network, ["female"],
                                domain=input_domain(settings, network, model),
                                integer_inputs=integer_inputs(settings, network, model))
    else:
        model = _with_a_group()
        network = threshold_network([1.0, 0.0, 0.0, -2.0, 0.4], -0.5,
                                    ["x", "g0", "g1", "g2", "s"])
        problem = build_problem(network, ["s"], onehot_groups=[["g0", "g1", "g2"]])
    lower, upper = _bisected(problem, 40, rng)
    query_lower, query_upper = (bound[0] for bound in initial_partition(problem))
    return problem, model, lower, upper, query_lower, query_upper


@pytest.mark.parametrize("fitted", [True, False])
def test_population_shares_measured_in_blocks_are_those_of_one_call(
        monkeypatch: pytest.MonkeyPatch, fitted: bool) -> None:
    """The population measure runs over the partitions in blocks (to bound its memory); each
    box's enclosure depends on that box alone, so the shares and the query's mass are, bit
    for bit, those of the single call over every partition it made before (a block larger
    than the ledger), under both populations of :func:`_measured_ledger`, for several
    assignments of classes to the partitions."""
    rng = np.random.default_rng(11)
    problem, model, lower, upper, query_lower, query_upper = _measured_ledger(fitted, rng)
    for _ in range(4):
        status = rng.choice([FAIR, BIASED_EVERYWHERE, BIASED_WITNESS, REFINING], size=40)
        monkeypatch.setattr(share, "MEASURE_BLOCK", 1 << 20)
        whole = population_bounds(problem, model, lower, upper, status, query_lower,
                                  query_upper)
        monkeypatch.setattr(share, "MEASURE_BLOCK", 7)
        blocks = population_bounds(problem, model, lower, upper, status, query_lower,
                                   query_upper)
        assert blocks == whole


class _CountedBoxes:
    """A population that counts the boxes its interval masses are asked for (every other
    attribute is the population's own)."""

    def __init__(self, population) -> None:
        self.population = population
        self.boxes = 0

    def prob_boxes_interval(self, lower: np.ndarray, upper: np.ndarray):
        self.boxes += lower.shape[0]
        return self.population.prob_boxes_interval(lower, upper)

    def __getattr__(self, name: str):
        return getattr(self.population, name)


@pytest.mark.parametrize("fitted", [True, False])
def test_population_shares_from_kept_masses_are_those_of_one_call(fitted: bool) -> None:
    """A verdict check keeps the masses of the ledger's final partitions, and the next check
    and the certificate measure only the partitions after them: given the first ``k``
    partitions' masses from an earlier call, the shares, the query's mass and every
    partition's masses are, bit for bit, those of a call that measures all 40, and the
    population is asked for the boxes a call over the other ``40 − k`` partitions alone asks
    for (theirs and the query's; the disjoint lower sums' moved faces)."""
    rng = np.random.default_rng(12)
    problem, model, lower, upper, query_lower, query_upper = _measured_ledger(fitted, rng)
    status = rng.choice([FAIR, BIASED_EVERYWHERE, BIASED_WITNESS, REFINING], size=40)
    whole = population_bounds(problem, model, lower, upper, status, query_lower, query_upper)
    assert whole.measured == 40
    for kept in (0, 1, 17, 39, 40):
        counted = _CountedBoxes(model)
        again = population_bounds(problem, counted, lower, upper, status, query_lower,
                                  query_upper, known=whole.masses.first(kept))
        assert again == whole
        assert np.array_equal(again.masses.low, whole.masses.low)
        assert np.array_equal(again.masses.high, whole.masses.high)
        rest = _CountedBoxes(model)
        population_bounds(problem, rest, lower[kept:], upper[kept:], status[kept:],
                          query_lower, query_upper)
        assert counted.boxes == rest.boxes


def test_a_measure_cut_by_its_deadline_stays_sound(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tally's ledger measured in blocks of one partition with a deadline already passed:
    only the query's box is measured (its mass as before), each partition adds 0 to the
    lower sums and the upper end is ``P(query) − P(fair)``, so the share still holds the
    tally's 7/8, holds the fully measured share, and says no partition was measured."""
    monkeypatch.setattr(share, "MEASURE_BLOCK", 1)
    problem = build_problem(threshold_network([1.0, 0.5], -0.75, ["x", "s"]), ["s"])
    lower = np.array([[0.0, 0.0], [0.5, 0.0], [0.75, 0.0]])
    upper = np.array([[0.5, 1.0], [0.75, 1.0], [1.0, 1.0]])
    status = np.array([BIASED_EVERYWHERE, BIASED_EVERYWHERE, FAIR])
    query = (np.array([0.0, 0.0]), np.array([1.0, 1.0]))
    full = population_bounds(problem, _atom_on_the_midpoint(), lower, upper, status, *query)
    cut = population_bounds(problem, _atom_on_the_midpoint(), lower, upper, status, *query,
                            deadline=time.monotonic())
    assert (full.measured, cut.measured) == (3, 0)
    assert cut.query_mass == full.query_mass
    assert cut.share[0] <= full.share[0] <= 0.875 <= full.share[1] <= cut.share[1]
