"""PV at scale on Adult-k (paper 003's MiniACSIncome construction on the Adult census data).

For each instance (see :mod:`benchmarks.adult_instances`) runs exactly what a user runs:
``certgate verify demographic-parity --protected sex --privileged 1 --favorable-class 1
--gamma 0.8 --timeout BUDGET --json`` (the CLI's defaults for everything else; sex = 1 is
Male, class 1 is income >50K), in this process, on the instance's cached network and
population files. Prints per instance the columns, the network, the verdict, the time to
decision or the ratio interval at the budget, the boxes, the reference ratio (exact
enumeration when the population has at most ``--exact-max`` discrete points, else a Monte
Carlo estimate from ``--samples`` draws with its standard error) and paper 003's Table 8
figures for MiniACSIncome-k (k ≤ 8; an ACS-based benchmark with other category counts).

Default plan: k = 1…13 with 1×10 networks, and k = 8 and 13 with 2×32, 3×64 and 2×256.
``--k`` selects values of k from the plan; ``--hidden`` (e.g. ``10``, ``32,32``, ``2x64``)
runs the given networks for the selected k (all k when ``--k`` is absent). ``--cli`` passes
further options to the CLI verbatim (e.g. ``--cli="--batch-size 512"``).

Usage (from the checkout root):
``python -m benchmarks.adult_scaling [--k 6 8] [--hidden 10 2x32] [--budget 120]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from benchmarks.adult_instances import (
    CACHE_DIR,
    DEFAULT_EPOCHS,
    VARIABLES,
    AdultDataError,
    AdultInstance,
    ParityReference,
    build_instance,
    discrete_point_count,
    exact_reference,
    monte_carlo_reference,
    network_label,
)
from pipeline_steps.cli import main as certgate

GAMMA = 0.8
DEFAULT_BUDGET_S = 120.0
DEFAULT_SAMPLES = 1_000_000
DEFAULT_EXACT_MAX = 1_000_000
MC_SEED = 20261125

# Paper 003, Table 8 (MiniACSIncome-k, 1×10 networks, 1 h timeout, γ = 0.8):
# input dimensions, discrete points, PV runtime, fair?
PAPER_TABLE_8: dict[int, tuple[int, str, str, str]] = {
    1: (2, "2", "16 s", "no"), 2: (10, "16", "41 s", "no"), 3: (34, "382", "121 s", "no"),
    4: (35, "38K", "219 s", "no"), 5: (40, "190K", "367 s", "no"),
    6: (49, "1.7M", "675 s", "no"), 7: (67, "31M", "1314 s", "no"),
    8: (68, "2B", "TO (1 h)", "?"),
}


def default_plan() -> list[tuple[int, tuple[int, ...]]]:
    plan = [(k, (10,)) for k in range(1, len(VARIABLES) + 1)]
    plan += [(k, hidden) for k in (8, 13) for hidden in ((32, 32), (64, 64, 64), (256, 256))]
    return plan


def parse_hidden(text: str) -> tuple[int, ...]:
    """``10`` → (10,); ``32,32`` → (32, 32); ``2x64`` / ``2×64`` → (64, 64)."""
    cleaned = text.replace("×", "x")
    try:
        if "x" in cleaned:
            depth, width = cleaned.split("x")
            sizes = (int(width),) * int(depth)
        else:
            sizes = tuple(int(part) for part in cleaned.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--hidden {text!r}: use sizes like 10, 32,32 or 2x64"
        ) from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"--hidden {text!r}: sizes must be positive")
    return sizes


def select_plan(ks: Sequence[int] | None,
                hiddens: Sequence[tuple[int, ...]] | None) -> list[tuple[int, tuple[int, ...]]]:
    if hiddens:
        chosen = ks or range(1, len(VARIABLES) + 1)
        return [(k, hidden) for k in chosen for hidden in hiddens]
    return [(k, hidden) for k, hidden in default_plan() if not ks or k in ks]


def reference(instance: AdultInstance, samples: int, exact_max: int) -> ParityReference:
    """The instance's reference ratio, cached next to the instance."""
    points = discrete_point_count(instance.population)
    exact = 0 < points <= exact_max
    cache = None
    if instance.network_path is not None:
        suffix = "exact" if exact else f"mc{samples}-{MC_SEED}"
        cache = instance.network_path.with_name(
            instance.network_path.name.replace(".network.json", f".reference-{suffix}.json")
        )
        if cache.is_file():
            data = json.loads(cache.read_text(encoding="utf-8"))
            data["joint"] = tuple(data["joint"])
            return ParityReference(**data)
    result = (exact_reference(instance) if exact
              else monte_carlo_reference(instance, samples, MC_SEED))
    if cache is not None:
        cache.write_text(json.dumps(asdict(result)) + "\n", encoding="utf-8")
    return result


def run_cli(instance: AdultInstance, budget: float, extra: Sequence[str]) -> dict[str, Any]:
    """``certgate verify demographic-parity … --json`` in this process; its JSON result."""
    assert instance.network_path is not None and instance.population_path is not None
    argv = [
        "verify", "demographic-parity", "--model", str(instance.network_path),
        "--population", str(instance.population_path), "--protected", instance.protected,
        "--privileged", f"{instance.privileged:g}",
        "--favorable-class", str(instance.favorable_class), "--gamma", str(GAMMA),
        "--timeout", str(budget), "--json", *extra,
    ]
    output = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(output):
        code = certgate(argv)
    wall = time.perf_counter() - start
    if code == 2:
        raise RuntimeError(f"certgate {shlex.join(argv)} failed (exit code 2)")
    result = json.loads(output.getvalue())
    result["wall_s"] = wall
    return result


def _interval(bounds: Sequence[float]) -> str:
    low, high = (float(b) for b in bounds)
    return f"[{low:.4f}, {high:.4f}]"


def _reference_text(ref: ParityReference) -> str:
    if math.isnan(ref.ratio):
        return f"undefined: 0/0 ({ref.method})"
    if ref.method == "exact":
        return f"{ref.ratio:.4f} (exact, {ref.points} points)"
    return f"{ref.ratio:.4f} ± {ref.ratio_se:.4f} (MC, {ref.samples:.0e})"


def _outcome_text(result: dict[str, Any], budget: float) -> str:
    ratio = result["ratio"]
    if result["verdict"] == "unknown" and result["stopped_by"] == "timeout":
        return (f"unknown at {budget:g} s: {_interval(ratio)} (PV {result['elapsed_s']:.1f} s, "
                f"the command {result['wall_s']:.1f} s)")
    if result["verdict"] == "unknown":
        return (f"unknown ({result['stopped_by']}) after {result['elapsed_s']:.1f} s: "
                f"{_interval(ratio)}")
    return f"{result['verdict']} in {result['elapsed_s']:.1f} s, ratio {_interval(ratio)}"


def _paper_text(k: int, hidden: tuple[int, ...]) -> str:
    if k not in PAPER_TABLE_8 or hidden != (10,):
        return "–"
    dims, points, runtime, fair = PAPER_TABLE_8[k]
    return f"{dims} dims, {points} points: {runtime}, fair: {fair}"


HEADER = ("| k | columns | points | network | val. acc. | verdict (time, or interval at budget) "
          "| boxes | reference ratio | paper 003 Table 8 (MiniACSIncome-k) |\n"
          "|---|---|---|---|---|---|---|---|---|")


def row_text(instance: AdultInstance, points: int, result: dict[str, Any],
             ref: ParityReference, budget: float) -> str:
    return (
        f"| {instance.k} | {len(instance.columns)} | {points:.3g} | "
        f"{network_label(instance.hidden)} | {instance.validation_accuracy:.3f} | "
        f"{_outcome_text(result, budget)} | {result['boxes']} | {_reference_text(ref)} | "
        f"{_paper_text(instance.k, instance.hidden)} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", choices=range(1, len(VARIABLES) + 1),
                        metavar="K", help="numbers of variables to run (default: the plan)")
    parser.add_argument("--hidden", type=parse_hidden, nargs="+", metavar="SIZES",
                        help="hidden layer sizes, e.g. 10, 32,32 or 2x64")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                        help=f"seconds per instance (default {DEFAULT_BUDGET_S:g})")
    parser.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    parser.add_argument("--epochs", type=int, default=DEFAULT_EPOCHS)
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                        help="Monte Carlo samples of the reference (default 10^6)")
    parser.add_argument("--exact-max", type=int, default=DEFAULT_EXACT_MAX,
                        help="enumerate exactly up to this many discrete points")
    parser.add_argument("--cache", type=Path, default=CACHE_DIR, help="instance cache directory")
    parser.add_argument("--cli", default="", help="extra options for the certgate CLI")
    parser.add_argument("--json", action="store_true", help="one JSON object per instance")
    args = parser.parse_args(argv)
    if args.budget <= 0:
        parser.error("--budget must be positive")
    torch.set_num_threads(1)
    extra = shlex.split(args.cli)
    if not args.json:
        print(HEADER, flush=True)
    decided = 0
    plan = select_plan(args.k, args.hidden)
    for k, hidden in plan:
        try:
            instance = build_instance(k, hidden, args.seed, epochs=args.epochs,
                                      cache_dir=args.cache)
        except AdultDataError as error:
            print(f"adult_scaling: error: {error}", file=sys.stderr)
            return 2
        points = discrete_point_count(instance.population)
        ref = reference(instance, args.samples, args.exact_max)
        result = run_cli(instance, args.budget, extra)
        decided += result["verdict"] != "unknown"
        if args.json:
            print(json.dumps({
                "instance": instance.name, "k": k, "columns": len(instance.columns),
                "points": points, "network": network_label(hidden),
                "validation_accuracy": instance.validation_accuracy, **result,
                "reference": asdict(ref), "paper": _paper_text(k, hidden),
            }), flush=True)
        else:
            print(row_text(instance, points, result, ref, args.budget), flush=True)
    if not args.json:
        print(f"decided {decided}/{len(plan)} within {args.budget:g} s each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
