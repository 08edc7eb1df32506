"""PV on a model that reads several continuous columns of a raw table, as users build it: a
synthetic CSV, ``certgate population fit`` with its default options, a torch MLP reading every
column, demographic parity at γ 0.1 below and 0.05 above the Monte Carlo truth.

The table (seeded, 6,000 rows, 20 raw columns): a binary protected ``g`` (a third of the rows
in group 1, the unprivileged one); five numeric columns correlated with ``g`` and with each
other — ``age`` (integer), ``hours``, ``amount`` (log-normal), ``income`` (log-normal) and
``tenure`` (continuous, 2 decimals) — and 14 string columns of 3–5 values, some tied to ``g``
or to a numeric column. The label is a logistic draw of the numeric columns and four of the
categories. The model (:func:`benchmarks.numeric_dependence.train`: a standardising layer,
``--layers`` hidden layers of 16 ReLUs, two logits) reads all 57 encoded columns. The truth is
the model's ratio on 1,000,000 draws of the fitted file by
:func:`benchmarks.numeric_dependence.sample` (which reads the JSON itself), through torch.

Sub-commands (from the checkout root; ``build`` writes into ``--workdir``, the default
``benchmarks/.pv_numeric_cache``)::

    python -m benchmarks.pv_numeric build [--layers 2]
    python -m benchmarks.pv_numeric verify --timeout 60 [--workers 2] [--side below|above]
    python -m benchmarks.pv_numeric where --cpu 60 --side above

``verify`` runs ``certgate verify demographic-parity`` (``--json``) at each γ and prints the
verdict, the ratio and the two conditional probabilities, the boxes and the CPU of the process
tree. ``where`` runs PV in this process (one thread) for ``--cpu`` CPU seconds and reads its
open boxes: their open mass (upper mass less credits) by depth, and per numeric column the
open mass's mean side as a share of the column's root width, the share of open mass on boxes
where that column is the widest relative side, and the share where smear would cut it next.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.numeric_dependence import encoded, sample, train

CACHE = Path(__file__).resolve().parent / ".pv_numeric_cache"
NUMERIC = ("age", "hours", "amount", "income", "tenure")
DRAWS = 1_000_000


def table(rows: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The raw table of the module docstring and its labels."""
    rng = np.random.default_rng(seed)
    g = (rng.random(rows) < 1 / 3).astype(np.int64)
    z = rng.multivariate_normal(np.zeros(4), 0.5 * np.eye(4) + 0.5, rows)
    age = np.clip(np.round(40 + 11 * z[:, 0] - 3 * g), 18, 80).astype(np.int64)
    hours = np.clip(38 + 8 * z[:, 1] - 4 * g, 1, 99).round(1)
    income = np.exp(10.3 + 0.5 * z[:, 2] + 0.2 * z[:, 0] - 0.35 * g).round(2)
    amount = np.exp(6 + 0.9 * z[:, 3] + 0.3 * z[:, 2]).round(2)
    tenure = np.clip(4 + 3 * (0.6 * z[:, 0] + 0.8 * rng.normal(size=rows)) - g, 0, 30).round(2)
    frame = pd.DataFrame({"g": g, "age": age, "hours": hours, "amount": amount,
                          "income": income, "tenure": tenure})
    effects = np.zeros(rows)
    for index in range(14):
        values = [f"v{k}" for k in range(3 + index % 3)]
        tie = g if index % 3 == 0 else (z[:, index % 4] > 0).astype(np.int64)
        p = np.full(len(values), 1.0)
        weights = np.where(tie[:, None] == 1, np.roll(p + np.arange(len(values)), 1),
                           p + np.arange(len(values)))
        weights = weights / weights.sum(axis=1, keepdims=True)
        draws = (weights.cumsum(axis=1) < rng.random(rows)[:, None]).sum(axis=1)
        frame[f"c{index}"] = np.array(values)[draws]
        if index < 4:
            effects += 0.6 * (draws == 0) - 0.4 * (draws == len(values) - 1)
    score = (0.9 * (np.log(income) - 10.3) / 0.5 + 0.5 * (hours - 38) / 8
             + 0.3 * (age - 40) / 11 + 0.3 * (tenure - 4) / 3 + 0.2 * (np.log(amount) - 6)
             + effects - 0.8)
    labels = (rng.random(rows) < 1 / (1 + np.exp(-score))).astype(np.int64)
    return frame, labels


def rates(module: Any, drawn: pd.DataFrame, columns: list[str]) -> dict[str, float]:
    """The model's ratio and favourable rates per group on the draws, with the ratio's
    standard error (delta method)."""
    import torch

    with torch.no_grad():
        favourable = module(torch.tensor(drawn[columns].to_numpy(np.float64))
                            ).argmax(1).numpy() == 1
    group = drawn["g"].to_numpy() == 1
    unprivileged, privileged = favourable[group].mean(), favourable[~group].mean()
    ratio = unprivileged / privileged
    se = ratio * np.sqrt((1 - unprivileged) / (unprivileged * group.sum())
                         + (1 - privileged) / (privileged * (~group).sum()))
    return {"ratio": float(ratio), "ratio_se": float(se), "p_unprivileged": float(unprivileged),
            "p_privileged": float(privileged)}


def build(args: argparse.Namespace) -> None:
    """Writes ``data.csv``, ``net.json`` (the trained model), ``net_numeric.json`` (the same
    model with its first layer's weights on the categorical columns zeroed: it reads ``g`` and
    the numeric columns only), ``pop.json`` (the default fit) and ``truth.json`` (the Monte
    Carlo ratio and rates of both) into the work directory."""
    import torch

    from verifier.convert import save_network
    from verifier.convert.torch_module import from_torch

    torch.set_num_threads(1)
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    frame, labels = table(6000, seed=0)
    frame.to_csv(work / "data.csv", index=False)
    x = encoded(frame)
    columns = list(x.columns)
    module = train(x, labels, args.layers, seed=1)
    save_network(from_torch(module, columns, ["no", "yes"]), work / "net.json")
    numeric = copy.deepcopy(module)
    with torch.no_grad():
        # layer 0 standardises column by column, so layer 1's columns are the inputs'
        numeric[1].weight[:, ["=" in name for name in columns]] = 0.0
    save_network(from_torch(numeric, columns, ["no", "yes"]), work / "net_numeric.json")
    fit = certgate("population", "fit", str(work / "data.csv"), "--model",
                   str(work / "net.json"), "--protected", "g", "--out", str(work / "pop.json"))
    drawn = sample(work / "pop.json", DRAWS, seed=2)
    truth = {"net": rates(module, drawn, columns),
             "net_numeric": rates(numeric, drawn, columns), "columns": len(columns),
             "edges": fit.get("edges"), "fit_seconds": fit.get("fit_seconds"),
             "data_ratio": float(labels[frame["g"] == 1].mean()
                                 / labels[frame["g"] == 0].mean())}
    (work / "truth.json").write_text(json.dumps(truth, indent=1))
    print(json.dumps(truth))


def certgate(*argv: str) -> dict:
    """``python -m pipeline_steps ARGV --json`` in this checkout."""
    result = subprocess.run([sys.executable, "-m", "pipeline_steps", *argv, "--json"],
                            capture_output=True, text=True, check=False)
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError as error:
        raise SystemExit(f"{argv}: {result.stdout[-400:]}{result.stderr[-800:]}") from error


def gammas(work: Path, net: str, side: str) -> dict[str, float]:
    """γ 0.1 below and 0.05 above model ``net``'s Monte Carlo ratio (4 decimals)."""
    ratio = json.loads((work / "truth.json").read_text())[net]["ratio"]
    chosen = {"below": round(ratio - 0.1, 4), "above": round(ratio + 0.05, 4)}
    return chosen if side == "both" else {side: chosen[side]}


def verify(args: argparse.Namespace) -> None:
    """The CLI audit at each γ: one line each."""
    work = args.workdir
    executor = ["--executor", "process", "--workers", str(args.workers)] if args.workers else []
    budget = ["--max-open-boxes", str(args.max_open_boxes)] if args.max_open_boxes else []
    for side, gamma in gammas(work, args.net, args.side).items():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load = os.getloadavg()[0]
        started = time.perf_counter()
        audit = certgate("verify", "demographic-parity", "--model", str(work / f"{args.net}.json"),
                         "--population", str(work / "pop.json"), "--protected", "g",
                         "--privileged", "0", "--favorable-class", "1", "--gamma", str(gamma),
                         "--timeout", str(args.timeout), "--no-progress", *executor, *budget)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        if "verdict" not in audit:
            raise SystemExit(json.dumps(audit)[:800])
        p = audit.get("probabilities", {})
        print(f"{side} γ {gamma}: {audit['verdict']} ratio [{audit['ratio'][0]:.4f}, "
              f"{audit['ratio'][1]:.4f}]; " + "; ".join(
                  f"{name} [{low:.4f}, {high:.4f}]" for name, (low, high) in p.items())
              + f"; {audit.get('boxes_processed', audit.get('boxes'))} boxes; "
              f"{cpu:.1f} CPU s, {wall:.1f} s wall; load {load:.1f}", flush=True)


def where(args: argparse.Namespace) -> None:
    """Where the open mass sits after ``--cpu`` CPU seconds of in-process PV."""
    import torch

    from benchmarks.pv_line_gap import _capturing, _Stop
    from verifier.audits.demographic_parity import demographic_parity_audit
    from verifier.convert import network_from_json
    from verifier.population import load_population
    from verifier.pv import PVSettings

    torch.set_num_threads(1)
    work = args.workdir
    gamma = gammas(work, args.net, args.side)[args.side]
    network = network_from_json(json.loads((work / f"{args.net}.json").read_text("utf-8")))
    population = load_population(work / "pop.json")
    started = time.process_time()
    reports: list[Any] = []

    def record(report: Any) -> None:
        reports.append(report)
        if time.process_time() - started >= args.cpu:
            raise _Stop

    with _capturing() as captured, contextlib.suppress(_Stop):
        demographic_parity_audit(network, population, protected="g", privileged=0.0,
                                 favorable_class=1, gamma=gamma, progress=record,
                                 settings=PVSettings(timeout_s=None))
    engine, pool = captured.engines[-1], captured.pools[-1]
    boxes = pool.view(np.flatnonzero(pool.alive[: pool.used]))
    report = reports[-1]
    print(f"γ {gamma}, {time.process_time() - started:.1f} CPU s, {len(boxes.lo)} open boxes; "
          f"last report: {report}")
    credit = np.maximum(boxes.credit_true, boxes.credit_false).max(axis=1) \
        if boxes.credit_true.ndim == 2 else boxes.credit_true
    open_mass = np.maximum(boxes.mass_hi - credit, 0.0)
    total = open_mass.sum()
    print(f"open mass {total:.4f} (upper masses {boxes.mass_hi.sum():.4f})")
    for low, high in ((0, 10), (10, 15), (15, 20), (20, 25), (25, 30), (30, 40), (40, 99)):
        at = (boxes.depth >= low) & (boxes.depth < high)
        print(f"  depth {low}–{high - 1}: {at.sum()} boxes, open mass "
              f"{open_mass[at].sum() / total:.3f}")
    splitter = engine.splitter
    relative = (boxes.hi - boxes.lo) / splitter.root_width[None, :]
    dims = splitter.choose_dims(boxes.lo, boxes.hi, boxes.depth, boxes.atoms, boxes.guide)
    candidates = splitter.candidates(boxes.lo, boxes.hi)
    widest = np.argmax(np.where(candidates, relative, -np.inf), axis=1)
    columns = json.loads((work / "net.json").read_text())["inputs"]
    smear = splitter._group_scores(boxes.guide * np.minimum(boxes.hi - boxes.lo, 1e300),
                                   boxes.lo, boxes.hi, boxes.guide)
    smear = np.where(candidates, smear, 0.0)
    smear = smear / np.maximum(smear.sum(axis=1, keepdims=True), 1e-300)
    for name in NUMERIC:
        d = columns.index(name)
        print(f"  {name}: mean relative side {np.average(relative[:, d], weights=open_mass):.3f}"
              f" (median {np.median(relative[:, d]):.3f}); open mass where widest "
              f"{open_mass[widest == d].sum() / total:.3f}, cut next "
              f"{open_mass[dims == d].sum() / total:.3f}, share of drive × width "
              f"{np.average(smear[:, d], weights=open_mass):.3f}")
    other = ~np.isin(dims, [columns.index(name) for name in NUMERIC])
    numeric_share = smear[:, [columns.index(name) for name in NUMERIC]].sum(axis=1)
    groups = [splitter.group_allowed(boxes.lo, boxes.hi, g).sum(axis=1) >= 2
              for g in range(len(engine.domain.groups))]
    print(f"  cut next on a categorical column: {open_mass[other].sum() / total:.3f}; "
          f"categorical share of drive × width "
          f"{1 - np.average(numeric_share, weights=open_mass):.3f}; one-hot groups still "
          f"open per box {np.average(np.sum(groups, axis=0), weights=open_mass):.1f} of "
          f"{len(groups)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build", "verify", "where"))
    parser.add_argument("--workdir", type=Path, default=CACHE)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--net", choices=("net", "net_numeric"), default="net")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--max-open-boxes", type=int, default=0)
    parser.add_argument("--side", choices=("below", "above", "both"), default="both")
    parser.add_argument("--cpu", type=float, default=60.0)
    args = parser.parse_args()
    if args.command == "where" and args.side == "both":
        args.side = "above"
    {"build": build, "verify": verify, "where": where}[args.command](args)


if __name__ == "__main__":
    main()
