"""A table of float columns, each stored in the narrowest type that holds its values exactly."""

from __future__ import annotations

import numpy as np

STORAGE_LADDER: tuple[type[np.number], ...] = (np.int8, np.int16, np.float32, np.float64)
"""The storage types a column moves up through, narrowest first: the corners of one-hot and
small integer columns are small integers (int8, int16: cast and checked in one vectorised
pass each, where float16's conversions run several times slower), the rest floats."""


class NarrowColumns:
    """A ``(capacity, columns)`` table of ``dtype`` values whose every column is stored in the
    narrowest type of :data:`STORAGE_LADDER` narrower than ``dtype`` (else ``dtype`` itself)
    that represents every value ever written to that column exactly. A read gives back the
    written values in ``dtype``, the same values bit for bit: a value is only stored in a type
    whose value compares equal to it (a NaN never does, so it is stored in ``dtype`` itself;
    an infinity only in a float; a negative zero not in an integer type, which would give it
    back as +0), and a column moves to a wider type (its used rows copied, exact there too) at
    the first value its type does not hold.

    Rows are slots the caller manages: :meth:`write` fills given rows, :meth:`read` gathers
    them, :meth:`grow` copies the first ``used`` rows into a larger table whose other pages
    stay untouched zeros."""

    def __init__(self, columns: int, dtype: np.dtype) -> None:
        self.dtype = np.dtype(dtype)
        narrower = tuple(np.dtype(kind) for kind in STORAGE_LADDER
                         if np.dtype(kind).itemsize < self.dtype.itemsize)
        self.ladder = (*narrower, self.dtype) if self.dtype.kind == "f" else (self.dtype,)
        self.capacity = 0
        self._layout(np.zeros(columns, dtype=np.int64))
        self.parts = self._empty_parts()

    def _layout(self, level: np.ndarray) -> None:
        """Per column its ladder step; per step its columns, in column order."""
        self.level = level
        self.step_columns = [np.flatnonzero(level == step) for step in range(len(self.ladder))]

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

    def _empty_parts(self) -> list[np.ndarray]:
        return [np.zeros((self.capacity, columns.size), dtype=kind)
                for columns, kind in zip(self.step_columns, self.ladder, strict=True)]

    def grow(self, capacity: int, used: int) -> None:
        """Move the first ``used`` rows into a table of ``capacity`` rows."""
        old, self.capacity = self.parts, capacity
        self.parts = self._empty_parts()
        for before, after in zip(old, self.parts, strict=True):
            after[:used] = before[:used]

    def write(self, rows: np.ndarray, values: np.ndarray, used: int) -> None:
        """Store ``values`` (``(len(rows), columns)``, of ``dtype``) at ``rows``, widening first
        every column one of them does not fit (the first ``used`` rows keep their values)."""
        level = self.level.copy()
        narrowed: list[np.ndarray] = []
        for step, kind in enumerate(self.ladder):
            columns = np.flatnonzero(level == step)
            block = values if columns.size == level.size else values[:, columns]
            with np.errstate(over="ignore", invalid="ignore"):
                cast = block.astype(kind)
                same = cast == block
            if kind.kind != "f":  # an integer gives −0 back as +0
                same &= (cast != 0) | ~np.signbit(block)
            exact = same.all(axis=0)
            if step + 1 < len(self.ladder) and not exact.all():
                level[columns[~exact]] = step + 1
                cast = cast[:, exact]
            narrowed.append(cast)
        if not np.array_equal(level, self.level):
            self._relayout(level, used)
        for part, cast in zip(self.parts, narrowed, strict=True):
            if cast.shape[1]:
                part[rows] = cast

    def _relayout(self, level: np.ndarray, used: int) -> None:
        """Store the columns at the steps of ``level`` (each at or above its own), copying the
        first ``used`` rows column block by column block (a cast up the ladder is exact)."""
        old_level, old_parts = self.level, self.parts
        old_position = _positions(old_level)
        self._layout(level)
        self.parts = self._empty_parts()
        new_position = _positions(level)
        for step, part in enumerate(self.parts):
            for old_step in range(step + 1):
                moved = np.flatnonzero((level == step) & (old_level == old_step))
                if moved.size:
                    part[:used, new_position[moved]] = old_parts[old_step][:used,
                                                                           old_position[moved]]

    def read(self, rows: np.ndarray) -> np.ndarray:
        """The values at ``rows``, ``(len(rows), columns)`` in ``dtype``."""
        if self.step_columns[0].size == self.columns:
            return self.parts[0][rows].astype(self.dtype)
        out = np.empty((rows.size, self.columns), dtype=self.dtype)
        for columns, part in zip(self.step_columns, self.parts, strict=True):
            if columns.size:
                out[:, columns] = part[rows]
        return out


def _positions(level: np.ndarray) -> np.ndarray:
    """Per column, its index among the columns of its own step."""
    position = np.empty(level.size, dtype=np.int64)
    for step in np.unique(level):
        columns = level == step
        position[columns] = np.arange(np.count_nonzero(columns))
    return position
