"""Boxes per second of IBP and CROWN on ACAS Xu N1,1, beside auto_LiRPA 0.5's numbers.

Boxes of width 0.02 (normalised inputs) around uniform random centres in [-0.5, 0.5]^5, at
batch sizes 1, 64, 1024 and 16384, float64. Each figure is the best of ``--repeats`` runs.
Usage: ``python benchmarks/bounds_speed.py [--repeats 3] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from verifier.bounds import compute_bounds
from verifier.convert import load_network

ACAS = Path(__file__).resolve().parents[2] / "shared/benchmarks/acasxu/onnx"
NETWORK = "ACASXU_run2a_1_1_batch_2000.onnx"
BATCHES = (1, 64, 1024, 16384)
# auto_LiRPA 0.5 (float32) measured on this machine kind (DESIGN §5; issue 2)
REFERENCE = {
    ("ibp", 1024): 186_000, ("ibp", 16384): 423_000,
    ("crown", 64): 80, ("crown", 1024): 2_000, ("crown", 16384): 471,
}


def boxes_per_second(network, method: str, batch: int, repeats: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-0.5, 0.5, size=(batch, network.input_size))
    lower, upper = centres - 0.01, centres + 0.01
    compute_bounds(network, lower, upper, None, method)  # warm-up
    best = np.inf
    for _ in range(repeats):
        started = time.perf_counter()
        compute_bounds(network, lower, upper, None, method)
        best = min(best, time.perf_counter() - started)
    return batch / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--onnx-dir", type=Path, default=ACAS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    network = load_network(args.onnx_dir / NETWORK)
    rows = []
    for method in ("ibp", "crown"):
        for batch in BATCHES:
            rate = boxes_per_second(network, method, batch, args.repeats, seed=batch)
            rows.append({"method": method, "batch": batch, "boxes_per_s": round(rate),
                         "auto_lirpa_0_5": REFERENCE.get((method, batch))})
    if args.json:
        print(json.dumps({"machine": platform.processor() or platform.machine(),
                          "threads": torch.get_num_threads(), "rows": rows}))
        return
    print(f"ACAS Xu N1,1, boxes of width 0.02, float64, {torch.get_num_threads()} threads")
    print(f"{'method':<8}{'batch':>8}{'ours boxes/s':>16}{'auto_LiRPA 0.5':>18}")
    for row in rows:
        reference = row["auto_lirpa_0_5"]
        print(f"{row['method']:<8}{row['batch']:>8}{row['boxes_per_s']:>16,}"
              f"{(f'{reference:,}' if reference else '-'):>18}")


if __name__ == "__main__":
    main()
