"""The numpy compressed-row matrices of the causal exact check against scipy.sparse: the same
layout and the same bits (the proven LP bounds and HiGHS's models read them)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import coo_array

from verifier.sparse_rows import RowMatrix


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 30), columns=st.integers(1, 30),
       density=st.floats(0.0, 1.0))
def test_layout_and_products_are_scipys_bit_for_bit(seed: int, rows: int, columns: int,
                                                   density: float) -> None:
    """Entries in any order (explicit zeros and signed zeros included, magnitudes over 16
    decades): the rows, the transpose (scipy's ``.T.tocsr()`` and ``.tocsc()``) and the
    products with dense matrices equal scipy's exactly, signs of zero included."""
    rng = np.random.default_rng(seed)
    count = int(density * rows * columns)
    flat = rng.choice(rows * columns, count, replace=False)
    r, c = flat // columns, flat % columns
    values = rng.normal(size=count) * 10.0 ** rng.integers(-8, 8, count)
    values[rng.random(count) < 0.1] = 0.0
    values[rng.random(count) < 0.05] = -0.0
    ours = RowMatrix.from_entries(r, c, values, (rows, columns))
    theirs = coo_array((values, (r, c)), shape=(rows, columns)).tocsr()
    for mine, scipys in ((ours, theirs), (ours.transposed(), theirs.T.tocsr()),
                         (ours.transposed(), theirs.tocsc())):
        assert np.array_equal(mine.indptr, scipys.indptr)
        assert np.array_equal(mine.indices, scipys.indices)
        assert np.array_equal(mine.data, scipys.data)
        assert np.array_equal(np.signbit(mine.data), np.signbit(scipys.data))
    dense = rng.normal(size=(rows, 3)) * 10.0 ** rng.integers(-8, 8, (rows, 3))
    product, expected = ours.transposed().times(dense), theirs.T.tocsr() @ dense
    assert np.array_equal(product, expected)
    assert np.array_equal(np.signbit(product), np.signbit(expected))
    assert np.array_equal(ours.transposed().absolute().times(np.abs(dense)),
                          abs(theirs.T.tocsr()) @ np.abs(dense))
    right = rng.normal(size=(columns, 2))
    assert np.array_equal(RowMatrix.of(theirs).times(right), theirs @ right)


def test_an_entry_given_twice_is_refused() -> None:
    """A repeated entry would be summed by scipy; the MILPs never repeat one, so it is an
    error here rather than a silent sum."""
    with pytest.raises(ValueError, match="twice"):
        RowMatrix.from_entries(np.array([0, 0]), np.array([1, 1]), np.array([1.0, 2.0]), (1, 2))
