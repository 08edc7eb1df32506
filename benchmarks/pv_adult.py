"""Paper 003's own Adult setup (PV's reference repository: 104 input columns, a 14-node
Bayesian network, classifiers 104-10-2, 104-20-10-2 and 104-787-69-2), rebuilt like it from
the Adult census data and run as users run certgate.

The reference setup itself is kept out of the repository; this one is built the same way
from ``../shared/benchmarks/libra/census/data/census.csv`` (resolved from the checkout root):

* **Columns** as PV encodes Adult: every categorical attribute one-hot (``sex`` too, as
  ``sex=Female``/``sex=Male``; categories sorted by name, the encoding ``certgate population
  fit`` gives raw string columns), the integer attributes (age, education-num, capital-gain,
  capital-loss, hours-per-week) as integer columns. The census file has 13 of PV's 14
  attributes: ``fnlwgt``, PV's one continuous attribute (a Beta in its network, the one
  column the reference conversion bins), is absent, so there are **103** columns, not 104.
  In its place ``capital-gain`` (118 distinct values, 0…99,999) is the one binned column: the
  fit's integer histogram (``--max-discrete-values 100``), with an atom at 0 (92 % of rows);
  every other integer attribute gets its empirical distribution value by value.
* **Population**: ``certgate population fit DATA --protected sex --max-discrete-values 100``
  (the CLI in this process): a Bayesian network over the 13 raw attributes whose structure
  pgmpy learns by hill climbing on BIC, ``sex`` a root and every attribute's parent.
* **Classifiers**: ReLU MLPs 103-10-2, 103-20-10-2 and 103-787-69-2, trained by
  :func:`benchmarks.adult_instances.train_network` (Adam, seed 0, 5 epochs as PV's
  787-69 net, 80 % of the rows; integer columns z-scored by a folded first layer), saved in
  certgate's JSON network format.
* **References**: the Monte Carlo truth of ``P[>50K | Female] / P[>50K | Male]`` on the
  population (:func:`benchmarks.adult_instances.monte_carlo_reference`, 10⁶ draws, exact tie
  rule) and the classifier's empirical ratio on the data rows.

Everything built is cached in :data:`benchmarks.adult_instances.CACHE_DIR` (untracked), keyed
by the data file's digest and :data:`CONSTRUCTION_VERSION`.

``run`` executes, per network and executor, ``python -m pipeline_steps verify
demographic-parity --protected sex=Male --privileged 1 --favorable-class 1 --gamma 0.8
--timeout T --json`` in a fresh interpreter (``--executor process --workers 2`` or
in-process; the CLI's defaults otherwise) and reports the verdict, the ratio interval, the
command's wall time, its process-plus-children CPU time, the boxes and the load average.

Usage (from the checkout root)::

    python -m benchmarks.pv_adult build
    python -m benchmarks.pv_adult run [--timeout 60] [--executor process local] [--net 10 ...]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.adult_instances import (
    CACHE_DIR,
    POSITIVE_LABEL,
    TARGET,
    AdultInstance,
    ParityReference,
    census_path,
    classify_favorable,
    load_census,
    monte_carlo_reference,
    network_label,
    train_network,
)

REPOSITORY = Path(__file__).resolve().parents[1]
CONSTRUCTION_VERSION = 1
ATTRIBUTES: tuple[str, ...] = (
    "age", "workclass", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
    "native-country",
)
NETWORKS: tuple[tuple[int, ...], ...] = ((10,), (20, 10), (787, 69))
SEED = 0
EPOCHS = 5
MAX_DISCRETE_VALUES = 100  # capital-gain (118 values) binned, the other integers per value
PROTECTED = "sex"
PRIVILEGED_COLUMN = "sex=Male"
UNPRIVILEGED_COLUMN = "sex=Female"
FAVORABLE_CLASS = 1
OUTPUT_NAMES = ("income<=50K", "income>50K")
GAMMA = 0.8
PV_MARGIN = 0.971 / 0.8  # the reference setup's smallest truth over its γ
STARTUP_TIMEOUT = 0.001
BUDGET_SLACK = 1.05  # issue 37: wall ≤ timeout × 1.05 + start-up
MC_SAMPLES = 1_000_000
MC_SEED = 20261128


@dataclass(frozen=True)
class PvAdultNet:
    """One built classifier of the setup, with its files and reference values."""

    hidden: tuple[int, ...]
    columns: int
    network_path: Path
    population_path: Path
    data_path: Path
    validation_accuracy: float
    empirical_ratio: float
    truth: ParityReference

    @property
    def label(self) -> str:
        return "-".join(str(size) for size in (self.columns, *self.hidden, 2))


def _stem(data: Path) -> str:
    digest = hashlib.sha256(data.read_bytes())
    digest.update(f"pv-adult/v{CONSTRUCTION_VERSION}/{SEED}/{EPOCHS}".encode())
    return f"pvadult-{digest.hexdigest()[:12]}"


def _certgate_in_process(argv: Sequence[str]) -> dict[str, Any]:
    """``certgate ARGV --json`` in this process; its JSON object (raises on an error)."""
    from pipeline_steps.cli import main as certgate

    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        code = certgate([*argv, "--json"])
    result = json.loads(output.getvalue())
    if code != 0 or "error" in result:
        raise RuntimeError(f"certgate {' '.join(argv)}: exit {code}, {result.get('error')}")
    return result


def build_population(frame: pd.DataFrame, cache_dir: Path, stem: str) -> tuple[Path, Path]:
    """The data table (the 13 raw attributes, no label) and the fitted population's file."""
    data = cache_dir / f"{stem}.data.csv"
    population = cache_dir / f"{stem}.population.json"
    if not data.is_file():
        temporary = data.with_suffix(f".{os.getpid()}.tmp")
        frame[list(ATTRIBUTES)].to_csv(temporary, index=False)
        temporary.replace(data)
    if not population.is_file():
        fitted = _certgate_in_process([
            "population", "fit", str(data), "--out", str(population), "--protected", PROTECTED,
            "--max-discrete-values", str(MAX_DISCRETE_VALUES)])
        print(f"population: {len(fitted['columns'])} columns, fitted in "
              f"{fitted['fit_seconds']:.1f} s; edges "
              f"{', '.join(f'{a} -> {b}' for a, b in fitted['edges'])}", file=sys.stderr)
    return data, population


def empirical_ratio(network: Any, encoded: pd.DataFrame, columns: Sequence[str]) -> float:
    """The classifier's ``P[fav | Female] / P[fav | Male]`` over the data rows (classes
    decided exactly at float ties)."""
    favorable = classify_favorable(network, encoded[list(columns)].to_numpy(dtype=np.float64),
                                   FAVORABLE_CLASS)
    female = encoded[UNPRIVILEGED_COLUMN].to_numpy() == 1
    return float(favorable[female].mean() / favorable[~female].mean())


def build(cache_dir: Path = CACHE_DIR, samples: int = MC_SAMPLES,
          networks: Sequence[tuple[int, ...]] = NETWORKS) -> list[PvAdultNet]:
    """Build (or read from ``cache_dir``) the population and the classifiers of
    ``networks`` (module docstring)."""
    from certgate.population_data import encode_strings
    from verifier.convert import network_from_json, network_to_json
    from verifier.population import load_population

    source = census_path()
    cache_dir.mkdir(parents=True, exist_ok=True)
    stem = _stem(source)
    frame = load_census(source)
    data, population_path = build_population(frame, cache_dir, stem)
    population = load_population(population_path)
    features = list(population.features)
    columns = [c for f in features for c in f.column_names()]
    if columns != list(population.columns):
        raise RuntimeError("the population's features and columns disagree on the order")
    encoded, _ = encode_strings(frame[list(ATTRIBUTES)])
    labels = (frame[TARGET] == POSITIVE_LABEL).to_numpy(dtype=np.int64)
    built = []
    for hidden in networks:
        sizes = "x".join(str(h) for h in hidden)
        network_path = cache_dir / f"{stem}-h{sizes}.network.json"
        meta_path = cache_dir / f"{stem}-h{sizes}.meta-mc{samples}-{MC_SEED}.json"
        if network_path.is_file() and meta_path.is_file():
            network = network_from_json(json.loads(network_path.read_text(encoding="utf-8")))
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            meta["truth"]["joint"] = tuple(meta["truth"]["joint"])
            truth = ParityReference(**meta["truth"])
        else:
            network, accuracy = train_network(encoded, features, labels, hidden, SEED, EPOCHS)
            instance = AdultInstance(
                k=len(ATTRIBUTES), hidden=hidden, seed=SEED, epochs=EPOCHS,
                variables=ATTRIBUTES, columns=tuple(columns), network=network,
                population=population, protected=PRIVILEGED_COLUMN, privileged=1.0,
                favorable_class=FAVORABLE_CLASS, validation_accuracy=accuracy)
            truth = monte_carlo_reference(instance, samples, MC_SEED)
            meta = {"validation_accuracy": accuracy,
                    "empirical_ratio": empirical_ratio(network, encoded, columns),
                    "truth": asdict(truth)}
            network_path.write_text(json.dumps(network_to_json(network)) + "\n",
                                    encoding="utf-8")
            meta_path.write_text(json.dumps(meta) + "\n", encoding="utf-8")
        if list(network.input_names) != columns:
            raise RuntimeError(f"{network_path}: inputs differ from the population's columns")
        built.append(PvAdultNet(
            hidden=hidden, columns=len(columns), network_path=network_path,
            population_path=population_path, data_path=data,
            validation_accuracy=meta["validation_accuracy"],
            empirical_ratio=meta["empirical_ratio"], truth=truth))
    return built


def verify_command(net: PvAdultNet, timeout: float, executor: str, workers: int,
                   gamma: float = GAMMA, extra: Sequence[str] = ()) -> list[str]:
    """The CLI command a user runs on ``net`` (CLI defaults but for the executor and
    ``extra`` options)."""
    command = [
        sys.executable, "-m", "pipeline_steps", "verify", "demographic-parity",
        "--model", str(net.network_path), "--population", str(net.population_path),
        "--protected", PRIVILEGED_COLUMN, "--privileged", "1",
        "--favorable-class", str(FAVORABLE_CLASS), "--gamma", f"{gamma:.4f}",
        "--timeout", str(timeout), "--json", "--no-progress", *extra,
    ]
    if executor != "local":
        command += ["--executor", executor, "--workers", str(workers)]
    return command


def run_verify(net: PvAdultNet, timeout: float, executor: str, workers: int,
               gamma: float = GAMMA, extra: Sequence[str] = ()) -> dict[str, Any]:
    """One CLI run in a fresh interpreter: its JSON plus the wall time, the CPU time of the
    command and every process it started, and the 1-minute load before and after."""
    load_before = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(
        verify_command(net, timeout, executor, workers, gamma, extra), capture_output=True,
        text=True, cwd=REPOSITORY, check=False,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY), "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        result = json.loads(completed.stdout)
    except json.JSONDecodeError as error:
        raise RuntimeError(f"no JSON from the CLI: {completed.stderr[-800:]}") from error
    if "error" in result:
        raise RuntimeError(f"the CLI failed: {result['error']}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**result, "gamma": gamma, "wall_s": wall, "cpu_s": cpu, "load_before": load_before,
            "load_after": os.getloadavg()[0]}


def anytime(net: PvAdultNet, cpu_budget: float, gamma: float,
            variant: dict[str, Any]) -> list[tuple[float, tuple[float, float], int]]:
    """In this process (one torch thread): PV on ``net`` with the CLI's settings changed by
    ``variant`` (:class:`verifier.pv.PVSettings` fields), stopped once this process has
    spent ``cpu_budget`` CPU seconds in PV; the (CPU seconds, ratio interval, boxes) of every
    progress report, for comparisons at equal CPU."""
    import torch

    from verifier.audits.demographic_parity import demographic_parity_audit
    from verifier.convert import network_from_json
    from verifier.population import load_population
    from verifier.pv import PVProgress, PVSettings

    torch.set_num_threads(1)
    network = network_from_json(json.loads(net.network_path.read_text(encoding="utf-8")))
    population = load_population(net.population_path)
    curve: list[tuple[float, tuple[float, float], int]] = []
    started = time.process_time()

    def record(report: PVProgress) -> None:
        low, high = report.value
        curve.append((time.process_time() - started, (float(low), float(high)), report.boxes))
        if curve[-1][0] >= cpu_budget:
            raise _CpuBudgetReached

    with contextlib.suppress(_CpuBudgetReached):
        demographic_parity_audit(
            network, population, protected=PRIVILEGED_COLUMN, privileged=1.0,
            favorable_class=FAVORABLE_CLASS, gamma=gamma, progress=record,
            settings=PVSettings(timeout_s=None, **variant))
    return curve


class _CpuBudgetReached(Exception):
    """Raised from a progress report to end an :func:`anytime` run at its CPU budget."""


def at_cpu(curve: list[tuple[float, tuple[float, float], int]],
           seconds: float) -> tuple[tuple[float, float], int] | None:
    """The last interval reported within ``seconds`` of CPU, and its boxes."""
    within = [(interval, boxes) for cpu, interval, boxes in curve if cpu <= seconds]
    return within[-1] if within else None


def _interval(bounds: Sequence[float]) -> str:
    low, high = (float(b) for b in bounds)
    return f"[{low:.3f}, {high:.3f}]"


HEADER = ("| network | val. acc. | truth (MC) | data ratio | γ | executor | verdict | ratio "
          "interval | PV elapsed | wall | CPU (process + children) | boxes | load | start-up "
          "| wall ≤ T × 1.05 + start-up |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def row_text(net: PvAdultNet, executor: str, result: dict[str, Any], timeout: float) -> str:
    truth = f"{net.truth.ratio:.3f} ± {net.truth.ratio_se:.3f}"
    return (f"| {net.label} | {net.validation_accuracy:.3f} | {truth} | "
            f"{net.empirical_ratio:.3f} | {result['gamma']:.3f} | {executor} | "
            f"{result['verdict']} | "
            f"{_interval(result['ratio'])} | {result['elapsed_s']:.1f} s | "
            f"{result['wall_s']:.1f} s | {result['cpu_s']:.1f} s | {result['boxes']} | "
            f"{result['load_before']:.1f}–{result['load_after']:.1f} | "
            f"{_budget_text(result, timeout)}")


def _budget_text(result: dict[str, Any], timeout: float) -> str:
    if "startup_s" not in result:
        return "– | – |"
    limit = timeout * BUDGET_SLACK + result["startup_s"]
    kept = "yes" if result["wall_s"] <= limit else "**no**"
    return f"{result['startup_s']:.1f} s | {kept} ({limit:.1f} s) |"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("build", "run", "anytime"))
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--executor", nargs="+", choices=("process", "local"),
                        default=["process", "local"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--gamma", type=float, default=GAMMA,
                        help=f"the threshold (default {GAMMA:g})")
    parser.add_argument("--pv-margin", action="store_true",
                        help="instead of --gamma, each network's MC truth divided by "
                             f"{PV_MARGIN:g}: PV's setup's margin (truths 0.971-0.997 at 0.8)")
    parser.add_argument("--net", nargs="+", choices=[network_label(h) for h in NETWORKS],
                        help="networks to run (hidden sizes, e.g. 1×10 or 787-69)")
    parser.add_argument("--samples", type=int, default=MC_SAMPLES)
    parser.add_argument("--cache", type=Path, default=CACHE_DIR)
    parser.add_argument("--startup", action="store_true",
                        help=f"before each run, time the same command with --timeout "
                             f"{STARTUP_TIMEOUT:g} (its start-up), and check the budget")
    parser.add_argument("--cpu", type=float, nargs="+", default=[10.0, 20.0, 40.0],
                        help="anytime: CPU seconds to read the interval at (the last is the "
                             "budget)")
    parser.add_argument("--variant", type=json.loads, default={},
                        help='anytime: PVSettings fields as JSON, e.g. \'{"linear_credit": '
                             'false}\'')
    parser.add_argument("--cli", default="", help='run: further CLI options, e.g. '
                        '--cli="--no-linear-credit"')
    parser.add_argument("--json", action="store_true", help="one JSON object per run")
    args = parser.parse_args(argv)
    extra = shlex.split(args.cli)
    chosen = [h for h in NETWORKS if not args.net or network_label(h) in args.net]
    nets = build(args.cache, args.samples, chosen)
    if args.action == "build":
        for net in nets:
            print(f"{net.label}: {net.network_path.name}, validation accuracy "
                  f"{net.validation_accuracy:.3f}, truth {net.truth.ratio:.4f} ± "
                  f"{net.truth.ratio_se:.4f} (MC {net.truth.samples:.0e}), data ratio "
                  f"{net.empirical_ratio:.4f}")
        return 0
    if args.action == "anytime":
        return _print_anytime(nets, args)
    if not args.json:
        print(HEADER, flush=True)
    for net in nets:
        for executor in args.executor:
            gamma = net.truth.ratio / PV_MARGIN if args.pv_margin else args.gamma
            startup = (run_verify(net, STARTUP_TIMEOUT, executor, args.workers, gamma, extra)
                       if args.startup else None)
            result = run_verify(net, args.timeout, executor, args.workers, gamma, extra)
            if startup is not None:
                result["startup_s"] = startup["wall_s"]
            if args.json:
                print(json.dumps({"network": net.label, "executor": executor,
                                  "truth": asdict(net.truth),
                                  "empirical_ratio": net.empirical_ratio, **result}),
                      flush=True)
            else:
                print(row_text(net, executor, result, args.timeout), flush=True)
    return 0


def _print_anytime(nets: Sequence[PvAdultNet], args: argparse.Namespace) -> int:
    for net in nets:
        gamma = net.truth.ratio / PV_MARGIN if args.pv_margin else args.gamma
        curve = anytime(net, max(args.cpu), gamma, args.variant)
        cells = []
        for seconds in args.cpu:
            found = at_cpu(curve, seconds)
            cells.append("–" if found is None
                         else f"{_interval(found[0])} ({found[1]:,} boxes)")
        print(f"| {net.label} | γ {gamma:.3f} | {json.dumps(args.variant) or 'CLI'} | "
              + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
