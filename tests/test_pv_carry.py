"""PV's children reusing their parent's bounds of the last hidden layer
(:mod:`verifier.pv.carry`, ``carried`` of :func:`verifier.bounds.compute_bounds`).

Oracles: PV's intervals on Adult-4/6 with two hidden layers against exact enumeration of
every population point (every report, anytime and final, holds the exact value), with a spy
that the reuse happened; the children's rule against hand-computed cases.
"""

from __future__ import annotations

import numpy as np
import pytest
from adult_engine import assert_reports_hold_the_exact_value, needs_census

import verifier.pv.atoms as atoms_module
from benchmarks.adult_instances import build_instance
from verifier.pv import PVSettings
from verifier.pv.carry import REUSED_GENERATIONS, inherited_carried


def test_children_of_a_tightened_parent_reuse_its_bounds_and_theirs_are_tightened() -> None:
    carried = np.array([[[-1.0, 0.5], [2.0, 3.0]]] * 4, dtype=np.float32)
    inside = np.array([True, True, False, True])
    depth = np.array([1, 2, 1, 3])
    known, reuse = inherited_carried(carried, inside, depth)
    assert REUSED_GENERATIONS == 1
    assert reuse.tolist() == [True, False, False, True]
    assert known[2].tolist() == [[-np.inf, -np.inf], [np.inf, np.inf]]
    assert np.array_equal(known[[0, 1, 3]], carried[[0, 1, 3]])
    # no layer carried (one hidden layer): nobody reuses
    _, none = inherited_carried(np.zeros((4, 2, 0), np.float32), inside, depth)
    assert not none.any()


@needs_census
@pytest.mark.parametrize("k", [4, 6])
def test_pv_with_reused_bounds_keeps_the_exact_value_in_every_interval(
        k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two hidden layers: every interval PV reports holds the exactly enumerated value while
    half the generations keep their parent's bounds of the last hidden layer; the reuse
    happened (boxes bounded with carried bounds and without tightening)."""
    reused: list[int] = []
    bounded = atoms_module.compute_bounds

    def spy(*args: object, **kwargs: object) -> object:
        tighten, carried = kwargs.get("tighten"), kwargs.get("carried")
        if carried is not None and tighten is not None:
            reused.append(int((~np.asarray(tighten)).sum()))
        return bounded(*args, **kwargs)

    monkeypatch.setattr(atoms_module, "compute_bounds", spy)
    instance = build_instance(k, (16, 16), 7, epochs=1, cache_dir=None)
    assert_reports_hold_the_exact_value(instance, PVSettings(
        timeout_s=30.0, max_boxes=3000, batch_size=128))
    assert sum(reused) > 0
