"""What the MILP certificate costs: proving MILPs, certificate nodes and CPU per proof.

Runs the causal-fairness rows of ``benchmarks/libra.py`` (German, COMPAS) and
``benchmarks/fairquant.py`` (GC-1, compas-1) once each with the certifier's clocks read as
**process CPU time** (``time.time`` and ``time.monotonic`` replaced by
``time.process_time`` in this process, so the budget is CPU seconds whatever the machine's
load), and counts, by timing the exact check's steps in place: MILPs and their CPU, the
LP-relaxation proofs, and the MILP "infeasible" answers with the certificate's verdict, nodes
and CPU (:mod:`verifier.causal.milp_certificate`). Run it with ``PYTHONPATH`` at an older
checkout (no certificate) for the before row: the same rows at the same CPU budget.

Usage: ``python -m benchmarks.milp_certificate [--only TEXT] [--timeout S] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from benchmarks import fairquant, libra
from verifier.causal import exact_check

LIBRA_ROWS = [("german", "0.20-bias1/Gt/german/L=0"), ("german", "0.20-bias5/Gt/german/L=0"),
              ("compas", "0.20-bias1/Lt25_0.20-bias/race/L=0"),
              ("compas", "no-bias3/M_no-bias/age/L=0"),
              ("compas", "0.20-bias1/C_0.20-bias/priors/L=0")]
"""Libra instances (``benchmarks/libra.py``'s names; U = the largest published for L)."""
FAIRQUANT_ROWS = [("GC-1.nnet", 11), ("compas-1.nnet", 3)]
"""FairQuant networks and protected inputs (age, race)."""


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for dataset, name in LIBRA_ROWS:
        entry = next(e for e in libra.groups(dataset, libra.DATA) if e["name"] == name)
        rows.append({"name": f"{dataset} {name}", "kind": "libra", "entry": entry})
    for network, index in FAIRQUANT_ROWS:
        rows.append({"name": f"fairquant {network} [{index}]", "kind": "fairquant",
                     "network": network, "index": index})
    return rows


class _Clock:
    """CPU seconds and calls per timed step of the exact check."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.proofs: dict[str, int] = {"relaxation": 0, "certified": 0, "nodes": 0,
                                       "unproven": 0, "refused": 0}

    def timed(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.process_time() - started
                self.calls[name] = self.calls.get(name, 0) + 1
        return run

    def tally(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            outcome = function(*args, **kwargs)
            proofs = getattr(outcome, "proofs", None)
            if proofs is not None:
                for key in self.proofs:
                    self.proofs[key] += getattr(proofs, key)
            return outcome
        return run


def _instrument(clock: _Clock) -> None:
    """Time the exact check's steps in place (whatever the checkout has of them)."""
    for name in ("_solve", "relaxation_margin_bound", "_certificate"):
        if hasattr(exact_check, name):
            setattr(exact_check, name, clock.timed(name, getattr(exact_check, name)))
    exact_check.check_partition = clock.tally(
        clock.timed("check_partition", exact_check.check_partition))


def run_row(row: dict[str, Any], timeout: float, clock: _Clock) -> dict[str, Any]:
    clock.reset()
    started = time.process_time()
    if row["kind"] == "libra":
        entry = row["entry"]
        result = libra.run_one(entry["network"], entry["spec"], entry["query"], entry["L"],
                               entry["U"], timeout, "local", 0.004)
        share = {"width_pts": 100 * (result["biased"][1] - result["biased"][0]),
                 "fair_pct": 100 * result["fair"]}
    else:
        result = fairquant.run_one(fairquant.DATA / row["network"], row["index"], timeout,
                                   "local")
        share = {"certified_pct": result["certified_pct"],
                 "falsified_pct": result["falsified_pct"]}
    return {"name": row["name"], "cpu_s": time.process_time() - started,
            "partitions": result["partitions"], "milps": result["milps"], **share,
            "seconds": clock.seconds, "calls": clock.calls, "proofs": clock.proofs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run only rows whose name contains this text")
    parser.add_argument("--timeout", type=float, default=30.0, help="CPU seconds per row")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    time.time = time.process_time
    time.monotonic = time.process_time
    clock = _Clock()
    _instrument(clock)
    results = []
    for row in _rows():
        if args.only and args.only not in row["name"]:
            continue
        result = run_row(row, args.timeout, clock)
        results.append(result)
        if not args.json:
            print(json.dumps(result), flush=True)
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
