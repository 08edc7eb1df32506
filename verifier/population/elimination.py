"""Box probabilities of a Bayesian network by variable elimination, batched over boxes.

A box is a product of one interval (or one set of categories) per node, so its probability
under the network is a sum over the nodes' values of a product of one factor per node:

    P(box) = Σ_values Π_v P(x_v ∈ box_v ∧ x_v ∈ cell_v | parents in their cells).

Each node's value axis is cut into *cells*: the open gaps between the endpoints of its
children's CPT conditions, and the endpoints themselves where one of its distributions has
an atom (a categorical node's value is its category index). The cells refine every child's
rows, so each combination of parent cells selects exactly one row of a child (rows partition
the parents' space up to probability-zero sets, which the network validates). Node ``v``'s
factor holds, per box, combination of parent cells and own cell, the probability that the
row picked by the parent cells gives to ``box_v ∩ cell_v``. Eliminating the nodes one at a
time (a greedy small-factor-first order fixed once) costs a few small ``einsum`` calls per
batch, instead of one term per regime (combination of CPT rows) and box.

Soundness: every factor entry comes as an enclosure from its distribution; all terms are
non-negative, so the sum of products of the lower (upper) ends is a lower (upper) bound of the
exact sum of products. Float rounding in that computation is absorbed by the relative margin
of :func:`verifier.numerics.relative_margin` over a count of operations that
bounds the roundings any one term goes through, plus ``TINY`` for underflow (added to an
upper end only where some term is structurally non-zero, so an impossible box keeps its exact
0). An open end of a gap cell is taken as closed for a distribution with no atom there (same
probability); a purely atomic distribution (all mass on finitely many points, e.g. integer
values or category indices) has no mass between a float and the next one, so the open end
moves to the next float exactly; any other distribution (atoms and a density) takes the
closed interval for the upper end and the shifted one for the lower end.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import partial

import numpy as np

from verifier.numerics import EPS, down_array, relative_margin, scaled_down, scaled_up, up_array
from verifier.population.base import Distribution, lower_bound, upper_bound
from verifier.population.distributions import (
    Categorical,
    Normal,
    TruncatedNormal,
    truncated_normal_interval,
)
from verifier.population.network_view import NetworkNode, NodeNetwork
from verifier.population.rounding import TINY, Enclosure, normal_interval

try:  # the step np.einsum takes for a pair of operands along a path
    from numpy._core.einsumfunc import bmm_einsum as _pair_step
except ImportError:  # a numpy whose einsum contracts pairs otherwise
    _pair_step = None

LETTERS = string.ascii_letters


@dataclass(frozen=True)
class Cells:
    """A node's value cells: ``low[c] < x < high[c]`` for a gap, ``x = low[c]`` for a point."""

    low: np.ndarray
    high: np.ndarray
    point: np.ndarray

    def __len__(self) -> int:
        return int(self.low.size)

    def within(self, a: float, b: float) -> np.ndarray:
        """Which cells lie inside the closed interval ``[a, b]``."""
        return (self.low >= a) & (self.high <= b)


@dataclass(frozen=True)
class _Factor:
    """Node ``node``'s conditional factor: ``row_of[parent cells...]`` is the CPT row that
    applies (``-1``: no row, probability zero), over the axes ``variables`` (parents, then
    the node itself)."""

    node: int
    variables: tuple[int, ...]
    row_of: np.ndarray


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a boolean ``(B, k)`` matrix and each row's index among them
    (rows of up to 62 entries compared as packed integers)."""
    if rows.shape[1] > 62:
        distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
        return distinct, inverse.reshape(-1)
    keys = rows.astype(np.int64) @ (np.int64(1) << np.arange(rows.shape[1], dtype=np.int64))
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return rows[first], inverse.reshape(-1)


def _distinct_intervals(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ``(B,)`` interval ends: the index of one box per distinct ``(lo, hi)`` pair (the
    same bits: ``-0.0`` and ``0.0`` are distinct) and each box's index among them."""
    keys = np.stack([lo, hi], axis=1).view(np.int64)
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    ranked = keys[order]
    starts = np.ones(order.size, dtype=bool)
    starts[1:] = (ranked[1:] != ranked[:-1]).any(axis=1)
    inverse = np.empty(order.size, dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return order[starts], inverse


def _category_sums(mask: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``(P, rows)``: ``Σ_c mask[p, c] · weights[r, c]`` for ``(P, categories)`` masks and
    ``(rows, categories)`` weights, added category by category from the first, so every entry
    is summed in one order wherever its row stands."""
    total = np.zeros((mask.shape[0], weights.shape[0]))
    for category in range(weights.shape[1]):
        total += mask[:, category, None] * weights[None, :, category]
    return total


def _value_cells(node: NetworkNode, children: list[NetworkNode]) -> Cells:
    """Gaps between the children's condition endpoints on ``node`` and the endpoints where
    the node's distributions have an atom; cells with no possible mass are dropped."""
    distributions = [row.distribution for row in node.cpt]
    ends = sorted({
        end for child in children for row in child.cpt
        for end in row.interval(node.name) if np.isfinite(end)
    })
    low, high, point = [], [], []
    for a, b in zip([-np.inf, *ends], [*ends, np.inf], strict=True):
        if any(d.mass_inside(a, b) for d in distributions):
            low.append(a)
            high.append(b)
            point.append(False)
        if b != np.inf and any(d.has_atom(b) for d in distributions):
            low.append(b)
            high.append(b)
            point.append(True)
    return Cells(np.array(low, dtype=np.float64), np.array(high, dtype=np.float64),
                 np.array(point, dtype=bool))


def _purely_atomic(distribution: Distribution) -> bool:
    """All mass on finitely many points (so no mass lies strictly between adjacent floats
    next to an atom)."""
    return isinstance(distribution, Categorical) or bool(
        getattr(distribution, "integer_valued", False)
    )


def _cell_intervals(
    cells: Cells, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For boxes ``[lo, hi]`` (``(B,)``) and every cell: the closed hull ``[a, b]`` of their
    intersection (``a > b`` when empty) and whether each end is open (a gap's own end)."""
    a = np.maximum(lo[:, None], cells.low[None, :])
    b = np.minimum(hi[:, None], cells.high[None, :])
    gap = ~cells.point[None, :]
    open_left = gap & (cells.low[None, :] >= lo[:, None]) & np.isfinite(cells.low)[None, :]
    open_right = gap & (cells.high[None, :] <= hi[:, None]) & np.isfinite(cells.high)[None, :]
    return a, b, open_left, open_right


def _gap_mass(
    distribution: Distribution, a: np.ndarray, b: np.ndarray, open_left: np.ndarray,
    open_right: np.ndarray,
) -> Enclosure:
    """Enclosure of ``P(X ∈ I)`` for intervals ``I`` with closed hull ``[a, b]`` and the given
    open ends (see the module docstring for the three cases)."""
    if bool(getattr(distribution, "atomless", False)):
        return distribution.interval(a, b)
    inner_a = np.where(open_left, up_array(a), a)
    inner_b = np.where(open_right, down_array(b), b)
    inner = distribution.interval(inner_a, inner_b)
    if _purely_atomic(distribution) or not (open_left.any() or open_right.any()):
        return inner
    closed = distribution.interval(a, b)
    return Enclosure(inner.value, inner.lower, closed.upper)


DISTINCT_ENTRIES = 16
"""A node whose integer table has at least this many (row, cell) entries per box computes
them once per distinct interval of its column (:meth:`Elimination.own_masses`; sorting the
intervals costs about what 16 entries per box do: Adult-13's hours-per-week, 112 rows, 4,000
boxes: 26.7 → 5.7 ms)."""


@dataclass(frozen=True)
class RowTable:
    """Every CPT row of a node whose rows are all discrete distributions on integers, as
    prefix and suffix sums over the union of their values (``probabilities``: ``(rows,
    values)``, each row's own floats): one lookup serves all rows.

    Zeros stand for the values a row lacks; adding an exact zero changes no float sum, so
    every row's sums equal its own table's, and the rounding bound (a count of values) is
    taken over the union, which is larger."""

    values: np.ndarray
    probabilities: np.ndarray
    prefix: np.ndarray
    suffix: np.ndarray
    margin: float

    @classmethod
    def of(cls, distributions: list[Distribution]) -> RowTable | None:
        from verifier.population.distributions import Discrete

        if not all(isinstance(d, Discrete) and _purely_atomic(d) for d in distributions):
            return None
        tables = [d._table for d in distributions]  # type: ignore[attr-defined]
        values = np.unique(np.concatenate([t.values for t in tables]))
        probabilities = np.zeros((len(tables), values.size))
        for row, table in enumerate(tables):
            probabilities[row, np.searchsorted(values, table.values)] = table.probabilities
        zeros = np.zeros((len(tables), 1))
        prefix = np.concatenate([zeros, np.cumsum(probabilities, axis=1)], axis=1)
        suffix = np.concatenate(
            [np.cumsum(probabilities[:, ::-1], axis=1)[:, ::-1], zeros], axis=1)
        margin = max(t.margin for t in tables) + 2.0 * (values.size + 1) * EPS
        return cls(values, probabilities, prefix, suffix, margin)

    def cell_masses(self, cells: Cells, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
        """``(B, rows, cells)``: every row's mass of each box ``[lo, hi]`` (``(B,)``) within
        each cell, an open end of a gap cell moved to the next float inwards (the rows are
        purely atomic, so nothing lies between)."""
        a, b, open_left, open_right = _cell_intervals(cells, lo, hi)
        inner_a = np.where(open_left, up_array(a), a)
        inner_b = np.where(open_right, down_array(b), b)
        return self.interval(inner_a, inner_b).zero_where((a > b)[:, None, :])

    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        """``(B, rows, cells)``: every row's ``P(a <= X <= b)`` for ``(B, cells)`` ends, as
        each row's own table computes it (the cheaper-rounding side)."""
        start = np.searchsorted(self.values, a, side="left")[:, None, :]
        stop = np.searchsorted(self.values, b, side="right")[:, None, :]
        rows = np.arange(self.prefix.shape[0])[None, :, None]
        nonempty = stop > start
        prefix_stop, prefix_start = self.prefix[rows, stop], self.prefix[rows, start]
        suffix_start, suffix_stop = self.suffix[rows, start], self.suffix[rows, stop]
        left_scale = prefix_stop + prefix_start
        right_scale = suffix_start + suffix_stop
        use_left = left_scale <= right_scale
        value = np.where(nonempty, np.where(use_left, prefix_stop - prefix_start,
                                            suffix_start - suffix_stop), 0.0)
        error = np.where(nonempty, self.margin * np.where(use_left, left_scale, right_scale),
                         0.0)
        return Enclosure.from_error(value, error)


@dataclass(frozen=True)
class GaussianRows:
    """Every CPT row of a node whose rows are all normal, or all truncated normal,
    distributions, as ``(rows, 1)`` parameter arrays: one element-wise enclosure serves all
    rows, each entry bit for bit its own row's :meth:`interval` (the enclosure is computed
    element by element, so broadcasting the parameters changes no float)."""

    mean: np.ndarray
    sigma: np.ndarray
    truncation: tuple[np.ndarray, np.ndarray, Enclosure] | None

    @classmethod
    def of(cls, distributions: list[Distribution]) -> GaussianRows | None:
        kinds = {type(d) for d in distributions}
        if kinds not in ({Normal}, {TruncatedNormal}):
            return None
        column = partial(np.array, dtype=np.float64, ndmin=2)
        mean = column([d.mean for d in distributions]).T  # type: ignore[attr-defined]
        sigma = column([d.sigma for d in distributions]).T  # type: ignore[attr-defined]
        if kinds == {Normal}:
            return cls(mean, sigma, None)
        truncated: list[TruncatedNormal] = distributions  # type: ignore[assignment]
        normaliser = Enclosure(*(column([getattr(d._normaliser, end) for d in truncated]).T
                                 for end in ("value", "lower", "upper")))
        return cls(mean, sigma, (column([lower_bound(d.lower) for d in truncated]).T,
                                 column([upper_bound(d.upper) for d in truncated]).T,
                                 normaliser))

    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        """``(B, rows, cells)``: every row's ``P(a <= X <= b)`` for ``(B, cells)`` ends."""
        a, b = a[:, None, :], b[:, None, :]
        if self.truncation is None:
            return normal_interval(a, b, self.mean, self.sigma)
        return truncated_normal_interval(a, b, self.mean, self.sigma, *self.truncation)


def planned_einsum(paths: dict[tuple, tuple], subscripts: str,
                   operands: list[np.ndarray], pairs_directly: bool = False) -> np.ndarray:
    """``np.einsum(subscripts, *operands)`` contracted along numpy's greedy path, bit for bit
    the result ``optimize="greedy"`` (or, with ``pairs_directly`` for two operands or fewer,
    ``optimize=False``) gives. The path and numpy's list of contractions along it are looked
    up in ``paths`` by the subscripts and the operands' shapes (built once per key: the
    search, and even rebuilding the list from a known path, costs more than a small
    contraction); each step then runs as ``np.einsum`` runs it — a pair by numpy's batched
    matrix product, any other step by its plain einsum (a numpy without that pair step:
    ``np.einsum`` along the cached path)."""
    key = (subscripts, *(t.shape for t in operands))
    plan = paths.get(key)
    if plan is None:
        if pairs_directly and len(operands) <= 2:
            plan = (False, None)
        else:
            path = np.einsum_path(subscripts, *operands, optimize="greedy")[0]
            plan = (path, np.einsum_path(subscripts, *operands, optimize=path,
                                         einsum_call=True)[1])
        paths[key] = plan
    path, steps = plan
    if steps is None or _pair_step is None:
        return np.einsum(subscripts, *operands, optimize=path)
    pending = list(operands)
    for positions, step, _ in steps:
        taken = [pending.pop(x) for x in positions]
        pending.append(_pair_step(step, *taken) if len(taken) == 2
                       else np.einsum(step, *taken, optimize=False))
    return pending[0]


class Elimination:
    """The elimination plan of one network: cells, factors and the order (built once)."""

    def __init__(self, network: NodeNetwork) -> None:
        nodes = network.nodes
        self.network = network
        index = {node.name: i for i, node in enumerate(nodes)}
        children: list[list[NetworkNode]] = [[] for _ in nodes]
        for node in nodes:
            for parent in node.parents:
                children[index[parent]].append(node)
        self.cells = [_value_cells(node, kids) for node, kids in zip(nodes, children, strict=True)]
        offsets = np.cumsum([0, *[len(node.observed_columns()) for node in nodes]])
        self.columns = [np.arange(offsets[u], offsets[u + 1]) for u in range(len(nodes))]
        self.factors = [self._factor(u, node, index) for u, node in enumerate(nodes)]
        self.row_tables = [RowTable.of([row.distribution for row in node.cpt])
                           if not node.categorical else None for node in nodes]
        self.gaussian_rows = [GaussianRows.of([row.distribution for row in node.cpt])
                              for node in nodes]
        self.category_weights = [
            np.stack([row.distribution.weights for row in node.cpt])  # type: ignore[union-attr]
            if node.categorical else None for node in nodes
        ]
        self.category_tables = [
            self._category_table(u) if node.categorical else None
            for u, node in enumerate(nodes)
        ]
        self.order = self._order()
        self._paths: dict[tuple, tuple] = {}
        sizes = [len(cells) for cells in self.cells]
        self.operations = (len(nodes) + 1) * (sum(sizes) + len(nodes) + 1)
        self.elements_per_box = sum(
            max(1, factor.row_of.size) * len(self.cells[factor.node]) for factor in self.factors
        )

    def _category_table(self, u: int) -> tuple[np.ndarray, np.ndarray, float]:
        """A categorical node's ``(rows, categories)`` weights, its ``(categories, cells)``
        membership matrix (1.0 where the cell holds the category) and its rows' largest
        margin, for :meth:`own_masses`."""
        node, cells = self.network.nodes[u], self.cells[u]
        category = np.arange(node.width, dtype=np.float64)
        member = (
            (category[None, :] > cells.low[:, None]) & (category[None, :] < cells.high[:, None])
        ) | (cells.point[:, None] & (category[None, :] == cells.low[:, None]))
        margin = max(row.distribution.margin for row in node.cpt)  # type: ignore[union-attr]
        return self.category_weights[u], member.T.astype(np.float64), margin

    def _factor(self, u: int, node: NetworkNode, index: dict[str, int]) -> _Factor:
        parents = [index[p] for p in node.parents]
        shape = tuple(len(self.cells[p]) for p in parents)
        row_of = np.full(shape, -1, dtype=np.int64)
        for r in range(len(node.cpt) - 1, -1, -1):
            covered = np.ones(shape, dtype=bool)
            for axis, (name, p) in enumerate(zip(node.parents, parents, strict=True)):
                inside = self.cells[p].within(*node.cpt[r].interval(name))
                view = [1] * len(shape)
                view[axis] = len(inside)
                covered = covered & inside.reshape(view)
            row_of[covered] = r
        return _Factor(u, (*parents, u), row_of)

    def _order(self) -> list[int]:
        """Greedy elimination order: next, the node whose elimination builds the smallest
        factor (product of the cell counts of its neighbours in the remaining graph)."""
        scopes = [set(factor.variables) for factor in self.factors]
        remaining = set(range(len(self.factors)))
        order = []
        while remaining:
            joined = {
                v: set().union(*(s for s in scopes if v in s)) - {v} for v in sorted(remaining)
            }
            best = min(
                joined, key=lambda v: float(np.prod([len(self.cells[w]) for w in joined[v]]))
            )
            scopes = [s for s in scopes if best not in s] + [joined[best]]
            remaining.remove(best)
            order.append(best)
        return order

    # ------------------------------------------------------------------ points
    def handles_points(self) -> bool:
        """Whether single points can take the chain-rule path (no latent node to sum out)."""
        return not any(node.latent for node in self.network.nodes)

    def _point_values(self, u: int, x: np.ndarray) -> np.ndarray:
        """Node ``u``'s value at each point: its coordinate, or its category index."""
        columns = x[:, self.columns[u]]
        if self.network.nodes[u].categorical:
            return np.argmax(columns, axis=1).astype(np.float64)
        return columns[:, 0]

    def _cell_of(self, u: int, values: np.ndarray) -> np.ndarray:
        """Index of the cell of node ``u`` holding each value (``-1``: none, no mass)."""
        cells = self.cells[u]
        inside = np.where(
            cells.point[None, :], values[:, None] == cells.low[None, :],
            (values[:, None] > cells.low[None, :]) & (values[:, None] < cells.high[None, :]),
        )
        return np.where(inside.any(axis=1), np.argmax(inside, axis=1), -1)

    def point_enclosure(self, x: np.ndarray) -> Enclosure:
        """Probabilities of single points ``x`` (every observed column fixed; a categorical
        node's columns a one-hot vector) by the chain rule: the product over nodes of the
        probability that the row chosen by the point's parent values gives the node's value.
        Same enclosure rules as :meth:`enclosure`; a point off every cell has probability 0."""
        nodes = self.network.nodes
        values = [self._point_values(u, x) for u in range(len(nodes))]
        cells = [self._cell_of(u, values[u]) for u in range(len(nodes))]
        count = x.shape[0]
        lower, upper, value = np.ones(count), np.ones(count), np.ones(count)
        off = np.zeros(count, dtype=bool)
        for factor in self.factors:
            u = factor.node
            parent_cells = [cells[p] for p in factor.variables[:-1]]
            off |= np.any([c < 0 for c in parent_cells], axis=0) if parent_cells else False
            safe = [np.maximum(c, 0) for c in parent_cells]
            rows = factor.row_of[tuple(safe)] if safe else np.full(count, factor.row_of.item())
            off |= rows < 0
            for r in np.unique(rows[rows >= 0]):
                chosen = rows == r
                distribution = nodes[u].cpt[r].distribution
                mass = distribution.interval(values[u][chosen], values[u][chosen])
                value[chosen] *= mass.value
                lower[chosen] *= mass.lower
                upper[chosen] *= mass.upper
        margin = relative_margin(2 * len(nodes) + 1)
        reached = upper > 0
        return Enclosure(
            np.where(off, 0.0, np.clip(value, 0.0, 1.0)),
            np.where(off, 0.0, np.clip(scaled_down(lower, margin) - TINY, 0.0, 1.0)),
            np.where(off, 0.0, np.clip(scaled_up(upper, margin) + np.where(reached, TINY, 0.0),
                                       0.0, 1.0)),
        )

    # ------------------------------------------------------------------ evaluation
    def own_masses(self, u: int, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
        """``(B, rows, cells)`` enclosures of ``P(box_u ∩ cell)`` under each CPT row of node
        ``u``."""
        node = self.network.nodes[u]
        cells = self.cells[u]
        batch = lo.shape[0]
        if node.latent:
            lo_u, hi_u = np.full((batch, 1), -np.inf), np.full((batch, 1), np.inf)
        else:
            lo_u, hi_u = lo[:, self.columns[u]], hi[:, self.columns[u]]
        if node.categorical:
            weights, member, margin = self.category_tables[u]  # type: ignore[misc]
            if node.latent:
                allowed = np.ones((batch, node.width), dtype=bool)
            else:
                allowed = Categorical.category_mask(lo_u, hi_u)
            # boxes share few sets of allowed categories: each distinct set is computed once
            # and gathered, by sums whose order does not depend on a set's place among them
            allowed, inverse = _distinct_rows(allowed)
            mask = allowed.astype(np.float64)
            if len(cells) > 1:
                # a matrix product whose sums run along the categories, the same for a row
                # wherever it stands (Adult-13's recorded calls: bit for bit)
                value = (mask[:, None, :] * weights[None, :, :]) @ member
            else:
                # one cell: a matrix-vector product's order of summation may depend on the
                # row's place, so the categories are added one by one, in their order
                value = _category_sums(mask, weights * member[:, 0])[:, :, None]
            result = Enclosure.from_error(value, margin * value)
            return Enclosure(result.value[inverse], result.lower[inverse],
                             result.upper[inverse])
        table = self.row_tables[u]
        if table is not None:
            if table.prefix.shape[0] * len(cells) < DISTINCT_ENTRIES:
                return table.cell_masses(cells, lo_u[:, 0], hi_u[:, 0])
            # boxes share few intervals of one column: each distinct interval is computed
            # once and gathered (every entry is element-wise in its box's interval, so the
            # floats are each box's own)
            first, inverse = _distinct_intervals(lo_u[:, 0], hi_u[:, 0])
            result = table.cell_masses(cells, lo_u[first, 0], hi_u[first, 0])
            return Enclosure(result.value[inverse], result.lower[inverse],
                             result.upper[inverse])
        a, b, open_left, open_right = _cell_intervals(cells, lo_u[:, 0], hi_u[:, 0])
        empty = (a > b)[:, None, :]
        gaussian = self.gaussian_rows[u]
        if gaussian is not None:  # atomless: the open ends carry no mass
            return gaussian.interval(a, b).zero_where(empty)
        parts = [_gap_mass(row.distribution, a, b, open_left, open_right) for row in node.cpt]
        stacked = Enclosure(*(np.stack([getattr(part, end) for part in parts], axis=1)
                              for end in ("value", "lower", "upper")))
        return stacked.zero_where(empty)

    def _tables(self, lo: np.ndarray, hi: np.ndarray,
                ends: tuple[str, ...] = ("value", "lower", "upper")
                ) -> list[tuple[np.ndarray, ...]]:
        """Per factor: the tables of ``ends`` (of the value, lower and upper ends), each of
        shape ``(B, parent cells…, cells)``."""
        tables = []
        for factor in self.factors:
            masses = self.own_masses(factor.node, lo, hi)
            rows = factor.row_of.reshape(-1)
            parts = []
            for end in ends:
                table = getattr(masses, end)
                padded = np.concatenate([table, np.zeros_like(table[:, :1])], axis=1)
                picked = padded[:, rows]  # row -1 picks the zero table
                parts.append(picked.reshape(lo.shape[0], *factor.row_of.shape, -1))
            tables.append(tuple(parts))
        return tables

    def _contract(self, tables: list[np.ndarray]) -> np.ndarray:
        """``Σ`` over every node's cells of the product of the factor tables, per box."""
        pending = [(table, factor.variables)
                   for table, factor in zip(tables, self.factors, strict=True)]
        for variable in self.order:
            involved = [item for item in pending if variable in item[1]]
            pending = [item for item in pending if variable not in item[1]]
            scope = sorted({v for _, variables in involved for v in variables} - {variable})
            letters = {v: LETTERS[i + 1] for i, v in enumerate(
                sorted({v for _, variables in involved for v in variables}))}
            operands = ",".join("a" + "".join(letters[v] for v in variables)
                                for _, variables in involved)
            result = "a" + "".join(letters[v] for v in scope)
            operands_list = [t for t, _ in involved]
            combined = planned_einsum(self._paths, f"{operands}->{result}", operands_list,
                                      pairs_directly=True)
            pending.append((combined, tuple(scope)))
        total = np.ones(tables[0].shape[0])
        for table, variables in pending:
            assert not variables
            total = total * table
        return total

    def enclosure(self, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
        """Box probabilities of ``(B, columns)`` boxes with their sound enclosure."""
        tables = self._tables(lo, hi)
        value = self._contract([t[0] for t in tables])
        lower, upper = self._ends([t[1:] for t in tables])
        return Enclosure(np.clip(value, 0.0, 1.0), lower, upper)

    def enclosure_ends(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ``(lower, upper)`` ends of :meth:`enclosure`, bit for bit, without its value
        (PV reads only the ends)."""
        return self._ends(self._tables(lo, hi, ("lower", "upper")))

    def _ends(self, tables: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, np.ndarray]:
        """The sound ends from the factors' (lower, upper) tables. ``TINY`` (underflow) is
        added to an upper end only where some term is structurally non-zero: where the
        contracted upper end is positive some product of upper ends is, so every factor of
        that term is; only where it is 0 are the indicators of positive entries contracted
        (a float sum of non-negative products is positive exactly when one product is)."""
        lower, upper = (self._contract([t[i] for t in tables]) for i in range(2))
        reached = upper > 0
        unsure = np.flatnonzero(~reached)
        if unsure.size:
            reached[unsure] = self._contract(
                [(t[1][unsure] > 0).astype(np.float64) for t in tables]) > 0
        margin = relative_margin(self.operations)
        return (
            np.clip(scaled_down(lower, margin) - TINY, 0.0, 1.0),
            np.clip(scaled_up(upper, margin) + np.where(reached, TINY, 0.0), 0.0, 1.0),
        )
