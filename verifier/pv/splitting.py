"""How PV cuts boxes: the split rules, child-box construction and point enumeration.

Only columns that the network or an atom reads are split; every other column is integrated
out by the box probabilities. Bounded continuous columns are bisected; unbounded ones are cut
at quantiles of the population's marginal (halving the marginal mass of the unbounded side);
integer columns split into disjoint integer ranges; a one-hot group is split as a whole: a
category holding at least half of the allowed categories' marginal mass is cut off alone,
otherwise the allowed categories are halved in the order of the leading atom's
coefficients. A column with point masses beside a density (a zero-inflated amount) is cut
at the listed point nearest to the rule's cut, so that the point ends alone in a box and is
decided exactly there. A box with an undecided input atom on one column (``x.age >= 18``)
is first cut exactly at the atom's threshold, with the threshold on the atom's true side,
which decides that atom on both children. Column choice: smear (CROWN's input coefficients times
the width, paper 003's BaBSB as an alternative), with LongestEdge every ``k`` levels for
completeness.
"""

from __future__ import annotations

import numpy as np

from verifier.numerics import down, down_array, up, up_array
from verifier.population.distributions import Categorical
from verifier.pv.atoms import AtomBounds, Known
from verifier.pv.boxpool import Boxes
from verifier.pv.carry import inherited_carried
from verifier.pv.domain import InputDomain, MassFunction
from verifier.pv.quantiles import QUANTILE_LEVELS, MarginalQuantiles
from verifier.pv.settings import PVSettings

HEAVY_CATEGORY_SHARE = 0.5
"""A one-hot group's category holding this share of the open categories' marginal mass is
split off alone (docs/decisions.md, PV: 0.3 and 0 measured worse on Adult-13 2×64)."""


class Splitter:
    """The split rules of one PV run: which column to cut and the children it gives."""

    def __init__(
        self, network_first_weight: np.ndarray, atoms: AtomBounds, masses: MassFunction,
        domain: InputDomain, settings: PVSettings,
    ) -> None:
        self.first_weight = network_first_weight
        self.atoms = atoms
        self.domain = domain
        self.settings = settings
        width = domain.lower.size
        self.splittable = atoms.read_columns()
        self.group_of = np.full(width, -1)
        for index, group in enumerate(domain.groups):
            self.group_of[list(group)] = index
        slots = max((len(group) for group in domain.groups), default=1)
        self.group_index = np.array(
            [[*g, *([g[0]] * (slots - len(g)))] for g in domain.groups], dtype=np.int64
        ).reshape(len(domain.groups), slots)
        self.group_valid = np.array(
            [[True] * len(g) + [False] * (slots - len(g)) for g in domain.groups], dtype=bool
        ).reshape(len(domain.groups), slots)
        self.atom_columns = [
            (column, np.asarray(atoms, dtype=np.float64))
            for column, atoms in enumerate(domain.atoms)
            if atoms is not None and len(atoms) and self.group_of[column] < 0
        ]
        self.atom_prefix = {
            column: self._marginal_prefix(masses, domain, column, atoms)
            for column, atoms in self.atom_columns
        }
        self.point_columns = [
            (column, np.asarray(points, dtype=np.float64))
            for column, points in enumerate(domain.point_masses)
            if points is not None and len(points) and self._beside_a_density(column)
        ]
        self.category_mass = self._category_masses(masses, domain)
        self.quantiles = MarginalQuantiles(masses, domain)
        self._threshold_atoms()
        self.root_width = domain.upper - domain.lower
        for column, table in self.quantiles.values.items():
            central = table[(QUANTILE_LEVELS >= 2.0**-10) & (QUANTILE_LEVELS <= 1 - 2.0**-10)]
            self.root_width[column] = max(float(central[-1] - central[0]), 1e-12)
        self.root_width = np.where(self.root_width > 0, self.root_width, 1.0)

    def _beside_a_density(self, column: int) -> bool:
        """Whether ``column`` may hold point masses beside a density: neither integer nor
        atomless, no finite value set, outside every one-hot group."""
        domain = self.domain
        finite_set = bool(domain.atoms) and domain.atoms[column] is not None
        return not (domain.integer[column] or domain.atomless[column] or finite_set
                    or self.group_of[column] >= 0)

    def _threshold_atoms(self) -> None:
        """Atoms ``c·x_d + k ≥ 0`` (or ``> 0``) on one input column: their column, threshold
        ``t = −k/c`` and the cut that puts ``t`` on the atom's true side."""
        single = (~self.atoms.reads_outputs) & ((self.atoms.input_rows != 0.0).sum(axis=1) == 1)
        self.threshold_atom = np.flatnonzero(single)
        columns = np.argmax(self.atoms.input_rows[single] != 0.0, axis=1)
        coeff = self.atoms.input_rows[single, columns]
        self.threshold_column = columns
        self.threshold_value = -self.atoms.constants[single] / coeff
        strict = self.atoms.strict[self.threshold_atom]
        # True side above t (c > 0) holds t itself unless strict; below t (c < 0) likewise.
        self.threshold_t_goes_right = np.where(coeff > 0, ~strict, strict)

    def threshold_cuts(
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
                cut_left = down(t) if right else t
                cut_right = t if right else up(t)
            usable = (
                ~has_cut & undecided_atoms[:, atom] & (lo[:, d] <= cut_left)
                & (cut_right <= hi[:, d]) & self.splittable[d]
            )
            has_cut |= usable
            column[usable] = d
            left_hi[usable] = cut_left
            right_lo[usable] = cut_right
        return has_cut, column, left_hi, right_lo

    def allowed(self, lo: np.ndarray, hi: np.ndarray, groups: np.ndarray) -> np.ndarray:
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

    def group_allowed(self, lo: np.ndarray, hi: np.ndarray, group: int) -> np.ndarray:
        """:meth:`allowed` for the same group on every box, on the group's own slots only
        (``(B, k)`` for a group of ``k`` categories; :meth:`allowed`'s padding slots beyond
        them are never allowed): a gather of the group's own columns, several times faster
        than the per-box one (it runs for every group on every chosen box)."""
        columns = self.group_index[group][self.group_valid[group]]
        return Categorical.category_mask(lo[:, columns], hi[:, columns])

    def group_masks(self, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
        """:meth:`group_allowed` of every one-hot group on the boxes, in group order: what a
        round's choice of points, counts and columns reads of the groups, computed once."""
        return [self.group_allowed(lo, hi, group) for group in range(self.group_index.shape[0])]

    def candidates(self, lo: np.ndarray, hi: np.ndarray,
                   masks: list[np.ndarray] | None = None) -> np.ndarray:
        """Splittable columns per box: read and non-degenerate; a one-hot group is split as
        a whole, through its first column, while it allows two categories or more
        (``masks``: the boxes' :meth:`group_masks`, computed here if not given)."""
        open_column = (hi > lo) & self.splittable[None, :]
        in_group = self.group_of >= 0
        if in_group.any():
            masks = self.group_masks(lo, hi) if masks is None else masks
            open_column[:, in_group] = False
            for group, allowed in enumerate(masks):
                first = self.group_index[group, 0]
                read = self.splittable[self.group_index[group]].any()
                open_column[:, first] = read & (allowed.sum(axis=1) >= 2)
        return open_column

    def children(
        self, lo: np.ndarray, hi: np.ndarray, dims: np.ndarray, guide: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Split box ``i`` along ``dims[i]``: returns (left_lo, left_hi, right_lo, right_hi).

        A one-hot group's allowed categories go to two children (:meth:`_halve_categories`:
        its heaviest category alone, or halves in the order of ``guide`` on the group's
        columns, the leading atom's coefficients, :meth:`~verifier.pv.atoms.AtomBounds.
        split_guide`; no other column of ``guide`` is read); a child left with one category
        fixes it."""
        rows = np.arange(lo.shape[0])
        left_lo, left_hi = lo.copy(), hi.copy()
        right_lo, right_hi = lo.copy(), hi.copy()
        low, high = lo[rows, dims], hi[rows, dims]
        infinite = ~(np.isfinite(low) & np.isfinite(high))
        cut = (np.where(infinite, 0.0, low) + np.where(infinite, 0.0, high)) * 0.5
        if infinite.any():
            cut[infinite] = self.quantiles.split_points(dims[infinite], low[infinite],
                                                        high[infinite])
        integer = self.domain.integer[dims]
        atomless = self.domain.atomless[dims]
        # the right child of a column with atoms starts one float above the cut: a cut that
        # rounds up to the box's upper end (a box one float wide) would leave it empty
        cut = np.where(integer | atomless, cut, np.minimum(cut, down_array(high)))
        left_cut = np.where(integer, np.floor(cut), cut)
        right_cut = np.where(
            integer, np.floor(cut) + 1.0, np.where(atomless, cut, up_array(cut))
        )
        left_hi[rows, dims] = left_cut
        right_lo[rows, dims] = right_cut
        self._atom_cuts(lo, hi, dims, left_hi, right_lo)
        self._point_mass_cuts(lo, hi, dims, cut, left_hi, right_lo)
        grouped = self.group_of[dims] >= 0
        if grouped.any():
            rows_g = rows[grouped]
            groups = self.group_of[dims[grouped]]
            allowed = self.allowed(lo[rows_g], hi[rows_g], groups)
            columns = self.group_index[groups]
            valid = self.group_valid[groups]
            halves = self._halve_categories(allowed, groups, guide[rows_g[:, None], columns])
            where = (np.repeat(rows_g[:, None], columns.shape[1], axis=1)[valid], columns[valid])
            for (child_lo, child_hi), half in zip(
                ((left_lo, left_hi), (right_lo, right_hi)), halves, strict=True
            ):
                single = half & (half.sum(axis=1, keepdims=True) == 1)
                child_hi[where] = half.astype(np.float64)[valid]
                child_lo[where] = single.astype(np.float64)[valid]
        return left_lo, left_hi, right_lo, right_hi

    def _halve_categories(
        self, allowed: np.ndarray, groups: np.ndarray, coefficients: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The two children's category sets (masks over the group's slots) for boxes that
        split one-hot group ``groups[i]`` with ``allowed[i]`` categories open (two or more):
        a category holding at least half of the open categories' marginal mass is cut off
        alone (the heavy child fixes it at once, and the light one, holding the rare
        categories, matters little); otherwise the open categories are halved in the order
        of ``coefficients``. The marginal masses are the population's, not the box's: they
        only place the cut."""
        key = np.where(allowed, coefficients, np.inf)
        rank = np.argsort(np.argsort(key, axis=1, kind="stable"), axis=1, kind="stable")
        count = allowed.sum(axis=1, keepdims=True)
        weight = np.where(allowed, self.category_mass[groups], 0.0)
        heavy = (self._heaviest_share(weight) >= HEAVY_CATEGORY_SHARE)[:, None]
        heaviest = np.arange(allowed.shape[1])[None, :] == np.argmax(weight, axis=1)[:, None]
        first = np.where(heavy, heaviest, rank < count // 2)
        return allowed & first, allowed & ~first

    @staticmethod
    def _heaviest_share(weight: np.ndarray) -> np.ndarray:
        """Per box: the heaviest open category's share of the open categories' marginal
        mass (``weight``, zero where a category is not open); 0 where they hold none."""
        total = weight.sum(axis=1)
        return np.where(
            total > 0.0, weight.max(axis=1) / np.maximum(total, np.finfo(float).tiny), 0.0)

    def _group_scores(
        self, score: np.ndarray, masks: list[np.ndarray], guide: np.ndarray
    ) -> np.ndarray:
        """Smear scores with each one-hot group's (on its first column) replaced by the range
        of the leading atom's coefficients (``guide`` on the group's columns) over the
        categories the box allows: how much of
        the gap the group's choice drives (twice, as the drive counts both bounds). A group
        whose heaviest open category holds a share ``s ≥ 1/2`` of the open marginal mass is
        cut by fixing that category (:meth:`_halve_categories`), which removes the whole
        range on that share of the mass where halving removes about half of it on each
        child: its score is ``2s`` times the range's (``masks``: the boxes'
        :meth:`group_masks`)."""
        for group, allowed in enumerate(masks):
            columns = self.group_index[group][self.group_valid[group]]
            values = guide[:, columns]
            high = np.where(allowed, values, -np.inf).max(axis=1)
            low = np.where(allowed, values, np.inf).min(axis=1)
            spread = np.where(allowed.sum(axis=1) >= 2, 2.0 * (high - low), 0.0)
            share = self._heaviest_share(
                np.where(allowed, self.category_mass[group, : columns.size][None, :], 0.0))
            heavy = share >= HEAVY_CATEGORY_SHARE
            score[:, self.group_index[group, 0]] = spread * np.where(heavy, 2.0 * share, 1.0)
        return score

    def choose_dims(
        self, lo: np.ndarray, hi: np.ndarray, depth: np.ndarray, undecided_atoms: np.ndarray,
        guide: np.ndarray, masks: list[np.ndarray] | None = None,
        candidates: np.ndarray | None = None,
    ) -> np.ndarray:
        """One split column per box: smear (largest drive × width; the drive is ``guide``
        outside the one-hot groups, :meth:`~verifier.pv.atoms.AtomBounds.split_guide`, and a
        group scores by :meth:`_group_scores`) or BaBSB, with LongestEdge every k levels for
        the ``*-longest-edge`` rules; unbounded read columns first (``masks``,
        ``candidates``: the boxes' :meth:`group_masks` and :meth:`candidates`, computed here
        if not given)."""
        count = lo.shape[0]
        masks = self.group_masks(lo, hi) if masks is None else masks
        candidates = self.candidates(lo, hi, masks) if candidates is None else candidates
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
                guide[other],
            )
            return dims
        width = hi[other] - lo[other]
        with np.errstate(invalid="ignore"):
            score = np.where(np.isfinite(width), guide[other] * width, np.inf)
        score = self._group_scores(score, [allowed[other] for allowed in masks], guide[other])
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
        influence = np.abs(self.first_weight).sum(axis=0) + np.abs(
            self.atoms.input_rows
        ).sum(axis=0)
        finite_relative = np.where(candidates, np.minimum(relative, 1e300), 0.0)
        weight = np.where(candidates, finite_relative * influence[None, :] + 1e-300, 0.0)
        order = np.argsort(-weight, axis=1, kind="stable")[:, :limit]
        valid = np.take_along_axis(candidates, order, axis=1)
        # padding entries (boxes with fewer candidates) repeat the box's best candidate
        order = np.where(valid, order, order[:, :1])
        flat_rows = np.repeat(np.arange(count), limit)
        flat_dims = order.reshape(-1)
        left_lo, left_hi, right_lo, right_hi = self.children(
            lo[flat_rows], hi[flat_rows], flat_dims, coefficients[flat_rows]
        )
        both_lo = np.concatenate([left_lo, right_lo])
        both_hi = np.concatenate([left_hi, right_hi])
        low, high = self.atoms.bounds(both_lo, both_hi, "ibp")
        half = flat_rows.size
        l1, l2 = low[:half], low[half:]
        h1, h2 = high[:half], high[half:]
        active = np.repeat(undecided, limit, axis=0)
        output = active & self.atoms.reads_outputs[None, :]
        margin = np.maximum(np.maximum(l1, l2), -np.minimum(h1, h2))
        margin = np.where(output & np.isfinite(margin), margin, -np.inf)
        progress = np.round(margin.max(axis=1), 4)
        settled = ~self.atoms.undecided(l1, h1) & ~self.atoms.undecided(l2, h2)
        decided = (settled & active).sum(axis=1)
        score = decided * 1e12 + np.where(np.isfinite(progress), progress, -1e11)
        unbounded = ~np.isfinite(hi[flat_rows, flat_dims] - lo[flat_rows, flat_dims])
        score = np.where(unbounded, np.inf, score)
        score = np.where(valid.reshape(-1), score, -np.inf).reshape(count, limit)
        return order[np.arange(count), np.argmax(score, axis=1)]

    def _discrete_axes(self) -> tuple[np.ndarray, np.ndarray]:
        """The integer columns (outside one-hot groups) and the one-hot groups that a split
        may cut: the axes along which a box's points are counted and enumerated."""
        integer = np.flatnonzero(self.domain.integer & self.splittable & (self.group_of < 0))
        groups = np.array([
            g for g in range(self.group_index.shape[0])
            if self.splittable[self.group_index[g][self.group_valid[g]]].any()
        ], dtype=np.int64)
        return integer, groups

    def point_counts(self, lo: np.ndarray, hi: np.ndarray,
                     masks: list[np.ndarray] | None = None) -> np.ndarray:
        """Per box: how many points its splittable columns can take (``inf`` when one of them
        is continuous): integer values per integer column times allowed categories per
        one-hot group (``masks``: the boxes' :meth:`group_masks`, computed here if not
        given)."""
        counts = np.ones(lo.shape[0])
        continuous = self.splittable & ~self.domain.integer & (self.group_of < 0)
        open_continuous = (hi[:, continuous] > lo[:, continuous]).any(axis=1)
        integer, groups = self._discrete_axes()
        for d in integer:
            counts *= np.maximum(np.floor(hi[:, d]) - np.ceil(lo[:, d]) + 1.0, 0.0)
        for g in groups:
            allowed = self.group_allowed(lo, hi, g) if masks is None else masks[g]
            counts *= allowed.sum(axis=1)
        return np.where(open_continuous, np.inf, counts)

    def enumerate(
        self, box_lo: np.ndarray, box_hi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every point of each box: all combinations of integer values and allowed categories
        on its splittable discrete axes (other columns keep their interval), as ``(lo, hi,
        parent)``. Together the points carry all the box's mass: integer columns have mass
        on integers only, one-hot groups on their categories only."""
        integer, groups = self._discrete_axes()
        count = box_lo.shape[0]
        allowed = [self.group_allowed(box_lo, box_hi, g) for g in groups]
        sizes = np.concatenate([
            np.maximum(np.floor(box_hi[:, integer]) - np.ceil(box_lo[:, integer]) + 1, 0),
            np.array([a.sum(axis=1) for a in allowed]).reshape(len(groups), count).T,
        ], axis=1).astype(np.int64)
        totals = sizes.prod(axis=1)
        parent = np.repeat(np.arange(count), totals)
        rest = np.arange(parent.size) - np.repeat(np.cumsum(totals) - totals, totals)
        lo, hi = box_lo[parent].copy(), box_hi[parent].copy()
        for axis, d in enumerate(integer):
            size = sizes[parent, axis]
            value = np.ceil(box_lo[parent, d]) + rest % size
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
        return lo, hi, parent

    def snap(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Shrink boxes in place, on every column with a finite value set, to the smallest
        interval holding the same values (no mass lies between them). A box holding none of
        them keeps its sides: its mass is then zero."""
        for column, atoms in self.atom_columns:
            first = np.searchsorted(atoms, lo[:, column], side="left")
            last = np.searchsorted(atoms, hi[:, column], side="right") - 1
            some = first <= last
            lo[some, column] = atoms[first[some]]
            hi[some, column] = atoms[last[some]]

    def _category_masses(self, masses: MassFunction, domain: InputDomain) -> np.ndarray:
        """Per one-hot group and slot: the population's marginal mass of that category (an
        upper enclosure; it only places cuts)."""
        groups, slots = self.group_index.shape
        result = np.zeros((groups, slots))
        for group in range(groups):
            columns = self.group_index[group][self.group_valid[group]]
            lo = np.repeat(domain.lower[None, :], columns.size, axis=0)
            hi = np.repeat(domain.upper[None, :], columns.size, axis=0)
            lo[:, columns] = hi[:, columns] = 0.0
            lo[np.arange(columns.size), columns] = hi[np.arange(columns.size), columns] = 1.0
            result[group, : columns.size] = masses(lo, hi)[1]
        return result

    @staticmethod
    def _marginal_prefix(masses: MassFunction, domain: InputDomain, column: int,
                         atoms: np.ndarray) -> np.ndarray:
        """Prefix sums of the column's marginal mass at each of its values (upper enclosures;
        only used to place cuts, so their rounding never matters for soundness)."""
        lo = np.repeat(domain.lower[None, :], atoms.size, axis=0)
        hi = np.repeat(domain.upper[None, :], atoms.size, axis=0)
        lo[:, column] = hi[:, column] = atoms
        _, upper = masses(lo, hi)
        return np.concatenate([[0.0], np.cumsum(upper)])

    def _atom_cuts(
        self, lo: np.ndarray, hi: np.ndarray, dims: np.ndarray, left_hi: np.ndarray,
        right_lo: np.ndarray,
    ) -> None:
        """Cut boxes split along a column with a finite value set between two of its values
        in the box, in place: an end value holding at least half of the column's marginal
        mass in the box (a capital gain of 0) is cut off alone, otherwise the values are
        halved (by count: on Adult-8 3x64, halving the mass took 74.9 s to decide against
        42.4 s)."""
        rows = np.arange(lo.shape[0])
        for column, atoms in self.atom_columns:
            chosen = rows[dims == column]
            if chosen.size == 0:
                continue
            first = np.searchsorted(atoms, lo[chosen, column], side="left")
            last = np.searchsorted(atoms, hi[chosen, column], side="right") - 1
            several = last > first
            prefix = self.atom_prefix[column]
            top = np.minimum(last, atoms.size - 1) + 1
            half = 0.5 * (prefix[top] - prefix[first])
            heavy_first = prefix[np.minimum(first + 1, atoms.size)] - prefix[first] >= half
            heavy_last = prefix[top] - prefix[np.maximum(top - 1, 0)] >= half
            middle = np.where(heavy_first, first, np.where(
                heavy_last, np.maximum(last - 1, first), (first + last) // 2))
            left_hi[chosen[several], column] = atoms[middle[several]]
            right_lo[chosen[several], column] = atoms[middle[several] + 1]

    def _point_mass_cuts(
        self, lo: np.ndarray, hi: np.ndarray, dims: np.ndarray, cut: np.ndarray,
        left_hi: np.ndarray, right_lo: np.ndarray,
    ) -> None:
        """Cut boxes split along a column with listed point masses beside a density at the
        listed point ``t`` nearest to the rule's ``cut`` that their side ``[a, b]`` holds,
        in place: ``[t, t]`` and ``[t⁺, b]`` where ``t = a``, else ``[a, t⁻]`` and ``[t, b]``
        (``t⁻``, ``t⁺``: the adjacent floats), so the point is alone after one cut, or two
        where it lies inside the side. The children are closed float intervals that do not
        meet: the point's mass is in one child only, and a point box is decided exactly.
        Only places cuts: the children's masses are the population's enclosures of them."""
        rows = np.arange(lo.shape[0])
        for column, points in self.point_columns:
            chosen = rows[dims == column]
            low, high = lo[chosen, column], hi[chosen, column]
            first = np.searchsorted(points, low, side="left")
            last = np.searchsorted(points, high, side="right") - 1
            some = (first <= last) & (low < high)
            if not some.any():
                continue
            chosen, low, first, last = chosen[some], low[some], first[some], last[some]
            target = cut[chosen]
            above = np.clip(np.searchsorted(points, target), first, last)
            below = np.clip(above - 1, first, last)
            point = np.where(np.abs(points[below] - target) <= np.abs(points[above] - target),
                             points[below], points[above])
            at_low = point == low
            left_hi[chosen, column] = np.where(at_low, point, down_array(point))
            right_lo[chosen, column] = np.where(at_low, up_array(point), point)

    def partitioned(self, parent_lo: np.ndarray, parent_hi: np.ndarray, lo: np.ndarray,
                    hi: np.ndarray, parent_masks: list[np.ndarray] | None = None
                    ) -> np.ndarray:
        """Per parent box ``i`` (``[n, d]``), whether its children ``lo[i], hi[i]`` and
        ``lo[n + i], hi[n + i]`` (as :meth:`split` returns them) partition its mass exactly:
        they differ from it on one axis only — one column or one one-hot group — and there
        they split it with no mass on both sides and none outside both: a group's allowed
        categories cut into two disjoint sets whose union is the parent's; a column's range
        cut at a point of no mass between ``[parent_lo, a]`` and ``[b, parent_hi]`` (no listed
        value strictly between ``a`` and ``b`` on a column with a finite value set, ``b = a +
        1`` on an integer one, ``b = a`` on an atomless one, whose shared face has no mass).
        Then ``P(parent) = P(left) + P(right)`` in real arithmetic. False where anything else
        holds (a threshold cut's gap between adjacent floats on a continuous column, a child
        shrunk by :meth:`snap`): only exactness matters, never tightness. ``parent_masks``:
        the parents' :meth:`group_masks`, computed here where needed if not given."""
        count = parent_lo.shape[0]
        left_lo, left_hi, right_lo, right_hi = lo[:count], hi[:count], lo[count:], hi[count:]
        moved = ((left_lo != parent_lo) | (left_hi != parent_hi)
                 | (right_lo != parent_lo) | (right_hi != parent_hi))
        grouped = self.group_of >= 0
        axes = (moved & ~grouped[None, :]).sum(axis=1)
        group_moved = np.zeros((count, self.group_index.shape[0]), dtype=bool)
        for group in range(self.group_index.shape[0]):
            columns = self.group_index[group][self.group_valid[group]]
            group_moved[:, group] = moved[:, columns].any(axis=1)
        axes = axes + group_moved.sum(axis=1)
        exact = axes == 1
        for group in range(self.group_index.shape[0]):
            rows = np.flatnonzero(exact & group_moved[:, group])
            if rows.size == 0:
                continue
            parent = (self.group_allowed(parent_lo[rows], parent_hi[rows], group)
                      if parent_masks is None else parent_masks[group][rows])
            left = self.group_allowed(left_lo[rows], left_hi[rows], group)
            right = self.group_allowed(right_lo[rows], right_hi[rows], group)
            exact[rows] = (~(left & right).any(axis=1)) & ((left | right) == parent).all(axis=1)
        plain = np.flatnonzero(exact & ~group_moved.any(axis=1))
        if plain.size == 0:
            return exact
        column = np.argmax(moved[plain] & ~grouped[None, :], axis=1)
        rows = (plain, column)
        a, b = left_hi[rows], right_lo[rows]
        ends = (left_lo[rows] == parent_lo[rows]) & (right_hi[rows] == parent_hi[rows])
        gap_free = np.zeros(plain.size, dtype=bool)
        listed = dict(self.atom_columns)
        for d in np.unique(column):
            at = column == d
            values = listed.get(int(d))
            if values is not None:
                between = (np.searchsorted(values, b[at], side="left")
                           - np.searchsorted(values, a[at], side="right"))
                gap_free[at] = (a[at] < b[at]) & (between == 0)
            elif self.domain.integer[d]:
                gap_free[at] = b[at] == a[at] + 1.0
            elif self.domain.atomless[d]:
                gap_free[at] = b[at] == a[at]
        exact[plain] = ends & gap_free
        return exact

    @staticmethod
    def inherited(
        parents: Boxes, parent: np.ndarray, lo: np.ndarray, hi: np.ndarray
    ) -> Known:
        """What box ``parent[i]`` of ``parents`` proved (kink signs, atom bounds, the last
        hidden layer's carried bounds) for every child ``[lo[i], hi[i]]`` that lies inside it
        (a sound bound on a box holds on every box inside it); nothing known for a child that
        does not. Which children reuse the carried bounds: :mod:`verifier.pv.carry`."""
        inside = (lo >= parents.lo[parent]).all(axis=1) & (hi <= parents.hi[parent]).all(axis=1)
        column = inside[:, None]
        carried, reuse = inherited_carried(parents.carried[parent], inside,
                                           parents.depth[parent] + 1)
        return Known(
            np.where(column, parents.signs[parent], np.zeros((), parents.signs.dtype)),
            np.where(column, parents.low[parent], -np.inf),
            np.where(column, parents.high[parent], np.inf),
            carried, reuse,
        )

    def split(self, chosen: Boxes, masks: list[np.ndarray] | None = None,
              candidates: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Both children of every chosen box, left ones first (an input-atom threshold cut
        where one applies, else the split rule's column), as ``(lo, hi)`` (``masks``,
        ``candidates``: the boxes' :meth:`group_masks` and :meth:`candidates`, computed here
        if not given)."""
        dims = self.choose_dims(
            chosen.lo, chosen.hi, chosen.depth, chosen.atoms, chosen.guide, masks, candidates,
        )
        left_lo, left_hi, right_lo, right_hi = self.children(
            chosen.lo, chosen.hi, dims, chosen.guide
        )
        cut, cut_column, cut_left, cut_right = self.threshold_cuts(
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
            grouped = rows[self.group_of[columns] >= 0]
            for child_lo, child_hi in ((left_lo, left_hi), (right_lo, right_hi)):
                self._settle_groups(child_lo, child_hi, grouped)
        lo, hi = np.concatenate([left_lo, right_lo]), np.concatenate([left_hi, right_hi])
        self.snap(lo, hi)
        return lo, hi

    def _settle_groups(self, lo: np.ndarray, hi: np.ndarray, rows: np.ndarray) -> None:
        """On boxes ``rows``, in place: every one-hot group that allows one category only is
        fixed to it (its column ``[1, 1]``, the others ``[0, 0]``), as :meth:`children` fixes
        a group split down to one category. A threshold cut on one column of a group
        (``x['sex=Female'] < 1``) narrows that column alone and leaves the group's other
        columns open; the box then holds non-one-hot corners that carry no mass, and its
        lower corner, which the exact point decision reads, need not be a category."""
        if rows.size == 0:
            return
        for group in range(self.group_index.shape[0]):
            columns = self.group_index[group][self.group_valid[group]]
            allowed = Categorical.category_mask(lo[rows[:, None], columns],
                                                hi[rows[:, None], columns])
            settled = rows[allowed.sum(axis=1) == 1]
            unit = allowed[allowed.sum(axis=1) == 1].astype(np.float64)
            lo[settled[:, None], columns] = unit
            hi[settled[:, None], columns] = unit
