"""The open boxes of a branch and bound: per-box records in preallocated arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPS = float(np.finfo(np.float64).eps)
# the rest of a directed batch goes by plain priority: a wrong guess of the verdict then only
# slows the other side down, and every box stays reachable (completeness)
DIRECTED_SHARE = 0.75


@dataclass
class Boxes:
    """A batch of boxes and what PV keeps per box: masses, undecided events (``pending``),
    split depth, undecided atoms, per-input drive, the signed input coefficients that order a
    one-hot group's categories for splitting, the events' three-valued truth, what its
    children inherit (the signs of the network's kink neurons and the atoms' bounds), the
    linear credit of every event and of its complement (zero where not pending), its
    priority: the largest share of its mass that no bound has credited to a pending event
    or its complement, and per event the estimated parts of that uncredited mass where the
    event holds and where it fails (``open_true``/``open_false``, for choosing boxes only)."""

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
    open_true: np.ndarray
    open_false: np.ndarray

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
    "open_true", "open_false",
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

    def open_estimate(self, events: int) -> np.ndarray:
        """An estimate (not a bound) of the uncredited mass of the open boxes where each event
        holds, ``(events,)`` (freed slots hold zeros)."""
        if self.store is None:
            return np.zeros(events)
        return self.store.open_true.sum(axis=0)

    def pop_heaviest(
        self, count: int, weights: tuple[np.ndarray, np.ndarray] | None = None
    ) -> Boxes:
        """Remove and return ``count`` open boxes: those of largest priority (SelectProb on
        the mass that no linear credit covers) or, given ``weights`` (per event, the worth
        of a unit of mass proven to hold and to fail), a :data:`DIRECTED_SHARE` of them by
        largest worth ``open_true·w_true + open_false·w_false`` and the rest by priority."""
        assert self.store is not None
        alive = np.flatnonzero(self.alive)
        if count < alive.size:
            priority = self.store.priority[alive]
            if weights is None:
                chosen = np.argpartition(-priority, count - 1)[:count]
            else:
                worth = (self.store.open_true[alive] @ weights[0]
                         + self.store.open_false[alive] @ weights[1])
                directed = max(1, int(count * DIRECTED_SHARE))
                chosen = np.argpartition(-worth, directed - 1)[:directed]
                if directed < count:
                    priority = priority.copy()
                    priority[chosen] = -np.inf
                    rest = np.argpartition(-priority, count - directed - 1)[:count - directed]
                    chosen = np.concatenate([chosen, rest])
            alive = alive[chosen]
        self.alive[alive] = False
        chosen_boxes = self.store.select(alive)
        for name in ("credit_true", "credit_false", "open_true", "open_false"):
            getattr(self.store, name)[alive] = 0.0
        return chosen_boxes
