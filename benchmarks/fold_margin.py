"""Bounds of batch-norm models at near-tie points: the interval widths the margin leaves, and a
parity audit that turns on one near-tie lattice point.

Models: ``Linear → BatchNorm1d → ReLU → Linear → BatchNorm1d → ReLU → Linear`` in float64 with
random parameters (seeded), converted by certgate (the batch norms folded into the Linear
layers). At points found by bisection on the float decision boundary between outputs 0 and 1,
prints the median and largest width of IBP's and CROWN's interval of ``y1 − y0`` on point
boxes, with the relative margin the network's bounds take. Then the parity case of
``tests/test_fold_count_server.py`` (a 50-point lattice whose point ``(0, 1, 2)`` has real
class margin ``+5e-9``; ratio ``8/10`` against γ 0.75): verdict, ratio interval, CPU seconds.

Usage: ``python benchmarks/fold_margin.py [--models 20] [--json]``. Runs on any checkout (it
uses only the converters, ``compute_bounds`` and the parity audit).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import torch

from verifier.bounds import compute_bounds
from verifier.bounds.affine import _network_rel_margin
from verifier.convert.torch_module import from_torch
from verifier.network import Network

SPEC = np.array([[-1.0, 1.0]])


def _model(seed: int) -> torch.nn.Sequential:
    rng = np.random.default_rng(seed)
    module = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 8),
        torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).double().eval()
    with torch.no_grad():
        for layer in module:
            if isinstance(layer, torch.nn.Linear):
                layer.weight.copy_(torch.tensor(rng.normal(size=layer.weight.shape)))
                layer.bias.copy_(torch.tensor(rng.normal(size=layer.bias.shape)))
            elif isinstance(layer, torch.nn.BatchNorm1d):
                layer.running_mean.copy_(torch.tensor(rng.uniform(-1.0, 1.0, 8)))
                layer.running_var.copy_(torch.tensor(rng.uniform(0.3, 3.0, 8)))
                layer.weight.copy_(torch.tensor(rng.normal(size=8)))
                layer.bias.copy_(torch.tensor(rng.normal(size=8)))
    return module


def _near_ties(network: Network, rng: np.random.Generator, count: int) -> list[np.ndarray]:
    """Float points within a few ulps of the float network's boundary between outputs 0, 1."""
    found: list[np.ndarray] = []
    for _ in range(50 * count):
        if len(found) == count:
            break
        a, b = rng.uniform(-3.0, 3.0, (2, network.input_size))
        sides = [np.sign(np.diff(network.evaluate(p))[0]) for p in (a, b)]
        if sides[0] * sides[1] >= 0:
            continue
        for _ in range(80):
            middle = 0.5 * a + 0.5 * b
            side = np.sign(np.diff(network.evaluate(middle))[0])
            if side == 0:
                break
            a, b = (middle, b) if side == sides[0] else (a, middle)
        found.append(a)
    return found


def widths(models: int) -> dict[str, Any]:
    """Interval widths of ``y1 − y0`` at near-tie points of ``models`` random models."""
    found: dict[str, list[float]] = {"ibp": [], "crown": []}
    margins = []
    for seed in range(models):
        network = from_torch(_model(seed))
        margins.append(_network_rel_margin(network.lowered()))
        points = _near_ties(network, np.random.default_rng(seed), 5)
        if not points:
            continue
        for method, values in found.items():
            result = compute_bounds(network, np.array(points), np.array(points), SPEC, method)
            values.extend((result.upper - result.lower)[:, 0].tolist())
    return {"relative_margin": [min(margins), max(margins)], "points": len(found["crown"]),
            **{method: {"median": float(np.median(values)), "max": float(np.max(values))}
               for method, values in found.items()}}


def parity_case() -> dict[str, Any]:
    """The near-tie parity audit of ``tests/test_fold_count_server.py``, in-process."""
    import sys
    import tempfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root), str(root / "tests")]
    from tests.test_fold_count_server import _model as parity_model
    from tests.test_fold_count_server import _population
    from verifier.audits.demographic_parity import demographic_parity_audit
    from verifier.population import load_population

    network = from_torch(parity_model()).renamed(["sex", "a", "b"])
    population = load_population(_population(Path(tempfile.mkdtemp())))
    start = time.process_time()
    certificate = demographic_parity_audit(network, population, protected="sex", privileged=1,
                                           favorable_class=1, gamma=0.75, timeout_s=60)
    return {"verdict": certificate.verdict, "ratio": list(certificate.bounds["value"]),
            "boxes": certificate.cost.get("boxes"),
            "cpu_s": round(time.process_time() - start, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = {"widths": widths(args.models), "parity": parity_case()}
    if args.json:
        print(json.dumps(report))
        return
    for key, value in report.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
