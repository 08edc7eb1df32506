"""``benchmarks/libra.py`` on the process CPU clock, in-process, with one torch thread.

On a machine shared by several jobs the wall clock says little, so old and new code are
compared at equal CPU: every clock the causal engine reads for its budget and deadlines
(``certify``, ``analysis``, ``exact_check`` and ``milp_certificate``) is replaced by
``time.process_time``, so ``--timeout`` is a CPU budget. Every module must be replaced: a
deadline set on the CPU clock and read on the wall clock by one module is always past, and
that module then gives up at once (``milp_certificate`` left out made every certificate stop
unproven, so no exact check proved a pair and German 0.20-bias1/Gt took 100,000 partitions
instead of 2,304).

Also prints the CPU spent re-checking witness classes
(:func:`verifier.causal.witness.certified_classes`), the points re-checked and how many of them
needed exact rational evaluation.

Usage: ``python benchmarks/libra_cpu_clock.py [benchmarks/libra.py's arguments]``, e.g.
``--network …/1280A-F.json --spec …/census.json --query …/C.json --timeout 40
--target-width 0`` or ``--dataset compas --only no-bias3/M_no-bias/age``.
"""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path

import numpy as np
import torch

import verifier.causal.analysis as analysis
import verifier.causal.certify as certify
import verifier.causal.exact_check as exact_check
import verifier.causal.milp_certificate as milp_certificate
import verifier.causal.witness as witness

sys.path.insert(0, str(Path(__file__).resolve().parent))
import libra  # the benchmark beside this file

CPU_CLOCK = types.SimpleNamespace(monotonic=time.process_time, time=time.process_time)


def use_cpu_clock() -> None:
    """One torch thread, and every clock the causal engine reads is the process CPU clock."""
    torch.set_num_threads(1)
    for module in (certify, analysis, exact_check, milp_certificate):
        module.time = CPU_CLOCK


def main(argv: list[str]) -> int:
    use_cpu_clock()
    recheck = {"cpu_s": 0.0, "points": 0, "exact": 0}
    certified_classes, exact_outputs = witness.certified_classes, witness.exact_outputs

    def timed_classes(network, points):
        started = time.process_time()
        classes = certified_classes(network, points)
        recheck["cpu_s"] += time.process_time() - started
        recheck["points"] += np.atleast_2d(points).shape[0]
        return classes

    def counted_exact(network, point):
        recheck["exact"] += 1
        return exact_outputs(network, point)

    witness.certified_classes = analysis.certified_classes = timed_classes
    witness.exact_outputs = counted_exact
    started = time.process_time()
    code = libra.main(argv)
    print(f"re-checks: {recheck['cpu_s']:.2f} CPU s for {recheck['points']} points "
          f"({recheck['exact']} evaluated exactly); process {time.process_time() - started:.2f}"
          " CPU s")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
