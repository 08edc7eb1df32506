"""The atoms of a specification's events: sound bounds of them on boxes, the events'
three-valued truth, and exact decisions at single points.

An atom is ``c_y·y + c_x·x + k ≥ 0`` (or ``> 0``). Output atoms are bounded together as one
specification matrix (CROWN on ``C·net(x)``, one-hot groups as simplices), input parts by
exact intervals, and every sum gets a relative ``1e-12`` margin; pure input atoms are bounded
with error-free arithmetic. An event's truth follows by Kleene logic.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from verifier.bounds import (
    CARRIED_DTYPE,
    BoundsResult,
    LinearBounds,
    PreparedNetwork,
    carried_bounds,
    compute_bounds,
    kink_neurons,
    linear_interval,
    pack_signs,
    unpack_signs,
)
from verifier.exact_arith import exact_linear_value, exact_outputs, linear_form_bounds
from verifier.network import Network
from verifier.pv.events import TrackedEvents
from verifier.spec import atom_truth, evaluate_event


@dataclass
class Known:
    """What is proven on each box of a batch before it is bounded, e.g. on an enclosing box
    (a parent in the branch and bound): the signs of the network's kink neurons, packed by
    :func:`pack_signs` (see :func:`verifier.bounds.compute_bounds`), and sound bounds of every
    atom, ``(B, atoms)`` (``−∞``/``+∞`` where nothing is known); ``carried``: sound bounds of
    the last hidden layer's pre-activations, ``(B, 2, n)`` (``carried`` of
    :func:`verifier.bounds.compute_bounds`; None: nothing known), and ``reuse``: ``(B,)``, the
    boxes whose last hidden layer CROWN does not tighten, keeping the carried bounds (None:
    none)."""

    signs: np.ndarray
    low: np.ndarray
    high: np.ndarray
    carried: np.ndarray | None = None
    reuse: np.ndarray | None = None

    def select(self, rows: np.ndarray) -> Known:
        return Known(self.signs[rows], self.low[rows], self.high[rows],
                     None if self.carried is None else self.carried[rows],
                     None if self.reuse is None else self.reuse[rows])


@dataclass
class AtomLines:
    """Per box and atom, linear pieces that decide the atom on part of the box: it holds at
    every point ``x`` of the box where ``true_coefficients·x − min_box(true_coefficients·x) >
    true_threshold`` and fails wherever ``false_coefficients·x − min_box(…) >
    false_threshold`` (real arithmetic; minima over the box's intervals and a one-hot group's
    allowed categories). Thresholds are ``+∞`` where no piece is known. From CROWN's linear
    bounds of output atoms (:class:`verifier.bounds.LinearBounds`): with ``φ(x) = v + A·x −
    min_box(A·x) <= atom(x)``, the atom is positive where ``A·x − min > −v``."""

    true_coefficients: np.ndarray
    true_threshold: np.ndarray
    false_coefficients: np.ndarray
    false_threshold: np.ndarray

    @classmethod
    def unknown(cls, count: int, atoms: int, width: int) -> AtomLines:
        zeros = np.zeros((count, atoms, width))
        infinite = np.full((count, atoms), np.inf)
        return cls(zeros, infinite, zeros.copy(), infinite.copy())


WIDE_FEED_RATIO = 4
"""A last hidden layer is left to IBP on some boxes (``crown_share``) only when the layer
feeding it is at least this many times wider (:func:`wide_fed_last_layer`). Chosen on
measured rows (docs/decisions.md, 2026-11-28, "The 787-69 net"): the 103-787-69-2 net
(ratio 11.4) gains at every horizon; ACAS Xu N4,3 (ratio 1) went from [0.67, 2.13] to
[0.01, 42.6] at 30 s with its layers left to IBP; every other measured network has a
ratio of at most 2."""


TABLED_ATOMS = 10
"""Up to this many atoms, every event's truth is tabled once for all ``3^atoms`` combinations
of the atoms' truths (59,049 rows at most) and read per box (:meth:`AtomBounds.events_of`)."""


def wide_fed_last_layer(network: Network) -> bool:
    """Whether ``network`` has two hidden layers or more and its last hidden layer is fed by
    a layer at least :data:`WIDE_FEED_RATIO` times wider: CROWN's tightening of that layer
    then back-substitutes each of its few rows through the wide layer (most of the cost,
    94 % of PV's CPU on the 103-787-69-2 net), while leaving it to IBP loosens one layer
    only."""
    if len(network.layers) < 3:
        return False
    rows, feed = network.layers[-2].weight.shape
    return feed >= WIDE_FEED_RATIO * rows


def screen_order(lower: np.ndarray, upper: np.ndarray, strict: np.ndarray,
                 needed: np.ndarray | None, share: float,
                 sides: np.ndarray | None = None) -> np.ndarray:
    """The boxes whose last hidden layer CROWN tightens, given sound ``lower``/``upper`` ``(B, S)``
    of atoms ``row >= 0`` (``> 0`` where ``strict``) on each box (an enclosing box's): at
    most ``⌈share·B⌉`` of the boxes with an atom those bounds leave open (and ``needed``,
    None for all), those whose open atoms come closest to decided — the smallest share of
    the range ``upper − lower`` to cross, ``−lower`` to prove the atom, ``upper`` to refute
    it, over the wanted sides (``sides`` ``(B, S, 2)``: proving, refuting; None for both).
    Only chooses where the tighter bound is spent; never touches a bound."""
    with np.errstate(invalid="ignore", divide="ignore"):
        open_atom = np.where(strict, (lower <= 0.0) & (upper > 0.0),
                             (lower < 0.0) & (upper >= 0.0))
        if needed is not None:
            open_atom &= needed
        to_true, to_false = -lower / (upper - lower), upper / (upper - lower)
        if sides is not None:
            to_true = np.where(sides[..., 0], to_true, np.inf)
            to_false = np.where(sides[..., 1], to_false, np.inf)
        closeness = np.minimum(to_true, to_false)
    closeness = np.where(open_atom & np.isfinite(closeness), closeness, np.inf)
    nearest = closeness.min(axis=1, initial=np.inf)
    candidates = np.flatnonzero(open_atom.any(axis=1))
    limit = int(np.ceil(share * lower.shape[0]))
    if candidates.size <= limit:
        return candidates
    order = np.argsort(nearest[candidates], kind="stable")[:limit]
    return np.sort(candidates[order])


def _rounded_up(value: np.ndarray, bound: np.ndarray, constant: float) -> np.ndarray:
    """``value = ±(bound + constant)`` widened upward by ``1e-12`` of its terms' magnitude
    (``+∞`` where not finite)."""
    margin = 1e-12 * (np.abs(bound) + abs(constant)) + 1e-300
    return np.where(np.isfinite(value), value + margin, np.inf)


class AtomBounds:
    """Bounds and truth of the tracked events' atoms on batches of boxes."""

    def __init__(
        self, network: Network, tracked: TrackedEvents, groups: Sequence[Sequence[int]]
    ) -> None:
        self.network = network
        self.prepared = PreparedNetwork(network)
        self.tracked = tracked
        self.groups = tuple(tuple(int(c) for c in group) for group in groups)
        self.in_group = np.zeros(network.input_size, dtype=bool)
        self.in_group[[c for group in self.groups for c in group]] = True
        atoms = tracked.atoms
        width = network.input_size
        self.output_rows = np.array(
            [a.output_coeffs if a.reads_outputs else [0.0] * network.output_size for a in atoms]
        ).reshape(len(atoms), network.output_size)
        self.input_rows = np.array(
            [a.input_coeffs if a.reads_inputs else [0.0] * width for a in atoms]
        ).reshape(len(atoms), width)
        self.constants = np.array([a.constant for a in atoms])
        self.reads_outputs = np.array([a.reads_outputs for a in atoms], dtype=bool)
        self.strict = np.array([a.strict for a in atoms], dtype=bool)
        self.sign_width = kink_neurons(network) if self.reads_outputs.any() else 0
        self.wide_fed = wide_fed_last_layer(network)
        self._event_table = None
        if len(atoms) <= TABLED_ATOMS:
            every = np.array(list(itertools.product((-1, 0, 1), repeat=len(atoms))),
                             dtype=np.int8).reshape(-1, len(atoms))
            self._event_table = self._evaluated(every)

    def read_columns(self) -> np.ndarray:
        """Input columns that some atom depends on (through the network or directly)."""
        width = self.network.input_size
        read = self.network.read_inputs() if self.reads_outputs.any() else np.zeros(width, bool)
        return read | (self.input_rows != 0.0).any(axis=0)

    def bounds(self, lo: np.ndarray, hi: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray]:
        """Sound bounds of every atom's left-hand side on every box, shape (B, atoms)."""
        low, high, *_ = self.bounds_and_drive(lo, hi, method)
        return low, high

    def bounds_and_drive(
        self, lo: np.ndarray, hi: np.ndarray, method: str, known: Known | None = None,
        crown_share: float = 1.0, wanted: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[float, int],
               AtomLines, np.ndarray]:
        """Atom bounds (B, atoms), each input's drive on each atom's gap (B, atoms, D): the
        absolute input coefficients of CROWN's linear bounds (output atoms) or of the atom
        itself (input atoms); multiplied by an input's width, its share of the gap; the
        signed coefficients of the lower linear bounds (B, atoms, D); and the signs of the
        network's kink neurons proven on each box (:attr:`sign_width` of them), packed by
        :func:`pack_signs`; the CPU seconds CROWN spent tightening hidden layers and the
        boxes it tightened (0 and 0 for IBP); and the atoms' linear pieces
        (:class:`AtomLines`; output atoms that read no input, CROWN methods only); and the
        last hidden layer's bounds its children may carry (:func:`verifier.bounds.
        carried_bounds`, ``(B, 2, 0)`` when none are).

        ``crown_share`` below 1 with a CROWN method, ``known`` bounds and a last hidden layer
        fed by a far wider one (:func:`wide_fed_last_layer`): CROWN tightens the last hidden
        layer of at most ``⌈crown_share·B⌉`` boxes with an open output atom, those
        whose open atoms the known bounds leave closest to decided on a wanted side
        (:func:`screen_order`; ``wanted``: per box and event, whether the event's holding
        and its failing are wanted, None for both); the others are bounded by CROWN over
        IBP's bounds of that layer (CROWN-IBP: sound, looser, far cheaper behind a wide
        layer). Every box keeps its linear bounds, drive and pieces. Boxes that ``known``
        marks to ``reuse`` carried bounds are not tightened either; every box's carried
        bounds are intersected with its own.

        ``known``: what holds on each box beforehand (:class:`Known`, e.g. from its parent).
        The known signs spare CROWN's back-substitution of stable neurons; atoms the known
        bounds decide are not back-substituted at all, and every atom's bounds are
        intersected with the known ones (both enclose the atom on the box). Their drive is
        zero where nothing was computed."""
        count = lo.shape[0]
        atoms = len(self.tracked.atoms)
        low = np.zeros((count, atoms))
        high = np.zeros((count, atoms))
        drive = np.broadcast_to(np.abs(self.input_rows), (count, *self.input_rows.shape)).copy()
        signed = np.broadcast_to(self.input_rows, (count, *self.input_rows.shape)).copy()
        signs = np.zeros((count, 2 * ((self.sign_width + 7) // 8)), dtype=np.uint8)
        lines = AtomLines.unknown(count, atoms, lo.shape[1])
        linear = None
        crown = (0.0, 0)
        carried = np.zeros((count, 2, 0), dtype=CARRIED_DTYPE)
        if self.reads_outputs.any():
            rows = self.output_rows[self.reads_outputs]
            needed = None
            if known is not None:
                open_atoms = self.undecided(known.low, known.high)
                needed = np.ascontiguousarray(open_atoms[:, self.reads_outputs])
            sides = None
            if self.wide_fed and crown_share < 1.0 and wanted is not None and known is not None:
                sides = self._wanted_sides(lo, hi, known, wanted)
            result, crown = self._output_bounds(lo, hi, rows, method, known, needed,
                                                crown_share, sides)
            signs = pack_signs(result.signs())
            carried = carried_bounds(result)
            low[:, self.reads_outputs] = result.lower
            high[:, self.reads_outputs] = result.upper
            if result.sensitivity is not None:
                drive[:, self.reads_outputs] += result.sensitivity
            linear = result.linear
            if linear is not None:
                signed[:, self.reads_outputs] += linear.lower_coefficients
        reads_inputs = (self.input_rows != 0.0).any(axis=1)
        if linear is not None:
            self._fill_lines(lines, linear, reads_inputs)
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
        if known is not None:
            low, high = np.maximum(low, known.low), np.minimum(high, known.high)
        return low, high, drive, signed, signs, crown, lines, carried

    def _output_bounds(
        self, lo: np.ndarray, hi: np.ndarray, rows: np.ndarray, method: str,
        known: Known | None, needed: np.ndarray | None, crown_share: float,
        sides: np.ndarray | None = None,
    ) -> tuple[BoundsResult, tuple[float, int]]:
        """The output atoms' rows (without constants) bounded by ``method``; with
        ``crown_share < 1``, a CROWN method, ``known`` bounds and :attr:`wide_fed`, CROWN
        tightens the last hidden layer of the ``⌈crown_share·B⌉`` boxes whose open output
        atoms their ``known`` bounds leave closest to decided on a wanted side
        (:func:`screen_order`), and the other boxes keep IBP's bounds of that layer (sound
        either way; ``tighten`` of :func:`verifier.bounds.compute_bounds`); nor does it
        tighten the boxes ``known`` marks to ``reuse`` their carried bounds. Also the CPU
        seconds of the tightening and the boxes it ran on."""
        tighten = None
        if self.wide_fed and method != "ibp" and crown_share < 1.0 and known is not None:
            tighten = np.zeros(lo.shape[0], dtype=bool)
            tighten[screen_order(known.low[:, self.reads_outputs],
                                 known.high[:, self.reads_outputs],
                                 self.strict[self.reads_outputs], needed, crown_share,
                                 sides)] = True
        if known is not None and known.reuse is not None and method != "ibp":
            tighten = ~known.reuse if tighten is None else tighten & ~known.reuse
        result = compute_bounds(
            self.prepared, lo, hi, rows, method,  # type: ignore[arg-type]
            groups=self.groups,
            known_signs=None if known is None else unpack_signs(known.signs, self.sign_width),
            needed=needed, tighten=tighten,
            carried=None if known is None else known.carried,
            backend="torch")  # PV's sustained large batches: verifier.bounds.backend
        tightened = 0 if method == "ibp" else (
            lo.shape[0] if tighten is None else int(tighten.sum()))
        return result, (result.tighten_s, tightened)

    def _wanted_sides(self, lo: np.ndarray, hi: np.ndarray, known: Known | None,
                      wanted: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Per box and output atom, ``(B, S, 2)``: whether proving the atom true (``[..., 0]``)
        or false (``[..., 1]``) on the box would decide a wanted side of some event
        (``wanted``: per box and event, whether the event's holding and its failing are
        wanted), the other atoms taken at their truth from the input atoms' exact bounds and
        ``known`` (output atoms open); both sides where no event hangs on the atom alone or
        no side is wanted (a box whose credit is not bounded still has its verdict read)."""
        count, atoms = lo.shape[0], len(self.tracked.atoms)
        truths = np.zeros((count, atoms), dtype=np.int8)
        pure = ~self.reads_outputs & (self.input_rows != 0.0).any(axis=1)
        if pure.any():
            low, high = linear_form_bounds(self.input_rows[pure], self.constants[pure], lo, hi)
            for position, atom in enumerate(np.flatnonzero(pure)):
                truths[:, atom] = atom_truth(self.tracked.atoms[atom], low[:, position],
                                             high[:, position])
        if known is not None:
            for atom in range(atoms):
                known_truth = atom_truth(self.tracked.atoms[atom], known.low[:, atom],
                                         known.high[:, atom])
                truths[:, atom] = np.where(known_truth != 0, known_truth, truths[:, atom])
        want_true, want_false = wanted
        outputs = np.flatnonzero(self.reads_outputs)
        sides = np.ones((count, outputs.size, 2), dtype=bool)
        for position, atom in enumerate(outputs):
            when_true, when_false = truths.copy(), truths.copy()
            when_true[:, atom], when_false[:, atom] = 1, -1
            holds, fails = self.events_of(when_true), self.events_of(when_false)
            follows = (holds == 1) & (fails == -1)
            negates = (holds == -1) & (fails == 1)
            hanging = (follows | negates).any(axis=1)
            true_side = ((follows & want_true) | (negates & want_false)).any(axis=1)
            false_side = ((follows & want_false) | (negates & want_true)).any(axis=1)
            chosen = hanging & (true_side | false_side)
            sides[:, position, 0] = np.where(chosen, true_side, True)
            sides[:, position, 1] = np.where(chosen, false_side, True)
        return sides

    def _fill_lines(self, lines: AtomLines, linear: LinearBounds,
                    reads_inputs: np.ndarray) -> None:
        """The pieces of output atoms that read no input from CROWN's linear bounds of their
        rows: ``atom(x) = row·y + k >= v + k + (A·x − min)`` holds where the excess passes
        ``−(v + k)``, and ``atom(x) <= w + k − (max − A_u·x)`` fails where the excess of
        ``−A_u`` passes ``w + k``. The thresholds are rounded up (``1e-12`` relative)."""
        rows = np.flatnonzero(self.reads_outputs)
        for position, atom in enumerate(rows):
            if reads_inputs[atom]:
                continue
            constant = self.constants[atom]
            lower = linear.lower_value[:, position]
            upper = linear.upper_value[:, position]
            with np.errstate(invalid="ignore", over="ignore"):
                true_threshold = -(lower + constant)
                false_threshold = upper + constant
            lines.true_coefficients[:, atom] = linear.lower_coefficients[:, position]
            lines.true_threshold[:, atom] = _rounded_up(true_threshold, lower, constant)
            lines.false_coefficients[:, atom] = -linear.upper_coefficients[:, position]
            lines.false_threshold[:, atom] = _rounded_up(false_threshold, upper, constant)

    def events_of(self, atom_truths: np.ndarray) -> np.ndarray:
        """Kleene truth of every event (B, events) from the atoms' truths (B, atoms): read
        from the table of every combination of the atoms' truths, built once (at most
        :data:`TABLED_ATOMS` atoms; evaluated per box beyond)."""
        if self._event_table is None:
            return self._evaluated(atom_truths)
        place = 3 ** np.arange(atom_truths.shape[1] - 1, -1, -1)
        return self._event_table[(atom_truths.astype(np.int64) + 1) @ place]

    def truth(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """Kleene truth of every event per box: (B, events) in {−1, 0, 1}."""
        truths = np.empty((low.shape[0], len(self.tracked.atoms)), dtype=np.int8)
        for i, atom in enumerate(self.tracked.atoms):
            truths[:, i] = atom_truth(atom, low[:, i], high[:, i])
        return self.events_of(truths)

    def undecided(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """Per box and atom: whether the bounds leave the atom's truth open, (B, atoms)."""
        values = [
            atom_truth(atom, low[:, i], high[:, i]) for i, atom in enumerate(self.tracked.atoms)
        ]
        return np.stack(values, axis=1) == 0

    def split_guide(
        self, atom_drive: np.ndarray, signed: np.ndarray, undecided: np.ndarray
    ) -> np.ndarray:
        """Per box and input, what the split rule reads of the column
        (:class:`~verifier.pv.splitting.Splitter`): outside the one-hot groups the largest
        drive over the atoms still undecided there (smear's score per unit of width); on a
        group's columns the signed coefficients of the undecided atom with the largest total
        drive (they score the group and order its categories). The rule reads no drive on a
        group's columns and no coefficient elsewhere, so one array holds both: half of what
        each open box kept in two (Adult-13 2×64: 408 bytes, not 816; the same splits bit for
        bit). In float32: it only guides splits, never a bound (float64 was 1.6 of a
        102-column box's 3.5 kB)."""
        undecided_drive = np.where(undecided[:, :, None], atom_drive, 0.0)
        leading = np.argmax(undecided_drive.sum(axis=2), axis=1)
        order = signed[np.arange(signed.shape[0]), leading]
        guide = np.where(self.in_group[None, :], order, undecided_drive.max(axis=1))
        with np.errstate(over="ignore"):  # a drive beyond float32's range orders as infinite
            return guide.astype(np.float32)

    def decide_points(self, lo: np.ndarray, hi: np.ndarray, low: np.ndarray,
                      high: np.ndarray) -> np.ndarray:
        """Every event's truth on boxes that are single points in every column that matters,
        (B, events) in {−1, 0, 1}; ``low``/``high``: the atoms' sound bounds on these boxes.

        Their bounds (with rounding margins) left some event undecided, so the atoms are
        evaluated exactly at the point in rational arithmetic (a tie such as ``y1 − y0 = 0``
        is then decided exactly). That is the model's real value only when the network IR
        holds the model's own coefficients; for a folded IR (a normalisation or a coded
        column's ``offset + step·k`` merged into a layer, rounding) an atom that reads the
        outputs keeps the truth its bounds give, so a tie within the fold's rounding stays
        unknown (0): the caller leaves such a point's mass uncredited.
        """
        atoms = self.tracked.atoms
        values = np.empty((lo.shape[0], len(atoms)), dtype=np.int8)
        exact = ~(self.reads_outputs & self.network.folded)
        for index, atom in enumerate(atoms):
            if not exact[index]:
                values[:, index] = atom_truth(atom, low[:, index], high[:, index])
        evaluated = self.reads_outputs & exact
        for row, (box_lo, box_hi) in enumerate(zip(lo, hi, strict=True)):
            point = np.where(box_lo == box_hi, box_lo, np.where(
                np.isfinite(box_lo), box_lo, np.where(np.isfinite(box_hi), box_hi, 0.0)))
            outputs = exact_outputs(self.network, point) if evaluated.any() else []
            for index, atom in enumerate(atoms):
                if not exact[index]:
                    continue
                value = exact_linear_value(
                    atom.output_coeffs, atom.input_coeffs, atom.constant, outputs, point
                )
                holds = value > 0 if atom.strict else value >= 0
                values[row, index] = 1 if holds else -1
        return self.events_of(values)

    def _evaluated(self, atom_truths: np.ndarray) -> np.ndarray:
        """Kleene truth of every event (B, events), each evaluated on the atoms' truths."""
        values = {atom: atom_truths[:, i] for i, atom in enumerate(self.tracked.atoms)}
        return np.stack(
            [evaluate_event(event, values) for event in self.tracked.events], axis=1
        ).astype(np.int8)
