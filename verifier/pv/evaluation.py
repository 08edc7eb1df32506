"""The work PV does on every new batch of boxes — box masses and atom bounds — in one
picklable object, so that a batch can be cut into tasks for any
:class:`concurrent.futures.Executor` (in-process, a process pool, Dask).

The object (about 1 MB for a 102-column network and population model) reaches each worker
once per run (:func:`verifier.executor.share`); a task carries only its boxes, and a worker
bounds with one torch thread (the workers already occupy the cores). The results are
concatenated in batch order, so the branch and bound is the same whichever executor runs it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass

import numpy as np

from verifier.arrays import torch_module
from verifier.executor import BackgroundThread, InProcessExecutor, share
from verifier.pv.atoms import AtomBounds, Known
from verifier.pv.credit import (
    ExcessFunction,
    WantedSides,
    linear_credit,
    open_pieces,
    true_share,
)
from verifier.pv.domain import MassFunction

TASKS_PER_WORKER = 4
CHUNK_SHARE = 0.5
"""In-process with a deadline, the largest share of the time left that a chunk is planned
to fill at the last chunk's time per box: the work left running after the deadline, if
the boxes turn costlier than planned, is at most one chunk."""


@dataclass
class BoxEvaluation:
    """Masses and atom bounds of boxes: ``(mass_lo, mass_hi, low, high, guide, signs,
    credit_true, credit_false, share, carried, cost)`` (see
    :meth:`AtomBounds.bounds_and_drive`, which also takes the call's ``crown_share``;
    ``guide`` per box and input, :meth:`AtomBounds.split_guide` of the atoms still
    undecided — computed here, so a worker returns a tenth of the per-atom arrays;
    ``known`` must hold on each box; the credits of :func:`verifier.pv.credit.linear_credit`
    on the ``wanted`` sides, zero without ``excess``; the estimated share of each box where
    each event holds, :func:`verifier.pv.credit.true_share`, or 0.5 without
    ``estimate_shares`` — only directed selection reads it; ``cost``, ``(B, 4)``:
    the CPU seconds of the call spread evenly over its boxes, column 0 the linear credit's,
    column 1 CROWN's tightening of hidden layers', column 2 the rest's, and in column 3 the
    share of the call's boxes it tightened — for :class:`verifier.pv.pace.CostPace`, never
    for a bound); ``carried`` (before ``cost``), the bounds of the last hidden layer the
    boxes' children may carry. ``given_mass_hi``: per box, NaN where the masses are
    computed here, else an upper bound of the box's mass that stands in for it (the caller
    derives the box's enclosure itself, :class:`verifier.pv.engine.Complement`; ``mass_lo``
    is 0 there)."""

    masses: MassFunction
    atoms: AtomBounds
    excess: ExcessFunction | None = None
    estimate_shares: bool = True

    def __call__(
        self, lo: np.ndarray, hi: np.ndarray, method: str, known: Known | None = None,
        wanted: WantedSides | None = None, crown_share: float = 1.0,
        given_mass_hi: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        started = time.process_time()
        if given_mass_hi is None:
            mass_lo, mass_hi = self.masses(lo, hi)
        else:
            own = np.isnan(given_mass_hi)
            mass_lo, mass_hi = np.zeros(lo.shape[0]), np.where(own, 0.0, given_mass_hi)
            if own.any():
                mass_lo[own], mass_hi[own] = self.masses(lo[own], hi[own])
        low, high, atom_drive, signed, signs, (crown_s, crowned), lines, carried = (
            self.atoms.bounds_and_drive(
                lo, hi, method, known, crown_share,
                None if wanted is None else (wanted.true, wanted.false)))
        guide = self.atoms.split_guide(atom_drive, signed, self.atoms.undecided(low, high))
        crediting = time.process_time()
        pieces = None
        if self.excess is None:
            events = len(self.atoms.tracked.events)
            credit_true = credit_false = np.zeros((lo.shape[0], events))
        else:
            pieces = open_pieces(self.atoms, low, high, lines, lo, hi, mass_hi)
            credit_true, credit_false = linear_credit(
                self.atoms, low, high, lines, lo, hi, mass_hi, self.excess, wanted, pieces)
        credited = time.process_time()
        share = (true_share(self.atoms, low, high, lines, lo, hi, mass_hi, pieces)
                 if self.estimate_shares else np.full_like(credit_true, 0.5))
        ended = time.process_time()
        boxes = max(lo.shape[0], 1)
        cost = np.empty((lo.shape[0], 4))
        cost[:, 0] = (credited - crediting) / boxes
        cost[:, 1] = crown_s / boxes
        cost[:, 2] = ((crediting - started) + (ended - credited) - crown_s) / boxes
        cost[:, 3] = crowned / boxes
        return (mass_lo, mass_hi, low, high, guide, signs, credit_true, credit_false, share,
                carried, cost)


def _evaluate_task(
    evaluation: BoxEvaluation, lo: np.ndarray, hi: np.ndarray, method: str,
    known: Known | None, wanted: WantedSides | None, crown_share: float,
    given_mass_hi: np.ndarray | None = None,
) -> tuple[np.ndarray, ...]:
    """One task on a worker, with one torch thread (one worker per core: threads inside a
    worker only contend; PV bounds on torch, :mod:`verifier.bounds.backend`)."""
    torch = torch_module()
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    return evaluation(lo, hi, method, known, wanted, crown_share, given_mass_hi)


class DistributedEvaluation:
    """Runs a :class:`BoxEvaluation` on an executor, in one task per worker or, where each
    holds on average at least ``min_boxes`` boxes, up to :data:`TASKS_PER_WORKER` per worker
    (:func:`task_parts`): a worker that finishes early takes the next task, so a worker the
    machine's other jobs slow down holds the batch up less (ACAS Xu φ2, 30 s, 2 workers, load
    2.5: N4,3 261k → 365k boxes, N5,8 184k → 412k with one task per worker). More tasks than
    workers fall linearly in size (sizes ``k, k − 1, …, 1`` parts for ``k`` tasks), the
    largest first, so the last tasks, which one worker may still run while the others wait,
    are small (Adult-13 2×64, 120 s on 2 workers: 436k–455k boxes with equal tasks, 461k–483k
    falling). Each task pays the evaluation's fixed cost once (on Adult-13 1×16 a one-box call
    takes ~7.6 ms, spread over the masses, the bounds and the credit, besides ~0.1 ms per
    box), and small tasks cost more per box in the excess bound (its 128-box chunks, cut
    from the task's boxes sorted by the cells they reach, pad less in a larger task): hence
    the floor ``min_boxes`` on their average size.

    In-process a batch with a ``deadline`` runs on a
    :class:`~verifier.executor.BackgroundThread`, which the loop waits for only until the
    deadline, as it waits for a pool's round (DESIGN D20: a round that turns out slower than
    the pace planned — the machine's load, costlier boxes — is abandoned there). It runs in
    chunks, each planned to fill at most :data:`CHUNK_SHARE` of the time left at the last
    chunk's time per box (kept across batches; the first chunk of a run has ``min_boxes``
    boxes), so a batch with time to spare runs in one call and one near the deadline in
    chunks shrinking with the time left. No chunk starts once ``clock()`` has reached the
    deadline or when not one box fits (the batch's future is then cancelled: the round reads
    as unfinished), so an abandoned round leaves one chunk running in the background."""

    def __init__(
        self, evaluation: BoxEvaluation, executor: Executor, workers: int, min_boxes: int,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.evaluation = evaluation
        self.executor = executor
        self.local = isinstance(executor, InProcessExecutor) or workers <= 1
        self.workers = workers
        self.min_boxes = min_boxes
        self.clock = clock
        self.shared = None if self.local else share(executor, evaluation)
        self.box_seconds: float | None = None
        self.background = BackgroundThread()
        self.closed = False

    def submit(
        self, lo: np.ndarray, hi: np.ndarray, method: str, known: Known | None = None,
        wanted: WantedSides | None = None, deadline: float | None = None,
        crown_share: float = 1.0, given_mass_hi: np.ndarray | None = None,
    ) -> PendingEvaluation:
        """Start the evaluation of a batch and return at once (in-process: the work is done
        before it returns, up to ``deadline``, see the class); :meth:`PendingEvaluation.result`
        gives the evaluation's arrays for the whole batch once every future is done."""
        if self.local:
            if deadline is None:
                return PendingEvaluation([_done(self.evaluation(
                    lo, hi, method, known, wanted, crown_share, given_mass_hi))])
            return PendingEvaluation([self.background.run(functools.partial(
                self._chunks_until, lo, hi, method, known, wanted, deadline, crown_share,
                given_mass_hi))])
        # even a small batch goes to a worker (one torch thread there): torch's thread pool
        # in the caller stalls on a loaded machine (N4,3's first 230 boxes: 0.6 s with one
        # thread, 2.5-12.7 s with two at load 3)
        parts = task_parts(lo.shape[0], self.workers, self.min_boxes)
        return PendingEvaluation([
            self.executor.submit(
                _evaluate_task, self.shared, lo[p], hi[p], method,
                None if known is None else known.select(p),
                None if wanted is None else wanted.select(p), crown_share,
                None if given_mass_hi is None else given_mass_hi[p],
            )
            for p in parts
        ])

    def _chunks_until(
        self, lo: np.ndarray, hi: np.ndarray, method: str, known: Known | None,
        wanted: WantedSides | None, deadline: float, crown_share: float,
        given_mass_hi: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...] | None:
        """In-process, the batch's evaluation in chunks that stop at the deadline (see the
        class); None if a chunk was not started because the deadline has passed or not one
        box fits."""
        results: list[tuple[np.ndarray, ...]] = []
        start, total = 0, lo.shape[0]
        while start < total:
            began = self.clock()
            size = self._chunk_size(total - start, deadline - began)
            if size < 1:
                return None
            p = np.arange(start, start + size)
            results.append(self.evaluation(
                lo[p], hi[p], method, None if known is None else known.select(p),
                None if wanted is None else wanted.select(p), crown_share,
                None if given_mass_hi is None else given_mass_hi[p]))
            start += size
            self.box_seconds = (self.clock() - began) / size
        return tuple(np.concatenate(arrays) for arrays in zip(*results, strict=True))

    def close(self) -> None:
        """End the in-process background thread: no chunk starts after this call (a run that
        stopped early, e.g. on an error or an interrupt, is not held up by its last batch)."""
        self.closed = True
        self.background.close()

    def _chunk_size(self, rest: int, left: float) -> int:
        """How many of the ``rest`` boxes the next in-process chunk bounds with ``left``
        seconds to the deadline (see the class): as many as the last chunk's time per box
        plans within :data:`CHUNK_SHARE` of the time left (``min_boxes`` before any chunk
        ran), 0 once the deadline has passed or :meth:`close` was called."""
        if left <= 0.0 or self.closed:
            return 0
        if self.box_seconds is None:
            return min(rest, max(self.min_boxes, 1))
        if self.box_seconds <= 0.0:
            return rest
        return min(rest, int(CHUNK_SHARE * left / self.box_seconds))


def task_parts(count: int, workers: int, min_boxes: int) -> list[np.ndarray]:
    """The rows of a batch of ``count`` boxes cut into a pool's tasks, in batch order: one
    per worker of equal size (when the batch holds a box for each), or up to
    :data:`TASKS_PER_WORKER` per worker where each holds on average at least ``min_boxes``
    boxes, those falling in size (``k, k − 1, …, 1`` parts for ``k`` tasks, see
    :class:`DistributedEvaluation`). Every row lies in exactly one part, and no part is
    empty unless the batch is (a falling part that rounds to no box is left out)."""
    tasks = min(TASKS_PER_WORKER * workers, count // max(min_boxes, 1))
    weights = (np.arange(tasks, 0, -1) if tasks > workers
               else np.ones(max(1, min(workers, count))))
    ends = np.round(np.cumsum(weights) / weights.sum() * count).astype(np.int64)
    parts = np.split(np.arange(count), ends[:-1])
    return [part for part in parts if part.size] or parts[:1]


class PendingEvaluation:
    """A batch's evaluation under way: the futures of its tasks, in batch order."""

    def __init__(self, futures: list[Future]) -> None:
        self.futures = futures

    def result(self) -> tuple[np.ndarray, ...]:
        """Wait for every task; the arrays of the whole batch, in batch order."""
        results = [future.result() for future in self.futures]
        return tuple(np.concatenate(arrays) for arrays in zip(*results, strict=True))


def _done(value: tuple[np.ndarray, ...]) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future
