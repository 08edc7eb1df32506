"""Two correlated numeric columns through the default population fit: joint rule rates and a
model's favourable rates per group on the fitted population against the data's rows, and the
parity verdict at a threshold between the two.

Tables (seeded): ``pair`` — a binary protected ``g`` (share ``--group``), ``x1`` normal and
0.6 lower in the group, ``x2 = ρ·x1 + √(1 − ρ²)·ε`` (continuous, or the integer
``round(50 + 10·x2)`` with ``--integer``), a string ``job`` of 3 values and an independent
integer ``z``; ``groupwise`` — the same with ``ρ`` 0.9 in the group and 0.3 outside; Adult —
the census columns of ``benchmarks/population_default_fit.py``. A ReLU MLP (2–4 hidden
layers) is trained on the joint tail rule ``x1 > t1 and x2 > t2`` (Adult: ``education-num >=
13 and hours-per-week >= 45``, or the ``earning`` label), with 5 % of the labels flipped.

Then ``certgate population fit DATA --out pop.json`` (default options) of the checkout given
by ``--root`` (the one that fits: before/after), and 400,000 draws of the fitted file by the
sampler below, which reads the JSON itself (no ``verifier.population`` code). Each row
prints the rule's and the model's favourable rate per group, data against population, in
standard errors of the data's rate, and the two ratios. With ``--verify``, ``certgate
verify demographic-parity --data`` at γ half-way between the two ratios, from the same
checkout (``--gammas RESULTS``: at the thresholds of an earlier run's ``results.json``, for a
before/after pair). Run from a checkout root::

    python benchmarks/numeric_dependence.py --root OLD --workdir /tmp/old --verify
    python benchmarks/numeric_dependence.py --root . --workdir /tmp/new --verify \
        --gammas /tmp/old/results.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

CENSUS = (Path(__file__).resolve().parents[1]
          / "../shared/benchmarks/libra/census/data/census.csv").resolve()
DRAWS = 400_000


def synthetic(rows: int, group: float, rho: float, integer: bool, groupwise: bool,
              seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The ``pair`` / ``groupwise`` table (module docstring) and its rule's labels."""
    rng = np.random.default_rng(seed)
    g = (rng.random(rows) < group).astype(np.int64)
    x1 = rng.normal(0.0, 1.0, rows) - 0.6 * g
    r = np.where(g == 1, 0.9, 0.3) if groupwise else np.full(rows, rho)
    x2 = r * (x1 + 0.6 * g) + np.sqrt(1 - r**2) * rng.normal(0.0, 1.0, rows) - 0.6 * g
    job = rng.choice(["clerk", "driver", "nurse"], rows)
    frame = pd.DataFrame({"g": g, "x1": x1.round(6), "job": job,
                          "z": rng.integers(0, 6, rows)})
    frame["x2"] = np.round(50 + 10 * x2).astype(np.int64) if integer else x2.round(6)
    cut2 = 58 if integer else 0.8
    labels = ((frame["x1"] > 0.8) & (frame["x2"] > cut2)).to_numpy(dtype=np.int64)
    return frame, labels


def adult(label: str) -> tuple[pd.DataFrame, np.ndarray]:
    """The census table's 7 raw columns and the rule's (or ``earning``'s) labels."""
    census = pd.read_csv(CENSUS, skipinitialspace=True)
    frame = census[["age", "education-num", "hours-per-week", "capital-gain", "capital-loss",
                    "sex", "race"]].copy()
    if label == "earning":
        return frame, (census["earning"].astype(str) == ">50K").to_numpy(dtype=np.int64)
    rule = (frame["education-num"] >= 13) & (frame["hours-per-week"] >= 45)
    return frame, rule.to_numpy(dtype=np.int64)


def encoded(frame: pd.DataFrame) -> pd.DataFrame:
    """Raw strings one-hot as ``COL=VALUE`` in place, values sorted (the fit's encoding)."""
    parts = []
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            for value in sorted(frame[column].unique()):
                parts.append((frame[column] == value).astype(np.int64).rename(
                    f"{column}={value}"))
        else:
            parts.append(frame[column])
    return pd.concat(parts, axis=1)


def train(x: pd.DataFrame, labels: np.ndarray, layers: int, seed: int) -> torch.nn.Sequential:
    """A ``layers``-hidden-layer ReLU MLP (16 wide) behind a fixed standardising layer, trained
    on ``labels`` with 5 % flipped (Adam, seeded)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    flipped = np.where(rng.random(labels.size) < 0.05, 1 - labels, labels)
    inputs = torch.tensor(x.to_numpy(dtype=np.float64))
    targets = torch.tensor(flipped)
    mean, std = inputs.mean(0), inputs.std(0).clamp_min(1e-6)
    scale = torch.nn.Linear(inputs.shape[1], inputs.shape[1]).double()
    with torch.no_grad():
        scale.weight.copy_(torch.diag(1.0 / std))
        scale.bias.copy_(-mean / std)
    scale.requires_grad_(False)
    hidden: list[torch.nn.Module] = []
    width = inputs.shape[1]
    for _ in range(layers):
        hidden += [torch.nn.Linear(width, 16).double(), torch.nn.ReLU()]
        width = 16
    module = torch.nn.Sequential(scale, *hidden, torch.nn.Linear(16, 2).double())
    optimiser = torch.optim.Adam([p for p in module.parameters() if p.requires_grad], lr=3e-3)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(12):
        for batch in torch.randperm(len(inputs), generator=generator).split(256):
            optimiser.zero_grad()
            torch.nn.functional.cross_entropy(module(inputs[batch]), targets[batch]).backward()
            optimiser.step()
    return module.eval()


def _draw(spec: dict, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` draws of one marginal written in the population format (``[count, width]``)."""
    kind = spec["kind"]
    if kind == "point":
        return np.full((count, 1), float(spec["value"]))
    if kind == "uniform":
        return rng.uniform(spec["lower"], spec["upper"], (count, 1))
    if kind == "discrete":
        p = np.asarray(spec["probabilities"])
        return np.asarray(spec["values"], dtype=np.float64)[
            rng.choice(p.size, count, p=p / p.sum())][:, None]
    if kind == "categorical":
        p = np.asarray(spec["probabilities"])
        return np.eye(p.size)[rng.choice(p.size, count, p=p / p.sum())]
    if kind == "integer_histogram":
        p = np.asarray(spec["probabilities"])
        bins = np.asarray(spec["bins"], dtype=np.int64)[rng.choice(p.size, count, p=p / p.sum())]
        return (bins[:, 0] + np.floor(rng.random(count) * (bins[:, 1] - bins[:, 0] + 1)))[:, None]
    if kind == "mixture":
        p = np.asarray(spec["weights"])
        which = rng.choice(p.size, count, p=p / p.sum())
        out = np.empty((count, 1))
        for index, component in enumerate(spec["components"]):
            chosen = which == index
            if chosen.any():
                out[chosen] = _draw(component, int(chosen.sum()), rng)
        return out
    raise SystemExit(f"the sampler does not read {kind!r}")


def sample(path: Path, count: int, seed: int) -> pd.DataFrame:
    """``count`` draws of the Bayesian network in ``path`` (columns as in the file, coded
    columns in the data's units)."""
    document = json.loads(path.read_text())
    rng = np.random.default_rng(seed)
    values: dict[str, np.ndarray] = {}
    columns: dict[str, np.ndarray] = {}
    for node in document["distribution"]["nodes"]:
        width = len(node["columns"])
        out = np.empty((count, width))
        assigned = np.zeros(count, dtype=bool)
        for row in node["cpt"]:
            chosen = ~assigned
            for parent, (low, high) in row["condition"].items():
                low = -np.inf if low is None else low
                high = np.inf if high is None else high
                chosen &= (values[parent] >= low) & (values[parent] <= high)
            if chosen.any():
                out[chosen] = _draw(row["distribution"], int(chosen.sum()), rng)
                assigned |= chosen
        if not assigned.all():
            raise SystemExit(f"node {node['name']}: {int((~assigned).sum())} draws match no row")
        values[node["name"]] = out.argmax(1) if width > 1 else out[:, 0]
        for index, column in enumerate(node["columns"]):
            columns[column] = out[:, index]
    for feature in document["features"]:
        if feature.get("step"):
            name = feature["name"]
            columns[name] = feature.get("offset", 0.0) + feature["step"] * columns[name]
    names = [c for f in document["features"] for c in (f.get("columns") or [f["name"]])]
    return pd.DataFrame({c: columns[c] for c in names})


def rates(module: torch.nn.Sequential, x: pd.DataFrame, rule: np.ndarray, group: np.ndarray
          ) -> dict[str, tuple[float, float]]:
    """The rule's and the model's favourable rates in the group and outside it."""
    with torch.no_grad():
        favourable = module(torch.tensor(x.to_numpy(dtype=np.float64))).argmax(1).numpy()
    return {"rule": (float(rule[group].mean()), float(rule[~group].mean())),
            "model": (float(favourable[group].mean()), float(favourable[~group].mean()))}


def certgate(root: Path, *argv: str) -> dict:
    """``python -m pipeline_steps ARGV --json`` run in checkout ``root``."""
    result = subprocess.run([sys.executable, "-m", "pipeline_steps", *argv, "--json"],
                            capture_output=True, text=True, cwd=root, check=False,
                            env={**os.environ, "PYTHONPATH": str(root)})
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError as error:
        raise SystemExit(f"{argv}: {result.stdout[-400:]}{result.stderr[-800:]}") from error


def case(args: argparse.Namespace, name: str, frame: pd.DataFrame, labels: np.ndarray,
         rule: np.ndarray, group: np.ndarray, protected: str, privileged: str,
         layers: int) -> None:
    """Fit, draw, compare and (``--verify``) audit one table; prints one line."""
    from verifier.convert import save_network
    from verifier.convert.torch_module import from_torch

    workdir = args.workdir / name
    workdir.mkdir(parents=True, exist_ok=True)
    frame.to_csv(workdir / "data.csv", index=False)
    x = encoded(frame)
    module = train(x, labels, layers, seed=1)
    save_network(from_torch(module, list(x.columns), ["no", "yes"]), workdir / "net.json")
    started = time.perf_counter()
    fit = certgate(args.root, "population", "fit", str(workdir / "data.csv"), "--model",
                   str(workdir / "net.json"), "--out", str(workdir / "pop.json"))
    wall = time.perf_counter() - started
    drawn = sample(workdir / "pop.json", DRAWS, seed=2)
    on_data = rates(module, x, rule, group)
    d_group = drawn[protected].to_numpy() != float(privileged)
    d_rule = args.rule_of(drawn)
    on_population = rates(module, drawn[list(x.columns)], d_rule, d_group)
    line = [f"{name}: fit {fit.get('fit_seconds', float('nan')):.2f} s ({wall:.1f} s wall), "
            f"edges {fit.get('edges')}"]
    ratios = {}
    for what in ("rule", "model"):
        (dg, dr), (pg, pr) = on_data[what], on_population[what]
        se = np.sqrt(max(dg * (1 - dg), 1e-12) / group.sum())
        ratios[what] = (dg / dr, pg / pr)
        line.append(f"  {what}: group {dg:.4f} / {pg:.4f} ({(pg - dg) / se:+.1f} SE), rest "
                    f"{dr:.4f} / {pr:.4f}; ratio data {dg / dr:.4f}, population {pg / pr:.4f}")
    record: dict[str, float] = {"fit_seconds": fit.get("fit_seconds", float("nan"))}
    if args.verify:
        data_ratio, population_ratio = ratios["model"]
        gamma = args.gammas.get(name, {}).get("gamma") or \
            round((data_ratio + population_ratio) / 2, 4)
        record["gamma"] = gamma
        audit = certgate(args.root, "verify", "demographic-parity", "--model",
                         str(workdir / "net.json"), "--population", str(workdir / "pop.json"),
                         "--protected", protected, "--privileged", privileged,
                         "--favorable-class", "1", "--gamma", str(gamma), "--timeout", "60",
                         "--precision", "0.001", "--data", str(workdir / "data.csv"))
        if "verdict" not in audit:
            raise SystemExit(f"{name}: {json.dumps(audit)[:600]}")
        low, high = audit["ratio"]
        line.append(f"  verify at γ {gamma}: {audit['verdict']} [{low:.4f}, {high:.4f}], "
                    f"{audit['elapsed_s']:.1f} s; fidelity "
                    f"{audit['population_fidelity']['status']} (data "
                    f"{audit['population_fidelity'].get('empirical')})")
        record.update(verdict=audit["verdict"], low=low, high=high)
    args.results[name] = record
    print("\n".join(line), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--verify", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--gammas", type=Path,
                        help="a previous run's results.json: audit at its thresholds")
    args = parser.parse_args()
    args.gammas = json.loads(args.gammas.read_text()) if args.gammas else {}
    args.results = {}
    cases = []
    for rows, share, rho, integer, groupwise, layers in [
            (4000, 0.05, 0.8, False, False, 2), (4000, 0.1, 0.8, False, False, 3),
            (4000, 0.25, 0.8, False, False, 4), (4000, 0.1, 0.9, True, False, 2),
            (4000, 0.25, 0.9, True, False, 3), (8000, 0.1, 0.8, False, True, 3),
            (2000, 0.1, 0.8, False, False, 2), (20000, 0.05, 0.8, False, False, 3)]:
        name = (f"{'groupwise' if groupwise else 'pair'}-{rows}-g{share}-r{rho}"
                f"{'-int' if integer else ''}-L{layers}")
        cases.append((name, rows, share, rho, integer, groupwise, layers))
    for name, rows, share, rho, integer, groupwise, layers in cases:
        if args.only and args.only not in name:
            continue
        frame, labels = synthetic(rows, share, rho, integer, groupwise,
                                  seed=rows + int(100 * share))
        cut2 = 58 if integer else 0.8
        args.rule_of = lambda d, c=cut2: ((d["x1"] > 0.8) & (d["x2"] > c)).to_numpy()
        case(args, name, frame, labels, labels.astype(bool), frame["g"].to_numpy() == 1, "g",
             "0", layers)
    for label in ("rule", "earning"):
        name = f"adult-{label}"
        if args.only and args.only not in name:
            continue
        frame, labels = adult(label)
        args.rule_of = lambda d: ((d["education-num"] >= 13)
                                  & (d["hours-per-week"] >= 45)).to_numpy()
        rule = args.rule_of(frame)
        case(args, name, frame, labels, rule, frame["sex"].to_numpy() == "Female", "sex=Male",
             "1", 3)
    (args.workdir / "results.json").write_text(json.dumps(args.results, indent=1))


if __name__ == "__main__":
    main()
