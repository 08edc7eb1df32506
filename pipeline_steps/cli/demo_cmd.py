"""``certgate demo``: the whole pipeline on the income classifier of paper 002 §V, locally.

Exit code 0 when the demo ran as designed (the biased version failed the gate, the unbiased
one passed and was promoted, the self-correcting variant was deployed), 1 when a decision came
out otherwise, 2 on errors. Heavy imports happen when the verb runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pipeline_steps.cli.output import JSON_HELP, emit_json, outlives_its_reader

EXPECTED_GATES = {"biased": "failed", "unbiased": "passed"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="run the pipeline end to end on a local store (no server)",
        description="Generate the income data of paper 002 §V (biased and unbiased), train two "
        "classifiers, register them with their population models, audit demographic parity, "
        "gate (the biased one fails, the unbiased one becomes champion) and deploy the "
        "self-correcting variant. Everything is written under --workdir.",
    )
    parser.add_argument("--workdir", type=Path, default=Path("certgate-demo"),
                        help="directory for the sqlite store and every file (default "
                        "./certgate-demo)")
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    parser.set_defaults(func=demo_command)


@outlives_its_reader
def demo_command(args: argparse.Namespace) -> int:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from pipeline_steps.demo import run_demo
    from registry_hooks.connection import registry_errors

    with registry_errors("certgate demo"):
        result, config = run_demo(args.workdir, say=lambda line: print(line, flush=True))
    gates = {version.variant: version.gate.outcome for version in result.versions}
    as_designed = gates == EXPECTED_GATES and result.deployed is not None
    if not as_designed:
        print(f"certgate demo: the gates decided {gates}, expected {EXPECTED_GATES}",
              file=sys.stderr)
    if args.json:
        emit_json(result.summary(config))
    return 0 if as_designed else 1
