"""Bayesian networks with box-conditioned probability tables.

Nodes are listed in topological order. Each node has ``parents`` and CPT rows
``{condition: {parent: [lo, hi]}, distribution}``: the row applies when every named parent
lies in its closed interval (``null`` = unbounded; a parent left out is unconstrained). A
node's *value* is its coordinate for a 1-D node (rows hold 1-D distributions) or its category
index ``0..k-1`` for a categorical node (rows hold ``categorical`` distributions and the node
occupies the ``k`` columns of a one-hot group). Latent nodes (``latent: true``) occupy no
column and are integrated out. Observed nodes occupy ``columns`` (default: the node name).

Validation: the rows of a node must partition its parents' space up to probability-zero sets:
the parents' axes are cut at every row endpoint into points and open gaps; every cell that a
parent's distributions may charge must lie in exactly one row (closed intervals sharing an
endpoint are fine for a parent without an atom there). Errors name the node and the cell.

Exact box probability: by variable elimination over cells of each node's value axis, batched
over boxes (:mod:`verifier.population.elimination`). The support is the hull of the supports
of the CPT rows that apply with positive probability, each row's reach decided by the same
elimination. *Regimes* (one CPT row per node, with the interval each child's row imposes on
its parents) are enumerated only by what needs them (weighted model integration, which
sums over them): a network with more parents than regimes can be listed still loads,
validates and answers box probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np
from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from verifier.population.base import (
    Bound,
    Distribution,
    NestedDistribution,
    PopulationBase,
    finite_or_none,
    lower_bound,
    union_atoms,
    upper_bound,
)
from verifier.population.distributions import Categorical, Discrete, PointMass
from verifier.population.elimination import Elimination
from verifier.population.errors import PopulationError
from verifier.population.excess import ExcessBounds
from verifier.population.rounding import Enclosure, product

MAX_REGIMES = 100_000
MAX_PARTITION_CELLS = 1_000_000
CHUNK_ELEMENTS = 2_000_000


class CPTRow(PopulationBase):
    """One row of a conditional probability table."""

    condition: dict[str, tuple[Bound, Bound]] = Field(default_factory=dict)
    distribution: NestedDistribution
    label: str | None = None

    @field_validator("condition")
    @classmethod
    def _check_condition(
        cls, condition: dict[str, tuple[Bound, Bound]]
    ) -> dict[str, tuple[Bound, Bound]]:
        cleaned = {}
        for parent, (low, high) in condition.items():
            low, high = finite_or_none(low), finite_or_none(high)
            if lower_bound(low) > upper_bound(high):
                raise ValueError(f"condition on {parent!r} is empty: [{low}, {high}]")
            cleaned[parent] = (low, high)
        return cleaned

    def interval(self, parent: str) -> tuple[float, float]:
        """The closed interval this row requires of ``parent`` (±inf when unconstrained)."""
        low, high = self.condition.get(parent, (None, None))
        return lower_bound(low), upper_bound(high)


class BayesNode(PopulationBase):
    """A node: its parents, whether it is latent, its columns and its CPT rows."""

    name: str
    parents: list[str] = Field(default_factory=list)
    latent: bool = False
    columns: list[str] | None = None
    cpt: list[CPTRow]

    @field_validator("cpt", mode="wrap")
    @classmethod
    def _name_the_row(cls, value: Any, handler: ValidatorFunctionWrapHandler,
                      info: ValidationInfo) -> list[CPTRow]:
        """Errors inside a row name the node and the row (``node 'age' row 3: …``)."""
        try:
            return handler(value)
        except ValidationError as error:
            first = error.errors()[0]
            row = first["loc"][0] if first["loc"] else "?"
            where = ".".join(str(part) for part in first["loc"][1:])
            raise ValueError(f"node {info.data.get('name', '?')!r} row {row} ({where}): "
                             f"{first['msg'].removeprefix('Value error, ')}") from error

    @model_validator(mode="after")
    def _check_node(self) -> BayesNode:
        where = f"node {self.name!r}"
        if not self.cpt:
            raise ValueError(f"{where} has no CPT rows")
        if len(set(self.parents)) != len(self.parents) or self.name in self.parents:
            raise ValueError(f"{where}: parents must be distinct and exclude the node itself")
        for index, row in enumerate(self.cpt):
            unknown = sorted(set(row.condition) - set(self.parents))
            if unknown:
                raise ValueError(f"{where} row {index} conditions on non-parents {unknown}")
        categorical = [isinstance(row.distribution, Categorical) for row in self.cpt]
        if any(categorical):
            sizes = {row.distribution.dimension for row in self.cpt}
            if not all(categorical) or len(sizes) != 1:
                raise ValueError(
                    f"{where}: a categorical node needs categorical rows with equal category counts"
                )
        else:
            for index, row in enumerate(self.cpt):
                if not row.distribution.is_univariate():
                    raise ValueError(
                        f"{where} row {index}: a {row.distribution.kind} distribution of "
                        f"dimension {row.distribution.dimension} is not a 1-D distribution"
                    )
        if self.latent and self.columns is not None:
            raise ValueError(f"{where} is latent and cannot occupy columns")
        if not self.latent and len(self.observed_columns()) != self.width:
            raise ValueError(
                f"{where} occupies {len(self.observed_columns())} columns but its values need "
                f"{self.width}"
            )
        return self

    @property
    def categorical(self) -> bool:
        return isinstance(self.cpt[0].distribution, Categorical)

    @property
    def width(self) -> int:
        """Number of columns of the node's values (categories of a categorical node)."""
        return self.cpt[0].distribution.dimension if self.categorical else 1

    def observed_columns(self) -> list[str]:
        """Column names occupied by the node (none for a latent node)."""
        if self.latent:
            return []
        return list(self.columns) if self.columns is not None else [self.name]

    def describe_lines(self) -> list[str]:
        parents = f" | {', '.join(self.parents)}" if self.parents else ""
        tag = " (latent)" if self.latent else ""
        lines = [f"{self.name}{parents}{tag}:"]
        for row in self.cpt:
            condition = ", ".join(
                f"{p} in {_interval_text(*row.interval(p))}" for p in row.condition
            ) or "always"
            label = f" ({row.label})" if row.label else ""
            inner = row.distribution.describe_lines()
            lines.append(f"  {condition}{label}: {inner[0]}")
            lines.extend(f"    {line}" for line in inner[1:])
        return lines


def _interval_text(low: float, high: float) -> str:
    left = "(" if low == -np.inf else "["
    right = ")" if high == np.inf else "]"
    return f"{left}{low:g}, {high:g}{right}"


@dataclass(frozen=True)
class _Plan:
    """The regimes (row combinations with possibly positive probability), the interval each
    imposes on every node, and per regime the probability of the latent nodes' events (None
    without latent nodes)."""

    regime_rows: np.ndarray
    regime_lo: np.ndarray
    regime_hi: np.ndarray
    latent: Enclosure | None


class BayesianNetwork(Distribution):
    """Bayesian network with box-conditioned CPTs (see the module docstring)."""

    kind: Literal["bayesian_network"] = "bayesian_network"
    nodes: list[BayesNode]

    @model_validator(mode="after")
    def _check_network(self) -> BayesianNetwork:
        if not self.nodes:
            raise ValueError("a Bayesian network needs at least one node")
        seen: set[str] = set()
        for node in self.nodes:
            if node.name in seen:
                raise ValueError(f"node name {node.name!r} is used twice")
            for parent in node.parents:
                if parent not in seen:
                    raise ValueError(
                        f"node {node.name!r} lists parent {parent!r} which is not defined before "
                        "it (nodes must be in topological order)"
                    )
            seen.add(node.name)
        columns = [name for node in self.nodes for name in node.observed_columns()]
        if not columns:
            raise ValueError("a Bayesian network needs at least one observed node")
        repeated = sorted({name for name in columns if columns.count(name) > 1})
        if repeated:
            raise ValueError(f"columns {repeated} are occupied by more than one node")
        for node in self.nodes:
            self._check_partition(node)
        return self

    # ------------------------------------------------------------------ structure
    @cached_property
    def _index(self) -> dict[str, int]:
        return {node.name: index for index, node in enumerate(self.nodes)}

    def _rows(self, name: str) -> list[Distribution]:
        return [row.distribution for row in self.nodes[self._index[name]].cpt]

    def _check_partition(self, node: BayesNode) -> None:
        axes = []
        for parent in node.parents:
            distributions = self._rows(parent)
            ends = sorted({
                end for row in node.cpt for end in row.interval(parent) if np.isfinite(end)
            } | _listed_atoms(distributions))
            cells = []
            for low, high in zip([-np.inf, *ends], [*ends, np.inf], strict=True):
                if any(d.mass_inside(low, high) for d in distributions):
                    cells.append((low, high, False))
                if high != np.inf and any(d.has_atom(high) for d in distributions):
                    cells.append((high, high, True))
            axes.append(cells)
        shape = tuple(len(cells) for cells in axes)
        if int(np.prod(shape, dtype=float)) > MAX_PARTITION_CELLS:
            raise ValueError(
                f"node {node.name!r}: {int(np.prod(shape, dtype=float))} parent cells to check "
                f"exceed {MAX_PARTITION_CELLS}"
            )
        count = np.zeros(shape, dtype=np.int64)
        covering = []
        for row in node.cpt:
            cover = np.ones(shape, dtype=bool)
            for axis, (parent, cells) in enumerate(zip(node.parents, axes, strict=True)):
                low, high = row.interval(parent)
                inside = np.array([low <= a and b <= high for a, b, _ in cells], dtype=bool)
                view = [1] * len(shape)
                view[axis] = len(cells)
                cover = cover & inside.reshape(view)
            covering.append(cover)
            count += cover
        for cells, overlap in ((count == 0, False), (count > 1, True)):
            found = np.argwhere(cells)
            if len(found) == 0:
                continue
            cell = tuple(found[0])
            region = ", ".join(
                f"{parent} = {axes[a][cell[a]][0]:g}" if axes[a][cell[a]][2]
                else f"{parent} in ({axes[a][cell[a]][0]:g}, {axes[a][cell[a]][1]:g})"
                for a, parent in enumerate(node.parents)
            ) or "the whole space (the node has no parents)"
            if overlap:
                rows = [i for i, cover in enumerate(covering) if cover[cell]]
                raise ValueError(
                    f"node {node.name!r}: CPT rows {rows} overlap on the region {region} "
                    "(rows must partition the parents' space)"
                )
            raise ValueError(
                f"node {node.name!r}: the region {region} is not covered by any CPT row "
                "(rows must cover the parents' space)"
            )

    def _regimes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        count = len(self.nodes)
        found: list[tuple[tuple[int, ...], np.ndarray, np.ndarray]] = []
        stack = [((), np.full(count, -np.inf), np.full(count, np.inf))]
        explored = 0
        while stack:
            chosen, low, high = stack.pop()
            depth = len(chosen)
            if depth == count:
                found.append((chosen, low, high))
                if len(found) > MAX_REGIMES:
                    raise ValueError(f"the network has more than {MAX_REGIMES} regimes")
                continue
            for r, row in enumerate(self.nodes[depth].cpt):
                explored += 1
                if explored > 20 * MAX_REGIMES:
                    raise ValueError("too many partial regimes to enumerate")
                new_low, new_high = low.copy(), high.copy()
                feasible = True
                for parent in row.condition:
                    p = self._index[parent]
                    a, b = row.interval(parent)
                    new_low[p], new_high[p] = max(new_low[p], a), min(new_high[p], b)
                    distribution = self.nodes[p].cpt[chosen[p]].distribution
                    if distribution.support_in(new_low[p], new_high[p]) is None:
                        feasible = False
                        break
                if feasible:
                    stack.append(((*chosen, r), new_low, new_high))
        if not found:
            raise ValueError("every combination of CPT rows has probability zero")
        found.sort(key=lambda item: item[0])
        return (
            np.array([item[0] for item in found], dtype=np.int64).reshape(len(found), count),
            np.array([item[1] for item in found]),
            np.array([item[2] for item in found]),
        )

    @cached_property
    def _plan(self) -> _Plan:
        rows, low, high = self._regimes()
        factors = []
        for u, node in enumerate(self.nodes):
            if not node.latent:
                continue
            value, lower, upper = (np.zeros(rows.shape[0]) for _ in range(3))
            for r, row in enumerate(node.cpt):
                chosen = rows[:, u] == r
                if chosen.any():
                    part = row.distribution.interval(low[chosen, u], high[chosen, u])
                    value[chosen], lower[chosen], upper[chosen] = (
                        part.value, part.lower, part.upper)
            factors.append(Enclosure(value, lower, upper))
        return _Plan(rows, low, high, product(factors) if factors else None)

    @cached_property
    def _elimination(self) -> Elimination:
        return Elimination(self)

    # ------------------------------------------------------------------ contract
    @property
    def dimension(self) -> int:
        return sum(len(node.observed_columns()) for node in self.nodes)

    def column_names(self) -> tuple[str, ...]:
        return tuple(name for node in self.nodes for name in node.observed_columns())

    def renormalised(self) -> list[str]:
        return [f"node {node.name!r} row {index}: {line}" for node in self.nodes
                for index, row in enumerate(node.cpt) for line in row.distribution.renormalised()]

    def edges(self) -> list[tuple[str, str]]:
        """Every edge ``(parent, child)``, children in node order."""
        return [(parent, node.name) for node in self.nodes for parent in node.parents]

    @property
    def regime_count(self) -> int:
        """Number of row combinations with possibly positive probability."""
        return int(self._plan.regime_rows.shape[0])

    def enclosure(self, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
        if lo.shape[0] == 0:
            empty = np.zeros(0)
            return Enclosure(empty, empty, empty)
        if self._elimination.handles_points() and self._all_points(lo, hi):
            return self._elimination.point_enclosure(lo)
        parts = [self._elimination.enclosure(lo[rows], hi[rows]) for rows in self._chunks(lo)]
        return Enclosure(
            np.concatenate([p.value for p in parts]), np.concatenate([p.lower for p in parts]),
            np.concatenate([p.upper for p in parts]),
        )

    def enclosure_ends(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ``(lower, upper)`` ends of :meth:`enclosure`, bit for bit, without computing
        its value (:meth:`Elimination.enclosure_ends`)."""
        if lo.shape[0] == 0 or (self._elimination.handles_points()
                                and self._all_points(lo, hi)):
            result = self.enclosure(lo, hi)
            return result.lower, result.upper
        parts = [self._elimination.enclosure_ends(lo[rows], hi[rows]) for rows in self._chunks(lo)]
        return (np.concatenate([lower for lower, _ in parts]),
                np.concatenate([upper for _, upper in parts]))

    def _chunks(self, lo: np.ndarray) -> list[slice]:
        """The boxes in chunks of at most :data:`CHUNK_ELEMENTS` table entries."""
        chunk = max(1, CHUNK_ELEMENTS // self._elimination.elements_per_box)
        return [slice(start, start + chunk) for start in range(0, lo.shape[0], chunk)]

    @cached_property
    def _excess(self) -> ExcessBounds:
        return ExcessBounds(self._elimination)

    def excess_lower(self, lo: np.ndarray, hi: np.ndarray, coefficients: np.ndarray,
                     threshold: np.ndarray) -> np.ndarray:
        """Sound lower bounds of ``P(x ∈ box ∧ c·x − min_box(c·x) > τ)`` per box (see
        :mod:`verifier.population.excess`)."""
        return self._excess.lower(lo, hi, coefficients, threshold)

    def _all_points(self, lo: np.ndarray, hi: np.ndarray) -> bool:
        """Every box is a single point: equal ends, and each categorical node's columns a
        one-hot vector."""
        if not np.array_equal(lo, hi):
            return False
        for node, columns in zip(self.nodes, self._elimination.columns, strict=True):
            if node.categorical:
                block = lo[:, columns]
                if not (np.isin(block, (0.0, 1.0)).all() and (block.sum(axis=1) == 1).all()):
                    return False
        return True

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        values = np.zeros((n, len(self.nodes)))
        for u, node in enumerate(self.nodes):
            row_of = np.full(n, -1)
            for r, row in enumerate(node.cpt):
                match = row_of < 0
                for parent in row.condition:
                    a, b = row.interval(parent)
                    parent_values = values[:, self._index[parent]]
                    match &= (parent_values >= a) & (parent_values <= b)
                row_of[match] = r
            if (row_of < 0).any():
                raise PopulationError(
                    f"node {node.name!r}: a sample's parents fell outside every CPT row"
                )
            for r, row in enumerate(node.cpt):
                chosen = row_of == r
                if not chosen.any():
                    continue
                size = int(chosen.sum())
                if node.categorical:
                    values[chosen, u] = row.distribution.draw_index(size, rng)
                else:
                    values[chosen, u] = row.distribution.draw(size, rng)[:, 0]
        columns = []
        for u, node in enumerate(self.nodes):
            if node.latent:
                continue
            if node.categorical:
                columns.append(np.eye(node.width)[values[:, u].astype(np.int64)])
            else:
                columns.append(values[:, u:u + 1])
        return np.concatenate(columns, axis=1)

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """The smallest box holding every value of positive probability: per observed node,
        the hull of the supports of its reachable CPT rows (:meth:`_reachable_rows`)."""
        lows, highs = [], []
        for node, reachable in zip(self.nodes, self._reachable_rows(), strict=True):
            if node.latent:
                continue
            rows = [row.distribution for row, keep in zip(node.cpt, reachable, strict=True)
                    if keep]
            if node.categorical:
                charged = np.logical_or.reduce([row.weights > 0 for row in rows])
                node_low, node_high = Categorical.support_of_indices(charged)
            else:
                hulls = [row.support_in(-np.inf, np.inf) for row in rows]
                hulls = [hull for hull in hulls if hull is not None]
                node_low = np.array([min(h[0] for h in hulls)])
                node_high = np.array([max(h[1] for h in hulls)])
            lows.append(node_low)
            highs.append(node_high)
        return np.concatenate(lows), np.concatenate(highs)

    def _reachable_rows(self) -> list[np.ndarray]:
        """Per node, whether each CPT row applies with positive probability: the joint mass
        of the row's condition box over its parents has a positive upper enclosure (exact
        zeros stay zero in the elimination, so a row is dropped only when its condition has
        probability zero). Conditions on latent parents are boxes over
        :attr:`_observed_twin`, where every node has columns."""
        twin = self._observed_twin
        columns = twin._elimination.columns
        base_lo, base_hi = np.full(twin.dimension, -np.inf), np.full(twin.dimension, np.inf)
        for node, node_columns in zip(twin.nodes, columns, strict=True):
            if node.categorical:
                base_lo[node_columns], base_hi[node_columns] = 0.0, 1.0
        boxes_lo, boxes_hi = [], []
        for node in twin.nodes:
            for row in node.cpt:
                lo, hi = base_lo.copy(), base_hi.copy()
                for parent in row.condition:
                    p = twin._index[parent]
                    a, b = row.interval(parent)
                    if twin.nodes[p].categorical:
                        index = np.arange(twin.nodes[p].width)
                        hi[columns[p][(index < a) | (index > b)]] = 0.0
                    else:
                        column = columns[p][0]
                        lo[column], hi[column] = max(lo[column], a), min(hi[column], b)
                boxes_lo.append(lo)
                boxes_hi.append(hi)
        upper = twin.enclosure(np.array(boxes_lo), np.array(boxes_hi)).upper
        counts = np.cumsum([0, *[len(node.cpt) for node in self.nodes]])
        return [upper[counts[u]:counts[u + 1]] > 0.0 for u in range(len(self.nodes))]

    @cached_property
    def _observed_twin(self) -> BayesianNetwork:
        """This network with every latent node observed (on columns named after it): the
        same joint distribution, with boxes that can constrain every node."""
        if not any(node.latent for node in self.nodes):
            return self
        taken = set(self.column_names())
        nodes = []
        for node in self.nodes:
            if node.latent:
                stem = f"{node.name} (latent)"
                while any(name.startswith(stem) for name in taken):
                    stem += "'"
                names = [f"{stem}[{j}]" for j in range(node.width)] if node.categorical else [stem]
                node = node.model_copy(update={"latent": False, "columns": names})
            nodes.append(node)
        return BayesianNetwork(nodes=nodes)

    def _column_flags(self, flag: str) -> np.ndarray:
        flags = []
        for node in self.nodes:
            if node.latent:
                continue
            if node.categorical:
                flags.append(np.full(node.width, flag == "integer"))
            else:
                method = "atomless_columns" if flag == "atomless" else "integer_columns"
                flags.append(np.array([
                    all(getattr(row.distribution, method)()[0] for row in node.cpt)
                ]))
        return np.concatenate(flags)

    def atomless_columns(self) -> np.ndarray:
        return self._column_flags("atomless")

    def column_atoms(self) -> list[np.ndarray | None]:
        return self._united("column_atoms")

    def column_point_masses(self) -> list[np.ndarray | None]:
        return self._united("column_point_masses")

    def _united(self, method: str) -> list[np.ndarray | None]:
        """Per observed column, the union over a node's rows of the value sets ``method``
        lists (None on a categorical node's columns)."""
        atoms: list[np.ndarray | None] = []
        for node in self.nodes:
            if node.latent:
                continue
            if node.categorical:
                atoms.extend([None] * node.width)
            else:
                atoms.append(union_atoms([getattr(row.distribution, method)()[0]
                                          for row in node.cpt]))
        return atoms

    def integer_columns(self) -> np.ndarray:
        return self._column_flags("integer")

    def onehot_groups(self) -> list[tuple[int, ...]]:
        return [
            tuple(int(c) for c in columns)
            for node, columns in zip(self.nodes, self._elimination.columns, strict=True)
            if node.categorical and not node.latent
        ]

    def describe_lines(self) -> list[str]:
        latent = sum(node.latent for node in self.nodes)
        rows = sum(len(node.cpt) for node in self.nodes)
        lines = [f"Bayesian network of {len(self.nodes)} nodes ({latent} latent), {rows} CPT rows:"]
        for node in self.nodes:
            lines.extend("  " + line for line in node.describe_lines())
        return lines


def _listed_atoms(distributions: list[Distribution]) -> set[float]:
    """The atoms of parents with finitely many listed values (discrete, point, categorical
    index), so that a partition error names the value rather than a gap around it."""
    atoms: set[float] = set()
    for distribution in distributions:
        if isinstance(distribution, Discrete):
            atoms.update(v for v, p in zip(distribution.values, distribution.probabilities,
                                           strict=True) if p > 0)
        elif isinstance(distribution, Categorical):
            atoms.update(float(j) for j, p in enumerate(distribution.probabilities) if p > 0)
        elif isinstance(distribution, PointMass):
            atoms.add(distribution.value)
    return atoms
