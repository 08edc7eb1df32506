"""Sparse matrices in compressed rows, with numpy alone.

The causal exact check builds each MILP's constraint matrix once and reads it three ways:
HiGHS's model (:mod:`verifier.highs`), the proven LP bounds' transposed products
(:mod:`verifier.lp_bound`) and the certificate's branch and bound. ``scipy.sparse`` did this
for 0.1 CPU s of import on a cold process (BENCHMARKS.md, "scipy off the causal cold path");
this module does the same arithmetic in the same order: its entries are in scipy's canonical
order (rows, then columns, ascending), its transpose keeps each column's entries in row order
(as ``csr_array.T.tocsr()``), and :meth:`RowMatrix.times` adds each row's products one at a
time in stored order from zero, as scipy's ``csr_matvecs`` does, so the bits are scipy's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


class CompressedRows(Protocol):
    """What a compressed-row matrix exposes (this module's :class:`RowMatrix`, or scipy's
    ``csr_array`` in tests and callers that have one)."""

    @property
    def indptr(self) -> np.ndarray: ...

    @property
    def indices(self) -> np.ndarray: ...

    @property
    def data(self) -> np.ndarray: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class RowMatrix:
    """``shape[0]`` rows; row ``i``'s entries are ``data[indptr[i]:indptr[i+1]]`` in the
    columns ``indices[indptr[i]:indptr[i+1]]`` (ascending, no column twice)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]

    @classmethod
    def from_entries(cls, rows: np.ndarray, columns: np.ndarray, values: np.ndarray,
                     shape: tuple[int, int]) -> RowMatrix:
        """The matrix whose entry ``(rows[k], columns[k])`` is ``values[k]`` (explicit zeros
        kept, as scipy keeps them). Raises ``ValueError`` for an entry given twice."""
        rows = np.asarray(rows, dtype=np.int64)
        columns = np.asarray(columns, dtype=np.int64)
        values = np.asarray(values, dtype=np.float64)
        order = np.lexsort((columns, rows))
        rows, columns, values = rows[order], columns[order], values[order]
        if np.any((rows[1:] == rows[:-1]) & (columns[1:] == columns[:-1])):
            raise ValueError("a sparse matrix entry is given twice")
        indptr = np.zeros(shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
        return cls(indptr, columns, values, shape)

    @classmethod
    def of(cls, matrix: CompressedRows) -> RowMatrix:
        """``matrix`` (any compressed-row matrix with sorted, distinct columns per row) as a
        :class:`RowMatrix`, sharing its arrays."""
        if isinstance(matrix, RowMatrix):
            return matrix
        rows, columns = matrix.shape
        return cls(np.asarray(matrix.indptr), np.asarray(matrix.indices),
                   np.asarray(matrix.data, dtype=np.float64), (int(rows), int(columns)))

    def transposed(self) -> RowMatrix:
        """The transpose, each of its rows (a column here) in ascending row order: also this
        matrix's compressed columns, the layout HiGHS's column-wise model reads."""
        rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))
        order = np.argsort(self.indices, kind="stable")
        indptr = np.zeros(self.shape[1] + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.indices, minlength=self.shape[1]), out=indptr[1:])
        return RowMatrix(indptr, rows[order], self.data[order], (self.shape[1], self.shape[0]))

    def absolute(self) -> RowMatrix:
        """The entrywise absolute value."""
        return RowMatrix(self.indptr, self.indices, np.abs(self.data), self.shape)

    def times(self, dense: np.ndarray) -> np.ndarray:
        """``self @ dense`` for ``dense`` ``(shape[1], k)``: each row's products ``a·x`` added
        one at a time, in stored order, to a zero (scipy's order, so scipy's bits)."""
        dense = np.asarray(dense, dtype=np.float64)
        out = np.zeros((self.shape[0], dense.shape[1]))
        lengths = np.diff(self.indptr)
        starts = self.indptr[:-1]
        for position in range(int(lengths.max(initial=0))):
            rows = np.flatnonzero(lengths > position)
            entry = starts[rows] + position
            out[rows] += self.data[entry, None] * dense[self.indices[entry]]
        return out
