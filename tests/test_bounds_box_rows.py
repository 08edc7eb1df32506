"""The second map's CROWN rows computed box by box (:mod:`verifier.bounds.box_rows`): sound
against exact rational pre-activations at every allowed one-hot point of boxes that hold some
columns at one value, in float64 and float32, on numpy and torch; the same bounds as the
row-by-row pass but for rounding."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from bound_oracles import rational_outputs
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import random_network

import verifier.bounds.box_rows as box_rows
from verifier.bounds import compute_bounds
from verifier.exact_arith import exact_outputs
from verifier.network import Layer, Network

GROUPS = ((0, 1, 2), (5, 3))
NUMERIC = (4, 6, 7)
WIDTH = 8
# a group's columns: fixed to one category, one category left open by the box (the others
# held at 0), two categories open, every category open
GROUP_PATTERNS = ("fixed", "one open", "two open", "all open")


def _box(rng: np.random.Generator, patterns: tuple[str, ...] = GROUP_PATTERNS,
         held: float = 0.8, spread: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """A box whose numeric columns are each one value (with probability ``held``) or an
    interval up to ``spread`` wide and whose groups take one of ``patterns`` (of
    :data:`GROUP_PATTERNS`)."""
    lo, hi = np.zeros(WIDTH), np.zeros(WIDTH)
    for column in NUMERIC:
        lo[column] = rng.normal()
        hi[column] = lo[column] + (0.0 if rng.random() < held else rng.uniform(0.1, spread))
    for group in GROUPS:
        pattern = patterns[int(rng.integers(0, len(patterns)))]
        order = [group[i] for i in rng.permutation(len(group))]
        if pattern == "fixed":
            lo[order[0]] = hi[order[0]] = 1.0
        elif pattern == "one open":
            hi[order[0]] = 1.0
        elif pattern == "two open":
            hi[order[:2]] = 1.0
        else:
            hi[list(group)] = 1.0
    return lo, hi


def _points(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray) -> list[list[float]]:
    """Every combination of the box's allowed categories, its numeric columns at both ends
    and at random points."""
    allowed = [[c for c in group if lo[c] <= 1.0 <= hi[c]
                and all(lo[j] <= 0.0 <= hi[j] for j in group if j != c)] for group in GROUPS]
    points = []
    for categories in itertools.product(*allowed):
        for trial in range(4):
            x = [0.0] * WIDTH
            for column in categories:
                x[column] = 1.0
            for c in NUMERIC:
                x[c] = (float(lo[c]), float(hi[c]))[trial] if trial < 2 else float(
                    rng.uniform(lo[c], hi[c]))
            points.append(x)
    return points


def _second_layer(network: Network) -> Network:
    """The network's first two maps, the second without its activation."""
    first, second = network.layers[0], network.layers[1]
    return Network([first, Layer(second.weight, second.bias, "none")])


class _Counted:
    """:func:`box_rows.second_map_rows` counting the pairs it bounds."""

    def __init__(self) -> None:
        self.pairs = 0
        self.inner = box_rows.second_map_rows

    def __call__(self, *args: object) -> object:
        self.pairs += int(args[-3].shape[0])  # type: ignore[attr-defined]
        return self.inner(*args)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), first=st.integers(3, 12), second=st.integers(2, 9),
       activation=st.sampled_from(["relu", "leaky_relu"]),
       backend=st.sampled_from(["numpy", "torch"]))
def test_box_rows_contain_exact_pre_activations(
    seed: int, first: int, second: int, activation: str, backend: str,
) -> None:
    rng = np.random.default_rng(seed)
    network = random_network(rng, [WIDTH, first, second, 2], activation)
    boxes = [_box(rng) for _ in range(5)]
    lo, hi = np.array([b[0] for b in boxes]), np.array([b[1] for b in boxes])
    counted = _Counted()
    with pytest.MonkeyPatch.context() as patch:
        # every box by box, whatever it costs: the rule's soundness, not the choice
        patch.setattr(box_rows, "cheaper_by_box", lambda box, lo, hi, rows, first: box >= 0)
        patch.setattr(box_rows, "second_map_rows", counted)
        result = compute_bounds(network, lo, hi, None, "crown", groups=GROUPS, backend=backend)
    unstable = (result.pre_lower[1] < 0) & (result.pre_upper[1] > 0)
    assert counted.pairs > 0 or not unstable.any()
    prefix = _second_layer(network)
    for box in range(len(boxes)):
        for point in _points(rng, lo[box], hi[box]):
            # the written-apart rational evaluator reads ReLU only
            exact = (rational_outputs if activation == "relu" else exact_outputs)(prefix, point)
            for neuron, value in enumerate(exact):
                assert Fraction(result.pre_lower[1][box, neuron]) <= value
                assert value <= Fraction(result.pre_upper[1][box, neuron])


def test_box_rows_are_the_row_pass_but_for_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Boxes holding most columns at one value take the box-by-box product; with it switched
    off the row-by-row pass bounds the same pre-activations: the two agree to within the
    float32 rows' rounding margins (a few 1e-4 here; a lost or doubled term would move a
    bound by the order of its weights, ~0.1–1). Soundness is the exact test above."""
    rng = np.random.default_rng(7)
    network = random_network(rng, [WIDTH, 40, 4, 2], "relu")
    boxes = [_box(rng, GROUP_PATTERNS[:2], 0.7, 20.0) for _ in range(40)]
    lo, hi = np.array([b[0] for b in boxes]), np.array([b[1] for b in boxes])
    counted = _Counted()
    with monkeypatch.context() as patch:
        patch.setattr(box_rows, "second_map_rows", counted)
        by_box = compute_bounds(network, lo, hi, None, "crown", groups=GROUPS, backend="torch")
    with monkeypatch.context() as patch:
        patch.setattr(box_rows, "cheaper_by_box", lambda box, lo, hi, rows, first: box < 0)
        by_row = compute_bounds(network, lo, hi, None, "crown", groups=GROUPS, backend="torch")
    assert counted.pairs > 0
    for bound in (by_box.pre_lower[1], by_box.pre_upper[1]):
        assert np.isfinite(bound).all()
    np.testing.assert_allclose(by_box.pre_lower[1], by_row.pre_lower[1], rtol=0, atol=2e-3)
    np.testing.assert_allclose(by_box.pre_upper[1], by_row.pre_upper[1], rtol=0, atol=2e-3)
