"""The MILP certificate (:mod:`verifier.causal.milp_certificate`) against the exact tie oracle.

Oracle: every integer point of small dyadic ReLU networks evaluated in ``fractions.Fraction``
(class = argmax, ties to the lowest index; :mod:`tests.test_causal_ties`). The certificate
must never prove a class pair absent that the oracle finds, whatever HiGHS's MILP says, and a
solver that answers "infeasible" to everything must not make the exact check call a biased
partition fair.
"""

from __future__ import annotations

import itertools
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_causal_ties import (
    _one_hot_tie_networks,
    _oracle_class,
    _oracle_share,
    _tie_networks,
    one_hot_grid_biased,
    one_hot_problem,
)
from verifier.causal import build_problem
from verifier.causal import exact_check as exact
from verifier.causal.analysis import proven_classes
from verifier.causal.milp_certificate import certify_negative_margin
from verifier.causal.partition import initial_partition, with_protected
from verifier.network import Layer, Network


def _integer_problem(network: Network, ranges: list[tuple[int, int]], protected: int):
    names = [f"x{i}" for i in range(len(ranges))]
    return build_problem(network.renamed(input_names=names), [names[protected]],
                         integer_inputs="all",
                         domain={n: r for n, r in zip(names, ranges, strict=True)})


def _whole_grid(problem):
    """The whole domain as one partition and every cell's proven pre-activation bounds."""
    lower, upper = initial_partition(problem)
    cell_lo, cell_hi = with_protected(problem, lower, upper, problem.protected_cells)
    _, result = proven_classes(problem, cell_lo, cell_hi, "crown")
    bounds = [({k: v[c] for k, v in result.pre_lower.items()},
               {k: v[c] for k, v in result.pre_upper.items()})
              for c in range(problem.cell_count)]
    return lower[0], upper[0], bounds


def _oracle_pair(network: Network, ranges: list[tuple[int, int]], protected: int,
                 cells: tuple[tuple[float, float], tuple[float, float]],
                 classes: tuple[int, int]) -> bool:
    """Whether some integer point, with the protected value in cell ``cells[0]`` and in cell
    ``cells[1]``, has the classes ``classes``."""
    others = [range(lo, hi + 1) for i, (lo, hi) in enumerate(ranges) if i != protected]
    values = [range(int(np.ceil(lo)), int(np.floor(hi)) + 1) for lo, hi in cells]
    for rest in itertools.product(*others):
        found = []
        for cell_values in values:
            found.append(set())
            for value in cell_values:
                point = list(rest)
                point.insert(protected, value)
                found[-1].add(_oracle_class(network, tuple(point)))
        if classes[0] in found[0] and classes[1] in found[1]:
            return True
    return False


def _class_pair_model(problem, class_a: int, class_b: int):
    """The two-copy MILP of ``problem``'s whole grid (one cell pair) for the class pair
    ``(class_a, class_b)``, and its margin variable."""
    lower, upper, cell_bounds = _whole_grid(problem)
    (cells, bounds), = exact._encodings(problem, cell_bounds, False)
    model, _, _, y_a, y_b, t = exact._pair_model(problem, lower, upper, cells, bounds)
    exact._margin_rows(model, y_a, class_a, t)
    exact._margin_rows(model, y_b, class_b, t)
    return model, t


def _certify(model, t: int, **limits):
    return certify_negative_margin(model.matrix(), np.asarray(model.row_lower),
                                   np.asarray(model.row_upper), np.asarray(model.lower),
                                   np.asarray(model.upper),
                                   np.asarray(model.integral, dtype=bool), t, **limits)


@settings(max_examples=80, deadline=None)
@given(case=_tie_networks())
def test_a_proven_class_pair_is_absent_for_the_oracle(case) -> None:
    """Every cell pair and class pair of the whole grid's two-copy MILP, certified directly
    (no HiGHS MILP asked): a proof only where the oracle finds no such pair."""
    network, ranges, protected = case
    problem = _integer_problem(network, ranges, protected)
    lower, upper, cell_bounds = _whole_grid(problem)
    if network.output_size == 1:
        return  # a single logit's classes are not rows of y: the exact check's own tests
    for cells, bounds in exact._encodings(problem, cell_bounds, False):
        for pair in itertools.permutations(range(network.output_size), 2):
            model, _, _, y_a, y_b, t = exact._pair_model(problem, lower, upper, cells, bounds)
            exact._margin_rows(model, y_a, pair[0], t)
            exact._margin_rows(model, y_b, pair[1], t)
            certificate = _certify(model, t)
            if certificate.proven:
                spans = tuple((float(problem.protected_cells[c, 0, 0]),
                               float(problem.protected_cells[c, 1, 0])) for c in cells)
                assert not _oracle_pair(network, ranges, protected, spans, pair), (
                    cells, pair, certificate)


def _lying_solve(*_args, **_kwargs):
    """A MILP solver that answers "infeasible" to everything."""
    return "infeasible", -np.inf, None


@settings(max_examples=80, deadline=None)
@given(case=_tie_networks(), relaxation=st.booleans())
def test_a_lying_solver_never_makes_a_biased_grid_fair(case, relaxation: bool) -> None:
    """HiGHS replaced by a solver whose every answer is "infeasible": "fair" only where the
    oracle finds no biased point (the certificate refuses the rest)."""
    network, ranges, protected = case
    problem = _integer_problem(network, ranges, protected)
    lower, upper, cell_bounds = _whole_grid(problem)
    with patch.object(exact, "_solve", _lying_solve):
        outcome = exact.check_partition(problem, lower, upper, cell_bounds,
                                        relaxation_first=relaxation)
    if outcome.status == "fair":
        assert _oracle_share(network, ranges, protected) == 0


@settings(max_examples=40, deadline=None)
@given(case=_one_hot_tie_networks(), merge=st.booleans())
def test_a_lying_solver_never_makes_a_biased_one_hot_grid_fair(case, merge: bool) -> None:
    """The same with a one-hot protected feature, merged encoding or per value pair."""
    network, values, ranges = case
    problem = one_hot_problem(network, values, ranges)
    lower, upper, cell_bounds = _whole_grid(problem)
    with patch.object(exact, "_solve", _lying_solve):
        outcome = exact.check_partition(problem, lower, upper, cell_bounds, merge_cells=merge,
                                        relaxation_first=False)
    if outcome.status == "fair":
        assert not one_hot_grid_biased(network, values, ranges)
    assert outcome.proofs is not None
    assert outcome.proofs.certified + outcome.proofs.refused <= outcome.solved


# y0 = x + s − 1 against y1 = 0 on x, s ∈ {0, 1}: s = 0 gives class 1 at x = 0 (y0 = −1),
# s = 1 gives the tie y0 = y1 = 0, class 0. Biased at x = 0, and only by a tie.
TIE_OUTPUTS = Network([Layer(np.array([[1.0, 1.0], [0.0, 0.0]]), np.array([-1.0, 0.0]), "none")])
# the same through a ReLU pair, so that the MILP has binaries to branch on
TIE_RELU = Network([
    Layer(np.array([[1.0, 1.0], [-1.0, -1.0]]), np.array([-1.0, 1.0]), "relu"),
    Layer(np.array([[1.0, -1.0], [0.0, 0.0]]), np.zeros(2), "none"),
])


def test_a_feasible_model_handed_as_infeasible_is_refused() -> None:
    """The biased tie's class pair (1, 0), the margin 0 at the tie: HiGHS's "infeasible"
    faked, the certificate must refuse (the LP optimum there is an integral MILP point)."""
    for network in (TIE_OUTPUTS, TIE_RELU):
        problem = _integer_problem(network, [(0, 1), (0, 1)], 1)
        lower, upper, cell_bounds = _whole_grid(problem)
        model, t = _class_pair_model(problem, 1, 0)
        certificate = _certify(model, t)
        assert not certificate.proven and certificate.reason == "integral"
        with patch.object(exact, "_solve", _lying_solve):
            outcome = exact.check_partition(problem, lower, upper, cell_bounds,
                                            relaxation_first=False)
        assert outcome.status == "unknown"
        assert outcome.proofs is not None and outcome.proofs.refused >= 1


# y0 = relu(2x − 1) − relu(1 − 2x) against y1 = 0 on x, s ∈ {0, 1}: class 1 at x = 0, class 0
# at x = 1, whatever s; fair, but the LP relaxation (x = 1/2) reaches a positive margin
BLIND_RELU = Network([
    Layer(np.array([[2.0, 0.0], [-2.0, 0.0]]), np.array([-1.0, 1.0]), "relu"),
    Layer(np.array([[1.0, -1.0], [0.0, 0.0]]), np.zeros(2), "none"),
])


def test_limits_leave_a_provable_pair_unproven() -> None:
    """A pair the certificate proves absent only by branching is unproven at a node limit
    below its nodes or at a passed deadline: limits never turn into proofs."""
    problem = _integer_problem(BLIND_RELU, [(0, 1), (0, 1)], 1)
    model, t = _class_pair_model(problem, 0, 1)
    full = _certify(model, t)
    assert full.proven and full.nodes > 1  # the LP relaxation alone proves nothing
    short = _certify(model, t, node_limit=full.nodes - 1)
    assert (short.proven, short.reason) == (False, "nodes")
    assert _certify(model, t, deadline=0.0).reason == "deadline"


def test_a_search_stopped_by_its_first_budget_goes_on_after_the_milp() -> None:
    """The certificate before the MILP stopped by its LP budget: the MILP's "infeasible" is
    then proven by a full search (fair, after MILPs); with the full search refused (a node
    limit of 1 everywhere) the partition stays undecided."""
    problem = _integer_problem(BLIND_RELU, [(0, 1), (0, 1)], 1)
    lower, upper, cell_bounds = _whole_grid(problem)
    with patch.object(exact, "FIRST_SEARCH_LPS", 2):
        outcome = exact.check_partition(problem, lower, upper, cell_bounds)
        assert outcome.status == "fair" and outcome.solved >= 1
        assert outcome.proofs is not None and outcome.proofs.certified >= 1
        with patch.object(exact, "NODE_LIMIT", 1):
            starved = exact.check_partition(problem, lower, upper, cell_bounds)
    assert starved.status == "unknown"
    assert starved.proofs is not None and starved.proofs.refused >= 1
