"""``certgate population``: validate, describe and sample population-model files.

The population models and numpy are imported by the verbs that read a file, so
``certgate population … --help`` answers without them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from pipeline_steps.cli.inputs import MODEL_HELP
from pipeline_steps.cli.output import JSON_HELP, emit_json
from pipeline_steps.cli.population_fit_cmd import add_fit_parsers

if TYPE_CHECKING:
    import numpy as np


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "population",
        help="population models: fit, validate, describe, sample, schema",
        description="Work with population-model files (certgate.population/v1 JSON).",
    )
    verbs = parser.add_subparsers(dest="population_command", metavar="VERB", required=True)

    validate = verbs.add_parser(
        "validate",
        help="validate a population model (schema, total mass, optionally against a network)",
        description="Validate FILE: schema, distributions, total mass 1; with --model, also "
        "that its columns match the network's inputs (count, and names when the network names "
        "its inputs). Exit code 0 when valid, 2 with a one-line message otherwise.",
    )
    validate.add_argument("file", help="population model JSON file")
    validate.add_argument("--model", help=MODEL_HELP)
    validate.add_argument("--input-names",
                          help="the network's input names in input order, comma-separated "
                               "(for a network file that records none)")
    validate.add_argument("--json", action="store_true", help=JSON_HELP)
    validate.set_defaults(func=run_validate)

    describe = verbs.add_parser("describe", help="print a readable description")
    describe.add_argument("file", help="population model JSON file")
    describe.add_argument("--json", action="store_true", help=JSON_HELP)
    describe.set_defaults(func=run_describe)

    sample = verbs.add_parser(
        "sample",
        help="draw samples (CSV with a header on stdout by default)",
        description="Draw N samples. Without --out: CSV with a column header on stdout; "
        "--out X.csv writes CSV, --out X.npy a float64 array of shape (N, columns).",
    )
    sample.add_argument("file", help="population model JSON file")
    sample.add_argument("-n", type=int, required=True, help="number of samples")
    sample.add_argument("--seed", type=int, default=None, help="random seed")
    sample.add_argument("--out", help="output file (.csv or .npy)")
    sample.add_argument("--json", action="store_true",
                        help="print one JSON object (the samples, or what --out holds)")
    sample.set_defaults(func=run_sample)
    add_fit_parsers(verbs)


def run_validate(args: argparse.Namespace) -> int:
    from pipeline_steps.cli.population_checks import check_binding, validated_file

    model, total = validated_file(args.file)
    summary = {
        "file": args.file,
        "valid": True,
        "columns": list(model.columns),
        "distribution": model.distribution.kind,
        "total_mass": total,
    }
    checked = ""
    if args.model:
        checked = check_binding(args, model)
        summary["network"] = args.model
        summary["binding"] = checked
    if args.json:
        emit_json(summary)
        return 0
    against = f"; {checked} {args.model}" if args.model else ""
    print(
        f"{args.file}: valid ({model.dimension} columns, {model.distribution.kind} "
        f"distribution, total mass {total:.12g}{against})"
    )
    return 0


def run_describe(args: argparse.Namespace) -> int:
    from verifier.population import load_population

    model = load_population(args.file)
    if args.json:
        emit_json({"file": args.file, "columns": list(model.columns),
                   "distribution": model.distribution.kind, "description": model.describe()})
    else:
        print(model.describe())
    return 0


def run_sample(args: argparse.Namespace) -> int:
    import numpy as np

    from verifier.population import load_population
    from verifier.population.errors import PopulationError

    if args.n < 0:
        raise PopulationError(f"-n must be non-negative, got {args.n}")
    model = load_population(args.file)
    samples = model.sample(args.n, np.random.default_rng(args.seed))
    if args.out is None:
        if args.json:
            emit_json({"columns": list(model.columns), "samples": samples.tolist()})
        else:
            _write_csv(sys.stdout, list(model.columns), samples)
        return 0
    out = Path(args.out)
    if out.suffix == ".npy":
        np.save(out, samples)
    elif out.suffix == ".csv":
        with out.open("w") as handle:
            _write_csv(handle, list(model.columns), samples)
    else:
        raise PopulationError(f"--out must end in .csv or .npy, got {args.out!r}")
    print(f"wrote {args.n} samples of {model.dimension} columns to {out}", file=sys.stderr)
    if args.json:
        emit_json({"out": str(out), "samples": args.n, "columns": list(model.columns)})
    return 0


def _write_csv(handle: TextIO, columns: list[str], samples: np.ndarray) -> None:
    import numpy as np

    handle.write(",".join(columns) + "\n")
    np.savetxt(handle, samples, delimiter=",", fmt="%.17g")
