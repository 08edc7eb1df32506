"""A tie is a class: causal certificates on integer networks with exact ties, against an exact
oracle (every integer point evaluated in ``fractions.Fraction``, class = argmax with ties to the
lowest index; a single logit ``z`` is class 1 iff ``z > 0``).

The oracle here is written independently of :mod:`verifier.exact_arith` and of the certifier's
class helpers."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline_steps.cli import main as cli_main
from verifier.causal import CausalSettings, build_problem, certify_causal_fairness
from verifier.causal import sampling as witness_sampling
from verifier.causal.analysis import proven_classes
from verifier.causal.classes import possible_from_upper, proven_from_lower
from verifier.causal.enumeration import ENUMERATION_WORK
from verifier.causal.exact_check import check_partition
from verifier.causal.partition import initial_partition, with_protected
from verifier.network import Layer, Network


def _oracle_class(network: Network, point: tuple[float, ...]) -> int:
    """The class of ``network`` (no head) at ``point`` in exact rational arithmetic."""
    h = [Fraction(v) for v in point]
    for layer in network.layers:
        h = [sum((Fraction(float(w)) * v for w, v in zip(row, h, strict=True)),
                 Fraction(float(b))) for row, b in zip(layer.weight, layer.bias, strict=True)]
        if layer.activation == "relu":
            h = [max(v, Fraction(0)) for v in h]
    if len(h) == 1:
        return int(h[0] > 0)
    return max(range(len(h)), key=lambda k: (h[k], -k))


def _oracle_share(network: Network, ranges: list[tuple[int, int]], protected: int) -> Fraction:
    """Exact share of the non-protected integer points whose class depends on the protected
    value (``ranges[protected]`` lists the protected values)."""
    others = [range(lo, hi + 1) for i, (lo, hi) in enumerate(ranges) if i != protected]
    low, high = ranges[protected]
    biased = total = 0
    for rest in itertools.product(*others):
        classes = set()
        for value in range(low, high + 1):
            point = list(rest)
            point.insert(protected, value)
            classes.add(_oracle_class(network, tuple(point)))
        biased += len(classes) > 1
        total += 1
    return Fraction(biased, total)


def _certify(network: Network, ranges: list[tuple[int, int]], protected: int,
             sampling: bool = True, timeout: float = 20.0, enumeration_work: int = 0):
    """The certificate of the integer grid ``ranges``; partitioned unless ``enumeration_work``
    lets the finite query be enumerated (these tests are about the partitioning's checks)."""
    names = [f"x{i}" for i in range(len(ranges))]
    network = network.renamed(input_names=names)
    problem = build_problem(network, [names[protected]], integer_inputs="all",
                            domain={n: r for n, r in zip(names, ranges, strict=True)})
    return certify_causal_fairness(problem, CausalSettings(timeout_s=timeout, max_unstable=16,
                                                           witness_sampling=sampling,
                                                           enumeration_work=enumeration_work))


def _assert_sound(network: Network, ranges: list[tuple[int, int]], protected: int,
                  certificate) -> Fraction:
    truth = _oracle_share(network, ranges, protected)
    low, high = certificate.bounds["biased_share"]
    assert low <= float(truth) <= high, (certificate.verdict, (low, high), truth)
    if certificate.verdict == "fair":
        assert truth == 0
    for witness in certificate.details["witnesses"]:
        a = tuple(int(v) for v in witness["x"])
        b = tuple(int(v) for v in witness["x_other"])
        assert [_oracle_class(network, a), _oracle_class(network, b)] == witness["classes"]
        assert witness["classes"][0] != witness["classes"][1]
    return truth


def _affine(weight, bias) -> Layer:
    return Layer(np.array(weight, dtype=float), np.array(bias, dtype=float), "none")


# z = x + s − 1 on x, s ∈ {0, 1}: at x = 1 the class goes from 0 (z = 0, a tie) to 1.
TIE_LOGIT = Network([_affine([[1.0, 1.0]], [-1.0])])
# y0 = x + s − 1 against y1 = 0: at x = 0, s = 1 ties go to class 0; s = 0 gives class 1.
TIE_OUTPUTS = Network([_affine([[1.0, 1.0], [0.0, 0.0]], [-1.0, 0.0])])


def test_a_tie_is_class_zero_of_a_single_logit() -> None:
    for sampling in (True, False):
        certificate = _certify(TIE_LOGIT, [(0, 1), (0, 1)], 1, sampling)
        assert certificate.verdict == "biased"
        assert _assert_sound(TIE_LOGIT, [(0, 1), (0, 1)], 1, certificate) == Fraction(1, 2)
        assert certificate.bounds["biased_share"][1] - 0.5 < 1e-12


def test_a_tie_of_two_outputs_goes_to_the_lowest_index() -> None:
    for sampling in (True, False):
        certificate = _certify(TIE_OUTPUTS, [(0, 1), (0, 1)], 1, sampling)
        assert certificate.verdict == "biased"
        assert _assert_sound(TIE_OUTPUTS, [(0, 1), (0, 1)], 1, certificate) == Fraction(1, 2)


def test_cli_does_not_call_the_tie_network_fair(tmp_path: Path, capsys) -> None:
    model = tmp_path / "tie.json"
    model.write_text(json.dumps({"inputs": ["x", "s"], "outputs": ["z"], "layers": [
        {"weight": [[1.0, 1.0]], "bias": [-1.0], "activation": "none"}]}))
    cli_main(["verify", "causal-fairness", "--model", str(model), "--protected", "s",
              "--domain", "x=0:1,s=0:1", "--integer-inputs", "all", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "biased"
    low, high = report["biased_fraction"]
    assert low <= 0.5 <= high


def _deep_network(final: list[float]) -> Network:
    """Ten ReLU layers over (x0, x1, s): ``e`` = 1 exactly at (x0, x1) = (1, 0) (else 0),
    ``a`` = 1 there when s = −1, ``q`` = −2⁻⁶⁰·s exactly (0 in float: ``1 + 2⁻⁶⁰·s`` rounds
    to 1); the logit is ``final · (a, 1 − e, e, q)``."""
    layers = [
        Layer(np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1],
                        [0, 0, 2.0**-60]], dtype=float),
              np.array([-1, 1, 0, 0, 2, 1], dtype=float), "relu"),
        Layer(np.array([[-1, -1, -1, -1, 0, 0], [0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, -1]],
                       dtype=float), np.array([1, 0, 1], dtype=float), "relu"),
        Layer(np.array([[1, 1, 0], [-1, 0, 0], [1, 0, 0], [0, 0, 1]], dtype=float),
              np.array([-1, 1, 0, 0], dtype=float), "relu"),
    ]
    layers += [Layer(np.eye(4), np.zeros(4), "relu") for _ in range(7)]
    layers.append(_affine([final], [0.0]))
    return Network(layers)


DEEP_RANGES = [(-3, 2), (-1, 1), (-2, -1)]


def test_deep_net_tiny_negative_logit_is_class_zero() -> None:
    """At (1, 0) the logit is −2⁻⁵⁴ (class 0) for s = −2 and 0.007 − 2⁻⁵⁴ for s = −1: one
    point of 18 is biased, though the margin is ~6e-17."""
    network = _deep_network([0.007, -1.0, -(2.0**-54), 0.0])
    for sampling in (True, False):
        certificate = _certify(network, DEEP_RANGES, 2, sampling)
        assert certificate.verdict == "biased"
        assert _assert_sound(network, DEEP_RANGES, 2, certificate) == Fraction(1, 18)


def test_deep_net_whose_float_value_hides_the_bias() -> None:
    """At (1, 0), s = −2 the logit is 3·2⁻⁶¹ − 2⁻⁵⁹ = −2⁻⁶¹ exactly (class 0) but +3·2⁻⁶¹ in
    float (class 1, as at s = −1): only exact arithmetic sees the bias."""
    network = _deep_network([0.007, -1.0, 3 * 2.0**-61, -1.0])
    assert network.classify(np.array([[1.0, 0.0, -2.0], [1.0, 0.0, -1.0]])).tolist() == [1, 1]
    for sampling in (True, False):
        certificate = _certify(network, DEEP_RANGES, 2, sampling)
        assert certificate.verdict == "biased"
        assert _assert_sound(network, DEEP_RANGES, 2, certificate) == Fraction(1, 18)


def test_the_exact_check_does_not_certify_a_tiny_margin_away() -> None:
    """The two-copy MILP over the whole deep-net domain: the best margin is 2⁻⁵⁴, inside the
    band the MILP leaves undecided; it must not answer fair."""
    network = _deep_network([0.007, -1.0, -(2.0**-54), 0.0]).renamed(
        input_names=["x0", "x1", "s"])
    problem = build_problem(network, ["s"], integer_inputs="all",
                            domain={"x0": (-3, 2), "x1": (-1, 1), "s": (-2, -1)})
    lower, upper = initial_partition(problem)
    cell_lo, cell_hi = with_protected(problem, lower, upper, problem.protected_cells)
    _, result = proven_classes(problem, cell_lo, cell_hi, "crown")
    bounds = [({k: v[c] for k, v in result.pre_lower.items()},
               {k: v[c] for k, v in result.pre_upper.items()}) for c in range(2)]
    outcome = check_partition(problem, lower[0], upper[0], bounds)
    assert outcome.status != "fair"


def test_protected_input_behind_off_relus_is_fair_exactly() -> None:
    """z = x − 0.5 + relu(s − 2) on [0, 1]²: the s neuron is off everywhere, so every
    partition, the one straddling z = 0 included, is fair with no MILP."""
    network = Network([
        Layer(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0.0, -2.0]), "relu"),
        _affine([[1.0, 1.0]], [-0.5]),
    ], input_names=["x", "s"])
    problem = build_problem(network, ["s"])
    certificate = certify_causal_fairness(problem, CausalSettings(max_unstable=0,
                                                                  timeout_s=10.0))
    assert certificate.verdict == "fair"
    assert certificate.cost["milps"] == 0.0
    assert certificate.bounds["biased_share"] == (0.0, 0.0)


def test_a_feasible_tie_model_that_highs_presolve_called_infeasible() -> None:
    """Found by the property test below: with presolve on, HiGHS declared the two-copy MILP
    for classes (1, 2) infeasible although (x0, x1, x2) = (0, 0, 1) / (1, 0, 1) has classes
    1 (a tie of y1 and y2 goes to 1) and 2; the certificate said fair."""
    network = Network([
        Layer(np.array([[-2.0, -2, 2], [2, -2, 2], [-2, -2, -2]]), np.array([-1.0, -1, 0.5]),
              "relu"),
        _affine([[-2.0, -2, -2], [-1, -2, -2], [-2, -1, -1]], [-2.0, -2, -2]),
    ])
    ranges = [(0, 1), (0, 0), (0, 1)]
    for sampling in (True, False):
        certificate = _certify(network, ranges, 0, sampling)
        assert certificate.verdict == "biased"
        assert _assert_sound(network, ranges, 0, certificate) == Fraction(1, 2)
    # the exact check alone, with and without a presolved first try: presolve's
    # "infeasible" is solved again without it, which finds the witness
    problem = build_problem(network.renamed(input_names=["x0", "x1", "x2"]), ["x0"],
                            integer_inputs="all",
                            domain={"x0": (0, 1), "x1": (0, 0), "x2": (0, 1)})
    lower, upper = initial_partition(problem)
    cell_lo, cell_hi = with_protected(problem, lower, upper, problem.protected_cells)
    _, result = proven_classes(problem, cell_lo, cell_hi, "crown")
    bounds = [({k: v[c] for k, v in result.pre_lower.items()},
               {k: v[c] for k, v in result.pre_upper.items()}) for c in range(2)]
    for first in (False, True):
        outcome = check_partition(problem, lower[0], upper[0], bounds, presolve_first=first)
        assert outcome.status == "witness"
        assert [_oracle_class(network, tuple(int(v) for v in point))
                for point in (outcome.x_a, outcome.x_b)] == list(outcome.classes)


@settings(max_examples=300, deadline=None)
@given(outputs=st.lists(st.integers(-2, 2), min_size=2, max_size=4))
def test_bound_readers_follow_the_class_rule(outputs: list[int]) -> None:
    """On exact values (lower = upper bounds of the differences) the proven class is the
    argmax with ties to the lowest index, and only it is possible."""
    k = len(outputs)
    diffs = np.array([[outputs[c] - outputs[d] for c in range(k) for d in range(k) if d != c]],
                     dtype=float)
    expected = max(range(k), key=lambda j: (outputs[j], -j))
    assert proven_from_lower(diffs, k).tolist() == [expected]
    assert possible_from_upper(diffs, k)[0].tolist() == [j == expected for j in range(k)]


DYADIC = st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])


def _dyadic_network(draw, inputs: int, hidden: int, outputs: int) -> Network:
    """A one-hidden-layer ReLU network with weights and biases drawn from ``DYADIC``."""

    def weights(count: int) -> np.ndarray:
        return np.array(draw(st.lists(DYADIC, min_size=count, max_size=count)))

    return Network([
        Layer(weights(hidden * inputs).reshape(hidden, inputs), weights(hidden), "relu"),
        Layer(weights(outputs * hidden).reshape(outputs, hidden), weights(outputs), "none"),
    ])


@st.composite
def _tie_networks(draw) -> tuple[Network, list[tuple[int, int]], int]:
    """Random small ReLU networks on integer grids with small dyadic weights and biases, so
    that many points sit exactly on a tie; one logit or two/three outputs."""
    inputs = draw(st.integers(2, 3))
    ranges = [(draw(st.integers(-2, 0)), draw(st.integers(0, 2))) for _ in range(inputs)]
    protected = draw(st.integers(0, inputs - 1))
    low, high = ranges[protected]
    if low == high:
        ranges[protected] = (low, low + 1)
    hidden = draw(st.integers(1, 3))
    outputs = draw(st.sampled_from([1, 2, 3]))
    network = _dyadic_network(draw, inputs, hidden, outputs)
    return network, ranges, protected


@settings(max_examples=60, deadline=None)
@given(case=_tie_networks(), sampling=st.booleans())
def test_planted_ties_match_the_exact_oracle(case, sampling: bool) -> None:
    network, ranges, protected = case
    certificate = _certify(network, ranges, protected, sampling)
    truth = _assert_sound(network, ranges, protected, certificate)
    # every integer point is decidable exactly: the run ends decided, the share exact
    assert certificate.verdict == ("fair" if truth == 0 else "biased")
    low, high = certificate.bounds["biased_share"]
    assert high - low < 1e-9
    enumerated = _certify(network, ranges, protected, enumeration_work=ENUMERATION_WORK)
    assert _assert_sound(network, ranges, protected, enumerated) == truth
    counts = enumerated.details["enumerated"]
    assert Fraction(counts["biased"], counts["points"]) == truth


@settings(max_examples=60, deadline=None)
@given(case=_tie_networks(), presolve_first=st.booleans())
def test_the_exact_check_alone_never_contradicts_the_oracle(case, presolve_first: bool) -> None:
    """One exact check over the whole grid, with the LP-relaxation proof first (no presolve
    first) or presolve first: "fair" only where no integer point is biased, and a witness
    only with the oracle's two classes."""
    network, ranges, protected = case
    names = [f"x{i}" for i in range(len(ranges))]
    problem = build_problem(network.renamed(input_names=names), [names[protected]],
                            integer_inputs="all",
                            domain={n: r for n, r in zip(names, ranges, strict=True)})
    lower, upper = initial_partition(problem)
    cell_lo, cell_hi = with_protected(problem, lower, upper, problem.protected_cells)
    _, result = proven_classes(problem, cell_lo, cell_hi, "crown")
    cells = problem.cell_count
    bounds = [({k: v[c] for k, v in result.pre_lower.items()},
               {k: v[c] for k, v in result.pre_upper.items()}) for c in range(cells)]
    outcome = check_partition(problem, lower[0], upper[0], bounds, presolve_first=presolve_first)
    if outcome.status == "fair":
        assert _oracle_share(network, ranges, protected) == 0
    if outcome.status == "witness":
        assert [_oracle_class(network, tuple(int(v) for v in point))
                for point in (outcome.x_a, outcome.x_b)] == list(outcome.classes)


def test_a_witness_is_found_where_the_best_margin_sits_on_the_other_copys_tie() -> None:
    """Libra German 0.20-bias5, one partition (x5 ∈ [0.16, 0.19], the protected x014 free):
    the MILP's best point puts copy A exactly on its decision border, where the real class
    is the other one by ~1e-17, so it is no witness; the clear-margin search finds one
    (before: the partition was left undecided and split)."""
    from verifier.causal import load_libra_spec, load_query_box
    from verifier.causal.analysis import BIASED_WITNESS, AnalysisSettings, analyse_chunk
    from verifier.convert import load_network

    libra = Path("/work/shared/benchmarks/libra")
    network = load_network(libra / "german/networks/0.20-bias5.json")
    problem = build_problem(network, **load_libra_spec(libra / "german/specs/german.json"),
                            query=load_query_box(libra / "german/queries/Gt.json"))
    lower = np.array([0, 0, 1, 1, 0, 0.16, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0], dtype=float)
    upper = lower.copy()
    upper[5], upper[14] = 0.19, 1.0
    outcome = analyse_chunk(problem, AnalysisSettings(max_unstable=14, witness_sampling=False),
                            lower[None], upper[None])
    assert outcome.status[0] == BIASED_WITNESS and outcome.milps >= 1
    a, b = outcome.witness_a[0], outcome.witness_b[0]
    assert np.array_equal(np.delete(a, 14), np.delete(b, 14))
    assert (a[14] < 0.51) != (b[14] < 0.51)
    assert _oracle_class(network, tuple(a)) != _oracle_class(network, tuple(b))


@st.composite
def _one_hot_tie_networks(draw) -> tuple[Network, int, list[tuple[int, int]]]:
    """Random small ReLU networks whose first ``values`` inputs are a one-hot protected
    feature, followed by one or two integer inputs; dyadic weights, so many points tie."""
    values = draw(st.integers(2, 4))
    ranges = [(draw(st.integers(-1, 0)), draw(st.integers(0, 1)))
              for _ in range(draw(st.integers(1, 2)))]
    inputs = values + len(ranges)
    hidden = draw(st.integers(1, 3))
    outputs = draw(st.sampled_from([1, 2, 3]))
    network = _dyadic_network(draw, inputs, hidden, outputs)
    return network, values, ranges


def one_hot_problem(network: Network, values: int, ranges: list[tuple[int, int]]):
    """The causal problem of a network from :func:`_one_hot_tie_networks`: inputs ``s0…``
    the one-hot protected feature, ``x0…`` integers on ``ranges``."""
    names = [f"s{v}" for v in range(values)] + [f"x{i}" for i in range(len(ranges))]
    return build_problem(network.renamed(input_names=names), names[:values],
                         protected_kind="one_hot", integer_inputs=names[values:],
                         domain={n: r for n, r in zip(names[values:], ranges, strict=True)})


def one_hot_grid_biased(network: Network, values: int, ranges: list[tuple[int, int]]) -> bool:
    """Whether some integer point of ``ranges`` gets two classes (the oracle's, ties
    included) under two values of the one-hot protected feature."""
    unit = np.eye(values)
    return any(
        len({_oracle_class(network, (*unit[v], *rest)) for v in range(values)}) > 1
        for rest in itertools.product(*(range(lo, hi + 1) for lo, hi in ranges)))


@settings(max_examples=60, deadline=None)
@given(case=_one_hot_tie_networks(), merge=st.booleans(), relaxation=st.booleans())
def test_the_one_hot_exact_check_never_contradicts_the_oracle(case, merge: bool,
                                                               relaxation: bool) -> None:
    """One exact check over the whole grid of a one-hot protected feature, merged encoding
    (both copies any value, the two values different) or one MILP family per value pair,
    with or without the LP-relaxation proof first: "fair" only where no integer point is
    biased, a witness only with the oracle's two classes."""
    network, values, ranges = case
    problem = one_hot_problem(network, values, ranges)
    lower, upper = initial_partition(problem)
    cell_lo, cell_hi = with_protected(problem, lower, upper, problem.protected_cells)
    _, result = proven_classes(problem, cell_lo, cell_hi, "crown")
    bounds = [({k: v[c] for k, v in result.pre_lower.items()},
               {k: v[c] for k, v in result.pre_upper.items()}) for c in range(values)]
    outcome = check_partition(problem, lower[0], upper[0], bounds, merge_cells=merge,
                              relaxation_first=relaxation)
    if outcome.status == "fair":
        assert not one_hot_grid_biased(network, values, ranges)
    if outcome.status == "witness":
        assert [_oracle_class(network, tuple(point)) for point in (outcome.x_a, outcome.x_b)
                ] == list(outcome.classes)
        assert np.array_equal(outcome.x_a[values:], outcome.x_b[values:])


@settings(max_examples=40, deadline=None)
@given(case=_tie_networks())
def test_witness_sampling_in_blocks_is_the_one_piece_search(case) -> None:
    """Sampling partitions in blocks (here one partition a block) finds the same candidates
    as one piece, anchors included; and the whole certification with one-partition blocks
    still matches the exact oracle."""
    network, ranges, protected = case
    names = [f"x{i}" for i in range(len(ranges))]
    problem = build_problem(network.renamed(input_names=names), [names[protected]],
                            integer_inputs="all",
                            domain={n: r for n, r in zip(names, ranges, strict=True)})
    others = [range(lo, hi + 1) for i, (lo, hi) in enumerate(ranges) if i != protected]
    low, high = ranges[protected]
    points = np.array([[*rest[:protected], 0.0, *rest[protected:]]
                       for rest in itertools.product(*others)], dtype=float)
    lower, upper = points.copy(), points.copy()
    lower[0], upper[0] = [lo for lo, _ in ranges], [hi for _, hi in ranges]
    lower[:, protected] = upper[:, protected] = 0.0
    values = np.broadcast_to(np.arange(low, high + 1, dtype=float)[None, :, None],
                             (points.shape[0], high - low + 1, 1)).copy()
    anchors = np.where(np.arange(points.shape[0])[:, None] % 2 == 0, points, np.nan)
    whole = witness_sampling.find_witnesses(problem, lower, upper, values, anchors)
    with patch.object(witness_sampling, "BLOCK_ROWS", 1):
        blocks = witness_sampling.find_witnesses(problem, lower, upper, values, anchors)
        certificate = _certify(network, ranges, protected)
    found = whole[0]
    assert np.array_equal(found, blocks[0])
    for one, other in zip(whole[1:], blocks[1:], strict=True):
        assert np.array_equal(one[found], other[found])
    _assert_sound(network, ranges, protected, certificate)
