"""The narrow column table against a plain float64 table: every read gives back the written
values bit for bit (signed zeros, infinities, NaN and subnormals included) while each column
is stored in the narrowest type that holds what was written to it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.pv.narrow_columns import STORAGE_LADDER, NarrowColumns

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -128.0, 127.0, 128.0, -32768.0,
                    32767.0, 32768.0, 2.0**-24, 65505.0, 2.0**-149, 2.0**-1074, 1e300, 0.1])


def _column_values(rng: np.random.Generator, count: int, kind: int) -> np.ndarray:
    """One column's values: small integers, halves, special values, or random floats."""
    if kind == 0:
        return rng.integers(-2048, 2049, count).astype(np.float64)
    if kind == 1:
        return rng.integers(-2**25, 2**25, count) / 2.0
    if kind == 2:
        return rng.choice(SPECIAL, count)
    return rng.standard_normal(count) * 10.0 ** rng.integers(-5, 6, count)


def _narrowest(values: np.ndarray) -> np.dtype:
    """The oracle: the first type of the ladder whose cast back returns every value's bits
    (float64 for a NaN, whose payload a narrower float need not carry)."""
    if np.isnan(values).any():
        return np.dtype(np.float64)
    for kind in STORAGE_LADDER:
        with np.errstate(over="ignore", invalid="ignore"):
            back = values.astype(kind).astype(np.float64)
        if np.array_equal(back.view(np.int64), values.view(np.int64)):
            return np.dtype(kind)
    raise AssertionError("float64 holds every float64")


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1),
       writes=st.lists(st.tuples(st.integers(1, 80), st.lists(st.integers(0, 3), min_size=5,
                                                                max_size=5)),
                       min_size=1, max_size=8))
def test_reads_return_the_written_bits_in_the_narrowest_exact_float(
    seed: int, writes: list[tuple[int, list[int]]]
) -> None:
    rng = np.random.default_rng(seed)
    table = NarrowColumns(5, np.dtype(np.float64))
    reference = np.zeros((0, 5))
    history: list[np.ndarray] = []
    used = 0
    for count, kinds in writes:
        values = np.stack([_column_values(rng, count, kind) for kind in kinds], axis=1)
        reuse = rng.permutation(used)[: rng.integers(0, min(used, count) + 1)]
        rows = np.concatenate([reuse, np.arange(used, used + count - reuse.size)])
        fresh = count - reuse.size
        if used + fresh > table.capacity:
            table.grow(2 * (used + fresh), used)
            reference = np.concatenate([reference, np.zeros((2 * (used + fresh)
                                                             - reference.shape[0], 5))])
        table.write(rows, values, used)
        used += fresh
        reference[rows] = values
        history.append(values)
        read = table.read(np.arange(used))
        assert read.dtype == np.float64
        assert np.array_equal(read.view(np.int64), reference[:used].view(np.int64))
        written = np.concatenate(history)
        for column in range(5):
            # only widening: a column keeps the type of the widest value ever written to it
            assert table.dtype_of(column) == _narrowest(written[:, column])
        assert table.row_bytes == sum(table.dtype_of(c).itemsize for c in range(5))


def test_growth_keeps_the_used_rows_and_leaves_the_rest_zero() -> None:
    table = NarrowColumns(2, np.dtype(np.float64))
    table.grow(4, 0)
    table.write(np.arange(3), np.array([[1.0, 0.5], [2.0, 0.1], [-0.0, np.inf]]), 0)
    table.grow(16, 3)
    assert table.capacity == 16
    assert np.array_equal(table.read(np.arange(3)).view(np.int64),
                          np.array([[1.0, 0.5], [2.0, 0.1], [-0.0, np.inf]]).view(np.int64))
    assert not table.read(np.arange(3, 16)).any()
    assert [table.dtype_of(0), table.dtype_of(1)] == [np.float32, np.float64]
