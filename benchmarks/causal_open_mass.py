"""Where the undecided mass of a causal certification sits, on the CPU clock.

Runs :func:`verifier.causal.certify_causal_fairness` in-process with one torch thread and
every engine clock on ``time.process_time`` (as ``benchmarks/libra_cpu_clock.py``), then takes
every partition of the certificate neither proven fair nor biased everywhere and reports,
weighted by its share of the query:

* what dense samples say (``--samples`` uniform points per partition, one-hot groups uniform
  over their allowed categories, each point at every protected cell): *bulk* (one class at
  every cell on every sample: provable by per-cell bounds once the box is small enough),
  *straddling* (the class varies but no sample is biased), *biased* (a sample is biased);
* the most unstable ReLUs over its cells by the partition's own CROWN bounds (no inherited
  signs), in bands; how many have every one-hot group at one category; their sizes.

A measurement, not a proof: the sample classes are float evaluations.

Usage: ``python benchmarks/causal_open_mass.py --network …/1280A-F.json --spec
…/census.json --query …/C.json --timeout 60``.
"""

from __future__ import annotations

import argparse
import time
import types
from pathlib import Path

import numpy as np
import torch

import verifier.causal.analysis as analysis
import verifier.causal.certify as certify
import verifier.causal.exact_check as exact_check
import verifier.causal.milp_certificate as milp_certificate
from verifier.causal import (
    CausalSettings,
    FairnessProblem,
    build_problem,
    certify_causal_fairness,
    load_libra_spec,
    load_query_box,
)
from verifier.causal.codes import BIASED_EVERYWHERE, FAIR
from verifier.causal.partition import uniform_share, with_protected
from verifier.convert import load_network

CPU_CLOCK = types.SimpleNamespace(monotonic=time.process_time, time=time.process_time)
BANDS = ((0, 64), (64, 256), (256, 1000), (1000, 1 << 30))
CHUNK = 256
"""Partitions bounded at once (CROWN on all of 1280 C's 7,612 open ones at once took 3.6 GB)."""


def _band(low: int, high: int) -> str:
    return f">= {low}" if high == BANDS[-1][1] else f"[{low}, {high})"


def sample_kinds(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray,
                 samples: int, rng: np.random.Generator) -> np.ndarray:
    """``(B,)`` ``bulk``, ``straddling`` or ``biased`` per partition, from ``samples`` points."""
    kinds = []
    cells = problem.protected_cells
    prot = list(problem.protected)
    for lo, hi in zip(lower, upper, strict=True):
        points = rng.uniform(lo, hi, size=(samples, lo.size))
        for group in problem.onehot_groups:
            columns = np.asarray(group)
            allowed = columns[hi[columns] > 0.5]
            points[:, columns] = 0.0
            points[np.arange(samples), rng.choice(allowed, size=samples)] = 1.0
        classes = []
        for cell in cells:
            at_cell = points.copy()
            at_cell[:, prot] = cell[0]
            classes.append(problem.network.classify(at_cell))
        stacked = np.stack(classes)
        if (stacked != stacked[:1]).any():
            kinds.append("biased")
        elif (stacked != stacked[0, 0]).any():
            kinds.append("straddling")
        else:
            kinds.append("bulk")
    return np.array(kinds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", type=Path, required=True)
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--query", type=Path)
    parser.add_argument("--timeout", type=float, default=60.0, help="CPU seconds")
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--lower", type=float, default=0.0, help="L")
    parser.add_argument("--upper", type=int, default=8, help="U")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for module in (certify, analysis, exact_check, milp_certificate):
        module.time = CPU_CLOCK  # type: ignore[attr-defined]
    problem = build_problem(load_network(args.network), **load_libra_spec(args.spec),
                            query=load_query_box(args.query) if args.query else None)
    captured: dict[str, tuple[np.ndarray, ...]] = {}
    arrays = certify._Ledger.arrays

    def keep(ledger: certify._Ledger, n: int) -> tuple[np.ndarray, ...]:
        captured["final"] = arrays(ledger, n)
        return captured["final"]

    certify._Ledger.arrays = keep  # type: ignore[method-assign]
    settings = CausalSettings(min_edge=args.lower, max_unstable=args.upper,
                              timeout_s=args.timeout, target_width=0.0)
    certificate = certify_causal_fairness(problem, settings)
    print(f"certified {certificate.details['certified_shares']}, "
          f"{int(certificate.cost['partitions'])} partitions")
    lower, upper, status = captured["final"][:3]
    open_rows = ~np.isin(status, (FAIR, BIASED_EVERYWHERE))
    lower, upper = lower[open_rows], upper[open_rows]
    share = uniform_share(problem, lower, upper) * 100.0
    kinds = sample_kinds(problem, lower, upper, args.samples, np.random.default_rng(0))
    unstable = np.concatenate([
        analysis.proven_classes(problem, *with_protected(
            problem, lower[start:start + CHUNK], upper[start:start + CHUNK],
            problem.protected_cells), "crown")[1].unstable_count()
        .reshape(-1, problem.cell_count).max(axis=1)
        for start in range(0, lower.shape[0], CHUNK)
    ] or [np.zeros(0, dtype=np.int64)])
    fixed = np.ones(lower.shape[0], dtype=bool)
    for group in problem.onehot_groups:
        fixed &= (upper[:, list(group)] > 0.5).sum(axis=1) == 1
    print(f"open {share.sum():.2f} % of the query in {lower.shape[0]} partitions; every group "
          f"at one category: {share[fixed].sum():.2f} %; largest {share.max(initial=0):.4f} %")
    for kind in ("bulk", "straddling", "biased"):
        rows = kinds == kind
        bands = ", ".join(
            f"{_band(low, high)} {share[rows & (unstable >= low) & (unstable < high)].sum():.2f} %"
            for low, high in BANDS)
        print(f"  {kind}: {share[rows].sum():.2f} % in {int(rows.sum())} partitions; unstable "
              f"ReLUs {bands}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
