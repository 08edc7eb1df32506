"""Cheap witness search: evaluate the network on fixed sample points of each partition.

The sample offsets are a fixed pseudo-random set (seed 0), scaled into each partition, so the
points of a partition do not depend on how partitions are chunked or which executor runs
them. Classes are read in float by the class rule (argmax, ties to the lowest index):
candidates only, which the caller re-checks in real arithmetic
(:func:`verifier.causal.witness.confirmed_pairs`).
"""

from __future__ import annotations

import numpy as np

from verifier.causal.classes import float_classes
from verifier.causal.problem import FairnessProblem

MIN_SAMPLES = 16
MAX_SAMPLES = 512
SAMPLE_WORK = 1.0e6
"""Multiply-adds spent on sampling per partition: small networks get up to ``MAX_SAMPLES``
points (GC-3 of FairQuant, 20-9-1: certified-fair share after 15 s from 19 % with 16 points
to 42 % with 512, the sampled witnesses replacing MILPs that only found witnesses), large
ones no fewer than ``MIN_SAMPLES``; at 4·10⁶ GC-1 (20-50-1) spent 41 % of its time sampling."""
BLOCK_ROWS = 65536
"""Network rows evaluated at once: partitions are sampled in blocks of at most this many rows
(at least one partition a block), so the points, their probe copies and the layers'
activations stay in cache-sized arrays. A chunk of 256 German partitions is ~650,000 rows;
in blocks German 0.20-bias5/Gt's sampling took 0.94–1.06 CPU s against 1.33–1.45 in one
piece (blocks of 16,384 rows: 1.04 s; of 4,096, one partition each: 1.51 s)."""


def sample_count(problem: FairnessProblem, probes: int) -> int:
    """Points per partition: ``SAMPLE_WORK`` over the network's weights times the probes,
    clipped to ``[MIN_SAMPLES, MAX_SAMPLES]``."""
    weights = sum(layer.weight.size for layer in problem.network.layers)
    return int(np.clip(SAMPLE_WORK / (weights * max(probes, 1)), MIN_SAMPLES, MAX_SAMPLES))


def _offsets(samples: int, inputs: int) -> np.ndarray:
    offsets = np.random.default_rng(0).uniform(size=(samples, inputs))
    offsets[0] = 0.5
    return offsets


def sample_points(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                  samples: int = MIN_SAMPLES) -> np.ndarray:
    """``(B, S, n)`` points inside each partition (integer inputs get integers, one-hot groups
    one allowed category; protected entries are zero, for the caller to set)."""
    n = lower.shape[1]
    u = _offsets(samples, n)[None, :, :]
    points = lower[:, None, :] + u * (upper - lower)[:, None, :]
    whole = problem.integer
    if whole.any():
        steps = np.floor(u[:, :, whole] * (upper - lower + 1.0)[:, None, whole])
        points[:, :, whole] = np.minimum(lower[:, None, whole] + steps, upper[:, None, whole])
    for group in problem.onehot_groups:
        members = np.asarray(group)
        allowed = upper[:, members] > 0.5
        count = allowed.sum(axis=1)
        pick = np.minimum((u[0, :, members[0]][None, :] * count[:, None]).astype(int),
                          count[:, None] - 1)
        rank = np.cumsum(allowed, axis=1) - 1
        chosen = (rank[:, None, :] == pick[:, :, None]) & allowed[:, None, :]
        points[:, :, members] = chosen.astype(float)
    points[:, :, list(problem.protected)] = 0.0
    return points


def find_witnesses(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                   values: np.ndarray, anchors: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Search each partition for a point and two protected values (``values`` ``(B, P, k)``,
    per partition) with two different float classes. ``anchors`` ``(B, n)`` (NaN rows where
    none): an extra point per partition, e.g. an ancestor's witness, used when it lies inside.
    Returns ``found`` ``(B,)``, ``x_a``/``x_b`` ``(B, n)`` and the two classes ``(B, 2)``
    (meaningful where ``found``). Partitions are searched in blocks of at most
    ``BLOCK_ROWS`` network rows; each partition's result does not depend on the blocks."""
    per_partition = values.shape[1] * (sample_count(problem, values.shape[1]) + 1)
    block = max(1, BLOCK_ROWS // per_partition)
    parts = [_find_block(problem, lower[start:start + block], upper[start:start + block],
                         values[start:start + block],
                         None if anchors is None else anchors[start:start + block])
             for start in range(0, lower.shape[0], block)]
    if len(parts) == 1:
        return parts[0]
    found, x_a, x_b, pair = (np.concatenate(column) for column in zip(*parts, strict=True))
    return found, x_a, x_b, pair


def _find_block(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                values: np.ndarray, anchors: np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`find_witnesses` on one block of partitions."""
    batch, n = lower.shape
    prot = list(problem.protected)
    points = sample_points(problem, lower, upper, sample_count(problem, values.shape[1]))
    if anchors is not None:
        inside = ~np.isnan(anchors).any(axis=1)
        others = [i for i in range(n) if i not in set(prot)]
        filled = np.where(np.isnan(anchors), 0.0, anchors)
        inside &= ((filled[:, others] >= lower[:, others])
                   & (filled[:, others] <= upper[:, others])).all(axis=1)
        extra = np.where(inside[:, None], filled, points[:, 0, :])
        extra[:, prot] = 0.0
        points = np.concatenate([extra[:, None, :], points], axis=1)
    samples, probes = points.shape[1], values.shape[1]
    rows = np.repeat(points[:, :, None, :], probes, axis=2)
    rows[:, :, :, prot] = values[:, None, :, :]
    classes = float_classes(problem.network.evaluate(rows.reshape(-1, n))).reshape(
        batch, samples, probes)
    flips = classes.max(axis=2) > classes.min(axis=2)
    found = flips.any(axis=1)
    sample = np.argmax(flips, axis=1)
    index = np.arange(batch)
    chosen = classes[index, sample]
    first = np.argmin(chosen, axis=1)
    second = np.argmax(chosen, axis=1)
    base = points[index, sample]
    x_a, x_b = base.copy(), base.copy()
    x_a[:, prot] = values[index, first]
    x_b[:, prot] = values[index, second]
    pair = np.stack([chosen[index, first], chosen[index, second]], axis=1)
    return found, x_a, x_b, pair
