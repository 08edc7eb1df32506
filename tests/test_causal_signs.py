"""Kink signs inherited by causal partitions from their parents
(``analyse_chunk(signs=…)``), against the network evaluated at every grid point (integer and
one-hot domains) and at dense samples (continuous ones): a sign handed to a partition must
hold at every point of the partition × protected cell, or a bound built on it is unsound."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.causal_nets import random_network
from tests.test_causal_split import _deep_one_hot_network
from verifier.bounds import kink_neurons, unpack_signs
from verifier.causal import CausalSettings, build_problem, certify_causal_fairness
from verifier.causal.analysis import analyse_chunk
from verifier.executor import InProcessExecutor

SLACK = 1e-9  # the sampled pre-activations are computed in float64 too


class _SignRecorder(InProcessExecutor):
    """Runs chunks in-process and records each one's partitions and the signs handed to it."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def submit(self, fn, /, *args, **kwargs):
        if fn is analyse_chunk:
            self.chunks.append((args[2].copy(), args[3].copy(), args[8].copy()))
        return super().submit(fn, *args, **kwargs)


def _pre_activations(network, points: np.ndarray) -> np.ndarray:
    """``(P, N)`` every kink neuron's pre-activation at ``points``, in the layout of
    :meth:`~verifier.bounds.BoundsResult.signs` (the lowered network's kink layers in order)."""
    h, columns = points, []
    for layer in network.lowered().layers:
        z = h @ layer.weight.T + layer.bias
        if layer.activation != "none":
            columns.append(z)
        h = layer.activate(torch.from_numpy(z)).numpy()
    return np.concatenate(columns, axis=1)


def _assert_signs_hold(problem, chunks, points_of) -> int:
    """Check every recorded partition × cell's signs at ``points_of(lo, hi)``; returns how
    many (partition, cell, neuron) signs were known."""
    width = kink_neurons(problem.network)
    cells = problem.protected_cells
    prot = list(problem.protected)
    known = 0
    for lower, upper, packed in chunks:
        for b in range(lower.shape[0]):
            signs = unpack_signs(packed[b], width)
            for c in range(cells.shape[0]):
                lo, hi = lower[b].copy(), upper[b].copy()
                lo[prot], hi[prot] = cells[c, 0], cells[c, 1]
                z = _pre_activations(problem.network, points_of(lo, hi))
                assert (z[:, signs[c] > 0] >= -SLACK).all()
                assert (z[:, signs[c] < 0] <= SLACK).all()
                known += int((signs[c] != 0).sum())
    return known


@pytest.mark.parametrize("seed", [1, 2])
def test_inherited_signs_hold_at_every_grid_point_of_saturating_partitions(seed: int) -> None:
    """Nine ReLU layers over an integer, a 4-category group and an integer protected input:
    every partition's inherited signs hold at every integer × allowed category of it (the
    query is finite: its enumeration is turned off, so that it is partitioned)."""
    network = _deep_one_hot_network(seed)
    problem = build_problem(network, ["s"], onehot_groups=[["a0", "a1", "a2", "a3"]],
                            integer_inputs=["k", "s"], domain={"k": (0, 4), "s": (0, 1)})

    def grid(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return np.array([[k, *np.eye(4)[a], lo[5]]
                         for k in range(int(lo[0]), int(hi[0]) + 1)
                         for a in range(4) if hi[1 + a] > 0.5], dtype=float)

    recorder = _SignRecorder()
    certify_causal_fairness(problem, CausalSettings(timeout_s=30.0, chunk_size=2,
                                                    enumeration_work=0), recorder)
    assert not recorder.chunks[0][2].any()  # the root has no parent
    assert _assert_signs_hold(problem, recorder.chunks, grid) > 0


@pytest.mark.parametrize("seed", [3, 4])
def test_inherited_signs_hold_at_dense_samples_of_continuous_partitions(seed: int) -> None:
    network = random_network(3, [8, 8, 8], seed=seed)
    problem = build_problem(network, ["x2"], split_values=[0.5])
    rng = np.random.default_rng(seed)

    def samples(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        corners = np.array([[lo[0], lo[1]], [lo[0], hi[1]], [hi[0], lo[1]], [hi[0], hi[1]]])
        inner = lo[:2] + rng.random((200, 2)) * (hi[:2] - lo[:2])
        both = np.vstack([corners, inner])
        third = lo[2] + rng.random((both.shape[0], 1)) * (hi[2] - lo[2])
        return np.hstack([both, third])

    recorder = _SignRecorder()
    certify_causal_fairness(problem, CausalSettings(timeout_s=10.0, chunk_size=8,
                                                    target_width=0.02), recorder)
    assert len(recorder.chunks) > 4
    assert _assert_signs_hold(problem, recorder.chunks, samples) > 0
