"""WMI audits on a default-fit population, timed by process CPU (issue 34).

Monotonicity (pairs weighted by the population) and noise robustness (discrete noise on one
feature) of a network under the population ``certgate population fit`` writes, through
:mod:`verifier.wmi` in this process (one audit at a time; the stop threshold of a
``min_probability`` audit, as the audit layer sets it). Prints one JSON line per audit: the
certified interval of the probability, whether it timed out, the boxes branched, the process
CPU seconds and the wall seconds. The 12-column Adult model and its population come from
``benchmarks/population_default_fit.py --workdir DIR`` (``DIR/net.json``, ``DIR/pop_raw.json``)::

    python benchmarks/wmi_default_fit.py --model DIR/net.json --population DIR/pop_raw.json \\
        --monotone education-num,hours-per-week,age --noise hours-per-week=0:0.5,1:0.25,2:0.25
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from verifier.audits.exact_probability import wmi_stop_at
from verifier.convert import load_network
from verifier.population import load_population
from verifier.population.distributions import Discrete
from verifier.wmi import monotonicity, noise_robustness


def _record(name: str, run: Any) -> None:
    cpu, wall = time.process_time(), time.perf_counter()
    result = run()
    print(json.dumps({
        "audit": name,
        "interval": [result.probability_lower, result.probability_upper],
        "timed_out": result.timed_out, "boxes": result.extra.get("boxes"),
        "method": result.extra.get("method", "exact WMI"),
        "cpu_s": round(time.process_time() - cpu, 1),
        "wall_s": round(time.perf_counter() - wall, 1)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--population", required=True)
    parser.add_argument("--monotone", default="", help="features, comma-separated")
    parser.add_argument("--noise", default=None, help="feature=value:prob,… (discrete noise)")
    parser.add_argument("--min-probability", type=float, default=0.95)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    network = load_network(args.model)
    population = load_population(args.population)
    names = list(population.columns)
    stop_at = wmi_stop_at(args.min_probability)
    for feature in filter(None, args.monotone.split(",")):
        _record(f"monotonicity {feature}", lambda feature=feature: monotonicity(
            network, population, names.index(feature), use_prior=True, stop_at=stop_at,
            timeout_s=args.timeout))
    if args.noise:
        feature, pairs = args.noise.split("=")
        values, probabilities = zip(*(pair.split(":") for pair in pairs.split(",")),
                                    strict=True)
        noise = Discrete(values=[float(v) for v in values],
                         probabilities=[float(p) for p in probabilities])
        _record(f"noise {args.noise}", lambda: noise_robustness(
            network, population, noise, [names.index(feature)], stop_at=stop_at,
            timeout_s=args.timeout))


if __name__ == "__main__":
    main()
