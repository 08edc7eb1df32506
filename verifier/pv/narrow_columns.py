"""A table of float columns, each stored in the narrowest float type that holds its values."""

from __future__ import annotations

import numpy as np

FLOAT_LADDER: tuple[type[np.floating], ...] = (np.float16, np.float32, np.float64)
"""The storage types a column moves up through, narrowest first."""


class NarrowColumns:
    """A ``(capacity, columns)`` table of ``dtype`` values whose every column is stored in the
    narrowest type of :data:`FLOAT_LADDER` (no wider than ``dtype``) that represents every
    value ever written to that column exactly. A read gives back the written values in
    ``dtype``, the same values bit for bit (a signed zero and an infinity included): a value
    is only stored in a type whose cast back reproduces it, and a column moves to a wider type
    (its used rows copied, exact there too) at the first value its type does not hold.

    Rows are slots the caller manages: :meth:`write` fills given rows, :meth:`read` gathers
    them, :meth:`grow` copies the first ``used`` rows into a larger table whose other pages
    stay untouched zeros."""

    def __init__(self, columns: int, dtype: np.dtype) -> None:
        self.dtype = np.dtype(dtype)
        self.ladder = tuple(
            np.dtype(kind) for kind in FLOAT_LADDER
            if np.dtype(kind).itemsize <= self.dtype.itemsize
        ) if self.dtype in FLOAT_LADDER else (self.dtype,)
        self.level = np.zeros(columns, dtype=np.int64)
        self.capacity = 0
        self.parts = self._empty_parts(self.level, 0)

    @property
    def columns(self) -> int:
        return int(self.level.size)

    @property
    def row_bytes(self) -> int:
        """Bytes stored per row."""
        return int(sum(self.ladder[level].itemsize for level in self.level))

    def dtype_of(self, column: int) -> np.dtype:
        """The type column ``column`` is stored in."""
        return self.ladder[int(self.level[column])]

    def _empty_parts(self, level: np.ndarray, capacity: int) -> list[np.ndarray]:
        return [np.zeros((capacity, int(np.count_nonzero(level == step))), dtype=kind)
                for step, kind in enumerate(self.ladder)]

    def _levels_needed(self, values: np.ndarray) -> np.ndarray:
        """Per column, the narrowest ladder step at or above its own that holds every entry of
        ``values`` exactly."""
        level = self.level.copy()
        for step, kind in enumerate(self.ladder[:-1]):
            rows = np.flatnonzero(level == step)
            if rows.size == 0:
                continue
            block = values[:, rows]
            with np.errstate(over="ignore", invalid="ignore"):
                exact = (block.astype(kind).astype(self.dtype) == block).all(axis=0)
            level[rows[~exact]] = step + 1
        return level

    def grow(self, capacity: int, used: int) -> None:
        """Move the first ``used`` rows into a table of ``capacity`` rows."""
        parts = self._empty_parts(self.level, capacity)
        for old, new in zip(self.parts, parts, strict=True):
            new[:used] = old[:used]
        self.parts, self.capacity = parts, capacity

    def write(self, rows: np.ndarray, values: np.ndarray, used: int) -> None:
        """Store ``values`` (``(len(rows), columns)``, of ``dtype``) at ``rows``, widening first
        every column one of them does not fit (the first ``used`` rows keep their values)."""
        level = self._levels_needed(values)
        if not np.array_equal(level, self.level):
            self._relayout(level, used)
        for step, part in enumerate(self.parts):
            if part.shape[1]:
                part[rows] = values[:, self.level == step]

    def _relayout(self, level: np.ndarray, used: int) -> None:
        """Store the columns at the steps of ``level`` (each at or above its own), copying the
        first ``used`` rows column block by column block (a cast to a wider float is exact)."""
        old_position, new_position = _positions(self.level), _positions(level)
        parts = self._empty_parts(level, self.capacity)
        for step, part in enumerate(parts):
            for old_step in range(step + 1):
                moved = np.flatnonzero((level == step) & (self.level == old_step))
                if moved.size:
                    part[:used, new_position[moved]] = (
                        self.parts[old_step][:used, old_position[moved]])
        self.level, self.parts = level, parts

    def read(self, rows: np.ndarray) -> np.ndarray:
        """The values at ``rows``, ``(len(rows), columns)`` in ``dtype``."""
        out = np.empty((rows.size, self.columns), dtype=self.dtype)
        for step, part in enumerate(self.parts):
            if part.shape[1]:
                out[:, self.level == step] = part[rows]
        return out


def _positions(level: np.ndarray) -> np.ndarray:
    """Per column, its index among the columns of its own step."""
    position = np.empty(level.size, dtype=np.int64)
    for step in np.unique(level):
        columns = level == step
        position[columns] = np.arange(np.count_nonzero(columns))
    return position
