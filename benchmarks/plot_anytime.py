"""Plot anytime curves of causal-fairness certification beside FairQuant's published runs.

Reads the ``--json`` output of :mod:`benchmarks.anytime_profile` (one file per code version,
each labelled) and draws, per network, the certified-fair share against the **process CPU
seconds since the spawn** (imports included; on an idle machine the wall clock of the
single-threaded CLI reads about the same, under load it runs slower) as solid lines and
against the wall clock as dotted lines of the same colour. FairQuant's published share and
time are a star, and the issue's acceptance point (its time + 1 s) a grey vertical line.

Usage: ``python -m benchmarks.plot_anytime LABEL=RUN.json [LABEL=RUN.json ...] --out FILE.png
[--until S]`` (needs matplotlib).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

COLOURS = ("#888888", "#1f5fbf", "#d0661a", "#2a9d4b")


def _runs(specs: list[str]) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """``LABEL=FILE`` pairs → (label, {network name: its profile record})."""
    runs = []
    for spec in specs:
        label, _, path = spec.partition("=")
        records = json.loads(Path(path).read_text())
        runs.append((label, {record["name"]: record for record in records}))
    return runs


def _steps(curve: list[list[float]], until: float, decided: bool
           ) -> tuple[list[float], list[float]]:
    """A share curve ``[(seconds, fair, biased), ...]`` as step points in %, from 0 at 0 s to
    the run's last share, held to ``until`` if the run ``decided`` the whole query (a curve
    that stops early is a run that ended at its budget)."""
    xs, ys = [0.0], [0.0]
    for seconds, fair, _ in curve:
        if seconds > until:
            break
        xs += [seconds, seconds]
        ys += [ys[-1], 100.0 * fair]
    if decided or (curve and curve[-1][0] > until):
        xs.append(until)
        ys.append(ys[-1])
    return xs, ys


def plot(runs: list[tuple[str, dict[str, dict[str, Any]]]], out: Path, until: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(runs[0][1])
    columns = 5
    rows = math.ceil(len(names) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.0 * columns, 3.3 * rows),
                                squeeze=False)
    for axis, name in zip(axes.flat, names, strict=False):
        published = runs[0][1][name].get("fairquant")
        finals = []
        for (label, records), colour in zip(runs, COLOURS, strict=False):
            record = records.get(name)
            if record is None:
                continue
            decided = record["final"]["decided"] >= 1.0 - 1e-9
            axis.plot(*_steps(record["cpu_curve"], until, decided), color=colour, lw=1.6,
                      label=f"{label} (CPU s)")
            axis.plot(*_steps(record["curve"], until, decided), color=colour, lw=1.0, ls=":",
                      label=f"{label} (wall s)")
            finals.append(100.0 * record["final"]["fair"])
        low = min(finals)
        if published:
            axis.plot([published["time_s"]], [published["certified_pct"]], marker="*",
                      color="black", ms=11, ls="none", label="FairQuant (its time)")
            axis.axvline(published["time_s"] + 1.0, color="#bbbbbb", lw=0.8)
            low = min(low, published["certified_pct"])
        top = 100.0 if low > 90.0 else min(100.0, max(finals) + 5.0)
        axis.set_ylim(max(0.0, low - (0.6 if low > 90.0 else 0.45 * low)), top)
        axis.set_xlim(0.0, until)
        axis.set_title(name, fontsize=10)
        axis.set_xlabel("seconds since the spawn", fontsize=8)
        axis.set_ylabel("certified fair %", fontsize=8)
        axis.tick_params(labelsize=8)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(names):]:
        axis.axis("off")
    legend: dict[str, Any] = {}
    for axis in axes.flat:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    figure.legend(list(legend.values()), list(legend), loc="lower center", ncol=5, fontsize=9)
    figure.tight_layout(rect=(0, 0.06, 1, 1))
    figure.savefig(out, dpi=90)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="LABEL=FILE.json (anytime_profile --json)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--until", type=float, default=20.0, help="x-axis end (seconds)")
    args = parser.parse_args(argv)
    plot(_runs(args.runs), args.out, args.until)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
