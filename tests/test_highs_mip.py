"""HiGHS's MILP search through ``highspy`` (:func:`verifier.highs.search_mip`): its answers on
small integer programs against enumeration, and a forked process searching after this one."""

from __future__ import annotations

import itertools
import multiprocessing

import numpy as np

from verifier.highs import search_mip
from verifier.sparse_rows import RowMatrix

OPTIONS = {"time_limit": 10.0, "mip_rel_gap": 1e-9, "presolve": False}


def _knapsack(capacity: float) -> tuple[str, float | None, np.ndarray | None]:
    """max x + 2y + 3z subject to 2x + 3y + 4z ≤ capacity, x, y, z integers in [0, 3]."""
    matrix = RowMatrix.from_entries(np.zeros(3, dtype=int), np.arange(3),
                                    np.array([2.0, 3.0, 4.0]), (1, 3))
    return search_mip(-np.array([1.0, 2.0, 3.0]), matrix, np.array([-np.inf]),
                      np.array([capacity]), np.zeros(3), np.full(3, 3.0), np.ones(3), OPTIONS)


def test_search_finds_the_enumerated_optimum_and_reports_infeasibility() -> None:
    for capacity in (0.0, 5.0, 9.5, 13.0):
        status, dual, point = _knapsack(capacity)
        best = max(x + 2 * y + 3 * z for x, y, z in itertools.product(range(4), repeat=3)
                   if 2 * x + 3 * y + 4 * z <= capacity)
        assert status == "Optimal" and point is not None and dual is not None
        assert np.allclose(point, np.rint(point)) and abs(-dual - best) <= 1e-6
        assert float(np.array([1.0, 2.0, 3.0]) @ np.rint(point)) == best
    matrix = RowMatrix.from_entries(np.array([0]), np.array([0]), np.array([2.0]), (1, 1))
    # 2x = 1 has no integer solution
    assert search_mip(np.zeros(1), matrix, np.array([1.0]), np.array([1.0]), np.zeros(1),
                      np.full(1, 5.0), np.ones(1), OPTIONS)[0] == "infeasible"


def test_a_forked_process_searches_after_this_one_did() -> None:
    """HiGHS's MILP worker threads are not inherited by a fork; a pool's worker searching
    after its parent did used to spin for ever."""
    assert _knapsack(9.5)[0] == "Optimal"
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_knapsack, (9.5,)).get(timeout=60)[0] == "Optimal"
