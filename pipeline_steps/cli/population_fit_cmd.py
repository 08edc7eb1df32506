"""``certgate population fit DATA --out FILE`` and ``certgate population schema``.

``fit`` reads a CSV or Parquet table, fits a population model with
:func:`certgate.population_data.fit_population` (column handling documented there and in
docs/population-format.md), writes it, validates the written file exactly as ``population
validate`` does (and, with ``--model``, its binding to the network), and prints a summary.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline_steps.cli.output import JSON_HELP, emit_json
from verifier.errors import CertgateInputError, first_line

if TYPE_CHECKING:
    import pandas as pd

    from verifier.population import PopulationModel

CONTINUOUS_METHODS = ("normal", "gaussian_mixture", "density_tree")


def add_fit_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register ``fit`` and ``schema`` under ``certgate population``."""
    fit = verbs.add_parser(
        "fit",
        help="fit a population model to a CSV or Parquet table",
        description="Fit a population model to DATA and write it to --out. Raw string columns "
        "are one-hot encoded in place as COL=VALUE columns (values sorted as strings); "
        "columns named NAME=VALUE form the one-hot group NAME; other columns are binary "
        "(0/1), integer or continuous. Without --parents the model is an independent "
        "product; with --parents a Bayesian network. The written file is validated as "
        "'population validate' does. See docs/population-format.md.",
    )
    fit.add_argument("data", help="data table (.csv, or .parquet/.pq)")
    fit.add_argument("--out", required=True, help="population model JSON file to write")
    fit.add_argument("--categorical", action="append", default=[], metavar="NAME=COL1,COL2",
                     help="a one-hot group: feature NAME made of these 0/1 columns (repeatable)")
    fit.add_argument("--domain", action="append", default=[], metavar="COL=LO:HI",
                     help="domain of a numeric column; leave a side empty for unbounded "
                          "(repeatable; --domain=x=-1:1 when LO starts with -)")
    fit.add_argument("--continuous", choices=CONTINUOUS_METHODS, default="normal",
                     help="how continuous columns are fitted in a product (default normal)")
    fit.add_argument("--parents", action="append", default=[], metavar="CHILD=P1,P2",
                     help="Bayesian network: CHILD's parent features (repeatable)")
    fit.add_argument("--bins", action="append", default=[], metavar="COL=b1,b2",
                     help="cut points of a continuous or many-valued integer parent")
    fit.add_argument("--components", type=int, default=3,
                     help="Gaussian mixture components per feature (default 3)")
    fit.add_argument("--min-leaf", type=int, default=50,
                     help="density tree: rows per leaf (default 50)")
    fit.add_argument("--min-rows", type=int, default=30,
                     help="Bayesian network: rows a CPT cell needs, else the pooled fit (30)")
    fit.add_argument("--max-discrete-values", type=int, default=20,
                     help="integer columns with more distinct values get a discretised normal")
    fit.add_argument("--seed", type=int, default=0, help="random seed (Gaussian mixtures)")
    fit.add_argument("--name", help="model name recorded in the file")
    fit.add_argument("--model", "--network", dest="model",
                     help="network file whose inputs the model must bind to by name")
    fit.add_argument("--input-names", help="the network's input names, comma-separated "
                                           "(for a network file that records none)")
    fit.add_argument("--json", action="store_true", help=JSON_HELP)
    fit.set_defaults(func=run_fit)

    schema = verbs.add_parser("schema", help="print the JSON Schema of population models")
    schema.add_argument("--json", action="store_true", help=JSON_HELP)
    schema.set_defaults(func=run_schema)


def _pairs(values: list[str], option: str) -> dict[str, str]:
    """``KEY=VALUE`` options as a dict, split at the first ``=`` (so one-hot column names
    such as ``color=red`` may appear in the value list)."""
    result: dict[str, str] = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key or not value:
            raise CertgateInputError(f"{option} {text!r}: expected KEY=VALUE")
        if key in result:
            raise CertgateInputError(f"{option}: {key!r} given twice")
        result[key] = value
    return result


def _names(text: str, option: str, key: str) -> list[str]:
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise CertgateInputError(f"{option} {key}={text}: empty name in the list")
    return names


def _end(text: str, option: str) -> float | None:
    if text.strip() in ("", "inf", "-inf", "+inf"):
        return None
    try:
        value = float(text)
    except ValueError as error:
        raise CertgateInputError(f"{option}: {text!r} is not a number") from error
    if not math.isfinite(value):
        raise CertgateInputError(f"{option}: {text!r} is not a finite number")
    return value


def parse_domains(values: list[str]) -> dict[str, tuple[float | None, float | None]]:
    """``COL=LO:HI`` options (an empty side is unbounded)."""
    domains = {}
    for key, text in _pairs(values, "--domain").items():
        low, sep, high = text.partition(":")
        if not sep:
            raise CertgateInputError(f"--domain {key}={text}: expected LO:HI")
        domains[key] = (_end(low, f"--domain {key}"), _end(high, f"--domain {key}"))
    return domains


def parse_bins(values: list[str]) -> dict[str, list[float]]:
    """``COL=b1,b2`` options."""
    bins = {}
    for key, text in _pairs(values, "--bins").items():
        cuts = [_end(part, f"--bins {key}") for part in text.split(",")]
        if any(cut is None for cut in cuts):
            raise CertgateInputError(f"--bins {key}={text}: cut points must be finite numbers")
        bins[key] = [float(cut) for cut in cuts if cut is not None]
    return bins


def read_table(path: str) -> pd.DataFrame:
    """A CSV (``.csv``) or Parquet (``.parquet``, ``.pq``) table."""
    import pandas as pd

    suffix = Path(path).suffix.lower()
    if not Path(path).is_file():
        raise FileNotFoundError(2, "no such file", path)
    try:
        if suffix == ".csv":
            return pd.read_csv(path)
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
    except (ValueError, OSError, ImportError) as error:
        first = first_line(error)
        raise CertgateInputError(f"{path}: cannot read the table ({first})") from error
    raise CertgateInputError(f"{path}: expected a .csv, .parquet or .pq file")


def summary(model: PopulationModel, rows: int) -> dict[str, Any]:
    """What ``fit`` reports: rows, columns, features by kind, the distribution."""
    return {
        "rows": rows,
        "columns": list(model.columns),
        "distribution": model.distribution.kind,
        "features": [{"name": f.name, "kind": f.kind, "columns": f.column_names(),
                      **({"categories": f.categories} if f.categories else {}),
                      **({"domain": list(f.domain)} if f.domain else {})}
                     for f in model.features],
    }


def run_fit(args: argparse.Namespace) -> int:
    from certgate.population_data import fit_population
    from pipeline_steps.cli.population_checks import check_binding, validated_file
    from verifier.population import save_population

    frame = read_table(args.data)
    categorical = {key: _names(text, "--categorical", key)
                   for key, text in _pairs(args.categorical, "--categorical").items()}
    parents = {key: _names(text, "--parents", key)
               for key, text in _pairs(args.parents, "--parents").items()}
    model = fit_population(
        frame, categorical=categorical, domains=parse_domains(args.domain),
        continuous=args.continuous, parents=parents, bins=parse_bins(args.bins),
        n_components=args.components, min_leaf=args.min_leaf, min_rows=args.min_rows,
        max_discrete_values=args.max_discrete_values, seed=args.seed, name=args.name)
    if args.model:
        model = in_network_order(args, model)
    out = save_population(model, args.out)
    written, total = validated_file(str(out))
    report = {"file": str(out), **summary(written, len(frame)), "total_mass": total}
    if args.model:
        report["network"] = args.model
        report["binding"] = check_binding(args, written)
    if args.json:
        emit_json(report)
        return 0
    print(f"{out}: {report['distribution']} population model of {len(frame)} rows, "
          f"{len(report['columns'])} columns, total mass {total:.12g} (valid)")
    for feature in report["features"]:
        extra = (f" categories {feature['categories']}" if "categories" in feature
                 else f" domain {feature['domain']}" if "domain" in feature else "")
        print(f"  {feature['name']}: {feature['kind']} {feature['columns']}{extra}")
    if args.model:
        print(f"  {report['binding']} {args.model}")
    return 0


def in_network_order(args: argparse.Namespace, model: PopulationModel) -> PopulationModel:
    """``model`` with ``column_order`` set to the network's input order when the network
    names the same columns in another order (so the file binds as written); otherwise
    unchanged, and the binding check reports the difference."""
    from pipeline_steps.cli.inputs import read_network
    from verifier.audits.binding import anonymous_inputs, bound_names, parse_input_names
    from verifier.population import PopulationModel

    network = read_network(args.model)
    given = parse_input_names(args.input_names)
    if given is None and anonymous_inputs(network):
        return model
    names = bound_names(network, given, f"--model {args.model}")
    if sorted(names) != sorted(model.columns) or names == list(model.columns):
        return model
    return PopulationModel.model_validate({**model.model_dump(), "column_order": names})


def run_schema(args: argparse.Namespace) -> int:
    import json

    from verifier.population import PopulationModel

    schema = PopulationModel.model_json_schema()
    if args.json:
        emit_json(schema)
    else:
        print(json.dumps(schema, indent=2))
    return 0
