"""A split child's mass as its parent's less its sibling's (:class:`verifier.pv.engine.Complement`).

Oracles: exact rational arithmetic for the enclosure itself (hypothesis), and every point of
the Adult-4 population with its probability (:func:`benchmarks.adult_instances.enumerate_points`,
40-digit factors) for the masses a PV run derives: each derived enclosure must contain the
child's mass summed over its points, and so must every enclosure the run computes directly.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from adult_engine import needs_census
from hypothesis import given, settings
from hypothesis import strategies as st

import verifier.pv.engine as engine_module
from benchmarks.adult_instances import (
    AdultInstance,
    build_instance,
    enumerate_points,
    exact_reference,
)
from verifier.audits import demographic_parity_audit
from verifier.pv import PVSettings
from verifier.pv.engine import Complement

masses = st.floats(min_value=0.0, max_value=1.0, allow_nan=False, allow_subnormal=True)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(masses, masses, masses, masses, masses, masses), min_size=1,
                max_size=6))
def test_the_complement_encloses_the_parent_less_the_sibling(
    draws: list[tuple[float, ...]],
) -> None:
    """For any enclosures ``[pl, ph] ∋ P`` and ``[sl, sh] ∋ S`` with ``S <= P``, the derived
    enclosure contains ``P − S`` exactly (Fractions), and lies in ``[0, ph]``."""
    parent_lo: list[float] = []
    parent_hi: list[float] = []
    sibling_lo: list[float] = []
    sibling_hi: list[float] = []
    exact_parent: list[Fraction] = []
    exact_sibling: list[Fraction] = []
    for a, b, c, d, t, u in draws:
        pl, ph = sorted((a, b))
        sl, sh = sorted((c, d))
        p = Fraction(pl) + (Fraction(ph) - Fraction(pl)) * Fraction(t)
        s = Fraction(sl) + (Fraction(sh) - Fraction(sl)) * Fraction(u)
        if s > p:
            continue
        parent_lo.append(pl)
        parent_hi.append(ph)
        sibling_lo.append(sl)
        sibling_hi.append(sh)
        exact_parent.append(p)
        exact_sibling.append(s)
    count = len(parent_lo)
    if count == 0:
        return
    # row i + count is derived from its sibling, row i
    complement = Complement(
        np.concatenate([np.zeros(count, dtype=bool), np.ones(count, dtype=bool)]),
        np.concatenate([np.arange(count, 2 * count), np.arange(count)]),
        np.tile(np.array(parent_lo), 2), np.tile(np.array(parent_hi), 2))
    mass_lo = np.concatenate([np.array(sibling_lo), np.zeros(count)])
    mass_hi = np.concatenate([np.array(sibling_hi), np.array(parent_hi)])
    low, high = complement.masses(mass_lo, mass_hi)
    for i in range(count):
        child = exact_parent[i] - exact_sibling[i]
        assert Fraction(low[count + i]) <= child <= Fraction(high[count + i])
        assert low[count + i] >= 0.0
        assert high[count + i] <= parent_hi[i]
        assert (low[i], high[i]) == (sibling_lo[i], sibling_hi[i])


@functools.cache
def _adult4() -> tuple[AdultInstance, np.ndarray, np.ndarray]:
    instance = build_instance(4, (8,), 7, epochs=1, cache_dir=None)
    points, probability = enumerate_points(instance.population)
    return instance, points, probability


@needs_census
@pytest.mark.parametrize("split", ["smear-longest-edge", "longest-edge", "babsb"])
def test_derived_masses_contain_the_enumerated_mass_on_adult_4(
    split: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every box mass a PV run records — derived from parent and sibling, or computed —
    contains the box's exact mass summed over the population's points (within the oracle's
    1e-13 relative error); most split children are derived."""
    instance, points, probability = _adult4()
    recorded: list[tuple[np.ndarray, np.ndarray, Any, Any]] = []
    original = engine_module.ProbabilityBranchAndBound._evaluate

    def spied(self: Any, lo: np.ndarray, hi: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        record, futures = original(self, lo, hi, *args, **kwargs)

        def kept() -> Any:
            boxes = record()
            recorded.append((lo, hi, boxes, kwargs.get("complement")))
            return boxes

        return kept, futures

    monkeypatch.setattr(engine_module.ProbabilityBranchAndBound, "_evaluate", spied)
    demographic_parity_audit(
        instance.network, instance.population, protected=instance.protected,
        privileged=instance.privileged, favorable_class=instance.favorable_class,
        gamma=exact_reference(instance).ratio,
        settings=PVSettings(timeout_s=None, max_boxes=3000, batch_size=64, split=split))
    derived = checked = 0
    for lo, hi, boxes, complement in recorded:
        inside = ((points[None, :, :] >= lo[:, None, :])
                  & (points[None, :, :] <= hi[:, None, :])).all(axis=2)
        for row in range(lo.shape[0]):
            exact = math.fsum(probability[inside[row]])
            error = 1e-13 * exact
            assert boxes.mass_lo[row] <= exact + error and exact - error <= boxes.mass_hi[row], (
                f"box {row}: [{boxes.mass_lo[row]!r}, {boxes.mass_hi[row]!r}] against {exact!r}")
            checked += 1
        if complement is not None:
            derived += int(complement.derived.sum())
    print(checked, derived)
    assert checked > 1000
    assert derived > checked // 4


@needs_census
def test_only_exact_partitions_are_derived(monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`Splitter.partitioned` accepts two children that cut one integer column or one
    one-hot group of their parent into disjoint parts covering it, and refuses a gap, an
    overlap, a missing category and a cut on two axes at once."""
    instance, _, _ = _adult4()
    engines: list[Any] = []
    original = engine_module.ProbabilityBranchAndBound.__init__

    def recorded(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        engines.append(self)

    monkeypatch.setattr(engine_module.ProbabilityBranchAndBound, "__init__", recorded)
    demographic_parity_audit(
        instance.network, instance.population, protected=instance.protected,
        privileged=instance.privileged, favorable_class=instance.favorable_class, gamma=0.8,
        settings=PVSettings(timeout_s=None, max_boxes=4))
    splitter = engines[0].splitter
    parent_lo = engines[0].domain.lower[None, :].copy()
    parent_hi = engines[0].domain.upper[None, :].copy()
    splitter.snap(parent_lo, parent_hi)
    listed = dict(splitter.atom_columns)

    def values(column: int) -> np.ndarray:
        low, high = parent_lo[0, column], parent_hi[0, column]
        if column in listed:
            held = listed[column]
            return held[(held >= low) & (held <= high)]
        return np.arange(low, high + 1.0) if np.isfinite(high - low) else np.zeros(0)

    plain = [d for d in range(parent_lo.shape[1])
             if splitter.group_of[d] < 0 and splitter.domain.integer[d] and values(d).size >= 3]
    groups = [g for g in range(splitter.group_index.shape[0])
              if splitter.group_valid[g].sum() >= 3]
    assert plain and groups
    d = plain[0]
    held = values(d)
    middle = held.size // 2 - 1

    def pair(left_hi: float, right_lo: float, column: int = d) -> tuple[np.ndarray, np.ndarray]:
        lo = np.repeat(parent_lo, 2, axis=0)
        hi = np.repeat(parent_hi, 2, axis=0)
        hi[0, column], lo[1, column] = left_hi, right_lo
        return lo, hi

    def judged(lo: np.ndarray, hi: np.ndarray) -> bool:
        return bool(splitter.partitioned(parent_lo, parent_hi, lo, hi)[0])

    below, next_value, after = held[middle], held[middle + 1], held[middle + 2]
    assert judged(*pair(below, next_value))
    assert not judged(*pair(below, after))  # the next value in neither child
    assert not judged(*pair(below, below))  # one value in both
    columns = splitter.group_index[groups[0]][splitter.group_valid[groups[0]]]
    lo, hi = pair(below, next_value)
    hi[0, columns[0]] = 0.0
    assert not judged(lo, hi)  # two axes moved

    def categories(left: list[int], right: list[int]) -> bool:
        lo = np.repeat(parent_lo, 2, axis=0)
        hi = np.repeat(parent_hi, 2, axis=0)
        for row, chosen in ((0, left), (1, right)):
            hi[row, columns] = 0.0
            hi[row, columns[chosen]] = 1.0
            if len(chosen) == 1:
                lo[row, columns[chosen]] = 1.0
        return judged(lo, hi)

    every = list(range(columns.size))
    assert categories(every[:1], every[1:])
    assert not categories(every[:2], every[1:])  # category 1 in both
    assert not categories(every[:1], every[2:])  # category 1 in neither
