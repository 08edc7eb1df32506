"""The default population fit on a user's first real model (issue "population models true
to the data"): it must never certify an unfair model fair.

The flow a new user follows, with the commands users run:

1. The Adult census CSV (``../shared/benchmarks/libra/census/data/census.csv``), 7 raw
   columns — age, education-num, hours-per-week, capital-gain, capital-loss, sex, race — and
   the label ``earning``, written as ``adult_raw.csv`` (sex and race as strings) and as
   ``adult_encoded.csv`` (12 columns: sex and race one-hot as ``sex=…``, ``race=…``, the
   encoding ``certgate population fit`` applies to raw strings).
2. A 2×32 ReLU MLP on the 12 encoded columns (a fixed standardising first layer, folded by
   the converter), trained with counterfactual sex-flip augmentation: every row twice, sex
   swapped (Adam, seeded). It never sees a sex effect directly, yet its parity ratio
   ``P(>50K | female) / P(>50K | male)`` on its own data is far below 0.8: the other columns
   carry sex.
3. ``certgate population fit DATA --model net.json --out pop.json`` with default options
   (``--csv raw`` or ``encoded``; ``--protected`` adds ``--protected sex``), timed.
4. ``certgate verify demographic-parity --protected sex=Male --privileged 1
   --favorable-class 1 --gamma 0.8 --timeout 120 --executor process --workers 2``.

Prints the fit time (the command's wall time, start-up and imports included, and the fit's
own time), the learned edges, the certified ratio interval and verdict, and the model's
empirical ratio on the data. Run from the checkout root::

    python benchmarks/population_default_fit.py --workdir /tmp/popfit [--csv encoded]
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

REPOSITORY = Path(__file__).resolve().parents[1]
CENSUS = (REPOSITORY / "../shared/benchmarks/libra/census/data/census.csv").resolve()
RAW_COLUMNS = ("age", "education-num", "hours-per-week", "capital-gain", "capital-loss",
               "sex", "race")
TARGET = "earning"
POSITIVE = ">50K"
HIDDEN = 32
EPOCHS = 8
SEED = 0
GAMMA = 0.8
TIMEOUT = 120


def tables(workdir: Path) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """Writes ``adult_raw.csv`` and ``adult_encoded.csv``; returns the raw and encoded
    feature tables and the labels (1 = >50K)."""
    from certgate.population_data import encode_strings

    census = pd.read_csv(CENSUS, skipinitialspace=True)
    raw = census[list(RAW_COLUMNS)]
    labels = (census[TARGET].astype(str) == POSITIVE).to_numpy(dtype=np.int64)
    encoded, _ = encode_strings(raw)
    raw.assign(**{TARGET: census[TARGET]}).to_csv(workdir / "adult_raw.csv", index=False)
    encoded.assign(**{TARGET: labels}).to_csv(workdir / "adult_encoded.csv", index=False)
    return raw, encoded, labels


def train(encoded: pd.DataFrame, labels: np.ndarray) -> torch.nn.Sequential:
    """The 2×32 MLP trained on every row twice, once with sex swapped."""
    torch.manual_seed(SEED)
    x = encoded.to_numpy(dtype=np.float64)
    flipped = encoded.copy()
    flipped[["sex=Female", "sex=Male"]] = encoded[["sex=Male", "sex=Female"]].to_numpy()
    inputs = torch.tensor(np.concatenate([x, flipped.to_numpy(dtype=np.float64)]))
    targets = torch.tensor(np.concatenate([labels, labels]))
    mean, std = inputs.mean(0), inputs.std(0).clamp_min(1e-6)
    scale = torch.nn.Linear(x.shape[1], x.shape[1]).double()
    with torch.no_grad():
        scale.weight.copy_(torch.diag(1.0 / std))
        scale.bias.copy_(-mean / std)
    scale.requires_grad_(False)
    module = torch.nn.Sequential(
        scale, torch.nn.Linear(x.shape[1], HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 2)).double()
    optimiser = torch.optim.Adam([p for p in module.parameters() if p.requires_grad], lr=1e-3)
    generator = torch.Generator().manual_seed(SEED)
    for _ in range(EPOCHS):
        for batch in torch.randperm(len(inputs), generator=generator).split(256):
            optimiser.zero_grad()
            torch.nn.functional.cross_entropy(module(inputs[batch]), targets[batch]).backward()
            optimiser.step()
    return module.eval()


def empirical_ratio(module: torch.nn.Sequential, encoded: pd.DataFrame) -> tuple[float, float]:
    """The model's ``P(>50K | female) / P(>50K | male)`` on the data, and its positive rate."""
    with torch.no_grad():
        predicted = module(torch.tensor(encoded.to_numpy(dtype=np.float64))).argmax(1).numpy()
    female = encoded["sex=Female"].to_numpy() == 1
    return float(predicted[female].mean() / predicted[~female].mean()), float(predicted.mean())


def certgate(*argv: str) -> tuple[dict, float]:
    """Run ``python -m pipeline_steps ARGV --json`` from the checkout; its JSON and wall time."""
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pipeline_steps", *argv, "--json"], capture_output=True,
        text=True, cwd=REPOSITORY, env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        check=False)
    seconds = time.perf_counter() - started
    try:
        return json.loads(result.stdout), seconds
    except json.JSONDecodeError as error:
        raise SystemExit(f"certgate {' '.join(argv)} printed no JSON object: "
                         f"{result.stdout[-400:]}{result.stderr[-800:]}") from error


def main() -> None:
    from verifier.convert import save_network
    from verifier.convert.torch_module import from_torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--csv", choices=("raw", "encoded"), default="raw")
    options = parser.add_mutually_exclusive_group()
    options.add_argument("--protected", action="store_true",
                         help="fit with --protected sex (default: no option at all)")
    options.add_argument("--independent", action="store_true",
                         help="fit the independent product instead, for comparison (it may "
                              "certify the model: the failure this benchmark guards against)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    _, encoded, labels = tables(args.workdir)
    module = train(encoded, labels)
    ratio, positive = empirical_ratio(module, encoded)
    network = args.workdir / "net.json"
    save_network(from_torch(module, list(encoded.columns), ["<=50K", ">50K"]), network)
    print(f"model: 12-32-32-2 ReLU MLP, sex-flip augmented; empirical ratio "
          f"P(>50K|female)/P(>50K|male) on the data {ratio:.3f} (positive rate {positive:.3f})")
    data = args.workdir / f"adult_{args.csv}.csv"
    option = (["--protected", "sex"] if args.protected
              else ["--independent"] if args.independent else [])
    population = args.workdir / f"pop_{args.csv}{'_'.join(['', *option]).replace('-', '')}.json"
    fitted, wall = certgate("population", "fit", str(data), "--model", str(network), "--out",
                            str(population), *option)
    if "error" in fitted:
        raise SystemExit(f"population fit failed: {fitted['error']}")
    print(f"population fit {data.name} {' '.join(option) or '(default options)'}: "
          f"{fitted['fit_seconds']:.1f} s fitting, {wall:.1f} s wall (start-up and imports "
          f"included); {fitted['rows']} rows, {len(fitted['columns'])} columns")
    print(f"learned edges: {', '.join(f'{a} -> {b}' for a, b in fitted['edges']) or 'none'}")
    verified, wall = certgate(
        "verify", "demographic-parity", "--model", str(network), "--population",
        str(population), "--protected", "sex=Male", "--privileged", "1",
        "--favorable-class", "1", "--gamma", str(GAMMA), "--timeout", str(args.timeout),
        "--executor", "process", "--workers", "2")
    if "error" in verified:
        raise SystemExit(f"verify failed: {verified['error']}")
    low, high = verified["ratio"]
    print(f"demographic parity γ={GAMMA}: {verified['verdict']}, certified ratio "
          f"[{low:.3f}, {high:.3f}] in {wall:.1f} s wall ({verified['boxes']} boxes, stopped "
          f"by {verified['stopped_by']}); empirical ratio {ratio:.3f}")
    if verified["verdict"] == "satisfied" and not args.independent:
        raise SystemExit("the default fit certified a model whose data ratio is "
                         f"{ratio:.3f} < {GAMMA}")


if __name__ == "__main__":
    main()
