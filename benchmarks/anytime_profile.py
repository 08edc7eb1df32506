"""Anytime profile of causal-fairness certification: certified shares against wall time.

For every FairQuant network of ``shared/benchmarks/fairquant`` and one instance (L = 0, the
first query) of each Libra German and COMPAS network, runs ``certgate verify
causal-fairness`` as a fresh process (``python -m benchmarks.anytime_profile --child``: the
CLI's own parser and :func:`pipeline_steps.cli.causal_cmd.certify`, so the process start-up,
imports, model parse and problem build are the CLI's) and records, from its progress counter
(:class:`pipeline_steps.progress.PartitionProgress`), the certified-fair and certified
biased-everywhere shares after every chunk of partitions, ending with the certificate's. The
clock starts before the process is spawned: each share is read at wall time T (1, 2, 5, 10,
30, 60 s by default) *including* start-up. Printed beside FairQuant's published certified
share and time (and ours at that time + 1 s, the issue's acceptance point; from
``shared/benchmarks/fairquant/README.md``, none for the networks it does not list) and
Libra's shortest published run.

FairQuant's networks are given to the CLI as they are to FairQuant: the raw integer codes
(the ``.nnet`` normalisation rows ignored, see ``benchmarks/fairquant.py``), converted once
before timing to the project's JSON format, every input integer, the header's box as
``--domain``, the protected input at its minimum and maximum, no target width (refine for
the whole budget, as ``benchmarks/fairquant.py``; the CLI's default stops at 0.5 points).
Libra's instances use their specification, query, L and U, with the ``benchmarks/libra.py``
target width.

Usage: ``python -m benchmarks.anytime_profile [--only TEXT] [--budget S] [--times T ...]
[--libra-budget S] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TIMES = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
PROTECTED = {"GC": 11, "compas": 3}
"""The protected input of the FairQuant networks its README does not list (age of the German
credit networks, race of the COMPAS ones: the listed rows' inputs)."""


def child(cli_args: list[str]) -> int:
    """Run the causal-fairness command of ``cli_args`` and print one JSON object: the wall
    time (``time.time``) and the process CPU time since the process started
    (``time.process_time``: imports included, independent of the machine's load) of every
    ``(fair, biased everywhere)`` share the counter saw, the certificate's certified shares and
    cost."""
    from pipeline_steps.cli import build_parser
    from pipeline_steps.cli.causal_cmd import audit_settings, certify
    from pipeline_steps.progress import PartitionProgress

    argv = ["verify", "causal-fairness", *cli_args]
    args = build_parser(argv).parse_args(argv)
    settings = audit_settings(args)
    bar = PartitionProgress(settings.name, enabled=False)
    cpu: list[float] = []
    count = bar.chunk_done

    def chunk_done(*chunk: Any) -> None:
        count(*chunk)
        cpu.extend([time.process_time()] * (len(bar.shares) - len(cpu)))

    bar.chunk_done = chunk_done  # type: ignore[method-assign]
    certificate = certify(args, settings, bar)
    bar.close()
    cpu.extend([time.process_time()] * (len(bar.shares) - len(cpu)))
    started = time.time() - time.monotonic() + bar.started
    print(json.dumps({
        "bar_started": started,
        "shares": [(started + elapsed, fair, biased) for elapsed, fair, biased in bar.shares],
        "cpu": cpu,
        "certified_shares": certificate.details["certified_shares"],
        "partitions": certificate.cost["partitions"],
        "milps": certificate.cost["milps"],
        "elapsed_s": certificate.cost["elapsed_s"],
    }))
    return 0


def fairquant_cases(workdir: Path) -> list[dict[str, Any]]:
    """Every row of FairQuant's table, then every other ``.nnet`` of its folder (protected
    input :data:`PROTECTED`), as CLI options on a raw JSON copy of the network."""
    from benchmarks.fairquant import DATA, published
    from verifier.convert import load_classifier, save_network

    rows = published(DATA)
    listed = {row["network"] for row in rows}
    plan = [(row["network"], row["index"], row) for row in rows] + [
        (path.stem, PROTECTED[path.stem.split("-")[0]], None)
        for path in sorted(DATA.glob("*.nnet")) if path.stem not in listed]
    cases = []
    for name, index, row in plan:
        network, domain = load_classifier(DATA / f"{name}.nnet", nnet_normalises_inputs=False)
        assert domain is not None
        model = workdir / f"{name}.json"
        if not model.exists():
            save_network(network, model)
        names = network.input_names
        box = ",".join(f"{names[i]}={domain[0][i]:g}:{domain[1][i]:g}" for i in range(len(names)))
        cases.append({
            "name": f"{name} {names[index]}", "published": row,
            "args": ["--model", str(model), "--protected", names[index], "--domain", box,
                     "--integer-inputs", "all", "--protected-values",
                     f"{domain[0][index]:g},{domain[1][index]:g}", "--target-width", "0"],
        })
    return cases


def libra_cases(datasets: tuple[str, ...], target_width: float) -> list[dict[str, Any]]:
    """The first L = 0 instance of each Libra network of ``datasets`` as CLI options."""
    from benchmarks.libra import DATA, groups
    from verifier.causal import load_libra_spec

    cases, seen = [], set()
    for dataset in datasets:
        for entry in groups(dataset, DATA):
            if entry["L"] != 0.0 or entry["network"] in seen:
                continue
            seen.add(entry["network"])
            protected = load_libra_spec(entry["spec"])["protected"]
            times = [row["total_s"] for row in entry["published"] if row["total_s"] is not None]
            args = ["--model", str(entry["network"]), "--protected", ",".join(protected),
                    "--spec", str(entry["spec"]), "--lower-edge", "0", "--max-unstable",
                    str(entry["U"]), "--target-width", f"{target_width:g}"]
            if entry["query"] is not None:
                args += ["--query", str(entry["query"])]
            cases.append({"name": f"{dataset} {entry['name']}", "published": None,
                          "libra_s": min(times) if times else None, "args": args})
    return cases


def profile(case: dict[str, Any], budget: float) -> dict[str, Any]:
    """One fresh CLI process on ``case`` with ``--timeout budget``; shares against the wall
    time since just before the spawn."""
    command = [sys.executable, "-m", "benchmarks.anytime_profile", "--child", "--",
               *case["args"], "--timeout", f"{budget:g}"]
    spawned = time.time()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    ended = time.time() - spawned
    result = json.loads(done.stdout.strip().splitlines()[-1])
    curve = [(wall - spawned, fair, biased) for wall, fair, biased in result["shares"]]
    cpu_curve = [(cpu, fair, biased)
                 for cpu, (_, fair, biased) in zip(result["cpu"], result["shares"], strict=True)]
    return {"start_s": result["bar_started"] - spawned,
            "first_s": curve[0][0] if curve else None, "wall_s": ended, "curve": curve,
            "cpu_curve": cpu_curve,
            "final": result["certified_shares"], "partitions": result["partitions"],
            "milps": result["milps"]}


def at(curve: list[tuple[float, float, float]], seconds: float) -> tuple[float, float]:
    """The last certified ``(fair, biased)`` shares seen by ``seconds`` of wall time."""
    seen = [(fair, biased) for elapsed, fair, biased in curve if elapsed <= seconds]
    return seen[-1] if seen else (0.0, 0.0)


def _cell(shares: tuple[float, float]) -> str:
    fair, biased = shares
    return f"{100 * fair:.2f}/{100 * biased:.2f}/{100 * max(0.0, 1 - fair - biased):.2f}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+",
                        help="run only cases whose name contains one of these texts")
    parser.add_argument("--budget", type=float, default=60.0,
                        help="--timeout of the FairQuant runs (default 60 s)")
    parser.add_argument("--libra-budget", type=float, default=30.0,
                        help="--timeout of the Libra runs (default 30 s)")
    parser.add_argument("--target-width", type=float, default=0.004,
                        help="Libra runs stop at this biased-share width (as libra.py)")
    parser.add_argument("--times", type=float, nargs="+", default=list(TIMES))
    parser.add_argument("--no-libra", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="certgate-profile-") as workdir:
        cases = [(case, args.budget) for case in fairquant_cases(Path(workdir))]
        if not args.no_libra:
            cases += [(case, args.libra_budget)
                      for case in libra_cases(("german", "compas"), args.target_width)]
        results = []
        if not args.json:
            print("| network | CLI parsed | first chunk | "
                  + " | ".join(f"{t:g} s" for t in args.times)
                  + " | final | published |\n(cells: certified fair / biased everywhere / rest "
                  "% at that wall time since the spawn, start-up included; the JSON output "
                  "also has them against the process CPU time, which the load does not "
                  "stretch)")
        for case, budget in cases:
            if args.only and not any(text in case["name"] for text in args.only):
                continue
            run = profile(case, budget)
            results.append({"name": case["name"], "budget_s": budget, **run,
                            "fairquant": case["published"], "libra_s": case.get("libra_s")})
            if not args.json:
                _print(case, run, args.times)
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


def _print(case: dict[str, Any], run: dict[str, Any], times: list[float]) -> None:
    cells = " | ".join(_cell(at(run["curve"], t)) for t in times)
    row = case["published"]
    theirs = (f"FairQuant {row['certified_pct']:.2f}/{row['falsified_pct']:.2f} in "
              f"{row['time_s']:.2f} s; ours at its time + 1 s: "
              f"{_cell(at(run['curve'], row['time_s'] + 1.0))} (wall), "
              f"{_cell(at(run['cpu_curve'], row['time_s'] + 1.0))} (CPU)" if row else
              f"Libra {case['libra_s']:.0f} s" if case.get("libra_s") else "—")
    final = run["final"]
    first = "—" if run["first_s"] is None else f"{run['first_s']:.1f} s"
    print(f"| {case['name']} | {run['start_s']:.1f} s | {first} | {cells} | "
          f"{100 * final['fair']:.2f}/{100 * final['biased_everywhere']:.2f} in "
          f"{run['wall_s']:.1f} s | {theirs} |", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
