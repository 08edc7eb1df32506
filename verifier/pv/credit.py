"""Linear credit: the mass of a box that CROWN's linear bounds decide without splitting it.

On a box where an event's truth hangs on one open output atom, the atom's linear pieces
(:class:`verifier.pv.atoms.AtomLines`) prove it true on part of the box and false on another
part; the population's lower bound of the mass of each part (``excess``, see
:meth:`verifier.population.model.PopulationModel.prob_excess_lower`) is credited to the event
or to its complement while the box stays open. A box the decision boundary cuts thus counts
with most of its mass long before splitting could decide it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from verifier.population.distributions import Categorical
from verifier.pv.atoms import AtomBounds, AtomLines
from verifier.spec import atom_truth

TAIL_DEVIATIONS = 2.0

ExcessFunction = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass
class WantedSides:
    """Per box and event, ``(B, events)`` each: whether the credit of the event (``true``)
    and of its complement (``false``) is wanted."""

    true: np.ndarray
    false: np.ndarray

    def select(self, rows: np.ndarray) -> WantedSides:
        return WantedSides(self.true[rows], self.false[rows])


@dataclass
class OpenPieces:
    """The boxes on which one output atom ``atom`` is the only open one and has linear
    pieces (see :func:`open_pieces`): their rows ``boxes``, per box and event whether the
    event ``follows`` the atom or ``negates`` it, the categories each box allows per one-hot
    group (``allowed``, ``(boxes, group)`` each), and per box twice — for the atom's true
    piece, then for its false piece — the box (``lo``, ``hi``), the piece's ``coefficients``
    and the estimated ``mean`` and ``deviation`` of its excess (:func:`_excess_moments`)."""

    atom: int
    boxes: np.ndarray
    follows: np.ndarray
    negates: np.ndarray
    allowed: list[np.ndarray]
    lo: np.ndarray
    hi: np.ndarray
    coefficients: np.ndarray
    mean: np.ndarray
    deviation: np.ndarray


def open_pieces(
    atoms: AtomBounds, low: np.ndarray, high: np.ndarray, lines: AtomLines, lo: np.ndarray,
    hi: np.ndarray, mass_hi: np.ndarray,
) -> list[OpenPieces]:
    """Per output atom with linear pieces, the boxes of positive mass it alone leaves open
    and the moments of its pieces' excess there: what :func:`linear_credit` and
    :func:`true_share` both read, computed once for a call's boxes. Each box's moments are
    its own row's (the same floats whichever boxes are beside it)."""
    found = []
    for atom, boxes, follows, negates in _hanging_events(atoms, low, high, lines, mass_hi):
        allowed = _allowed_categories(lo[boxes], hi[boxes], atoms.groups)
        box_lo = np.concatenate([lo[boxes], lo[boxes]])
        box_hi = np.concatenate([hi[boxes], hi[boxes]])
        coefficients = np.concatenate([lines.true_coefficients[boxes, atom],
                                       lines.false_coefficients[boxes, atom]])
        mean, deviation = _excess_moments(coefficients, box_lo, box_hi, atoms.groups,
                                          [np.concatenate([mask, mask]) for mask in allowed])
        found.append(OpenPieces(atom, boxes, follows, negates, allowed, box_lo, box_hi,
                                coefficients, mean, deviation))
    return found


def linear_credit(
    atoms: AtomBounds, low: np.ndarray, high: np.ndarray, lines: AtomLines, lo: np.ndarray,
    hi: np.ndarray, mass_hi: np.ndarray, excess: ExcessFunction,
    wanted: WantedSides | None = None, pieces: list[OpenPieces] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(credit_true, credit_false)``, ``(B, events)``: sound lower bounds of ``P(box ∧
    event)`` and ``P(box ∧ ¬event)`` from the linear pieces of the one atom left open on the
    box (zero where the event is decided, where more than one atom is open, where the atom
    has no piece, and on a side of the atom that no wanted credit reads: ``wanted``, None
    for all). ``low``/``high``: the atoms' bounds on each box; ``pieces``: their
    :func:`open_pieces`, computed here if None."""
    credit_true = np.zeros((lo.shape[0], len(atoms.tracked.events)))
    credit_false = np.zeros_like(credit_true)
    if pieces is None:
        pieces = open_pieces(atoms, low, high, lines, lo, hi, mass_hi)
    for piece in pieces:
        atom, boxes, follows, negates = piece.atom, piece.boxes, piece.follows, piece.negates
        box_lo, box_hi, coefficients = piece.lo, piece.hi, piece.coefficients
        threshold = np.concatenate([lines.true_threshold[boxes, atom],
                                    lines.false_threshold[boxes, atom]])
        within = threshold <= piece.mean + TAIL_DEVIATIONS * piece.deviation
        if wanted is None:
            read = np.ones(threshold.size, dtype=bool)
        else:
            want_true, want_false = wanted.true[boxes], wanted.false[boxes]
            read = np.concatenate([
                ((follows & want_true) | (negates & want_false)).any(axis=1),
                ((follows & want_false) | (negates & want_true)).any(axis=1),
            ])
        both = np.zeros(threshold.size)
        bounded = within & read
        if bounded.any():
            both[bounded] = excess(box_lo[bounded], box_hi[bounded], coefficients[bounded],
                                   threshold[bounded])
        atom_holds, atom_fails = both[:boxes.size, None], both[boxes.size:, None]
        credit_true[boxes] = np.where(follows, atom_holds, np.where(negates, atom_fails, 0.0))
        credit_false[boxes] = np.where(follows, atom_fails, np.where(negates, atom_holds, 0.0))
    return credit_true, credit_false


def true_share(
    atoms: AtomBounds, low: np.ndarray, high: np.ndarray, lines: AtomLines, lo: np.ndarray,
    hi: np.ndarray, mass_hi: np.ndarray, pieces: list[OpenPieces] | None = None,
) -> np.ndarray:
    """A rough estimate, ``(B, events)`` in ``[0, 1]``, of the share of each box on which each
    event holds — for choosing boxes, never for a bound. Where an event hangs on one open atom
    with both linear pieces, the chance that the midline of the pieces (halfway between the
    atom's lower and upper linear bounds) is positive, its terms taken as independent
    uniforms over their ranges on the box (a normal approximation); ``0.5`` elsewhere.
    ``pieces``: the boxes' :func:`open_pieces`, computed here if None."""
    share = np.full((lo.shape[0], len(atoms.tracked.events)), 0.5)
    if pieces is None:
        pieces = open_pieces(atoms, low, high, lines, lo, hi, mass_hi)
    for piece in pieces:
        atom, boxes, follows, negates = piece.atom, piece.boxes, piece.follows, piece.negates
        true_c = lines.true_coefficients[boxes, atom]
        false_c = lines.false_coefficients[boxes, atom]
        true_mean, false_mean = piece.mean[:boxes.size], piece.mean[boxes.size:]
        _, deviation = _excess_moments((true_c - false_c) / 2.0, lo[boxes], hi[boxes],
                                       atoms.groups, piece.allowed)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            centre = ((true_mean - lines.true_threshold[boxes, atom])
                      - (false_mean - lines.false_threshold[boxes, atom])) / 2.0
            holds = ndtr(centre / deviation)
        holds = np.where(np.isfinite(centre) & ~np.isnan(holds), holds, 0.5)[:, None]
        share[boxes] = np.where(follows, holds, np.where(negates, 1.0 - holds, 0.5))
    return share


def _hanging_events(
    atoms: AtomBounds, low: np.ndarray, high: np.ndarray, lines: AtomLines,
    mass_hi: np.ndarray,
) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Per output atom ``j`` with linear pieces: the boxes of positive mass on which ``j`` is
    the only open atom, and per such box and event whether the event follows the atom
    (true when it holds, false when it fails) or negates it, ``(boxes, events)`` each."""
    tracked = atoms.tracked
    if not tracked.atoms:
        return
    truths = np.stack(
        [atom_truth(atom, low[:, i], high[:, i]) for i, atom in enumerate(tracked.atoms)], axis=1
    )
    open_atoms = truths == 0
    single = (open_atoms.sum(axis=1) == 1) & (mass_hi > 0.0)
    which = np.argmax(open_atoms, axis=1)
    for j in range(len(tracked.atoms)):
        has_piece = np.isfinite(lines.true_threshold[:, j]) | np.isfinite(
            lines.false_threshold[:, j])
        boxes = np.flatnonzero(single & (which == j) & has_piece)
        if boxes.size == 0:
            continue
        when_true, when_false = truths[boxes].copy(), truths[boxes].copy()
        when_true[:, j], when_false[:, j] = 1, -1
        holds = atoms.events_of(when_true)
        fails = atoms.events_of(when_false)
        follows = (holds == 1) & (fails == -1)
        negates = (holds == -1) & (fails == 1)
        if (follows | negates).any():
            yield j, boxes, follows, negates


def _allowed_categories(lo: np.ndarray, hi: np.ndarray, groups: tuple[tuple[int, ...], ...]
                        ) -> list[np.ndarray]:
    """Per one-hot group, ``(B, group)``: the categories each box allows."""
    return [Categorical.category_mask(lo[:, list(group)], hi[:, list(group)])
            for group in groups]


def _excess_moments(coefficients: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                    groups: tuple[tuple[int, ...], ...], allowed: list[np.ndarray]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per box, the mean and standard deviation of the excess ``c·x − min_box(c·x)`` taken
    as a sum of independent terms, each uniform over its own range on the box (a column's
    ``|c|·(hi − lo)``, a one-hot group's spread of coefficients over its allowed categories).
    :func:`linear_credit` leaves a threshold beyond the mean plus :data:`TAIL_DEVIATIONS`
    deviations uncredited without bounding (a cost cut, never a soundness matter): on
    Adult-13's open boxes such thresholds were most of the work and held under 1 % of the
    credit. ``allowed``: :func:`_allowed_categories` of the boxes (shared by the calls on
    one set of boxes)."""
    with np.errstate(invalid="ignore", over="ignore"):
        ranges = np.abs(coefficients) * (hi - lo)
    ranges = np.where(np.isfinite(ranges), ranges, np.inf)
    for group, mask in zip(groups, allowed, strict=True):
        columns = list(group)
        values = coefficients[:, columns]
        spread = (np.where(mask, values, -np.inf).max(axis=1)
                  - np.where(mask, values, np.inf).min(axis=1))
        ranges[:, columns] = 0.0
        ranges[:, columns[0]] = np.where(mask.any(axis=1), spread, 0.0)
    mean = ranges.sum(axis=1) / 2.0
    deviation = np.sqrt((ranges ** 2).sum(axis=1) / 12.0)
    return mean, deviation
