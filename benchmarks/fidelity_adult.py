"""The population-fidelity check's cost on the Adult census CSV (issue 34's 12-column model).

Builds the model of issue 34: the raw columns age, education-num, hours-per-week,
capital-gain, capital-loss, sex and race (12 columns once sex and race are one-hot encoded as
``population fit`` encodes them), a 2×32 ReLU MLP trained with counterfactual sex-flip
augmentation (every row twice, sex swapped; the standardisation folded into the first layer),
and the independent-product population fitted to the same 7 raw columns. Then, timed:

* reading and encoding the data rows from the 30k-row CSV (``--data``'s path:
  :func:`pipeline_steps.fidelity_data.given_rows`),
* the check itself (:func:`verifier.audits.fidelity_check`: classes decided in real
  arithmetic, Clopper–Pearson on both rates, fit statistics from ``--samples`` population
  draws),

``--repeat`` times each (median and range), and prints the check's verdict beside a short PV
run's certified interval. Model training and PV are not timed.

Usage (from the checkout root):
``python -m benchmarks.fidelity_adult [--repeat 5] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

CENSUS = Path("/work/shared/benchmarks/libra/census/data/census.csv")
RAW_COLUMNS = ["age", "education-num", "hours-per-week", "capital-gain", "capital-loss", "sex",
               "race"]


def train_model(encoded: pd.DataFrame, label: np.ndarray, seed: int) -> torch.nn.Sequential:
    """The 2×32 MLP of the module docstring on the encoded columns (float64)."""
    torch.manual_seed(seed)
    flipped = encoded.copy()
    flipped["sex=Female"], flipped["sex=Male"] = encoded["sex=Male"], encoded["sex=Female"]
    x = np.vstack([encoded.to_numpy(np.float64), flipped.to_numpy(np.float64)])
    y = np.concatenate([label, label])
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-12
    inputs = torch.tensor((x - mean) / scale)
    targets = torch.tensor(y, dtype=torch.float64)[:, None]
    model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 1)).double()
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss = torch.nn.BCEWithLogitsLoss()
    for _ in range(30):
        for batch in torch.randperm(len(inputs)).split(1024):
            optimiser.zero_grad()
            loss(model(inputs[batch]), targets[batch]).backward()
            optimiser.step()
    first = model[0]
    with torch.no_grad():
        weight = first.weight / torch.tensor(scale)
        first.bias -= weight @ torch.tensor(mean)
        first.weight.copy_(weight)
    return model.eval()


def main() -> None:
    from certgate.population_data import encode_strings, fit_population
    from pipeline_steps.fidelity_data import given_rows
    from verifier.audits import DemographicParitySettings, fidelity_check, run_audit
    from verifier.audits.binding import bind
    from verifier.audits.fidelity import FidelityOptions
    from verifier.convert.torch_module import from_torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--samples", type=int, default=20_000,
                        help="population draws for the fit statistics (default 20000)")
    parser.add_argument("--pv-timeout", type=float, default=30.0)
    parser.add_argument("--threads", type=int,
                        help="torch intra-op threads (default: torch's own choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    table = pd.read_csv(CENSUS)
    raw = table[RAW_COLUMNS]
    encoded, _ = encode_strings(raw)
    label = (table["earning"].str.strip() == ">50K").to_numpy(np.float64)
    model = train_model(encoded, label, seed=0)
    network = from_torch(model, list(encoded.columns))
    population = fit_population(raw, max_discrete_values=200)
    network, population = bind(network, population, None, "adult")
    settings = DemographicParitySettings(kind="demographic_parity", protected="sex=Male",
                                         privileged=1, favorable_class=1, gamma=0.8,
                                         timeout_s=args.pv_timeout)
    certificate = run_audit(settings, network, population)
    options = FidelityOptions(population_samples=args.samples)
    names = list(network.input_names)
    reads, checks = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        data = given_rows(CENSUS, names, "--data")
        reads.append(time.perf_counter() - started)
        started = time.perf_counter()
        record = fidelity_check(settings, certificate, network, population, data, options)
        checks.append(time.perf_counter() - started)
    empirical = record["empirical"]
    print(f"Adult census {CENSUS.name}: {len(data.rows)} rows, {len(names)} columns, "
          f"2x32 MLP, {torch.get_num_threads()} torch threads; population: "
          f"{record['assumptions']['summary']}")
    print(f"certified ratio {certificate.verdict} [{certificate.bounds['value'][0]:.4g}, "
          f"{certificate.bounds['value'][1]:.4g}] (PV, {args.pv_timeout:g} s budget)")
    print(f"data ratio {empirical['estimate']:.4g}, {options.level:g} interval "
          f"[{empirical['interval'][0]:.4g}, {empirical['interval'][1]:.4g}] -> "
          f"{record['status']}")
    for label_text, times in (("read + encode", reads), ("check", checks)):
        print(f"{label_text}: median {statistics.median(times):.3f} s "
              f"(min {min(times):.3f}, max {max(times):.3f}, {len(times)} runs)")


if __name__ == "__main__":
    main()
