"""A PV time budget is kept (DESIGN D20): rounds are sized to the time left, a round still
running at the deadline is abandoned, and a process pool's workers do not outlive the run.

The budget is checked on the time the engine itself reports (from the start of
:meth:`ProbabilityBranchAndBound.run`, the executor's creation included, to its return,
the workers' end included), not on the test process's wall time: the machine is shared.
The allowance beyond ``budget × 1.05`` is the run's own start-up, measured as the elapsed
time of a run with a zero budget (the executor's start and the root box's bounds, which any
run needs before it can report anything). Oracle for the intervals: exact enumeration of
the Adult-6 population (40-digit table probabilities, the class decided in rational
arithmetic where the float margin is within its rounding bound).
"""

from __future__ import annotations

import concurrent.futures
import functools
import multiprocessing
import os
import signal
import time

import numpy as np
import pytest
from adult_engine import needs_census

from benchmarks.adult_instances import ParityReference, build_instance, exact_reference
from pipeline_steps.cli.engine_signals import stop_engine_on_signals
from verifier.audits.probability import spec_network
from verifier.executor import DaskExecutor, InProcessExecutor, ProcessPool, abandon
from verifier.pv import PVProgress, PVResult, PVSettings, population_domain
from verifier.pv.atoms import Known
from verifier.pv.credit import WantedSides
from verifier.pv.engine import ProbabilityBranchAndBound
from verifier.pv.evaluation import BoxEvaluation, DistributedEvaluation
from verifier.pv.pace import MIN_ROUND_SHARE, PLANNED_SHARE, Pace
from verifier.spec import Names, demographic_parity

WIDE = (787, 69)
BUDGET_S = 4.0
SLACK = 1.05


@functools.cache
def _wide_adult_6() -> tuple[object, ParityReference]:
    instance = build_instance(6, WIDE, 7, epochs=1, cache_dir=None)
    return instance, exact_reference(instance)


def _engine(settings: PVSettings, **options: object) -> ProbabilityBranchAndBound:
    instance, reference = _wide_adult_6()
    names = Names.of(list(instance.columns), list(instance.network.output_names))
    # γ at the exact ratio (0.8643 for this seed): no run decides it. A quiet machine needed
    # about 17 s in-process and 13 s on two workers to exhaust the Adult-6 lattice
    # (2026-11-28); after the wide-layer rows box by box, 10.3 s and 11.3 s at load 2
    # (2026-11-30), and an 8-s run on an idle machine exhausted it. A 4-s run ends by its
    # budget with room for a machine twice as fast.
    spec = demographic_parity(names, protected=instance.protected,
                              privileged=instance.privileged,
                              favorable_class=instance.favorable_class, gamma=reference.ratio)
    masses, domain = population_domain(instance.population)
    return ProbabilityBranchAndBound(spec_network(instance.network, spec), spec, masses, domain,
                                     settings, instance.population.prob_excess_lower,
                                     **options)


def _contains(low: float, high: float, value: float, error: float) -> bool:
    return low <= value + error and value - error <= high


@needs_census
@pytest.mark.parametrize("executor", ["local", "process"])
def test_a_short_budget_on_slow_rounds_is_kept_with_sound_intervals(executor: str) -> None:
    workers = None if executor == "local" else 2
    start_up = _engine(PVSettings(timeout_s=0.0, executor=executor, workers=workers)).run()
    reports: list[PVProgress] = []
    result = _engine(PVSettings(timeout_s=BUDGET_S, executor=executor, workers=workers)).run(
        reports.append)
    _, reference = _wide_adult_6()
    assert result.stopped_by == "timeout"
    assert result.elapsed_s <= BUDGET_S * SLACK + start_up.elapsed_s, (
        f"{executor}: {result.elapsed_s:.2f} s for a {BUDGET_S} s budget "
        f"(start-up {start_up.elapsed_s:.2f} s)")
    assert len(reports) >= 3
    truth = {"p_unprivileged": reference.p_unprivileged,
             "p_privileged": reference.p_privileged}
    for name, value in truth.items():
        low, high = result.probabilities[name]
        assert _contains(low, high, value, reference.error), (name, low, high, value)
    assert _contains(*result.value, reference.ratio, reference.error * 1e3)
    assert not multiprocessing.active_children()


class _Clock:
    """The test's clock: it moves only when the evaluation below charges it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _ChargedEvaluation:
    """The engine's own evaluation, charging the test's clock ``fixed`` seconds per call
    plus ``per_box`` per box, ``slow_factor`` times that for calls that start at or after
    ``slow_from`` (a deliberately slow round: the machine's load rising late in a run).
    Records each call's start and boxes."""

    def __init__(self, evaluation: BoxEvaluation, clock: _Clock, fixed: float, per_box: float,
                 slow_from: float, slow_factor: float) -> None:
        self.evaluation, self.clock = evaluation, clock
        self.excess = evaluation.excess  # the engine reads whether credit is on
        self.masses = evaluation.masses  # and re-reads the masses of loose derived children
        self.fixed, self.per_box = fixed, per_box
        self.slow_from, self.slow_factor = slow_from, slow_factor
        self.calls: list[tuple[float, float, int]] = []

    def cost(self, start: float, boxes: int) -> float:
        factor = self.slow_factor if start >= self.slow_from else 1.0
        return factor * (self.fixed + self.per_box * boxes)

    def __call__(self, lo: np.ndarray, hi: np.ndarray, method: str,
                 known: Known | None = None, wanted: WantedSides | None = None,
                 crown_share: float = 1.0, given_mass_hi: np.ndarray | None = None,
                 ) -> tuple[np.ndarray, ...]:
        start = self.clock.now
        self.clock.now += self.cost(start, lo.shape[0])
        self.calls.append((start, self.clock.now, lo.shape[0]))
        return self.evaluation(lo, hi, method, known, wanted, crown_share, given_mass_hi)


CHARGED_BUDGET_S = 100.0
CHARGED_ROUND = 64
CHARGED_CHUNK = 16


def _charged_run(slow_from: float, slow_factor: float) -> tuple[PVResult, _ChargedEvaluation]:
    clock = _Clock()
    engine = _engine(PVSettings(timeout_s=CHARGED_BUDGET_S, batch_size=CHARGED_ROUND,
                                min_boxes_per_task=CHARGED_CHUNK), clock=clock)
    charged = _ChargedEvaluation(engine.evaluation, clock, fixed=0.2, per_box=0.1,
                                 slow_from=slow_from, slow_factor=slow_factor)
    engine.evaluation = charged  # type: ignore[assignment]
    return engine.run(), charged


@needs_census
def test_the_engine_stops_scheduling_when_a_round_no_longer_fits_the_time_left() -> None:
    """Every time the engine reads is the test's clock, which only the bounding work moves
    (0.2 s a call, 0.1 s a box): the budget is kept by the engine's own accounting, whatever
    the machine's load."""
    result, charged = _charged_run(slow_from=float("inf"), slow_factor=1.0)
    deadline = CHARGED_BUDGET_S
    start_up = charged.calls[0][1]  # the root box
    assert result.stopped_by == "timeout"
    assert result.iterations > 10
    assert result.elapsed_s <= CHARGED_BUDGET_S * SLACK + start_up
    # every chunk started and ended by the deadline: the rounds were sized to the time left
    assert all(end <= deadline for _, end, _ in charged.calls)
    # it stopped because not an eighth of a round fitted: a full round's cost per chosen box
    # is its two children's boxes and the fixed cost of its call (it runs in one chunk with
    # time to spare; a smaller last round costs more per box: the factor 1.5 covers that)
    children = 2 * CHARGED_ROUND
    cost_per_box = (children * charged.per_box + charged.fixed) / CHARGED_ROUND
    left = deadline - result.elapsed_s
    assert 0.0 <= PLANNED_SHARE * left < MIN_ROUND_SHARE * CHARGED_ROUND * cost_per_box * 1.5


class _SleepingEvaluation:
    """The engine's own evaluation, first sleeping ``per_box`` seconds per box, ten times
    that for calls that start ``slow_from`` seconds or more after the first call (the
    machine's load rising late in a run). Records each call's start, end and boxes."""

    def __init__(self, evaluation: BoxEvaluation, per_box: float, slow_from: float) -> None:
        self.evaluation = evaluation
        self.excess = evaluation.excess  # the engine reads whether credit is on
        self.masses = evaluation.masses  # and re-reads the masses of loose derived children
        self.per_box, self.slow_from = per_box, slow_from
        self.first: float | None = None
        self.calls: list[tuple[float, float, int]] = []

    def __call__(self, lo: np.ndarray, hi: np.ndarray, method: str,
                 known: Known | None = None, wanted: WantedSides | None = None,
                 crown_share: float = 1.0, given_mass_hi: np.ndarray | None = None,
                 ) -> tuple[np.ndarray, ...]:
        start = time.perf_counter()
        self.first = start if self.first is None else self.first
        slow = 10.0 if start - self.first >= self.slow_from else 1.0
        time.sleep(slow * self.per_box * lo.shape[0])
        result = self.evaluation(lo, hi, method, known, wanted, crown_share, given_mass_hi)
        self.calls.append((start - self.first, time.perf_counter() - self.first, lo.shape[0]))
        return result


SLEEPING_BUDGET_S = 4.0


@needs_census
def test_a_round_that_turns_slow_is_abandoned_at_the_deadline_in_process() -> None:
    """From 3 s on the bounding work costs ten times what the pace measured (10 ms a box
    instead of 1 ms, plus the bounds themselves). In-process the rounds run on a background
    thread, so the engine returns at its deadline with the bounds it had while the round
    that turned slow still runs, and no chunk starts after the deadline."""
    engine = _engine(PVSettings(timeout_s=SLEEPING_BUDGET_S, batch_size=CHARGED_ROUND,
                                min_boxes_per_task=CHARGED_CHUNK))
    sleeping = _SleepingEvaluation(engine.evaluation, per_box=1e-3,
                                   slow_from=0.75 * SLEEPING_BUDGET_S)
    engine.evaluation = sleeping  # type: ignore[assignment]
    result = engine.run()
    returned = len(sleeping.calls)
    root_s = sleeping.calls[0][1]  # the start-up: the root box's bounds
    assert result.stopped_by == "timeout"
    assert result.elapsed_s <= SLEEPING_BUDGET_S * SLACK + root_s
    time.sleep(SLEEPING_BUDGET_S)  # the abandoned chunk ends in the background
    assert len(sleeping.calls) > returned, "no chunk was still running at the return"
    slow = [call for call in sleeping.calls if call[0] >= 0.75 * SLEEPING_BUDGET_S]
    assert slow, "no round ran into the slow period"
    assert all(start < SLEEPING_BUDGET_S for start, _, _ in sleeping.calls)
    assert max(end for _, end, _ in sleeping.calls) > SLEEPING_BUDGET_S * SLACK + root_s
    low, high = result.value
    assert low <= high


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_abandon_ends_a_process_pool_without_waiting_for_its_running_task() -> None:
    pool = ProcessPool(max_workers=1)
    pool.submit(_sleep, 60.0)
    queued = pool.submit(_sleep, 60.0)
    time.sleep(0.5)
    before = time.perf_counter()
    abandon(pool)
    assert time.perf_counter() - before < 10.0
    # the queued task may already sit in the pool's call queue ("running"); its future ends
    # when the pool notices its terminated worker
    concurrent.futures.wait([queued], timeout=10.0)
    assert queued.cancelled() or queued.done()
    assert not multiprocessing.active_children()


def _ones_after(seconds: float, size: int) -> np.ndarray:
    time.sleep(seconds)
    return np.ones(size)


def test_abandon_ends_a_pool_whose_worker_died_while_sending_its_result() -> None:
    """Workers ended while they send 16-MB results leave a message cut short in the results
    pipe; the pool's manager thread must still end (before the fix it blocked reading the
    rest for ever — and the interpreter's exit with it, which joins that thread — and
    ``abandon`` waited :data:`~verifier.executor.WORKER_EXIT_S` for it: the first of these
    rounds already did). The moments of the abandon sweep the sending."""
    for delay in np.random.default_rng(1).uniform(0.0, 0.4, size=12):
        pool = ProcessPool(max_workers=2)
        concurrent.futures.wait([pool.submit(_ones_after, 0.0, 1) for _ in range(2)])
        for _ in range(12):
            pool.submit(_ones_after, 0.02, 2_000_000)
        manager = pool._executor_manager_thread
        time.sleep(delay)
        before = time.perf_counter()
        abandon(pool)
        assert time.perf_counter() - before < 2.0
        assert manager is not None and not manager.is_alive()
        assert not multiprocessing.active_children()


def _spin(seconds: float) -> float:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return seconds


@pytest.mark.parametrize("interrupted", [False, True])
def test_workers_leave_the_stop_signals_to_the_command(
        capfd: pytest.CaptureFixture[str], interrupted: bool) -> None:
    """Forked under the command's engine signal handlers, busy workers inherited them:
    ``abandon``'s SIGTERM made each say it was stopping with the bounds reached and go on, so
    ``abandon`` waited :data:`~verifier.executor.WORKER_EXIT_S` (5 s) for each before killing
    it; a SIGINT (a Ctrl-C reaches the whole process group) made each say the same."""
    with stop_engine_on_signals():
        pool = ProcessPool(max_workers=2)
        spinning = [pool.submit(_spin, 60.0) for _ in range(2)]
        time.sleep(2.0)
        workers = list(pool._processes.values())
        if interrupted:
            for worker in workers:
                os.kill(worker.pid, signal.SIGINT)
            time.sleep(0.5)
        assert all(worker.is_alive() for worker in workers)
        assert not any(future.done() for future in spinning)
        before = time.perf_counter()
        abandon(pool)
        assert time.perf_counter() - before < 2.0
    assert not multiprocessing.active_children()
    assert "stopping" not in capfd.readouterr().err


def test_abandon_ends_a_local_dask_cluster_without_waiting_for_its_running_tasks(
        capfd: pytest.CaptureFixture[str]) -> None:
    """A local Dask cluster's close asked each busy worker to stop and waited up to 4 s for
    its task (PV's 25-s runs ended at 28.3–28.5 s on 2 workers): ``abandon`` now ends two
    workers busy for a minute within a second, and their processes are gone. They started
    with SIGINT ignored: the Ctrl-C that reaches the whole process group neither ends them
    nor makes them print a ``KeyboardInterrupt`` each."""
    executor = DaskExecutor(None, 2)
    workers = list(executor._workers)
    busy = [executor.submit(_spin, 60.0) for _ in range(2)]
    time.sleep(2.0)
    for worker in workers:
        os.kill(worker.pid, signal.SIGINT)
    time.sleep(0.5)
    assert len(workers) == 2 and all(worker.is_running() for worker in workers)
    assert not any(future.done() for future in busy)
    before = time.perf_counter()
    abandon(executor)
    assert time.perf_counter() - before < 1.0
    assert not any(worker.is_running() and worker.status() != "zombie" for worker in workers)
    assert "KeyboardInterrupt" not in capfd.readouterr().err


def test_pace_plans_nothing_without_a_deadline_or_a_cost() -> None:
    assert Pace(None).size(4096, 0.0, False) == 4096
    pace = Pace(100.0)
    assert pace.size(4096, 0.0, False) == 4096


def test_pace_fits_a_round_into_the_time_left() -> None:
    pace = Pace(deadline=60.0)
    pace.collected(1000, started=0.0, now=10.0)  # 10 ms per box
    # 50 s left, of which PLANNED_SHARE are planned: 4,500 boxes, capped at the wanted 4,096
    assert pace.size(4096, 10.0, False) == 4096
    # 5 s left: 450 boxes
    assert pace.size(2048, 55.0, False) == int(PLANNED_SHARE * 5.0 / 0.01)
    # fewer than MIN_ROUND_SHARE of the boxes wanted fit: not started
    assert pace.size(4096, 59.0, False) == 0
    assert pace.size(200, 59.0, False) == int(PLANNED_SHARE * 1.0 / 0.01)
    assert int(MIN_ROUND_SHARE * 4096) > int(PLANNED_SHARE * 1.0 / 0.01)


def test_pace_plans_after_the_rounds_in_flight_and_on_the_costliest_recent_round() -> None:
    pace = Pace(deadline=100.0)
    pace.collected(1000, started=0.0, now=10.0)   # 10 ms per box
    pace.collected(1000, started=5.0, now=40.0)   # charged from the last collection: 30 ms
    pace.collected(1000, started=40.0, now=50.0)  # 10 ms
    assert pace.cost_per_box() == pytest.approx(0.03)
    pace.started(1000, now=50.0, in_flight=False)  # expected to end at 80 s
    # a second round in flight begins its work at 80 s: 0.9·50 − 30 = 15 s, 500 boxes
    assert pace.size(2048, 50.0, True) == 500
    assert pace.size(2048, 50.0, False) == 1500


@needs_census
def test_no_in_process_chunk_starts_after_the_evaluation_is_closed() -> None:
    """A run that ends early (an error, an interrupt) closes its evaluation; a batch it
    still submitted is cancelled without a box bounded."""
    engine = _engine(PVSettings(timeout_s=60.0))
    sleeping = _SleepingEvaluation(engine.evaluation, per_box=0.0, slow_from=float("inf"))
    evaluate = DistributedEvaluation(sleeping, InProcessExecutor(), 1, 16)
    lo, hi = engine.domain.lower[None, :], engine.domain.upper[None, :]
    assert not evaluate.submit(lo, hi, "ibp", deadline=time.perf_counter() + 60.0
                               ).futures[0].exception(timeout=30.0)
    evaluate.close()
    cut = evaluate.submit(lo, hi, "ibp", deadline=time.perf_counter() + 60.0).futures[0]
    concurrent.futures.wait([cut], timeout=30.0)
    assert cut.cancelled()
    assert len(sleeping.calls) == 1
    evaluate.close()
