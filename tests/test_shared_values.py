"""A value shared with an executor reaches each worker once, and a task carries only its key:
on real process pools and a real 2-worker Dask cluster, workers compute with a 4-MB value
that no task they ran contained (each task pickles to under a kilobyte). Also: a local Dask
cluster's workers start without Dask's ``MALLOC_TRIM_THRESHOLD_``."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import pickle

import numpy as np
import pytest
from small_pv import small_engine

from verifier.executor import (
    MALLOC_TRIM_KEY,
    DaskExecutor,
    ProcessPool,
    abandon,
    make_executor,
    share,
)
from verifier.pv.evaluation import DistributedEvaluation, task_parts
from verifier.worker_values import VALUES, SharedValue

VALUE = np.random.default_rng(3).bytes(4_000_000)
DIGEST = hashlib.sha256(VALUE).hexdigest()
TASKS = 16


def _seen(value: bytes, index: int) -> tuple[int, int, str, int]:
    """On a worker: its process, which object it was given, and that object's digest."""
    return os.getpid(), id(value), hashlib.sha256(value).hexdigest(), index


def _holds(key: str) -> bool:
    return key in VALUES


def _dask(workers: int) -> DaskExecutor:
    try:
        return DaskExecutor(None, workers=workers)
    except Exception as error:  # a cluster that cannot start here is an environment problem
        pytest.skip(f"no local dask cluster: {error}")


def _check_tasks(executor, handle) -> None:
    """Every task pickles to under a kilobyte, yet each worker computes with the whole value,
    one object per worker process for all its tasks (it was received once and kept)."""
    assert len(pickle.dumps((_seen, (handle, TASKS), {}))) < 1_000 < len(VALUE)
    results = [future.result() for future in
               [executor.submit(_seen, handle, index) for index in range(TASKS)]]
    assert [index for *_, index in results] == list(range(TASKS))
    assert {digest for _, _, digest, _ in results} == {DIGEST}
    objects: dict[int, set[int]] = {}
    for pid, identity, _, _ in results:
        objects.setdefault(pid, set()).add(identity)
    assert os.getpid() not in objects and all(len(ids) == 1 for ids in objects.values())


def test_a_process_pool_receives_a_shared_value_once_at_its_start() -> None:
    pool = make_executor("process", workers=2)
    try:
        handle = share(pool, VALUE)
        assert handle == SharedValue(handle.key)  # the key alone, no payload
        _check_tasks(pool, handle)
    finally:
        abandon(pool)
    assert not multiprocessing.active_children()


def test_a_value_shared_after_the_pool_started_travels_with_each_task() -> None:
    """The fallback: the workers started before the value existed, so each task carries it
    pickled; each worker still unpickles it once and keeps it."""
    pool = ProcessPool(max_workers=2)
    try:
        assert pool.submit(os.getpid).result() != os.getpid()
        handle = pool.share(VALUE)
        assert handle.payload is not None and pickle.loads(handle.payload) == VALUE
        results = [future.result() for future in
                   [pool.submit(_seen, handle, index) for index in range(TASKS)]]
        assert {digest for _, _, digest, _ in results} == {DIGEST}
        assert len({(pid, identity) for pid, identity, _, _ in results}) <= 2
    finally:
        abandon(pool)


def test_a_key_no_worker_received_is_a_clear_error() -> None:
    pool = ProcessPool(max_workers=1)
    try:
        with pytest.raises(RuntimeError, match="is not on worker process"):
            pool.submit(_seen, SharedValue("never-shared"), 0).result()
    finally:
        abandon(pool)


def test_a_dask_cluster_receives_a_shared_value_once_per_worker() -> None:
    dask = _dask(2)
    try:
        handle = share(dask, VALUE)
        assert handle == SharedValue(handle.key)
        assert list(dask.client.run(_holds, handle.key).values()) == [True, True]
        _check_tasks(dask, handle)
    finally:
        abandon(dask)


def test_a_dask_worker_that_joins_later_receives_the_value_at_its_start() -> None:
    dask = _dask(1)
    try:
        handle = share(dask, VALUE)
        dask.client.cluster.scale(2)
        dask.client.wait_for_workers(2, timeout=120)
        assert list(dask.client.run(_holds, handle.key).values()) == [True, True]
    finally:
        abandon(dask)


def test_a_remote_clusters_workers_drop_the_value_when_the_executor_ends() -> None:
    """On a cluster the executor did not start (reached by its address), ending the executor
    unregisters its plugin, and every worker lets the value go."""
    try:
        import dask
        from distributed import Client, LocalCluster

        with dask.config.set({MALLOC_TRIM_KEY: None}):  # leaves this process's variables alone
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
    except Exception as error:  # a cluster that cannot start here is an environment problem
        pytest.skip(f"no local dask cluster: {error}")
    with cluster, Client(cluster) as observer:
        remote = DaskExecutor(cluster.scheduler_address)
        try:
            handle = share(remote, VALUE)
            _check_tasks(remote, handle)
        finally:
            abandon(remote)
        assert list(observer.run(_holds, handle.key).values()) == [False, False]


@pytest.mark.parametrize("spec", ["process", "dask"])
def test_pv_tasks_carry_boxes_not_the_evaluation(spec: str) -> None:
    """PV's evaluation (network and population) reaches the workers once: a task's arguments
    hold its boxes and the evaluation's key, and the arrays come back bit for bit as the same
    tasks give in-process. (Not as one in-process call on the whole batch: on an AVX-512
    Xeon a bound of box 61 differed by one ulp between a call on 64 boxes and one on its
    task's 3, the kernels' blocking following the batch's size; both are sound.)"""
    engine = small_engine()
    rng = np.random.default_rng(2)
    lo = np.column_stack([rng.integers(0, 2, 64), rng.integers(0, 50, 64),
                          rng.integers(18, 50, 64)]).astype(float)
    hi = lo + np.column_stack([np.zeros(64), rng.integers(0, 50, 64), rng.integers(0, 40, 64)])
    executor = _dask(2) if spec == "dask" else make_executor(spec, workers=2)
    try:
        evaluate = DistributedEvaluation(engine.evaluation, executor, 2, 8)
        assert len(pickle.dumps(evaluate.shared)) < 200 < len(pickle.dumps(engine.evaluation))
        pending = evaluate.submit(lo, hi, "crown")
        assert len(pending.futures) > 2
        remote = pending.result()
    finally:
        evaluate.close()
        abandon(executor)
    tasks = [engine.evaluation(lo[rows], hi[rows], "crown") for rows in task_parts(64, 2, 8)]
    local = [np.concatenate(arrays) for arrays in zip(*tasks, strict=True)]
    for theirs, ours in zip(remote[:-1], local[:-1], strict=True):  # the last: CPU seconds
        np.testing.assert_array_equal(theirs, ours)


def test_a_local_dask_clusters_workers_keep_glibcs_dynamic_mmap_threshold() -> None:
    """Dask's nanny would start them with ``MALLOC_TRIM_THRESHOLD_`` set (which turns the
    dynamic threshold off and tripled PV's CPU per box); a variable the caller set itself
    would still reach them."""
    ours = os.environ.get("MALLOC_TRIM_THRESHOLD_")  # a nanny also sets it here when it spawns
    dask = _dask(2)
    try:
        seen = dask.client.run(os.environ.get, "MALLOC_TRIM_THRESHOLD_")
    finally:
        abandon(dask)
    assert list(seen.values()) == [ours] * 2
