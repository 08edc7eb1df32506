"""An independent, plain-Python reference of the SC-layer and brute-force oracles.

Written from the paper's pseudo-code (Alg. 3.1–3.3, B.1) with the DESIGN D8 conventions, using
sets, depth-first search and ``itertools`` instead of tensors and max-plus products. The other
SC-layer tests compare the torch layer against it; the tests below check the reference itself
against brute force.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

Literal = tuple[int, int]  # (a, b): y_a < y_b
Conjunction = tuple[Literal, ...]
DNF = tuple[Conjunction, ...]
Precondition = Callable[[np.ndarray, Sequence[float]], bool]


def holds(dnf: DNF, y: Sequence[float]) -> bool:
    """Some disjunct has all its literals strictly true."""
    return any(all(y[a] < y[b] for a, b in conj) for conj in dnf)


def top_class(y: Sequence[float]) -> int:
    """argmax, ties to the lowest index."""
    return min(range(len(y)), key=lambda i: (-y[i], i))


def active_dnfs(
    constraints: Sequence[tuple[Precondition, DNF]], x: np.ndarray, y: Sequence[float]
) -> list[DNF]:
    return [dnf for pre, dnf in constraints if pre(x, y)]


def orderings_satisfying(dnfs: Sequence[DNF], m: int) -> list[tuple[int, ...]]:
    """Brute force: every strict total order (as distinct values 0..m-1) satisfying all DNFs."""
    return [
        values
        for values in itertools.permutations(range(m))
        if all(holds(dnf, values) for dnf in dnfs)
    ]


def _edges(conj: Conjunction) -> set[tuple[int, int]]:
    """Order-graph edges: larger → smaller."""
    return {(b, a) for a, b in conj}


def _reachable(edges: set[tuple[int, int]], m: int) -> list[set[int]]:
    successors: dict[int, set[int]] = {i: set() for i in range(m)}
    for i, j in edges:
        successors[i].add(j)
    reach = []
    for start in range(m):
        seen: set[int] = set()
        stack = list(successors[start])
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(successors[node])
        reach.append(seen)
    return reach


def is_cyclic(conj: Conjunction, m: int) -> bool:
    reach = _reachable(_edges(conj), m)
    return any(i in reach[i] for i in range(m))


def _depths(edges: set[tuple[int, int]], m: int) -> list[int]:
    predecessors: dict[int, list[int]] = {j: [] for j in range(m)}
    for i, j in edges:
        predecessors[j].append(i)

    @functools.cache
    def depth(j: int) -> int:
        return max((depth(i) + 1 for i in predecessors[j]), default=0)

    return [depth(j) for j in range(m)]


def reference_order(conj: Conjunction, y: Sequence[float]) -> list[int]:
    """Classes sorted by (−v, depth, −y, index) for an acyclic conjunction."""
    m = len(y)
    edges = _edges(conj)
    reach = _reachable(edges, m)
    smallest = [min([y[j]] + [y[i] for i in range(m) if j in reach[i]]) for j in range(m)]
    depth = _depths(edges, m)
    return sorted(range(m), key=lambda j: (-smallest[j], depth[j], -y[j], j))


def reference_assign(y: Sequence[float], order: Sequence[int]) -> list[float]:
    values = sorted(y, reverse=True)
    for k in range(1, len(values)):
        values[k] = min(values[k], math.nextafter(values[k - 1], -math.inf))
    if values[-1] == -math.inf:  # ties at the lowest float: the tail is lifted back
        values[-1] = sorted(y)[0]
        for k in range(len(values) - 2, -1, -1):
            values[k] = max(values[k], math.nextafter(values[k + 1], math.inf))
    out = [0.0] * len(y)
    for rank, cls in enumerate(order):
        out[cls] = values[rank]
    return out


def reference_choice(dnfs: Sequence[DNF], y: Sequence[float]) -> Conjunction | None:
    """FindSatConstraint: product in list order, stable root-first partition, first acyclic."""
    m = len(y)
    top = top_class(y)
    candidates = [
        tuple(lit for conj in choice for lit in conj) for choice in itertools.product(*dnfs)
    ]

    def top_is_root(conj: Conjunction) -> bool:
        return all(a != top for a, _ in conj)

    prioritised = [c for c in candidates if top_is_root(c)] + [
        c for c in candidates if not top_is_root(c)
    ]
    return next((c for c in prioritised if not is_cyclic(c, m)), None)


def reference_layer(
    constraints: Sequence[tuple[Precondition, DNF]], x: np.ndarray, y: Sequence[float]
) -> tuple[list[float], bool]:
    """``(corrected, bottom)`` for one row."""
    dnfs = active_dnfs(constraints, x, y)
    if all(holds(dnf, y) for dnf in dnfs):
        return list(y), False
    choice = reference_choice(dnfs, y)
    if choice is None:
        return list(y), True
    return reference_assign(y, reference_order(choice, y)), False


# --- tests of the reference itself ---------------------------------------------------------


def test_reference_reproduces_figure_3() -> None:
    # Edges 0→4, 1→3, 3→2 (y4 < y0, y3 < y1, y2 < y3); y = [2, 3, 1, 4, 5] (paper Fig. 3).
    conj: Conjunction = ((4, 0), (3, 1), (2, 3))
    assert reference_order(conj, [2, 3, 1, 4, 5]) == [1, 3, 0, 4, 2]
    assert reference_assign([2, 3, 1, 4, 5], [1, 3, 0, 4, 2]) == [3, 5, 1, 4, 2]


def test_reference_cycle_detection_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        m = int(rng.integers(2, 5))
        conj = tuple(
            (int(a), int(b))
            for a, b in rng.integers(0, m, size=(int(rng.integers(1, 5)), 2))
            if a != b
        )
        if not conj:
            continue
        assert is_cyclic(conj, m) == (not orderings_satisfying([(conj,)], m))


def test_reference_order_is_topological_and_keeps_a_root_top() -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):
        m = int(rng.integers(2, 6))
        conj = tuple(
            (int(a), int(b))
            for a, b in rng.integers(0, m, size=(int(rng.integers(1, 6)), 2))
            if a != b
        )
        if not conj or is_cyclic(conj, m):
            continue
        y = rng.permutation(m).astype(float).tolist()
        order = reference_order(conj, y)
        rank = {cls: k for k, cls in enumerate(order)}
        assert all(rank[b] < rank[a] for a, b in conj)
        top = top_class(y)
        if all(a != top for a, _ in conj):
            assert order[0] == top
