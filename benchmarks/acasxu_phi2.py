"""ACAS Xu φ2: certified probability that COC is the maximal score (φ2 violated).

x is uniform on φ2's input box intersected with the network domain (normalised inputs, as in
paper 003 §6.2); the violation event is ``y0 >= y_j for every j != 0``. Prints our sound
interval after 10, 30 and 60 s (and longer budgets if asked) beside the paper's Tables 2/5.

Usage: ``python benchmarks/acasxu_phi2.py [--networks 4_3 4_9 5_8] [--budgets 10 30 60]
[--executor local|process|dask[=ADDRESS]] [--workers N] [--threads N] [--json]``.
``--threads`` sets torch's threads in this process (in-process runs; workers always use
one): on a loaded machine torch's thread pool stalls, and one thread is faster.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from verifier.certificate import to_jsonable
from verifier.convert import load_network
from verifier.population import Factor, Feature, PopulationModel, Product, Uniform
from verifier.pv import PVProgress, PVSettings, population_domain, verify
from verifier.spec import Names, specification_from_dict

DATA = Path(__file__).resolve().parents[2] / "shared/benchmarks/acasxu"
VIOLATION = "y0 >= y1 and y0 >= y2 and y0 >= y3 and y0 >= y4"
INPUTS = ["rho", "theta", "psi", "v_own", "v_int"]


def phi2_box(data: Path) -> tuple[np.ndarray, np.ndarray]:
    """φ2's box clipped to the network domain, normalised as the networks expect."""
    document = json.loads((data / "properties.json").read_text())
    phi2 = next(p for p in document["properties"] if p["id"] == "phi2")["input_box"]
    norm = document["input_normalisation"]
    means, ranges = np.array(norm["mean"], float), np.array(norm["range"], float)
    lower = (np.array(phi2["lower_clipped_to_domain"], float) - means) / ranges
    upper = (np.array(phi2["upper_clipped_to_domain"], float) - means) / ranges
    return lower, upper


def uniform_population(lower: np.ndarray, upper: np.ndarray) -> PopulationModel:
    features = [Feature(name=n, kind="continuous", domain=(float(a), float(b)))
                for n, a, b in zip(INPUTS, lower, upper, strict=True)]
    factors = [Factor(columns=[n], distribution=Uniform(lower=float(a), upper=float(b)))
               for n, a, b in zip(INPUTS, lower, upper, strict=True)]
    return PopulationModel(name="uniform on phi2", features=features,
                           distribution=Product(factors=factors))


def paper_rows(data: Path, network: str) -> dict[str, Any]:
    """The paper's φ2 numbers for one network (Tables 2, 5 and 6), where present."""
    document = json.loads((data / "published_results.json").read_text())["pv_paper"]
    name = f"N_{network.replace('_', ',')}"
    found: dict[str, Any] = {}
    for key in ("table2_phi2_violation", "table5_phi2_all_36", "table6_finer_budgets"):
        for row in document.get(key, []):
            if row.get("network") == name and row.get("property", "phi2") == "phi2":
                found[key] = {k: v for k, v in row.items() if k.startswith(("pb_", "prove"))}
    return found


def run(data: Path, network_id: str, budgets: list[float], executor: str = "local",
        workers: int | None = None) -> dict[str, Any]:
    network = load_network(data / "onnx" / f"ACASXU_run2a_{network_id}_batch_2000.onnx")
    population = uniform_population(*phi2_box(data))
    names = Names.of(INPUTS, [f"y{i}" for i in range(5)])
    spec = specification_from_dict({"probabilities": {"violation": {"event": VIOLATION}}},
                                   names)
    masses, domain = population_domain(population)
    marks: dict[float, list[float]] = {}

    def record(progress: PVProgress) -> None:
        for budget in budgets:
            if budget not in marks and progress.elapsed_s >= budget:
                marks[budget] = list(progress.probabilities["violation"])

    settings = PVSettings(timeout_s=max(budgets), batch_size=512, executor=executor,
                          workers=workers)
    result = verify(network, spec, masses, domain, settings, record)
    final = list(result.probabilities["violation"])
    for budget in budgets:
        marks.setdefault(budget, final)
    return {"network": network_id, "intervals_percent": {
        str(int(b)): [100 * v for v in marks[b]] for b in budgets},
        "boxes": result.boxes, "elapsed_s": result.elapsed_s,
        "paper": paper_rows(data, network_id)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", nargs="+", default=["4_3", "4_9", "5_8"],
                        help="network ids a_b (N_a,b), a >= 2")
    parser.add_argument("--budgets", nargs="+", type=float, default=[10.0, 30.0, 60.0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--executor", default="local",
                        help="where each batch is bounded: local, process, dask[=ADDRESS]")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes (default: one per core)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads in this process (default: torch's)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    rows = [run(args.data, network, sorted(args.budgets), args.executor, args.workers)
            for network in args.networks]
    if args.json:
        print(json.dumps(to_jsonable(rows)))
        return
    for row in rows:
        intervals = "  ".join(f"{b}s [{lo:.2f}, {hi:.2f}]"
                              for b, (lo, hi) in row["intervals_percent"].items())
        print(f"N_{row['network']}: {intervals}  ({row['boxes']} boxes)")
        for table, values in row["paper"].items():
            print(f"    paper {table}: {values}")


if __name__ == "__main__":
    main()
