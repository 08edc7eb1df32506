"""Anytime causal-fairness certification: partition, decide, refine, report.

Rounds: every pending partition is analysed (in chunks through an executor); fair, biased
everywhere and excluded partitions are final; undecided ones are replaced by their children;
partitions biased only at a witness are refined (replaced by their children) from the next
round on, beside the undecided partitions inside and outside refinements (the certified
shares first: a witnessed partition waiting for coverage to finish held half of Adult RQ4
1280 E unproven; docs/decisions.md, issue 35), largest first with a discount for partitions
whose parent left most kink signs unknown (:func:`_priority`), until the biased-share interval
is at most ``target_width`` wide (judged once no undecided partition outside a refinement is
pending), nothing can be refined, or the time budget ends.
Partitions still pending at the end count as excluded (refining inside a refinement). The
final partitions tile the query exactly, so the fractions sum to one.

Inside a refinement the analysis is bounds-only (see :mod:`verifier.causal.analysis`): a
witness there changes no share, so only a proof (fair, biased everywhere) or a split is
worth its time.

Every pending partition carries the kink signs its parent's bounds proved on each protected
cell (packed, :func:`~verifier.bounds.pack_signs`; nothing for the root). A child lies inside
its parent, so they hold on it, and its CROWN skips the back-substitution of those neurons.
"""

from __future__ import annotations

import math
import time
from collections import deque
from concurrent.futures import CancelledError, Executor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from verifier.causal.codes import (
    BIASED_EVERYWHERE,
    BIASED_WITNESS,
    EXCLUDED,
    FAIR,
    SPLIT_RULES,
    UNFINISHED,
)
from verifier.causal.enumeration import ENUMERATION_WORK, enumerated_certificate
from verifier.causal.partition import initial_partition, uniform_share
from verifier.causal.problem import CausalInputError, FairnessProblem
from verifier.causal.proof_tally import ProofTally
from verifier.causal.report import names_box, witness_record
from verifier.causal.share import (
    PartitionMasses,
    bounds_from_sums,
    certified_shares,
    population_bounds,
    uniform_bounds,
)
from verifier.certificate import Certificate
from verifier.executor import InProcessExecutor, running, wait_while_running
from verifier.network import Network
from verifier.stop_request import stop_requested

if TYPE_CHECKING:
    from verifier.causal.analysis import AnalysisSettings, ChunkOutcome

UNRESOLVED = 5
ROUND_CHUNKS = 8
CHUNK_WORK = 256 * 1280
"""Partitions × hidden neurons in a chunk by default (:meth:`CausalSettings.chunk_size_for`).
Measured on the CPU clock (docs/decisions.md, causal chunk size): chunks of 2,048 instead of
256 took Libra's COMPAS age rows (20 hidden neurons) from 16.0 to 12.0 CPU s and FairQuant's
GC-1 from 34.2 to 39.5 % certified at 10 CPU s, while 1,024 instead of 256 cost Adult RQ4
1280 (1,280 neurons) 40.3 → 37.6 % at 40 CPU s: there a round of 8 chunks is most of a run."""
ROUND_TIME_SHARE = 1.0
"""A round takes at most as many partitions as the last round's wall time per partition fits
in this share of the time left (at least one): a chunk's screening is not cut by the
deadline, and rounds that doubled with the pending partitions (1,688 → 2,048 on a
15-input 16-16 network at load 7) ended 0.4–1.6 s past budgets of 5–60 s. Half the time
left (as PV sizes its in-process chunks) also kept the budget but spent its end on ever
smaller rounds (docs/decisions.md, 2026-11-30 red-team of networks)."""
CHUNK_SIZES = (256, 2048)
"""The smallest and largest default chunk."""
"""A round analyses at most this many chunks of the pending partitions first in
:func:`_priority` (best-first: the children of a large partition are not kept waiting behind
thousands of small ones)."""
REFINING = 6
"""Inside a partition already shown to contain bias (a witnessed partition being refined to
tighten the share), its own analysis unfinished at the deadline: covered (its ancestor was
decided), neither proven fair nor biased everywhere."""


EXACT_WINDOW = 64
EXACT_PROBES = 16
"""While exact checks are off in refinements, at most this many refining partitions of each
round (the first in :func:`_priority` order) still get one, so the yield below is re-measured
within ``EXACT_WINDOW / EXACT_PROBES`` rounds. Measured under the earlier yield threshold of
0.8: with one probe per round, German 0.20-bias5/Gt switched them off at round 14 and needed
12 more rounds to see them pay again (bounds alone stall on partitions straddling a bias-free
decision border): 27 rounds to the target width, 16 probes 21. Each round of refinement in
which no exact check proved a partition fair halves the probes (down to one), a round with a
proof restores them (:class:`_ExactYield`): where the checks never pay (FairQuant's GC-4:
none of 64) their cost fades geometrically, where they pay now and then nothing changes."""
EXACT_MIN_YIELD = 0.75
"""Exact checks inside refinements stay on while fewer than ``EXACT_MIN_CHECKS`` were made
(unless those already say otherwise, :data:`EXACT_EARLY_LEVEL`) or at least this share of
the last ``EXACT_WINDOW`` proved their partition fair. Measured (see
docs/decisions.md): 91 % on Libra German 0.20-bias1/Gt, where they win (target width in
5 s with them, 0.8 points wide at 30 s without); 75–81 % on German 0.20-bias5/Gt, where
they still win (switched off at 51/64 by a threshold of 0.8: 9,439 partitions instead of
about 2,900); 64–70 % on COMPAS age, where splitting wins; 2.5 % on FairQuant's GC-1."""
EXACT_MIN_CHECKS = 16
"""The yield is judged once this many exact checks were made in refinements (then over the
last ``EXACT_WINDOW``). A whole FairQuant German network is one refinement from the first
round (the root holds a witness), so until the switch is judged every partition gets
sampling and a MILP: with 64, GC-1 spent its first 2 CPU s on them (2.2 % certified fair at
1 CPU s, 16.4 % with 16; GC-3 29.2 % vs 50.5 %); Libra German and COMPAS analyse the same
partitions either way (docs/decisions.md, issue 35). Fewer checks are judged only when they
already say the yield is low (:data:`EXACT_EARLY_LEVEL`)."""
EXACT_EARLY_LEVEL = 0.05
"""Before ``EXACT_MIN_CHECKS`` checks, the checks are turned off once so few proofs would
come up with probability below this level if the yield were :data:`EXACT_MIN_YIELD` (the
binomial tail, :func:`_binomial_tail`): none of the first 3 checks, at most one of the first
5, at most two of the first 6. The first checks of a FairQuant German network, on its
largest partitions, cost 30–120 ms each and prove nothing (docs/decisions.md, issue 35);
where the checks pay (Libra German 0.20-bias5/Gt: 37 proofs in its first 38 checks) they
are judged after 16 as before, and every Libra German and COMPAS run analyses the same
partitions as with the judgement after 16 alone."""


def _binomial_tail(successes: int, trials: int, rate: float) -> float:
    """``P(X <= successes)`` for ``X`` binomial with ``trials`` trials of success ``rate``."""
    return sum(math.comb(trials, k) * rate ** k * (1.0 - rate) ** (trials - k)
               for k in range(successes + 1))


class _ExactYield:
    """Whether exact checks inside refinements pay: the share of the recent ones that proved
    their partition fair. Off below :data:`EXACT_MIN_YIELD` (or earlier, see
    :data:`EXACT_EARLY_LEVEL`); then the first ``probes`` refining partitions of each round
    are still checked, so the estimate follows the partitions as they shrink. ``probes`` is
    :data:`EXACT_PROBES`, halved (down to one) by each round of refinement whose checks proved
    no partition fair and restored by one with a proof. Outcomes are counted, not timed: the
    run does not depend on load or executor."""

    def __init__(self) -> None:
        self.recent: deque[bool] = deque(maxlen=EXACT_WINDOW)
        self.checks = 0
        self.probes = EXACT_PROBES
        self.round_proofs: int | None = None

    def worthwhile(self) -> bool:
        proofs = sum(self.recent)
        if self.checks < EXACT_MIN_CHECKS:
            return _binomial_tail(proofs, self.checks, EXACT_MIN_YIELD) >= EXACT_EARLY_LEVEL
        return proofs >= EXACT_MIN_YIELD * len(self.recent)

    def bounds_only(self, refining: np.ndarray) -> np.ndarray:
        """``(B,)`` partitions (first in :func:`_priority`) to analyse by bounds alone this
        round. Called once per round, before it: the previous round's proofs set ``probes``."""
        if self.round_proofs is not None:
            self.probes = EXACT_PROBES if self.round_proofs else max(self.probes // 2, 1)
        self.round_proofs = 0 if refining.any() else None
        if self.worthwhile():
            return np.zeros_like(refining)
        chosen = refining.copy()
        chosen[np.flatnonzero(refining)[:self.probes]] = False
        return chosen

    def record(self, outcome: ChunkOutcome, refining: np.ndarray) -> None:
        checked = outcome.exact_checked & refining
        proofs = (outcome.status == FAIR)[checked]
        self.recent.extend(bool(fair) for fair in proofs)
        self.checks += int(proofs.size)
        if self.round_proofs is not None:
            self.round_proofs += int(proofs.sum())


PRESOLVE_WINDOW = 32
PRESOLVE_MIN_CHECKS = 8
PRESOLVE_MAX_FAIR = 0.6
"""The exact check tries HiGHS's presolve first (:class:`_PresolveChoice`) once the last
``PRESOLVE_WINDOW`` exact checks (at least ``PRESOLVE_MIN_CHECKS``) proved their partition
fair at most this often. A proof needs a solve without presolve, which on feasible models
(witnesses, near ties) is 2.4 times slower (GC-1) but on proving ones about as fast or
faster (0.9–1.3 times, German, COMPAS; docs/decisions.md 2026-11-28): presolving first
costs about ``(1 − p) + 2p`` solves against ``2.4 (1 − p) + p`` for a share ``p`` of
proofs, so it pays below about 0.6. Off until measured: a presolved try that ends in a
proof is wasted, and on Libra COMPAS priors (U = 14) each cost 180 ms against 60 ms for the
proving solve. Measured shares: 3 % of GC-1's first solves were proofs; 99 % of German
0.20-bias3/Gt's. Before ``PRESOLVE_MIN_CHECKS`` checks, presolve comes first once the proofs
so far would come up with probability below :data:`EXACT_EARLY_LEVEL` if the share were
``PRESOLVE_MAX_FAIR`` (none in the first 4 checks, at most one in 6): the same judgement as
the exact checks' early one. It matters because the choice also sets the certificate's first
search (:func:`verifier.causal.exact_check.check_partition`'s ``presolve_first``): up to
300 LPs before the MILP otherwise, which on FairQuant's GC-4 cost 13–82 ms a check on
partitions holding a witness or a near tie (docs/decisions.md, issue 35)."""


class _PresolveChoice:
    """Whether the exact checks should try presolve first: once at least
    :data:`PRESOLVE_MIN_CHECKS` were made, while the recent ones proved their partition fair
    at most as often as :data:`PRESOLVE_MAX_FAIR`; before that, once the first checks already
    say so (:data:`PRESOLVE_MAX_FAIR`). Counted, not timed, like :class:`_ExactYield`."""

    def __init__(self) -> None:
        self.recent: deque[bool] = deque(maxlen=PRESOLVE_WINDOW)

    def first(self) -> bool:
        proofs = sum(self.recent)
        if len(self.recent) < PRESOLVE_MIN_CHECKS:
            return (bool(self.recent) and _binomial_tail(proofs, len(self.recent),
                                                         PRESOLVE_MAX_FAIR) < EXACT_EARLY_LEVEL)
        return proofs <= PRESOLVE_MAX_FAIR * len(self.recent)

    def record(self, outcome: ChunkOutcome) -> None:
        self.recent.extend(bool(fair) for fair in (outcome.status == FAIR)[outcome.exact_checked])


def _unfinished(origin: np.ndarray) -> np.ndarray:
    """Status of partitions still pending at the deadline: refining inside a witnessed
    ancestor, else unresolved (excluded from coverage)."""
    return np.where(origin >= 0, REFINING, UNRESOLVED).astype(np.int8)


@dataclass(frozen=True)
class CausalSettings:
    """``min_edge`` (L) and ``max_unstable`` (U) as in Libra; ``timeout_s`` the time budget;
    ``target_width`` stops refinement once the uniform biased-share interval is this narrow
    and, when ``judged_below`` is given, the interval the verdict reads (``judged_measure``:
    the uniform share, or the population share) no longer holds ``judged_below``, the
    threshold of ``biased share < judged_below`` (a narrow interval around the threshold is
    refined on until the budget ends); ``chunk_size`` partitions per executor task, bounded
    together (None: sized to the network by :meth:`chunk_size_for`);
    ``split_rule`` ``smear`` (default) or ``bounds`` (see :mod:`verifier.causal.analysis`)."""

    min_edge: float = 0.0
    max_unstable: int = 8
    timeout_s: float = 60.0
    target_width: float = 0.0
    chunk_size: int | None = None
    bound_method: str = "crown"
    milp_time_limit: float = 10.0
    max_regions: int = 50
    max_witnesses: int = 20
    witness_sampling: bool = True
    split_rule: str = "smear"
    enumeration_work: int = ENUMERATION_WORK
    judged_below: float | None = None
    judged_measure: str = "uniform"

    def __post_init__(self) -> None:
        if not self.min_edge >= 0.0:
            raise CausalInputError(f"L (smallest partition edge) must be >= 0, got {self.min_edge}")
        if self.max_unstable < 0:
            raise CausalInputError(
                f"U (most unstable ReLUs for the exact check) must be >= 0, got {self.max_unstable}"
            )
        if not self.timeout_s > 0.0:
            raise CausalInputError(f"the timeout must be positive, got {self.timeout_s}")
        if self.split_rule not in SPLIT_RULES:
            raise CausalInputError(
                f"split rule must be one of {', '.join(SPLIT_RULES)}, got {self.split_rule!r}"
            )
        if self.chunk_size is not None and self.chunk_size < 1:
            raise CausalInputError(f"chunk size must be >= 1, got {self.chunk_size}")

    def chunk_size_for(self, network: Network) -> int:
        """Partitions per chunk: ``chunk_size`` if given, else the power of two nearest below
        :data:`CHUNK_WORK` divided by the network's hidden neurons, within
        :data:`CHUNK_SIZES` — a chunk's bounding costs about its partitions times the
        network's neurons, so small networks get chunks large enough to outweigh each batch's
        fixed cost and deep ones keep rounds small enough for best-first order. Depends on
        the network only, so the partitions a round analyses never depend on timing."""
        if self.chunk_size is not None:
            return self.chunk_size
        hidden = sum(layer.out_features for layer in network.layers[:-1])
        smallest, largest = CHUNK_SIZES
        fitting = max(CHUNK_WORK // max(hidden, 1), smallest)
        return min(1 << (fitting.bit_length() - 1), largest)

    def record(self, problem: FairnessProblem) -> dict[str, Any]:
        """The settings as a certificate records them."""
        return {
            "L": self.min_edge, "U": self.max_unstable,
            "timeout_s": self.timeout_s, "target_width": self.target_width,
            "bound_method": self.bound_method,
            "chunk_size": self.chunk_size_for(problem.network),
            "protected": [problem.network.input_names[i] for i in problem.protected],
            "split_rule": self.split_rule,
            "witness_sampling": self.witness_sampling,
        }

    def analysis(self) -> AnalysisSettings:
        from verifier.causal.analysis import AnalysisSettings  # partitioning only

        return AnalysisSettings(self.min_edge, self.max_unstable, self.bound_method,
                                self.milp_time_limit, self.witness_sampling, self.split_rule)


@dataclass
class _Rows:
    """Rows appended a batch at a time to one array, its capacity doubled when full (one
    array instead of a Python object per row)."""

    dtype: Any
    data: np.ndarray | None = None
    count: int = 0

    def extend(self, rows: np.ndarray) -> None:
        if self.data is None:
            self.data = np.empty((max(rows.shape[0], 16), *rows.shape[1:]), dtype=self.dtype)
        if self.count + rows.shape[0] > self.data.shape[0]:
            grown = np.empty((max(2 * self.data.shape[0], self.count + rows.shape[0]),
                              *self.data.shape[1:]), dtype=self.dtype)
            grown[:self.count] = self.data[:self.count]
            self.data = grown
        self.data[self.count:self.count + rows.shape[0]] = rows
        self.count += rows.shape[0]

    def view(self) -> np.ndarray:
        """The rows appended so far (a view: valid until the next :meth:`extend`; none
        appended yet: an empty array)."""
        return self.data[:self.count] if self.data is not None else np.zeros(0, self.dtype)


@dataclass
class _Ledger:
    """Final partitions with status, witness and *origin*: the index of the refined parent
    they descend from (−1 outside refinement); ``shares``/``count``: running sums of their
    uniform shares by status and their number (for the stopping rule, without restacking
    the whole ledger every round). A witness pair is kept only for the partitions that have
    one (most have none: two NaN rows each were half the ledger). ``refined``/
    ``refined_classes``: the witness pair ``(2, n)`` and its classes of each refined
    partition, by refinement index (the *origin* of its descendants, whose analysis reads
    the pair as its hint). ``masses``: the population masses of the first partitions, as a
    verdict check measured them (its next call and the certificate measure only the
    partitions added since)."""

    problem: FairnessProblem
    lower: list[np.ndarray] = field(default_factory=list)
    upper: list[np.ndarray] = field(default_factory=list)
    status: list[np.ndarray] = field(default_factory=list)
    witness_a: list[np.ndarray] = field(default_factory=list)
    witness_b: list[np.ndarray] = field(default_factory=list)
    witness_classes: list[np.ndarray] = field(default_factory=list)
    origin: list[np.ndarray] = field(default_factory=list)
    refined: _Rows = field(default_factory=lambda: _Rows(np.float64))
    refined_classes: _Rows = field(default_factory=lambda: _Rows(np.int64))
    shares: dict[int, float] = field(default_factory=dict)
    count: int = 0
    masses: PartitionMasses | None = None

    def add(self, lower, upper, status, wc, origin, wa=None, wb=None) -> None:
        """Add partitions ``lower``/``upper`` with their status, witness classes ``wc``
        (``−1`` where none), origin, and witness pairs ``wa``/``wb`` (rows read only where
        the classes are set: ``wc[:, 0] >= 0``; None when none is)."""
        classes = np.asarray(wc, dtype=np.int64).reshape(-1, 2)
        witnessed = classes[:, 0] >= 0
        self.lower.append(lower)
        self.upper.append(upper)
        self.status.append(np.asarray(status, dtype=np.int8))
        if witnessed.any():
            self.witness_a.append(wa[witnessed])
            self.witness_b.append(wb[witnessed])
        self.witness_classes.append(classes)
        self.origin.append(np.asarray(origin, dtype=np.int64).reshape(-1))
        _add_shares(self.shares, uniform_share(self.problem, lower, upper), self.status[-1])
        self.count += self.status[-1].size

    def arrays(self, n: int) -> tuple[np.ndarray, ...]:
        """``lower, upper, status, witness_classes, origin`` of every partition."""
        if not self.lower:
            empty = np.zeros((0, n))
            return (empty, empty, np.zeros(0, dtype=np.int8), np.zeros((0, 2), dtype=np.int64),
                    np.zeros(0, dtype=np.int64))
        return (np.vstack(self.lower), np.vstack(self.upper), np.concatenate(self.status),
                np.vstack(self.witness_classes), np.concatenate(self.origin))

    def witness_pairs(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(W, n)`` twice: the witness pairs of the partitions whose classes are set, in
        their order in :meth:`arrays`."""
        if not self.witness_a:
            return np.zeros((0, n)), np.zeros((0, n))
        return np.vstack(self.witness_a), np.vstack(self.witness_b)


def _ancestor_hints(ledger: _Ledger, origin: np.ndarray, n: int) -> np.ndarray:
    """``(B, 2, n)``: the witness pair of each partition's refined ancestor (NaN outside a
    refinement), which its analysis reads as a hint."""
    hints = np.full((origin.size, 2, n), np.nan)
    inside = origin >= 0
    if inside.any():
        hints[inside] = ledger.refined.view()[origin[inside]]
    return hints


def _run_round(executor: Executor, problem: FairnessProblem, settings: AnalysisSettings,
               lower: np.ndarray, upper: np.ndarray, hints: np.ndarray, refining: np.ndarray,
               bounds_only: np.ndarray, signs: np.ndarray, chunk: int, deadline: float
               ) -> tuple[list[tuple[np.ndarray, ChunkOutcome | None]], bool]:
    """Submit the partitions in chunks (none after the deadline, a stop request or the
    executor's loss), each with the kink signs its parent proved (``signs``, see
    :func:`~verifier.causal.analysis.analyse_chunk`), and wait for them until then; a chunk
    not back, or cancelled by the executor, yields ``None``. Also whether the executor was
    lost: it cancelled a chunk or can run no more (a Dask client that lost its scheduler,
    :func:`~verifier.executor.running`; no executor here cancels a task otherwise)."""
    from verifier.causal.analysis import analyse_chunk  # partitioning only

    futures = []
    for start in range(0, lower.shape[0], chunk):
        rows = np.arange(start, min(start + chunk, lower.shape[0]))
        if time.monotonic() >= deadline or stop_requested() or not running(executor):
            futures.append((rows, None))
            continue
        wall_deadline = time.time() + (deadline - time.monotonic())
        futures.append((rows, executor.submit(analyse_chunk, problem, settings, lower[rows],
                                              upper[rows], hints[rows], wall_deadline,
                                              refining[rows], bounds_only[rows],
                                              signs[rows])))
    wait_while_running([future for _, future in futures if future is not None],
                       deadline - time.monotonic(), executor)
    results: list[tuple[np.ndarray, ChunkOutcome | None]] = []
    lost = not running(executor)
    for rows, future in futures:
        if future is None or not future.done():
            if future is not None:
                future.cancel()
            results.append((rows, None))
            continue
        try:
            results.append((rows, future.result()))
        except CancelledError:
            lost = True
            results.append((rows, None))
    return results, lost


MEASURE_SAMPLE = 512
MEASURE_MIN_SAMPLE = 64
"""The population measure is timed on up to :data:`MEASURE_SAMPLE` pending partitions, at
least :data:`MEASURE_MIN_SAMPLE` (the pending ones repeated when fewer), beside the query's
box alone (:class:`_MeasureReserve`): on a 72-input model the fixed cost of a call is
15–20 ms and a partition 0.12–0.27 ms, so a few partitions say nothing of the second."""
MEASURE_MARGIN = 1.25
"""The reserve is the timed cost times this: the certificate's measure of 32,963 partitions
took 273 µs each against 233 µs timed on the pending ones after the last round (load 3)."""
RETIME_SHARE = 0.25
"""Once timed on :data:`MEASURE_SAMPLE` partitions, the measure is timed again after a round
only while the reserve is at least this share of the time left: where it decides when the
rounds stop (a timing costs about 0.1 s on a 72-input model, 1.5 s over a 30-s run if done
after every round)."""


@dataclass
class _MeasureReserve:
    """The wall time the certificate's population measure (:func:`population_bounds` over
    every partition, after the last round) will take, so that the rounds stop early enough
    for the certificate to be out by the deadline: a call's fixed cost (the query's box
    alone) plus a cost per partition, timed on up to :data:`MEASURE_SAMPLE` of the pending
    partitions (their shapes, and so their cost under a Bayesian network, change as they
    shrink). Measured on a 72-input network under a fitted 21-node Bayesian network:
    150,049 partitions took the measure 37 s past a 90-s budget (docs/decisions.md,
    fifteenth red-team); the fixed cost, divided among the two partitions of the first
    round, made the reserve 21.7 ms a partition (0.2–0.3 ms over thousands) and stopped a
    10-s run after 0.6 s (docs/decisions.md, causal fairness keeps its budget)."""

    problem: FairnessProblem
    population: Any
    fixed: float = 0.0
    per_partition: float = 0.0
    sampled: int = 0

    def calibrate(self, lower: np.ndarray, upper: np.ndarray, rows: int,
                  time_left: float) -> None:
        """Time the measure on :data:`MEASURE_SAMPLE` of ``lower``/``upper`` spread evenly
        over them (they come largest first) if
        more of them than last time can be sampled or the reserve for ``rows`` partitions is
        at least :data:`RETIME_SHARE` of ``time_left``, and (once timed) the timing takes at
        most a tenth of ``time_left``. A cost per partition lost in the noise of the fixed
        cost is taken as the whole time over the sample (too large, never too small)."""
        if self.population is None or lower.shape[0] == 0:
            return
        spread = np.linspace(0, lower.shape[0] - 1, min(lower.shape[0], MEASURE_SAMPLE))
        sample = np.resize(spread.astype(np.int64),
                           max(min(lower.shape[0], MEASURE_SAMPLE), MEASURE_MIN_SAMPLE))
        wanted = sample.size > self.sampled or self.seconds(rows) >= RETIME_SHARE * time_left
        if not wanted or (self.sampled and self.seconds(sample.size) > 0.1 * time_left):
            return
        self.fixed = self._timed(lower[:0], upper[:0])
        whole = self._timed(lower[sample], upper[sample])
        self.per_partition = (whole - self.fixed if whole > self.fixed else whole) / sample.size
        self.sampled = sample.size

    def _timed(self, lower: np.ndarray, upper: np.ndarray) -> float:
        query_lo, query_hi = initial_partition(self.problem)
        started = time.monotonic()
        population_bounds(self.problem, self.population, lower, upper,
                          np.full(lower.shape[0], REFINING, dtype=np.int8), query_lo[0],
                          query_hi[0])
        return time.monotonic() - started

    def seconds(self, rows: int) -> float:
        """The wall time to keep for the measure over ``rows`` partitions (with
        :data:`MEASURE_MARGIN`)."""
        return MEASURE_MARGIN * (self.fixed + self.per_partition * rows)


def _measured_rows(ledger: _Ledger, pending: np.ndarray, refinable: list) -> int:
    """The partitions the certificate measures if the run stops before the next round:
    the ledger's, the pending ones and the refinable ones' two children each (they join the
    pending ones before the round). A round adds at most one for each partition it
    analyses (two children, or a witnessed partition whose children join later). The
    ledger's partitions whose masses a verdict check kept are not measured again."""
    kept = 0 if ledger.masses is None else ledger.masses.low.size
    return ledger.count - kept + pending.shape[0] + 2 * len(refinable)


def certify_causal_fairness(
    problem: FairnessProblem,
    settings: CausalSettings | None = None,
    executor: Executor | None = None,
    population=None,
) -> Certificate:
    """Certify causal fairness of ``problem.network`` on the query (see the module docstring).
    A finite query within ``settings.enumeration_work`` is decided by exact enumeration
    instead (:mod:`verifier.causal.enumeration`; 0 turns it off), without loading torch.

    The certificate's verdict is ``fair`` only when every partition is proven fair, ``biased``
    when some witness (re-evaluated by the network) exists, ``unknown`` otherwise. Bounds:
    ``biased_share`` (uniform on the query) and, with a population model,
    ``biased_share_population`` (conditional on the query; measured until the deadline:
    ``details["population_measured_partitions"]`` says how many partitions were when not
    all, the others counted soundly, see :func:`population_bounds`). Cost ``coverage_done_s``: the
    seconds after which every partition outside a refinement was decided (present once it
    happened; the rest of the budget narrowed the biased share). A run whose executor can
    run no more tasks (a Dask client that lost its scheduler) ends after that round with the
    shares reached, ``details["stopped_by"] == "executor_lost"``. A stop requested meanwhile
    (:mod:`verifier.stop_request`: a command's first SIGINT or SIGTERM) ends the run as its
    deadline would, at once: no chunk is submitted after it, the round's chunks not back are
    left unfinished (their partitions undecided, so the shares stay sound) and
    ``details["stopped_by"] == "interrupted"``; an in-process chunk stops at its next check.
    """
    settings = settings or CausalSettings()
    started = time.monotonic()
    enumerated = enumerated_certificate(problem, settings, population, started)
    if enumerated is not None:
        return enumerated
    executor = executor or InProcessExecutor()
    deadline = started + settings.timeout_s
    analysis = settings.analysis()
    chunk_size = settings.chunk_size_for(problem.network)
    n = problem.inputs
    ledger = _Ledger(problem)
    pending_lo, pending_hi = initial_partition(problem)
    pending_origin = np.full(1, -1, dtype=np.int64)
    pending_signs = _no_signs(problem, 1)
    kinks, slope = _kink_count(problem), _order_slope(problem)
    # witnessed partitions awaiting refinement: children lo/hi, box, origin, signs
    refinable: list[tuple[np.ndarray, ...]] = []
    refined = 0
    analysed = milps = rounds = 0
    proofs = ProofTally()
    exact_yield = _ExactYield()
    presolve = _PresolveChoice()
    covered_at = None
    executor_lost = False
    per_partition = 0.0
    interrupted = False
    reserve = _MeasureReserve(problem, population)
    while True:
        interrupted = stop_requested()
        # every pending partition ends as at most two rows, a refinable one as its two children
        stop_at = deadline - reserve.seconds(_measured_rows(ledger, pending_lo, refinable))
        if interrupted or time.monotonic() >= stop_at:
            break
        if not (pending_origin < 0).any():
            # coverage done: stop once the interval is narrow enough
            if covered_at is None:
                covered_at = time.monotonic() - started
            bounds = _current_bounds(problem, ledger, refinable, pending_lo, pending_hi)
            # judging the population share measures every partition: only if it fits
            judging = reserve.seconds(_measured_rows(ledger, pending_lo, refinable)) if (
                settings.judged_measure == "population") else 0.0
            if (bounds.biased[1] - bounds.biased[0] <= settings.target_width
                    and time.monotonic() + judging <= stop_at
                    and _judged(problem, settings, bounds.biased, population, ledger,
                                refinable, pending_lo, pending_hi, stop_at)):
                break
        if refinable:
            pending_lo = np.vstack([pending_lo, *[r[0] for r in refinable]])
            pending_hi = np.vstack([pending_hi, *[r[1] for r in refinable]])
            pending_origin = np.concatenate([
                pending_origin, np.repeat(np.arange(refined, refined + len(refinable)), 2)
            ])
            pending_signs = np.vstack([pending_signs, *[r[4] for r in refinable]])
            refined += len(refinable)
            refinable = []
        if pending_lo.shape[0] == 0:
            break
        order = np.argsort(-_priority(problem, pending_lo, pending_hi, pending_signs, kinks,
                                      slope), kind="stable")
        pending_lo, pending_hi = pending_lo[order], pending_hi[order]
        pending_origin = pending_origin[order]
        pending_signs = pending_signs[order]
        take = min(pending_lo.shape[0], ROUND_CHUNKS * chunk_size)
        if per_partition > 0.0:
            # each partition analysed adds at most one to the certificate's measure
            fits = ROUND_TIME_SHARE * (stop_at - time.monotonic()) / (
                per_partition + MEASURE_MARGIN * reserve.per_partition)
            take = max(1, min(take, int(fits)))
        later = (pending_lo[take:], pending_hi[take:], pending_origin[take:], pending_signs[take:])
        pending_lo, pending_hi = pending_lo[:take], pending_hi[:take]
        pending_origin = pending_origin[:take]
        pending_signs = pending_signs[:take]
        refining = pending_origin >= 0
        round_started = time.monotonic()
        results, executor_lost = _run_round(executor, problem,
                             replace(analysis, presolve_first=presolve.first()),
                             pending_lo, pending_hi, _ancestor_hints(ledger, pending_origin, n),
                             refining, exact_yield.bounds_only(refining), pending_signs,
                             chunk_size, stop_at)
        rounds += 1
        per_partition = (time.monotonic() - round_started) / take
        next_lo, next_hi, next_origin, next_signs = [later[0]], [later[1]], [later[2]], [later[3]]
        for rows, outcome in results:
            lo, hi, origin = pending_lo[rows], pending_hi[rows], pending_origin[rows]
            if outcome is None:
                ledger.add(lo, hi, _unfinished(origin), np.full((rows.size, 2), -1), origin)
                continue
            analysed += rows.size
            milps += outcome.milps
            proofs.add(outcome.proofs)
            exact_yield.record(outcome, origin >= 0)
            presolve.record(outcome)
            cut = outcome.status == UNFINISHED
            if cut.any():
                ledger.add(lo[cut], hi[cut], _unfinished(origin[cut]),
                           np.full((int(cut.sum()), 2), -1), origin[cut])
            final = np.isin(outcome.status, (FAIR, BIASED_EVERYWHERE, EXCLUDED)) | (
                (outcome.status == BIASED_WITNESS) & ~outcome.has_children
            )
            ledger.add(lo[final], hi[final], outcome.status[final],
                       outcome.witness_classes[final], origin[final], outcome.witness_a[final],
                       outcome.witness_b[final])
            witnessed = (outcome.status == BIASED_WITNESS) & outcome.has_children
            ledger.refined.extend(outcome.children_hints[witnessed])
            ledger.refined_classes.extend(outcome.witness_classes[witnessed])
            for r in np.flatnonzero(witnessed):
                refinable.append((outcome.children_lower[r], outcome.children_upper[r],
                                  np.stack([lo[r], hi[r]]), int(origin[r]),
                                  np.stack([outcome.children_signs[r]] * 2)))
            split = ~final & ~witnessed & ~cut
            next_lo.append(outcome.children_lower[split].reshape(-1, n))
            next_hi.append(outcome.children_upper[split].reshape(-1, n))
            next_origin.append(np.repeat(origin[split], 2))
            next_signs.append(np.repeat(outcome.children_signs[split], 2, axis=0))
        pending_lo = np.vstack(next_lo)
        pending_hi = np.vstack(next_hi)
        pending_origin = np.concatenate(next_origin)
        pending_signs = np.vstack(next_signs)
        if executor_lost:
            break
        reserve.calibrate(pending_lo, pending_hi,
                          _measured_rows(ledger, pending_lo, refinable),
                          deadline - time.monotonic())
    if pending_lo.shape[0]:
        ledger.add(pending_lo, pending_hi, _unfinished(pending_origin),
                   np.full((pending_lo.shape[0], 2), -1), pending_origin)
    for _, _, box, origin, _ in refinable:
        ledger.add(box[:1], box[1:], [BIASED_WITNESS], [[-1, -1]], [origin])
    stopped_by = "executor_lost" if executor_lost else "interrupted" if interrupted else None
    return _certificate(problem, settings, ledger, population, analysed, milps, proofs, rounds,
                        time.monotonic() - started, covered_at, stopped_by, deadline)


PRIORITY_SLOPE = 4.0
"""How strongly a pending partition's order favours those whose parent proved most kink
signs (:func:`_priority`), on networks whose saturated boxes CROWN gives up
(:func:`_order_slope`). Measured on Adult RQ4 1280 C at 40 CPU s: slope 2 56.25 %, 4
58.50 %, 8 54.61 % certified fair, largest first 53.72 % (docs/decisions.md, issue 35)."""


def _priority(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
              signs: np.ndarray, kinks: int, slope: float) -> np.ndarray:
    """``(B,)`` the order of pending partitions, highest first: the share of the query times
    ``exp(−slope · u)``, ``u`` the fraction of the network's ``kinks`` kink neurons whose sign
    the partition's parent left unknown on the first protected cell (``signs`` ``(B, V, P)``
    packed; 1 for the root). Slope 0 is largest first. On a deep network a partition whose
    parent was nearly decided is cheap to bound (its signs spare most back-substitution) and
    often proven (1280 C: 0.79 of those with under 64 unknown, 0.02 of those with 1,200 or
    more); one whose parent saturated is usually split again. Only the order changes: every
    pending partition is still analysed once its turn comes, and the tiling does not depend
    on it."""
    share = uniform_share(problem, lower, upper)
    if kinks == 0 or slope == 0.0:
        return share
    known = np.unpackbits(signs[:, 0, :], axis=1).sum(axis=1)
    return share * np.exp(-slope * (1.0 - known / kinks))


def _order_slope(problem: FairnessProblem) -> float:
    """:data:`PRIORITY_SLOPE` where CROWN gives saturated boxes up
    (:func:`~verifier.causal.analysis.gives_up_saturated`), else 0 (largest first). The
    relation between unknown signs and proofs, and the gain, were measured there (Adult RQ4
    1280). On FairQuant's GC-1 (one hidden layer) the discount showed no gain (age 41.89 %
    with it against 42.45 % largest first, and 41.52 % in a repeat of largest first: within
    the spread), so networks without saturated boxes keep their path unchanged."""
    from verifier.causal.analysis import gives_up_saturated  # partitioning only

    return PRIORITY_SLOPE if gives_up_saturated(problem) else 0.0


def _kink_count(problem: FairnessProblem) -> int:
    """The network's kink neurons (the width of the unpacked signs)."""
    from verifier.bounds import kink_neurons  # partitioning only

    return kink_neurons(problem.network)


def _no_signs(problem: FairnessProblem, count: int) -> np.ndarray:
    """``(count, V, P)`` packed kink signs that say nothing (see
    :func:`~verifier.bounds.pack_signs`), for partitions with no parent."""
    from verifier.bounds import kink_neurons, pack_signs  # partitioning only

    cells = problem.protected_cells.shape[0]
    width = pack_signs(np.zeros((1, kink_neurons(problem.network)), dtype=np.int8)).shape[1]
    return np.zeros((count, cells, width), dtype=np.uint8)


def _current_bounds(problem, ledger: _Ledger, refinable, pending_lo: np.ndarray,
                    pending_hi: np.ndarray):
    """The share bounds if the run stopped now: the ledger, the witnessed partitions awaiting
    refinement and the refinement's pending partitions (which end as refining if left)."""
    shares = dict(ledger.shares)
    if refinable:
        lo = np.vstack([r[2][:1] for r in refinable])
        hi = np.vstack([r[2][1:] for r in refinable])
        _add_shares(shares, uniform_share(problem, lo, hi),
                    np.full(len(refinable), BIASED_WITNESS, dtype=np.int8))
    _add_shares(shares, uniform_share(problem, pending_lo, pending_hi),
                np.full(pending_lo.shape[0], REFINING, dtype=np.int8))
    count = ledger.count + len(refinable) + pending_lo.shape[0]
    return bounds_from_sums(
        problem, shares.get(FAIR, 0.0), shares.get(BIASED_EVERYWHERE, 0.0),
        sum(value for code, value in shares.items() if code != FAIR),
        shares.get(EXCLUDED, 0.0) + shares.get(UNRESOLVED, 0.0), count,
    )


def _judged(problem: FairnessProblem, settings: CausalSettings, uniform: tuple[float, float],
            population, ledger: _Ledger, refinable, pending_lo: np.ndarray,
            pending_hi: np.ndarray, deadline: float) -> bool:
    """Whether the verdict is decided if the run stopped now: always without a threshold,
    else when the judged share's interval (``uniform``, or the population share of the
    ledger, the witnessed partitions awaiting refinement and the refinement's pending ones,
    as :func:`_certificate` would compute it) lies wholly below ``judged_below`` or at or
    above it. A population share whose measure ``deadline`` cut decides nothing."""
    if settings.judged_below is None:
        return True
    low, high = uniform
    if settings.judged_measure == "population" and population is not None:
        n = problem.inputs
        lo, hi, status, *_ = ledger.arrays(n)
        boxes = [r[2] for r in refinable]
        lo = np.vstack([lo, *[box[:1] for box in boxes], pending_lo])
        hi = np.vstack([hi, *[box[1:] for box in boxes], pending_hi])
        status = np.concatenate([status, np.full(len(boxes), BIASED_WITNESS, dtype=np.int8),
                                 np.full(pending_lo.shape[0], REFINING, dtype=np.int8)])
        query_lo, query_hi = initial_partition(problem)
        share = population_bounds(problem, population, lo, hi, status, query_lo[0],
                                  query_hi[0], deadline, known=ledger.masses)
        ledger.masses = share.masses.first(ledger.count)
        if share.measured < status.size:
            return False
        low, high = share.share
    return high < settings.judged_below or low >= settings.judged_below


def _add_shares(shares: dict[int, float], weight: np.ndarray, status: np.ndarray) -> None:
    """Add each partition's share ``weight`` to the running sum of its ``status``."""
    for code in np.unique(status):
        shares[int(code)] = shares.get(int(code), 0.0) + float(weight[status == code].sum())


def _certificate(problem: FairnessProblem, settings: CausalSettings, ledger: _Ledger,
                 population, analysed: int, milps: int, proofs: ProofTally, rounds: int,
                 elapsed: float, covered_at: float | None, stopped_by: str | None,
                 deadline: float) -> Certificate:
    n = problem.inputs
    lo, hi, status, wc, _ = ledger.arrays(n)
    pairs_a, pairs_b = ledger.witness_pairs(n)
    pair_of = np.cumsum(wc[:, 0] >= 0) - 1
    excluded_mask = np.isin(status, (EXCLUDED, UNRESOLVED))
    shares = uniform_bounds(problem, lo, hi, status, excluded_mask)
    weight = uniform_share(problem, lo, hi)
    witness_rows = np.flatnonzero(wc[:, 0] >= 0)
    witness_count = witness_rows.size + ledger.refined.count
    shown = witness_rows[: settings.max_witnesses]
    witnesses = [witness_record(pairs_a[pair_of[i]], pairs_b[pair_of[i]],
                                (int(wc[i, 0]), int(wc[i, 1]))) for i in shown]
    refined = range(min(ledger.refined.count, settings.max_witnesses - len(witnesses)))
    witnesses += [witness_record(ledger.refined.view()[k, 0], ledger.refined.view()[k, 1],
                                 tuple(ledger.refined_classes.view()[k])) for k in refined]
    biased_rows = np.flatnonzero(np.isin(status, (BIASED_EVERYWHERE, BIASED_WITNESS)))
    biased_rows = biased_rows[np.argsort(-weight[biased_rows], kind="stable")]
    regions = [
        {
            "kind": "biased_everywhere" if status[i] == BIASED_EVERYWHERE else "contains_bias",
            "share": float(weight[i]),
            **names_box(problem, lo[i], hi[i]),
            **({"witness": witness_record(pairs_a[pair_of[i]], pairs_b[pair_of[i]],
                                          (int(wc[i, 0]), int(wc[i, 1])))}
               if wc[i, 0] >= 0 else {}),
        }
        for i in biased_rows[: settings.max_regions]
    ]
    if witness_count:
        verdict = "biased"
    elif status.size and (status == FAIR).all():
        verdict = "fair"
    else:
        verdict = "unknown"
    bounds = {"biased_share": shares.biased}
    population_details: dict[str, Any] = {}
    if population is not None:
        query_lo, query_hi = initial_partition(problem)
        population_share = population_bounds(
            problem, population, lo, hi, status, query_lo[0], query_hi[0], deadline,
            known=ledger.masses,
        )
        bounds["biased_share_population"] = population_share.share
        population_details = {"query_mass_population": list(population_share.query_mass)}
        if population_share.measured < status.size:
            population_details["population_measured_partitions"] = population_share.measured
    counts = {name: int((status == code).sum()) for code, name in (
        (FAIR, "fair"), (BIASED_EVERYWHERE, "biased_everywhere"),
        (BIASED_WITNESS, "biased_witness"), (EXCLUDED, "excluded"), (UNRESOLVED, "unresolved"),
        (REFINING, "refining"))}
    witnessed = float(weight[status == BIASED_WITNESS].sum())
    refining = float(weight[status == REFINING].sum())
    return Certificate(
        audit="causal-fairness",
        verdict=verdict,
        bounds=bounds,
        details={
            "certified_shares": certified_shares(shares, witnessed + refining),
            "fair_fraction": shares.fair,
            "excluded_fraction": shares.excluded,
            "biased_everywhere_fraction": shares.biased[0],
            "witnessed_fraction": witnessed,
            "refining_fraction": refining,
            "query_fraction": problem.query_fraction(),
            **population_details,
            "partition_counts": counts,
            "regions": regions,
            "witnesses": witnesses,
            "witness_count": witness_count,
            **({"stopped_by": stopped_by} if stopped_by is not None else {}),
        },
        settings=settings.record(problem),
        cost={"elapsed_s": elapsed, "partitions": float(len(status)),
              "analysed_partitions": float(analysed), "milps": float(milps),
              **proofs.as_cost(), "rounds": float(rounds),
              **({"coverage_done_s": covered_at} if covered_at is not None else {})},
        algorithm="input partitioning with CROWN screening and a two-copy MILP (HiGHS)",
    )
