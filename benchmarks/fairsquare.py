"""The 36 FairSquare instances of paper 003 (Tables 3–4), certified with our PV.

3 networks × {independent, Bayes Net 1, Bayes Net 2} × {unclipped, clipped} × {demographic
parity, parity of qualified persons}, γ = 0.85 (fair iff ratio > γ). Population models are
converted from ``shared/benchmarks/fairsquare`` into our format; Bayes Net 2's integrity
constraint ``education_num' = min(education_num, age)`` is composed in front of the network.
Prints our verdict, ratio interval and wall time beside the paper's runtime and verdict.

Usage: ``python benchmarks/fairsquare.py [--only NAME …] [--timeout S] [--json]``; instance
names look like ``NN_2_1/bayes_net_1_clipped/demographic_parity``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from verifier.audits import demographic_parity_audit
from verifier.certificate import to_jsonable
from verifier.convert import load_network
from verifier.network import Network, compose, min_feature_transform
from verifier.population.fairsquare import population_from_fairsquare
from verifier.pv import PVSettings

DATA = Path(__file__).resolve().parents[2] / "shared/benchmarks/fairsquare"
GAMMA = 0.85
QUALIFIED = "x.age >= 18"


def instances(data: Path) -> list[dict[str, Any]]:
    """Every (network, population model, property) of the benchmark with the paper's result."""
    published = json.loads((data / "published_results.json").read_text())["results"]
    return [
        {
            "instance": f"{r['network']}/{r['population_model']}/{r['property']}",
            "network": r["network"],
            "distribution": r["population_model"].removesuffix("_clipped"),
            "clipped": r["population_model"].endswith("_clipped"),
            "population_model": r["population_model"],
            "notion": r["property"],
            "paper_runtime_s": r["pv_runtime_s"],
            "paper_verdict": {True: "satisfied", False: "violated", None: "unknown"}[
                r["pv_verdict_fair"]
            ],
        }
        for r in published
    ]


def build(data: Path, case: dict[str, Any]) -> tuple[Network, Any]:
    """The network (with Bayes Net 2's pre-processing composed in) and population model."""
    models = json.loads((data / "population_models.json").read_text())
    variables = models["variables"]
    population = population_from_fairsquare(models["models"][case["population_model"]],
                                            variables)
    network = load_network(data / f"networks.json#{case['network']}")
    if models["models"][case["population_model"]].get("preprocessing"):
        network = compose(min_feature_transform(variables, "education_num", "age"), network)
    return network, population


def run(case: dict[str, Any], data: Path, timeout: float) -> dict[str, Any]:
    network, population = build(data, case)
    qualified = QUALIFIED if case["notion"] == "parity_of_qualified_persons" else None
    certificate = demographic_parity_audit(
        network, population, protected="sex", privileged=1.0, favorable_class=1, gamma=GAMMA,
        qualified=qualified, settings=PVSettings(timeout_s=timeout),
    )
    return {
        **case,
        "verdict": certificate.verdict,
        "ratio": list(certificate.bounds["value"]),
        "probabilities": {k: list(v) for k, v in certificate.bounds.items() if k != "value"},
        "elapsed_s": certificate.cost["elapsed_s"],
        "boxes": certificate.cost["boxes"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these instances")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per instance")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cases = instances(args.data)
    if args.only:
        unknown = set(args.only) - {c["instance"] for c in cases}
        if unknown:
            parser.error(f"unknown instances: {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c["instance"] in args.only]
    rows = []
    for case in cases:
        row = run(case, args.data, args.timeout)
        rows.append(row)
        if not args.json:
            low, high = row["ratio"]
            print(f"{row['instance']:<52} {row['verdict']:<10} [{low:.4f}, {high:.4f}] "
                  f"{row['elapsed_s']:7.2f} s  | paper: {row['paper_verdict']:<10} "
                  f"{row['paper_runtime_s']} s", flush=True)
    if args.json:
        keys = ("instance", "network", "distribution", "clipped", "notion", "verdict", "ratio",
                "probabilities", "elapsed_s", "boxes", "paper_verdict", "paper_runtime_s")
        print(json.dumps(to_jsonable([{k: row[k] for k in keys} for row in rows])))
        return
    times = [row["elapsed_s"] for row in rows]
    decided = sum(row["verdict"] != "unknown" for row in rows)
    print(f"decided {decided}/{len(rows)}; median {statistics.median(times):.2f} s, "
          f"max {max(times):.2f} s")


if __name__ == "__main__":
    main()
