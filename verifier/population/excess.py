"""Lower bounds of the probability that a box's points lie past a linear threshold, under a
Bayesian network: ``P(x ∈ box ∧ c·x − min_box(c·x) > τ)``.

Why: on a box that a decision boundary cuts, a linear lower bound ``φ`` of an atom (CROWN's,
:class:`verifier.bounds.LinearBounds`) proves the atom at every point where ``φ > 0``; the
probability of that part is mass PV can credit without splitting the box.

The excess ``c·x − min_box(c·x)`` is a sum over the network's nodes of ``t_u(x_u) ≥ 0``: a
categorical node contributes ``c_cat − min`` over its categories in the box, an integer node
``c·x_u − min(c·lo_u, c·hi_u)``. Each ``t_u`` is cut into bins of width ``h`` and rounded
*down* (``k_u ≤ t_u / h`` in real arithmetic, with margins for the float evaluation of
``t_u``), and ``h`` is chosen so that ``N·h > τ`` for ``N`` = ``bins``; then
``Σ k_u ≥ N`` implies the excess exceeds ``τ``. Rounding down loses up to one bin per term, so
a node *takes in* its parents whose cells each hold one value (see :attr:`ExcessBounds.
taken_in`): its factor already has their cells on its axes, so its bin is ``⌊(t_u + Σ t_p) /
h⌋`` per combination of their cells and one bin is lost for the family where one per node was
(Adult-13: hours-per-week takes in education and marital status). Nodes whose factor is one
entry per box (every variable it reads has one cell: Adult-13's four independent nodes) are
binned together apart from the elimination, on a grid ``R`` times finer, their sum's fine bin
rounded down to a bin once: each node loses under ``1/R`` of a bin where alone it lost
under one (see :meth:`ExcessBounds._scalar_table`). The distribution of
``min(Σ k_u, N)`` is a
variable elimination over the network's cells (the one of
:mod:`verifier.population.elimination`) whose factors carry a bin axis, combined by
convolution saturated at ``N``; its top bin bounds the wanted probability from below.

Soundness: every table entry is a lower end of its probability; all terms are non-negative,
so sums of products of lower ends are lower bounds, widened by a relative margin for the
float rounding of the products and the sums (convolutions add at most ``N + 1`` terms per
entry); the sums run in compiled loops (:mod:`verifier.population.excess_kernels`) in a fixed
order, and the bound of a float sum of non-negative terms depends on their count, not their
order. Nodes whose values cannot be listed (continuous distributions, latent nodes)
contribute ``t_u ≥ 0`` taken as 0, which only lowers the bound. Boxes with infinite sides, a
non-finite or non-positive threshold, or non-finite coefficients get 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import NamedTuple

import numpy as np

from verifier.numerics import EPS, relative_margin, scaled_down, scaled_up
from verifier.population.distributions import Categorical
from verifier.population.elimination import LETTERS, Elimination, RowTable, planned_einsum
from verifier.population.excess_kernels import (
    bin_pairs,
    bin_values,
    convolve_rows,
    floor_levels,
)
from verifier.population.network_view import NetworkNode
from verifier.population.rounding import TINY

DEFAULT_BINS = 12
FINE_STEPS = 2
"""Fine bins per bin for the nodes whose factors hold one cell (:attr:`ExcessBounds.
scalar_nodes`): a power of two, so that a bin's width divided by it is exact. On Adult-13's
replayed calls 2 gave +3.6 % credit at 0.94× the bound's CPU, 4 another +1.1 % for 1.05×
(the fine convolutions grow as ``R²``)."""


@dataclass(frozen=True)
class _Values:
    """A node's listable values: ``values`` (category indices for a categorical node),
    ``probability_lower`` ``(rows, values)`` lower ends of each CPT row's probability of
    each value, and ``member`` ``(cells, values)`` which cell holds each value."""

    values: np.ndarray
    probability_lower: np.ndarray
    member: np.ndarray


def _listed_values(node: NetworkNode, table: RowTable | None, cells_low: np.ndarray,
                   cells_high: np.ndarray, cells_point: np.ndarray) -> _Values | None:
    """The values of an observed node whose CPT rows all have finitely many values
    (``table``: their shared table, see :class:`~verifier.population.elimination.RowTable`;
    None otherwise)."""
    distributions = [row.distribution for row in node.cpt]
    if node.latent:
        return None
    if node.categorical:
        weights = np.stack([d.weights for d in distributions])  # type: ignore[union-attr]
        margin = max(d.margin for d in distributions)  # type: ignore[union-attr]
        values = np.arange(node.width, dtype=np.float64)
        lower = scaled_down(weights, margin)
    else:
        if table is None:
            return None
        values = table.values
        lower = scaled_down(table.probabilities, table.margin)
    inside_gap = (values[None, :] > cells_low[:, None]) & (values[None, :] < cells_high[:, None])
    on_point = cells_point[:, None] & (values[None, :] == cells_low[:, None])
    member = np.where(cells_point[:, None], on_point, inside_gap)
    return _Values(values, np.clip(lower, 0.0, 1.0), member.astype(np.float64))


class _Levels(NamedTuple):
    """A node's bins (:meth:`ExcessBounds._bins`): ``inside`` ``(B, values)`` whether each
    box holds each value; for a node without taken-in parents ``boxes`` is every box,
    ``values`` None and ``level`` ``(B, 1…, values)``; for one with them ``boxes`` and
    ``values`` ``(pairs,)`` list the held pairs and ``level`` is ``(pairs, parent cells…)``."""

    inside: np.ndarray
    boxes: np.ndarray
    values: np.ndarray | None
    level: np.ndarray


class ExcessBounds:
    """:func:`excess_lower` for one network (value lists built once)."""

    def __init__(self, elimination: Elimination) -> None:
        self.elimination = elimination
        self._paths: dict[tuple, tuple] = {}

    @cached_property
    def listed(self) -> list[_Values | None]:
        elimination = self.elimination
        return [
            _listed_values(node, table, cells.low, cells.high, cells.point)
            for node, table, cells in zip(elimination.network.nodes, elimination.row_tables,
                                          elimination.cells, strict=True)
        ]

    @cached_property
    def weights(self) -> list[np.ndarray | None]:
        """Per listed node, ``(rows + 1, cells, values)``: each CPT row's lower end of each
        value's probability on the cell holding it (0 on the others), and a last row of
        zeros that the parent cells picking no row (``-1``) read."""
        tables: list[np.ndarray | None] = []
        for listed in self.listed:
            if listed is None:
                tables.append(None)
                continue
            weights = listed.probability_lower[:, None, :] * listed.member[None, :, :]
            tables.append(np.concatenate([weights, np.zeros_like(weights[:1])]))
        return tables

    @cached_property
    def by_value(self) -> list[np.ndarray | None]:
        """:attr:`weights` with the value axis before the cell axis, ``(rows + 1, values,
        cells)``, contiguous."""
        return [None if weights is None else np.ascontiguousarray(np.moveaxis(weights, 2, 1))
                for weights in self.weights]

    @cached_property
    def listed_columns(self) -> np.ndarray:
        """Which columns belong to nodes whose values are listed (the only ones whose excess
        the bound counts)."""
        elimination = self.elimination
        width = sum(len(columns) for columns in elimination.columns)
        mask = np.zeros(width, dtype=bool)
        for u, listed in enumerate(self.listed):
            if listed is not None:
                mask[elimination.columns[u]] = True
        return mask

    @cached_property
    def taken_in(self) -> dict[int, tuple[int, ...]]:
        """Per node, the parents whose excess its bins also read (module docstring): listed
        parents with more than one cell, each cell holding exactly one value, so a
        combination of parent cells fixes their excess. Each parent is taken in once, by the
        child with the most listed values that can (ties: the first node); a node taken in
        takes in none (its own factor then carries no bins)."""
        elimination = self.elimination
        listed = self.listed

        def single_valued(p: int) -> bool:
            values = listed[p]
            return (values is not None and len(elimination.cells[p]) > 1
                    and bool((values.member.sum(axis=1) == 1.0).all()))

        taken: set[int] = set()
        plan: dict[int, tuple[int, ...]] = {}
        sizes = [-1 if values is None else values.values.size for values in listed]
        for u in sorted(range(len(listed)), key=lambda v: -sizes[v]):
            if listed[u] is None or u in taken:
                continue
            parents = tuple(p for p in elimination.factors[u].variables[:-1]
                            if single_valued(p) and p not in taken and p not in plan)
            if parents:
                plan[u] = parents
                taken.update(parents)
        return plan

    @cached_property
    def scalar_nodes(self) -> tuple[int, ...]:
        """The listed nodes, neither taking parents in nor taken in, whose factor's variables
        each have one cell: such a factor is one entry per box, a constant of the
        elimination, so these nodes' excesses can be summed on their own before the
        elimination reads them. Empty when fewer than two (one node gains nothing)."""
        elimination = self.elimination
        taken = {p for parents in self.taken_in.values() for p in parents}
        nodes = tuple(
            u for u, factor in enumerate(elimination.factors)
            if self.listed[u] is not None and u not in taken and u not in self.taken_in
            and all(len(elimination.cells[v]) == 1 for v in factor.variables))
        return nodes if len(nodes) > 1 else ()

    def lower(self, lo: np.ndarray, hi: np.ndarray, coefficients: np.ndarray,
              threshold: np.ndarray, bins: int | None = None, chunk: int = 128) -> np.ndarray:
        """Sound lower bounds ``(B,)`` of ``P(x ∈ [lo, hi] ∧ c·x − min_box(c·x) > τ)`` for
        boxes ``(B, columns)`` in the network's column order, coefficient rows ``c``
        ``(B, columns)`` and thresholds ``τ`` ``(B,)`` (see the module docstring). The minimum
        is over the box's intervals and, for a categorical node, over the categories the box
        allows. ``bins``: ``N`` (default :data:`DEFAULT_BINS`); boxes are bounded ``chunk``
        at a time, sorted by how many cells they reach (similar boxes share a chunk, whose
        tables are cut to the largest count in it)."""
        bins = DEFAULT_BINS if bins is None else bins
        batch = lo.shape[0]
        result = np.zeros(batch)
        usable = (
            np.isfinite(threshold) & (threshold > 0.0)
            & np.isfinite(coefficients).all(axis=1)
            & np.isfinite(lo).all(axis=1) & np.isfinite(hi).all(axis=1)
        )
        with np.errstate(invalid="ignore", over="ignore"):
            spread = np.abs(coefficients) * np.where(np.isfinite(hi - lo), hi - lo, np.inf)
        # only listed nodes add to the binned excess: if their columns cannot pass τ, 0
        usable &= spread[:, self.listed_columns].sum(axis=1) > threshold
        rows = np.flatnonzero(usable)
        if rows.size == 0:
            return result
        reach = self._reached_cells(lo[rows], hi[rows])
        spread = np.ones(rows.size)
        for reached in reach.values():
            spread *= reached.sum(axis=1)
        ranked = np.argsort(spread, kind="stable")  # similar scopes share a chunk
        rows = rows[ranked]
        # each box's t_u per node, computed once for the batch (row by row: the same
        # floats a chunk's own computation gives)
        excess = self._excesses(lo[rows], hi[rows], coefficients[rows])
        own = _OwnMasses(self.elimination, lo[rows], hi[rows])
        width = scaled_up(threshold[rows] / bins, 8.0 * EPS)
        scalar = self._scalar_table(excess, width, bins)
        for start in range(0, rows.size, chunk):
            part = slice(start, start + chunk)
            chunk_reach = {u: reached[ranked[part]] for u, reached in reach.items()}
            chunk_excess = {u: (inside[part], own[part]) for u, (inside, own) in excess.items()}
            result[rows[part]] = self._saturated(
                partial(own.lower, rows=part), chunk_excess, width[part], bins,
                self._kept(chunk_reach), None if scalar is None else scalar[part])
        return result

    def _scalar_table(self, excess: dict[int, tuple[np.ndarray, np.ndarray]],
                      width: np.ndarray, bins: int) -> np.ndarray | None:
        """``(B, N + 1)``: lower ends of ``P(x_S ∈ box, bin)`` for the nodes ``S`` of
        :attr:`scalar_nodes` taken together (None without them), their bin ``⌊K / R⌋`` of
        ``K = min(Σ_u k_u, N·R)``, each ``k_u = min(⌊t_u·R / h⌋, N·R)`` rounded down in real
        arithmetic on a grid ``R`` = :data:`FINE_STEPS` times finer. Since ``k_u ≤ t_u·R / h``,
        ``⌊K / R⌋ ≤ Σ_u t_u / h``: the group is one binned term of the bound in which each
        node loses under ``1/R`` of a bin where alone it lost under one (the floor of ``K / R``
        loses nothing more: with integer bins ``m`` of the other terms, ``⌊K / R⌋ + m ≥ N``
        exactly when ``K + R·m ≥ N·R``). ``P`` is each node's CPT row (its
        one cell's) summed over the values its box holds by bin, the nodes independent given
        the one-cell variables their rows read; the fine tables are convolved saturated at
        ``N·R`` (:func:`_convolve`) and every ``R`` fine bins summed into one (the last fine
        bin, ``≥ N·R``, is the last bin)."""
        nodes = self.scalar_nodes
        if not nodes:
            return None
        fine = bins * FINE_STEPS
        joint: np.ndarray | None = None
        for u in nodes:
            inside, own = excess[u]
            factor = self.elimination.factors[u]
            row = int(factor.row_of.reshape(-1)[0])  # its only entry; -1: none (zero row)
            weights = self.weights[u]
            assert weights is not None
            # ⌊t·R / h⌋ rounded down: one division's rounding (the product by R, a power of
            # two, is exact), covered as in :meth:`_bins`
            level = floor_levels(own, width, float(FINE_STEPS), scaled_down(1.0, 4.0 * EPS),
                                 fine)
            batch = inside.shape[0]  # each box: the row's lower ends on its one cell
            cells, real = _every_cell(batch, 1)
            table = bin_values(weights, np.full((batch, 1), row), cells, real, inside, level,
                               fine).reshape(batch, fine + 1)
            joint = table if joint is None else _convolve(joint, table, fine)
        assert joint is not None
        coarse = np.empty((joint.shape[0], bins + 1))
        coarse[:, :bins] = joint[:, :fine].reshape(-1, bins, FINE_STEPS).sum(axis=2)
        coarse[:, bins] = joint[:, fine]
        return coarse

    def _reached_cells(self, lo: np.ndarray, hi: np.ndarray) -> dict[int, np.ndarray]:
        """Per observed node with more than one cell: ``(B, cells)``, the cells each box
        reaches (a superset: a closed interval meeting the cell, or an allowed category in
        it). A cell no box reaches carries no mass of the box."""
        elimination = self.elimination
        reach = {}
        for u, node in enumerate(elimination.network.nodes):
            cells = elimination.cells[u]
            if len(cells) <= 1 or node.latent:
                continue
            columns = elimination.columns[u]
            listed = self.listed[u]
            if node.categorical and listed is not None:
                allowed = Categorical.category_mask(lo[:, columns], hi[:, columns])
                reach[u] = allowed.astype(np.float64) @ listed.member.T > 0.0
            elif not node.categorical:
                a, b = lo[:, columns[0]], hi[:, columns[0]]
                reach[u] = np.maximum(a[:, None], cells.low[None, :]) <= np.minimum(
                    b[:, None], cells.high[None, :])
        return reach

    # ------------------------------------------------------------------ bins
    def _excesses(self, lo: np.ndarray, hi: np.ndarray, coefficients: np.ndarray
                  ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """:meth:`_excess` of every listed node."""
        return {u: self._excess(u, lo, hi, coefficients)
                for u, listed in enumerate(self.listed) if listed is not None}

    def _excess(self, u: int, lo: np.ndarray, hi: np.ndarray,
                coefficients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per box and listed value of node ``u`` ``(B, values)``: whether the box holds it,
        and a lower end ``≥ 0`` in real arithmetic of its ``t_u`` (0 off the box)."""
        listed = self.listed[u]
        assert listed is not None
        node = self.elimination.network.nodes[u]
        columns = self.elimination.columns[u]
        if node.categorical:
            inside = Categorical.category_mask(lo[:, columns], hi[:, columns])
            c = coefficients[:, columns]
            smallest = np.where(inside, c, np.inf).min(axis=1)
            smallest = np.where(np.isfinite(smallest), smallest, 0.0)
            excess = scaled_down(c - smallest[:, None], 2.0 * EPS)
        else:
            column = columns[0]
            values = listed.values
            inside = (values[None, :] >= lo[:, column:column + 1]) & (
                values[None, :] <= hi[:, column:column + 1])
            c = coefficients[:, column:column + 1]
            smallest = np.minimum(c * lo[:, column:column + 1], c * hi[:, column:column + 1])
            products = c * values[None, :]
            scale = np.abs(products).max(axis=1, keepdims=True) + np.abs(smallest)
            excess = (products - smallest) - 4.0 * EPS * scale
        return inside, np.maximum(np.where(inside, excess, 0.0), 0.0)

    def _bins(self, u: int, excess: dict[int, tuple[np.ndarray, np.ndarray]],
              width: np.ndarray, bins: int, kept: dict[int, tuple[np.ndarray, np.ndarray]]
              ) -> _Levels | None:
        """The bin ``min(⌊(t_u + Σ t_p) / h⌋, N)`` of node ``u``, rounded down in real
        arithmetic (``p`` over :attr:`taken_in`; parent axes cut to ``kept``, size 1 for a
        parent not taken in; see :class:`_Levels`); None when every bin is 0 (a node the bins
        need not track). ``excess``: :meth:`_excesses` of the boxes.

        A value outside a box has no mass of it, so a node that takes in parents is binned
        only at the ``(box, value)`` pairs the box holds (a box of Adult-13 1×16 holds 28 %
        of hours-per-week's values on average). Whether any bin is positive is judged as over
        every pair, outside ones included: by the largest entry, the sum of each term's
        largest value, whose float sum, quotient, scaling and floor are all non-decreasing in
        every term."""
        inside, own = excess[u]
        parents = self.elimination.factors[u].variables[:-1]
        taken = self.taken_in.get(u, ())
        batch = own.shape[0]
        boxes, values = np.nonzero(inside) if taken else (np.arange(batch), None)
        total = own[boxes, values] if taken else own
        total = total.reshape(total.shape[0], *([1] * len(parents)), *total.shape[1:])
        peak = own.max(axis=1, initial=0.0)
        for axis, p in enumerate(parents):
            if p not in taken:
                continue
            listed = self.listed[p]
            assert listed is not None
            per_cell = excess[p][1][:, np.argmax(listed.member, axis=1)]
            if p in kept:
                per_cell = per_cell[np.arange(batch)[:, None], kept[p][0]]
            shape = [boxes.size] + [1] * len(parents)
            shape[axis + 1] = per_cell.shape[1]
            total = total + per_cell[boxes].reshape(shape)
            peak = peak + per_cell.max(axis=1)
        # a float sum of m + 1 non-negative terms is at most (1 + ε)^m ≤ 1 + 2mε times the
        # real one; the division rounds by one more ε
        margin = (4.0 + 2.0 * len(taken)) * EPS
        if not (np.floor(scaled_down(peak / width, margin)) > 0.0).any():
            return None
        entries = math.prod(total.shape[1:])  # explicit: a box may hold none of u's values
        level = floor_levels(total.reshape(boxes.size, entries), width[boxes], 1.0,
                             scaled_down(1.0, margin), bins)
        return _Levels(inside, boxes, values, level.reshape(total.shape))

    def _binned_table(self, u: int, found: _Levels, bins: int,
                      kept: dict[int, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """``(B, parent cells…, cells, N + 1)``: lower ends of ``P(x_u ∈ box ∩ cell, bin)``
        under the row the parent cells pick (cells cut to ``kept``, see :meth:`_factor`),
        computed for the picked rows and kept cells only; ``found`` from :meth:`_bins`."""
        listed = self.listed[u]
        assert listed is not None
        inside, level = found.inside, found.level
        batch = inside.shape[0]
        weights = self.weights[u]
        assert weights is not None
        row_of = self._rows(u, kept, batch)
        cells, real = kept[u] if u in kept else _every_cell(batch, weights.shape[1])
        if found.values is None:  # one bin per value: a product with its one-hot bins
            flat = bin_values(weights, row_of.reshape(batch, -1), cells, real, inside,
                              level.reshape(batch, -1), bins)  # its parent axes have size 1
            return flat.reshape(*row_of.shape, cells.shape[1], bins + 1)
        # bins per combination of parent cells: each held (box, value) pair adds its weight
        # under every (parent cells, cell) entry into that entry's bin; per entry the pairs
        # come in the order of their values, as a sum over the value axis would take them
        boxes, values = found.boxes, found.values
        pairs = boxes.size
        rows = row_of[boxes]  # (pairs, parent cells…)
        by_value = self.by_value[u]  # (rows + 1, values, cells)
        # level: (pairs, parent cells…), size 1 on the axes of parents not taken in
        entries = math.prod(rows.shape[1:])  # explicit: there may be no pairs
        flat = bin_pairs(by_value, rows.reshape(pairs, entries), values, boxes, cells, real,
                         np.broadcast_to(level, rows.shape).reshape(pairs, entries), bins)
        return flat.reshape(*row_of.shape, cells.shape[1], bins + 1)

    def _rows(self, u: int, kept: dict[int, tuple[np.ndarray, np.ndarray]],
              batch: int) -> np.ndarray:
        """``(B, parent cells…)``: the CPT row of node ``u`` each combination of kept parent
        cells picks (``-1``: none)."""
        factor = self.elimination.factors[u]
        parents = factor.variables[:-1]
        if not any(p in kept for p in parents):
            return np.broadcast_to(factor.row_of, (batch, *factor.row_of.shape))
        # one gather: per parent axis its kept cells per box, or all its cells
        index = []
        for axis, p in enumerate(parents, start=1):
            shape = [1] * (len(parents) + 1)
            if p in kept:
                shape[0], shape[axis] = batch, kept[p][0].shape[1]
                index.append(kept[p][0].reshape(shape))
            else:
                shape[axis] = factor.row_of.shape[axis - 1]
                index.append(np.arange(shape[axis]).reshape(shape))
        return factor.row_of[tuple(index)]

    def _factor(self, u: int, table: np.ndarray,
                kept: dict[int, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """Node ``u``'s factor from its per-row table ``(B, rows, cells[, N + 1])``: each
        variable's cell axis cut to the cells its box reaches (``kept[v]``: per box, the
        reached cells' indices padded to a common count, and which entries are real), then
        the row every combination of parent cells picks (zero for none). The factor is zero
        at the node's own padded entries, so every product through one is zero."""
        batch = table.shape[0]
        if u in kept:
            index, real = kept[u]
            extra = (1,) * (table.ndim - 3)
            table = np.moveaxis(table[np.arange(batch)[:, None], :, index], 1, 2)
            table = table * real.reshape(batch, 1, -1, *extra)
        row_of = self._rows(u, kept, batch)
        padded = np.concatenate([table, np.zeros_like(table[:, :1])], axis=1)
        boxes = np.arange(batch).reshape(batch, *([1] * (row_of.ndim - 1)))
        return padded[boxes, row_of]

    # ------------------------------------------------------------------ contraction
    @staticmethod
    def _kept(reach: dict[int, np.ndarray]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Per node with more than one cell: per box, the indices of the cells it reaches
        (``reach``, :meth:`_reached_cells`), padded to the largest count among the boxes
        (with cells it does not reach), and which entries are real (1.0) or padding (0.0),
        ``(B, count)`` each."""
        kept = {}
        for u, reached in reach.items():
            count = max(1, int(reached.sum(axis=1).max()))
            ranked = np.argsort(~reached, axis=1, kind="stable")[:, :count]
            kept[u] = (ranked, reached[np.arange(reached.shape[0])[:, None], ranked].astype(
                np.float64))
        return kept

    def _saturated(self, own: Callable[[int], np.ndarray],
                   excess: dict[int, tuple[np.ndarray, np.ndarray]], width: np.ndarray, bins: int,
                   kept: dict[int, tuple[np.ndarray, np.ndarray]],
                   scalar: np.ndarray | None = None) -> np.ndarray:
        """The lower bounds of one chunk of boxes (:meth:`lower`): ``own(u)``, node ``u``'s
        per-row lower table (:meth:`_OwnMasses.lower`), read for the factors without bins;
        ``scalar``: the chunk's :meth:`_scalar_table`, the factor of :attr:`scalar_nodes`."""
        elimination = self.elimination
        batch = width.shape[0]
        taken = {p for parents in self.taken_in.values() for p in parents}
        grouped = set(self.scalar_nodes) if scalar is not None else set()
        binned = {}
        for u in range(len(elimination.factors)):
            if self.listed[u] is None or u in taken or u in grouped:
                continue
            found = self._bins(u, excess, width, bins, kept)
            if found is not None:
                binned[u] = found
        if not binned and not (scalar is not None and scalar[:, 1:].any()):
            return np.zeros(batch)
        pending: list[tuple[np.ndarray, tuple[int, ...], bool]] = []
        if scalar is not None:
            pending.append((scalar, (), True))
        for u, factor in enumerate(elimination.factors):
            if u in grouped:
                continue
            if u in binned:
                table = self._binned_table(u, binned[u], bins, kept)
                pending.append((table, factor.variables, True))
            else:
                pending.append((self._factor(u, own(u), kept), factor.variables, False))
        for variable in elimination.order:
            involved = [item for item in pending if variable in item[1]]
            if not involved:  # a grouped node's own variable that no other factor reads
                continue
            pending = [item for item in pending if variable not in item[1]]
            pending.append(_eliminate(involved, variable, bins, self._paths))
        total = _combine(pending, bins)
        terms = elimination.operations + len(elimination.factors) * (bins + 2) * 2
        if scalar is not None:  # the fine convolutions and the sums of R fine bins
            terms += len(grouped) * (bins * FINE_STEPS + 2) * 2 + FINE_STEPS
        return np.clip(scaled_down(total[:, bins], relative_margin(terms)) - TINY, 0.0, 1.0)


class _OwnMasses:
    """The lower ends of the nodes' own masses (:meth:`Elimination.own_masses`, ``(B, rows,
    cells)``) for the chunks of one batch of boxes, bit for bit what each chunk's own call
    gives: computed once for the whole batch, since a row's floats do not depend on the rows
    beside it (a numeric node's table lookups and elementwise arithmetic; a categorical
    node's sums along its categories, whose order is the same for every row)."""

    def __init__(self, elimination: Elimination, lo: np.ndarray, hi: np.ndarray) -> None:
        self.elimination = elimination
        self.lo, self.hi = lo, hi
        self._whole: dict[int, np.ndarray] = {}

    def lower(self, u: int, rows: slice) -> np.ndarray:
        """Node ``u``'s lower table for the batch's ``rows``."""
        if u not in self._whole:
            self._whole[u] = self.elimination.own_masses(u, self.lo, self.hi).lower
        return self._whole[u][rows]


def _every_cell(batch: int, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Every cell kept for each of ``batch`` boxes, each real (as :meth:`ExcessBounds._kept`
    gives them; a product by 1.0 is exact)."""
    return (np.broadcast_to(np.arange(cells), (batch, cells)), np.ones((batch, cells)))


def _letters(variables: tuple[int, ...], names: dict[int, str]) -> str:
    return "".join(names[v] for v in variables)


def _broadcast(table: np.ndarray, variables: tuple[int, ...], scope: tuple[int, ...],
               binned: bool) -> np.ndarray:
    """``table`` over ``variables`` (and a trailing bin axis if ``binned``) reshaped to
    broadcast over ``scope`` (same trailing axis)."""
    order = [variables.index(v) + 1 for v in scope if v in variables]
    axes = [0, *order, *([len(variables) + 1] if binned else [])]
    moved = table.transpose(axes)
    shape = [table.shape[0]]
    source = iter(moved.shape[1:])
    for v in scope:
        shape.append(next(source) if v in variables else 1)
    if binned:
        shape.append(moved.shape[-1])
    return moved.reshape(shape)


def _convolve(first: np.ndarray, second: np.ndarray, bins: int) -> np.ndarray:
    """Saturated convolution along the last axis (length ``N + 1``; the last bin holds
    ``≥ N``) of two broadcastable tables of non-negative entries: each bin a sum of at most
    ``N + 1`` non-negative products (:func:`~verifier.population.excess_kernels.
    convolve_rows`)."""
    shape = np.broadcast_shapes(first.shape, second.shape)
    levels = bins + 1
    return convolve_rows(np.broadcast_to(first, shape).reshape(-1, levels),
                         np.broadcast_to(second, shape).reshape(-1, levels), bins).reshape(shape)


def _eliminate(involved: list[tuple[np.ndarray, tuple[int, ...], bool]], variable: int,
               bins: int, paths: dict[tuple, tuple]
               ) -> tuple[np.ndarray, tuple[int, ...], bool]:
    """Multiply the factors that hold ``variable`` (convolving their bin axes) and sum the
    variable out (contraction paths cached in ``paths``, see
    :func:`~verifier.population.elimination.planned_einsum`)."""
    every = tuple(sorted({v for _, variables, _ in involved for v in variables}))
    scope = tuple(v for v in every if v != variable)
    binned = [item for item in involved if item[2]]
    plain = [item for item in involved if not item[2]]
    names = {v: LETTERS[i + 1] for i, v in enumerate(every)}
    target = "->a" + _letters(scope, names)
    if not binned:
        subscripts = ",".join("a" + _letters(vs, names) for _, vs, _ in plain) + target
        return planned_einsum(paths, subscripts, [t for t, _, _ in plain]), scope, False
    merged = _merge(binned, every, bins)
    subscripts = ",".join(
        ["a" + _letters(every, names) + "z", *("a" + _letters(vs, names) for _, vs, _ in plain)]
    ) + target + "z"
    operands = [merged, *(t for t, _, _ in plain)]
    return planned_einsum(paths, subscripts, operands), scope, True


def _merge(binned: list[tuple[np.ndarray, tuple[int, ...], bool]], every: tuple[int, ...],
           bins: int) -> np.ndarray:
    """The saturated convolution of binned factors over ``every`` (``(B, every…, N + 1)``,
    size-1 axes where no factor holds the variable), smallest scopes first."""
    parts = sorted(((table.size // table.shape[0], variables, table)
                    for table, variables, _ in binned), key=lambda item: item[0])
    _, scope, merged = parts[0]
    for _, variables, table in parts[1:]:
        union = tuple(v for v in every if v in scope or v in variables)
        merged = _convolve(_broadcast(merged, scope, union, True),
                           _broadcast(table, variables, union, True), bins)
        scope = union
    return _broadcast(merged, scope, every, True)


def _combine(pending: list[tuple[np.ndarray, tuple[int, ...], bool]], bins: int) -> np.ndarray:
    """The bin distribution ``(B, N + 1)`` from the scalar factors left after elimination."""
    batch = pending[0][0].shape[0]
    plain = np.ones(batch)
    binned: np.ndarray | None = None
    for table, variables, has_bins in pending:
        assert not variables
        if has_bins:
            binned = table if binned is None else _convolve(binned, table, bins)
        else:
            plain = plain * table
    if binned is None:
        return np.zeros((batch, bins + 1))
    return binned * plain[:, None]
