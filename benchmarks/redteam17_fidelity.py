"""Seventeenth red-team of the default fit and the fidelity check (BENCHMARKS.md, 2026-12-01).

``tables CASE [ROWS [TAG]]`` writes ``OUT/TAG.csv`` (a seeded raw table), trains a small
torch MLP on the case's columns one-hot encoded as ``population fit`` encodes them and writes
``OUT/TAG.onnx`` and ``OUT/TAG.meta.json`` (its input names). ``oracle TAG CASE PROTECTED
PRIVILEGED POPULATION`` prints the model's parity ratio (unprivileged = the rows whose
``PROTECTED`` is not ``PRIVILEGED``) on the table's rows, under 10⁶ draws of the population
and on 10⁶ fresh rows of the case's generator, all in float64. ``OUT`` is ``--out``
(default ``/tmp/rt17``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pandas as pd
import torch
from onnx import numpy_helper
from torch import nn

DEFAULT_OUT = Path("/tmp/rt17")
"""Where the tables, models and input names go unless ``--out`` says otherwise."""
Table = tuple[pd.DataFrame, np.ndarray, list[str]]


def noise_columns(rng: np.random.Generator, n: int, frame: pd.DataFrame) -> None:
    frame["region"] = rng.choice(["north", "south", "east", "west"], n)
    frame["score"] = np.round(rng.normal(50, 10, n), 2)
    frame["kids"] = rng.poisson(1.2, n)
    frame["owner"] = rng.integers(0, 2, n)
    frame["tier"] = rng.choice(["gold", "silver", "basic"], n, p=[0.2, 0.3, 0.5])


def interaction(rng: np.random.Generator, n: int = 10000, female: float = 0.75,
                male: float = 0.45) -> Table:
    """c agrees with a XOR b with a probability sex sets; every pair's joint is sex-free."""
    sex = rng.choice(["F", "M"], n, p=[0.5, 0.5])
    a, b = rng.integers(0, 2, n), rng.integers(0, 2, n)
    keep = np.where(sex == "F", rng.random(n) < female, rng.random(n) < male)
    c = np.where(keep, a ^ b, 1 - (a ^ b))
    frame = pd.DataFrame({"sex": sex, "a": np.where(a, "yes", "no"),
                          "b": np.where(b, "hi", "lo"), "c": np.where(c, "on", "off")})
    noise_columns(rng, n, frame)
    return frame, (c == (a ^ b)).astype(int), ["a", "b", "c", "score"]


def within_bin(rng: np.random.Generator, n: int = 10000) -> Table:
    """Income in 8 cells of equal share for both sexes; women low inside every cell."""
    sex = rng.choice(["F", "M"], n)
    cell = rng.integers(0, 8, n)
    inside = rng.random(n)
    inside = np.where(sex == "F", inside ** 2.2, inside)
    income = np.round(20000 + 10000 * (cell + inside), 2)
    frame = pd.DataFrame({"sex": sex, "income": income})
    noise_columns(rng, n, frame)
    frame["debt"] = np.round(rng.gamma(2, 3000, n), 2)
    fraction = (income - 20000) / 10000 % 1
    return frame, ((fraction > 0.5) & (cell % 2 == 0)).astype(int), ["income", "debt", "region"]


def chain(rng: np.random.Generator, n: int = 10000) -> Table:
    """sex -> school -> cert -> skill -> label."""
    sex = rng.choice(["F", "M"], n)
    school = np.where(sex == "F", rng.random(n) < 0.35, rng.random(n) < 0.65)
    cert = np.where(school, rng.random(n) < 0.8, rng.random(n) < 0.25)
    skill = np.round(np.where(cert, rng.normal(60, 8, n), rng.normal(45, 8, n)), 1)
    job = np.where(skill > 55, rng.choice(["eng", "ops", "mgr"], n, p=[0.6, 0.2, 0.2]),
                   rng.choice(["eng", "ops", "mgr"], n, p=[0.2, 0.6, 0.2]))
    frame = pd.DataFrame({"sex": sex, "school": np.where(school, "uni", "none"),
                          "cert": np.where(cert, "yes", "no"), "skill": skill, "job": job})
    noise_columns(rng, n, frame)
    return frame, ((skill > 52) | (job == "mgr")).astype(int), ["skill", "job", "score"]


def rare(rng: np.random.Generator, n: int = 2000) -> Table:
    """A 1.5 % group D whose x is 1.2 lower."""
    group = rng.choice(["A", "B", "C", "D"], n, p=[0.55, 0.30, 0.135, 0.015])
    x = rng.normal(0, 1, n) - np.where(group == "D", 1.2, 0.0)
    z = rng.random(n)
    frame = pd.DataFrame({"grp": group, "x": np.round(x, 3), "z": np.round(z, 3)})
    noise_columns(rng, n, frame)
    frame["k"] = rng.choice(["p", "q"], n)
    return frame, (x + 0.5 * z > 0.3).astype(int), ["x", "z", "k"]


def small(rng: np.random.Generator, n: int = 500) -> Table:
    """500 rows, 30 % women, education depending on sex."""
    sex = rng.choice(["F", "M"], n, p=[0.3, 0.7])
    levels = ["hs", "ba", "ms", "phd"]
    education = np.where(sex == "F", rng.choice(levels, n, p=[0.5, 0.3, 0.15, 0.05]),
                         rng.choice(levels, n, p=[0.3, 0.3, 0.25, 0.15]))
    years = rng.integers(0, 30, n)
    frame = pd.DataFrame({"sex": sex, "edu": education, "years": years})
    noise_columns(rng, n, frame)
    return frame, (np.isin(education, ["ms", "phd"]) | (years > 24)).astype(int), \
        ["edu", "years", "kids"]


def correlated(rng: np.random.Generator, n: int = 20000) -> Table:
    """Tenure 0.9·(age − 22) + noise, 1.5 lower for women (r ≈ 0.97); the model reads the
    residual."""
    sex = rng.choice(["F", "M"], n)
    age = rng.uniform(22, 65, n)
    tenure = np.clip(0.9 * (age - 22) + rng.normal(0, 2.5, n)
                     - np.where(sex == "F", 1.5, 0.0), 0, None)
    frame = pd.DataFrame({"sex": sex, "age": np.round(age, 1), "tenure": np.round(tenure, 1)})
    noise_columns(rng, n, frame)
    frame["dept"] = rng.choice(["x", "y", "z"], n)
    label = (frame["tenure"] - 0.9 * (frame["age"] - 22) > -1.0).astype(int).to_numpy()
    return frame, label, ["age", "tenure", "dept"]


def v_structure(rng: np.random.Generator, n: int = 5000) -> Table:
    """sex -> proxy <- zone, proxy = sex XOR zone on 70 % of rows: proxy and sex are
    independent, and so are proxy and zone; the model reads proxy and zone."""
    female = rng.random(n) < 0.5
    zone = rng.integers(0, 2, n).astype(bool)
    proxy = np.where(rng.random(n) < 0.7, female ^ zone, ~(female ^ zone))
    frame = pd.DataFrame({"sex": np.where(female, "F", "M"), "zone": np.where(zone, "z1", "z0"),
                          "proxy": np.where(proxy, "p1", "p0")})
    noise_columns(rng, n, frame)
    return frame, (~(proxy ^ zone)).astype(int), ["proxy", "zone", "score"]


def interaction_weak(rng: np.random.Generator, n: int = 500) -> Table:
    return interaction(rng, n, 0.58, 0.50)


CASES: dict[str, Callable[..., Table]] = {
    "interaction": interaction, "withinbin": within_bin, "chain": chain, "rare": rare,
    "small": small, "corr": correlated, "interaction_weak": interaction_weak,
    "vstruct": v_structure}


def train(x: np.ndarray, y: np.ndarray, seed: int, epochs: int = 600) -> nn.Sequential:
    """A 2-hidden-layer MLP on standardised inputs, the standardisation folded into its
    first layer (it reads the raw values)."""
    torch.manual_seed(seed)
    mean, scale = x.mean(0), x.std(0) + 1e-9
    inputs = torch.tensor((x - mean) / scale, dtype=torch.float32)
    labels = torch.tensor(y)
    net = nn.Sequential(nn.Linear(x.shape[1], 16), nn.ReLU(), nn.Linear(16, 12), nn.ReLU(),
                        nn.Linear(12, 2))
    optimiser = torch.optim.Adam(net.parameters(), lr=0.02)
    for _ in range(epochs):
        optimiser.zero_grad()
        loss = nn.functional.cross_entropy(net(inputs), labels)
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        weight = net[0].weight.double() / torch.tensor(scale)
        bias = net[0].bias.double() - (weight * torch.tensor(mean)).sum(1)
        net[0].weight.copy_(weight.float())
        net[0].bias.copy_(bias.float())
    return net


def forward(path: Path, x: np.ndarray) -> np.ndarray:
    """The ONNX MLP's logits in float64."""
    model = onnx.load(path)
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64)
               for t in model.graph.initializer}
    layers = [node for node in model.graph.node if node.op_type == "Gemm"]
    h = x
    for index, node in enumerate(layers):
        h = h @ weights[node.input[1]].T + weights[node.input[2]]
        if index < len(layers) - 1:
            h = np.maximum(h, 0)
    return h


def encoded(frame: pd.DataFrame, names: list[str]) -> np.ndarray:
    return pd.get_dummies(frame, prefix_sep="=", dtype=float).reindex(
        columns=names, fill_value=0.0).to_numpy(np.float64)


def ratio(path: Path, x: np.ndarray, unprivileged: np.ndarray) -> str:
    logits = forward(path, x)
    granted = logits[:, 1] > logits[:, 0]
    low, high = granted[unprivileged].mean(), granted[~unprivileged].mean()
    return f"ratio={low / high:.4f} p_unprivileged={low:.4f} p_privileged={high:.4f}"


def tables(case: str, rows: int | None, tag: str, out: Path) -> None:
    rng = np.random.default_rng(1700 + list(CASES).index(case))
    frame, label, read = CASES[case](rng) if rows is None else CASES[case](rng, rows)
    frame.to_csv(out / f"{tag}.csv", index=False)
    inputs = pd.get_dummies(frame[read], prefix_sep="=", dtype=float)
    net = train(inputs.to_numpy(np.float64), label, 17)
    torch.onnx.export(net, torch.zeros(1, inputs.shape[1]), out / f"{tag}.onnx", dynamo=False)
    (out / f"{tag}.meta.json").write_text(json.dumps({"names": list(inputs.columns)}))


def oracle(tag: str, case: str, protected: str, privileged: str, population: str,
           out: Path) -> None:
    from verifier.population import load_population

    names = json.loads((out / f"{tag}.meta.json").read_text())["names"]
    network = out / f"{tag}.onnx"
    frame = pd.read_csv(out / f"{tag}.csv")
    print("rows      ", ratio(network, encoded(frame, names),
                              (frame[protected].astype(str) != privileged).to_numpy()))
    model = load_population(population)
    columns = list(model.columns)
    draws = model.sample(1_000_000, np.random.default_rng(7))
    print("population", ratio(network, draws[:, [columns.index(c) for c in names]],
                              draws[:, columns.index(f"{protected}={privileged}")] < 0.5))
    fresh, _, _ = CASES[case](np.random.default_rng(99), 1_000_000)
    print("generator ", ratio(network, encoded(fresh, names),
                              (fresh[protected].astype(str) != privileged).to_numpy()))


def main() -> None:
    """The command line: ``tables CASE [ROWS [TAG]]`` or ``oracle TAG CASE PROTECTED
    PRIVILEGED POPULATION`` (module docstring), files under ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="folder of the tables and models")
    verbs = parser.add_subparsers(dest="verb", required=True)
    build = verbs.add_parser("tables", help="write a case's table, model and input names")
    build.add_argument("case", choices=list(CASES))
    build.add_argument("rows", type=int, nargs="?")
    build.add_argument("tag", nargs="?")
    check = verbs.add_parser("oracle", help="the model's ratio on rows, population, generator")
    for name in ("tag", "case", "protected", "privileged", "population"):
        check.add_argument(name)
    arguments = parser.parse_args()
    arguments.out.mkdir(parents=True, exist_ok=True)
    if arguments.verb == "tables":
        tables(arguments.case, arguments.rows, arguments.tag or arguments.case, arguments.out)
    else:
        oracle(arguments.tag, arguments.case, arguments.protected, arguments.privileged,
               arguments.population, arguments.out)


if __name__ == "__main__":
    main()
