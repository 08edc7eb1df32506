"""The second protected cell bounded only where it can matter
(:func:`verifier.causal.analysis.screen_cells`), against brute force on a nine-layer network
whose partitions saturate: every class it proves and every pre-activation bound it returns
holds at every integer × allowed category of the partition, and it decides (fair, biased
everywhere) exactly the partitions that bounding both cells decides."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_causal_signs import _pre_activations
from tests.test_causal_split import _deep_one_hot_network
from verifier.bounds import pairwise_difference_spec
from verifier.causal import build_problem
from verifier.causal.analysis import gives_up_saturated, proven_classes, screen_cells
from verifier.causal.partition import with_protected

SLACK = 1e-9  # the grid's pre-activations are computed in float64 too
U = 8  # the default budget of the exact check


def _partitions(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Random partitions of ``k`` (integers 0…4) × the 4-category group (``s`` unused)."""
    lower = np.zeros((count, 6))
    upper = np.zeros((count, 6))
    for b in range(count):
        k = np.sort(rng.integers(0, 5, size=2))
        allowed = rng.random(4) < 0.5
        allowed[rng.integers(0, 4)] = True
        lower[b, 0], upper[b, 0] = k
        upper[b, 1:5] = allowed
        lower[b, 1:5] = allowed if allowed.sum() == 1 else 0.0
    return lower, upper


def _grid(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Every point of a cell box: integers ``k`` × allowed categories, ``s`` at its value."""
    return np.array([[k, *np.eye(4)[a], lo[5]]
                     for k in range(int(lo[0]), int(hi[0]) + 1)
                     for a in range(4) if hi[1 + a] > 0.5], dtype=float)


def _decisions(classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    proven = classes >= 0
    fair = proven.all(axis=1) & (classes[:, 0] == classes[:, 1])
    biased = proven.all(axis=1) & (classes[:, 0] != classes[:, 1])
    return fair, biased


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("inherit", [False, True])
def test_screened_cells_hold_at_every_grid_point_and_decide_as_both_cells(
        seed: int, inherit: bool) -> None:
    network = _deep_one_hot_network(seed)
    problem = build_problem(network, ["s"], onehot_groups=[["a0", "a1", "a2", "a3"]],
                            integer_inputs=["k", "s"], domain={"k": (0, 4), "s": (0, 1)})
    assert gives_up_saturated(problem) and problem.point_cells
    lower, upper = _partitions(np.random.default_rng(seed), 120)
    cell_lo, cell_hi = with_protected(problem, lower, upper, problem.protected_cells)
    known = None
    if inherit:  # the root's signs, per cell, hold on every partition inside it
        root_lo, root_hi = with_protected(problem, np.array([[0, 0, 0, 0, 0, 0.0]]),
                                          np.array([[4, 1, 1, 1, 1, 0.0]]),
                                          problem.protected_cells)
        root_signs = proven_classes(problem, root_lo, root_hi, "crown")[1].signs()
        known = np.tile(root_signs, (lower.shape[0], 1))
    classes, result, skipped = screen_cells(problem, cell_lo, cell_hi, "crown", known, U)
    both = proven_classes(problem, cell_lo, cell_hi, "crown", known)[0].reshape(-1, 2)

    assert skipped.any() and (~skipped).any()  # both paths are exercised
    assert (classes[skipped, 1] == -1).all() and (classes[skipped, 0] == -1).all()
    # a skipped partition stays above U, so it never reaches the exact check
    assert (result.unstable_count().reshape(-1, 2)[skipped, 0] > U).all()
    for mine, theirs in zip(_decisions(classes), _decisions(both), strict=True):
        assert np.array_equal(mine, theirs)

    signs = result.signs()
    spec = pairwise_difference_spec(problem.network.output_size)
    layers = result.kink_layers
    for box in range(cell_lo.shape[0]):
        points = _grid(cell_lo[box], cell_hi[box])
        if classes.reshape(-1)[box] >= 0:
            assert (network.classify(points) == classes.reshape(-1)[box]).all()
        z = _pre_activations(network, points)
        low = np.concatenate([result.pre_lower[k][box] for k in layers])
        high = np.concatenate([result.pre_upper[k][box] for k in layers])
        assert (z >= low - SLACK).all() and (z <= high + SLACK).all()
        assert (z[:, signs[box] > 0] >= -SLACK).all() and (z[:, signs[box] < 0] <= SLACK).all()
        rows = problem.network.evaluate(points) @ spec.T
        assert (rows >= result.lower[box] - SLACK).all()
        assert (rows <= result.upper[box] + SLACK).all()
