"""The smear split and the exact-check switch inside refinements, against closed forms and
brute force over every integer point."""

from __future__ import annotations

import numpy as np
import pytest

from tests.causal_nets import (
    assert_share_contains_estimate,
    random_network,
    threshold_network,
)
from tests.test_causal_integer import _assert_integer_witnesses, _brute_force, _logit_network
from verifier.causal import CausalSettings, build_problem, certify_causal_fairness
from verifier.causal import certify as certify_module
from verifier.causal.analysis import (
    FAIR,
    ChunkOutcome,
    analyse_chunk,
    proven_classes,
    smear_split,
)
from verifier.causal.partition import initial_partition, uniform_share, with_protected
from verifier.causal.problem import CausalInputError
from verifier.executor import InProcessExecutor


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


@pytest.mark.parametrize("rule", ["smear", "bounds"])
@pytest.mark.parametrize("seed", [4, 5])
def test_both_split_rules_give_the_brute_force_share(rule: str, seed: int) -> None:
    low = np.array([0.0, 0.0, 0.0, 0.0])
    high = np.array([7.0, 1.0, 4.0, 9.0])
    network = _logit_network(seed, 4, 8, np.maximum(high, 1.0))
    exact = _brute_force(network, low, high, 1, [0.0, 1.0])
    problem = build_problem(network, ["x1"], domain=(low, high), integer_inputs="all")
    certificate = certify_causal_fairness(problem, CausalSettings(timeout_s=60.0,
                                                                  split_rule=rule))
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
                        empty, np.zeros((count, 1)), np.zeros((count, 1)),
                        np.zeros((count, 2), dtype=np.int64), np.zeros(count, dtype=np.int64),
                        0, np.array(checked))


def test_exact_switch_follows_the_fair_yield_of_recent_checks() -> None:
    switch = certify_module._ExactYield()
    refining = np.array([True, True, True, False])
    assert not switch.bounds_only(refining).any()  # nothing measured: checks on
    for _ in range(certify_module.EXACT_WINDOW):
        # a checked refining partition that is not proven fair; the unchecked fair one and the
        # checked one outside a refinement do not count
        switch.record(_outcome([2, FAIR, 3, FAIR], [True, False, False, True]), refining)
    chosen = switch.bounds_only(refining)
    # off, except the EXACT_PROBES largest refining partitions (first), kept as probes
    assert chosen.tolist() == [False, False, False, False]
    many = np.ones(certify_module.EXACT_PROBES + 3, dtype=bool)
    assert switch.bounds_only(many).tolist() == ([False] * certify_module.EXACT_PROBES
                                                 + [True] * 3)
    for _ in range(certify_module.EXACT_WINDOW):
        switch.record(_outcome([FAIR, FAIR, 3, 3], [True, False, False, False]), refining)
    assert not switch.bounds_only(refining).any()


def test_exact_switch_is_judged_after_the_minimum_number_of_checks() -> None:
    switch = certify_module._ExactYield()
    refining = np.array([True])
    for _ in range(certify_module.EXACT_MIN_CHECKS - 1):
        switch.record(_outcome([2], [True]), refining)
    assert switch.worthwhile()  # too few checks to judge: on
    switch.record(_outcome([2], [True]), refining)
    assert not switch.worthwhile()  # none of them proved fairness: off
    assert certify_module.EXACT_MIN_CHECKS < certify_module.EXACT_WINDOW


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
