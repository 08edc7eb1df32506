"""Eighteenth red-team: certgate's README flows on raw tables of 100k-1M rows (BENCHMARKS.md,
2026-12-01).

``tables CASE`` writes, under ``--out``, ``CASE.csv`` (a seeded raw table: skewed amounts
with outliers, counts, 2-40-level categories, a protected ``sex``; ``CASE.raw.csv`` also
keeps the rows whose ``score`` is missing, as the user's export holds them), a
``CASE.parquet`` copy, and a small torch MLP trained on the case's columns one-hot encoded
as ``population fit`` encodes them (``COL=VALUE``), with the standardisation as the model's
first module (buffers, not folded), exported both ways users do: ``CASE.onnx``
(``torch.onnx.export``) and ``CASE.mlflow/`` (``mlflow.pytorch.save_model``, the directory
``log_model`` uploads), plus ``CASE.meta.json`` (input names, layer widths) and
``CASE.weights.npz`` (float64 copies of every parameter, for the oracle).

``oracle CASE POPULATION`` prints, in float64 and apart from certgate: the model's parity
ratio (unprivileged = ``sex`` is ``F``) and each group's favourable rate on the table's
rows, and the same under ``--draws`` draws of the population file (sampled by this script
from the file's JSON through ``verifier.population``'s sampler, then evaluated by the
weights in ``CASE.weights.npz``, not by certgate's network).

``register CASE POPULATION --tracking-uri URI`` logs the model as users do
(``mlflow.pytorch.log_model`` with a numpy input example: no input names), registers it as
``CASE`` with alias ``candidate``, logs the population file as a run artifact and prints the
URIs a configuration names. Run from the checkout's root, e.g.
``PYTHONPATH=. python benchmarks/redteam18_large.py tables wide200k`` (the ``PYTHONPATH``
makes ``oracle`` sample with this checkout's ``verifier``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd

DEFAULT_OUT = Path("/tmp/rt18")
"""Where the tables and models go unless ``--out`` says otherwise."""
CASES = {"wide200k": (200_000, 25), "long1m": (1_000_000, 12), "onehot100k": (100_000, 60)}
"""Each case's rows and raw columns."""
HIDDEN = {"wide200k": (32, 16), "long1m": (32, 16, 8), "onehot100k": (64, 32, 16)}
"""Each case's hidden-layer widths."""
SEED = 1800


def _levels(rng: np.random.Generator, n: int, count: int, name: str) -> np.ndarray:
    weights = 1.0 / np.arange(1, count + 1) ** 1.1
    return rng.choice([f"{name}{k:02d}" for k in range(count)], n, p=weights / weights.sum())


def raw_table(case: str, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """The case's raw table, its label and the raw columns the model reads."""
    n, width = CASES[case]
    sex = rng.choice(["F", "M"], n, p=[0.45, 0.55])
    male = sex == "M"
    age = np.clip(np.round(rng.gamma(6, 7, n) + 16), 18, 95).astype(int)
    income = np.round(np.exp(rng.normal(10.4 + 0.25 * male, 0.7, n)), 2)
    income[rng.random(n) < 0.001] *= 40  # outliers
    gain = np.where(rng.random(n) < 0.92, 0.0, np.round(np.exp(rng.normal(8, 1.2, n))))
    accounts = rng.poisson(2 + male, n)
    frame = pd.DataFrame({"sex": sex, "age": age, "income": income, "capital_gain": gain,
                          "accounts": accounts})
    frame["region"] = _levels(rng, n, 40, "r")
    frame["job"] = np.where(male & (rng.random(n) < 0.3), "job00", _levels(rng, n, 12, "job"))
    score = np.round(rng.normal(600 + 20 * male, 60, n), 1)
    frame["score"] = score
    frame["housing"] = rng.choice(["own", "rent", "other"], n, p=[0.5, 0.4, 0.1])
    frame["late"] = rng.poisson(0.3, n)
    frame["debt"] = np.round(rng.gamma(2, 4000, n), 2)
    frame["rating"] = rng.integers(2, 11, n) / 2
    label_logit = (np.log(income) - 10.4) * 2 + (score - 600) / 40 - 0.8 * frame["late"] \
        - frame["debt"] / 20000 + (frame["job"] == "job00") * 0.8 + (gain > 0) * 1.0
    read = ["age", "income", "capital_gain", "accounts", "region", "job", "score", "housing",
            "late", "debt", "rating"]
    extra = width - frame.shape[1]
    for k in range(extra):
        kind = k % 5
        name = f"f{k:02d}"
        if kind == 0:
            frame[name] = np.round(rng.lognormal(3, 1, n), 3)
        elif kind == 1:
            frame[name] = rng.poisson(1 + k % 4, n)
        elif kind == 2:
            frame[name] = _levels(rng, n, 2 + (7 * k) % 9, name)
        elif kind == 3:
            frame[name] = np.round(rng.normal(0, 1, n) + (income > 40000) * 0.3, 4)
        else:
            frame[name] = rng.integers(0, 2, n)
        if k < 20:
            read.append(name)
            if kind == 3:
                label_logit = label_logit + 0.4 * frame[name]
    label = (label_logit + rng.logistic(0, 1, n) > 0).to_numpy().astype(np.int64)
    return frame, label, read


def encoded(frame: pd.DataFrame, names: list[str]) -> np.ndarray:
    """The rows one-hot encoded as ``population fit`` encodes them, in ``names``' order."""
    return pd.get_dummies(frame, prefix_sep="=", dtype=float).reindex(
        columns=names, fill_value=0.0).to_numpy(np.float64)


def mlp(mean: np.ndarray, scale: np.ndarray, hidden: tuple[int, ...]):
    """An MLP whose first module standardises the raw inputs (mean/scale buffers)."""
    import torch
    from torch import nn

    class Standardise(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32))
            self.register_buffer("scale", torch.tensor(scale, dtype=torch.float32))

        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            return (inputs - self.mean) / self.scale

    widths = [len(mean), *hidden]
    layers: list[nn.Module] = [Standardise()]
    for a, b in itertools.pairwise(widths):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(widths[-1], 2))


def train(x: np.ndarray, y: np.ndarray, hidden: tuple[int, ...], seed: int):
    """:func:`mlp` trained for 4 epochs of Adam on ``x`` standardised by its own moments."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    net = mlp(x.mean(0), x.std(0) + 1e-6, hidden)
    inputs, labels = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    optimiser = torch.optim.Adam(net.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(4):
        for batch in torch.randperm(len(x), generator=generator).split(512):
            optimiser.zero_grad()
            nn.functional.cross_entropy(net(inputs[batch]), labels[batch]).backward()
            optimiser.step()
    return net.eval()


def forward64(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The MLP's logits in float64 from its saved parameters."""
    h = (x - weights["0.mean"]) / weights["0.scale"]
    linear = sorted({int(key.split(".")[0]) for key in weights if key.endswith(".weight")})
    for index, layer in enumerate(linear):
        h = h @ weights[f"{layer}.weight"].T + weights[f"{layer}.bias"]
        if index < len(linear) - 1:
            h = np.maximum(h, 0.0)
    return h


def tables(case: str, out: Path) -> None:
    import mlflow.pytorch
    import torch

    started = time.perf_counter()
    rng = np.random.default_rng(SEED + list(CASES).index(case))
    frame, label, read = raw_table(case, rng)
    missing = rng.random(len(frame)) < 0.002
    frame.assign(score=frame["score"].mask(missing)).to_csv(out / f"{case}.raw.csv",
                                                            index=False)
    frame, label = frame[~missing].reset_index(drop=True), label[~missing]
    frame.to_csv(out / f"{case}.csv", index=False)
    frame.to_parquet(out / f"{case}.parquet", index=False)
    print(f"{case}: {frame.shape[0]} rows x {frame.shape[1]} raw columns written in "
          f"{time.perf_counter() - started:.1f} s")
    inputs = pd.get_dummies(frame[read], prefix_sep="=", dtype=float)
    train_rows = rng.choice(len(frame), min(len(frame), 60_000), replace=False)
    net = train(inputs.to_numpy(np.float64)[train_rows], label[train_rows], HIDDEN[case], 18)
    example = torch.zeros(1, inputs.shape[1])
    torch.onnx.export(net, example, out / f"{case}.onnx", dynamo=False)
    target = out / f"{case}.mlflow"
    if target.exists():
        shutil.rmtree(target)
    mlflow.pytorch.save_model(net, target, input_example=example.numpy())
    weights = {key: value.double().numpy() for key, value in net.state_dict().items()}
    np.savez(out / f"{case}.weights.npz", **weights)
    logits = forward64(weights, inputs.to_numpy(np.float64))
    (out / f"{case}.meta.json").write_text(json.dumps(
        {"names": list(inputs.columns), "hidden": HIDDEN[case],
         "train_accuracy": float(((logits[:, 1] > logits[:, 0]) == label).mean())}))
    print(f"{case}: {inputs.shape[1]} model inputs, accuracy "
          f"{((logits[:, 1] > logits[:, 0]) == label).mean():.3f}, total "
          f"{time.perf_counter() - started:.1f} s")


def _rates(logits: np.ndarray, unprivileged: np.ndarray, label: str) -> None:
    granted = logits[:, 1] > logits[:, 0]
    low, high = granted[unprivileged].mean(), granted[~unprivileged].mean()
    print(f"{label:<11} ratio={low / high:.5f} difference={low - high:+.5f} "
          f"p_unprivileged={low:.5f} p_privileged={high:.5f} rows={len(granted)}")


def oracle(case: str, population: str, draws: int, out: Path) -> None:
    from verifier.population import load_population

    meta = json.loads((out / f"{case}.meta.json").read_text())
    weights = dict(np.load(out / f"{case}.weights.npz"))
    frame = pd.read_parquet(out / f"{case}.parquet")
    names = meta["names"]
    _rates(forward64(weights, encoded(frame, names)), (frame["sex"] == "F").to_numpy(), "rows")
    model = load_population(population)
    columns = list(model.columns)
    sample = model.sample(draws, np.random.default_rng(7))
    _rates(forward64(weights, sample[:, [columns.index(c) for c in names]]),
           sample[:, columns.index("sex=M")] < 0.5, "population")


def register(case: str, population: str, tracking_uri: str, out: Path) -> None:
    """Log the case's model as users do (``mlflow.pytorch.log_model`` with a numpy input
    example, so no input names), the population file as a run artifact, register the model
    as ``CASE`` and point alias ``candidate`` at the new version; prints the times, the
    model URI and the population's ``runs:/`` URI."""
    import mlflow
    import mlflow.pytorch

    mlflow.set_tracking_uri(tracking_uri)
    import torch

    weights = dict(np.load(out / f"{case}.weights.npz"))
    net = mlp(weights["0.mean"], weights["0.scale"], HIDDEN[case])
    net.load_state_dict({key: torch.tensor(value, dtype=torch.float32)
                         for key, value in weights.items()})
    width = len(weights["0.mean"])
    started = time.perf_counter()
    with mlflow.start_run() as run:
        info = mlflow.pytorch.log_model(net, name="model", registered_model_name=case,
                                        input_example=np.zeros((2, width), np.float32))
        logged = time.perf_counter()
        mlflow.log_artifact(population, artifact_path="population")
    uploaded = time.perf_counter()
    client = mlflow.MlflowClient()
    client.set_registered_model_alias(case, "candidate", info.registered_model_version)
    print(f"model logged in {logged - started:.1f} s, population "
          f"({Path(population).stat().st_size} bytes) uploaded in {uploaded - logged:.1f} s")
    print(f"models:/{case}@candidate runs:/{run.info.run_id}/population/"
          f"{Path(population).name}")


def main() -> None:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="folder of the tables and models")
    verbs = parser.add_subparsers(dest="verb", required=True)
    build = verbs.add_parser("tables", help="write a case's tables and models")
    build.add_argument("case", choices=list(CASES))
    check = verbs.add_parser("oracle", help="the model's parity on rows and population draws")
    check.add_argument("case", choices=list(CASES))
    check.add_argument("population")
    check.add_argument("--draws", type=int, default=1_000_000)
    log = verbs.add_parser("register", help="log and register the model, log the population")
    log.add_argument("case", choices=list(CASES))
    log.add_argument("population")
    log.add_argument("--tracking-uri", required=True)
    arguments = parser.parse_args()
    arguments.out.mkdir(parents=True, exist_ok=True)
    if arguments.verb == "tables":
        tables(arguments.case, arguments.out)
    elif arguments.verb == "register":
        register(arguments.case, arguments.population, arguments.tracking_uri, arguments.out)
    else:
        oracle(arguments.case, arguments.population, arguments.draws, arguments.out)


if __name__ == "__main__":
    main()
