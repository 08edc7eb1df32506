"""The in-process background thread PV waits for only until its deadline
(:class:`verifier.executor.BackgroundThread`): its work runs in order off the caller's
thread, results and exceptions reach the futures, a work that gives up cancels its future
(waking the caller), and a caller can stop waiting while the work runs on."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from concurrent.futures import wait

import pytest

from verifier.executor import BackgroundThread


def test_work_runs_in_order_off_the_callers_thread() -> None:
    background = BackgroundThread()
    order: list[int] = []
    caller = threading.get_ident()

    def work(index: int) -> int:
        order.append(index)
        return threading.get_ident()

    futures = [background.run(lambda index=index: work(index)) for index in range(5)]
    threads = {future.result(timeout=10.0) for future in futures}
    background.close()
    assert order == list(range(5))
    assert len(threads) == 1 and caller not in threads


def test_an_exception_reaches_the_future_and_the_thread_goes_on() -> None:
    background = BackgroundThread()

    def fail() -> int:
        raise ValueError("bad batch")

    failed = background.run(fail)
    after = background.run(lambda: 7)
    with pytest.raises(ValueError, match="bad batch"):
        failed.result(timeout=10.0)
    assert after.result(timeout=10.0) == 7
    background.close()


def test_work_that_gives_up_cancels_its_future_and_wakes_the_waiting_caller() -> None:
    background = BackgroundThread()
    gave_up = background.run(lambda: None)
    started = time.perf_counter()
    done, not_done = wait([gave_up], timeout=30.0)
    assert time.perf_counter() - started < 10.0
    assert gave_up in done and not not_done and gave_up.cancelled()
    background.close()


def test_a_caller_walks_away_from_running_work_and_the_process_exits_after_it() -> None:
    """The caller stops waiting at its timeout; the process's exit waits for the running
    work (torch aborts a process whose daemon thread is inside it at exit) and exits 0."""
    program = (
        "import time\n"
        "from concurrent.futures import wait\n"
        "from verifier.executor import BackgroundThread\n"
        "background = BackgroundThread()\n"
        "future = background.run(lambda: time.sleep(2.0) or 1)\n"
        "done, _ = wait([future], timeout=0.2)\n"
        "background.close()\n"
        "print('walked away' if not done else 'waited', flush=True)\n"
    )
    started = time.perf_counter()
    finished = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                              timeout=60.0, check=True)
    assert finished.stdout.strip() == "walked away"
    assert time.perf_counter() - started >= 2.0
