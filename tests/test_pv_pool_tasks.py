"""How a pool's round is cut into tasks (:func:`verifier.pv.evaluation.task_parts`), and that
the cut changes only where boxes are bounded, never a bound: a 2-worker pool and the
in-process run certify the same intervals, which contain the exact enumeration's value."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from adult_engine import needs_census
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.adult_instances import build_instance, exact_reference
from verifier.audits import demographic_parity_audit
from verifier.pv import PVSettings
from verifier.pv.evaluation import TASKS_PER_WORKER, task_parts


@given(count=st.integers(1, 50_000), workers=st.integers(1, 8),
       min_boxes=st.integers(1, 4096))
def test_every_row_lies_in_one_task_in_batch_order(count: int, workers: int,
                                                   min_boxes: int) -> None:
    parts = task_parts(count, workers, min_boxes)
    assert np.array_equal(np.concatenate(parts), np.arange(count))
    assert all(part.size > 0 for part in parts)
    assert len(parts) <= max(TASKS_PER_WORKER * workers, 1)
    # a worker is never left without a task when the batch holds a box for it
    assert len(parts) >= min(workers, count)
    if len(parts) > workers:  # more tasks than workers only where each holds min_boxes
        assert count // len(parts) >= min_boxes
        sizes = [part.size for part in parts]
        assert sizes == sorted(sizes, reverse=True)
    else:  # one task per worker: equal up to a box
        assert max(p.size for p in parts) - min(p.size for p in parts) <= 1


@pytest.mark.parametrize(("count", "sizes"), [
    (512, [256, 256]),
    (2048, [1024, 1024]),
    (4096, [1638, 1229, 819, 410]),
    (3, [2, 1]),
    (1, [1]),
])
def test_task_sizes_on_two_workers(count: int, sizes: list[int]) -> None:
    assert [part.size for part in task_parts(count, 2, 1024)] == sizes


@needs_census
@pytest.mark.parametrize("min_boxes", [24, 1024])
def test_pool_and_in_process_certify_the_same_exact_containing_intervals(
        min_boxes: int) -> None:
    """Adult-4 (every column discrete, enumerated exactly in 40-digit arithmetic), rounds of
    96 boxes with two in flight, cut into several falling tasks (24) or one per worker
    (1024), at γ equal to the true ratio (no sound run decides it, so both refine to the box
    budget): the pool's certificate equals the in-process one and contains the truth."""
    instance = build_instance(4, (8,), 7, epochs=1, cache_dir=None)
    reference = exact_reference(instance)
    settings = PVSettings(timeout_s=None, max_boxes=2500, batch_size=96, rounds_in_flight=2,
                          min_boxes_per_task=min_boxes)
    certificates = [
        demographic_parity_audit(
            instance.network, instance.population, protected=instance.protected,
            privileged=instance.privileged, favorable_class=instance.favorable_class,
            gamma=reference.ratio, settings=replace(settings, executor=executor, workers=workers))
        for executor, workers in (("local", None), ("process", 2))
    ]
    local, pool = certificates
    assert pool.bounds == local.bounds
    assert pool.verdict == local.verdict == "unknown"
    assert pool.cost["boxes"] == local.cost["boxes"] > 1000
    truth = {"p_unprivileged": reference.p_unprivileged,
             "p_privileged": reference.p_privileged}
    for name, value in truth.items():
        low, high = local.bounds[name]
        assert low - reference.error <= value <= high + reference.error, (name, low, high)
