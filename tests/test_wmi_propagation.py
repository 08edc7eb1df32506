"""Emptiness by constraint propagation (verifier.wmi.propagation): it never declares a
polytope empty that holds a point (oracles: sampled points and the Chebyshev LP) at coordinate
scales 1e-3..1e3. The exact WMI tests (closed forms, enumeration) run with it on."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.wmi.polytope import box_constraints, make_polytope
from verifier.wmi.propagation import provably_empty, row_box


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 6), dimension=st.integers(1, 4), seed=st.integers(0, 100_000),
       scale=st.sampled_from([1e-3, 1.0, 1e3]))
def test_an_empty_answer_is_never_wrong(rows: int, dimension: int, seed: int,
                                        scale: float) -> None:
    rng = np.random.default_rng(seed)
    lower = -rng.random(dimension) * scale - 0.1 * scale
    upper = rng.random(dimension) * scale + 0.1 * scale
    A_box, b_box = box_constraints(lower, upper)
    A = rng.normal(size=(rows, dimension))
    b = rng.normal(size=rows) * scale
    stacked_A, stacked_b = np.vstack([A_box, A]), np.concatenate([b_box, b])
    if not provably_empty(stacked_A, stacked_b):
        return
    points = rng.uniform(lower, upper, size=(20_000, dimension))
    assert not np.any(np.all(points @ A.T <= b, axis=1))
    assert make_polytope(stacked_A, stacked_b) is None


def test_the_box_comes_from_single_coordinate_rows_only() -> None:
    A = np.array([[1.0, 0.0], [-2.0, 0.0], [0.0, 1.0], [0.0, -1.0], [1.0, 1.0]])
    b = np.array([3.0, 2.0, 5.0, 1.0, 0.5])
    lower, upper = row_box(A, b)
    assert np.allclose(lower, [-1.0, -1.0]) and np.allclose(upper, [3.0, 5.0])
    assert np.all(lower <= [-1.0, -1.0]) and np.all(upper >= [3.0, 5.0])
    assert row_box(A[[0, 1, 4]], b[[0, 1, 4]]) is None
    # x + y <= 0.5 with x >= 1 and y >= 0: empty; with y >= -1 it is not
    assert provably_empty(np.vstack([A, [[-1.0, 0.0]]]), np.append(np.append(b[:3], [0.0, 0.5]),
                                                                   -1.0))
    assert not provably_empty(A, b)
