"""The proven LP bound (:mod:`verifier.lp_bound`) against exact vertex enumeration.

Oracle: two-variable LPs with two-sided rows and a bounded box, solved exactly in
``fractions.Fraction`` by enumerating every intersection of two constraint lines (the
maximum of a linear objective over a non-empty bounded polygon is at one of them). The bound
must hold for HiGHS's multipliers, for any random multipliers, at any scale; with HiGHS's
multipliers it must also be tight, and an infeasible LP's Farkas ray must prove it empty.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_array

from verifier.highs import BoundedLp, minimise_rows
from verifier.lp_bound import affine_interval, proven_upper_bound, proven_upper_bounds

Line = tuple[Fraction, Fraction, Fraction]  # a·v0 + b·v1 = c


def _lines(matrix: np.ndarray, row_lower: np.ndarray, row_upper: np.ndarray,
           lower: np.ndarray, upper: np.ndarray) -> list[Line]:
    lines = []
    for row, low, high in zip(matrix, row_lower, row_upper, strict=True):
        for side in (low, high):
            if np.isfinite(side):
                lines.append((Fraction(row[0]), Fraction(row[1]), Fraction(side)))
    for axis in range(2):
        for side in (lower[axis], upper[axis]):
            lines.append((Fraction(int(axis == 0)), Fraction(int(axis == 1)), Fraction(side)))
    return lines


def _feasible(point: tuple[Fraction, Fraction], matrix, row_lower, row_upper, lower,
              upper) -> bool:
    for row, low, high in zip(matrix, row_lower, row_upper, strict=True):
        value = Fraction(row[0]) * point[0] + Fraction(row[1]) * point[1]
        if (np.isfinite(low) and value < Fraction(low)) or (
                np.isfinite(high) and value > Fraction(high)):
            return False
    return all(Fraction(lower[i]) <= point[i] <= Fraction(upper[i]) for i in range(2))


def exact_maximum(cost, matrix, row_lower, row_upper, lower, upper) -> Fraction | None:
    """``max cost·v`` over the polygon in exact arithmetic, ``None`` when it is empty."""
    best = None
    for (a1, b1, c1), (a2, b2, c2) in combinations(
            _lines(matrix, row_lower, row_upper, lower, upper), 2):
        det = a1 * b2 - a2 * b1
        if det == 0:
            continue
        point = ((c1 * b2 - c2 * b1) / det, (a1 * c2 - a2 * c1) / det)
        if _feasible(point, matrix, row_lower, row_upper, lower, upper):
            value = Fraction(cost[0]) * point[0] + Fraction(cost[1]) * point[1]
            best = value if best is None else max(best, value)
    return best


coefficient = st.integers(-8, 8).map(lambda k: k / 4)


@st.composite
def two_variable_lps(draw):
    rows = draw(st.integers(1, 4))
    scale = draw(st.sampled_from([1e-9, 1.0, 3.0, 1e9]))
    matrix = np.array([[draw(coefficient), draw(coefficient)] for _ in range(rows)]) * scale
    row_lower = np.array([draw(st.one_of(st.just(-np.inf), coefficient)) for _ in range(rows)])
    row_upper = np.array([max(low, 0.0) + draw(st.one_of(st.just(np.inf), coefficient.map(abs)))
                          if np.isfinite(low) else draw(coefficient) for low in row_lower])
    row_lower, row_upper = row_lower * scale, row_upper * scale
    lower = np.array([draw(coefficient) - 2.0 for _ in range(2)])
    upper = lower + np.array([draw(coefficient.map(abs)) + 0.25 for _ in range(2)])
    cost = np.array([draw(coefficient), draw(coefficient)])
    return cost, matrix, row_lower, row_upper, lower, upper, scale


@settings(max_examples=100, deadline=None)
@given(two_variable_lps(), st.lists(st.floats(-3, 3), min_size=4, max_size=4))
def test_the_bound_holds_for_any_multipliers_and_is_tight_for_highs(lp, random_y):
    cost, matrix, row_lower, row_upper, lower, upper, scale = lp
    sparse = csr_array(matrix)
    truth = exact_maximum(cost, matrix, row_lower, row_upper, lower, upper)
    y = np.array(random_y[: matrix.shape[0]])
    if truth is not None:
        bound = proven_upper_bound(cost, sparse, row_lower, row_upper, lower, upper, y)
        assert bound == np.inf or Fraction(bound) >= truth
    status, duals = minimise_rows(-cost, sparse, row_lower, row_upper, lower, upper)
    if truth is None or status != "optimal":
        return  # HiGHS decides feasibility within its tolerances: no claim rests on that
    bounds = [proven_upper_bound(cost, sparse, row_lower, row_upper, lower, upper,
                                 sign * duals) for sign in (1.0, -1.0)]
    best = min(bounds)
    assert best == proven_upper_bound(cost, sparse, row_lower, row_upper, lower, upper,
                                      np.stack([duals, -duals]))  # several at once: the least
    assert Fraction(best) >= truth
    if scale in (1.0, 3.0):  # HiGHS's tolerances drop rows of 1e-9 (sound, not tight)
        reach = float(np.abs(cost).sum() * np.abs(np.concatenate([lower, upper])).max())
        assert best <= float(truth) + 1e-9 * max(1.0, reach)


@settings(max_examples=100, deadline=None)
@given(two_variable_lps())
def test_a_farkas_proof_of_emptiness_is_never_given_for_a_feasible_lp(lp):
    _, matrix, row_lower, row_upper, lower, upper, _ = lp
    sparse = csr_array(matrix)
    feasible = exact_maximum(np.zeros(2), matrix, row_lower, row_upper, lower, upper) is not None
    status, ray = minimise_rows(np.zeros(2), sparse, row_lower, row_upper, lower, upper)
    if status == "infeasible" and ray is not None:
        proven_empty = min(proven_upper_bound(np.zeros(2), sparse, row_lower, row_upper,
                                              lower, upper, sign * ray)
                           for sign in (1.0, -1.0)) < 0.0
        assert not (proven_empty and feasible)


def test_an_infeasible_system_is_proven_empty_by_its_ray():
    matrix = csr_array(np.array([[1.0, 1.0], [1.0, 1.0]]))
    row_lower, row_upper = np.array([2.0, -np.inf]), np.array([np.inf, 1.0])
    lower, upper = np.zeros(2), np.full(2, 5.0)
    status, ray = minimise_rows(np.zeros(2), matrix, row_lower, row_upper, lower, upper)
    assert status == "infeasible" and ray is not None
    assert min(proven_upper_bound(np.zeros(2), matrix, row_lower, row_upper, lower, upper,
                                  sign * ray) for sign in (1.0, -1.0)) < 0.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-50, 50), min_size=6, max_size=6),
       st.lists(st.integers(-20, 20), min_size=3, max_size=3),
       st.sampled_from([1e-30, 1e-3, 1.0, 7.0, 1e20]))
def test_the_affine_interval_contains_every_vertex_exactly(weights, box, scale):
    weight = np.array(weights, dtype=float).reshape(2, 3) / 7.0 * scale
    bias = np.array([1.0 / 3.0, -2.0 / 3.0]) * scale
    lower = np.array(box, dtype=float) / 3.0
    upper = lower + 1.0 / 7.0
    low, high = affine_interval(weight, bias, lower, upper)
    for corner in range(8):
        point = [Fraction(upper[i] if corner >> i & 1 else lower[i]) for i in range(3)]
        for j in range(2):
            value = sum(Fraction(weight[j, i]) * point[i] for i in range(3)) + Fraction(bias[j])
            assert Fraction(low[j]) <= value <= Fraction(high[j])


@settings(max_examples=100, deadline=None)
@given(two_variable_lps(), st.floats(0.1, 0.9))
def test_node_bounds_hold_on_each_node_box(lp, cut):
    """Several boxes at once (a branch and bound's nodes: the LP's box split along v0), each
    with the multipliers :class:`verifier.highs.BoundedLp` suggests for it: every bound holds
    over its own box (exact maximum), and equals the one-box bound."""
    cost, matrix, row_lower, row_upper, lower, upper, _ = lp
    sparse = csr_array(matrix)
    middle = lower[0] + cut * (upper[0] - lower[0])
    boxes = [(lower, np.array([middle, upper[1]])), (np.array([middle, lower[1]]), upper)]
    solver = BoundedLp(-cost, sparse, row_lower, row_upper, lower, upper)
    multipliers, node_lower, node_upper = [], [], []
    for low, high in boxes:
        status, y, _ = solver.solve(np.arange(2), low, high)
        y = np.zeros(matrix.shape[0]) if y is None else y
        multipliers.append(y if status == "optimal" else np.zeros_like(y))
        node_lower.append(low)
        node_upper.append(high)
    bounds = proven_upper_bounds(cost, sparse, row_lower, row_upper, np.stack(node_lower, 1),
                                 np.stack(node_upper, 1), np.stack(multipliers))
    for k, (low, high) in enumerate(boxes):
        assert bounds[k] == proven_upper_bound(cost, sparse, row_lower, row_upper, low, high,
                                               multipliers[k])
        truth = exact_maximum(cost, matrix, row_lower, row_upper, low, high)
        if truth is not None:
            assert bounds[k] == np.inf or Fraction(bounds[k]) >= truth
