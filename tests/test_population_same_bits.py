"""The cheaper paths of the box masses and the excess bound give the bounds of the paths they
replace, bit for bit: the masses' ends without the value, the categorical factors computed
once per distinct set of allowed categories, an integer node's CPT rows once per distinct
interval of its column, the saturated convolution's tail summed bin
by bin, a node's normal (truncated normal) CPT rows enclosed in one element-wise call, the
excess bound's kept cells, CPT rows and factors gathered by direct indexing
(``take_along_axis`` before), the convolution's windows by ``as_strided``, the one-hot
records' counts in int32, the contractions along numpy's cached list of steps, and the
excess bound's per-node excess and plain tables computed once per batch and cut per chunk,
and the linear pieces' excess moments computed once for the credit and the share, and the
excess bound's compiled kernels (the binned tables, the bins' floors) against the numpy
expressions they replaced. Soundness itself is held by the oracles of
``test_population_bayesnet`` (the joint table enumerated) and ``test_linear_credit`` (the
excess against exact arithmetic); these tests pin that the faster code computes the same
floats."""

from __future__ import annotations

import numba.core.caching
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_linear_credit import _groups, _random_boxes
from test_population_bayesnet import random_discrete_network

from verifier.bounds.onehot import _onehot
from verifier.numerics import EPS, scaled_down
from verifier.population import elimination as elimination_module
from verifier.population.distributions import Categorical, Normal, TruncatedNormal
from verifier.population.elimination import (
    GaussianRows,
    _distinct_intervals,
    _distinct_rows,
    planned_einsum,
)
from verifier.population.excess import _convolve, _OwnMasses
from verifier.population.excess_kernels import _compiled, bin_pairs, bin_values, floor_levels
from verifier.population.rounding import Enclosure
from verifier.pv.credit import _allowed_categories, _excess_moments


def _bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.float64).view(np.int64)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_masses_ends_alone_are_the_enclosures_ends(seed: int) -> None:
    """``enclosure_ends`` (no value contraction; the indicators of positive entries contracted
    only where the upper end is 0) returns the lower and upper ends of ``enclosure``, boxes
    with no mass and boxes off the support included."""
    network, specs = random_discrete_network(seed)
    rng = np.random.default_rng(seed)
    lo, hi = _random_boxes(rng, specs, 40)
    empty = rng.random(lo.shape[0]) < 0.2  # some boxes hold no value of a column
    column = rng.integers(0, lo.shape[1], size=lo.shape[0])
    lo[empty, column[empty]] = 0.25
    hi[empty, column[empty]] = 0.75
    full = network.enclosure(lo, hi)
    lower, upper = network.enclosure_ends(lo, hi)
    assert np.array_equal(_bits(lower), _bits(full.lower))
    assert np.array_equal(_bits(upper), _bits(full.upper))
    elimination = network._elimination
    lower, upper = elimination.enclosure_ends(lo, hi)
    direct = elimination.enclosure(lo, hi)
    assert np.array_equal(_bits(lower), _bits(direct.lower))
    assert np.array_equal(_bits(upper), _bits(direct.upper))


def _per_box_categorical(elimination, u: int, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
    """Node ``u``'s categorical factor computed for every box, as before the distinct sets
    (with one cell, its sums taken category by category)."""
    node, cells = elimination.network.nodes[u], elimination.cells[u]
    columns = elimination.columns[u]
    mask = Categorical.category_mask(lo[:, columns], hi[:, columns]).astype(np.float64)
    category = np.arange(node.width, dtype=np.float64)
    member = (
        (category[None, :] > cells.low[:, None]) & (category[None, :] < cells.high[:, None])
    ) | (cells.point[:, None] & (category[None, :] == cells.low[:, None]))
    weights = elimination.category_weights[u]
    if len(cells) > 1:
        value = (mask[:, None, :] * weights[None, :, :]) @ member.T.astype(np.float64)
    else:  # one cell: the categories added one by one, in their order
        value = np.zeros((mask.shape[0], weights.shape[0], 1))
        for category in range(node.width):
            value[:, :, 0] += mask[:, category, None] * (
                weights[None, :, category] * float(member[0, category]))
    margin = max(row.distribution.margin for row in node.cpt)
    return Enclosure.from_error(value, margin * value)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_categorical_factor_per_distinct_category_set_equals_the_per_box_one(
    seed: int,
) -> None:
    network, specs = random_discrete_network(seed)
    elimination = network._elimination
    rng = np.random.default_rng(seed)
    lo, hi = _random_boxes(rng, specs, 64)
    lo, hi = lo[rng.integers(0, 64, size=200)], hi[rng.integers(0, 64, size=200)]
    for u, node in enumerate(elimination.network.nodes):
        if not node.categorical or node.latent:
            continue
        fast = elimination.own_masses(u, lo, hi)
        slow = _per_box_categorical(elimination, u, lo, hi)
        for end in ("value", "lower", "upper"):
            assert np.array_equal(_bits(getattr(fast, end)), _bits(getattr(slow, end)))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_an_integer_nodes_rows_per_distinct_interval_equal_the_per_box_ones(seed: int) -> None:
    """An integer node's ``(B, rows, cells)`` masses computed once per distinct interval of
    its column and gathered are, bit for bit, every box's own computation: repeated boxes,
    infinite ends and a ``-0.0`` end beside ``0.0`` included."""
    network, specs = random_discrete_network(seed)
    elimination = network._elimination
    rng = np.random.default_rng(seed)
    lo, hi = _random_boxes(rng, specs, 30)
    pick = rng.integers(0, 30, size=120)
    lo, hi = lo[pick], hi[pick]
    lo[rng.random(lo.shape) < 0.05] = -np.inf
    hi[rng.random(hi.shape) < 0.05] = np.inf
    lo[(lo == 0.0) & (rng.random(lo.shape) < 0.5)] = -0.0
    nodes = [u for u, table in enumerate(elimination.row_tables) if table is not None]
    original = elimination_module.DISTINCT_ENTRIES
    elimination_module.DISTINCT_ENTRIES = 1  # every integer node takes the distinct path
    try:
        for u in nodes:
            if elimination.network.nodes[u].latent:  # summed over its whole line
                a, b = np.full(lo.shape[0], -np.inf), np.full(lo.shape[0], np.inf)
            else:
                column = elimination.columns[u][0]
                a, b = lo[:, column], hi[:, column]
            fast = elimination.own_masses(u, lo, hi)
            slow = elimination.row_tables[u].cell_masses(elimination.cells[u], a, b)
            for end in ("value", "lower", "upper"):
                assert np.array_equal(_bits(getattr(fast, end)), _bits(getattr(slow, end)))
    finally:
        elimination_module.DISTINCT_ENTRIES = original


def test_distinct_intervals_tell_every_bit_pattern_apart() -> None:
    """One index per distinct ``(lo, hi)`` pair of bits (``-0.0`` is not ``0.0``), every box
    indexed back to its own pair."""
    lo = np.array([0.0, -0.0, 0.0, 1.0, -np.inf, 1.0, 0.0])
    hi = np.array([2.0, 2.0, 2.0, 1.0, 3.0, 1.0, np.inf])
    first, inverse = _distinct_intervals(lo, hi)
    assert first.size == 5
    assert np.array_equal(_bits(lo[first][inverse]), _bits(lo))
    assert np.array_equal(_bits(hi[first][inverse]), _bits(hi))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 16))
def test_the_saturated_convolution_is_the_plain_sums_in_order(seed: int, bins: int) -> None:
    """Every bin below the top is ``Σ_{m ≤ k} first[k − m]·second[m]`` summed from ``m = 0``
    up, the top bin ``Σ_i first[i]·tail[i]`` with ``tail`` cumsum's sums of ``second`` from
    the top down, summed in the two lanes of numpy's einsum on x86-64 (the order of the
    numpy code the compiled kernel replaced); tables broadcast against each other."""
    rng = np.random.default_rng(seed)
    first = rng.random((5, 3, 1, bins + 1)) * (rng.random((5, 3, 1, bins + 1)) < 0.7)
    second = rng.random((5, 1, 4, bins + 1)) * 10.0 ** rng.integers(-9, 1)
    result = _convolve(first, second, bins)
    assert result.shape == (5, 3, 4, bins + 1)
    a, b = np.broadcast_arrays(first, second)
    expected = np.zeros(result.shape)
    for index in np.ndindex(*result.shape[:-1]):
        for k in range(bins):
            total = 0.0
            for m in range(k + 1):
                total += a[index][k - m] * b[index][m]
            expected[index][k] = total
    tail = np.cumsum(b[..., ::-1], axis=-1)
    for index in np.ndindex(*result.shape[:-1]):
        expected[index][bins] = _two_lane_dot(a[index], tail[index])
    assert np.array_equal(_bits(result), _bits(expected))


def _two_lane_dot(x: np.ndarray, y: np.ndarray) -> float:
    """``Σ_i x[i]·y[i]`` summed in two lanes (even and odd ``i``), blocks of eight taken
    from their last pair, then pairs, the lanes added last (numpy's einsum on x86-64)."""
    lanes = [0.0, 0.0]
    i = 0
    while x.size - i >= 8:
        for step in (6, 4, 2, 0):
            for lane in (0, 1):
                lanes[lane] = float(x[i + step + lane] * y[i + step + lane]) + lanes[lane]
        i += 8
    for j in range(i, x.size):
        lanes[(j - i) % 2] = float(x[j] * y[j]) + lanes[(j - i) % 2]
    return lanes[0] + lanes[1]


def _kept_cells(rng: np.random.Generator, batch: int, cells: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per box a random choice of kept cells (repeats allowed) and 1.0 or 0.0 (padding)."""
    count = int(rng.integers(1, cells + 1))
    return (rng.integers(0, cells, size=(batch, count)),
            (rng.random((batch, count)) < 0.8).astype(np.float64))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 16))
def test_binned_values_are_the_product_with_one_hot_bins(seed: int, bins: int) -> None:
    """:func:`bin_values` is the gathered weights (row per entry, kept cells times 1.0 or
    0.0) times a one-hot table of each held value's bin, summed over the values in order:
    numpy's ``bincount`` of those products (which adds in the order it reads them, the
    values outside the box adding exact zeros)."""
    rng = np.random.default_rng(seed)
    batch, entries, cells, values = (int(n) for n in rng.integers(1, 7, size=4))
    weights = rng.random((5, cells, values)) * (rng.random((5, cells, values)) < 0.7)
    rows = rng.integers(-1, 5, size=(batch, entries))  # -1: the last (zero) row
    kept, real = _kept_cells(rng, batch, cells)
    inside = rng.random((batch, values)) < 0.6
    level = rng.integers(0, bins + 1, size=(batch, values))
    result = bin_values(weights, rows, kept, real, inside, level, bins)
    chosen = (weights[rows[:, :, None], kept[:, None, :]]
              * real[:, None, :, None] * inside[:, None, None, :])  # (B, e, c, values)
    slots = (np.arange(batch * entries * kept.shape[1]).reshape(batch, entries, -1, 1)
             * (bins + 1) + level[:, None, None, :])
    expected = np.bincount(slots.ravel(), weights=chosen.ravel(),
                           minlength=result.size).reshape(result.shape)
    assert np.array_equal(_bits(result), _bits(expected))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 16))
def test_binned_pairs_are_the_bincount_of_their_weights(seed: int, bins: int) -> None:
    """:func:`bin_pairs` adds each (box, value) pair's weight under every (entry, kept cell)
    into its bin, pairs in order: numpy's ``bincount`` over the same slots."""
    rng = np.random.default_rng(seed)
    batch, entries, cells, values = (int(n) for n in rng.integers(1, 7, size=4))
    by_value = rng.random((5, values, cells))
    inside = rng.random((batch, values)) < 0.6
    boxes, held = np.nonzero(inside)
    rows = rng.integers(-1, 5, size=(boxes.size, entries))
    kept, real = _kept_cells(rng, batch, cells)
    level = rng.integers(0, bins + 1, size=(boxes.size, entries))
    result = bin_pairs(by_value, rows, held, boxes, kept, real, level, bins)
    chosen = by_value[rows[:, :, None], held[:, None, None], kept[boxes][:, None, :]] * \
        real[boxes][:, None, :]  # (pairs, e, c)
    slots = ((boxes[:, None, None] * entries + np.arange(entries)[None, :, None])
             * kept.shape[1] + np.arange(kept.shape[1])) * (bins + 1) + level[:, :, None]
    expected = np.bincount(slots.ravel(), weights=chosen.ravel(),
                           minlength=result.size).reshape(result.shape)
    assert np.array_equal(_bits(result), _bits(expected))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1.0, 2.0, 4.0]), st.integers(1, 40))
def test_floored_levels_are_numpys_quotient_scaling_and_floor(seed: int, scale: float,
                                                              top: int) -> None:
    """:func:`floor_levels` rounds as numpy's element-wise division, products, floor and
    minimum do (a rounded-down bin: never above ``top``, never above the real quotient)."""
    rng = np.random.default_rng(seed)
    total = rng.random((9, 7)) * 10.0 ** rng.integers(-3, 3)
    total[rng.random(total.shape) < 0.2] = 0.0
    width = rng.random(9) + 1e-3
    keep = scaled_down(1.0, 6.0 * EPS)
    result = floor_levels(total, width, scale, keep, top)
    expected = np.minimum(np.floor(total / width[:, None] * scale * keep), float(top))
    assert result.dtype == np.int64
    assert np.array_equal(result, expected.astype(np.int64))


def test_the_kernels_compile_where_no_cache_can_be_written(monkeypatch) -> None:
    """Where numba finds no writable place for its cache (a read-only install without a
    home), a kernel is compiled without one instead of failing at import, to the same
    bits."""
    monkeypatch.setattr(numba.core.caching.CacheImpl, "_locator_classes", [])
    with pytest.raises(RuntimeError, match="cannot cache"):
        numba.njit(cache=True)(floor_levels.py_func)
    uncached = _compiled(floor_levels.py_func)
    total = np.random.default_rng(0).random((4, 5)) * 30.0
    width = np.full(4, 0.7)
    keep = scaled_down(1.0, 4.0 * EPS)
    assert np.array_equal(uncached(total, width, 2.0, keep, 24),
                          floor_levels(total, width, 2.0, keep, 24))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 7, 62, 63, 90]))
def test_distinct_rows_give_back_every_row(seed: int, width: int) -> None:
    """Packed integer keys (up to 62 columns) and numpy's row-wise unique (beyond) both list
    each distinct row once and index every row back."""
    rows = np.random.default_rng(seed).random((80, width)) < 0.1
    distinct, inverse = _distinct_rows(rows)
    assert inverse.shape == (80,)
    assert np.array_equal(distinct[inverse], rows)
    assert len({tuple(row) for row in distinct}) == distinct.shape[0]


def _kept_along_axis(reach: dict[int, np.ndarray]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    kept = {}
    for u, reached in reach.items():
        count = max(1, int(reached.sum(axis=1).max()))
        ranked = np.argsort(~reached, axis=1, kind="stable")[:, :count]
        kept[u] = (ranked, np.take_along_axis(reached, ranked, axis=1).astype(np.float64))
    return kept


def _rows_along_axis(bounds, u: int, kept: dict, batch: int) -> np.ndarray:
    factor = bounds.elimination.factors[u]
    parents = factor.variables[:-1]
    row_of = np.broadcast_to(factor.row_of, (batch, *factor.row_of.shape))
    for axis, p in enumerate(parents, start=1):
        if p in kept:
            shape = [batch] + [1] * len(parents)
            shape[axis] = kept[p][0].shape[1]
            row_of = np.take_along_axis(row_of, kept[p][0].reshape(shape), axis=axis)
    return row_of


def _factor_along_axis(bounds, u: int, table: np.ndarray, kept: dict) -> np.ndarray:
    batch = table.shape[0]
    if u in kept:
        index, real = kept[u]
        extra = (1,) * (table.ndim - 3)
        table = np.take_along_axis(table, index.reshape(batch, 1, -1, *extra), axis=2)
        table = table * real.reshape(batch, 1, -1, *extra)
    row_of = _rows_along_axis(bounds, u, kept, batch)
    padded = np.concatenate([table, np.zeros_like(table[:, :1])], axis=1)
    boxes = np.arange(batch).reshape(batch, *([1] * (row_of.ndim - 1)))
    return padded[boxes, row_of]


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 12))
def test_the_excess_bounds_gathers_are_the_along_axis_ones(seed: int, bins: int) -> None:
    """The kept cells, the CPT row each combination of kept parent cells picks and a factor
    cut to the kept cells (with and without a bin axis): each equal to the
    ``take_along_axis`` computation it replaced."""
    network, specs = random_discrete_network(seed)
    bounds = network._excess
    rng = np.random.default_rng(seed)
    lo, hi = _random_boxes(rng, specs, 30)
    batch = lo.shape[0]
    reach = bounds._reached_cells(lo, hi)
    kept = bounds._kept(reach)
    reference = _kept_along_axis(reach)
    assert kept.keys() == reference.keys()
    for u, (index, real) in kept.items():
        assert np.array_equal(index, reference[u][0])
        assert np.array_equal(_bits(real), _bits(reference[u][1]))
    for u, factor in enumerate(bounds.elimination.factors):
        rows = bounds._rows(u, kept, batch)
        assert np.array_equal(rows, _rows_along_axis(bounds, u, kept, batch))
        cells = len(bounds.elimination.cells[u])
        for extra in ((), (bins + 1,)):
            table = rng.random((batch, max(1, factor.row_of.max() + 1), cells, *extra))
            assert np.array_equal(_bits(bounds._factor(u, table, kept)),
                                  _bits(_factor_along_axis(bounds, u, table, kept)))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_one_hot_records_count_in_int32_as_in_int64(seed: int) -> None:
    """Each category a box allows (its 1 fits and every other column of its group may be 0),
    counted in int32, is the one the int64 count gave, boxes that allow none included."""
    _, specs = random_discrete_network(seed)
    groups = _groups(specs)
    rng = np.random.default_rng(seed)
    lo, hi = _random_boxes(rng, specs, 50)
    lo[rng.random(lo.shape) < 0.1] = 1.0  # some columns forced to 1: categories shut
    hi = np.maximum(hi, lo)
    records = _onehot(groups, torch.from_numpy(lo), torch.from_numpy(hi))
    if not groups:
        assert records is None
        return
    assert records is not None
    for g, group in enumerate(groups):
        g_lo, g_hi = lo[:, group], hi[:, group]
        zero_fails = ~((g_lo <= 0.0) & (g_hi >= 0.0))
        one_fits = (g_lo <= 1.0) & (g_hi >= 1.0)
        others = zero_fails.sum(axis=1, keepdims=True, dtype=np.int64) - zero_fails
        expected = one_fits & (others == 0)
        assert np.array_equal(records.allowed[:, g, :len(group)].numpy(), expected)


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4), st.booleans())
def test_contractions_along_the_cached_steps_are_numpys_einsum(seed: int, count: int,
                                                              pairs_directly: bool) -> None:
    """:func:`planned_einsum`, run twice (the second time from its cache), returns what
    ``np.einsum`` gives along the greedy path (``optimize=False`` for a pair or one operand
    with ``pairs_directly``), bit for bit; operands with size-1 axes that broadcast
    included."""
    rng = np.random.default_rng(seed)
    letters = "bcdef"
    sizes = {letter: int(rng.integers(1, 5)) for letter in letters}
    terms = []
    for _ in range(count):
        chosen = sorted(rng.choice(list(letters), size=int(rng.integers(0, 4)), replace=False))
        terms.append("a" + "".join(chosen))
    used = sorted({letter for term in terms for letter in term[1:]})
    kept = [letter for letter in used if rng.random() < 0.5]
    subscripts = ",".join(terms) + "->a" + "".join(kept)
    batch = int(rng.integers(1, 6))
    operands = [rng.random([batch] + [1 if rng.random() < 0.2 else sizes[letter]
                                      for letter in term[1:]]) for term in terms]
    expected = np.einsum(subscripts, *operands,
                         optimize=False if pairs_directly and count <= 2 else "greedy")
    paths: dict = {}
    for _ in range(2):
        result = planned_einsum(paths, subscripts, operands, pairs_directly)
        assert result.shape == expected.shape
        assert np.array_equal(_bits(result), _bits(expected))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40))
def test_the_excess_bounds_batch_tables_cut_to_a_chunk_are_the_chunks_own(seed: int,
                                                                          chunk: int) -> None:
    """The per-node excess and the plain tables' lower ends that the excess bound computes
    once per batch, cut to a chunk of its rows, are bit for bit what the chunk's own
    computation gives (each row's floats do not depend on the rows beside it)."""
    network, specs = random_discrete_network(seed)
    bounds = network._excess
    rng = np.random.default_rng(seed)
    lo, hi = _random_boxes(rng, specs, 40)
    coefficients = rng.normal(size=lo.shape)
    excess = bounds._excesses(lo, hi, coefficients)
    own = _OwnMasses(bounds.elimination, lo, hi)
    for start in range(0, lo.shape[0], chunk):
        rows = slice(start, start + chunk)
        alone = bounds._excesses(lo[rows], hi[rows], coefficients[rows])
        assert alone.keys() == excess.keys()
        for u, (inside, levels) in alone.items():
            assert np.array_equal(inside, excess[u][0][rows])
            assert np.array_equal(_bits(levels), _bits(excess[u][1][rows]))
        for u in range(len(bounds.elimination.factors)):
            expected = bounds.elimination.own_masses(u, lo[rows], hi[rows]).lower
            assert np.array_equal(_bits(own.lower(u, rows)), _bits(expected))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 40))
def test_a_boxs_excess_moments_do_not_depend_on_the_boxes_beside_it(
        seed: int, first: int, second: int) -> None:
    """``open_pieces`` computes the moments of both linear pieces' excess in one call on the
    two pieces' rows stacked, and ``true_share`` reads its pieces' means from there: each
    row's mean and deviation are the bits the row's own call gives (as ``true_share``
    computed them alone before), coefficients of either sign, zeros and infinities
    included."""
    _, specs = random_discrete_network(seed)
    rng = np.random.default_rng(seed)
    lo, hi = _random_boxes(rng, specs, first + second)
    groups = tuple(tuple(group) for group in _groups(specs))
    coefficients = rng.normal(size=lo.shape) * rng.choice([0.0, 1e-3, 1.0, 1e3], size=lo.shape)
    coefficients[rng.random(lo.shape) < 0.02] = np.inf
    allowed = _allowed_categories(lo, hi, groups)
    mean, deviation = _excess_moments(coefficients, lo, hi, groups, allowed)
    for rows in (slice(0, first), slice(first, first + second)):
        alone_mean, alone_deviation = _excess_moments(
            coefficients[rows], lo[rows], hi[rows], groups, [mask[rows] for mask in allowed])
        assert np.array_equal(_bits(mean[rows]), _bits(alone_mean))
        assert np.array_equal(_bits(deviation[rows]), _bits(alone_deviation))


_ENDS = st.one_of(st.floats(-60.0, 60.0), st.sampled_from([-np.inf, np.inf, 0.0, 1.0]))


@settings(max_examples=80, deadline=None)
@given(st.booleans(), st.integers(0, 2**32 - 1),
       st.lists(st.tuples(_ENDS, _ENDS), min_size=1, max_size=12))
def test_gaussian_rows_in_one_call_are_each_rows_own_enclosure(
    truncated: bool, seed: int, ends: list[tuple[float, float]]
) -> None:
    """A node's normal or truncated normal rows enclosed at once (parameters broadcast) give
    every row's own ``interval`` bit for bit: tails, the central erf branch, infinite and
    empty intervals, a row whose scale is a variance."""
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(int(rng.integers(1, 6))):
        mean, sigma = float(rng.normal(0.0, 10.0)), float(rng.uniform(0.05, 20.0))
        scale = {"std": sigma} if index % 2 else {"variance": sigma * sigma}
        if truncated:  # a window holding the mean, open above on some rows
            low, high = mean - rng.uniform(0.1, 3.0, size=2) * sigma * [1.0, -1.0]
            rows.append(TruncatedNormal(mean=mean, lower=float(low),
                                        upper=None if index % 3 else float(high), **scale))
        else:
            rows.append(Normal(mean=mean, **scale))
    width = len(ends)
    a = np.array([e[0] for e in ends] * 3).reshape(3, width)
    b = np.array([e[1] for e in ends] * 3).reshape(3, width)
    a[1], b[1] = a[1] + rng.normal(0.0, 1.0, width), b[1] + rng.normal(0.0, 1.0, width)
    a[2] = b[2] - rng.uniform(0.0, 0.5, width)  # narrow, often near a mean
    table = GaussianRows.of(rows)
    assert table is not None
    together = table.interval(a, b)
    for index, row in enumerate(rows):
        alone = row.interval(a, b)
        for end in ("value", "lower", "upper"):
            assert np.array_equal(_bits(getattr(together, end)[:, index]),
                                  _bits(getattr(alone, end)))


def test_gaussian_rows_need_one_gaussian_kind() -> None:
    """Rows mixing normal and truncated normal (or another kind) keep the per-row path."""
    normal = Normal(mean=0.0, std=1.0)
    assert GaussianRows.of([normal, TruncatedNormal(mean=0.0, std=1.0, lower=-1.0)]) is None
    assert GaussianRows.of([normal, Categorical(probabilities=[0.5, 0.5])]) is None
    assert GaussianRows.of([normal]) is not None
