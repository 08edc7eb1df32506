"""PV: certified probability bounds by input-space branch and bound (paper 003, DESIGN D5).

One box tree serves every probability of a specification (they share the input
distribution): each box carries the set of *events* still undecided on it. A box is bounded
once — CROWN on a specification matrix holding every output atom (e.g. ``y_1 − y_0``), exact
intervals for input atoms — and each event's three-valued truth follows by Kleene logic. When
an event is proven true on a box, the box's (rounded-down) mass is added to the event's lower
bound; proven false, it is subtracted from the event's upper bound. Boxes with no undecided
event leave the tree.

Selection is SelectProb (largest mass first); splitting is BaBSB (IBP look-ahead on both
children of every candidate dimension) alternating with LongestEdge every ``k`` levels for
completeness (BaBSB-LongestEdge-k). A box with an undecided input atom on one column
(``x.age >= 18``) is first cut exactly at the atom's threshold, with the threshold on the
atom's true side, which decides that atom on both children. Only dimensions that the network
or an atom reads are ever split; every other dimension is integrated out by the box
probabilities. Split rules: bounded continuous dimensions are bisected; unbounded ones are cut
at quantiles of the population's marginal (halving the marginal mass of the unbounded side);
integer dimensions split into disjoint integer ranges; one-hot groups split into "this
category" / "not it".

Soundness: every box bound comes from :mod:`verifier.bounds` (sound, with float margins);
masses come as ``(lower, upper)`` enclosures and only lower masses are ever added or
subtracted; sums are rounded down by a relative ``1e-12``; derived probabilities and the
specification's expression use outward-rounded interval arithmetic. A conditional probability
``P[E | C]`` is ``a / (a + b)`` with ``a = P[E ∧ C]``, ``b = P[¬E ∧ C]``, which is monotone
in both and so tighter than dividing two independent intervals. Assumption: continuous
columns have no point masses (a split face shared by two children has probability zero).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from verifier.bounds import METHODS, compute_bounds, linear_interval
from verifier.boxpool import Boxes, BoxPool
from verifier.certificate import Certificate
from verifier.errors import CertgateInputError
from verifier.exact_arith import exact_linear_value, exact_outputs, linear_form_bounds
from verifier.network import Network
from verifier.quantiles import QUANTILE_LEVELS, MarginalQuantiles, MassFunction
from verifier.spec import (
    And,
    Atom,
    Event,
    Interval,
    Not,
    Specification,
    atom_truth,
    atoms_of,
    evaluate_event,
    interval_eval,
)

SplitRule = Literal[
    "smear", "smear-longest-edge", "babsb", "babsb-longest-edge", "longest-edge"
]
SPLIT_RULES: tuple[str, ...] = (
    "smear", "smear-longest-edge", "babsb", "babsb-longest-edge", "longest-edge"
)
SUM_ROUNDING = 1e-12


@dataclass(frozen=True)
class InputDomain:
    """The root box of the search and how each input column may be split.

    ``integer[i]``: column ``i`` takes integer values only (split into disjoint integer
    ranges). ``atomless[i]``: column ``i`` has no point masses (split children may share a
    face). Any other column is split into ``[lo, m]`` and ``[next float after m, hi]``: disjoint
    over the floats, so no atom is counted twice; the real gap between two adjacent floats is
    simply never credited to either bound, which is conservative. ``groups``: one-hot groups
    (column indices whose values are 0/1 with exactly one 1).
    """

    lower: np.ndarray
    upper: np.ndarray
    integer: np.ndarray
    groups: tuple[tuple[int, ...], ...] = ()
    atomless: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.atomless is None:
            object.__setattr__(self, "atomless", ~np.asarray(self.integer, dtype=bool))
        shapes = {self.lower.shape, self.upper.shape, self.integer.shape, self.atomless.shape}
        if len(shapes) != 1:
            raise CertgateInputError("input domain arrays disagree in length")
        if (self.lower > self.upper).any():
            raise CertgateInputError("input domain is empty (lower > upper)")


@dataclass
class PVSettings:
    """Knobs of the branch and bound; the defaults follow paper 003's configuration."""

    batch_size: int = 1024
    method: str = "crown"
    split: SplitRule = "smear-longest-edge"
    longest_edge_every: int = 10
    timeout_s: float | None = 60.0
    precision: float | None = None
    max_boxes: int | None = None
    max_candidate_dims: int = 24
    enumerate_points: int = 0
    max_points_per_batch: int = 1 << 16

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise CertgateInputError(f"unknown bound method {self.method!r}")
        if self.split not in SPLIT_RULES:
            raise CertgateInputError(
                f"unknown split rule {self.split!r}; use one of {', '.join(SPLIT_RULES)}"
            )
        if self.batch_size < 1:
            raise CertgateInputError("batch_size must be positive")
        if self.precision is not None and self.precision <= 0:
            raise CertgateInputError("precision must be positive")
        if self.enumerate_points < 0 or self.max_points_per_batch < 1:
            raise CertgateInputError(
                "enumerate_points must be >= 0 and max_points_per_batch positive"
            )


@dataclass
class PVProgress:
    """One anytime report: the current sound intervals."""

    probabilities: dict[str, Interval]
    value: Interval
    verdict: str
    boxes: int
    open_boxes: int
    elapsed_s: float


@dataclass
class PVResult:
    """What PV proved: the verdict (only if proven), every interval, and the cost."""

    verdict: str
    value: Interval
    probabilities: dict[str, Interval]
    boxes: int
    iterations: int
    elapsed_s: float
    stopped_by: str
    specification: Specification
    history: list[tuple[float, Interval]] = field(default_factory=list)

    def to_certificate(self) -> Certificate:
        spec = self.specification
        bounds = {"value": self.value, **self.probabilities}
        return Certificate(
            audit=spec.name,
            verdict=self.verdict,
            bounds=bounds,
            details={
                "expression": spec.expression_text,
                "comparison": spec.comparison,
                "threshold": spec.threshold,
                "probabilities": {k: t.describe() for k, t in spec.probabilities.items()},
                "stopped_by": self.stopped_by,
                "history": [[t, list(v)] for t, v in self.history],
                **spec.metadata,
            },
            cost={"elapsed_s": self.elapsed_s, "boxes": self.boxes, "iterations": self.iterations},
            algorithm="PV branch and bound (SelectProb, BaBSB-LongestEdge, CROWN)",
        )


class _Events:
    """The events tracked for a specification and how probabilities derive from them."""

    def __init__(self, spec: Specification) -> None:
        self.events: list[Event] = []
        self.terms: dict[str, tuple[int, int | None]] = {}
        for name, term in spec.probabilities.items():
            if term.condition is None:
                self.terms[name] = (self._add(term.event), None)
            else:
                joint = self._add(And((term.event, term.condition)))
                complement = self._add(And((Not(term.event), term.condition)))
                self.terms[name] = (joint, complement)
        self.atoms: list[Atom] = []
        for event in self.events:
            for atom in atoms_of(event):
                if atom not in self.atoms:
                    self.atoms.append(atom)

    def _add(self, event: Event) -> int:
        if event not in self.events:
            self.events.append(event)
        return self.events.index(event)

    def probabilities(self, lower: np.ndarray, upper: np.ndarray) -> dict[str, Interval]:
        """Sound intervals of every named probability from the event intervals."""
        result = {}
        for name, (joint, complement) in self.terms.items():
            if complement is None:
                result[name] = (max(0.0, float(lower[joint])), min(1.0, float(upper[joint])))
                continue
            a_lo, a_hi = float(lower[joint]), float(upper[joint])
            b_lo, b_hi = float(lower[complement]), float(upper[complement])
            result[name] = _ratio_share(a_lo, a_hi, b_lo, b_hi)
        return result


def _ratio_share(a_lo: float, a_hi: float, b_lo: float, b_hi: float) -> Interval:
    """Enclosure of ``a / (a + b)`` for ``a ∈ [a_lo, a_hi]``, ``b ∈ [b_lo, b_hi]``, all ≥ 0."""
    low_den = _up(a_lo + b_hi)
    high_den = _down(a_hi + b_lo)
    low = _down(a_lo / low_den) if low_den > 0 else 0.0
    high = _up(a_hi / high_den) if high_den > 0 else 1.0
    return (max(0.0, low), min(1.0, high))


def _down(value: float) -> float:
    return float(np.nextafter(value, -np.inf))


def _up(value: float) -> float:
    return float(np.nextafter(value, np.inf))


class ProbabilityBranchAndBound:
    """Shared-tree branch and bound for all events of one specification."""

    def __init__(
        self, network: Network, spec: Specification, masses: MassFunction,
        domain: InputDomain, settings: PVSettings,
    ) -> None:
        if domain.lower.size != network.input_size:
            raise CertgateInputError(
                f"the population has {domain.lower.size} columns, the network "
                f"{network.input_size} inputs"
            )
        self.network = network
        self.spec = spec
        self.masses = masses
        self.domain = domain
        self.settings = settings
        self.tracked = _Events(spec)
        atoms = self.tracked.atoms
        width = network.input_size
        self.output_rows = np.array(
            [a.output_coeffs if a.reads_outputs else [0.0] * network.output_size for a in atoms]
        ).reshape(len(atoms), network.output_size)
        self.input_rows = np.array(
            [a.input_coeffs if a.reads_inputs else [0.0] * width for a in atoms]
        ).reshape(len(atoms), width)
        self.constants = np.array([a.constant for a in atoms])
        self.reads_outputs = np.array([a.reads_outputs for a in atoms], dtype=bool)
        read = network.read_inputs() if self.reads_outputs.any() else np.zeros(width, bool)
        self.splittable = read | (self.input_rows != 0.0).any(axis=0)
        self.group_of = np.full(width, -1)
        self.group_members = np.zeros((max(1, len(domain.groups)), width), dtype=bool)
        for index, group in enumerate(domain.groups):
            self.group_of[list(group)] = index
            self.group_members[index, list(group)] = True
        slots = max((len(group) for group in domain.groups), default=1)
        self.group_index = np.array(
            [[*g, *([g[0]] * (slots - len(g)))] for g in domain.groups], dtype=np.int64
        ).reshape(len(domain.groups), slots)
        self.group_valid = np.array(
            [[True] * len(g) + [False] * (slots - len(g)) for g in domain.groups], dtype=bool
        ).reshape(len(domain.groups), slots)
        self.quantiles = MarginalQuantiles(masses, domain)
        self._threshold_atoms()
        self.root_width = domain.upper - domain.lower
        for column, table in self.quantiles.values.items():
            central = table[(QUANTILE_LEVELS >= 2.0**-10) & (QUANTILE_LEVELS <= 1 - 2.0**-10)]
            self.root_width[column] = max(float(central[-1] - central[0]), 1e-12)
        self.root_width = np.where(self.root_width > 0, self.root_width, 1.0)

    def _threshold_atoms(self) -> None:
        """Atoms ``c·x_d + k ≥ 0`` (or ``> 0``) on one input column: their column, threshold
        ``t = −k/c`` and the cut that puts ``t`` on the atom's true side."""
        single = (~self.reads_outputs) & ((self.input_rows != 0.0).sum(axis=1) == 1)
        self.threshold_atom = np.flatnonzero(single)
        columns = np.argmax(self.input_rows[single] != 0.0, axis=1)
        coeff = self.input_rows[single, columns]
        self.threshold_column = columns
        self.threshold_value = -self.constants[single] / coeff
        strict = np.array([self.tracked.atoms[i].strict for i in self.threshold_atom], bool)
        # True side above t (c > 0) holds t itself unless strict; below t (c < 0) likewise.
        self.threshold_t_goes_right = np.where(coeff > 0, ~strict, strict)

    def _threshold_cuts(
        self, lo: np.ndarray, hi: np.ndarray, undecided_atoms: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For every box with an undecided one-column input atom whose threshold splits the
        box: (has_cut, column, left_hi, right_lo); the first such atom wins."""
        count = lo.shape[0]
        has_cut = np.zeros(count, dtype=bool)
        column = np.zeros(count, dtype=np.int64)
        left_hi = np.zeros(count)
        right_lo = np.zeros(count)
        for index, atom in enumerate(self.threshold_atom):
            d = self.threshold_column[index]
            t = self.threshold_value[index]
            right = self.threshold_t_goes_right[index]
            if self.domain.integer[d]:
                cut_left = np.ceil(t) - 1.0 if right else np.floor(t)
                cut_right = cut_left + 1.0
            else:
                cut_left = np.nextafter(t, -np.inf) if right else t
                cut_right = t if right else np.nextafter(t, np.inf)
            usable = (
                ~has_cut & undecided_atoms[:, atom] & (lo[:, d] <= cut_left)
                & (cut_right <= hi[:, d]) & self.splittable[d]
            )
            has_cut |= usable
            column[usable] = d
            left_hi[usable] = cut_left
            right_lo[usable] = cut_right
        return has_cut, column, left_hi, right_lo

    # ---------------------------------------------------------------- bounding boxes
    def atom_bounds(
        self, lo: np.ndarray, hi: np.ndarray, method: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """Sound bounds of every atom's left-hand side on every box, shape (B, atoms)."""
        low, high, _, _ = self.atom_bounds_and_drive(lo, hi, method)
        return low, high

    def atom_bounds_and_drive(
        self, lo: np.ndarray, hi: np.ndarray, method: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Atom bounds (B, atoms), each input's drive on each atom's gap (B, atoms, D): the
        absolute input coefficients of CROWN's linear bounds (output atoms) or of the atom
        itself (input atoms); multiplied by an input's width, its share of the gap; and the
        signed coefficients of the lower linear bounds (B, atoms, D)."""
        count = lo.shape[0]
        atoms = len(self.tracked.atoms)
        low = np.zeros((count, atoms))
        high = np.zeros((count, atoms))
        drive = np.broadcast_to(np.abs(self.input_rows), (count, *self.input_rows.shape)).copy()
        signed = np.broadcast_to(self.input_rows, (count, *self.input_rows.shape)).copy()
        if self.reads_outputs.any():
            rows = self.output_rows[self.reads_outputs]
            result = compute_bounds(
                self.network, lo, hi, rows, method,  # type: ignore[arg-type]
                groups=self.domain.groups,
            )
            low[:, self.reads_outputs] = result.lower
            high[:, self.reads_outputs] = result.upper
            if result.sensitivity is not None:
                drive[:, self.reads_outputs] += result.sensitivity
            if result.lower_coefficients is not None:
                signed[:, self.reads_outputs] += result.lower_coefficients
        reads_inputs = (self.input_rows != 0.0).any(axis=1)
        mixed = reads_inputs & self.reads_outputs
        if mixed.any():
            in_lo, in_hi = linear_interval(self.input_rows[mixed], lo, hi)
            low[:, mixed] += in_lo
            high[:, mixed] += in_hi
        magnitude = np.abs(low) + np.abs(high) + np.abs(self.constants)
        margin = np.where(np.isfinite(magnitude), 1e-12 * magnitude, 0.0)
        low, high = low + self.constants - margin, high + self.constants + margin
        pure = reads_inputs & ~self.reads_outputs
        if pure.any():
            low[:, pure], high[:, pure] = linear_form_bounds(
                self.input_rows[pure], self.constants[pure], lo, hi
            )
        return low, high, drive, signed

    def truth(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """Kleene truth of every event per box: (B, events) in {−1, 0, 1}."""
        values = {
            atom: atom_truth(atom, low[:, i], high[:, i])
            for i, atom in enumerate(self.tracked.atoms)
        }
        return np.stack(
            [evaluate_event(event, values) for event in self.tracked.events], axis=1
        ).astype(np.int8)

    # ---------------------------------------------------------------- splitting
    def _allowed(self, lo: np.ndarray, hi: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Per box ``i``: which slots of one-hot group ``groups[i]`` are categories the box
        still allows (their unit vector fits the box), shape ``(B, slots)``."""
        columns = self.group_index[groups]
        valid = self.group_valid[groups]
        rows = np.arange(lo.shape[0])[:, None]
        g_lo, g_hi = lo[rows, columns], hi[rows, columns]
        zero_fails = valid & ~((g_lo <= 0.0) & (g_hi >= 0.0))
        one_fits = valid & (g_lo <= 1.0) & (g_hi >= 1.0)
        others_fail = zero_fails.sum(axis=1, keepdims=True) - zero_fails
        return one_fits & (others_fail == 0)

    def _candidates(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Splittable columns per box: read and non-degenerate; a one-hot group is split as
        a whole, through its first column, while it allows two categories or more."""
        open_column = (hi > lo) & self.splittable[None, :]
        in_group = self.group_of >= 0
        if in_group.any():
            open_column[:, in_group] = False
            for group in range(self.group_index.shape[0]):
                first = self.group_index[group, 0]
                allowed = self._allowed(lo, hi, np.full(lo.shape[0], group))
                read = self.splittable[self.group_index[group]].any()
                open_column[:, first] = read & (allowed.sum(axis=1) >= 2)
        return open_column

    def _children(
        self, lo: np.ndarray, hi: np.ndarray, dims: np.ndarray, order: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Split box ``i`` along ``dims[i]``: returns (left_lo, left_hi, right_lo, right_hi).

        A one-hot group's allowed categories are sorted by ``order`` (the leading atom's
        coefficients) and halved: each child allows one half, so both children's ranges of
        that coefficient shrink; a child left with one category fixes it."""
        rows = np.arange(lo.shape[0])
        left_lo, left_hi = lo.copy(), hi.copy()
        right_lo, right_hi = lo.copy(), hi.copy()
        low, high = lo[rows, dims], hi[rows, dims]
        infinite = ~(np.isfinite(low) & np.isfinite(high))
        cut = (np.where(infinite, 0.0, low) + np.where(infinite, 0.0, high)) * 0.5
        for column in np.unique(dims[infinite]):
            chosen = infinite & (dims == column)
            cut[chosen] = self.quantiles.split_points(int(column), low[chosen], high[chosen])
        integer = self.domain.integer[dims]
        atomless = self.domain.atomless[dims]
        left_cut = np.where(integer, np.floor(cut), cut)
        right_cut = np.where(
            integer, np.floor(cut) + 1.0, np.where(atomless, cut, np.nextafter(cut, np.inf))
        )
        left_hi[rows, dims] = left_cut
        right_lo[rows, dims] = right_cut
        grouped = self.group_of[dims] >= 0
        if grouped.any():
            rows_g = rows[grouped]
            groups = self.group_of[dims[grouped]]
            allowed = self._allowed(lo[rows_g], hi[rows_g], groups)
            columns = self.group_index[groups]
            valid = self.group_valid[groups]
            key = np.where(allowed, order[rows_g[:, None], columns], np.inf)
            rank = np.argsort(np.argsort(key, axis=1, kind="stable"), axis=1, kind="stable")
            count = allowed.sum(axis=1, keepdims=True)
            halves = (allowed & (rank < count // 2), allowed & (rank >= count // 2))
            where = (np.repeat(rows_g[:, None], columns.shape[1], axis=1)[valid], columns[valid])
            for (child_lo, child_hi), half in zip(
                ((left_lo, left_hi), (right_lo, right_hi)), halves, strict=True
            ):
                single = half & (half.sum(axis=1, keepdims=True) == 1)
                child_hi[where] = half.astype(np.float64)[valid]
                child_lo[where] = single.astype(np.float64)[valid]
        return left_lo, left_hi, right_lo, right_hi

    def _group_scores(
        self, score: np.ndarray, lo: np.ndarray, hi: np.ndarray, order: np.ndarray
    ) -> np.ndarray:
        """Smear scores with each one-hot group's (on its first column) replaced by the range
        of the leading atom's coefficients over the categories the box allows: how much of
        the gap the group's choice drives (twice, as the drive counts both bounds)."""
        rows = np.arange(lo.shape[0])[:, None]
        for group in range(self.group_index.shape[0]):
            allowed = self._allowed(lo, hi, np.full(lo.shape[0], group))
            values = order[rows, self.group_index[group][None, :]]
            high = np.where(allowed, values, -np.inf).max(axis=1)
            low = np.where(allowed, values, np.inf).min(axis=1)
            spread = np.where(allowed.sum(axis=1) >= 2, 2.0 * (high - low), 0.0)
            score[:, self.group_index[group, 0]] = spread
        return score

    def choose_dims(
        self, lo: np.ndarray, hi: np.ndarray, depth: np.ndarray, undecided_atoms: np.ndarray,
        drive: np.ndarray, order: np.ndarray,
    ) -> np.ndarray:
        """One split column per box: smear (largest drive × width) or BaBSB, with LongestEdge
        every k levels for the ``*-longest-edge`` rules; unbounded read columns first."""
        count = lo.shape[0]
        candidates = self._candidates(lo, hi)
        with np.errstate(invalid="ignore"):
            relative = np.where(candidates, (hi - lo) / self.root_width[None, :], -np.inf)
        longest = np.argmax(relative, axis=1)
        rule = self.settings.split
        if rule == "longest-edge":
            return longest
        use_longest = np.zeros(count, dtype=bool)
        if rule.endswith("-longest-edge"):
            k = self.settings.longest_edge_every
            use_longest = depth % k == k - 1
        other = ~use_longest
        dims = longest.copy()
        if not other.any():
            return dims
        if rule.startswith("babsb"):
            dims[other] = self._babsb(
                lo[other], hi[other], candidates[other], relative[other], undecided_atoms[other],
                order[other],
            )
            return dims
        width = hi[other] - lo[other]
        with np.errstate(invalid="ignore"):
            score = np.where(np.isfinite(width), drive[other] * width, np.inf)
        score = self._group_scores(score, lo[other], hi[other], order[other])
        score = np.where(candidates[other], score, -np.inf)
        best = np.argmax(score, axis=1)
        no_signal = ~np.isfinite(score[np.arange(best.size), best]) | (
            score[np.arange(best.size), best] <= 0.0
        )
        unbounded = np.isinf(score[np.arange(best.size), best])
        dims[other] = np.where(no_signal & ~unbounded, longest[other], best)
        return dims

    def _babsb(
        self, lo: np.ndarray, hi: np.ndarray, candidates: np.ndarray, relative: np.ndarray,
        undecided: np.ndarray, coefficients: np.ndarray,
    ) -> np.ndarray:
        count, width = lo.shape
        limit = min(width, self.settings.max_candidate_dims)
        influence = np.abs(self.network.layers[0].weight).sum(axis=0) + np.abs(
            self.input_rows
        ).sum(axis=0)
        finite_relative = np.where(candidates, np.minimum(relative, 1e300), 0.0)
        weight = np.where(candidates, finite_relative * influence[None, :] + 1e-300, 0.0)
        order = np.argsort(-weight, axis=1, kind="stable")[:, :limit]
        valid = np.take_along_axis(candidates, order, axis=1)
        # padding entries (boxes with fewer candidates) repeat the box's best candidate
        order = np.where(valid, order, order[:, :1])
        flat_rows = np.repeat(np.arange(count), limit)
        flat_dims = order.reshape(-1)
        left_lo, left_hi, right_lo, right_hi = self._children(
            lo[flat_rows], hi[flat_rows], flat_dims, coefficients[flat_rows]
        )
        both_lo = np.concatenate([left_lo, right_lo])
        both_hi = np.concatenate([left_hi, right_hi])
        low, high = self.atom_bounds(both_lo, both_hi, "ibp")
        half = flat_rows.size
        l1, l2 = low[:half], low[half:]
        h1, h2 = high[:half], high[half:]
        active = np.repeat(undecided, limit, axis=0)
        output = active & self.reads_outputs[None, :]
        margin = np.maximum(np.maximum(l1, l2), -np.minimum(h1, h2))
        margin = np.where(output & np.isfinite(margin), margin, -np.inf)
        progress = np.round(margin.max(axis=1), 4)
        settled = ~self._undecided_atoms(l1, h1) & ~self._undecided_atoms(l2, h2)
        decided = (settled & active).sum(axis=1)
        score = decided * 1e12 + np.where(np.isfinite(progress), progress, -1e11)
        unbounded = ~np.isfinite(hi[flat_rows, flat_dims] - lo[flat_rows, flat_dims])
        score = np.where(unbounded, np.inf, score)
        score = np.where(valid.reshape(-1), score, -np.inf).reshape(count, limit)
        return order[np.arange(count), np.argmax(score, axis=1)]

    # ---------------------------------------------------------------- main loop
    def _evaluate(self, lo: np.ndarray, hi: np.ndarray, pending: np.ndarray,
                  depth: np.ndarray, method: str | None = None) -> Boxes:
        """Bound new boxes (with ``method``, default the settings') and record what PV keeps
        about each."""
        mass_lo, mass_hi = self.masses(lo, hi)
        low, high, atom_drive, signed = self.atom_bounds_and_drive(
            lo, hi, method or self.settings.method
        )
        undecided = self._undecided_atoms(low, high)
        drive, order = self._drive(atom_drive, signed, undecided)
        return Boxes(lo, hi, mass_lo, mass_hi, pending, depth, undecided, drive, order,
                     self.truth(low, high))

    def run(self, progress: Callable[[PVProgress], None] | None = None) -> PVResult:
        """Refine until the verdict is proven, the precision is reached, the time budget or
        the box budget runs out, or no undecided box is left. Anytime: ``progress`` gets
        every new (monotonically tightening) set of intervals."""
        started = time.perf_counter()
        settings = self.settings
        events = len(self.tracked.events)
        new = self._evaluate(
            self.domain.lower[None, :].copy(), self.domain.upper[None, :].copy(),
            np.ones((1, events), dtype=bool), np.zeros(1, dtype=np.int64),
        )
        if new.mass_hi[0] <= 0.0:
            raise CertgateInputError("the population model gives the input domain probability 0")
        total = float(new.mass_hi[0])
        lower = np.zeros(events)
        violated = np.zeros(events)
        pool = BoxPool()
        processed = iterations = 0
        history: list[tuple[float, Interval]] = []
        while True:
            sat = new.pending & (new.truth == 1)
            viol = new.pending & (new.truth == -1)
            lower += (sat * new.mass_lo[:, None]).sum(axis=0) * (1.0 - SUM_ROUNDING)
            violated += (viol * new.mass_lo[:, None]).sum(axis=0) * (1.0 - SUM_ROUNDING)
            new.pending = new.pending & (new.truth == 0)
            pool.add(new.select(new.pending.any(axis=1) & (new.mass_hi > 0.0)))
            upper = np.minimum(np.maximum(total - violated, lower), 1.0)
            probabilities = self.tracked.probabilities(lower, upper)
            value = interval_eval(self.spec.expression, probabilities)
            verdict = self.spec.decide(value)
            elapsed = time.perf_counter() - started
            history.append((elapsed, value))
            if progress is not None:
                progress(PVProgress(probabilities, value, verdict, processed, pool.size, elapsed))
            iterations += 1
            stopped_by = self._stop_reason(verdict, pool.size, probabilities, elapsed, processed)
            if stopped_by is not None:
                break
            chosen = pool.pop_heaviest(settings.batch_size)
            new = self._refine(chosen)
            processed += new.lo.shape[0]
        return PVResult(
            verdict=verdict,
            value=value,
            probabilities=probabilities,
            boxes=processed,
            iterations=iterations,
            elapsed_s=time.perf_counter() - started,
            stopped_by=stopped_by,
            specification=self.spec,
            history=history,
        )

    def _refine(self, chosen: Boxes) -> Boxes:
        """The next boxes from the chosen ones: single points are decided exactly, boxes with
        few discrete points are replaced by all their points, the others are split."""
        points = ~self._candidates(chosen.lo, chosen.hi).any(axis=1)
        counts = self.point_counts(chosen.lo, chosen.hi)
        small = ~points & (counts <= self.settings.enumerate_points)
        small &= np.cumsum(np.where(small, counts, 0.0)) <= self.settings.max_points_per_batch
        parts = []
        if points.any():
            parts.append(self._decide_points(chosen.select(points)))
        if small.any():
            parts.append(self._enumerate(chosen.select(small)))
        rest = ~points & ~small
        if rest.any():
            parts.append(self._split(chosen.select(rest)))
        new = parts[0]
        for part in parts[1:]:
            new = new.extended(part)
        return new

    def _discrete_axes(self) -> tuple[np.ndarray, np.ndarray]:
        """The integer columns (outside one-hot groups) and the one-hot groups that a split
        may cut: the axes along which a box's points are counted and enumerated."""
        integer = np.flatnonzero(self.domain.integer & self.splittable & (self.group_of < 0))
        groups = np.array([
            g for g in range(self.group_index.shape[0])
            if self.splittable[self.group_index[g][self.group_valid[g]]].any()
        ], dtype=np.int64)
        return integer, groups

    def point_counts(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per box: how many points its splittable columns can take (``inf`` when one of them
        is continuous): integer values per integer column times allowed categories per
        one-hot group."""
        counts = np.ones(lo.shape[0])
        continuous = self.splittable & ~self.domain.integer & (self.group_of < 0)
        open_continuous = (hi[:, continuous] > lo[:, continuous]).any(axis=1)
        integer, groups = self._discrete_axes()
        for d in integer:
            counts *= np.maximum(np.floor(hi[:, d]) - np.ceil(lo[:, d]) + 1.0, 0.0)
        for g in groups:
            counts *= self._allowed(lo, hi, np.full(lo.shape[0], g)).sum(axis=1)
        return np.where(open_continuous, np.inf, counts)

    def _enumerate(self, boxes: Boxes) -> Boxes:
        """Every point of each box (all combinations of integer values and allowed categories
        on its splittable discrete axes; other columns keep their interval), bounded by IBP,
        which is exact at a point up to the rounding margin. Together the points carry all
        the box's mass: integer columns have mass on integers only, one-hot groups on their
        categories only."""
        integer, groups = self._discrete_axes()
        count = boxes.lo.shape[0]
        allowed = [self._allowed(boxes.lo, boxes.hi, np.full(count, g)) for g in groups]
        sizes = np.concatenate([
            np.maximum(np.floor(boxes.hi[:, integer]) - np.ceil(boxes.lo[:, integer]) + 1, 0),
            np.array([a.sum(axis=1) for a in allowed]).reshape(len(groups), count).T,
        ], axis=1).astype(np.int64)
        totals = sizes.prod(axis=1)
        parent = np.repeat(np.arange(count), totals)
        rest = np.arange(parent.size) - np.repeat(np.cumsum(totals) - totals, totals)
        lo, hi = boxes.lo[parent].copy(), boxes.hi[parent].copy()
        for axis, d in enumerate(integer):
            size = sizes[parent, axis]
            value = np.ceil(boxes.lo[parent, d]) + rest % size
            rest = rest // size
            lo[:, d] = hi[:, d] = value
        rows = np.arange(parent.size)
        for axis, g in enumerate(groups, start=len(integer)):
            size = sizes[parent, axis]
            digit = rest % size
            rest = rest // size
            mask = allowed[axis - len(integer)][parent]
            rank = np.cumsum(mask, axis=1) - 1
            slot = np.argmax(mask & (rank == digit[:, None]), axis=1)
            columns = self.group_index[g][self.group_valid[g]]
            lo[:, columns] = hi[:, columns] = 0.0
            chosen = self.group_index[g][slot]
            lo[rows, chosen] = hi[rows, chosen] = 1.0
        return self._evaluate(lo, hi, boxes.pending[parent], boxes.depth[parent] + 1, "ibp")

    def _split(self, chosen: Boxes) -> Boxes:
        """Both children of every chosen box, bounded (an input-atom threshold cut where one
        applies, else the split rule's column)."""
        dims = self.choose_dims(
            chosen.lo, chosen.hi, chosen.depth, chosen.atoms, chosen.drive, chosen.order
        )
        left_lo, left_hi, right_lo, right_hi = self._children(
            chosen.lo, chosen.hi, dims, chosen.order
        )
        cut, cut_column, cut_left, cut_right = self._threshold_cuts(
            chosen.lo, chosen.hi, chosen.atoms
        )
        if cut.any():
            rows = np.flatnonzero(cut)
            columns = cut_column[rows]
            for target, source in ((left_lo, chosen.lo), (left_hi, chosen.hi),
                                   (right_lo, chosen.lo), (right_hi, chosen.hi)):
                target[rows] = source[rows]
            left_hi[rows, columns] = cut_left[rows]
            right_lo[rows, columns] = cut_right[rows]
        return self._evaluate(
            np.concatenate([left_lo, right_lo]), np.concatenate([left_hi, right_hi]),
            np.concatenate([chosen.pending, chosen.pending]),
            np.concatenate([chosen.depth, chosen.depth]) + 1,
        )

    def _decide_points(self, boxes: Boxes) -> Boxes:
        """Decide every event on boxes that are single points in every column that matters.

        Their bounds (with rounding margins) left some event undecided, so the atoms are
        evaluated exactly at the point in rational arithmetic (a tie such as ``y1 − y0 = 0``
        is then decided exactly). That is the model's real value only when the network IR
        holds the model's own coefficients; for a folded IR (a normalisation merged into a
        layer) a tie within its rounding cannot be decided and is reported as an error.
        """
        if self.reads_outputs.any() and self.network.folded:
            raise CertgateInputError(
                "a single-point box leaves an event undecided within the rounding of the "
                "network's folded coefficients (a tie at a point of positive probability): "
                "the event cannot be decided; move its threshold off the tie"
            )
        atoms = self.tracked.atoms
        values = np.empty((boxes.lo.shape[0], len(atoms)), dtype=np.int8)
        for row, (lo, hi) in enumerate(zip(boxes.lo, boxes.hi, strict=True)):
            point = np.where(lo == hi, lo, np.where(np.isfinite(lo), lo, np.where(
                np.isfinite(hi), hi, 0.0)))
            outputs = exact_outputs(self.network, point) if self.reads_outputs.any() else []
            for index, atom in enumerate(atoms):
                value = exact_linear_value(
                    atom.output_coeffs, atom.input_coeffs, atom.constant, outputs, point
                )
                holds = value > 0 if atom.strict else value >= 0
                values[row, index] = 1 if holds else -1
        truth = {atom: values[:, index] for index, atom in enumerate(atoms)}
        boxes.truth = np.stack(
            [evaluate_event(event, truth) for event in self.tracked.events], axis=1
        ).astype(np.int8)
        return boxes

    def _stop_reason(self, verdict: str, open_boxes: int, probabilities: dict[str, Interval],
                     elapsed: float, processed: int) -> str | None:
        settings = self.settings
        if verdict != "unknown":
            return "decided"
        if open_boxes == 0:
            return "exhausted"
        if settings.precision is not None and all(
            high - low <= settings.precision for low, high in probabilities.values()
        ):
            return "precision"
        if settings.timeout_s is not None and elapsed >= settings.timeout_s:
            return "timeout"
        if settings.max_boxes is not None and processed >= settings.max_boxes:
            return "max_boxes"
        return None

    @staticmethod
    def _drive(
        atom_drive: np.ndarray, signed: np.ndarray, undecided_atoms: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per box and input: the largest drive over the atoms still undecided there, and the
        signed coefficients of the undecided atom with the largest total drive (they order a
        one-hot group's categories when it is split)."""
        undecided_drive = np.where(undecided_atoms[:, :, None], atom_drive, 0.0)
        leading = np.argmax(undecided_drive.sum(axis=2), axis=1)
        order = signed[np.arange(signed.shape[0]), leading]
        return undecided_drive.max(axis=1), order

    def _undecided_atoms(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        values = [
            atom_truth(atom, low[:, i], high[:, i]) for i, atom in enumerate(self.tracked.atoms)
        ]
        return np.stack(values, axis=1) == 0


def population_domain(population: Any) -> tuple[MassFunction, InputDomain]:
    """PV's view of a population model: its sound box-mass enclosure and its input domain
    (support box, integer and atomless columns, one-hot groups)."""
    lower, upper = population.support()
    domain = InputDomain(
        np.asarray(lower, dtype=np.float64),
        np.asarray(upper, dtype=np.float64),
        np.asarray(population.integer_columns(), dtype=bool),
        tuple(tuple(int(c) for c in group) for group in population.onehot_groups()),
        np.asarray(population.atomless_columns(), dtype=bool),
    )
    return population.prob_boxes_interval, domain


def verify(
    network: Network, spec: Specification, masses: MassFunction, domain: InputDomain,
    settings: PVSettings | None = None, progress: Callable[[PVProgress], None] | None = None,
) -> PVResult:
    """Run PV on ``spec``: sound intervals for every probability and the expression, and the
    verdict if (and only if) it is proven. See :class:`ProbabilityBranchAndBound`."""
    engine = ProbabilityBranchAndBound(network, spec, masses, domain, settings or PVSettings())
    return engine.run(progress)


