"""Bounds over one-hot groups: every allowed category combination, checked in exact rational
arithmetic, lies inside the bounds; on an affine network the bounds are the exact extremes
over the allowed categories (not over the ``[0, 1]^g`` box)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import random_network

from verifier.bounds import METHODS, compute_bounds
from verifier.errors import CertgateInputError
from verifier.exact_arith import exact_outputs
from verifier.network import Layer, Network
from verifier.numerics import SOUNDNESS_REL_MARGIN

GROUPS = ((0, 1, 2), (3, 4))
# the same shapes of groups over columns that are neither contiguous nor in order
SCATTERED_GROUPS = ((4, 0, 2), (6, 1))
PATTERNS = ((0.0, 0.0), (1.0, 1.0), (0.0, 1.0))


def _box(
    rng: np.random.Generator, width: int, groups: tuple[tuple[int, ...], ...] = GROUPS
) -> tuple[np.ndarray, np.ndarray]:
    """A box whose group columns are each excluded, fixed or open, other columns an interval."""
    lo = rng.normal(size=width) - rng.uniform(0, 1, size=width)
    hi = lo + rng.uniform(0, 2, size=width)
    for group in groups:
        for column in group:
            lo[column], hi[column] = PATTERNS[int(rng.integers(0, 3))]
    return lo, hi


def _allowed(lo: np.ndarray, hi: np.ndarray, group: tuple[int, ...]) -> list[int]:
    return [c for c in group if lo[c] <= 1.0 <= hi[c]
            and all(lo[j] <= 0.0 <= hi[j] for j in group if j != c)]


def _one_hot_points(
    rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray,
    groups: tuple[tuple[int, ...], ...] = GROUPS,
) -> list[list]:
    """Every combination of allowed categories, with the other columns at corners and at
    random points of their intervals."""
    choices = [_allowed(lo, hi, group) for group in groups]
    rest = [c for c in range(lo.size) if all(c not in g for g in groups)]
    points = []
    for categories in itertools.product(*choices):
        for trial in range(6):
            x = [0.0] * lo.size
            for column in categories:
                x[column] = 1.0
            for c in rest:
                x[c] = (lo[c], hi[c])[trial % 2] if trial < 2 else float(rng.uniform(lo[c], hi[c]))
            points.append(x)
    return points


@pytest.mark.parametrize("groups", [GROUPS, SCATTERED_GROUPS], ids=["contiguous", "scattered"])
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), hidden=st.lists(st.integers(1, 6), min_size=0, max_size=2),
       activation=st.sampled_from(["relu", "leaky_relu", "hardtanh"]))
def test_bounds_contain_every_one_hot_point_exactly(
    groups: tuple[tuple[int, ...], ...], seed: int, hidden: list[int], activation: str
) -> None:
    rng = np.random.default_rng(seed)
    network = random_network(rng, [7, *hidden, 2], activation)
    lo, hi = _box(rng, 7, groups)
    points = _one_hot_points(rng, lo, hi, groups)
    spec = np.array([[1.0, -1.0], [0.5, 2.0]])
    exact = [[sum(Fraction(c) * y for c, y in zip(row, exact_outputs(network, x), strict=True))
              for row in spec] for x in points]
    for method in METHODS:
        result = compute_bounds(network, lo, hi, spec, method, alpha_steps=3, groups=groups)
        for values in exact:
            for row, value in enumerate(values):
                assert Fraction(result.lower[0, row]) <= value <= Fraction(result.upper[0, row])


@pytest.mark.parametrize("method", METHODS)
def test_an_affine_network_is_bounded_by_its_best_and_worst_category(method: str) -> None:
    weight = np.array([[-3.0, -2.0, 5.0, 1.0, -4.0, 0.5]])
    network = Network([Layer(weight, np.array([0.25]), "none")])
    groups = ((0, 1, 2), (3, 4))
    lo = np.array([0.0, 0.0, 0.0, 0.0, 0.0, -1.0])
    hi = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 2.0])
    result = compute_bounds(network, lo, hi, None, method, groups=groups)
    # best/worst category per group: min(-3, -2, 5) + min(1, -4), max likewise; x5 in [-1, 2];
    # the only slack allowed is the rounding margin (magnitude sum |w| max(|lo|, |hi|) = 16.25)
    margin = 2 * SOUNDNESS_REL_MARGIN * 16.25
    # the box relaxation lets two categories of the first group be 1 at once: -5 instead of -3
    assert result.lower[0, 0] == pytest.approx(-3.0 - 4.0 - 0.5 + 0.25, abs=margin)
    assert result.upper[0, 0] == pytest.approx(5.0 + 1.0 + 1.0 + 0.25, abs=margin)
    box_only = compute_bounds(network, lo, hi, None, method)
    assert box_only.lower[0, 0] < result.lower[0, 0] - 1.0


def test_unread_category_columns_stay_allowed() -> None:
    """A category whose column the network never reads is still a possible value."""
    weight = np.array([[0.0, 2.0, 0.0]])
    network = Network([Layer(weight, np.zeros(1), "relu"), Layer(np.eye(1), np.zeros(1), "none")])
    result = compute_bounds(network, np.zeros(3), np.ones(3), None, "crown", groups=((0, 1, 2),))
    assert result.lower[0, 0] <= 0.0 and result.upper[0, 0] >= 2.0


def test_bad_groups_are_refused() -> None:
    network = Network([Layer(np.ones((1, 3)), np.zeros(1), "none")])
    for groups in (((0,),), ((0, 5),), ((0, 1), (1, 2))):
        with pytest.raises(CertgateInputError, match="one-hot group"):
            compute_bounds(network, np.zeros(3), np.ones(3), None, "ibp", groups=groups)
