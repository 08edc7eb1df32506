"""Start-up time of the ``certgate`` command line: ``--help``, a verb's ``--help``, and the
configuration errors a user meets first (missing file, invalid field), the help of the verbs
that import their engines to build their options, each in a fresh
process, plus what ``python -X importtime`` attributes to torch, MLflow and scipy on the
configuration-error path.

Target (issue 15): ``certgate --help`` and a configuration error in ≤ 1 s. Wall-clock times on
a shared machine are noisy: the script prints the load average before and after, and the
median and minimum of ``--repeat`` runs.

    python benchmarks/startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "mlflow", "scipy", "great_expectations", "pandas")


def command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "pipeline_steps", *argv]


def timed(argv: list[str], repeat: int) -> tuple[float, float, int]:
    """(median, minimum) wall-clock seconds of ``argv`` and its exit code."""
    times, code = [], 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(repeat):
        start = time.perf_counter()
        code = subprocess.run(argv, capture_output=True, env=env, check=False).returncode
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), code


def heavy_imports(argv: list[str]) -> dict[str, float]:
    """Cumulative import seconds of each top-level heavy package ``argv`` imports."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-X", "importtime", *argv[1:]],
                            capture_output=True, text=True, env=env, check=False)
    found: dict[str, float] = {}
    for line in result.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not line.startswith("import time:"):
            continue
        name = parts[2].strip()
        if name in HEAVY:
            found[name] = int(parts[1]) / 1e6
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        invalid = Path(workdir) / "invalid.yaml"
        invalid.write_text("model: {uri: models:/m@candidate}\naudits: []\n")
        typo = Path(workdir) / "typo.yaml"
        typo.write_text("model: {uri: models:/m@candidate}\naudits:\n"
                        "  - {kind: causal_fairness, protected: [x0], max_biased_share: 0.1,"
                        " lower_egde: 0.1}\n")
        missing = str(Path(workdir) / "missing.yaml")
        cases = {
            "certgate --help": command("--help"),
            "certgate run --help": command("run", "--help"),
            "certgate verify demographic-parity --help": command(
                "verify", "demographic-parity", "--help"),
            "certgate bounds --help": command("bounds", "--help"),
            "certgate population fit --help": command("population", "fit", "--help"),
            "certgate config check MISSING": command("config", "check", missing),
            "certgate run --config MISSING": command("run", "--config", missing),
            "certgate run --config INVALID": command("run", "--config", str(invalid)),
            "certgate config check TYPO (audit key)": command("config", "check", str(typo)),
            "python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
        }
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
        print(f"{'command':44s} {'median s':>9s} {'min s':>7s} {'exit':>5s}")
        for label, argv in cases.items():
            median, fastest, code = timed(argv, args.repeat)
            print(f"{label:44s} {median:9.2f} {fastest:7.2f} {code:5d}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        for label in ("certgate --help", "certgate run --config INVALID",
                      "certgate config check TYPO (audit key)"):
            found = heavy_imports(cases[label])
            spent = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in found.items())
            print(f"heavy imports of {label!r}: {spent or 'none'}")


if __name__ == "__main__":
    main()
