"""A Dask scheduler that goes away during a PV run: the run ends at once with the bounds it
reached, verdict unknown and ``stopped_by == "executor_lost"``, and ending the executor
neither raises nor waits for the connect timeout (it used to raise ``OSError`` after 30 s,
losing the run's result). On a real scheduler and worker started as processes. A scheduler
that cannot be reached at the start is a clear input error naming its address, and exact
WMI, which needs every task, a clear error saying so."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Executor

import pytest
from small_pv import small_engine

from verifier.pv import PVSettings

pytest.importorskip("distributed")

BUDGET_S = 60.0
START_S = 60.0
CONNECT_TIMEOUT_S = 30.0  # distributed's default, the client's reconnection window


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + START_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not start within {START_S} s")
        time.sleep(0.2)


@pytest.fixture
def remote_cluster() -> Iterator[tuple[str, subprocess.Popen]]:
    """A scheduler and one single-threaded worker, each its own process (as on a cluster the
    run did not start); yields the address and the scheduler's process."""
    from distributed import Client

    address = f"tcp://127.0.0.1:{_free_port()}"
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", address.rsplit(":", 1)[1], "--no-dashboard"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1",
         "--nthreads", "1", "--no-dashboard", "--death-timeout", "30"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with Client(address, timeout=START_S) as observer:
            _wait_for(lambda: len(observer.scheduler_info()["workers"]) == 1, "the worker")
        yield address, scheduler
    finally:
        for process in (worker, scheduler):
            process.kill()
            process.wait()


def _engine(address: str):
    """The small engine on the cluster at ``address``, two workers' tasks (with one worker a
    run bounds its rounds in-process)."""
    return small_engine(PVSettings(executor=f"dask={address}", workers=2, timeout_s=BUDGET_S,
                                   batch_size=64), network_seed=3)
def test_a_lost_scheduler_ends_the_run_with_its_bounds(remote_cluster) -> None:
    address, scheduler = remote_cluster
    engine = _engine(address)
    reports = []

    def kill_the_scheduler_at_the_first_report(report) -> None:
        reports.append(report)
        if len(reports) == 1:
            scheduler.kill()

    started = time.monotonic()
    with pytest.warns(UserWarning, match="dask scheduler"):
        result = engine.run(kill_the_scheduler_at_the_first_report)
    took = time.monotonic() - started
    assert result.stopped_by == "executor_lost"
    assert result.verdict == "unknown"
    assert took < BUDGET_S / 2  # neither the budget nor a 30-s connect timeout was waited for
    last = reports[-1]
    assert result.probabilities == last.probabilities  # the bounds reached, as last reported
    for low, high in result.probabilities.values():
        assert 0.0 <= low <= high <= 1.0


def _wait_for_the_loss(client) -> None:
    """Until ``client`` has noticed that its scheduler is gone (it is then reconnecting)."""
    _wait_for(lambda: client.status != "running", "the client's loss")


def test_a_round_submitted_after_the_loss_does_not_wait_for_the_connect_timeout(
        remote_cluster) -> None:
    """A round submitted once the client knows its scheduler is gone stays pending for the
    client's reconnection window (the connect timeout, 30 s by default) before it is
    cancelled: the run ends at once all the same."""
    from distributed import default_client

    address, scheduler = remote_cluster
    engine = _engine(address)
    reports = []

    def kill_the_scheduler_and_wait_for_the_loss(report) -> None:
        reports.append(report)
        if len(reports) == 1:
            scheduler.kill()
            _wait_for_the_loss(default_client())

    started = time.monotonic()
    with pytest.warns(UserWarning, match="dask scheduler"):
        result = engine.run(kill_the_scheduler_and_wait_for_the_loss)
    assert result.stopped_by == "executor_lost"
    assert time.monotonic() - started < CONNECT_TIMEOUT_S / 2
    assert result.probabilities == reports[-1].probabilities


def test_an_unreachable_scheduler_is_a_clear_input_error() -> None:
    """Not an internal error after the connect timeout: the address is named."""
    import dask

    from verifier.errors import CertgateInputError
    from verifier.executor import make_executor

    address = f"tcp://127.0.0.1:{_free_port()}"  # nobody listens there
    with (dask.config.set({"distributed.comm.timeouts.connect": "1s"}),
          pytest.raises(CertgateInputError, match=f"cannot reach the Dask scheduler at {address}")):
        make_executor(f"dask={address}")


def test_a_lost_scheduler_ends_a_causal_run_with_the_shares_reached(remote_cluster) -> None:
    """The chunks the lost client cancelled count as unfinished: the shares still tile the
    query, and the biased-share interval still holds the complete run's."""
    from pipeline_steps.progress import ChunkCounter
    from tests.causal_nets import random_network as causal_network
    from verifier.causal import CausalSettings, build_problem, certify_causal_fairness
    from verifier.executor import DaskExecutor

    address, scheduler = remote_cluster
    network = causal_network(4, [6, 6], seed=6)
    problem = build_problem(network, ["x3"], onehot_groups=[["x1", "x2"]], split_values=[0.5])
    settings = CausalSettings(max_unstable=6, timeout_s=BUDGET_S, target_width=0.02,
                              chunk_size=8)
    complete = certify_causal_fairness(problem, settings)
    executor = ChunkCounter(DaskExecutor(address), lambda *chunk: scheduler.kill())
    started = time.monotonic()
    with pytest.warns(UserWarning, match="dask scheduler"):
        try:
            lost = certify_causal_fairness(problem, settings, executor)
        finally:
            executor.shutdown()
    assert lost.details["stopped_by"] == "executor_lost"
    assert "stopped_by" not in complete.details
    assert time.monotonic() - started < BUDGET_S / 2
    details = lost.details
    low, high = lost.bounds["biased_share"]
    assert (details["fair_fraction"] + low + details["witnessed_fraction"]
            + details["refining_fraction"] + details["excluded_fraction"]
            == pytest.approx(1.0))
    complete_low, complete_high = complete.bounds["biased_share"]
    assert low <= complete_low and complete_high <= high


class _LosesTheSchedulerBeforeTheSecondRound(Executor):
    """Hands every task to ``inner``; before the second task (the root's chunk is the first
    round) it kills ``scheduler`` and waits until ``client`` has noticed, so that the next
    round is submitted once the loss is known."""

    def __init__(self, inner: Executor, scheduler: subprocess.Popen, client) -> None:
        self.inner = inner
        self.scheduler = scheduler
        self.client = client
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        if self.submitted == 2:
            self.scheduler.kill()
            _wait_for_the_loss(self.client)
        return self.inner.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.inner.shutdown(wait=wait, cancel_futures=cancel_futures)


def test_a_causal_round_submitted_after_the_loss_does_not_wait_for_the_connect_timeout(
        remote_cluster) -> None:
    """The scheduler dies between the root's round and the next, and the client knows it
    when that round is submitted: the run ends with the shares reached, not 30 s later (the
    executor is the command line's, a chunk counter over the Dask client, seen through one
    more wrapper)."""
    from pipeline_steps.progress import ChunkCounter
    from tests.causal_nets import random_network as causal_network
    from verifier.causal import CausalSettings, build_problem, certify_causal_fairness
    from verifier.executor import DaskExecutor

    address, scheduler = remote_cluster
    problem = build_problem(causal_network(4, [6, 6], seed=6), ["x3"],
                            onehot_groups=[["x1", "x2"]], split_values=[0.5])
    settings = CausalSettings(max_unstable=6, timeout_s=BUDGET_S, target_width=0.02,
                              chunk_size=8)
    dask_executor = DaskExecutor(address)
    chunks = []
    executor = _LosesTheSchedulerBeforeTheSecondRound(
        ChunkCounter(dask_executor, lambda *chunk: chunks.append(chunk)), scheduler,
        dask_executor.client)
    started = time.monotonic()
    with pytest.warns(UserWarning, match="dask scheduler"):
        try:
            lost = certify_causal_fairness(problem, settings, executor)
        finally:
            executor.shutdown()
    assert time.monotonic() - started < CONNECT_TIMEOUT_S / 2
    assert lost.details["stopped_by"] == "executor_lost"
    assert len(chunks) == 1 and lost.cost["analysed_partitions"] == 1.0  # the root alone
    details = lost.details
    low, _ = lost.bounds["biased_share"]
    assert (details["fair_fraction"] + low + details["witnessed_fraction"]
            + details["refining_fraction"] + details["excluded_fraction"]
            == pytest.approx(1.0))


def test_exact_wmi_on_a_lost_scheduler_is_a_clear_error(remote_cluster) -> None:
    """Exact WMI (no deadline) needs every root's mass: a lost executor is an
    :class:`ExecutorLostError` saying so and what to do, not an internal ``CancelledError``;
    the CLI prints it as one line (exit code 2)."""
    import dask
    import numpy as np

    from pipeline_steps.cli import _is_input_error
    from verifier.errors import ExecutorLostError
    from verifier.executor import DaskExecutor
    from verifier.network import Layer, Network
    from verifier.population import Factor, Product, Uniform
    from verifier.wmi import equivalence

    address, scheduler = remote_cluster
    network = Network([Layer(np.array([[1.0, -1.0], [0.5, 2.0]]), np.zeros(2), "relu"),
                       Layer(np.array([[1.0, -1.0]]), np.array([0.1]))])
    surrogate = Network([Layer(np.array([[1.0, -1.0]]), np.array([0.0]))])
    with dask.config.set({"distributed.comm.timeouts.connect": "3s"}):  # the client's
        executor = DaskExecutor(address)  # reconnection window, 30 s by default
    try:
        scheduler.kill()
        scheduler.wait()
        _wait_for(lambda: executor.client.status != "running", "the client's loss")
        with pytest.raises(ExecutorLostError, match="give a timeout") as raised:
            equivalence(network, surrogate, Product(factors=[
                Factor(columns=[f"x{i}"], distribution=Uniform(lower=0.0, upper=1.0))
                for i in range(2)]), executor=executor)
    finally:
        with pytest.warns(UserWarning, match="dask scheduler"):
            executor.shutdown()
    assert _is_input_error(raised.value)
