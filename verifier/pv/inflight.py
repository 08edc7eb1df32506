"""Rounds of PV whose boxes are being bounded while the loop records the previous round.

A round's chosen boxes leave the pool when the round starts and their children join it when
the round is collected; in between, the parents still stand for their part of the input
space, so their linear credits keep counting (sound: each point of the input space lies in
exactly one box that is open in the pool, in flight, or decided) and their estimates keep
informing the choice of the next boxes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field

import numpy as np

from verifier.executor import wait_while_running
from verifier.numerics import sum_lower, sum_upper
from verifier.pv.boxpool import Boxes


@dataclass
class Round:
    """The chosen boxes of one round, the calls that wait for their successors, the
    futures of the tasks bounding them and when the round started
    (:func:`time.perf_counter`)."""

    parents: Boxes
    parts: list[Callable[[], Boxes]]
    futures: list[Future] = field(default_factory=list)
    started: float = 0.0

    def wait(self, timeout: float | None, executor: Executor) -> bool:
        """Wait up to ``timeout`` seconds (None: for ever) for the round's tasks on
        ``executor``, or until a stop is requested (:mod:`verifier.stop_request`) or the
        executor can run no more (:func:`verifier.executor.running`: a Dask client that lost
        its scheduler); whether they all ended with their results (a cancelled task, e.g. an
        in-process batch cut at its deadline, did not)."""
        if wait_while_running(self.futures, timeout, executor):
            return False
        return not any(future.cancelled() for future in self.futures)

    def collect(self) -> Boxes:
        """Wait for the round's boxes: the parents' children and decided points."""
        boxes = [part() for part in self.parts]
        new = boxes[0]
        for part in boxes[1:]:
            new = new.extended(part)
        return new


class RoundsInFlight:
    """The rounds started and not yet collected, oldest first."""

    def __init__(self) -> None:
        self.rounds: deque[Round] = deque()

    def __len__(self) -> int:
        return len(self.rounds)

    @property
    def boxes(self) -> int:
        """Chosen boxes in flight."""
        return sum(r.parents.lo.shape[0] for r in self.rounds)

    def start(self, started: Round) -> None:
        self.rounds.append(started)

    @property
    def oldest(self) -> Round:
        return self.rounds[0]

    def collect_oldest(self) -> Boxes:
        return self.rounds.popleft().collect()

    def credits(self, events: int) -> tuple[np.ndarray, np.ndarray]:
        """Lower bounds of the sums of the in-flight parents' linear credits, ``(events,)``
        each (:func:`verifier.numerics.sum_lower` of a float sum of ``n`` non-negative terms)."""
        credit_true, credit_false = np.zeros(events), np.zeros(events)
        count = 0
        for started in self.rounds:
            credit_true = credit_true + started.parents.credit_true.sum(axis=0)
            credit_false = credit_false + started.parents.credit_false.sum(axis=0)
            count += started.parents.lo.shape[0] + 1
        return sum_lower(credit_true, count), sum_lower(credit_false, count)

    def pending_mass(self, events: int) -> np.ndarray:
        """Upper bounds of the sums of the in-flight parents' upper masses, per event over
        the parents where it is pending (see :meth:`verifier.pv.boxpool.BoxPool.pending_mass`)."""
        total = np.zeros(events)
        count = 0
        for started in self.rounds:
            total = total + started.parents.mass_hi @ started.parents.pending
            count += started.parents.lo.shape[0] + 1
        return sum_upper(total, count)

    def open_estimate(self, events: int) -> np.ndarray:
        """The parents' estimated uncredited mass where each event holds (not a bound)."""
        estimate = np.zeros(events)
        for started in self.rounds:
            estimate = estimate + started.parents.open_true.sum(axis=0)
        return estimate
