"""Partitions of the non-protected query space, as batches of boxes over all inputs.

A partition is a box ``[lower, upper]`` over every input: continuous non-protected inputs carry
an interval, each non-protected one-hot group carries its allowed categories (upper 1, lower 1
when only one is allowed, disallowed categories pinned to 0), and the protected inputs are
unused (the analysis substitutes its cells). Splitting never touches the protected inputs.

An integer input's interval ``[lo, hi]`` has integer ends and stands for the integers
``lo, …, hi``; it is split between two integers, so no integer point is shared or lost, and its
weight is its share of the query's integer points. The bounds still treat the interval as
continuous, which over-approximates its integer points soundly.
"""

from __future__ import annotations

import numpy as np

from verifier.causal.problem import FairnessProblem

MIN_EDGE = 1e-9


def initial_partition(problem: FairnessProblem) -> tuple[np.ndarray, np.ndarray]:
    """The query region as one partition, ``(1, n)`` lower and upper."""
    lower = problem.query_lower.copy()
    upper = problem.query_upper.copy()
    for group, allowed in zip(problem.onehot_groups, problem.query_allowed, strict=True):
        members = np.asarray(group)
        upper[members] = allowed.astype(float)
        lower[members] = 1.0 * allowed if allowed.sum() == 1 else 0.0
    return lower[None, :], upper[None, :]


def uniform_share(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``(B,)``: each partition's share of the query region under the uniform measure
    (continuous inputs uniform, one-hot categories equally likely)."""
    share = np.ones(lower.shape[0])
    for index in problem.continuous:
        span = problem.query_upper[index] - problem.query_lower[index]
        if problem.integer[index]:
            share *= (upper[:, index] - lower[:, index] + 1.0) / (span + 1.0)
        elif span > 0:
            share *= (upper[:, index] - lower[:, index]) / span
    for group, allowed in zip(problem.onehot_groups, problem.query_allowed, strict=True):
        share *= upper[:, list(group)].sum(axis=1) / allowed.sum()
    return share


def with_protected(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                   values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boxes ``(B·V, n)``: every partition combined with every protected value box
    ``values`` ``(V, 2, k)``; partition-major order."""
    count = values.shape[0]
    lo = np.repeat(lower, count, axis=0)
    hi = np.repeat(upper, count, axis=0)
    prot = list(problem.protected)
    lo[:, prot] = np.tile(values[:, 0, :], (lower.shape[0], 1))
    hi[:, prot] = np.tile(values[:, 1, :], (lower.shape[0], 1))
    return lo, hi


def split_candidates(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                     min_edge: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All binary splits of every partition.

    Returns ``children_lower``/``children_upper`` of shape ``(B, D, 2, n)`` and ``valid``
    ``(B, D)``, with one candidate per continuous input (bisected at the midpoint; valid when
    its width exceeds ``max(min_edge, MIN_EDGE)``; an integer input is cut after
    ``floor(midpoint)``, valid while it holds two integers, whatever ``min_edge``) and per
    one-hot group (allowed categories halved in index order; valid with at least two allowed).
    """
    batch, n = lower.shape
    dims = len(problem.continuous) + len(problem.onehot_groups)
    child_lo = np.broadcast_to(lower[:, None, None, :], (batch, dims, 2, n)).copy()
    child_hi = np.broadcast_to(upper[:, None, None, :], (batch, dims, 2, n)).copy()
    valid = np.zeros((batch, dims), dtype=bool)
    for d, index in enumerate(problem.continuous):
        middle = 0.5 * (lower[:, index] + upper[:, index])
        if problem.integer[index]:
            cut = np.floor(middle)
            child_hi[:, d, 0, index] = cut
            child_lo[:, d, 1, index] = cut + 1.0
            valid[:, d] = upper[:, index] - lower[:, index] >= 1.0
            continue
        child_hi[:, d, 0, index] = middle
        child_lo[:, d, 1, index] = middle
        valid[:, d] = upper[:, index] - lower[:, index] > max(min_edge, MIN_EDGE)
    offset = len(problem.continuous)
    for g, group in enumerate(problem.onehot_groups):
        d = offset + g
        members = np.asarray(group)
        allowed = upper[:, members] > 0.5
        count = allowed.sum(axis=1)
        rank = np.cumsum(allowed, axis=1)
        first = allowed & (rank <= ((count + 1) // 2)[:, None])
        second = allowed & ~first
        for side, mask in enumerate((first, second)):
            child_hi[:, d, side, members] = mask.astype(float)
            single = mask.sum(axis=1) == 1
            child_lo[:, d, side, members] = np.where(single[:, None], mask.astype(float), 0.0)
        valid[:, d] = count >= 2
    return child_lo, child_hi, valid


def representative(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``(B, n)`` a point of each partition: continuous midpoints (integer inputs: rounded
    down), the first allowed one-hot category (protected entries left for the caller)."""
    point = 0.5 * (lower + upper)
    point[:, problem.integer] = np.floor(point[:, problem.integer])
    for group in problem.onehot_groups:
        members = np.asarray(group)
        allowed = upper[:, members] > 0.5
        first = np.argmax(allowed, axis=1)
        point[:, members] = 0.0
        point[np.arange(lower.shape[0]), members[first]] = 1.0
    return point
