"""The workers certgate starts keep the memory their tasks free (verifier.worker_malloc): a
block freed by one task is reused by the next without faulting its pages in again."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap

import pytest

from verifier.executor import DaskExecutor, ProcessPool, abandon
from verifier.worker_malloc import MALLOC_ENVIRON, MMAP_THRESHOLD

BLOCK = 16 << 20
"""A block above glibc's default mmap threshold (128 kB) and below :data:`MMAP_THRESHOLD`."""
PAGES = BLOCK // resource.getpagesize()

FILLS = textwrap.dedent("""
    import json, resource, sys
    from verifier.worker_malloc import keep_freed_memory
    settled = keep_freed_memory() if sys.argv[1] == "1" else None
    faults = []
    for _ in range(int(sys.argv[2])):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        block = b"\\x01" * int(sys.argv[3])
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        del block
    print(json.dumps([settled, faults]))
""")


def _faults_of_filled_blocks(blocks: int) -> list[int]:
    """Minor page faults of each of ``blocks`` successive fills of a :data:`BLOCK`-byte
    block, each freed before the next (bytes: allocated by malloc and written in full)."""
    faults = []
    for _ in range(blocks):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        block = b"\x01" * BLOCK
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        del block
    return faults


def _fresh_interpreter(settle: bool, blocks: int) -> tuple[bool | None, list[int]]:
    """:func:`_faults_of_filled_blocks` in a new interpreter (glibc's malloc as it starts),
    after :func:`keep_freed_memory` if ``settle``; and what that call returned."""
    completed = subprocess.run(
        [sys.executable, "-c", FILLS, "1" if settle else "0", str(blocks), str(BLOCK)],
        capture_output=True, text=True, check=True, timeout=120)
    settled, faults = json.loads(completed.stdout)
    return settled, faults


def _has_mallopt() -> bool:
    return bool(_fresh_interpreter(True, 0)[0])


def test_the_threshold_holds_such_a_block() -> None:
    assert BLOCK < MMAP_THRESHOLD


def test_without_the_setting_each_fill_faults_its_pages_in() -> None:
    """The oracle the other tests are read against: with glibc's defaults the first fills of
    a freed block fault (nearly) every page in again (a fresh mapping, then fresh heap)."""
    if not _has_mallopt():
        pytest.skip("the C library has no mallopt")
    settled, faults = _fresh_interpreter(False, 2)
    assert settled is None
    assert all(count >= PAGES // 2 for count in faults), faults


def test_with_the_setting_a_freed_block_is_reused_without_faults() -> None:
    settled, faults = _fresh_interpreter(True, 3)
    if not settled:
        pytest.skip("the C library has no mallopt")
    assert faults[0] >= PAGES // 2, faults
    assert all(count < PAGES // 20 for count in faults[1:]), faults


def test_a_process_pool_worker_reuses_what_its_last_task_freed() -> None:
    """Two tasks on one worker: the second fills the block the first freed without faulting
    its pages in."""
    if not _has_mallopt():
        pytest.skip("the C library has no mallopt")
    pool = ProcessPool(max_workers=1)
    try:
        pool.submit(_faults_of_filled_blocks, 1).result(timeout=60)
        second = pool.submit(_faults_of_filled_blocks, 2).result(timeout=60)
    finally:
        abandon(pool)
    assert all(count < PAGES // 20 for count in second), second


def _malloc_environ() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in MALLOC_ENVIRON}


def test_a_local_dask_clusters_worker_starts_with_the_settings_and_reuses_freed_blocks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A local cluster's workers are spawned by its nannies, so glibc reads the settings from
    their environment at their start; the second task refills the first's block without
    faults."""
    if not _has_mallopt():
        pytest.skip("the C library has no mallopt")
    # distributed's own default, as a cluster started elsewhere in this process leaves it
    # here: a nanny prefers the process's variable to its configuration's value
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    before = dict(os.environ)
    try:
        dask = DaskExecutor(None, workers=1)
    except Exception as error:  # a cluster that cannot start here is an environment problem
        pytest.skip(f"no local dask cluster: {error}")
    # the nannies wrote their environment into this process's os.environ to spawn the
    # workers; the caller's own environment (and its later children's) is left as it was
    assert dict(os.environ) == before
    try:
        environ = dask.submit(_malloc_environ).result(timeout=120)
        dask.submit(_faults_of_filled_blocks, 1).result(timeout=120)
        second = dask.submit(_faults_of_filled_blocks, 2).result(timeout=120)
    finally:
        abandon(dask)
    assert environ == {name: str(value) for name, value in MALLOC_ENVIRON.items()}
    assert all(count < PAGES // 20 for count in second), second
