"""Compiled loops of the excess bound (:mod:`verifier.population.excess`): numba kernels for
its many small tables, where numpy's per-call overhead, its temporaries and its batched matrix
product over strided windows cost more than the arithmetic (Adult-13's chunks: most
convolutions are ``(128, 13)`` pairs).

Soundness: each entry is a sum of non-negative products, in the order each docstring states
(the order of the numpy expressions these loops stand for, so the bits are theirs on x86-64),
over no more terms than the module's margin counts; the rounding of such a sum is bounded by
its number of terms, whatever their order. Compiled without fast-math (no reassociation, no
fused multiply-add: every product and sum is rounded as written), one version per kernel
(:class:`Kernel`), cached on disk by the install (:mod:`verifier.population.compile_kernels`);
a process compiles a kernel only when the cache lacks it (about 3 CPU s for all four).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np


class Kernel:
    """A numba kernel compiled for one signature: its array arguments are passed C-contiguous
    and writable (copied where they are not), so that whatever views the excess bound hands
    it (broadcasts, transposes, slices) one compiled version serves them all, the one
    :mod:`verifier.population.compile_kernels` caches at install. The copy keeps every value,
    so the sums are those of the loops as written."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.py_func = function
        self.dispatcher = _compiled(function)
        functools.update_wrapper(self, function)

    def __call__(self, *arguments: Any) -> Any:
        return self.dispatcher(*(np.require(argument, requirements=("C", "W"))
                                 if isinstance(argument, np.ndarray) else argument
                                 for argument in arguments))

    @property
    def signatures(self) -> list[tuple[Any, ...]]:
        """The argument types it is compiled (or loaded from the cache) for so far."""
        return list(self.dispatcher.signatures)


def _compiled(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` compiled on first call, cached on disk where numba finds a writable
    place (beside this file, ``NUMBA_CACHE_DIR``, the user's cache directory); where it finds
    none (a read-only install without a home), compiled again in each process instead of
    failing at import."""
    try:
        return numba.njit(cache=True)(function)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return numba.njit(function)


@Kernel
def convolve_rows(first: np.ndarray, second: np.ndarray, bins: int) -> np.ndarray:
    """``(rows, N + 1)``: per row, the convolution of ``first`` and ``second`` ``(rows, N +
    1)`` saturated at ``N`` (the last bin holds ``≥ N``).

    Bins ``k < N``: ``Σ_{j ≤ k} first[k − j]·second[j]`` summed from ``j = 0`` up (numpy's
    matrix-vector loop). Bin ``N``: ``Σ_i first[i]·tail[i]`` with ``tail[j] = Σ_{m ≥ N − j}
    second[m]`` summed from ``m = N`` down; the sum runs as numpy's einsum runs a contiguous
    dot product on x86-64 (two lanes, blocks of eight taken from their last pair, then pairs,
    the lanes added last)."""
    rows = first.shape[0]
    levels = bins + 1
    out = np.empty((rows, levels))
    tail = np.empty(levels)
    for r in range(rows):
        for k in range(bins):
            total = 0.0
            for j in range(k + 1):
                total += first[r, k - j] * second[r, j]
            out[r, k] = total
        tail[0] = second[r, bins]
        for j in range(1, levels):
            tail[j] = tail[j - 1] + second[r, bins - j]
        even = 0.0
        odd = 0.0
        i = 0
        while levels - i >= 8:
            for step in (6, 4, 2, 0):
                even = first[r, i + step] * tail[i + step] + even
                odd = first[r, i + step + 1] * tail[i + step + 1] + odd
            i += 8
        while i < levels:
            even = first[r, i] * tail[i] + even
            if i + 1 < levels:
                odd = first[r, i + 1] * tail[i + 1] + odd
            i += 2
        out[r, bins] = even + odd
    return out


@Kernel
def bin_values(weights: np.ndarray, rows: np.ndarray, cells: np.ndarray, real: np.ndarray,
               inside: np.ndarray, level: np.ndarray, bins: int) -> np.ndarray:
    """``(B, entries, kept cells, N + 1)``: per box, entry and kept cell, the sum of
    ``weights[rows[b, e], cells[b, c], v]·real[b, c]`` over the values ``v`` the box holds
    (``inside`` ``(B, values)``) whose bin ``level[b, v]`` is that bin, added in the order of
    the values from zero (``weights`` ``(rows, cells, values)``, ``rows`` ``(B, entries)``;
    ``cells``, ``real`` ``(B, kept cells)``: each box's kept cells and 1.0, or 0.0 for
    padding): the product with a one-hot table of the bins, without its terms that are exact
    zeros."""
    batch, entries = rows.shape
    kept = cells.shape[1]
    values = inside.shape[1]
    out = np.zeros((batch, entries, kept, bins + 1))
    for b in range(batch):
        for e in range(entries):
            row = rows[b, e]
            for c in range(kept):
                cell = cells[b, c]
                scale = real[b, c]
                for v in range(values):
                    if inside[b, v]:
                        out[b, e, c, level[b, v]] += weights[row, cell, v] * scale
    return out


@Kernel
def bin_pairs(by_value: np.ndarray, rows: np.ndarray, values: np.ndarray, boxes: np.ndarray,
              cells: np.ndarray, real: np.ndarray, level: np.ndarray,
              bins: int) -> np.ndarray:
    """``(B, entries, kept cells, N + 1)``: per box, entry and kept cell, the sum over the
    box's (box, value) pairs ``p`` whose bin ``level[p, e]`` ``(pairs, entries)`` is that bin
    of ``by_value[rows[p, e], values[p], cells[b, c]]·real[b, c]`` (``by_value`` ``(rows,
    values, cells)``, ``rows`` ``(pairs, entries)``; ``cells``, ``real`` ``(B, kept
    cells)``: each box's kept cells and 1.0, or 0.0 for padding), added in the order of the
    pairs from zero."""
    pairs, entries = rows.shape
    batch, kept = cells.shape
    out = np.zeros((batch, entries, kept, bins + 1))
    for p in range(pairs):
        b = boxes[p]
        value = values[p]
        for e in range(entries):
            k = level[p, e]
            row = rows[p, e]
            for c in range(kept):
                out[b, e, c, k] += by_value[row, value, cells[b, c]] * real[b, c]
    return out


@Kernel
def floor_levels(total: np.ndarray, width: np.ndarray, scale: float, keep: float,
                 top: int) -> np.ndarray:
    """``(rows, m)``: ``min(⌊((total / width)·scale)·keep⌋, top)`` per entry of ``total``
    ``(rows, m)``, ``width`` ``(rows,)`` per row, each operation rounded as numpy rounds it
    (``keep``: the factor ``1 − margin`` of :func:`verifier.numerics.scaled_down`)."""
    rows, count = total.shape
    out = np.empty((rows, count), dtype=np.int64)
    for r in range(rows):
        for i in range(count):
            level = np.floor(total[r, i] / width[r] * scale * keep)
            out[r, i] = top if level > top else int(level)
    return out


KERNELS = (convolve_rows, bin_values, bin_pairs, floor_levels)
"""Every kernel of this module (what :mod:`verifier.population.compile_kernels` compiles)."""
