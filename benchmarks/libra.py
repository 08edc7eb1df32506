"""Libra's causal-fairness benchmarks (paper 000) certified with ``verifier.causal``.

For every (network, query, specification) of ``shared/benchmarks/libra`` and every budget L
the paper used, runs our certification once (U = the largest U published for that L; each
run bounded by ``--timeout``) and prints beside it the published rows of the shipped logs
(``results.csv``: coverage, bias %, time per abstract domain). Our fractions are relative to
the query; ``bias_whole`` = our biased-share interval × the query's share of the input space,
comparable to Libra's whole-space bias % (Libra's is a box-wrapped over-estimate, so it should
not lie below our lower bound). The toy network is compared with the paper's §2 numbers.

``--dataset adult-k`` runs the Adult-k models of the PV-at-scale benchmark (sex protected,
built or read from ``benchmarks/.adult_cache``; no published rows).

Usage: ``python benchmarks/libra.py [--dataset toy german compas census japanese adult-k]
[--only TEXT] [--timeout S] [--executor local|process|dask[=ADDR]] [--json]``, or
``--network FILE --spec FILE [--query FILE] [--lower L] [--upper U]`` for any network in the
benchmark's neutral format.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

from verifier.causal import (
    CausalSettings,
    build_problem,
    certify_causal_fairness,
    load_libra_spec,
    load_query_box,
)
from verifier.certificate import to_jsonable
from verifier.convert import load_network
from verifier.executor import make_executor

DATA = Path(__file__).resolve().parents[2] / "shared/benchmarks/libra"
DATASETS = ("toy", "german", "compas", "census", "japanese", "adult-k")
ADULT_K_PLAN = [(k, (10,)) for k in (4, 8, 13)] + [(8, (32, 32)), (13, (64, 64))]
"""Adult-k instances of the PV-at-scale benchmark (``benchmarks/adult_instances.py``), sex as
the protected input (compared at both values), the population's domain, one-hot groups and
integer columns."""
TOY_PUBLISHED = [{"domain": "paper §2", "L": 0.25, "U": 2, "covered_pct": 75.0,
                  "biased_pct": 21.455, "total_s": None}]


def groups(dataset: str, data: Path) -> list[dict[str, Any]]:
    """One entry per (network, query, spec, L) with the published rows and our U."""
    if dataset == "toy":
        toy = {"network": data / "toy/networks/toy.json", "spec": data / "toy/specs/toy.json",
               "query": None, "L": 0.25, "U": 2, "published": TOY_PUBLISHED}
        return [{**toy, "name": "toy (Libra budget semantics: no witness sampling)",
                 "sampling": False},
                {**toy, "name": "toy", "sampling": True}]
    entries: dict[tuple, dict[str, Any]] = {}
    with (data / dataset / "results.csv").open() as handle:
        for row in csv.DictReader(handle):
            query = row["query"] or None
            key = (row["network_json"], query, row["spec"], float(row["L"]))
            entry = entries.setdefault(key, {
                "name": f"{row['network_json'].split('/')[-1].removesuffix('.json')}"
                        f"{'/' + query if query else ''}/{row['spec']}/L={float(row['L']):g}",
                "network": data / row["network_json"],
                "spec": data / dataset / "specs" / f"{row['spec']}.json",
                "query": data / dataset / "queries" / f"{query}.json" if query else None,
                "L": float(row["L"]), "U": 0, "published": [],
            })
            entry["U"] = max(entry["U"], int(row["U"]))
            entry["published"].append({
                "domain": row["domain"], "L": float(row["L"]), "U": int(row["U"]),
                "covered_pct": _number(row["covered_pct"]),
                "biased_pct": _number(row["biased_pct"]),
                "total_s": _number(row["total_s"]),
            })
    return list(entries.values())


def _number(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def run_one(network: Path, spec: Path, query: Path | None, lower: float, upper: int,
            timeout: float, executor_spec: str, target_width: float,
            sampling: bool = True) -> dict[str, Any]:
    """Our certification of one instance, as the numbers printed by this script."""
    problem = build_problem(
        load_network(network), **load_libra_spec(spec),
        query=load_query_box(query) if query else None,
    )
    settings = CausalSettings(min_edge=lower, max_unstable=upper, timeout_s=timeout,
                              target_width=target_width, witness_sampling=sampling)
    executor = make_executor(executor_spec)
    try:
        certificate = certify_causal_fairness(problem, settings, executor)
    finally:
        executor.shutdown()
    details = certificate.details
    low, high = certificate.bounds["biased_share"]
    q = details["query_fraction"]
    return {
        "verdict": certificate.verdict,
        "certified": dict(details["certified_shares"]),
        "covered": 1.0 - details["excluded_fraction"],
        "fair": details["fair_fraction"],
        "biased": [low, high],
        "query_fraction": q,
        "bias_whole_pct": [100 * low * q, 100 * high * q],
        "partitions": int(certificate.cost["partitions"]),
        "milps": int(certificate.cost["milps"]),
        "time_s": certificate.cost["elapsed_s"],
        "coverage_done_s": certificate.cost.get("coverage_done_s"),
    }


def run_adult_k(k: int, hidden: tuple[int, ...], timeout: float, executor_spec: str,
                target_width: float) -> dict[str, Any]:
    """Causal fairness of one Adult-k instance w.r.t. sex, as the causal audit kind runs it
    (domain, one-hot groups and integer inputs from the population model)."""
    from benchmarks.adult_instances import build_instance
    from verifier.audits.causal_fairness import CausalFairnessSettings
    from verifier.audits.causal_fairness import run as run_causal

    instance = build_instance(k, hidden, 0)
    settings = CausalFairnessSettings(kind="causal_fairness", protected=[instance.protected],
                                      timeout_s=timeout, target_width=target_width,
                                      max_biased_share=1.0)
    executor = make_executor(executor_spec)
    try:
        certificate = run_causal(settings, instance.network, instance.population,
                                executor=executor)
    finally:
        executor.shutdown()
    details = certificate.details
    low, high = certificate.bounds["biased_share"]
    return {
        "verdict": certificate.verdict,
        "certified": dict(details["certified_shares"]),
        "covered": 1.0 - details["excluded_fraction"],
        "fair": details["fair_fraction"],
        "biased": [low, high],
        "biased_population": certificate.bounds.get("biased_share_population"),
        "query_fraction": 1.0,
        "bias_whole_pct": [100 * low, 100 * high],
        "partitions": int(certificate.cost["partitions"]),
        "milps": int(certificate.cost["milps"]),
        "time_s": certificate.cost["elapsed_s"],
    }


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    hours, rest = divmod(round(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def _print(entry: dict[str, Any], ours: dict[str, Any]) -> None:
    low, high = ours["bias_whole_pct"]
    print(f"{entry['name']}  (ours: L={entry['L']:g}, U={entry['U']})")
    q_low, q_high = ours["biased"]
    shares = ours["certified"]
    print(f"  ours     decided {100 * shares['decided']:7.3f}% of query: certified fair "
          f"{100 * shares['fair']:.3f}% + certified biased everywhere "
          f"{100 * shares['biased_everywhere']:.3f}%")
    print(f"  ours     covered {100 * ours['covered']:7.3f}% of query   bias(whole) "
          f"[{low:.3f}, {high:.3f}]%   (query: width {100 * (q_high - q_low):.2f} points)   "
          f"{ours['verdict']:7s} {ours['partitions']} parts "
          f"{ours['milps']} MILPs  {ours['time_s']:.1f}s")
    if ours.get("coverage_done_s") is not None:
        print(f"  ours     every partition outside refinements decided after "
              f"{ours['coverage_done_s']:.1f}s")
    for row in entry["published"]:
        covered = "—" if row["covered_pct"] is None else f"{row['covered_pct']:7.3f}%"
        biased = "—" if row["biased_pct"] is None else f"{row['biased_pct']:.3f}%"
        print(f"  {row['domain']:8s} covered {covered:>8s} (U={row['U']})   bias(whole) "
              f"{biased:>8s}   time {_time(row['total_s'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", nargs="+", choices=DATASETS, default=["toy", "german"])
    parser.add_argument("--only", help="run only instances whose name contains this text")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per run")
    parser.add_argument("--target-width", type=float, default=0.004,
                        help="stop refining once the biased-share interval is this narrow")
    parser.add_argument("--executor", default="local")
    parser.add_argument("--network", type=Path, help="run one network (neutral JSON format)")
    parser.add_argument("--spec", type=Path, help="its specification (with --network)")
    parser.add_argument("--query", type=Path, help="its query box (with --network)")
    parser.add_argument("--lower", type=float, default=0.0, help="L (with --network)")
    parser.add_argument("--upper", type=int, default=8, help="U (with --network)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.network:
        if not args.spec:
            parser.error("--network needs --spec")
        entries = [{"name": args.network.name, "network": args.network, "spec": args.spec,
                    "query": args.query, "L": args.lower, "U": args.upper, "published": []}]
    else:
        entries = [e for d in args.dataset if d != "adult-k" for e in groups(d, args.data)
                   if not args.only or args.only in e["name"]]
    results = []
    if "adult-k" in args.dataset:
        for k, hidden in ADULT_K_PLAN:
            name = f"adult-{k}/{'x'.join(map(str, hidden))}/sex"
            if args.only and args.only not in name:
                continue
            ours = run_adult_k(k, hidden, args.timeout, args.executor, args.target_width)
            results.append({"instance": name, "ours": ours, "published": []})
            if not args.json:
                _print({"name": name, "L": 0.0, "U": 8, "published": []}, ours)
    for entry in entries:
        ours = run_one(entry["network"], entry["spec"], entry["query"], entry["L"], entry["U"],
                       args.timeout, args.executor, args.target_width,
                       entry.get("sampling", True))
        results.append({"instance": entry["name"], "ours": ours, "published": entry["published"]})
        if not args.json:
            _print(entry, ours)
    if args.json:
        print(json.dumps(to_jsonable(results), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
