"""The open boxes of a branch and bound: per-box records in preallocated arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verifier.numerics import sum_lower, sum_upper
from verifier.pv.direction import split_gain
from verifier.pv.narrow_columns import NarrowColumns

# the rest of a directed batch goes by plain priority: a wrong guess of the verdict then only
# slows the other side down, and every box stays reachable (completeness); a tenth, not a
# quarter: Adult-13 2x64 decided in 491 s (3.28M boxes) instead of 600 s (3.68M), and at
# 3.0M boxes the deciding end was 0.813 instead of 0.839 (docs/decisions.md, PV)
DIRECTED_SHARE = 0.9
GROWTH = 4
"""How many times the pool's capacity grows when it is full (see :class:`BoxPool`)."""
CORNER_FIELDS = ("lo", "hi")
"""The box corners, which the pool stores per column in the narrowest float that holds them
exactly (see :class:`BoxPool`)."""


@dataclass
class Boxes:
    """A batch of boxes and what PV keeps per box: masses, undecided events (``pending``),
    split depth, undecided atoms, what the split rule reads per input (``guide``: the drive,
    and on a one-hot group's columns the signed input coefficients that order its categories,
    :meth:`~verifier.pv.atoms.AtomBounds.split_guide`), the events' three-valued truth, what its
    children inherit (the signs of the network's kink neurons and the atoms' bounds), the
    linear credit of every event and of its complement (zero where not pending), its
    priority: the largest share of its mass that no bound has credited to a pending event
    or its complement, and per event the estimated parts of that uncredited mass where the
    event holds and where it fails (``open_true``/``open_false``, for choosing boxes only);
    the bounds of the last hidden layer its children may carry (``carried``, ``(B, 2, n)``
    in :data:`verifier.bounds.CARRIED_DTYPE`, :func:`verifier.bounds.carried_bounds`)."""

    lo: np.ndarray
    hi: np.ndarray
    mass_lo: np.ndarray
    mass_hi: np.ndarray
    pending: np.ndarray
    depth: np.ndarray
    atoms: np.ndarray
    guide: np.ndarray
    truth: np.ndarray
    signs: np.ndarray
    low: np.ndarray
    high: np.ndarray
    credit_true: np.ndarray
    credit_false: np.ndarray
    priority: np.ndarray
    open_true: np.ndarray
    open_false: np.ndarray
    carried: np.ndarray

    def select(self, rows: np.ndarray) -> Boxes:
        return Boxes(*(getattr(self, name)[rows] for name in BOX_FIELDS))

    def extended(self, other: Boxes) -> Boxes:
        """These boxes followed by ``other``'s."""
        return Boxes(*(
            np.concatenate([getattr(self, name), getattr(other, name)]) for name in BOX_FIELDS
        ))


BOX_FIELDS = (
    "lo", "hi", "mass_lo", "mass_hi", "pending", "depth", "atoms", "guide", "truth", "signs",
    "low", "high", "credit_true", "credit_false", "priority", "open_true", "open_false",
    "carried",
)
EVENT_FIELDS = ("credit_true", "credit_false", "open_true", "open_false")
"""The per-event fields, which the pool stores event-major (see :class:`BoxPool`)."""


class BoxPool:
    """Open boxes in preallocated arrays; freed slots are reused, lowest first.

    Every round reads the whole pool (credit sums, the estimate, the choice of boxes), so
    those reads are contiguous passes: the per-event fields (:data:`EVENT_FIELDS`) are
    stored event-major, ``(events, capacity)``, the others box-major, and freed slots hold
    zero credit and zero estimate (at 460k open boxes a round's reads took 50 ms box-major
    and with gathers, 8 ms now). Reads stop at ``used``, one past the highest slot ever
    filled. The capacity grows :data:`GROWTH` times at once into zero-filled arrays whose
    pages the operating system only provides when written, so a growth copies the used
    slots and nothing else (a pool filled to 1.2M open boxes in 300 rounds of 8,192 boxes
    added and 4,096 popped: its growth took 20 s doubling with full copies, 1.3 s now).

    The box corners (:data:`CORNER_FIELDS`) are stored per column in the narrowest type
    that holds every corner added in that column exactly (:class:`~verifier.pv.
    narrow_columns.NarrowColumns`): integer and one-hot columns split on the lattice, so a
    one-hot column's corners are 0 and 1 and a small integer column's fit an int8 (Adult-13
    2×64: 100 of 102 columns in int8, 212 bytes of corners per box where float32 took 816,
    a record of 1,313 bytes instead of 1,917); a popped box gets its corners back in
    float64, the same values bit for bit.

    ``credited``: whether any box added so far held a linear credit (see
    :meth:`pop_heaviest`).
    """

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.corners: dict[str, NarrowColumns] = {}
        self.alive = np.zeros(0, dtype=bool)
        self.used = 0
        self.credited = False

    @property
    def record_bytes(self) -> int:
        """Bytes the pool stores per open box (0 before the first box arrives)."""
        return sum(
            array.itemsize * (array.shape[0] if name in EVENT_FIELDS else
                              int(np.prod(array.shape[1:])))
            for name, array in self.arrays.items()
        ) + sum(corners.row_bytes for corners in self.corners.values())

    @property
    def size(self) -> int:
        return int(np.count_nonzero(self.alive[: self.used]))

    def add(self, boxes: Boxes) -> None:
        count = boxes.lo.shape[0]
        if count == 0:
            return
        self.credited = self.credited or bool(boxes.credit_true.any()
                                              or boxes.credit_false.any())
        if not self.arrays:
            self.arrays = {name: _stored(getattr(boxes, name), name) for name in BOX_FIELDS
                           if name not in CORNER_FIELDS}
            self.corners = {name: NarrowColumns(getattr(boxes, name).shape[1],
                                                getattr(boxes, name).dtype)
                            for name in CORNER_FIELDS}
        free = np.flatnonzero(~self.alive[: self.used])[:count]
        fresh = count - free.size
        if self.used + fresh > self.alive.size:
            self._grow(max(GROWTH * self.alive.size, self.used + fresh))
        slots = np.concatenate([free, np.arange(self.used, self.used + fresh)])
        for name, corners in self.corners.items():
            corners.write(slots, getattr(boxes, name), self.used)
        self.used += fresh
        for name, array in self.arrays.items():
            if name in EVENT_FIELDS:
                array[:, slots] = getattr(boxes, name).T
            else:
                array[slots] = getattr(boxes, name)
        self.alive[slots] = True

    def _grow(self, capacity: int) -> None:
        """Move the used slots into zero-filled arrays of ``capacity`` slots."""
        for name, array in self.arrays.items():
            grown = np.zeros((*array.shape[:-1], capacity) if name in EVENT_FIELDS
                             else (capacity, *array.shape[1:]), dtype=array.dtype)
            if name in EVENT_FIELDS:
                grown[:, : self.used] = array[:, : self.used]
            else:
                grown[: self.used] = array[: self.used]
            self.arrays[name] = grown
        for corners in self.corners.values():
            corners.grow(capacity, self.used)
        alive = np.zeros(capacity, dtype=bool)
        alive[: self.used] = self.alive[: self.used]
        self.alive = alive

    def credits(self, events: int) -> tuple[np.ndarray, np.ndarray]:
        """Lower bounds of the sums over the open boxes of the linear credits, ``(events,)``
        each. Freed slots hold zero credit, so the used slots are summed in one pass; a float
        sum of ``n`` non-negative terms, in any order, is within ``γ_(n−1)`` of the exact sum,
        relatively (:func:`verifier.numerics.sum_lower`)."""
        if not self.arrays:
            return np.zeros(events), np.zeros(events)
        return (sum_lower(self.arrays["credit_true"][:, : self.used].sum(axis=1), self.used),
                sum_lower(self.arrays["credit_false"][:, : self.used].sum(axis=1), self.used))

    def pending_mass(self, events: int) -> np.ndarray:
        """Upper bounds of the sums of the open boxes' upper masses, per event over the boxes
        where it is pending, ``(events,)``: a sum of ``n`` non-negative terms in any order
        (:func:`verifier.numerics.sum_upper`). Relative to the mass it sums, where the
        whole mass less what is proven false loses a tiny event to the total's rounding."""
        if not self.arrays:
            return np.zeros(events)
        used = self.used
        weights = np.where(self.alive[:used], self.arrays["mass_hi"][:used], 0.0)
        return sum_upper(weights @ self.arrays["pending"][:used], used)

    def open_estimate(self, events: int) -> np.ndarray:
        """An estimate (not a bound) of the uncredited mass of the open boxes where each event
        holds, ``(events,)`` (freed slots hold zeros)."""
        if not self.arrays:
            return np.zeros(events)
        return self.arrays["open_true"][:, : self.used].sum(axis=1)

    def pop_heaviest(
        self, count: int, weights: tuple[np.ndarray, np.ndarray] | None = None
    ) -> Boxes:
        """Remove and return ``count`` open boxes: those of largest priority (SelectProb on
        the mass that no linear credit covers) or, given ``weights`` (per event, the worth
        of a unit of mass proven to hold and to fail), the first :func:`directed_count` of
        them by the largest expected gain of a split
        (:func:`~verifier.pv.direction.split_gain` of the worth ``open_true·w_true +
        open_false·w_false`` and the credit ``credit_true·w_true + credit_false·w_false``;
        by the worth alone while no box added has held a credit, which ranks the same and
        spares a run without linear credit the pass: 7 ms a round at 10⁶ open boxes) and
        the rest by priority."""
        assert self.arrays
        used = self.used
        alive = self.alive[:used]
        if count < self.size:
            priority = np.where(alive, self.arrays["priority"][:used], -np.inf)
            if weights is None:
                chosen = _largest(priority, count)
            else:
                worth = (weights[0] @ self.arrays["open_true"][:, :used]
                         + weights[1] @ self.arrays["open_false"][:, :used])
                if self.credited:
                    worth = split_gain(worth, weights[0] @ self.arrays["credit_true"][:, :used]
                                       + weights[1] @ self.arrays["credit_false"][:, :used])
                directed = directed_count(count, self.size)
                chosen = _largest(np.where(alive, worth, -np.inf), directed)
                if directed < count:
                    priority[chosen] = -np.inf
                    chosen = np.concatenate([chosen, _largest(priority, count - directed)])
        else:
            chosen = np.flatnonzero(alive)
        self.alive[chosen] = False
        popped = self.view(chosen)
        for name in EVENT_FIELDS:
            self.arrays[name][:, chosen] = 0.0
        return popped

    def view(self, slots: np.ndarray) -> Boxes:
        """Copies of the boxes at ``slots`` (open ones: see :attr:`alive`), every field in
        the type it was added in."""
        return Boxes(*(
            self.corners[name].read(slots) if name in CORNER_FIELDS
            else self.arrays[name][:, slots].T.copy() if name in EVENT_FIELDS
            else self.arrays[name][slots]
            for name in BOX_FIELDS
        ))


def directed_count(count: int, size: int) -> int:
    """How many of the ``count`` boxes :meth:`BoxPool.pop_heaviest` pops from a pool of
    ``size`` open boxes are chosen by worth, given weights (they come first)."""
    return max(1, int(count * DIRECTED_SHARE)) if count < size else 0


def _stored(values: np.ndarray, name: str) -> np.ndarray:
    """No slots yet for field ``name`` in the pool's layout, like ``values``."""
    if name in EVENT_FIELDS:
        return np.zeros((values.shape[1], 0), dtype=values.dtype)
    return np.zeros((0, *values.shape[1:]), dtype=values.dtype)


def _largest(values: np.ndarray, count: int) -> np.ndarray:
    """Indices of ``count`` largest entries of ``values`` (``count`` at most its size; among
    equal entries the partition picks deterministically). Exact: the partition runs on the
    entries at or above a threshold taken from an evenly strided sample (about twice
    ``count`` of them pass), or on all entries when fewer than ``count`` pass."""
    stride = values.size // (16 * count)
    if stride >= 4:
        sample = np.sort(values[::stride])
        threshold = sample[max(sample.size - 1 - (2 * count) // stride, 0)]
        candidates = np.flatnonzero(values >= threshold)
        if candidates.size >= count:
            part = np.argpartition(-values[candidates], count - 1)[:count]
            return candidates[part]
    return np.argpartition(-values, count - 1)[:count]
