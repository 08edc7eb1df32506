"""The smear split and the exact-check switch inside refinements, against closed forms and
brute force over every integer point."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.causal_nets import (
    assert_share_contains_estimate,
    random_network,
    threshold_network,
)
from tests.test_causal_integer import _assert_integer_witnesses, _brute_force, _logit_network
from verifier.causal import CausalSettings, build_problem, certify_causal_fairness
from verifier.causal import analysis as analysis_module
from verifier.causal import certify as certify_module
from verifier.causal.analysis import (
    FAIR,
    ChunkOutcome,
    analyse_chunk,
    gives_up_saturated,
    proven_classes,
    smear_split,
)
from verifier.causal.partition import initial_partition, uniform_share, with_protected
from verifier.causal.problem import CausalInputError
from verifier.executor import InProcessExecutor
from verifier.network import Layer, Network


def _smear(problem, lower, upper) -> np.ndarray:
    cell_lo, cell_hi = with_protected(problem, lower, upper, problem.protected_cells)
    _, result = proven_classes(problem, cell_lo, cell_hi, "crown")
    return result.sensitivity.reshape(lower.shape[0], -1, lower.shape[1]).sum(axis=1)


def test_smear_cuts_the_input_the_network_reads_and_tiles_the_parent() -> None:
    # class 1 iff x + 0.5 s > 0.75: z (index 0) is never read, x (index 1) drives the bounds
    network = threshold_network([0.0, 1.0, 0.5], -0.75, ["z", "x", "s"])
    problem = build_problem(network, ["s"])
    lower, upper = initial_partition(problem)
    children_lo, children_hi, ok = smear_split(problem, lower, upper,
                                               _smear(problem, lower, upper), 0.0)
    assert ok.tolist() == [True]
    assert children_hi[0, 0, :2].tolist() == [1.0, 0.5]
    assert children_lo[0, 1, :2].tolist() == [0.0, 0.5]
    shares = uniform_share(problem, children_lo[0], children_hi[0])
    assert shares.sum() == pytest.approx(uniform_share(problem, lower, upper)[0])


def test_smear_respects_min_edge() -> None:
    network = threshold_network([0.0, 1.0, 0.5], -0.75, ["z", "x", "s"])
    problem = build_problem(network, ["s"])
    lower, upper = initial_partition(problem)
    upper = upper.copy()
    upper[0, 1] = 0.1  # x narrower than L: only z may be cut, however little it matters
    _, children_hi, ok = smear_split(problem, lower, upper, _smear(problem, lower, upper), 0.2)
    assert ok.tolist() == [True]
    assert children_hi[0, 0, 0] == 0.5


def _mixed_problem(integer_high: int = 3):
    """Inputs ``c`` (continuous), ``k`` (integers ``0…integer_high``), a 4-category group
    ``a0…a3``, a 3-category group ``b0…b2`` and the protected ``s`` (integers 0, 1)."""
    names = ["c", "k", "a0", "a1", "a2", "a3", "b0", "b1", "b2", "s"]
    network = random_network(len(names), [6], 0).renamed(input_names=names)
    return build_problem(network, ["s"], onehot_groups=[names[2:6], names[6:9]],
                         integer_inputs=["k", "s"],
                         domain={"k": (0, integer_high), "s": (0, 1)})


def test_blind_partitions_halve_the_largest_group_before_any_edge() -> None:
    # zero sensitivity (the bounds name no input): the 4-category group is halved first,
    # then the 3-category one, and the widest edge only once both are down to one category
    problem = _mixed_problem()
    lower, upper = initial_partition(problem)
    blind = np.zeros_like(lower)
    _, children_hi, ok = smear_split(problem, lower, upper, blind, 0.0)
    assert ok.tolist() == [True]
    assert children_hi[0, 0, 2:6].tolist() == [1, 1, 0, 0]
    assert children_hi[0, 1, 2:6].tolist() == [0, 0, 1, 1]
    assert np.array_equal(children_hi[0, :, 6:9], upper[[0, 0], 6:9])
    single = upper.copy()
    single[0, 3:6] = 0.0
    single_lo = lower.copy()
    single_lo[0, 2] = 1.0
    _, children_hi, _ = smear_split(problem, single_lo, single, blind, 0.0)
    assert children_hi[0, 0, 6:9].tolist() == [1, 1, 0]
    single[0, 7:9] = 0.0
    single_lo[0, 6] = 1.0
    # groups down to one category: the edge adding the most width to the first layer,
    # Σ_j |W₁[j, i]| · width (k spans 3, c spans 1), whatever their widths in the query
    drive = np.abs(problem.network.layers[0].weight).sum(axis=0)[:2] * [1.0, 3.0]
    _, children_hi, _ = smear_split(problem, single_lo, single, blind, 0.0)
    if drive[0] > drive[1]:
        assert children_hi[0, 0, :2].tolist() == [0.5, 3.0]
    else:
        assert children_hi[0, 0, :2].tolist() == [1.0, 1.0]
    assert children_hi[0, 0, 2:9].tolist() == single[0, 2:9].tolist()
    narrow = single.copy()
    narrow[0, 0] = drive[1] / drive[0] / 2  # c now adds half of k's width
    _, children_hi, _ = smear_split(problem, single_lo, narrow, blind, 0.0)
    assert children_hi[0, 0, :2].tolist() == [narrow[0, 0], 1.0]


def _points(problem, lower: np.ndarray, upper: np.ndarray) -> set[tuple]:
    """Every point of a box on the grid of its integer inputs, its allowed categories and
    the continuous input at its ends and midpoint (protected entry left 0)."""
    c_values = sorted({lower[0], 0.5 * (lower[0] + upper[0]), upper[0]})
    k_values = range(int(lower[1]), int(upper[1]) + 1)
    a_allowed = np.flatnonzero(upper[2:6] > 0.5)
    b_allowed = np.flatnonzero(upper[6:9] > 0.5)
    return {(c, k, a, b) for c, k, a, b in itertools.product(c_values, k_values, a_allowed,
                                                             b_allowed)}


def _contains(lower: np.ndarray, upper: np.ndarray, point: tuple) -> bool:
    c, k, a, b = point
    return bool(lower[0] <= c <= upper[0] and lower[1] <= k <= upper[1]
                and upper[2 + a] > 0.5 and upper[6 + b] > 0.5
                and (lower[2:6].sum() == 0 or lower[2 + a] == 1)
                and (lower[6:9].sum() == 0 or lower[6 + b] == 1))


@settings(max_examples=60, deadline=None)
@given(a_allowed=st.lists(st.booleans(), min_size=4, max_size=4).filter(any),
       b_allowed=st.lists(st.booleans(), min_size=3, max_size=3).filter(any),
       k_range=st.tuples(st.integers(0, 5), st.integers(0, 5)).map(sorted),
       c_range=st.tuples(st.floats(0, 1), st.floats(0, 1)).map(sorted),
       blind=st.booleans(), seed=st.integers(0, 1000))
def test_children_partition_the_parent_exactly(a_allowed, b_allowed, k_range, c_range,
                                               blind: bool, seed: int) -> None:
    """Whatever the split chosen (a blind one or by a random sensitivity), each grid point of
    the parent (integers, allowed categories, continuous ends and midpoint) lies in a child,
    integer and category points in exactly one; the children keep the one-hot encoding (a
    single allowed category has lower 1, several have lower 0, disallowed ones upper 0); and
    their shares add up to the parent's."""
    problem = _mixed_problem(5)
    lower, upper = initial_partition(problem)
    lower, upper = lower.copy(), upper.copy()
    lower[0, 0], upper[0, 0] = c_range
    lower[0, 1], upper[0, 1] = k_range
    for members, allowed in ((slice(2, 6), a_allowed), (slice(6, 9), b_allowed)):
        mask = np.array(allowed, dtype=float)
        upper[0, members] = mask
        lower[0, members] = mask if mask.sum() == 1 else 0.0
    sensitivity = (np.zeros_like(lower) if blind
                   else np.random.default_rng(seed).uniform(size=lower.shape))
    children_lo, children_hi, ok = smear_split(problem, lower, upper, sensitivity, 0.0)
    parent = _points(problem, lower[0], upper[0])
    if not ok[0]:
        assert children_lo[0, 0].tolist() == lower[0].tolist()
        return
    inside = [{p for p in parent if _contains(children_lo[0, side], children_hi[0, side], p)}
              for side in range(2)]
    assert inside[0] | inside[1] == parent
    shared = inside[0] & inside[1]
    assert all(p[0] == children_hi[0, 0, 0] == children_lo[0, 1, 0] for p in shared)
    for side in range(2):
        lo, hi = children_lo[0, side], children_hi[0, side]
        assert (lo <= hi).all() and (hi[:9] <= upper[0, :9]).all()
        assert (lo[:9] >= lower[0, :9]).all()
        for members in (slice(2, 6), slice(6, 9)):
            allowed = hi[members] > 0.5
            assert allowed.any()
            expected = allowed.astype(float) if allowed.sum() == 1 else np.zeros(allowed.size)
            assert lo[members].tolist() == expected.tolist()
        assert all(_contains(lower[0], upper[0], point) for point in _points(problem, lo, hi))
    shares = uniform_share(problem, children_lo[0], children_hi[0])
    assert shares.sum() == pytest.approx(uniform_share(problem, lower, upper)[0], rel=1e-12)


def _deep_one_hot_network(seed: int) -> Network:
    """A single-logit network of nine ReLU layers of six over ``k`` (integers 0…4), a
    4-category group ``a0…a3`` and the protected ``s`` (integers 0, 1); deep enough that its
    partitions' bounds saturate (``SATURATION_DEPTH``)."""
    rng = np.random.default_rng(seed)
    names = ["k", "a0", "a1", "a2", "a3", "s"]
    layers, width = [], len(names)
    for _ in range(9):
        layers.append(Layer(rng.normal(size=(6, width)), rng.normal(size=6) * 0.5, "relu"))
        width = 6
    layers.append(Layer(rng.normal(size=(1, width)), rng.normal(size=1) * 0.1, "none"))
    network = Network(layers, input_names=names)
    points = _deep_grid()
    shift = float(np.median(network.evaluate(points)[:, 0]))
    layers[-1] = Layer(layers[-1].weight, layers[-1].bias - shift, "none")
    return Network(layers, input_names=names)


def _deep_grid() -> np.ndarray:
    """Every point of the deep network's domain: ``k`` × category × ``s``."""
    return np.array([[k, *np.eye(4)[a], s] for k in range(5) for a in range(4) for s in (0, 1)],
                    dtype=float)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_blind_splits_on_saturated_partitions_give_the_brute_force_share(seed: int,
                                                                          monkeypatch) -> None:
    """On a network whose partitions saturate, blind splits happen (counted by a spy around
    the real :func:`blind_scores`) and the certified share is the brute-force one: every
    point ``k`` × category with its two protected values, classes by ``Network.classify``."""
    network = _deep_one_hot_network(seed)
    points = _deep_grid()
    classes = network.classify(points).reshape(-1, 2)
    exact = float((classes[:, 0] != classes[:, 1]).mean())
    problem = build_problem(network, ["s"], onehot_groups=[["a0", "a1", "a2", "a3"]],
                            integer_inputs=["k", "s"], domain={"k": (0, 4), "s": (0, 1)})
    assert gives_up_saturated(problem)
    calls = []
    real = analysis_module.blind_scores

    def spy(problem, lower, upper):
        calls.append(upper.shape[0])
        return real(problem, lower, upper)

    monkeypatch.setattr(analysis_module, "blind_scores", spy)
    certificate = certify_causal_fairness(problem, CausalSettings(timeout_s=60.0,
                                                                  target_width=0.0,
                                                                  enumeration_work=0))
    lower, upper = certificate.bounds["biased_share"]
    assert lower == pytest.approx(exact, abs=1e-12) and upper == pytest.approx(exact, abs=1e-12)
    assert sum(calls) > 0


@pytest.mark.parametrize("rule", ["smear", "bounds"])
@pytest.mark.parametrize("seed", [4, 5])
def test_both_split_rules_give_the_brute_force_share(rule: str, seed: int) -> None:
    low = np.array([0.0, 0.0, 0.0, 0.0])
    high = np.array([7.0, 1.0, 4.0, 9.0])
    network = _logit_network(seed, 4, 8, np.maximum(high, 1.0))
    exact = _brute_force(network, low, high, 1, [0.0, 1.0])
    problem = build_problem(network, ["x1"], domain=(low, high), integer_inputs="all")
    certificate = certify_causal_fairness(problem, CausalSettings(timeout_s=60.0,
                                                                  split_rule=rule,
                                                                  enumeration_work=0))
    lower, upper = certificate.bounds["biased_share"]
    assert lower == pytest.approx(exact, abs=1e-12) and upper == pytest.approx(exact, abs=1e-12)
    assert certificate.settings["split_rule"] == rule
    _assert_integer_witnesses(network, certificate, 1)


def test_unknown_split_rule_is_an_input_error() -> None:
    with pytest.raises(CausalInputError, match="split rule"):
        CausalSettings(split_rule="round-robin")


def _outcome(status: list[int], checked: list[bool]) -> ChunkOutcome:
    count = len(status)
    empty = np.zeros((count, 2, 1))
    return ChunkOutcome(np.array(status, dtype=np.int8), empty, empty, np.zeros(count, bool),
                        empty, np.zeros((count, 1, 2), dtype=np.uint8), np.zeros((count, 1)),
                        np.zeros((count, 1)),
                        np.zeros((count, 2), dtype=np.int64), np.zeros(count, dtype=np.int64),
                        0, np.array(checked))


def test_exact_switch_follows_the_fair_yield_of_recent_checks() -> None:
    switch = certify_module._ExactYield()
    refining = np.array([True, True, True, False])
    assert not switch.bounds_only(refining).any()  # nothing measured: checks on
    switch = certify_module._ExactYield()
    for _ in range(certify_module.EXACT_WINDOW):
        # a checked refining partition that is not proven fair; the unchecked fair one and the
        # checked one outside a refinement do not count
        switch.record(_outcome([2, FAIR, 3, FAIR], [True, False, False, True]), refining)
    # off, except the EXACT_PROBES largest refining partitions (first), kept as probes
    many = np.ones(certify_module.EXACT_PROBES + 3, dtype=bool)
    assert switch.bounds_only(many).tolist() == ([False] * certify_module.EXACT_PROBES
                                                 + [True] * 3)
    for _ in range(certify_module.EXACT_WINDOW):
        switch.record(_outcome([FAIR, FAIR, 3, 3], [True, False, False, False]), refining)
    assert not switch.bounds_only(refining).any()


def _fruitless_switch() -> certify_module._ExactYield:
    """A switch turned off by a full window of refining checks that proved nothing."""
    switch = certify_module._ExactYield()
    for _ in range(certify_module.EXACT_WINDOW):
        switch.record(_outcome([2], [True]), np.array([True]))
    return switch


def test_exact_probes_halve_while_they_prove_nothing_and_a_proof_restores_them() -> None:
    switch = _fruitless_switch()
    many = np.ones(40, dtype=bool)
    probed = []
    for _ in range(6):
        probed.append(int((~switch.bounds_only(many)).sum()))
        switch.record(_outcome([2], [True]), np.array([True]))  # this round's check: no proof
    assert probed == [16, 8, 4, 2, 1, 1]
    # a round without refining partitions judges no probe
    assert not switch.bounds_only(np.zeros(3, dtype=bool)).any()
    assert int((~switch.bounds_only(many)).sum()) == 1
    switch.record(_outcome([FAIR, 2], [True, True]), np.array([True, True]))  # one proof
    chosen = switch.bounds_only(many)
    assert int((~chosen).sum()) == certify_module.EXACT_PROBES
    assert not chosen[:certify_module.EXACT_PROBES].any()  # the first (largest) partitions
    assert not switch.worthwhile()  # one proof does not turn the checks back on


def test_exact_switch_is_judged_early_only_on_fruitless_first_checks() -> None:
    refining = np.array([True])
    switch = certify_module._ExactYield()
    for _ in range(2):
        switch.record(_outcome([2], [True]), refining)
    assert switch.worthwhile()  # two checks without a proof: not enough to judge
    switch.record(_outcome([2], [True]), refining)
    assert not switch.worthwhile()  # three: a yield of 0.75 gives that 1.6 % of the time

    def judged(outcomes: list[int]) -> bool:
        switch = certify_module._ExactYield()
        for status in outcomes:
            switch.record(_outcome([status], [True]), refining)
        return switch.worthwhile()

    # where most checks prove, the yield is judged after EXACT_MIN_CHECKS as before
    assert certify_module.EXACT_MIN_CHECKS == 16
    assert judged([FAIR] * 11 + [2] * 4)  # 11 of 15: too few checks to judge
    assert not judged([FAIR] * 11 + [2] * 5)  # 11 of 16: under 0.75
    assert judged([FAIR] * 12 + [2] * 4)  # 12 of 16
    assert not judged([FAIR, 2, 2, 2, 2])  # one of five
    assert certify_module.EXACT_MIN_CHECKS < certify_module.EXACT_WINDOW


def test_binomial_tail_against_the_closed_form() -> None:
    assert certify_module._binomial_tail(0, 3, 0.75) == pytest.approx(0.25 ** 3)
    assert certify_module._binomial_tail(1, 4, 0.75) == pytest.approx(0.25 ** 4
                                                                       + 4 * 0.75 * 0.25 ** 3)
    assert certify_module._binomial_tail(5, 5, 0.75) == pytest.approx(1.0)
    assert certify_module._binomial_tail(0, 0, 0.75) == 1.0


def test_exact_switch_stays_on_at_the_yield_where_checks_still_win() -> None:
    # German 0.20-bias5/Gt measured 51 of the last 64 checks proven fair at round 14, where
    # switching off split 3x the partitions; 64-70 % (COMPAS age) is where splitting wins
    def judged(fair: int) -> bool:
        switch = certify_module._ExactYield()
        refining = np.array([True])
        for index in range(certify_module.EXACT_WINDOW):
            switch.record(_outcome([FAIR if index < fair else 2], [True]), refining)
        return switch.worthwhile()

    assert judged(51)
    assert judged(48)
    assert not judged(45)  # 70 %


@pytest.mark.parametrize("seed", [11, 12])
def test_bounds_only_refinement_against_monte_carlo(seed: int, monkeypatch) -> None:
    # exact checks in refinements switched off from the start: every share is still sound
    monkeypatch.setattr(certify_module._ExactYield, "worthwhile", lambda self: False)
    network = random_network(3, [8, 8], seed=seed)
    problem = build_problem(network, ["x2"], split_values=[0.5])
    certificate = certify_causal_fairness(problem, CausalSettings(timeout_s=20.0,
                                                                  target_width=0.05))
    assert_share_contains_estimate(network, certificate.bounds["biased_share"], seed)
    assert certificate.details["partition_counts"]["excluded"] == 0
    for witness in certificate.details["witnesses"]:
        a, b = np.array(witness["x"]), np.array(witness["x_other"])
        assert network.classify(np.stack([a, b])).tolist() == witness["classes"]


class _RefiningRecorder(InProcessExecutor):
    """Runs chunks in-process and records, per chunk, which partitions were refining."""

    def __init__(self) -> None:
        super().__init__()
        self.refining: list[np.ndarray] = []

    def submit(self, fn, /, *args, **kwargs):
        if fn is analyse_chunk:
            self.refining.append(np.asarray(args[6]).copy())
        return super().submit(fn, *args, **kwargs)


def test_witnessed_partitions_are_refined_before_coverage_ends() -> None:
    # no sampling and U = 3: the root has no witness, and witnesses appear (by the exact
    # check) in small partitions while larger ones elsewhere are still undecided; their
    # children must not wait for those (the certified shares first, issue 35)
    network = random_network(3, [8, 8], 0)
    problem = build_problem(network, ["x2"], split_values=[0.5])
    recorder = _RefiningRecorder()
    certificate = certify_causal_fairness(problem, CausalSettings(
        max_unstable=3, timeout_s=10.0, chunk_size=4, target_width=0.05,
        witness_sampling=False), recorder)
    refining = np.concatenate(recorder.refining)
    assert refining.any() and (~refining).any()
    assert np.argmax(refining) < np.flatnonzero(~refining).max()
    assert_share_contains_estimate(network, certificate.bounds["biased_share"], 0)


def test_presolve_first_is_judged_early_only_on_fruitless_first_checks() -> None:
    """Presolve (and the certificate's root-only first search) comes first after 4 checks
    without a proof, or one in 6, before ``PRESOLVE_MIN_CHECKS``; from then on by the window's
    share as before; never before any check."""

    def first(statuses: list[int]) -> bool:
        choice = certify_module._PresolveChoice()
        choice.record(_outcome(statuses, [True] * len(statuses)))
        return choice.first()

    assert certify_module.PRESOLVE_MIN_CHECKS == 8
    assert not certify_module._PresolveChoice().first()
    assert not first([2, 2, 2])  # a share of 0.6 gives three failures 6.4 % of the time
    assert first([2, 2, 2, 2])
    assert not first([FAIR, 2, 2, 2, 2])
    assert first([FAIR, 2, 2, 2, 2, 2])
    assert not first([FAIR, FAIR, 2, 2, 2, 2, 2])  # two of seven
    assert first([FAIR, FAIR] + [2] * 6)  # 2 of 8 ≤ 0.6: the window's rule, unchanged
    assert not first([FAIR] * 5 + [2] * 3)  # 5 of 8 > 0.6
    unchecked = certify_module._PresolveChoice()
    unchecked.record(_outcome([2] * 6, [False] * 6))  # partitions not checked do not count
    assert not unchecked.first()
