"""The point enclosure (:mod:`verifier.point_enclosure`) and the witness re-check built on it
(:func:`verifier.causal.witness.certified_classes`), against exact rational evaluation
(:func:`verifier.exact_arith.exact_outputs`) and the class rule of
:meth:`~verifier.network.Network.classify` read exactly (ties to the lowest index).

Points near ties come from bisecting, in float, between two points of different float
classes (within a few ulps of the decision border), exact ties from dyadic networks on
dyadic grids and from two equal output rows.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.strategies import networks
from verifier.causal import build_problem, load_libra_spec, load_query_box
from verifier.causal.analysis import AnalysisSettings, analyse_chunk
from verifier.causal.classes import exact_class
from verifier.causal.partition import initial_partition
from verifier.causal.witness import certified_classes, confirmed_pairs
from verifier.convert import load_network
from verifier.exact_arith import exact_outputs
from verifier.network import Layer, Network, NetworkError
from verifier.point_enclosure import enclose_outputs

CENSUS = Path("/work/shared/benchmarks/libra/census")
ADULT_1280 = CENSUS / "networks/1280A-F.json"
DYADIC = [-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0]


def _exact_classes(network: Network, points: np.ndarray) -> list[int]:
    return [exact_class(exact_outputs(network, point)) for point in points]


def _assert_encloses(network: Network, points: np.ndarray) -> None:
    lower, upper = enclose_outputs(network, points)
    for row, point in enumerate(points):
        for k, value in enumerate(exact_outputs(network, point)):
            assert Fraction(float(lower[row, k])) <= value <= Fraction(float(upper[row, k])), \
                (row, k, lower[row, k], float(value), upper[row, k])


def _classifies(network: Network) -> bool:
    """Whether the network reads as a classifier (a single output must be a logit)."""
    return network.output_size > 1 or network.layers[-1].activation == "none"


def _near_border(network: Network, rng: np.random.Generator, count: int,
                 low: float, high: float) -> np.ndarray:
    """Random points in ``[low, high]``, plus points bisected in float to within an ulp of
    a class border wherever two random points have different float classes."""
    starts = rng.uniform(low, high, size=(count, network.input_size))
    ends = rng.uniform(low, high, size=(count, network.input_size))
    classes_start, classes_end = network.classify(starts), network.classify(ends)
    border = []
    for a, b, class_a, class_b in zip(starts, ends, classes_start, classes_end, strict=True):
        if class_a == class_b:
            continue
        for _ in range(80):
            middle = 0.5 * a + 0.5 * b
            if network.classify(middle[None])[0] == class_a:
                a = middle
            else:
                b = middle
        border.extend([a, b])
    return np.vstack([starts, *([np.array(border)] if border else [])])


@settings(max_examples=60, deadline=None)
@given(networks(), st.integers(0, 2**32 - 1), st.sampled_from([1.0, 10.0, 1e6]))
def test_the_enclosure_holds_the_exact_outputs(network: Network, seed: int, scale: float) -> None:
    assume(_classifies(network))
    rng = np.random.default_rng(seed)
    _assert_encloses(network, _near_border(network.as_classifier(), rng, 6, -scale, scale))


@settings(max_examples=60, deadline=None)
@given(networks(), st.integers(0, 2**32 - 1))
def test_certified_classes_are_the_exact_classes_near_borders(network: Network,
                                                               seed: int) -> None:
    assume(_classifies(network))
    classifier = network.as_classifier()
    points = _near_border(classifier, np.random.default_rng(seed), 8, -2.0, 2.0)
    assert certified_classes(classifier, points).tolist() == _exact_classes(classifier, points)


@st.composite
def dyadic_networks(draw: st.DrawFn) -> Network:
    """Networks of quarter weights and biases: on a grid of half-integers many outputs tie
    exactly, and every value is exact in float."""
    sizes = draw(st.lists(st.integers(1, 4), min_size=2, max_size=4))
    outputs = draw(st.integers(1, 3))
    layers = []
    for index, (fan_in, fan_out) in enumerate(zip(sizes, [*sizes[1:], outputs], strict=True)):
        weight = np.array(draw(st.lists(st.sampled_from(DYADIC), min_size=fan_in * fan_out,
                                        max_size=fan_in * fan_out))).reshape(fan_out, fan_in)
        bias = np.array(draw(st.lists(st.sampled_from(DYADIC), min_size=fan_out,
                                      max_size=fan_out)))
        last = index == len(sizes) - 1
        layers.append(Layer(weight, bias, "none" if last else "relu"))
    return Network(layers)


@settings(max_examples=80, deadline=None)
@given(dyadic_networks(), st.integers(0, 2**32 - 1))
def test_exact_ties_get_the_tie_rules_class(network: Network, seed: int) -> None:
    classifier = network.as_classifier()
    grid = np.random.default_rng(seed).integers(-4, 5, size=(12, network.input_size)) / 2.0
    certified = certified_classes(classifier, grid)
    assert certified.tolist() == _exact_classes(classifier, grid)
    # every value is exact in float here, so float argmax is the exact rule
    assert certified.tolist() == classifier.classify(grid).tolist()


def test_equal_rows_tie_everywhere_and_go_to_class_zero() -> None:
    rng = np.random.default_rng(3)
    hidden = Layer(rng.normal(size=(5, 3)), rng.normal(size=5), "relu")
    row = rng.normal(size=(1, 5))
    network = Network([hidden, Layer(np.vstack([row, row]), np.zeros(2))])
    points = rng.normal(size=(10, 3))
    lower, upper = enclose_outputs(network, points)
    assert (lower[:, 0] < upper[:, 1]).all()  # the enclosure alone cannot decide a tie
    assert certified_classes(network, points).tolist() == [0] * 10


def test_an_overflow_decides_nothing_and_falls_back_to_exact() -> None:
    big = Layer(np.full((2, 2), 1e200), np.zeros(2), "relu")
    network = Network([big, big, Layer(np.array([[1.0, -1.0], [-1.0, 1.0]]), np.zeros(2))])
    points = np.array([[1.0, 2.0], [0.5, -1.0]])
    lower, upper = enclose_outputs(network, points)
    assert not np.isnan(lower).any() and not np.isnan(upper).any()
    assert certified_classes(network, points).tolist() == _exact_classes(network, points)


def test_a_folded_network_is_refused() -> None:
    layer = Layer(np.ones((2, 2)), np.zeros(2), weight_magnitude=np.full((2, 2), 2.0))
    with pytest.raises(NetworkError, match="folded"):
        enclose_outputs(Network([layer]), np.zeros((1, 2)))


@pytest.mark.skipif(not ADULT_1280.is_file(), reason="Libra census networks not present")
def test_adult_rq4_1280_witness_classes_are_exact_and_mostly_enclosed() -> None:
    """32 layers × 40 ReLUs: the enclosure decides the points away from a border (the box
    bounds' margins decided almost none), and every class equals the exact one, at points
    bisected onto the border too."""
    classifier = load_network(ADULT_1280).as_classifier()
    rng = np.random.default_rng(0)
    points = _near_border(classifier, rng, 40, 0.0, 1.0)
    assert certified_classes(classifier, points).tolist() == _exact_classes(classifier, points)
    lower, upper = enclose_outputs(classifier, points[:40])
    assert (upper - lower).max() < 1e-2
    pairs = confirmed_pairs(classifier, points[:20], points[20:40])
    assert (pairs[1] >= 0).all() and (pairs[2] >= 0).all()


@pytest.mark.skipif(not ADULT_1280.is_file(), reason="Libra census networks not present")
def test_adult_rq4_1280_engine_witnesses_have_their_exact_classes() -> None:
    """The witnesses the analysis returns on query C (seven rounds of splitting every
    partition) are confirmed by exact rational evaluation: both classes as recorded, and
    different."""
    problem = build_problem(load_network(ADULT_1280),
                            **load_libra_spec(CENSUS / "specs/census.json"),
                            query=load_query_box(CENSUS / "queries/C.json"))
    lower, upper = initial_partition(problem)
    found = []
    for _ in range(7):
        outcome = analyse_chunk(problem, AnalysisSettings(), lower, upper)
        witnessed = outcome.witness_classes[:, 0] >= 0
        found += zip(outcome.witness_a[witnessed], outcome.witness_b[witnessed],
                     outcome.witness_classes[witnessed], strict=True)
        lower = outcome.children_lower[outcome.has_children].reshape(-1, problem.inputs)
        upper = outcome.children_upper[outcome.has_children].reshape(-1, problem.inputs)
    assert len(found) >= 10
    for x_a, x_b, classes in found:
        exact = (exact_class(exact_outputs(problem.network, x_a)),
                 exact_class(exact_outputs(problem.network, x_b)))
        assert exact == tuple(classes) and exact[0] != exact[1]
