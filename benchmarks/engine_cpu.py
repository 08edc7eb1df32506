"""The causal engine's own CPU: certified shares against process CPU time, imports excluded.

Runs the anytime profile's cases (``benchmarks/anytime_profile.py``: FairQuant's networks as
FairQuant is given them; Libra's first L = 0 query of each German and COMPAS network) in a
fresh process each, with torch, ``scipy.optimize`` and the causal engine's modules imported
and one torch thread set *before* the clock starts, so the CPU seconds are the engine's (CLI
parse, model load, problem build and certification) and not the interpreter's start-up. The
engine reads the process CPU clock for its budget and deadlines (as
``benchmarks/libra_cpu_clock.py``), so ``--timeout`` is a CPU budget and a loaded machine
stretches only the wall time.
Prints, per case, the certified fair % at each CPU mark, the CPU at which FairQuant's
certified share is reached (its rows) or the run stopped at the target width (Libra's), and
the partitions and MILPs of the run.

Before/after pairs: run the same command with ``PYTHONPATH`` set to each checkout.

Usage: ``python -m benchmarks.engine_cpu [--only TEXT ...] [--budget S] [--libra-budget S]
[--marks T ...] [--no-libra] [--no-fairquant] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MARKS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0)


def child(cli_args: list[str]) -> int:
    """Import the engine, then run :func:`benchmarks.anytime_profile.child` and print its JSON
    object with ``cpu_started``, the process CPU time when the clock started."""
    import scipy.optimize  # noqa: F401

    from benchmarks.anytime_profile import child as profile_child
    from benchmarks.libra_cpu_clock import use_cpu_clock

    use_cpu_clock()
    print(json.dumps({"cpu_started": time.process_time()}))
    return profile_child(cli_args)


def run(case: dict[str, Any], budget: float) -> dict[str, Any]:
    """One fresh process on ``case``: the ``(engine CPU s, fair, biased)`` curve and the run's
    totals."""
    command = [sys.executable, "-m", "benchmarks.engine_cpu", "--child", "--", *case["args"],
               "--timeout", f"{budget:g}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    started = lines[0]["cpu_started"]
    result = lines[-1]
    curve = [(cpu - started, fair, biased)
             for cpu, (_, fair, biased) in zip(result["cpu"], result["shares"], strict=True)]
    return {"curve": curve, "cpu_s": curve[-1][0] if curve else 0.0,
            "final": result["certified_shares"], "partitions": result["partitions"],
            "milps": result["milps"], "load": os.getloadavg()[0]}


def reached(curve: list[tuple[float, float, float]], share: float) -> float | None:
    """The engine CPU at which the certified-fair share first reached ``share``."""
    return next((spent for spent, fair, _ in curve if fair >= share), None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    from benchmarks.anytime_profile import at, fairquant_cases, libra_cases

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", help="cases whose name contains one of these")
    parser.add_argument("--budget", type=float, default=6.0, help="FairQuant runs' --timeout")
    parser.add_argument("--libra-budget", type=float, default=30.0)
    parser.add_argument("--target-width", type=float, default=0.005,
                        help="Libra runs stop at this biased-share width")
    parser.add_argument("--marks", type=float, nargs="+", default=list(MARKS))
    parser.add_argument("--no-libra", action="store_true")
    parser.add_argument("--no-fairquant", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="certgate-engine-cpu-") as workdir:
        cases = [] if args.no_fairquant else [
            (case, args.budget) for case in fairquant_cases(Path(workdir))]
        if not args.no_libra:
            cases += [(case, args.libra_budget)
                      for case in libra_cases(("german", "compas"), args.target_width)]
        results = []
        for case, budget in cases:
            if args.only and not any(text in case["name"] for text in args.only):
                continue
            result = run(case, budget)
            row = case["published"]
            target = None if row is None else row["certified_pct"] / 100
            result.update(name=case["name"], target=target,
                          reached_s=None if target is None else reached(result["curve"],
                                                                        target))
            results.append(result)
            if not args.json:
                marks = " / ".join(f"{100 * at(result['curve'], t)[0]:.2f}"
                                   for t in args.marks)
                end = (f"FairQuant's {100 * target:.2f} % at "
                       + ("—" if result["reached_s"] is None else f"{result['reached_s']:.2f}")
                       if target is not None else
                       f"stopped at {result['cpu_s']:.2f} (fair {100 * result['final']['fair']:.2f}"
                       f", biased everywhere {100 * result['final']['biased_everywhere']:.2f})")
                print(f"| {case['name']} | {marks} | {end} | {result['partitions']:.0f} parts, "
                      f"{result['milps']:.0f} MILPs | load {result['load']:.1f} |", flush=True)
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
