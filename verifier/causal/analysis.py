"""Per-partition analysis: bound screening, the exact check, and the split choice.

:func:`analyse_chunk` is the unit of parallel work: it takes a batch of partitions (one
pickled :class:`FairnessProblem` per chunk, never one per partition) and returns each one's
verdict plus, when undecided or biased without a proof of bias everywhere, its two children.
Partitions biased at a witness are refined for quantification only, so their children may go
below L.

Screening uses CROWN bounds on every logit difference ``y_c − y_d`` over the partition times
each protected cell (and, for a continuous protected input, each cell endpoint as a point):

* **fair**: one class ``c`` is proven on every cell, hence for every protected value;
* **biased everywhere**: two protected values are proven to give two different classes on the
  whole partition, so every non-protected point of it is biased.

Probes equal to a one-value cell reuse that cell's bounds. With two one-value cells on a deep
network, the second cell is bounded only where the first one's bounds leave a decision
possible (:func:`screen_cells`). On networks of at least
:data:`SATURATION_DEPTH` ReLU layers, CROWN gives a box up at a layer it leaves wholly
unstable (IBP beyond it): such partitions are split, never decided, and were most of the
bounding time. There CROWN also takes lower slope 0 on unstable ReLUs
(:func:`lower_slopes_for`), which saturates fewer boxes.

Classes follow the one class rule (:mod:`verifier.causal.classes`: argmax, ties to the lowest
index; a tie is a class), so "proven" means strict on the rows against lower classes and
non-strict against higher ones. Two exact decisions follow the screening, neither with a
tolerance: a partition on which every path from the protected inputs to the outputs runs
through a ReLU that is off on every cell is fair (:func:`protected_unread`: the outputs do not
depend on the protected value there), and a partition that is one non-protected point (integer
inputs refine down to them) with point protected cells is decided in real arithmetic
(:func:`decide_points`).

Undecided partitions are then searched for a witness at fixed sample points (cheap), and only
those without one and with at most U unstable ReLUs go to the exact MILP check.

**Exact checks in refinement only while they pay.** A partition inside a witnessed ancestor
(``refining``) is already counted as containing bias; a witness found in it changes no
share, so sampling and the exact check there only pay when the check proves the partition
fair. The caller marks the refining partitions to analyse by bounds alone (``bounds_only``:
bound screening, fair / biased everywhere, and a split with ``min_edge`` 0, as they are
covered); unsplittable ones (an integer point, an edge at :data:`MIN_EDGE`) always get the
full analysis. :func:`verifier.causal.certify.certify_causal_fairness` turns the checks off
while they rarely prove fairness (on FairQuant's GC-1 they found witnesses in 97 % of 2,110
MILPs, 19 s of 30) and keeps them where they do (a partition straddling a bias-free decision
border is proven fair by the two-copy MILP, never by per-cell bounds).

**Split rules** (``split_rule``).

* ``smear`` (default): the partition's own CROWN bounds already say which inputs drive its
  gap: the absolute input coefficients of the linear bounds on its cells times each input's
  width (:func:`smear_split`). It costs no bounding at all, so a 16- or 20-input partition is
  split as cheaply as a 2-input one. Where those bounds name no input (a saturated box
  given up at its saturated layer), one-hot groups are halved before continuous edges
  (:func:`blind_scores`).
* ``bounds``: every admissible binary split is bounded and scored, the lowest score winning
  (ties: the widest edge). Undecided partitions: the number of unstable ReLUs of the two
  children (each child: the most over the protected cells, as for the budget U), which
  brings partitions under U soonest. Witnessed and refining partitions: the children's
  *decision gap* (:func:`decision_gap`), how far their CROWN bounds are from proving them
  fair or biased everywhere. It bounds 2·D children per partition (D inputs and groups):
  on 20-input networks that is most of the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from verifier.arrays import single_threaded
from verifier.bounds import (
    BoundsResult,
    LowerSlopes,
    compute_bounds,
    kink_neurons,
    pack_signs,
    pairwise_difference_spec,
    unpack_signs,
)
from verifier.causal.classes import possible_from_upper, proven_from_lower
from verifier.causal.codes import (
    BIASED_EVERYWHERE,
    BIASED_WITNESS,
    EXCLUDED,
    FAIR,
    SPLIT,
    UNFINISHED,
)
from verifier.causal.partition import (
    MIN_EDGE,
    representative,
    split_candidates,
    with_protected,
)
from verifier.causal.points import decide_points
from verifier.causal.problem import FairnessProblem
from verifier.causal.proof_tally import ProofTally
from verifier.causal.sampling import find_witnesses
from verifier.causal.witness import confirmed_pairs
from verifier.stop_request import stop_requested

SATURATION_DEPTH = 8
"""On networks this deep, a partition whose CROWN bounds leave every neuron of a layer
unstable is given up at that layer (IBP beyond it): measured on Adult RQ4's 32 × 40 network,
such a box saturates every later layer (1,165 of 1,280 neurons unstable) and no partition
with more than 128 unstable neurons was ever decided by its bounds, while those boxes took
most of the bounding time. Shallower networks keep full CROWN: CROWN's cost grows with the
square of the depth, so giving up saves little there, and the final bound of a few layers
can still decide a box with a saturated layer."""
SPLIT_BATCH_MAX = 64
SPLIT_BATCH_SECONDS = 0.25
"""Split candidates are bounded in batches of partitions (the split is a chunk's most
expensive bound step): the first batch has one partition, later ones as many as the last
batch's time per partition fits in ``SPLIT_BATCH_SECONDS`` (at most ``SPLIT_BATCH_MAX``) and
in the time left before the deadline, so a chunk ends about when the budget does (fixed
batches of 8 on a 16-150-100-50 network took 2.2 s on a loaded machine: 20 s budgets ended at
23 s)."""


@dataclass(frozen=True)
class AnalysisSettings:
    """``min_edge`` is Libra's L (no continuous edge is split below it), ``max_unstable`` its U
    (most unstable ReLUs per protected cell handed to the exact check). ``witness_sampling``
    off reproduces Libra's budget semantics exactly: a partition over budget is split or
    excluded even when a sample point would show it biased. ``presolve_first``: the exact
    check tries HiGHS's presolve before the proving solve without it
    (:func:`~verifier.causal.exact_check.check_partition`)."""

    min_edge: float = 0.0
    max_unstable: int = 8
    bound_method: str = "crown"
    milp_time_limit: float = 10.0
    witness_sampling: bool = True
    split_rule: str = "smear"
    presolve_first: bool = False


@dataclass
class ChunkOutcome:
    """Per partition of a chunk: ``status`` (see ``STATUS_NAMES``), children ``(B, 2, n)``
    where ``has_children`` with the kink signs they inherit (``children_signs`` ``(B, V, P)``,
    the partition's own per protected cell, packed by :func:`~verifier.bounds.pack_signs`;
    both children take them), witnesses ``(B, n)`` (NaN rows where none) with their classes, the
    most unstable ReLUs over the cells, the number of MILPs solved, ``(B,)`` which
    partitions went to the exact check (it may have been cut by the deadline), and how the
    exact checks' proofs were found (``proofs``, summed over the chunk)."""

    status: np.ndarray
    children_lower: np.ndarray
    children_upper: np.ndarray
    has_children: np.ndarray
    children_hints: np.ndarray
    children_signs: np.ndarray
    witness_a: np.ndarray
    witness_b: np.ndarray
    witness_classes: np.ndarray
    unstable: np.ndarray
    milps: int
    exact_checked: np.ndarray
    proofs: ProofTally = field(default_factory=ProofTally)


def gives_up_saturated(problem: FairnessProblem) -> bool:
    """Whether the partitions' CROWN bounds stop at a saturated layer (see
    :func:`~verifier.bounds.compute_bounds`): on networks with at least
    :data:`SATURATION_DEPTH` ReLU layers."""
    kinks = sum(layer.activation != "none" for layer in problem.network.layers)
    return kinks >= SATURATION_DEPTH


def lower_slopes_for(problem: FairnessProblem) -> LowerSlopes:
    """CROWN's lower-slope rule for the partitions' bounds (:data:`~verifier.bounds.LOWER_SLOPES`):
    ``left`` (0 for a ReLU) on networks deep enough for CROWN to give saturated boxes up
    (:func:`gives_up_saturated`), ``adaptive`` otherwise. Through many layers of wide
    intervals, the adaptive slope 1 carries every unstable neuron's loose negative lower
    bound into the next layer, and the looseness compounds until a layer saturates; slope 0
    stops it at each neuron. Measured on Adult RQ4 1280 C's open partitions after 300 CPU s
    (300 drawn at random): 79 proven fair with ``left`` against 45 with ``adaptive``, 150
    saturated against 187 (docs/decisions.md, issue 35). Soundness does not depend on the
    choice: every lower slope in ``[slope, 1]`` is sound."""
    return "left" if gives_up_saturated(problem) else "adaptive"


def proven_classes(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                   method: str, known_signs: np.ndarray | None = None):
    """``(M,)`` the class proven on each whole box by the class rule, ties included (−1 if
    none; :func:`~verifier.causal.classes.proven_from_lower`), and the bounds. The
    non-protected one-hot groups are bounded over the categories each box allows
    (``compute_bounds(groups=…)``), not over ``[0, 1]^g``: every point of a partition is
    one-hot in each group, so this is sound, and tighter wherever a group still allows
    several categories (Adult RQ4 1280 C: 30.8 % certified fair at 40 CPU s instead of
    22.3 %; docs/decisions.md, issue 35). ``known_signs`` ``(M, N)`` int8: kink signs proven
    on boxes enclosing these (see :func:`~verifier.bounds.compute_bounds`)."""
    classes = problem.network.output_size
    result = compute_bounds(problem.network, lower, upper, pairwise_difference_spec(classes),
                            method, groups=problem.onehot_groups,
                            give_up_saturated=gives_up_saturated(problem),
                            known_signs=known_signs, lower_slopes=lower_slopes_for(problem))
    return proven_from_lower(result.lower, classes), result


def screen_cells(problem: FairnessProblem, cell_lo: np.ndarray, cell_hi: np.ndarray,
                 method: str, known_signs: np.ndarray | None, max_unstable: int
                 ) -> tuple[np.ndarray, BoundsResult, np.ndarray]:
    """The cells of ``B`` partitions (boxes ``(B·V, n)``, partition-major as
    :func:`~verifier.causal.partition.with_protected` gives them) bounded by
    :func:`proven_classes`: ``(B, V)`` the class proven on each partition × cell (−1 if
    none), the bounds of every box, and ``(B,)`` which partitions' second cell was left
    unbounded.

    **The second cell is bounded only where it can matter.** With two point cells (one-hot
    or two values) on a network deep enough for CROWN to give saturated boxes up
    (:func:`gives_up_saturated`), the first cell is bounded alone first; where its class is
    not proven and CROWN gave its box up (its bounds name no input), the partition can be
    neither proven fair (that needs one class proven on every cell) nor biased everywhere
    (that needs two probes with two proven classes, and every probe is one of the two
    cells), and where that cell alone has more than ``max_unstable`` unstable ReLUs (U) it
    does not go to the exact check either (the check takes the most over the cells), so its
    second cell is not bounded. Its rows then say nothing: class −1, spec
    bounds ``∓∞``, pre-activation bounds ``∓∞`` (no neuron off, every neuron unstable: the
    exact check, :func:`protected_unread` and :func:`possible_classes` read them soundly),
    zero sensitivity. Everything proven is what bounding both cells proves; a saturated box
    costs about 0.9 ms a cell on Adult RQ4 1280 and was most of the boxes bounded
    (docs/decisions.md, issue 35)."""
    cells = problem.protected_cells.shape[0]
    batch = cell_lo.shape[0] // cells
    nothing = np.zeros(batch, dtype=bool)
    if cells != 2 or not problem.point_cells or not gives_up_saturated(problem):
        classes, result = proven_classes(problem, cell_lo, cell_hi, method, known_signs)
        return classes.reshape(batch, cells), result, nothing
    first = np.arange(batch) * 2
    first_classes, first_result = proven_classes(
        problem, cell_lo[first], cell_hi[first], method,
        None if known_signs is None else known_signs[first])
    if first_result.sensitivity is None:
        skipped = nothing
    else:
        skipped = ((first_classes < 0) & ~(first_result.sensitivity > 0.0).any(axis=(1, 2))
                   & (first_result.unstable_count() > max_unstable))
    kept = np.flatnonzero(~skipped)
    second = 2 * kept + 1
    classes = np.full((batch, 2), -1, dtype=first_classes.dtype)
    classes[:, 0] = first_classes
    second_result = None
    if kept.size:
        second_classes, second_result = proven_classes(
            problem, cell_lo[second], cell_hi[second], method,
            None if known_signs is None else known_signs[second])
        classes[kept, 1] = second_classes
    return classes, _merged_cells(first_result, second_result, second, 2 * batch), skipped


def _merged_cells(first: BoundsResult, second: BoundsResult | None, second_rows: np.ndarray,
                  boxes: int) -> BoundsResult:
    """The bounds of ``boxes`` cell boxes from the first cells' (rows ``0, 2, 4, …``) and the
    bounded second cells' (``second_rows``); the other rows say nothing (see
    :func:`screen_cells`)."""

    def rows(part: np.ndarray, other: np.ndarray | None, missing: float) -> np.ndarray:
        out = np.full((boxes, *part.shape[1:]), missing, dtype=part.dtype)
        out[0::2] = part
        if other is not None:
            out[second_rows] = other
        return out

    def field_rows(name: str, missing: float) -> np.ndarray:
        return rows(getattr(first, name), None if second is None else getattr(second, name),
                    missing)

    def layer_rows(name: str, key: int, missing: float) -> np.ndarray:
        return rows(getattr(first, name)[key],
                    None if second is None else getattr(second, name)[key], missing)

    sensitivity = None
    if first.sensitivity is not None and (second is None or second.sensitivity is not None):
        sensitivity = field_rows("sensitivity", 0.0)
    return BoundsResult(
        lower=field_rows("lower", -np.inf),
        upper=field_rows("upper", np.inf),
        method=first.method,
        network=first.network,
        pre_lower={k: layer_rows("pre_lower", k, -np.inf) for k in first.pre_lower},
        pre_upper={k: layer_rows("pre_upper", k, np.inf) for k in first.pre_upper},
        elapsed_s=first.elapsed_s + (0.0 if second is None else second.elapsed_s),
        sensitivity=sensitivity,
        tighten_s=first.tighten_s + (0.0 if second is None else second.tighten_s),
    )


def possible_classes(upper_bounds: np.ndarray, batch: int, cells: int, classes: int
                     ) -> np.ndarray:
    """``(B, V, K)`` from class-spec upper bounds ``(B·V, K(K−1))`` (rows of
    :func:`~verifier.bounds.pairwise_difference_spec`): whether class ``k`` may be the class
    somewhere in each partition × cell (:func:`~verifier.causal.classes.possible_from_upper`),
    so the exact check may skip every class pair that needs an impossible one."""
    return possible_from_upper(upper_bounds, classes).reshape(batch, cells, classes)


def protected_unread(problem: FairnessProblem, result, batch: int, cells: int) -> np.ndarray:
    """``(B,)`` whether every path from the protected inputs to the outputs passes through a
    neuron that is off (a ReLU with pre-activation ``≤ 0``, by the sound bounds ``result`` of
    the partitions × cells) on every protected cell: the outputs are then one function of the
    non-protected inputs on the whole partition, every point gets one class for every
    protected value, and the partition is fair, exactly (no tolerance: zero weights are read
    through their magnitudes, so a folded weight that rounded to zero still counts)."""
    reach = np.zeros((batch, problem.inputs), dtype=bool)
    reach[:, list(problem.protected)] = True
    for index, layer in enumerate(problem.network.layers):
        assert layer.weight_magnitude is not None
        reach = (reach.astype(np.float64) @ (layer.weight_magnitude.T > 0.0)) > 0.0
        if index in result.pre_upper:
            off = result.pre_upper[index].reshape(batch, cells, -1) <= 0.0
            dead = off.all(axis=1) & (layer.negative_slope_effective == 0.0)[None, :]
            reach &= ~dead
    return ~reach.any(axis=1)


def _probe_boxes(problem: FairnessProblem) -> np.ndarray:
    """``(P, 2, k)`` protected value boxes used to prove bias everywhere."""
    if problem.protected_kind == "one_hot":
        return problem.protected_cells
    points = problem.probe_points()
    return np.stack([points, points], axis=1)


def _unstable(result, batch: int, cells: int) -> np.ndarray:
    return result.unstable_count().reshape(batch, cells).max(axis=1)


def class_gaps(lower_bounds: np.ndarray, boxes: int, classes: int) -> np.ndarray:
    """``(N, boxes, K)`` from class-spec lower bounds ``(N·boxes, K(K−1))`` (rows of
    :func:`~verifier.bounds.pairwise_difference_spec`): ``max(0, −min_d lb(y_c − y_d))``,
    how far class ``c`` is from being proven on each box (0 when proven, up to ties)."""
    lb = lower_bounds.reshape(-1, boxes, classes, classes - 1)
    return np.maximum(0.0, -lb.min(axis=3))


def decision_gap(cell_gaps: np.ndarray, probe_gaps: np.ndarray) -> np.ndarray:
    """``(N,)`` the least total bound improvement that would decide each partition: proven
    fair (one class ``c`` on every cell: ``min_c Σ_cells gap``) or proven biased everywhere
    (two probes ``p ≠ q`` with two classes ``c ≠ c'``: ``min gap_c(p) + gap_c'(q)``).
    ``cell_gaps`` ``(N, V, K)``, ``probe_gaps`` ``(N, P, K)`` from :func:`class_gaps`."""
    fair = cell_gaps.sum(axis=1).min(axis=1)
    count, probes, classes = probe_gaps.shape
    pairs = probe_gaps[:, :, None, :, None] + probe_gaps[:, None, :, None, :]
    allowed = (~np.eye(probes, dtype=bool))[:, :, None, None] & (
        ~np.eye(classes, dtype=bool))[None, None, :, :]
    biased = np.where(allowed[None], pairs, np.inf).reshape(count, -1).min(axis=1)
    return np.minimum(fair, biased)


def choose_split(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                 settings: AnalysisSettings, probes: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Children ``(B, 2, n)`` of each partition by the split rules of the module docstring
    (the unstable-ReLU rule, or the decision-gap rule when ``probes`` ``(B, P, k)``, the
    protected values tried per partition, are given), and ``(B,)`` whether any split is
    admissible."""
    n = lower.shape[1]
    child_lo, child_hi, valid = split_candidates(problem, lower, upper, settings.min_edge)
    out_lo = np.repeat(lower[:, None, :], 2, axis=1)
    out_hi = np.repeat(upper[:, None, :], 2, axis=1)
    splittable = valid.any(axis=1)
    if not splittable.any():
        return out_lo, out_hi, splittable
    b_idx, d_idx = np.nonzero(valid)
    flat_lo = child_lo[b_idx, d_idx].reshape(-1, n)
    flat_hi = child_hi[b_idx, d_idx].reshape(-1, n)
    if probes is None:
        per_child = _child_unstable(problem, flat_lo, flat_hi, settings)
    else:
        per_child = _child_gap(problem, flat_lo, flat_hi, np.repeat(probes[b_idx], 2, axis=0),
                               settings)
    score = np.full(valid.shape, np.inf)
    score[b_idx, d_idx] = per_child.reshape(-1, 2).sum(axis=1)
    width = np.full(valid.shape, -np.inf)
    width[b_idx, d_idx] = _relative_width(problem, lower, upper)[b_idx, d_idx]
    tied = score <= score.min(axis=1, keepdims=True)
    best = np.argmax(np.where(tied & valid, width, -np.inf), axis=1)
    rows = np.flatnonzero(splittable)
    out_lo[rows] = child_lo[rows, best[rows]]
    out_hi[rows] = child_hi[rows, best[rows]]
    return out_lo, out_hi, splittable


def smear_split(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                sensitivity: np.ndarray, min_edge: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Children ``(B, 2, n)`` and ``(B,)`` whether any split is admissible, by the CROWN
    smear: each admissible split is scored by how much of the partition's bound gap its
    input drives, ``Σ_rows |A_i| · width_i`` (``sensitivity`` ``(B, n)``: the absolute input
    coefficients of the partition's own linear bounds, summed over its cells and spec rows;
    a one-hot group sums its allowed members), and the highest score wins (ties: the widest
    edge). It costs no bounding beyond the partition's own.

    A partition whose sensitivity is zero everywhere (its bounds name no input: a saturated
    box given up by CROWN, :data:`SATURATION_DEPTH`) is split by :func:`blind_scores`: a
    one-hot group before any continuous edge."""
    child_lo, child_hi, valid = split_candidates(problem, lower, upper, min_edge)
    out_lo = np.repeat(lower[:, None, :], 2, axis=1)
    out_hi = np.repeat(upper[:, None, :], 2, axis=1)
    splittable = valid.any(axis=1)
    drive = sensitivity * (upper - lower)
    scores = [drive[:, i] for i in problem.continuous]
    scores += [(sensitivity[:, list(group)] * (upper[:, list(group)] > 0.5)).sum(axis=1)
               for group in problem.onehot_groups]
    stacked = np.stack(scores, axis=1)
    blind = ~(sensitivity > 0.0).any(axis=1)
    stacked[blind] = blind_scores(problem, lower[blind], upper[blind])
    score = np.where(valid, stacked, -np.inf)
    width = _relative_width(problem, lower, upper)
    tied = score >= score.max(axis=1, keepdims=True)
    best = np.argmax(np.where(tied & valid, width, -np.inf), axis=1)
    rows = np.flatnonzero(splittable)
    out_lo[rows] = child_lo[rows, best[rows]]
    out_hi[rows] = child_hi[rows, best[rows]]
    return out_lo, out_hi, splittable


def blind_scores(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray
                 ) -> np.ndarray:
    """``(B, D)`` split scores for partitions whose bounds name no input (zero sensitivity;
    ``lower``/``upper`` ``(B, n)``): a one-hot group scores its number of allowed categories
    plus the row's largest edge score, so every group with two or more categories goes
    before any continuous edge, the one with the most first; a continuous edge scores the
    width it adds to the first layer's pre-activations, ``Σ_j |W₁[j, i]| · (hi_i − lo_i)``.

    Why: a saturated partition (every neuron of a layer unstable) has no usable gradient,
    and the fallback was the widest edge *relative to the query*. On Adult RQ4 1280 the
    partitions proven fair had every one-hot group down to one category, and the relative
    width kept halving the narrow age range of queries D–F (E's age spans 1/16 of its
    domain) while the network reads inputs in its own units. Certified fair % of the query,
    old → new, at 40 / 150 CPU s: C 31.3 → 47.2 / 57.3 → 62.4, D 52.6 → 61.4 / 68.3 → 74.8,
    E 64.9 → 78.9 / 80.0 → 88.1 (docs/decisions.md, issue 35). The choice of split never
    affects soundness: the two children always partition the parent
    exactly (:func:`~verifier.causal.partition.split_candidates`)."""
    first = np.abs(problem.network.layers[0].weight).sum(axis=0)
    edges = np.stack([first[i] * (upper[:, i] - lower[:, i]) for i in problem.continuous],
                     axis=1) if problem.continuous else np.zeros((upper.shape[0], 0))
    ahead = edges.max(axis=1, initial=0.0)
    groups = [(upper[:, list(group)] > 0.5).sum(axis=1) + ahead
              for group in problem.onehot_groups]
    return np.column_stack([edges, *groups]) if groups else edges


def _child_unstable(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                    settings: AnalysisSettings) -> np.ndarray:
    """``(M,)`` the most unstable ReLUs of each child over the protected cells."""
    cells = problem.protected_cells
    box_lo, box_hi = with_protected(problem, lower, upper, cells)
    result = compute_bounds(problem.network, box_lo, box_hi, None, settings.bound_method)
    return _unstable(result, lower.shape[0], cells.shape[0]).astype(float)


def _child_gap(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
               probes: np.ndarray, settings: AnalysisSettings) -> np.ndarray:
    """``(M,)`` the decision gap of each child, its cells and its probes ``(M, P, k)``."""
    classes = problem.network.output_size
    cells = problem.protected_cells
    cell_lo, cell_hi = with_protected(problem, lower, upper, cells)
    count = probes.shape[1]
    probe_lo = np.repeat(lower, count, axis=0)
    probe_hi = np.repeat(upper, count, axis=0)
    prot = list(problem.protected)
    probe_lo[:, prot] = probes.reshape(-1, len(prot))
    probe_hi[:, prot] = probes.reshape(-1, len(prot))
    result = compute_bounds(problem.network, np.vstack([cell_lo, probe_lo]),
                            np.vstack([cell_hi, probe_hi]), pairwise_difference_spec(classes),
                            settings.bound_method)
    split = cell_lo.shape[0]
    cell_gaps = class_gaps(result.lower[:split], cells.shape[0], classes)
    probe_gaps = class_gaps(result.lower[split:], count, classes)
    return decision_gap(cell_gaps, probe_gaps)


def _relative_width(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    extra = problem.integer.astype(float)
    widths = [
        (upper[:, i] - lower[:, i] + extra[i])
        / max(problem.query_upper[i] - problem.query_lower[i] + extra[i], MIN_EDGE)
        for i in problem.continuous
    ]
    widths += [
        (upper[:, list(group)] > 0.5).sum(axis=1) / len(group) for group in problem.onehot_groups
    ]
    return np.stack(widths, axis=1) if widths else np.zeros((lower.shape[0], 0))


def analyse_chunk(problem: FairnessProblem, settings: AnalysisSettings, lower: np.ndarray,
                  upper: np.ndarray, hints: np.ndarray | None = None,
                  deadline: float | None = None, refining: np.ndarray | None = None,
                  bounds_only: np.ndarray | None = None, signs: np.ndarray | None = None
                  ) -> ChunkOutcome:
    """Decide a batch of partitions (see the module docstring). Every witness returned has been
    re-evaluated: the two points differ only in protected inputs and get the two classes.
    ``hints`` ``(B, 2, n)`` (NaN where none): an ancestor's witness pair; its protected values
    are tried as extra probes and its point as an extra sample. Children inherit their
    parent's witness (or hint). Nothing expensive starts past ``deadline`` (``time.time()``
    seconds, comparable across processes and machines up to clock skew): no exact check, no
    sampling, no further split batch; undecided partitions left without children then end
    ``UNFINISHED`` (a witnessed one stays biased at its witness, without children).
    ``refining`` ``(B,)``: partitions inside a witnessed ancestor (covered: split with
    ``min_edge`` 0); ``bounds_only`` ``(B,)``: those of them analysed by bounds alone (no
    sampling, no exact check; see the module docstring). ``signs`` ``(B, V, P)`` uint8: kink
    signs proven on an enclosing box of each partition × protected cell (its parent's, packed
    by :func:`~verifier.bounds.pack_signs`; None or zero bytes: nothing known). A neuron the
    parent proved stable is stable on the child, so CROWN does not back-substitute it: on
    Adult RQ4 1280 a child of an unsaturated partition cost 1.0 ms of bounding a cell instead
    of 6.5 (docs/decisions.md, issue 35).

    Runs torch single-threaded (:func:`~verifier.arrays.single_threaded`): the boxes are
    small and the executor already supplies the parallelism, so intra-op threads only contend
    for cores."""
    with single_threaded():
        return _analyse(problem, settings, lower, upper, hints, deadline, refining, bounds_only,
                        signs)


def _probe_values(problem: FairnessProblem, hints: np.ndarray | None, batch: int) -> np.ndarray:
    """``(B, P, k)`` concrete protected values tried per partition: the global probes, then the
    partition's hinted pair (protected values of an ancestor's witness) when it has one."""
    base = _probe_boxes(problem)[:, 0, :]
    values = np.broadcast_to(base, (batch, *base.shape))
    if hints is None:
        return values.copy()
    hinted = hints[:, :, list(problem.protected)]
    filled = np.where(np.isnan(hinted), values[:, :1, :], hinted)
    return np.concatenate([values, filled], axis=1)


def _probe_classes(problem: FairnessProblem, probes: np.ndarray, probe_lo: np.ndarray,
                   probe_hi: np.ndarray, cell_classes: np.ndarray, method: str) -> np.ndarray:
    """``(B, P)`` the class proven on each partition at each probe (−1 if none). A probe equal
    to a one-value cell is the very box that cell was bounded on, so it takes the cell's
    proven class (one-hot and integer protected features: every probe); only the others are
    bounded."""
    batch, count = probes.shape[:2]
    cells = problem.protected_cells
    point = cells[:, 0] == cells[:, 1]
    same = (probes[:, :, None, :] == cells[None, None, :, 0, :]).all(axis=3) & point.all(
        axis=1)[None, None, :]
    matched = same.any(axis=2)
    classes = np.full((batch, count), -1, dtype=np.int64)
    rows, probe = np.nonzero(matched)
    classes[rows, probe] = cell_classes[rows, np.argmax(same[rows, probe], axis=1)]
    rest = np.flatnonzero(~matched.reshape(-1))
    if rest.size:
        classes.reshape(-1)[rest] = proven_classes(problem, probe_lo[rest], probe_hi[rest],
                                                   method)[0]
    return classes


def _past(deadline: float | None) -> bool:
    """Whether ``deadline`` (``time.time()`` seconds) has passed, or a stop was requested in
    this process (:mod:`verifier.stop_request`; a worker process never sees one, its chunk is
    abandoned instead)."""
    return stop_requested() or (deadline is not None and time.time() >= deadline)


def _exact_checks(problem: FairnessProblem, settings: AnalysisSettings, lower: np.ndarray,
                  upper: np.ndarray, rows: np.ndarray, cell_result: BoundsResult,
                  possible: np.ndarray, deadline: float | None, status: np.ndarray,
                  witness_a: np.ndarray, witness_b: np.ndarray,
                  witness_classes: np.ndarray) -> tuple[int, ProofTally]:
    """The exact check of partitions ``rows`` (their cells' pre-activation bounds from
    ``cell_result``): a proof of fairness or a witness is written into ``status`` and the
    witness arrays; returns the number of MILPs solved and the checks' proofs, summed.

    :mod:`verifier.causal.exact_check` is imported here, at the first partition that needs it,
    not with this module: it brings ``highspy`` and the certificate's modules (about 0.02 CPU
    s; it brought ``scipy.optimize``, 0.2–0.35 s, until it called HiGHS directly), which runs
    decided by bounds alone never need. It is the only import of the module deferred so."""
    from verifier.causal.exact_check import check_partition

    cell_count = problem.protected_cells.shape[0]
    milps = 0
    proofs = ProofTally()
    for b in rows:
        bounds = [
            ({k: v[b * cell_count + c] for k, v in cell_result.pre_lower.items()},
             {k: v[b * cell_count + c] for k, v in cell_result.pre_upper.items()})
            for c in range(cell_count)
        ]
        outcome = check_partition(problem, lower[b], upper[b], bounds, settings.milp_time_limit,
                                  deadline, possible=possible[b],
                                  presolve_first=settings.presolve_first)
        milps += outcome.solved
        if outcome.proofs is not None:
            proofs.add(outcome.proofs)
        if outcome.status == "fair":
            status[b] = FAIR
        elif outcome.status == "witness":
            status[b] = BIASED_WITNESS
            witness_a[b], witness_b[b] = outcome.x_a, outcome.x_b
            witness_classes[b] = outcome.classes
    return milps, proofs


def _analyse(problem: FairnessProblem, settings: AnalysisSettings, lower: np.ndarray,
             upper: np.ndarray, hints: np.ndarray | None, deadline: float | None,
             refining: np.ndarray | None, bounds_only: np.ndarray | None,
             signs: np.ndarray | None) -> ChunkOutcome:
    batch, n = lower.shape
    cells = problem.protected_cells
    cell_count = cells.shape[0]
    cell_lo, cell_hi = with_protected(problem, lower, upper, cells)
    known = None if signs is None else unpack_signs(signs.reshape(batch * cell_count, -1),
                                                    kink_neurons(problem.network))
    cell_classes, cell_result, skipped = screen_cells(problem, cell_lo, cell_hi,
                                                      settings.bound_method, known,
                                                      settings.max_unstable)
    unstable = _unstable(cell_result, batch, cell_count)
    fair = (cell_classes[:, 0] >= 0) & (cell_classes == cell_classes[:, :1]).all(axis=1)
    possible = possible_classes(cell_result.upper, batch, cell_count, problem.network.output_size)
    smear = None
    if cell_result.sensitivity is not None:
        smear = cell_result.sensitivity.reshape(batch, -1, n).sum(axis=1)

    prot = list(problem.protected)
    probes = _probe_values(problem, hints, batch)
    count = probes.shape[1]
    probe_lo = np.repeat(lower, count, axis=0)
    probe_hi = np.repeat(upper, count, axis=0)
    probe_lo[:, prot] = probes.reshape(-1, len(prot))
    probe_hi[:, prot] = probes.reshape(-1, len(prot))
    probe_classes = _probe_classes(problem, probes, probe_lo, probe_hi, cell_classes,
                                   settings.bound_method)
    high = np.where(probe_classes >= 0, probe_classes, -1)
    low = np.where(probe_classes >= 0, probe_classes, np.iinfo(np.int64).max)
    biased_all = ~fair & (high.max(axis=1) > low.min(axis=1)) & (probe_classes >= 0).any(axis=1)

    status = np.full(batch, SPLIT, dtype=np.int8)
    status[fair] = FAIR
    witness_a = np.full((batch, n), np.nan)
    witness_b = np.full((batch, n), np.nan)
    witness_classes = np.full((batch, 2), -1, dtype=np.int64)
    if biased_all.any():
        rows = np.flatnonzero(biased_all)
        first = np.argmin(low[rows], axis=1)
        second = np.argmax(high[rows], axis=1)
        point = representative(problem, lower[rows], upper[rows])
        a, b = point.copy(), point.copy()
        a[:, prot] = probes[rows, first]
        b[:, prot] = probes[rows, second]
        confirmed, classes_a, classes_b = confirmed_pairs(problem.network, a, b)
        rows = rows[confirmed]
        status[rows] = BIASED_EVERYWHERE
        witness_a[rows], witness_b[rows] = a[confirmed], b[confirmed]
        witness_classes[rows] = np.stack([classes_a, classes_b], axis=1)[confirmed]

    unread = (status == SPLIT) & protected_unread(problem, cell_result, batch, cell_count)
    status[unread] = FAIR
    if problem.point_cells:
        others = np.setdiff1d(np.arange(n), prot)
        single = np.flatnonzero((status == SPLIT)
                                & (lower[:, others] == upper[:, others]).all(axis=1))
        if single.size:
            decided, point_a, point_b, point_pair = decide_points(problem, lower[single],
                                                                  upper[single])
            status[single] = decided
            witness_a[single], witness_b[single] = point_a, point_b
            witness_classes[single] = point_pair

    refining = np.zeros(batch, dtype=bool) if refining is None else refining
    if bounds_only is None:
        bounds_only = np.zeros(batch, dtype=bool)
    bounds_only = refining & bounds_only & split_candidates(problem, lower, upper,
                                                            0.0)[2].any(axis=1)
    undecided = np.flatnonzero((status == SPLIT) & ~bounds_only)
    if undecided.size and settings.witness_sampling and not _past(deadline):
        anchors = None if hints is None else hints[undecided, 0]
        found, x_a, x_b, pair = find_witnesses(problem, lower[undecided], upper[undecided],
                                               probes[undecided], anchors)
        if found.any():
            genuine, class_a, class_b = confirmed_pairs(problem.network, x_a[found], x_b[found])
            pair[found] = np.stack([class_a, class_b], axis=1)
            found[np.flatnonzero(found)[~genuine]] = False
        rows = undecided[found]
        status[rows] = BIASED_WITNESS
        witness_a[rows], witness_b[rows] = x_a[found], x_b[found]
        witness_classes[rows] = pair[found]

    milps = 0
    proofs = ProofTally()
    feasible = np.flatnonzero((status == SPLIT) & (unstable <= settings.max_unstable)
                              & ~bounds_only)
    if _past(deadline):
        feasible = feasible[:0]
    exact_checked = np.zeros(batch, dtype=bool)
    exact_checked[feasible] = True
    if feasible.size:
        milps, proofs = _exact_checks(problem, settings, lower, upper, feasible, cell_result,
                                      possible, deadline, status, witness_a, witness_b,
                                      witness_classes)

    children_lo = np.repeat(lower[:, None, :], 2, axis=1)
    children_hi = np.repeat(upper[:, None, :], 2, axis=1)
    has_children = np.zeros(batch, dtype=bool)
    split_done = np.zeros(batch, dtype=bool)
    # refining partitions are split like witnessed ones (below L: they are covered already)
    queue = [(int(row), False) for row in np.flatnonzero((status == SPLIT) & ~refining)]
    covered = (status == BIASED_WITNESS) | ((status == SPLIT) & refining)
    queue += [(int(row), True) for row in np.flatnonzero(covered)]
    per_partition = 0.0
    position = 0
    while position < len(queue):
        size = 1
        if per_partition > 0.0:
            size = int(np.clip(SPLIT_BATCH_SECONDS / per_partition, 1, SPLIT_BATCH_MAX))
            if deadline is not None:
                size = min(size, int((deadline - time.time()) / per_partition))
        if size < 1 or _past(deadline):
            break
        witnessed = queue[position][1]
        batch_rows = []
        while (position < len(queue) and len(batch_rows) < size
               and queue[position][1] == witnessed):
            batch_rows.append(queue[position][0])
            position += 1
        rows = np.array(batch_rows)
        started = time.time()
        if settings.split_rule == "smear" and smear is not None:
            c_lo, c_hi, ok = smear_split(problem, lower[rows], upper[rows], smear[rows],
                                         0.0 if witnessed else settings.min_edge)
        elif witnessed:
            c_lo, c_hi, ok = choose_split(problem, lower[rows], upper[rows],
                                          replace(settings, min_edge=0.0), probes[rows])
        else:
            c_lo, c_hi, ok = choose_split(problem, lower[rows], upper[rows], settings)
        per_partition = max((time.time() - started) / rows.size, 1e-6)
        children_lo[rows], children_hi[rows], has_children[rows] = c_lo, c_hi, ok
        split_done[rows] = True
    undecided = status == SPLIT
    status[undecided & split_done & ~has_children] = EXCLUDED
    status[undecided & ~split_done] = UNFINISHED
    children_hints = np.full((batch, 2, n), np.nan) if hints is None else hints.copy()
    witnessed = witness_classes[:, 0] >= 0
    children_hints[witnessed, 0] = witness_a[witnessed]
    children_hints[witnessed, 1] = witness_b[witnessed]
    children_signs = pack_signs(cell_result.signs()).reshape(batch, cell_count, -1)
    if signs is not None:
        # a cell left unbounded passes on the signs proven on its enclosing box
        children_signs[skipped, 1:] = signs[skipped, 1:]
    return ChunkOutcome(status, children_lo, children_hi, has_children, children_hints,
                        children_signs, witness_a, witness_b,
                        witness_classes, unstable, milps, exact_checked, proofs)
