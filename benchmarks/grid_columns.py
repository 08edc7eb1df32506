"""A rating column on a 0.5 grid through the user's default flow: ``population fit`` with
default options, then ``verify demographic-parity`` with the fidelity check on the fitted
table.

The table (seeded, 4000 rows): ``sex`` (0/1), ``score`` ∈ {0.5, 1.0, …, 3.0} whose
distribution depends on sex, ``hours`` (integers). A 2×8 ReLU MLP (Adam, seeded) learns
``score >= 2`` — a boundary between two of the values the data holds — and is exported to
ONNX. Run it against two checkouts (``--root``) to compare the code of each: it prints how
the fit read ``score``, the certified parity ratio interval and verdict, the data's ratio,
the fidelity status, and the CPU time (user + system of the child processes) of the fit and
of the audit. Run from anywhere::

    python benchmarks/grid_columns.py --root /work/main --workdir /tmp/grid-old
    python benchmarks/grid_columns.py --root . --workdir /tmp/grid-new
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

RATINGS = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]


def table(rows: int = 4000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, rows)
    score = np.where(sex == 1, rng.choice(RATINGS, rows),
                     rng.choice(RATINGS, rows, p=[0.1, 0.05, 0.5, 0.25, 0.05, 0.05]))
    hours = rng.integers(20, 60, rows)
    return pd.DataFrame({"sex": sex, "score": score, "hours": hours})


def train(frame: pd.DataFrame, path: Path) -> None:
    torch.manual_seed(0)
    inputs = torch.tensor(frame.to_numpy(np.float32))
    inputs[:, 2] /= 60.0
    labels = torch.tensor((frame.score >= 2.0).astype(int).to_numpy())
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    optimiser = torch.optim.Adam(model.parameters(), 0.05)
    for _ in range(300):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), labels).backward()
        optimiser.step()
    with torch.no_grad():
        model[0].weight[:, 2] /= 60.0
    torch.onnx.export(model.eval(), (torch.zeros(1, 3),), str(path), input_names=["x"],
                      output_names=["logits"], dynamo=False)


def certgate(root: Path, workdir: Path, *argv: str) -> tuple[dict, float]:
    """One command's JSON and the CPU seconds its process used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "pipeline_steps", *argv, "--json"],
                          cwd=workdir, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv[:2]} failed: {done.stderr}")
    return json.loads(done.stdout), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="the checkout to run")
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    frame = table()
    frame.to_csv(args.workdir / "data.csv", index=False)
    train(frame, args.workdir / "net.onnx")
    fav = frame.score >= 2.0
    data_ratio = fav[frame.sex == 0].mean() / fav[frame.sex == 1].mean()
    fit, fit_cpu = certgate(args.root.resolve(), args.workdir, "population", "fit", "data.csv",
                            "--out", "pop.json", "--protected", "sex")
    [score] = [f for f in fit["features"] if f["name"] == "score"]
    audit, audit_cpu = certgate(
        args.root.resolve(), args.workdir, "verify", "demographic-parity", "--model", "net.onnx",
        "--input-names", "sex,score,hours", "--population", "pop.json", "--protected", "sex",
        "--privileged", "1", "--favorable-class", "1", "--gamma", "0.8", "--timeout", "60")
    fidelity = audit["population_fidelity"]
    print(json.dumps({
        "score": score, "data_ratio_of_the_label": round(float(data_ratio), 4),
        "certified_ratio": audit["ratio"], "boxes": audit.get("boxes"),
        "verdict": audit["verdict"], "fidelity": fidelity["status"],
        "fidelity_empirical": fidelity.get("empirical"),
        "cpu_s": {"fit": round(fit_cpu, 2), "verify": round(audit_cpu, 2)}}, indent=1))


if __name__ == "__main__":
    main()
