"""Where a one-hidden-layer PV run's deciding-side credit is lost, and what one more split of
a heavy open box would recover: CROWN's line against a split on a hidden neuron's sign and
against a split on an input column, every mass exact on the box's lattice.

A measurement for issue 37's "splits on neurons" lead (docs/decisions.md, 2026-11-29,
"Splits on a hidden neuron's sign"), not a certificate: PV runs in this process (one torch
thread) on a cached Adult instance of :mod:`benchmarks.adult_instances` until it has spent
``--cpu`` CPU seconds; its open boxes are read from the pool; the boxes with the most
estimated open mass on the deciding side (``--side male``: the favourable mass of
privileged boxes, which moves the lower end of P(fav | male); ``female``: the unfavourable
mass of the other boxes, the upper end of P(fav | female)) and at most ``--points`` lattice
points are enumerated (:meth:`verifier.pv.splitting.Splitter.enumerate`) with their point
masses (the population's upper enclosure of each point). On a network ``W2·relu(W1·x + b1)
+ b2`` with the atom's logit difference ``y``, per box:

* *wanted*: the mass of the points on the deciding side (``y > 0`` for male, ``y < 0``
  for female);
* *line*: the mass CROWN's line proves there (the lower line of ``y`` for male, the upper
  for female, neuron bounds exact over the box, CROWN's slope choices), exactly on the
  points — the credit with no bins lost;
* *neuron split*: the best over the box's unstable neurons ``j`` of the mass proved on the
  two pieces ``z_j ≥ 0`` and ``z_j < 0`` by the line with ``j`` fixed active or inactive;
  with the box's neuron bounds, and with each piece's own (tightened) bounds;
* *neuron pair, Fréchet*: the same two lines on the whole box, the pieces' masses bounded
  by ``P(line_j > 0) − P(other piece)`` as a one-half-space excess bound would have to;
* *input split, engine*: the two children of the splitter's own choice, each with its own
  line; *input split, best*: the best of every candidate column under the splitter's cut
  rule (:meth:`~verifier.pv.splitting.Splitter.children`).

Usage (from the checkout root; the cached instance must exist, see
:mod:`benchmarks.adult_instances`)::

    python -m benchmarks.pv_line_gap --instance adult13-h16-s0-e5-4f34ee11d87e \
        --gamma 0.5935 --cpu 30 --side male --boxes 100
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.adult_instances import CACHE_DIR

RESULTS = ("wanted", "line", "neuron split", "neuron split, tightened", "neuron pair, Fréchet",
           "input split, engine", "input split, best")


class _Stop(Exception):
    """Ends the run at its CPU budget, from a progress report."""


@dataclass
class _Captured:
    """The engine of the run and its pool of open boxes."""

    engines: list[Any] = field(default_factory=list)
    pools: list[Any] = field(default_factory=list)


@contextlib.contextmanager
def _capturing() -> Iterator[_Captured]:
    """Records every PV engine built and every box pool it creates while the block runs."""
    import verifier.pv.engine as engine_module

    captured = _Captured()
    pool_class, initialise = engine_module.BoxPool, engine_module.ProbabilityBranchAndBound.__init__

    class RecordedPool(pool_class):
        def __init__(self) -> None:
            super().__init__()
            captured.pools.append(self)

    def recorded_init(self: Any, *args: Any, **kwargs: Any) -> None:
        initialise(self, *args, **kwargs)
        captured.engines.append(self)

    engine_module.BoxPool = RecordedPool
    engine_module.ProbabilityBranchAndBound.__init__ = recorded_init
    try:
        yield captured
    finally:
        engine_module.BoxPool = pool_class
        engine_module.ProbabilityBranchAndBound.__init__ = initialise


def run_to_cpu(stem: Path, gamma: float, cpu: float) -> tuple[Any, Any, Any]:
    """PV on the cached instance ``stem`` until ``cpu`` CPU seconds: (engine, open boxes,
    last progress report)."""
    import torch

    from verifier.audits.demographic_parity import demographic_parity_audit
    from verifier.convert import network_from_json
    from verifier.population import load_population
    from verifier.pv import PVSettings

    torch.set_num_threads(1)
    network = network_from_json(json.loads(Path(f"{stem}.network.json").read_text("utf-8")))
    population = load_population(Path(f"{stem}.population.json"))
    started = time.process_time()
    reports = []

    def record(report: Any) -> None:
        reports.append(report)
        if time.process_time() - started >= cpu:
            raise _Stop

    with _capturing() as captured, contextlib.suppress(_Stop):
        demographic_parity_audit(network, population, protected="sex", privileged=1.0,
                                 favorable_class=1, gamma=gamma, progress=record,
                                 settings=PVSettings(timeout_s=None))
    pool = captured.pools[-1]
    return (captured.engines[-1], pool.view(np.flatnonzero(pool.alive[: pool.used])),
            reports[-1])


class _Lines:
    """CROWN's line of ``sign·y`` (``y`` the atom's logit difference) at given points of a
    box with given neuron bounds, optionally with one neuron's phase fixed."""

    def __init__(self, network: Any, row: np.ndarray, sign: float) -> None:
        first, last = network.layers
        self.weight, self.bias = first.weight, first.bias
        self.out = sign * (row @ last.weight)
        self.constant = sign * float(row @ last.bias)

    def pre(self, points: np.ndarray) -> np.ndarray:
        return points @ self.weight.T + self.bias

    def value(self, pre: np.ndarray) -> np.ndarray:
        return np.maximum(pre, 0.0) @ self.out + self.constant

    def line(self, pre: np.ndarray, low: np.ndarray, high: np.ndarray,
             fixed: int | None = None, active: bool = False) -> np.ndarray:
        result = np.full(pre.shape[0], self.constant)
        for k, w in enumerate(self.out):
            if k == fixed:
                result += w * pre[:, k] if active else 0.0
            elif low[k] >= 0.0:
                result += w * pre[:, k]
            elif high[k] <= 0.0:
                continue
            elif w > 0.0:
                result += w * pre[:, k] if high[k] >= -low[k] else 0.0
            else:
                result += w * high[k] / (high[k] - low[k]) * (pre[:, k] - low[k])
        return result


def _proven(lines: _Lines, pre: np.ndarray, mass: np.ndarray, fixed: int | None = None,
            active: bool = False, bounds: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    if mass.size == 0:
        return 0.0
    low, high = bounds if bounds is not None else (pre.min(axis=0), pre.max(axis=0))
    return float(mass[lines.line(pre, low, high, fixed, active) > 0.0].sum())


def box_gap(engine: Any, boxes: Any, row: int, lines: _Lines, cap: int
            ) -> dict[str, float] | None:
    """The :data:`RESULTS` of one open box (None if it has more than ``cap`` points or
    none of positive mass)."""
    splitter = engine.splitter
    box_lo, box_hi = boxes.lo[row:row + 1], boxes.hi[row:row + 1]
    if splitter.point_counts(box_lo, box_hi)[0] > cap:
        return None
    points, _, _ = splitter.enumerate(box_lo, box_hi)
    mass = engine.masses(points, points)[1]
    if mass.sum() <= 0.0:
        return None
    pre = lines.pre(points)
    low, high = pre.min(axis=0), pre.max(axis=0)
    whole = (low, high)
    result = dict.fromkeys(RESULTS, 0.0)
    result["wanted"] = float(mass[lines.value(pre) > 0.0].sum())
    line = _proven(lines, pre, mass, bounds=whole)
    result["line"] = line
    split = tightened = pair = line
    total = float(mass.sum())
    for j in np.flatnonzero((low < 0.0) & (high > 0.0)):
        on = pre[:, j] >= 0.0
        split = max(split, _proven(lines, pre[on], mass[on], j, True, whole)
                    + _proven(lines, pre[~on], mass[~on], j, False, whole))
        tightened = max(tightened, _proven(lines, pre[on], mass[on], j, True)
                        + _proven(lines, pre[~on], mass[~on], j, False))
        share_on = float(mass[on].sum())
        pair = max(pair, max(0.0, _proven(lines, pre, mass, j, True, whole) - (total - share_on))
                   + max(0.0, _proven(lines, pre, mass, j, False, whole) - share_on))
    result["neuron split"], result["neuron split, tightened"] = split, tightened
    result["neuron pair, Fréchet"] = pair

    def children_proven(lo: np.ndarray, hi: np.ndarray) -> float:
        inside = ((points >= lo) & (points <= hi)).all(axis=1)
        return _proven(lines, pre[inside], mass[inside])

    chosen = boxes.select(np.array([row]))
    child_lo, child_hi = splitter.split(chosen)
    result["input split, engine"] = sum(children_proven(child_lo[k], child_hi[k])
                                        for k in range(child_lo.shape[0]))
    best = line
    guide = chosen.guide.astype(np.float64)
    for column in np.flatnonzero(splitter.candidates(box_lo, box_hi)[0]):
        left_lo, left_hi, right_lo, right_hi = splitter.children(
            box_lo, box_hi, np.array([column]), guide)
        best = max(best, children_proven(left_lo[0], left_hi[0])
                   + children_proven(right_lo[0], right_hi[0]))
    result["input split, best"] = best
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", default="adult13-h16-s0-e5-4f34ee11d87e")
    parser.add_argument("--cache", type=Path, default=CACHE_DIR)
    parser.add_argument("--gamma", type=float, default=0.5935)
    parser.add_argument("--cpu", type=float, default=30.0)
    parser.add_argument("--side", choices=("male", "female"), nargs="+",
                        default=["male", "female"])
    parser.add_argument("--boxes", type=int, default=100)
    parser.add_argument("--points", type=int, default=20_000)
    args = parser.parse_args(argv)
    engine, boxes, report = run_to_cpu(args.cache / args.instance, args.gamma, args.cpu)
    if len(engine.network.layers) != 2:
        raise SystemExit("the lines are written for one hidden layer")
    print(f"{args.instance} γ {args.gamma}: {report.boxes:,} boxes in {args.cpu:g} CPU s, "
          f"ratio [{report.value[0]:.4f}, {report.value[1]:.4f}], "
          f"{boxes.lo.shape[0]:,} open boxes")
    atom = int(np.flatnonzero(engine.atoms.reads_outputs)[0])
    row = engine.atoms.output_rows[atom]
    privileged = boxes.lo[:, 0] == 1.0
    for side in args.side:
        # events: 0 fav ∧ unprivileged, 1 unfav ∧ unprivileged, 2 fav ∧ privileged, …
        rows = np.flatnonzero(privileged if side == "male" else ~privileged)
        estimate = (boxes.open_true[rows, 2] if side == "male" else boxes.open_false[rows, 0])
        lines = _Lines(engine.network, row, 1.0 if side == "male" else -1.0)
        totals = dict.fromkeys(RESULTS, 0.0)
        counted = 0
        for candidate in rows[np.argsort(-estimate, kind="stable")]:
            found = box_gap(engine, boxes, int(candidate), lines, args.points)
            if found is None:
                continue
            for name in RESULTS:
                totals[name] += found[name]
            counted += 1
            if counted == args.boxes:
                break
        gap = totals["wanted"] - totals["line"]
        print(f"{side}: {counted} boxes, wanted mass {totals['wanted']:.4e}, line proves "
              f"{totals['line']:.4e} (gap {gap:.4e})")
        for name in RESULTS[2:]:
            share = (totals[name] - totals["line"]) / gap if gap > 0 else 0.0
            print(f"  {name}: {totals[name]:.4e}, {100 * share:.1f} % of the line's gap")
    return 0


if __name__ == "__main__":
    sys.exit(main())
