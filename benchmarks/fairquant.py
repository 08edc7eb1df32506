"""FairQuant's German-credit and COMPAS networks certified with ``verifier.causal``.

FairQuant (Kim, Wang, Wang, ICSE 2025) certifies individual fairness w.r.t. one protected input:
every integer point of the input box gets the same class with the protected input at its
minimum and at its maximum. It reports the share of integer points certified fair, falsified
and undecided. This script loads the shared ``.nnet`` files unchanged (one logit output: class
1 iff > 0; domain = the header's ``[min, max]``; every input integer-coded), asks the same
question (``protected_values`` = the protected input's minimum and maximum, which for these
binary protected inputs is every value) and prints our certified-fair, proven-biased and
undecided shares of the integer points beside FairQuant's rows of the benchmark README.

The networks are evaluated on the raw integer values: FairQuant ignores the ``.nnet``
normalisation rows (its falsified shares on compas-1 and compas-3, 2.72 % and 1.92 %, are
exactly the brute-force shares of the raw networks over all 624 points, 2.724 % and 1.923 %;
with the normalisation applied they would be 8.97 % and 2.40 %).

Each run gets ``max(FairQuant's time, --min-timeout)`` seconds (the acceptance rule).

Usage: ``python benchmarks/fairquant.py [--only TEXT] [--min-timeout S] [--executor SPEC]
[--json]``.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

import torch

from verifier.causal import CausalSettings, build_problem, certify_causal_fairness
from verifier.certificate import to_jsonable
from verifier.convert import load_classifier
from verifier.executor import make_executor

DATA = Path(__file__).resolve().parents[2] / "shared/benchmarks/fairquant"
ROW = re.compile(
    r"^\|\s*(?P<net>[\w-]+)\s*\|\s*(?P<arch>[\d-]+)\s*\|\s*(?P<attr>\w+)\s*\[(?P<index>\d+)\]\s*\|"
    r"\s*(?P<cert>[\d.]+)\s*\|\s*(?P<fals>[\d.]+)\s*\|\s*(?P<undec>[\d.]+)\s*\|"
    r"\s*(?P<time>[\d.]+)\s*s\s*\|"
)


def published(data: Path) -> list[dict[str, Any]]:
    """FairQuant's measured rows from the benchmark README's table."""
    rows = []
    for line in (data / "README.md").read_text().splitlines():
        match = ROW.match(line.strip())
        if match:
            rows.append({
                "network": match["net"], "architecture": match["arch"],
                "protected": match["attr"], "index": int(match["index"]),
                "certified_pct": float(match["cert"]), "falsified_pct": float(match["fals"]),
                "undecided_pct": float(match["undec"]), "time_s": float(match["time"]),
            })
    return rows


def run_one(path: Path, index: int, timeout: float, executor_spec: str) -> dict[str, Any]:
    """Our certification of one network and protected input: shares of integer points."""
    network, domain = load_classifier(path, nnet_normalises_inputs=False)
    assert domain is not None
    name = network.input_names[index]
    problem = build_problem(
        network, [name], domain=domain, integer_inputs="all",
        protected_values=[float(domain[0][index]), float(domain[1][index])],
    )
    settings = CausalSettings(timeout_s=timeout, target_width=0.0)
    executor = make_executor(executor_spec)
    started = time.monotonic()
    try:
        certificate = certify_causal_fairness(problem, settings, executor)
    finally:
        executor.shutdown()
    wall = time.monotonic() - started
    details = certificate.details
    fair = details["fair_fraction"]
    biased = details["biased_everywhere_fraction"]
    return {
        "verdict": certificate.verdict,
        "certified_pct": 100 * fair,
        "falsified_pct": 100 * biased,
        "undecided_pct": 100 * max(0.0, 1.0 - fair - biased),
        "witnesses": details["witness_count"],
        "partitions": int(certificate.cost["partitions"]),
        "milps": int(certificate.cost["milps"]),
        "time_s": wall,
        "budget_s": timeout,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run only rows whose network name contains this text")
    parser.add_argument("--min-timeout", type=float, default=60.0,
                        help="budget floor in seconds (budget = max(FairQuant's time, this))")
    parser.add_argument("--executor", default="local")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = []
    for row in published(args.data):
        if args.only and args.only not in row["network"]:
            continue
        budget = max(row["time_s"], args.min_timeout)
        ours = run_one(args.data / f"{row['network']}.nnet", row["index"], budget, args.executor)
        results.append({"network": row["network"], "protected": row["protected"],
                        "ours": ours, "fairquant": row})
        if not args.json:
            ahead = "ahead" if ours["certified_pct"] >= row["certified_pct"] else "BEHIND"
            print(f"{row['network']:9s} {row['architecture']:18s} {row['protected']:4s} "
                  f"ours certified {ours['certified_pct']:7.3f}% falsified "
                  f"{ours['falsified_pct']:6.3f}% in {ours['time_s']:5.1f}s (budget "
                  f"{budget:.0f}s) | FairQuant {row['certified_pct']:6.2f}% / "
                  f"{row['falsified_pct']:5.2f}% in {row['time_s']:.2f}s  {ahead}", flush=True)
    if args.json:
        print(json.dumps(to_jsonable(results), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
