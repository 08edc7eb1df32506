"""Box measures for branching a WMI property over the input space (:mod:`verifier.wmi.branching`).

A property that compares copies of the input (monotonicity's ``x′``, noise robustness's
``x + n``) lives on a joint space: the prior's columns followed by the extra ones. Its measure
is a product of independent parts, each offering what PV's branch and bound reads (the
protocol of :func:`verifier.pv.population_domain`): ``support``, ``integer_columns``,
``atomless_columns``, ``column_atoms``, ``onehot_groups`` and ``prob_boxes_interval``, a sound
enclosure of the exact box probability. Every class here is a plain picklable object, since
PV ships its measure to worker processes.

* :class:`ColumnMarginal`: one column's marginal under a prior (monotonicity's independent
  draw ``x′_i``), its box mass read from the prior's own enclosure with every other column
  unbounded.
* :class:`SupportUniform`: the uniform prior on the support box (``use_prior`` false): each
  continuous column uniform on its support interval, each discrete column uniform over the
  integers of positive probability, each one-hot group uniform over its categories of
  positive probability — the measure
  :func:`verifier.wmi.properties.monotonicity.uniform_terms` writes as terms.
* :class:`JointMeasure`: the independent product of such parts on consecutive columns.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from verifier.numerics import EPS, down, scaled_down, scaled_up, up
from verifier.wmi.arguments import check_uniform_support
from verifier.wmi.encode import WMIInputError
from verifier.wmi.roots import DeadlineReached

POINT_BATCH = 8192
"""Integer points whose probability one enclosure call bounds when :class:`SupportUniform`
lists a column's values of positive probability."""


def _boxes(lo: Any, hi: Any, dimension: int) -> tuple[np.ndarray, np.ndarray]:
    lo = np.atleast_2d(np.asarray(lo, dtype=np.float64))
    hi = np.atleast_2d(np.asarray(hi, dtype=np.float64))
    if lo.shape[1] != dimension or hi.shape != lo.shape:
        raise WMIInputError(f"boxes of shape {lo.shape} / {hi.shape} for a measure on "
                            f"{dimension} columns")
    return lo, hi


def _widened(value: np.ndarray, operations: int) -> tuple[np.ndarray, np.ndarray]:
    """``value`` (non-negative, computed with at most ``operations`` roundings of relative
    error ``EPS`` each) as a sound enclosure."""
    margin = 2.0 * (operations + 2) * EPS
    return np.maximum(0.0, scaled_down(value, margin)), np.minimum(1.0, scaled_up(value, margin))


TABLE_VALUES = 4096
"""A discrete column with at most this many candidate values gets its marginal tabulated
once (:class:`ColumnMarginal`)."""


class ColumnMarginal:
    """The marginal of column ``column`` of ``prior`` (any measure with the PV protocol) as a
    1-D measure: ``P(x_column ∈ [a, b])`` is the prior's enclosure of the box bounded only in
    that column. A discrete column of at most :data:`TABLE_VALUES` candidate values (its
    atoms, or the integers of its support) is tabulated once: a box's mass is then the sum
    of its values' enclosures, widened by the sum's rounding. A column with point masses
    beside a density (a fitted histogram's atoms) keeps the list of its point masses
    (:meth:`point_masses`), for the tie probability; one whose point masses cannot be listed
    is refused."""

    def __init__(self, prior: Any, column: int) -> None:
        self.prior = prior
        self.column = column
        self.dimension = 1
        lower, upper = prior.support()
        self._support = (np.array([lower[column]], np.float64),
                         np.array([upper[column]], np.float64))
        self._integer = np.asarray(prior.integer_columns(), dtype=bool)[[column]]
        self._atomless = np.asarray(prior.atomless_columns(), dtype=bool)[[column]]
        atoms = prior.column_atoms()[column] if hasattr(prior, "column_atoms") else None
        self._points: np.ndarray | None = None
        if not self._atomless[0] and not self._integer[0] and atoms is None:
            points = prior.column_point_masses()[column] \
                if hasattr(prior, "column_point_masses") else None
            if points is None:
                raise WMIInputError(
                    f"column {column} has point masses beside a density that cannot be "
                    "listed: the tie probability of monotonicity's independent copy needs "
                    "them; audit it with PV or fit the column with --continuous normal")
            self._points = np.asarray(points, np.float64)
        self._atoms = [atoms]
        self._width = len(lower)
        self._table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        if not self._atomless[0] and self._points is None:
            values = np.asarray(atoms, np.float64) if atoms is not None else np.arange(
                np.ceil(lower[column]), np.floor(upper[column]) + 1.0)
            if values.size <= TABLE_VALUES:
                p_low, p_high = self._bounded(values[:, None], values[:, None])
                self._table = (values, np.concatenate([[0.0], np.cumsum(p_low)]),
                               np.concatenate([[0.0], np.cumsum(p_high)]))

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        return self._support[0].copy(), self._support[1].copy()

    def integer_columns(self) -> np.ndarray:
        return self._integer.copy()

    def atomless_columns(self) -> np.ndarray:
        return self._atomless.copy()

    def column_atoms(self) -> list[np.ndarray | None]:
        return list(self._atoms)

    def point_masses(self) -> np.ndarray | None:
        """The point masses of a column that has them beside a density, else None."""
        return None if self._points is None else self._points.copy()

    def onehot_groups(self) -> list[tuple[int, ...]]:
        return []

    def prob_boxes_interval(self, lo: Any, hi: Any) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = _boxes(lo, hi, 1)
        if self._table is None:
            return self._bounded(lo, hi)
        values, low_sums, high_sums = self._table
        first = np.searchsorted(values, lo[:, 0], side="left")
        last = np.searchsorted(values, hi[:, 0], side="right")
        last = np.maximum(last, first)
        # each prefix sum of k positive terms is off by at most k·EPS of itself, so a
        # difference is off by at most that much of both prefixes (absolute, not relative)
        unit = 2.0 * (values.size + 4) * EPS
        low = low_sums[last] - low_sums[first] - unit * (low_sums[last] + low_sums[first])
        high = high_sums[last] - high_sums[first] + unit * (high_sums[last]
                                                            + high_sums[first])
        empty = last == first
        return (np.where(empty, 0.0, np.maximum(0.0, low)),
                np.where(empty, 0.0, np.minimum(1.0, high)))

    def _bounded(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        full_lo = np.full((lo.shape[0], self._width), -np.inf)
        full_hi = np.full((lo.shape[0], self._width), np.inf)
        full_lo[:, self.column], full_hi[:, self.column] = lo[:, 0], hi[:, 0]
        return self.prior.prob_boxes_interval(full_lo, full_hi)


FIRST_LISTING_BATCH = 256
"""Points in :func:`positive_values`'s first enclosure call, which times the prior."""
LISTING_CALL_S = 0.5
"""The time :func:`positive_values` sizes each later call to: a call runs past the deadline
by at most about this (a full ``POINT_BATCH`` call took 5.4 s on a 200k-row table's fitted
network)."""


def positive_values(prior: Any, ranges: list[tuple[int, float, float]],
                    deadline: float = np.inf) -> list[np.ndarray]:
    """For each ``(column, low, high)`` of ``ranges``: the integers of ``[low, high]`` to
    which ``prior`` may give positive probability in that column (upper enclosure > 0), the
    prior's listed atoms when it lists them, else every integer of the range. Every range's
    points are bounded together, ``POINT_BATCH`` point boxes a call (a box's enclosure is
    its own whatever the batch: the values are those of one call per column, which cost
    0.4–1.7 s each on a fitted network of a 200k-row table and more than a 60-s budget over
    its one-hot columns), in calls sized to take about :data:`LISTING_CALL_S` each (from
    :data:`FIRST_LISTING_BATCH` points, at most ``POINT_BATCH``). Raises
    :class:`~verifier.wmi.roots.DeadlineReached` once ``deadline`` (a ``time.perf_counter()``
    instant) has passed before a call."""
    atoms = prior.column_atoms() if hasattr(prior, "column_atoms") else None
    listed = []
    for column, low, high in ranges:
        if atoms is not None and atoms[column] is not None:
            candidates = np.asarray(atoms[column], dtype=np.float64)
            listed.append(candidates[(candidates >= low) & (candidates <= high)])
        else:
            listed.append(np.arange(np.ceil(low), np.floor(high) + 1.0))
    points = np.concatenate(listed) if listed else np.zeros(0)
    columns = np.repeat([column for column, _, _ in ranges],
                        [candidates.size for candidates in listed]).astype(np.int64)
    width = len(prior.support()[0])
    positive = np.zeros(points.size, dtype=bool)
    start, batch = 0, FIRST_LISTING_BATCH
    while start < points.size:
        if time.perf_counter() >= deadline:
            raise DeadlineReached
        rows = slice(start, start + batch)
        count = points[rows].size
        lo = np.full((count, width), -np.inf)
        hi = np.full((count, width), np.inf)
        lo[np.arange(count), columns[rows]] = points[rows]
        hi[np.arange(count), columns[rows]] = points[rows]
        began = time.perf_counter()
        positive[rows] = prior.prob_boxes_interval(lo, hi)[1] > 0
        spent = time.perf_counter() - began
        start += count
        batch = int(np.clip(count * LISTING_CALL_S / max(spent, 1e-9), 1, POINT_BATCH))
    ends = np.cumsum([candidates.size for candidates in listed])
    return [values[kept] for values, kept in zip(np.split(points, ends[:-1]),
                                                 np.split(positive, ends[:-1]), strict=True)]


@dataclass
class _Part:
    """One independent factor of :class:`SupportUniform`: a continuous column, an integer
    column with its value list, or a one-hot group with its allowed categories."""

    columns: tuple[int, ...]
    kind: str  # "interval", "values" or "group"
    values: np.ndarray  # interval: [low, high]; values: sorted values; group: category mask


class SupportUniform:
    """The uniform prior on ``prior``'s support box (module docstring). A continuous column
    with an unbounded support is refused naming it; listing the values of positive
    probability raises :class:`~verifier.wmi.roots.DeadlineReached` once ``deadline`` has
    passed (:func:`positive_values`)."""

    def __init__(self, prior: Any, names: list[str], deadline: float = np.inf) -> None:
        lower, upper = prior.support()
        integer = np.asarray(prior.integer_columns(), dtype=bool)
        groups = [tuple(int(c) for c in g) for g in prior.onehot_groups()]
        grouped = {c for g in groups for c in g}
        self.dimension = len(lower)
        self.parts: list[_Part] = []
        atoms: list[np.ndarray | None] = [None] * self.dimension
        counted = [j for j in range(self.dimension) if integer[j] and j not in grouped]
        listed = iter(positive_values(
            prior, [(c, 1.0, 1.0) for group in groups for c in group]
            + [(j, float(lower[j]), float(upper[j])) for j in counted], deadline))
        for group in groups:
            mask = np.array([next(listed).size > 0 for _ in group])
            self.parts.append(_Part(group, "group", mask))
            for c in group:
                atoms[c] = np.array([0.0, 1.0])
        for j in range(self.dimension):
            if j in grouped:
                continue
            if integer[j]:
                values = next(listed)
                if values.size == 0:
                    raise WMIInputError(f"column {names[j]!r} takes no value of positive "
                                        "probability")
                self.parts.append(_Part((j,), "values", values))
                atoms[j] = values
                continue
            check_uniform_support(names[j], float(lower[j]), float(upper[j]))
            self.parts.append(_Part((j,), "interval", np.array([lower[j], upper[j]])))
        self._atoms = atoms
        self._integer = integer.copy()
        self._support = (np.array([p.values[0] if p.kind != "group" else 0.0
                                   for p in self._ordered()]),
                         np.array([p.values[-1] if p.kind != "group" else 1.0
                                   for p in self._ordered()]))
        self._groups = groups

    def _ordered(self) -> list[_Part]:
        """One part per column, in column order (a group's part repeated on its columns)."""
        by_column: dict[int, _Part] = {}
        for part in self.parts:
            for c in part.columns:
                by_column[c] = part
        return [by_column[j] for j in range(self.dimension)]

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        return self._support[0].copy(), self._support[1].copy()

    def integer_columns(self) -> np.ndarray:
        return self._integer.copy()

    def atomless_columns(self) -> np.ndarray:
        return ~self._integer

    def column_atoms(self) -> list[np.ndarray | None]:
        return list(self._atoms)

    def onehot_groups(self) -> list[tuple[int, ...]]:
        return list(self._groups)

    def prob_boxes_interval(self, lo: Any, hi: Any) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = _boxes(lo, hi, self.dimension)
        value = np.ones(lo.shape[0])
        for part in self.parts:
            value = value * self._share(part, lo, hi)
        return _widened(value, 3 * len(self.parts))

    @staticmethod
    def _share(part: _Part, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        if part.kind == "interval":
            (j,), (low, high) = part.columns, part.values
            inside = np.minimum(hi[:, j], high) - np.maximum(lo[:, j], low)
            return np.clip(inside, 0.0, None) / (high - low)
        if part.kind == "values":
            (j,) = part.columns
            values = part.values
            count = (np.searchsorted(values, hi[:, j], side="right")
                     - np.searchsorted(values, lo[:, j], side="left"))
            return np.clip(count, 0, None) / values.size
        columns = list(part.columns)
        one = (lo[:, columns] <= 1.0) & (hi[:, columns] >= 1.0)
        zero = (lo[:, columns] <= 0.0) & (hi[:, columns] >= 0.0)
        allowed = np.zeros(lo.shape[0])
        for k in np.flatnonzero(part.values):
            others = np.delete(zero, k, axis=1).all(axis=1)
            allowed += one[:, k] & others
        return allowed / part.values.sum()


class JointMeasure:
    """The independent product of ``parts`` placed on consecutive columns (module
    docstring), restricted to the closed box ``[lower, upper]`` when given (the mass outside
    it is dropped, not renormalised); ``prob_excess_lower`` is the first part's bound of the
    event that its own columns already imply, times the other parts' lower box masses."""

    def __init__(self, parts: list[Any], lower: np.ndarray | None = None,
                 upper: np.ndarray | None = None) -> None:
        self.parts = parts
        sizes = [len(part.support()[0]) for part in parts]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.dimension = int(self.offsets[-1])
        self.lower = np.full(self.dimension, -np.inf) if lower is None else np.asarray(
            lower, np.float64)
        self.upper = np.full(self.dimension, np.inf) if upper is None else np.asarray(
            upper, np.float64)

    def _clipped(self, lo: Any, hi: Any) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = _boxes(lo, hi, self.dimension)
        return np.maximum(lo, self.lower), np.minimum(hi, self.upper)

    def restricted_mass(self) -> tuple[float, float]:
        """Enclosure of the mass of the restricting box."""
        low, high = self.prob_boxes_interval(self.lower, self.upper)
        return float(low[0]), float(high[0])

    def _slices(self) -> list[slice]:
        return [slice(int(a), int(b)) for a, b in zip(self.offsets, self.offsets[1:],
                                                      strict=False)]

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        ends = [part.support() for part in self.parts]
        low = np.maximum(np.concatenate([e[0] for e in ends]), self.lower)
        high = np.minimum(np.concatenate([e[1] for e in ends]), self.upper)
        if (low > high).any():
            raise WMIInputError("the precondition's box misses the prior's support")
        return low, high

    def integer_columns(self) -> np.ndarray:
        return np.concatenate([np.asarray(p.integer_columns(), bool) for p in self.parts])

    def atomless_columns(self) -> np.ndarray:
        return np.concatenate([np.asarray(p.atomless_columns(), bool) for p in self.parts])

    def column_atoms(self) -> list[np.ndarray | None]:
        atoms: list[np.ndarray | None] = []
        for part in self.parts:
            own = part.column_atoms() if hasattr(part, "column_atoms") else None
            atoms.extend(own if own else [None] * len(part.support()[0]))
        return atoms

    def onehot_groups(self) -> list[tuple[int, ...]]:
        return [tuple(int(c) + int(offset) for c in group)
                for part, offset in zip(self.parts, self.offsets, strict=False)
                for group in part.onehot_groups()]

    def prob_boxes_interval(self, lo: Any, hi: Any) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self._clipped(lo, hi)
        low = np.ones(lo.shape[0])
        high = np.ones(lo.shape[0])
        for part, where in zip(self.parts, self._slices(), strict=True):
            a, b = part.prob_boxes_interval(lo[:, where], hi[:, where])
            low, high = low * np.asarray(a), high * np.asarray(b)
        margin = 2.0 * (len(self.parts) + 1) * EPS
        return np.maximum(0.0, scaled_down(low, margin)), np.minimum(1.0, scaled_up(high, margin))

    def prob_excess_lower(self, lo: np.ndarray, hi: np.ndarray, coefficients: np.ndarray,
                          threshold: np.ndarray) -> np.ndarray:
        """Sound lower bounds of ``P(z ∈ box ∧ c·z − min_box(c·z) > τ)``: the event holds
        wherever the first part's share ``c₁·z₁ − min(c₁·z₁)`` exceeds ``τ`` (the other
        parts' shares are ≥ 0), and the parts are independent."""
        first = self.parts[0]
        bound = getattr(first, "prob_excess_lower", None)
        if bound is None:
            return np.zeros(lo.shape[0])
        lo, hi = self._clipped(lo, hi)
        head = self._slices()[0]
        value = np.asarray(bound(lo[:, head], hi[:, head],
                                 np.asarray(coefficients)[:, head], threshold), np.float64)
        for part, where in zip(self.parts[1:], self._slices()[1:], strict=True):
            value = value * np.asarray(part.prob_boxes_interval(lo[:, where], hi[:, where])[0])
        margin = 2.0 * (len(self.parts) + 1) * EPS
        return np.maximum(0.0, scaled_down(value, margin))


def strict_order_probability(marginal: ColumnMarginal, deadline: float = np.inf
                              ) -> tuple[float, float]:
    """Enclosure of ``P(X < X′)`` for ``X, X′`` independent draws of ``marginal``: by
    symmetry ``(1 − t) / 2`` with the tie probability ``t = P(X = X′) = Σ_v P(X = v)²``
    (0 for an atomless column; over its point masses alone for one that has them beside a
    density, each value its own run).

    ``t`` is enclosed over a partition of the column's integers into runs ``I``: a run holding
    one value contributes ``P(I)²``, a longer run at least ``P(I)² / |I|`` (Cauchy–Schwarz)
    and at most ``P(I)²``. Runs are halved, the widest gap first, until the enclosure is
    within ``1e-9`` of ``t`` or ``MAX_RUNS`` runs are bounded or ``deadline``
    (``time.perf_counter()``) passes; every enclosure on the way is sound."""
    if bool(marginal.atomless_columns()[0]):
        return 0.5, 0.5
    points = marginal.point_masses()
    if points is not None:
        runs = _Runs(marginal, points)
        runs.add(points, points)
        return _halved_complement(runs)
    low, high = marginal.support()
    atoms = marginal.column_atoms()[0]
    values = np.asarray(atoms, np.float64) if atoms is not None else None
    first, last = ((values[0], values[-1]) if values is not None and values.size
                   else (np.ceil(low[0]), np.floor(high[0])))
    runs = _Runs(marginal, values)
    runs.add(np.array([first]), np.array([last]))
    started = 0
    while runs.gap() > 1e-9 * max(runs.tie()[0], 1e-300) and started < MAX_RUNS \
            and time.perf_counter() < deadline:
        started += runs.halve_widest(POINT_BATCH)
    return _halved_complement(runs)


def _halved_complement(runs: _Runs) -> tuple[float, float]:
    """Enclosure of ``(1 − t) / 2`` from the runs' enclosure of the tie probability ``t``."""
    tie_low, tie_high = runs.tie()
    return (max(0.0, down((1.0 - tie_high) / 2.0)), min(0.5, up((1.0 - tie_low) / 2.0)))


MAX_RUNS = 1 << 17
"""Runs :func:`strict_order_probability` bounds at most."""


class _Runs:
    """A partition of a column's integers into runs with their probability enclosures."""

    def __init__(self, marginal: ColumnMarginal, values: np.ndarray | None) -> None:
        self.marginal = marginal
        self.values = values
        self.lo = np.zeros(0)
        self.hi = np.zeros(0)
        self.p_low = np.zeros(0)
        self.p_high = np.zeros(0)

    def _count(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        if self.values is None:
            return np.maximum(hi - lo + 1.0, 0.0)
        return (np.searchsorted(self.values, hi, side="right")
                - np.searchsorted(self.values, lo, side="left")).astype(np.float64)

    def add(self, lo: np.ndarray, hi: np.ndarray) -> None:
        p_low, p_high = self.marginal.prob_boxes_interval(lo[:, None], hi[:, None])
        self.lo, self.hi = np.concatenate([self.lo, lo]), np.concatenate([self.hi, hi])
        self.p_low = np.concatenate([self.p_low, np.asarray(p_low, np.float64)])
        self.p_high = np.concatenate([self.p_high, np.asarray(p_high, np.float64)])

    def tie(self) -> tuple[float, float]:
        """Sound enclosure of ``Σ_v P(X = v)²``."""
        count = np.maximum(self._count(self.lo, self.hi), 1.0)
        low = np.where(count == 1.0, self.p_low ** 2, self.p_low ** 2 / count)
        margin = 2.0 * (self.lo.size + 4) * EPS
        return (scaled_down(float(np.sum(low)), margin),
                min(1.0, scaled_up(float(np.sum(self.p_high ** 2)), margin)))

    def gap(self) -> float:
        low, high = self.tie()
        return high - low

    def halve_widest(self, batch: int) -> int:
        """Halve the ``batch`` runs of widest gap that hold more than one value; returns the
        number of new runs bounded (0 when no run can be halved)."""
        count = self._count(self.lo, self.hi)
        gap = np.where(count > 1.0, self.p_high ** 2 - self.p_low ** 2 / np.maximum(count, 1),
                       -1.0)
        chosen = np.argsort(-gap)[:batch]
        chosen = chosen[gap[chosen] > 0]
        if chosen.size == 0:
            return 0
        lo, hi = self.lo[chosen], self.hi[chosen]
        middle = np.floor((lo + hi) / 2.0)
        keep = np.ones(self.lo.size, dtype=bool)
        keep[chosen] = False
        self.lo, self.hi = self.lo[keep], self.hi[keep]
        self.p_low, self.p_high = self.p_low[keep], self.p_high[keep]
        self.add(np.concatenate([lo, middle + 1.0]), np.concatenate([middle, hi]))
        return 2 * chosen.size
