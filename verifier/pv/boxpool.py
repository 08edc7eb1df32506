"""The open boxes of a branch and bound: per-box records in preallocated arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPS = float(np.finfo(np.float64).eps)


@dataclass
class Boxes:
    """A batch of boxes and what PV keeps per box: masses, undecided events (``pending``),
    split depth, undecided atoms, per-input drive, the signed input coefficients that order a
    one-hot group's categories for splitting, the events' three-valued truth, what its
    children inherit (the signs of the network's kink neurons and the atoms' bounds), the
    linear credit of every event and of its complement (zero where not pending), and its
    priority: the largest share of its mass that no bound has credited to a pending event
    or its complement."""

    lo: np.ndarray
    hi: np.ndarray
    mass_lo: np.ndarray
    mass_hi: np.ndarray
    pending: np.ndarray
    depth: np.ndarray
    atoms: np.ndarray
    drive: np.ndarray
    order: np.ndarray
    truth: np.ndarray
    signs: np.ndarray
    low: np.ndarray
    high: np.ndarray
    credit_true: np.ndarray
    credit_false: np.ndarray
    priority: np.ndarray

    def select(self, rows: np.ndarray) -> Boxes:
        return Boxes(*(getattr(self, name)[rows] for name in BOX_FIELDS))

    def extended(self, other: Boxes) -> Boxes:
        """These boxes followed by ``other``'s."""
        return Boxes(*(
            np.concatenate([getattr(self, name), getattr(other, name)]) for name in BOX_FIELDS
        ))


BOX_FIELDS = (
    "lo", "hi", "mass_lo", "mass_hi", "pending", "depth", "atoms", "drive", "order", "truth",
    "signs", "low", "high", "credit_true", "credit_false", "priority",
)


class BoxPool:
    """Open boxes in preallocated arrays; freed slots are reused, capacity doubles."""

    def __init__(self) -> None:
        self.store: Boxes | None = None
        self.alive = np.zeros(0, dtype=bool)

    @property
    def size(self) -> int:
        return int(self.alive.sum())

    def add(self, boxes: Boxes) -> None:
        count = boxes.lo.shape[0]
        if count == 0:
            return
        if self.store is None:
            self.store = boxes.select(np.arange(count))
            self.alive = np.ones(count, dtype=bool)
            return
        free = np.flatnonzero(~self.alive)
        if free.size < count:
            grow = max(count - free.size, self.alive.size)
            for name in BOX_FIELDS:
                array = getattr(self.store, name)
                padding = np.zeros((grow, *array.shape[1:]), dtype=array.dtype)
                setattr(self.store, name, np.concatenate([array, padding]))
            self.alive = np.concatenate([self.alive, np.zeros(grow, dtype=bool)])
            free = np.flatnonzero(~self.alive)
        slots = free[:count]
        for name in BOX_FIELDS:
            getattr(self.store, name)[slots] = getattr(boxes, name)
        self.alive[slots] = True

    def credits(self, events: int) -> tuple[np.ndarray, np.ndarray]:
        """Lower bounds of the sums over the open boxes of the linear credits, ``(events,)``
        each. Freed slots hold zero credit, so the whole store is summed in one pass; a float
        sum of ``n`` non-negative terms is within ``(n − 1)·ε`` of the exact sum, relatively,
        so the sums are scaled down by ``2·n·ε``."""
        if self.store is None:
            return np.zeros(events), np.zeros(events)
        shrink = 1.0 - 2.0 * self.alive.size * EPS
        return (self.store.credit_true.sum(axis=0) * shrink,
                self.store.credit_false.sum(axis=0) * shrink)

    def pop_heaviest(self, count: int) -> Boxes:
        """Remove and return the ``count`` open boxes of largest priority (SelectProb on the
        mass that no linear credit covers)."""
        assert self.store is not None
        alive = np.flatnonzero(self.alive)
        if count < alive.size:
            heaviest = np.argpartition(-self.store.priority[alive], count - 1)[:count]
            alive = alive[heaviest]
        self.alive[alive] = False
        chosen = self.store.select(alive)
        self.store.credit_true[alive] = 0.0
        self.store.credit_false[alive] = 0.0
        return chosen
