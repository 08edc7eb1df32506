"""Where a PV run's wall time goes on a process pool: the workers' busy and idle time, and
the caller's CPU.

A measurement for issue 37 ("time spent outside bounding": pool bookkeeping, pickling, the
caller's work between rounds), not a certificate. PV runs demographic parity on a cached
Adult instance of :mod:`benchmarks.adult_instances` (``--protected sex --privileged 1
--favorable-class 1``, the CLI's defaults otherwise) on a local process pool for
``--budget`` seconds. Every task a worker runs
(:func:`verifier.pv.evaluation._evaluate_task`) is timed there: its start and end on the
system's monotonic clock (:func:`time.perf_counter`, one clock for every process) and its
CPU seconds, appended to a log file; the pool's workers are forked from this process, so they
run the timed task. Printed as JSON: the run's wall time, the caller's CPU seconds (this
process: the loop, selection, splitting, pickling), the workers' CPU seconds (their whole
processes, read by ``getrusage(RUSAGE_CHILDREN)`` once they are ended: tasks, unpickling
and pickling; their system share and minor page faults apart), boxes per CPU second of the
two, the tasks' mean size in boxes, the boxes and intervals reached, and per
worker its tasks, busy wall seconds, CPU seconds and idle wall seconds (from its first task
to the run's end, the time it held no task). On a loaded machine busy wall exceeds CPU by the
other jobs' share; idle wall is the pool's own loss whatever the load.

Usage (from the checkout root)::

    python -m benchmarks.pv_pool_time --instance adult13-h16-s0-e5-4f34ee11d87e \\
        --gamma 0.5935 --budget 120 --workers 2
    python -m benchmarks.pv_pool_time --instance pvadult-634d2e576b31-h20x10 \\
        --population pvadult-634d2e576b31 --protected sex=Male --gamma 0.8 --budget 60

(the second: a network of PV's Adult setup, :mod:`benchmarks.pv_adult`, whose networks share
one population file). ``--rounds`` adds one row per collected round: its wall time from the
start, the caller's CPU, the boxes, the open boxes and the ratio interval.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.adult_instances import CACHE_DIR


def _timed_tasks(log: Path) -> None:
    """Replace the pool's task function by one that appends ``pid start end cpu boxes`` to
    ``log`` after each task (under the same qualified name, so the tasks pickle by it)."""
    import verifier.pv.evaluation as evaluation

    original = evaluation._evaluate_task

    def timed(*args: Any) -> Any:
        began, cpu = time.perf_counter(), time.process_time()
        result = original(*args)
        with log.open("a", encoding="ascii") as out:
            out.write(f"{os.getpid()} {began} {time.perf_counter()} "
                      f"{time.process_time() - cpu} {args[1].shape[0]}\n")
        return result

    timed.__module__, timed.__qualname__ = original.__module__, original.__qualname__
    evaluation._evaluate_task = timed


def measure(stem: Path, gamma: float, budget: float, workers: int,
            population_stem: Path | None = None, protected: str = "sex",
            rounds: bool = False) -> dict[str, Any]:
    """One run of ``budget`` seconds on ``workers`` processes; see the module
    (``population_stem``: the population's file stem when it is not ``stem``'s)."""
    import torch

    from verifier.audits.demographic_parity import demographic_parity_audit
    from verifier.convert import network_from_json
    from verifier.population import load_population
    from verifier.pv import PVSettings

    torch.set_num_threads(1)
    network = network_from_json(json.loads(Path(f"{stem}.network.json").read_text("utf-8")))
    population = load_population(Path(f"{population_stem or stem}.population.json"))
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "tasks.log"
        _timed_tasks(log)
        reports: list[Any] = []
        round_rows: list[list[Any]] = []
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started, cpu = time.perf_counter(), time.process_time()

        def report(progress: Any) -> None:
            reports.append(progress)
            round_rows.append([round(time.perf_counter() - started, 3),
                               round(time.process_time() - cpu, 3), progress.boxes,
                               progress.open_boxes, list(progress.value)])

        demographic_parity_audit(
            network, population, protected=protected, privileged=1.0, favorable_class=1,
            gamma=gamma, progress=report,
            settings=PVSettings(timeout_s=budget, executor="process", workers=workers))
        ended, caller = time.perf_counter(), time.process_time() - cpu
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        rows = log.read_text("ascii").split("\n") if log.exists() else []
    tasks: dict[str, list[tuple[float, float, float]]] = {}
    task_boxes = 0
    for row in filter(None, rows):
        pid, began, done, seconds, boxes = row.split()
        tasks.setdefault(pid, []).append((float(began), float(done), float(seconds)))
        task_boxes += int(boxes)
    workers_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    workers_system = after.ru_stime - before.ru_stime
    last = reports[-1]
    task_count = sum(len(spans) for spans in tasks.values())
    result: dict[str, Any] = {
        "wall_s": round(ended - started, 2), "caller_cpu_s": round(caller, 2),
        "workers_cpu_s": round(workers_cpu, 2), "workers_system_s": round(workers_system, 2),
        "workers_minor_faults": after.ru_minflt - before.ru_minflt,
        "boxes_per_cpu_s": round(last.boxes / max(caller + workers_cpu, 1e-9)),
        "mean_task_boxes": round(task_boxes / max(task_count, 1)),
        "boxes": last.boxes, "value": last.value, "probabilities": last.probabilities,
        "workers": {},
    }
    for pid, spans in sorted(tasks.items()):
        busy = sum(done - began for began, done, _ in spans)
        first = min(began for began, _, _ in spans)
        result["workers"][pid] = {
            "tasks": len(spans), "busy_s": round(busy, 2),
            "cpu_s": round(sum(seconds for _, _, seconds in spans), 2),
            "idle_s": round(ended - first - busy, 2),
        }
    if rounds:
        result["rounds"] = round_rows
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instance", default="adult13-h16-s0-e5-4f34ee11d87e",
                        help="a cached instance's file stem in benchmarks/.adult_cache")
    parser.add_argument("--gamma", type=float, default=0.5935)
    parser.add_argument("--budget", type=float, default=120.0, help="wall seconds")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--population", default=None,
                        help="the population's file stem in the cache, if not the instance's")
    parser.add_argument("--protected", default="sex", help="the protected column")
    parser.add_argument("--rounds", action="store_true", help="one row per collected round")
    args = parser.parse_args(argv)
    stem = CACHE_DIR / args.instance
    if not Path(f"{stem}.network.json").exists():
        print(f"no cached instance {stem}; build it with benchmarks.adult_instances",
              file=sys.stderr)
        return 2
    population = None if args.population is None else CACHE_DIR / args.population
    print(json.dumps(measure(stem, args.gamma, args.budget, args.workers, population,
                             args.protected, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
