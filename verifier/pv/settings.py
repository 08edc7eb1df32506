"""The knobs of PV's branch and bound."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from verifier.bounds import METHODS
from verifier.errors import CertgateInputError
from verifier.executor import default_workers
from verifier.pv.pace import CREDIT_COST_SHARE, CROWN_COST_SHARE

SplitRule = Literal[
    "smear", "smear-longest-edge", "babsb", "babsb-longest-edge", "longest-edge"
]
Selection = Literal["directed", "mass"]
SELECTIONS: tuple[str, ...] = ("directed", "mass")
SPLIT_RULES: tuple[str, ...] = (
    "smear", "smear-longest-edge", "babsb", "babsb-longest-edge", "longest-edge"
)
IN_PROCESS_BATCH = 1024
"""Boxes refined per round in-process, unless ``batch_size`` says otherwise."""
BATCH_PER_WORKER = 2048
"""The most boxes a round refines for each worker of a process pool or Dask, unless
``batch_size`` says otherwise (docs/decisions.md, PV: on a pool a round's fixed costs —
the caller's bookkeeping, the tasks — are amortised over larger batches); see
:meth:`PVSettings.round_size`."""
MIN_BATCH_PER_WORKER = 128
"""The fewest boxes a pool's round refines for each worker (when the pool holds them): its
children are cut into one task per worker (:func:`verifier.pv.evaluation.task_parts`)."""
POOL_ROUND_SHARE = 16
"""On a process pool or Dask a round refines one in this many open boxes, between
:data:`MIN_BATCH_PER_WORKER` and :data:`BATCH_PER_WORKER` per worker (docs/decisions.md,
2026-11-28, "A pool's round is a share of its open boxes"): a round as large as the pool
refines every open box and chooses none (PV's Adult 103-10-2 on 2 workers: decided in
6–11 s of PV with this rule, in 52–60 s or not at all with rounds of 4,096)."""

MIN_BOXES_PER_TASK = 4096
"""On a process pool or Dask, a round is cut into more tasks than workers only where each
holds on average at least this many boxes (docs/decisions.md, 2026-11-29, "A pool's tasks
hold at least 2,048 boxes"): an evaluation call costs ~10–13 ms besides ~0.1 ms per box on
Adult-13 1×16, and tasks of ~400 boxes (the earlier floor of 256 with falling sizes) spent
a sixth of the workers' CPU on it. 4,096 since 2026-11-30 ("PV on a pool near the
threshold"): each task's hand-off (its corners in, its arrays out, through the caller's
pool threads) left a worker waiting a median 20–30 ms, and a late round of 8,192 children
in two equal tasks instead of four falling ones gave 7 % more boxes per CPU second on
Adult-13 1×16 in two pairs on 2 workers."""

OPEN_BOX_MEMORY_SHARE = 0.5
"""Share of the memory available when a run starts that its open boxes' records may fill by
default (see :meth:`PVSettings.open_box_limit`): the pool grows with every round that
decides fewer boxes than it splits (Adult-13 2×64 on 2 workers: ~5 GB after 10 minutes),
so an hour-long run would otherwise be killed for memory and report nothing."""

DEEP_POOL_ROUNDS = 64
"""On a pool, a second round goes in flight once the open boxes fill this many of its
smallest rounds (docs/decisions.md, PV: a round chosen without the last one's children cost
Adult-13 1×16 44 % more boxes while its pool held 2–20 rounds; it paid late on 2×64, with
up to ~250). With rounds of a share of the pool (:data:`POOL_ROUND_SHARE`) a second round
hides the caller's work between rounds, which small rounds would otherwise leave the
workers waiting for (docs/decisions.md, 2026-11-28)."""


@dataclass
class PVSettings:
    """Knobs of the branch and bound; the defaults follow paper 003's configuration.

    ``max_open_boxes``: a run stops with the bounds reached (verdict ``unknown`` unless
    proven) once this many boxes are open (None: :meth:`open_box_limit`'s share of the
    memory available at the start).
    ``enumerate_points``: a box with at most this many discrete points in the columns that
    matter is finished by evaluating every point (0: never). ``linear_credit``: credit the
    part of an open box that CROWN's linear bounds decide (:mod:`verifier.pv.credit`; needs a
    population that bounds such parts), on as many of each round's heaviest boxes as keep its
    CPU within ``credit_cost_share`` of the bounding's (1: on every box; see
    :class:`verifier.pv.pace.CostPace`). ``crown_cost_share``: with a CROWN ``method`` and a last
    hidden layer fed by a far wider one (:func:`verifier.pv.atoms.wide_fed_last_layer`),
    CROWN tightens that layer's bounds on as many of each round's boxes — those whose
    parents' bounds come closest to deciding a wanted side — as keep that tightening's CPU
    within this share of the evaluation's; the others are bounded by CROWN over IBP's
    bounds of that layer (1: tightening on every box; see
    :meth:`verifier.pv.atoms.AtomBounds.bounds_and_drive`). ``selection``: which open boxes
    are refined first —
    ``mass`` the heaviest uncredited ones (paper 003's SelectProb), ``directed`` mostly those
    whose mass moves the end of the enclosure that must cross the threshold
    (:mod:`verifier.pv.direction`; the same as ``mass`` without a threshold).
    ``executor``/``workers``: where
    the bounding of each batch runs (``local``, ``process``, ``dask`` or ``dask=ADDRESS``, see
    :mod:`verifier.executor`), in one task per worker, or more where each holds on average
    at least ``min_boxes_per_task`` boxes (:func:`verifier.pv.evaluation.task_parts`; the
    default, :data:`MIN_BOXES_PER_TASK`, amortises a task's fixed cost).
    ``batch_size``: boxes refined per round (None: :data:`IN_PROCESS_BATCH`, or on a pool a
    share of the open boxes, see :meth:`round_size`). ``rounds_in_flight``: rounds being
    bounded at once — the
    next round is chosen and split while the workers bound the last one (None: 1 in-process,
    up to 2 on a pool, see :meth:`rounds_ahead`)."""

    batch_size: int | None = None
    method: str = "crown"
    split: SplitRule = "smear-longest-edge"
    longest_edge_every: int = 10
    timeout_s: float | None = 60.0
    precision: float | None = None
    max_boxes: int | None = None
    max_open_boxes: int | None = None
    max_candidate_dims: int = 24
    enumerate_points: int = 0
    max_points_per_batch: int = 1 << 16
    linear_credit: bool = True
    credit_cost_share: float = CREDIT_COST_SHARE
    crown_cost_share: float = CROWN_COST_SHARE
    selection: Selection = "directed"
    executor: str = "local"
    workers: int | None = None
    min_boxes_per_task: int = MIN_BOXES_PER_TASK
    rounds_in_flight: int | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise CertgateInputError(f"unknown bound method {self.method!r}")
        if self.split not in SPLIT_RULES:
            raise CertgateInputError(
                f"unknown split rule {self.split!r}; use one of {', '.join(SPLIT_RULES)}"
            )
        if self.selection not in SELECTIONS:
            raise CertgateInputError(
                f"unknown selection {self.selection!r}; use one of {', '.join(SELECTIONS)}"
            )
        if self.batch_size is not None and self.batch_size < 1:
            raise CertgateInputError("batch_size must be positive")
        if self.precision is not None and self.precision <= 0:
            raise CertgateInputError("precision must be positive")
        if self.executor.partition("=")[0] not in ("local", "process", "dask"):
            raise CertgateInputError(
                f"unknown executor {self.executor!r}; use local, process, dask or dask=ADDRESS"
            )
        if self.rounds_in_flight is not None and self.rounds_in_flight < 1:
            raise CertgateInputError("rounds_in_flight must be positive")
        if self.max_open_boxes is not None and self.max_open_boxes < 1:
            raise CertgateInputError("max_open_boxes must be positive")
        for name in ("credit_cost_share", "crown_cost_share"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise CertgateInputError(
                    f"{name} must lie in (0, 1], got {getattr(self, name)}")
        if self.workers is not None and self.workers < 1:
            raise CertgateInputError("workers must be positive")
        if self.enumerate_points < 0 or self.max_points_per_batch < 1:
            raise CertgateInputError(
                "enumerate_points must be >= 0 and max_points_per_batch positive"
            )

    def open_box_limit(self, bytes_per_box: int) -> int:
        """Open boxes (pooled or in flight) at which a run stops and reports the bounds
        reached: ``max_open_boxes``, or by default as many records of ``bytes_per_box``
        bytes as fill :data:`OPEN_BOX_MEMORY_SHARE` of the memory available now."""
        if self.max_open_boxes is not None:
            return self.max_open_boxes
        return max(1, int(OPEN_BOX_MEMORY_SHARE * available_memory() / max(bytes_per_box, 1)))

    def round_size(self, open_boxes: int) -> int:
        """Boxes refined per round when ``open_boxes`` are open (the engine takes at most
        the open boxes): ``batch_size`` if given, else :data:`IN_PROCESS_BATCH` in-process,
        and on a process pool or Dask one :data:`POOL_ROUND_SHARE`-th of the open boxes
        (rounded up) within :data:`MIN_BATCH_PER_WORKER` and :data:`BATCH_PER_WORKER` per
        worker. A function of the open boxes only, never of a time: how many boxes a round
        refines does not depend on the machine's speed unless the budget cuts the round
        (:class:`verifier.pv.pace.Pace`)."""
        if self.batch_size is not None:
            return self.batch_size
        if self.executor == "local":
            return IN_PROCESS_BATCH
        workers = self.workers or default_workers()
        share = -(-open_boxes // POOL_ROUND_SHARE)
        return min(BATCH_PER_WORKER * workers, max(MIN_BATCH_PER_WORKER * workers, share))

    def rounds_ahead(self, open_boxes: int) -> int:
        """Rounds being bounded at once: ``rounds_in_flight`` if given, else 1 in-process,
        and on a process pool or Dask 2 once ``open_boxes`` fill :data:`DEEP_POOL_ROUNDS`
        of the smallest rounds (``batch_size``, or :data:`MIN_BATCH_PER_WORKER` per
        worker; 1 before). Like :meth:`round_size`, a function of the open boxes only."""
        if self.rounds_in_flight is not None:
            return self.rounds_in_flight
        if self.executor == "local" or open_boxes < DEEP_POOL_ROUNDS * self.round_size(0):
            return 1
        return 2


def available_memory() -> int:
    """Bytes of memory available to new allocations without swapping: Linux's
    ``MemAvailable`` (free memory plus reclaimable caches), else half the physical memory."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
