"""Paper 002's synthetic benchmark rebuilt with our code (Tables I–III), exact WMI.

3 inputs ``x ~ N(0, I)``; ground truth ``c(x) = (x · M₁ · M₂ >= 0)`` with ``M₁ ∈ {−1,0,1}^{3×10}``
and ``M₂ ∈ {−1,1}^{10}`` scaled by uniform draws; a density-estimation-tree prior fitted with
:func:`verifier.population.fitting.fit_density_tree` on a separate sample; a 3×32 ReLU network
trained with torch (CPU, seeded); a random forest surrogate (scikit-learn, 8 trees, depth-limited
— the paper's forest is made of density-estimation trees, ours of ordinary CART trees); the first
``--points`` population points as test centres with their ground-truth labels; L∞ ε-boxes and
k = 0.1 violation queries with the early stop. Each instance is classified Rob (no violating
region at all), ∼Rob (0 < P_viol < k) or ¬Rob (P_viol >= k), and our mean (± std) times are
printed beside the paper's (28 cores; ours: this machine, one process).

``--income`` also runs the income use case of paper §V (generator of Table IV, biased and
unbiased data, a density tree on (hpw, yexp, hw), a 3-8-8-1 network): exact monotonicity in
each feature (uniform prior on the support, as the paper's text) and robustness to triangular
noise on yexp (mode 0 on [0, 15]). The paper gives these only as plots (Fig. 7).

Usage: ``python benchmarks/wmi.py [--points N] [--epsilons 0.01 0.05 0.1] [--timeout S]
[--no-bp] [--skip-rf] [--skip-equivalence] [--income] [--envelopes] [--json]``.

``--envelopes`` runs the non-polynomial priors (certified intervals, DESIGN D15): a 1-D ReLU
network under N(0, 1) against its closed form in Φ, and the income demo's Bayesian-network
population (fitted as ``certgate demo`` fits it) with monotonicity and noise robustness.
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import statistics
import time
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.ensemble import RandomForestClassifier

from verifier.network import Layer, Network
from verifier.population import Leaf, PiecewiseDensity
from verifier.population.fitting import fit_density_tree
from verifier.wmi import equivalence, local_robustness, monotonicity, noise_robustness

K = 0.1
PAPER_TABLE_I = {  # (system, setting) -> {epsilon: mean seconds}
    ("NN", "No BP"): {0.01: 7.91, 0.05: 83.85, 0.1: 275.62},
    ("NN", "BP"): {0.01: 0.35, 0.05: 10.30, 0.1: 71.44},
    ("RF", "No BP"): {0.01: 0.88, 0.05: 31.80, 0.1: 229.86},
    ("RF", "BP"): {0.01: 0.17, 0.05: 0.29, 0.1: 1.35},
}
PAPER_TABLE_II_COUNTS = {("NN", 0.1): (87, 5, 8), ("RF", 0.1): (80, 11, 9)}
PAPER_TABLE_III = {  # epsilon -> counts (Equ, ∼Equ, ¬Equ), mean seconds per class ("−" row)
    0.01: ((94, 1, 5), (0.1, 26.1, 54.1)),
    0.05: ((88, 3, 9), (1.5, 574.4, 406.7)),
    0.1: ((78, 10, 12), (14.4, 1631.4, 4981.4)),
}
CLASSES = ("Rob", "~Rob", "!Rob")


def make_problem(seed: int = 666, samples: int = 10_000, epochs: int = 8) -> dict[str, Any]:
    """Ground truth, prior, network, forest and test points (deterministic given the seed)."""
    rng = np.random.default_rng(seed)
    m1 = rng.choice([-1.0, 0.0, 1.0], size=(3, 10)) * rng.uniform(size=(3, 10))
    m2 = rng.choice([-1.0, 1.0], size=10) * rng.uniform(size=10)
    direction = m1 @ m2

    def truth(x: np.ndarray) -> np.ndarray:
        return (x @ direction >= 0).astype(np.int64)

    population = rng.normal(size=(samples, 3))
    prior = fit_density_tree(pd.DataFrame(population, columns=["x0", "x1", "x2"]),
                             ["x0", "x1", "x2"], min_leaf=100)
    train = rng.normal(size=(samples, 3))
    labels = truth(train)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
        torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimiser = torch.optim.Adam(model.parameters(), lr=5e-3)
    inputs = torch.tensor(train, dtype=torch.float32)
    targets = torch.tensor(labels, dtype=torch.float32)[:, None]
    for _ in range(epochs):
        order = torch.randperm(samples)
        for start in range(0, samples, 100):
            batch = order[start:start + 100]
            optimiser.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                model(inputs[batch]), targets[batch])
            loss.backward()
            optimiser.step()
    linears = [module for module in model if isinstance(module, torch.nn.Linear)]
    network = Network([
        Layer(linear.weight.detach().double().numpy(), linear.bias.detach().double().numpy(),
              "relu" if index < len(linears) - 1 else "none")
        for index, linear in enumerate(linears)
    ])
    forest = RandomForestClassifier(n_estimators=8, max_depth=6, random_state=seed)
    forest.fit(train, labels)
    test = rng.normal(size=(1000, 3))
    return {
        "prior": prior, "network": network, "forest": forest, "population": population,
        "accuracy_nn": float(((network.evaluate(test)[:, 0] >= 0) == truth(test)).mean()),
        "accuracy_rf": float((forest.predict(test) == truth(test)).mean()),
        "labels": truth(population),
    }


INCOME_COLUMNS = ["hpw", "yexp", "hw"]


def income_data(rng: np.random.Generator, rows: int, biased: bool) -> tuple[np.ndarray, np.ndarray]:
    """Paper 002 Table IV (corrected as in the notes): inputs (hpw, yexp, hw), label
    income > 35000."""
    female = rng.random(rows) < 0.5
    hpw = 5 * np.clip(rng.normal(7, 1, rows), 2, 12)
    yexp = np.clip(rng.normal(20, 7, rows), 0, 55)
    hw = rng.normal(1, 0.02, rows) * (500 * yexp + 30000) / 1920
    if biased:
        hw = hw + hw * rng.normal(0.1, 0.02, rows) * (1 - 2 * female)
    x = np.column_stack([hpw, yexp, hw])
    return x, (48 * hpw * hw > 35000).astype(np.int64)


def train_network(x: np.ndarray, y: np.ndarray, hidden: list[int], epochs: int,
                  seed: int) -> Network:
    """A ReLU classifier with one logit, trained on standardised inputs (Adam, BCE); the
    standardisation is folded into the first layer so the network reads raw inputs."""
    torch.manual_seed(seed)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    sizes = [x.shape[1], *hidden, 1]
    modules: list[torch.nn.Module] = []
    for index, (a, b) in enumerate(itertools.pairwise(sizes)):
        modules.append(torch.nn.Linear(a, b))
        if index < len(sizes) - 2:
            modules.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*modules)
    optimiser = torch.optim.Adam(model.parameters(), lr=5e-3)
    inputs = torch.tensor((x - mean) / scale, dtype=torch.float32)
    targets = torch.tensor(y, dtype=torch.float32)[:, None]
    for _ in range(epochs):
        order = torch.randperm(x.shape[0])
        for start in range(0, x.shape[0], 100):
            batch = order[start:start + 100]
            optimiser.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(
                model(inputs[batch]), targets[batch]).backward()
            optimiser.step()
    linears = [module for module in model if isinstance(module, torch.nn.Linear)]
    layers = []
    for index, linear in enumerate(linears):
        weight = linear.weight.detach().double().numpy()
        bias = linear.bias.detach().double().numpy()
        if index == 0:
            weight, bias = weight / scale, bias - (weight / scale) @ mean
        layers.append(Layer(weight, bias, "relu" if index < len(linears) - 1 else "none"))
    return Network(layers, list(INCOME_COLUMNS), ["income_gt_35k"])


def income_use_case(seed: int, timeout: float) -> list[dict[str, Any]]:
    """Monotonicity per feature and yexp-noise robustness, biased and unbiased."""
    noise = PiecewiseDensity(leaves=[Leaf(lower=[0.0], upper=[15.0],
                                          polynomial=[([0], 2 / 15), ([1], -2 / 225)])])
    results = []
    for biased in (False, True):
        rng = np.random.default_rng(seed + int(biased))
        population, _ = income_data(rng, 10_000, biased)
        prior = fit_density_tree(pd.DataFrame(population, columns=INCOME_COLUMNS),
                                 INCOME_COLUMNS, min_leaf=1000)
        x, y = income_data(rng, 10_000, biased)
        network = train_network(x, y, [8, 8], epochs=20, seed=seed)
        test_x, test_y = income_data(rng, 1000, biased)
        accuracy = float(((network.evaluate(test_x)[:, 0] >= 0) == test_y).mean())
        row: dict[str, Any] = {"scenario": "biased" if biased else "unbiased",
                               "accuracy": accuracy}
        for feature, name in enumerate(INCOME_COLUMNS):
            result, seconds = timed(
                lambda f=feature, n=network, p=prior: monotonicity(n, p, f), timeout)
            row[f"monotonicity_{name}"] = None if result is None else result.probability
            row[f"monotonicity_{name}_s"] = seconds
        result, seconds = timed(
            lambda n=network, p=prior: noise_robustness(n, p, noise, [1]), timeout)
        row["noise_robustness_yexp"] = None if result is None else result.probability
        row["noise_robustness_yexp_s"] = seconds
        results.append(row)
        print(f"[income §V] {row['scenario']:8s} accuracy {accuracy:.3f}; " + ", ".join(
            f"{key} {value:.4f}" if isinstance(value, float) else f"{key} {value}"
            for key, value in row.items() if key not in ("scenario", "accuracy")))
    return results


def _demo_network(frame: pd.DataFrame, seed: int) -> Network:
    """The demo's own 4-8-2 classifier on (female, hpw, yexp, hw), female's weights zero."""
    from pipeline_steps.demo import train_classifier
    from verifier.convert.torch_module import from_torch

    return from_torch(train_classifier(frame, seed=seed, steps=300), input_shape=(4,))


def envelope_cases(timeout: float, tolerance: float) -> list[dict[str, Any]]:
    """Non-polynomial priors (certified intervals): a 1-D ReLU network under N(0, 1) against
    its closed form, and the income demo's Bayesian-network population (binary ``female``,
    truncated-normal hpw / yexp, hw normal per (female, yexp bin)) with monotonicity
    (``use_prior``) and yexp-noise robustness."""
    from scipy.stats import norm

    from pipeline_steps.demo import income_prior
    from pipeline_steps.income_data import generate_income_data
    from verifier.population import Feature, Normal, PopulationModel
    from verifier.wmi.noise import triangular_noise

    rows: list[dict[str, Any]] = []
    two_sided = Network([Layer(np.array([[1.0], [-1.0]]), np.array([-1.0, -1.0]), "relu"),
                         Layer(np.array([[1.0, 1.0]]), np.array([-0.3]))])
    normal = PopulationModel(features=[Feature(name="a", kind="continuous")],
                             distribution=Normal(mean=0.0, std=1.0))
    exact = 1.0 - 2.0 * norm.cdf(-1.3)
    started = time.perf_counter()
    result = local_robustness(two_sided, normal, [0.0], 50.0, expected_class=0, tolerance=1e-3,
                              timeout_s=10.0)
    seconds = time.perf_counter() - started
    rows.append({"case": "1-D ReLU, N(0,1)", "lower": result.probability_lower,
                 "upper": result.probability_upper, "closed_form": exact, "seconds": seconds,
                 "refinements": result.refinements})
    print(f"[envelopes] 1-D ReLU under N(0,1): [{result.probability_lower:.6f}, "
          f"{result.probability_upper:.6f}] ∋ {exact:.6f}: "
          f"{result.probability_lower <= exact <= result.probability_upper}, width "
          f"{result.probability_upper - result.probability_lower:.2e}, {seconds:.2f} s")
    for variant in ("biased", "unbiased"):
        prior = income_prior(generate_income_data(10_000, variant=variant, seed=2))
        network = _demo_network(generate_income_data(10_000, variant=variant, seed=1), 0)
        audits = [(f"monotonicity {name}", lambda f=f, n=network, p=prior: monotonicity(
            n, p, f, use_prior=True, timeout_s=timeout, tolerance=tolerance))
            for f, name in ((1, "hpw"), (2, "yexp"), (3, "hw"))]
        audits.append(("noise robustness yexp", lambda n=network, p=prior: noise_robustness(
            n, p, triangular_noise(0.0, 0.0, 15.0), [2], timeout_s=timeout,
            tolerance=tolerance)))
        for name, call in audits:
            started = time.perf_counter()
            result = call()
            seconds = time.perf_counter() - started
            rows.append({"case": f"income {variant} {name}", "lower": result.probability_lower,
                         "upper": result.probability_upper, "seconds": seconds,
                         "regions": result.regions, "refinements": result.refinements,
                         "timed_out": result.timed_out})
            print(f"[envelopes] income {variant:8s} {name:22s} [{result.probability_lower:.5f},"
                  f" {result.probability_upper:.5f}] {seconds:6.1f} s, {result.regions} "
                  f"regions, {result.refinements} refinements"
                  f"{', timed out' if result.timed_out else ''}")
    return rows


class _Timeout(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Timeout


def timed(call: Any, timeout: float) -> tuple[Any, float]:
    """``(result or None on timeout, seconds)``."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    started = time.perf_counter()
    try:
        result = call()
    except _Timeout:
        result = None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return result, time.perf_counter() - started


def classify(result: Any) -> str:
    """Rob / ∼Rob / ¬Rob from a k-stopped violation query."""
    if result is None:
        return "timeout"
    if result.violation_mass == 0.0:
        return "Rob"
    return "!Rob" if result.violation_probability >= K else "~Rob"


def summary(times: list[float]) -> str:
    if not times:
        return "-"
    spread = statistics.pstdev(times) if len(times) > 1 else 0.0
    return f"{statistics.mean(times):.2f} (±{spread:.2f})"


def run_series(name: str, calls: list[Any], timeout: float) -> dict[str, Any]:
    """Run every instance, gather classes and times."""
    rows = []
    for call in calls:
        result, seconds = timed(call, timeout)
        rows.append({"class": classify(result), "seconds": seconds,
                     "violation": None if result is None else result.violation_probability,
                     "regions": None if result is None else result.regions,
                     "integrals": None if result is None else result.integrals})
    counts = {label: sum(row["class"] == label for row in rows)
              for label in (*CLASSES, "timeout")}
    per_class = {label: summary([row["seconds"] for row in rows if row["class"] == label])
                 for label in CLASSES}
    return {"name": name, "rows": rows, "counts": counts, "per_class": per_class,
            "mean": summary([row["seconds"] for row in rows])}


def synthetic(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Tables I–III: local robustness (NN, optional no-BP, RF) and NN-vs-RF equivalence."""
    problem = make_problem(args.seed)
    centres = problem["population"][:args.points]
    labels = problem["labels"][:args.points]
    prior, network, forest = problem["prior"], problem["network"], problem["forest"]
    print(f"network accuracy {problem['accuracy_nn']:.3f}, forest accuracy "
          f"{problem['accuracy_rf']:.3f}, prior leaves {len(prior.leaves)}, "
          f"{args.points} points")
    report: list[dict[str, Any]] = []
    settings = [("NN", "BP", network, "crown")]
    if args.no_bp:
        settings.append(("NN", "No BP", network, "none"))
    if not args.skip_rf:
        settings.append(("RF", "BP", forest, "crown"))
    for epsilon in args.epsilons:
        for system, setting, model, method in settings:
            calls = [
                (lambda c=c, y=y, m=model, b=method, e=epsilon: local_robustness(
                    m, prior, c, e, int(y), stop_at=K, bound_method=b))
                for c, y in zip(centres, labels, strict=True)
            ]
            series = run_series(f"robustness {system} {setting} eps={epsilon}", calls,
                                args.timeout)
            series["paper_mean"] = PAPER_TABLE_I[(system, setting)].get(epsilon)
            series["paper_counts"] = PAPER_TABLE_II_COUNTS.get((system, epsilon))
            report.append(series)
            print(f"[Table I/II] {system:2s} {setting:5s} eps={epsilon:<5} ours mean "
                  f"{series['mean']} s, counts {series['counts']}, per class "
                  f"{series['per_class']} | paper mean {series['paper_mean']} s (28 cores), "
                  f"paper counts/100 {series['paper_counts']}")
        if not args.skip_equivalence:
            calls = [(lambda c=c, e=epsilon: equivalence(network, forest, prior, c, e,
                                                         stop_at=K))
                     for c in centres]
            series = run_series(f"equivalence NN vs RF eps={epsilon}", calls, args.timeout)
            series["paper"] = PAPER_TABLE_III.get(epsilon)
            report.append(series)
            print(f"[Table III] eps={epsilon:<5} ours mean {series['mean']} s, counts "
                  f"{series['counts']}, per class {series['per_class']} | paper counts/100 and "
                  f"per-class means {series['paper']}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10)
    parser.add_argument("--epsilons", type=float, nargs="*", default=[0.01, 0.05, 0.1],
                        help="ε values of the synthetic benchmark (none: skip it)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per instance")
    parser.add_argument("--no-bp", action="store_true", help="also run without bound propagation")
    parser.add_argument("--skip-rf", action="store_true")
    parser.add_argument("--skip-equivalence", action="store_true")
    parser.add_argument("--income", action="store_true", help="also run the §V use case")
    parser.add_argument("--envelopes", action="store_true",
                        help="also run the non-polynomial-prior cases (certified intervals)")
    parser.add_argument("--tolerance", type=float, default=1e-3,
                        help="interval width target of the --envelopes cases")
    parser.add_argument("--seed", type=int, default=666)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    report: list[dict[str, Any]] = []
    if args.epsilons:
        report.extend(synthetic(args))
    if args.income:
        report.append({"name": "income", "rows": income_use_case(args.seed, args.timeout)})
    if args.envelopes:
        report.append({"name": "envelopes",
                       "rows": envelope_cases(min(args.timeout, 120.0), args.tolerance)})
    if args.json:
        print(json.dumps(report, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
