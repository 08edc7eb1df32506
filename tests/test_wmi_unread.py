"""Columns no property reads summed out of the prior (:mod:`verifier.wmi.unread`).

Oracles: the full joint of small discrete networks enumerated in ``Fraction`` (tables of
dyadic probabilities, so the floats are the exact distribution), the network's own box
probabilities (variable elimination, :mod:`verifier.population.elimination`, which lists no
terms), and dense Monte Carlo where a column is continuous.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from bound_oracles import contains, rational_outputs
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.tree import DecisionTreeClassifier
from test_population_bayesnet import joint_table, observed_vector, random_discrete_network

from verifier.network import Layer, Network
from verifier.population import (
    BayesianNetwork,
    BayesNode,
    CPTRow,
    Discrete,
    Feature,
    Normal,
    PopulationModel,
)
from verifier.wmi import equivalence, local_robustness
from verifier.wmi.encode import WMIInputError
from verifier.wmi.terms import MAX_LISTED, MAX_TERMS, TooManyTerms, prior_terms

INF = np.inf


def dyadic(rng: np.random.Generator, k: int) -> list[float]:
    """``k`` probabilities, multiples of 1/4096 summing to 1 exactly."""
    return (rng.multinomial(4096, rng.dirichlet(np.ones(k))) / 4096).tolist()


def discrete_node(name: str, values: int, parent: str | None, cuts: list[tuple],
                  rng: np.random.Generator) -> BayesNode:
    """A node on ``0..values-1`` with one row per interval of ``cuts`` on ``parent``."""
    rows = [CPTRow(condition={} if parent is None else {parent: cut},
                   distribution=Discrete(values=list(range(values)),
                                         probabilities=dyadic(rng, values)))
            for cut in cuts]
    return BayesNode(name=name, parents=[] if parent is None else [parent], cpt=rows)


def hub_network(values: int, read: int, seed: int = 0) -> BayesianNetwork:
    """``label`` (binary, unread) the parent of ``read`` columns ``x1…`` of ``values`` values
    each, and ``flag`` (binary, unread, a leaf) a child of ``x1``: a whole-table fit's shape."""
    rng = np.random.default_rng(seed)
    nodes = [discrete_node("label", 2, None, [(None, None)], rng)]
    nodes += [discrete_node(f"x{i + 1}", values, "label", [(0, 0), (1, 1)], rng)
              for i in range(read)]
    half = float(values // 2)
    nodes.append(discrete_node("flag", 2, "x1", [(None, half - 1), (half, None)], rng))
    return BayesianNetwork(nodes=nodes)


def joint(network: BayesianNetwork) -> dict[tuple[int, ...], Fraction]:
    """Every value combination of a network of :func:`discrete_node` nodes with its exact
    probability (the chain rule, each row picked by its condition)."""
    names = [node.name for node in network.nodes]
    table = {}
    for values in itertools.product(*(range(len(node.cpt[0].distribution.values))
                                      for node in network.nodes)):
        probability = Fraction(1)
        for node, value in zip(network.nodes, values, strict=True):
            row, = [row for row in node.cpt if all(
                row.interval(p)[0] <= values[names.index(p)] <= row.interval(p)[1]
                for p in node.parents)]
            probability *= Fraction(row.distribution.probabilities[value])
        table[values] = probability
    return table


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_summed_terms_are_the_exact_marginal_of_the_read_columns_in_the_box(seed: int) -> None:
    """Random networks (latent and one-hot nodes), random read columns, a random box on the
    others: the terms' coefficients of each combination of read values enclose its
    ``Fraction`` probability with the unread columns in the box, such a combination is one
    term when some column is summed out, and the summed-out columns sit inside the box."""
    network, specs = random_discrete_network(seed, dyadic=True)
    rng = np.random.default_rng(seed)
    dimension = network.dimension
    read = {j for j in range(dimension) if rng.random() < 0.5}
    for group in network.onehot_groups():
        if read.intersection(group):
            read.update(group)
    ends = np.array([-INF, -0.5, 0.0, 0.5, 1.0, 2.0, INF])
    lower = rng.choice(ends, size=dimension)
    upper = np.maximum(lower, rng.choice(ends, size=dimension))
    unread = [j for j in range(dimension) if j not in read]
    lower[sorted(read)], upper[sorted(read)] = -INF, INF
    expected: dict[tuple[float, ...], Fraction] = {}
    for values, probability in joint_table(specs, Fraction):
        point = observed_vector(specs, values)
        if all(lower[j] <= point[j] <= upper[j] for j in unread):
            key = tuple(float(point[j]) for j in sorted(read))
            expected[key] = expected.get(key, Fraction(0)) + probability
    expected = {key: p for key, p in expected.items() if p > 0}
    if not expected:
        with pytest.raises(WMIInputError, match="no positive term"):
            prior_terms(network, read, (lower, upper))
        return
    termset = prior_terms(network, read, (lower, upper))
    ends: dict[tuple[float, ...], tuple[Fraction, Fraction]] = {}
    for term in termset.terms:
        assert set(term.atoms) == set(range(dimension))
        assert all(lower[j] <= term.atoms[j] <= upper[j] for j in unread)
        key = tuple(term.atoms[j] for j in sorted(read))
        assert not (unread and key in ends)  # merged (every column read: the regimes' terms)
        low, high = ends.get(key, (Fraction(0), Fraction(0)))
        ends[key] = (low + Fraction(term.coefficient[0]), high + Fraction(term.coefficient[2]))
    assert set(expected) <= set(ends)  # a term may stand for mass 0 its enclosure holds
    for key, (low, high) in ends.items():
        assert low <= expected.get(key, Fraction(0)) <= high


def test_a_label_hub_over_read_columns_is_summed_out_and_a_barren_leaf_dropped() -> None:
    """Three read columns of 25 values under an unread label, an unread leaf below one of
    them: 62,500 terms over every column (refused), 15,625 over the read ones; an equivalence
    audit against a tree (no box branching for a tree) now gets its exact finite sum, equal to
    the ``Fraction`` sum over the 62,500 points of the joint."""
    network = hub_network(25, 3)
    with pytest.raises(TooManyTerms):
        prior_terms(network)
    assert len(prior_terms(network, [1, 2, 3]).terms) == 25**3 <= MAX_TERMS
    model = Network([Layer(np.array([[0, 1, -1, 0.5, 0], [0, -0.5, 1, 1, 0]], float),
                           np.array([0.25, -3.0]), "relu"),
                     Layer(np.array([[1.0, -1.0]]), np.array([0.125]))],
                    ["label", "x1", "x2", "x3", "flag"], ["logit"])
    rng = np.random.default_rng(1)
    rows = rng.integers(0, 25, size=(3000, 3)).astype(float)
    tree = DecisionTreeClassifier(max_depth=4, random_state=0).fit(
        np.hstack([np.zeros((3000, 1)), rows, np.zeros((3000, 1))]),
        (rows[:, 0] - rows[:, 1] + rows[:, 2] / 3 > 2).astype(int))
    result = equivalence(model, tree, network, timeout_s=600)
    assert result.proven and result.extra["method"] == "finite sum over the prior's points"
    agree = Fraction(0)
    classes: dict[tuple[int, ...], bool] = {}
    for values, probability in joint(network).items():
        read = values[1:4]
        if read not in classes:
            point = [0, *read, 0]
            logit, = rational_outputs(model, point)
            assert logit != 0
            classes[read] = int(logit > 0) == int(tree.predict(np.array([point], float))[0])
        agree += probability * classes[read]
    assert contains(result.probability_lower, result.probability_upper, agree)
    assert result.probability_upper - result.probability_lower < 1e-9


def test_the_limit_counts_and_names_the_read_columns_only() -> None:
    """Four read columns of 25 values make 390,625 terms without the label: still refused,
    and the message names the read columns, not the summed-out label or leaf."""
    network = hub_network(25, 4)
    population = PopulationModel(
        features=[Feature(name="label", kind="binary"),
                  *[Feature(name=f"x{i}", kind="integer", domain=[0, 24]) for i in (1, 2, 3, 4)],
                  Feature(name="flag", kind="binary")],
        distribution=network)
    with pytest.raises(TooManyTerms) as refused:
        prior_terms(population, [1, 2, 3, 4])
    message = str(refused.value)
    assert "discrete values read: 'x1' 25 × 'x2' 25 × 'x3' 25 × 'x4' 25" in message
    assert "'label'" not in message and "'flag'" not in message
    assert "2 columns no model reads summed out" in message


def test_a_hub_of_many_values_stops_at_the_listing_limit() -> None:
    """An unread hub of 30 values over two read columns of 100: ~300,000 terms listed for
    10,000 merged ones, past :data:`MAX_LISTED`; refused as too many terms (a network is
    then box-branched), never listed without end."""
    rng = np.random.default_rng(4)
    network = BayesianNetwork(nodes=[
        discrete_node("hub", 30, None, [(None, None)], rng),
        *[discrete_node(f"x{i}", 100, "hub", [(v, v) for v in range(30)], rng)
          for i in (1, 2)]])
    assert MAX_LISTED < 30 * 100 * 100 * 0.95
    with pytest.raises(TooManyTerms, match=f"list more than {MAX_LISTED} terms"):
        prior_terms(network, [1, 2])


def continuous_hub(seed: int = 3) -> BayesianNetwork:
    """``label`` (unread hub) → ``x`` (normal per label, read) and ``d`` (0..3 per label,
    read); ``flag`` (unread) a child of ``d``."""
    rng = np.random.default_rng(seed)
    return BayesianNetwork(nodes=[
        discrete_node("label", 2, None, [(None, None)], rng),
        BayesNode(name="x", parents=["label"], cpt=[
            CPTRow(condition={"label": (0, 0)}, distribution=Normal(mean=-1.0, std=1.0)),
            CPTRow(condition={"label": (1, 1)}, distribution=Normal(mean=1.5, std=0.75))]),
        discrete_node("d", 4, "label", [(0, 0), (1, 1)], rng),
        discrete_node("flag", 2, "d", [(None, 1), (2, None)], rng),
    ])


@pytest.mark.parametrize("box", [None, ([1, -INF, -INF, 0], [1, INF, INF, 0])])
def test_summed_continuous_terms_hold_the_networks_own_box_probabilities(box) -> None:
    """The terms over ``x`` and ``d`` (label and flag summed out, unrestricted or fixed by a
    box) enclose the probability of every ``x`` interval and ``d`` value that the network's
    variable elimination encloses: both are sound, so they meet."""
    network = continuous_hub()
    ends = (np.full(4, -INF), np.full(4, INF)) if box is None else tuple(
        np.array(end, float) for end in box)
    termset = prior_terms(network, [1, 2], ends)
    # per d value, one term per label value in the box (x's density differs between them)
    assert len(termset.terms) == (8 if box is None else 4)
    for a, b in [(-INF, INF), (-3.0, -0.5), (-0.5, 0.25), (0.25, 2.0), (1.0, INF)]:
        for v in range(4):
            low = high = 0.0
            for term in termset.terms:
                if term.atoms[2] == v:
                    mass_low, mass_high = term.densities[1].mass(np.array([a]), np.array([b]))
                    low += term.coefficient[0] * float(mass_low[0])
                    high += term.coefficient[2] * float(mass_high[0])
            lo, hi = ends[0].copy(), ends[1].copy()
            lo[1:3], hi[1:3] = (a, v), (b, v)
            exact_low, exact_high = network.prob_boxes_interval(lo[None], hi[None])
            assert low * (1 - 1e-12) <= exact_high[0] and exact_low[0] <= high * (1 + 1e-12)
            assert high - low < 1e-9


def test_local_robustness_with_a_box_on_the_unread_columns_holds_monte_carlo() -> None:
    """Local robustness of a model reading ``x`` and ``d`` in a box that fixes the unread
    label and leaf: the certified interval holds the 10⁶-draw Monte Carlo estimate."""
    network = continuous_hub()
    model = Network([Layer(np.array([[0.0, 1.0, -0.5, 0.0]]), np.array([0.3]))],
                    ["label", "x", "d", "flag"], ["logit"])
    center, epsilon = np.array([1.0, 0.5, 1.0, 0.0]), np.array([0.5, 1.2, 1.2, 0.5])
    result = local_robustness(model, network, center, epsilon, timeout_s=120)
    samples = network.sample(1_000_000, 7)
    inside = np.all(np.abs(samples - center) <= epsilon, axis=1)
    kept = samples[inside]
    expected_class = result.extra["expected_class"]
    hits = ((kept[:, 1] - 0.5 * kept[:, 2] + 0.3 >= 0).astype(int) == expected_class)
    share, se = hits.mean(), hits.std() / np.sqrt(kept.shape[0])
    assert result.probability_lower - 4 * se <= share <= result.probability_upper + 4 * se
    assert result.probability_upper - result.probability_lower < 0.01
