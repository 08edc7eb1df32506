"""``certgate population fit DATA --out FILE`` and ``certgate population schema``.

``fit`` reads a CSV or Parquet table (with ``--model``, only the network's input columns of
it), fits a population model with :func:`certgate.population_data.fit_population` (column
handling and defaults documented there and in docs/population-format.md), validates it
exactly as ``population validate`` does (and, with ``--model``, its binding to the network),
and only then puts it at ``--out``: a failed fit leaves no file. It prints a summary with
the learned edges and the fitting time, and warns about what the population does not hold of
the table (:class:`certgate.population_data.PopulationFitWarning`: a column fitted as a
density although it holds only a few values, a near-functional dependence lost).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline_steps.cli.inputs import read_network
from pipeline_steps.cli.output import JSON_HELP, emit_json
from pipeline_steps.cli.settings_options import RenamedOption
from verifier.errors import CertgateInputError

if TYPE_CHECKING:
    import pandas as pd

    from verifier.population import PopulationModel

CONTINUOUS_METHODS = ("histogram", "normal", "gaussian_mixture", "density_tree")


def add_fit_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register ``fit`` and ``schema`` under ``certgate population``."""
    fit = verbs.add_parser(
        "fit",
        help="fit a population model to a CSV or Parquet table",
        description="Fit a population model to DATA and write it to --out. Raw string columns "
        "are one-hot encoded in place as COL=VALUE columns (values sorted as strings); "
        "columns named NAME=VALUE form the one-hot group NAME; other columns are binary "
        "(0/1), integer (a float column of whole numbers, 3.0, too) or continuous; another "
        "float column with at most --max-discrete-values "
        "values on an exact grid (a rating in steps of 0.5) is integer codes k with a step "
        "and an offset (value = offset + step·k), and a few-valued column on no exact grid "
        "(tenths) is continuous, with a warning. By default the model is a Bayesian network whose "
        "structure is learned from the data (hill climbing on BIC, pgmpy; with --protected "
        "COL the protected attribute is every feature's parent), on bounded, data-shaped "
        "marginals: histograms on the data's range, with an atom for any value "
        "holding 5 percent of the rows. --independent fits the independent product instead; "
        "--parents gives the structure by hand. The model is validated as 'population "
        "validate' does before it is written; a failed fit writes no file. See "
        "docs/population-format.md.",
    )
    fit.add_argument("data", help="data table (.csv, or .parquet/.pq)")
    fit.add_argument("--out", required=True, help="population model JSON file to write")
    fit.add_argument("--categorical", action="append", default=[], metavar="NAME=COL1,COL2",
                     help="a one-hot group: feature NAME made of these 0/1 columns (repeatable)")
    fit.add_argument("--domain", action="append", default=[], metavar="COL=LO:HI",
                     help="domain of a numeric column; leave a side empty for unbounded "
                          "(repeatable)")
    fit.add_argument("--continuous", choices=CONTINUOUS_METHODS, default="histogram",
                     help="marginals: histogram (default: bounded, on the data's range), "
                          "normal (unbounded normals unless --domain bounds them; discretised "
                          "normals for many-valued integers), gaussian_mixture or "
                          "density_tree (independent product only)")
    fit.add_argument("--independent", action="store_true",
                     help="fit the independent product (every column independent of the "
                          "others) instead of learning a Bayesian network")
    fit.add_argument("--protected", metavar="COL",
                     help="the audit's protected attribute: a root of the learned network "
                          "and a parent of every other feature")
    fit.add_argument("--config", metavar="FILE",
                     help="a certgate configuration the fit is for: without --protected, "
                          "the protected attribute its audits name (their 'protected' "
                          "setting)")
    fit.add_argument("--parents", action="append", default=[], metavar="CHILD=P1,P2",
                     help="Bayesian network given by hand: CHILD's parent features "
                          "(repeatable; no structure is learned)")
    fit.add_argument("--bins", action="append", default=[], metavar="COL=b1,b2",
                     help="cut points of a continuous or many-valued integer parent")
    fit.add_argument("--components", type=int, default=3,
                     help="Gaussian mixture components per feature (default 3)")
    fit.add_argument("--min-leaf", type=int, default=50,
                     help="density tree: rows per leaf (default 50)")
    fit.add_argument("--min-rows", type=int, default=1,
                     help="Bayesian network: rows a density node's CPT cell needs, else it is "
                          "fitted on the rows of its first parents' cells (1: every cell "
                          "holding a row is fitted on its own rows)")
    fit.add_argument("--max-discrete-values", type=int, default=20,
                     help="integer columns with more distinct values get an integer "
                          "histogram (a discretised normal with --continuous normal)")
    fit.add_argument("--seed", type=int, default=0, help="random seed (Gaussian mixtures)")
    fit.add_argument("--name", help="model name recorded in the file")
    fit.add_argument("--model",
                     help="network file: fit only its input columns of DATA (a raw string "
                          "column COL feeds inputs COL=VALUE) and check the model binds to "
                          "it by name")
    fit.add_argument("--network", action=RenamedOption, new="--model")
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
    """A CSV (``.csv``) or Parquet (``.parquet``, ``.pq``) table, read as the fidelity
    check reads data (:func:`pipeline_steps.fidelity_data.read_table`)."""
    from pipeline_steps.fidelity_data import read_table as read_data

    if not Path(path).is_file():
        raise FileNotFoundError(2, "no such file", path)
    if Path(path).suffix.lower() not in (".csv", ".parquet", ".pq"):
        raise CertgateInputError(f"{path}: expected a .csv, .parquet or .pq file")
    return read_data(Path(path))


def summary(model: PopulationModel, rows: int) -> dict[str, Any]:
    """What ``fit`` reports: rows, columns, features by kind, the distribution, its edges
    (a Bayesian network's, else none) and the data it was fitted from."""
    from verifier.population import BayesianNetwork

    distribution = model.distribution
    edges = distribution.edges() if isinstance(distribution, BayesianNetwork) else []
    return {
        "rows": rows,
        "columns": list(model.columns),
        "distribution": distribution.kind,
        "edges": [list(edge) for edge in edges],
        "description": model.description,
        "features": [{"name": f.name, "kind": f.kind, "columns": f.column_names(),
                      **({"categories": f.categories} if f.categories else {}),
                      **({"domain": list(f.domain)} if f.domain else {}),
                      **({"step": f.code()[0], "offset": f.code()[1]} if f.coded else {})}
                     for f in model.features],
        **({"fitted_from": model.fitted_from.model_dump()} if model.fitted_from else {}),
    }


def model_columns(args: argparse.Namespace, frame: pd.DataFrame) -> pd.DataFrame:
    """The columns of ``frame`` that the network of ``--model`` reads, in table order: a
    column named like an input, or a raw string column ``COL`` when an input is named
    ``COL=VALUE``; and the protected attribute's columns (``--protected``, or ``--config``'s),
    read or not. A network without input names keeps the whole table, which must then have
    no more columns than the network has inputs once its string columns are one-hot encoded.
    Raises naming the inputs the table lacks, a text column the network reads as one number,
    or ``--input-names`` when a network without names meets a wider table."""
    from pandas import to_numeric

    from certgate.population_data import dummies_hint, is_string_column
    from verifier.audits.binding import anonymous_inputs, bound_names, parse_input_names

    network = read_network(args.model)
    given = parse_input_names(args.input_names)
    if given is None and anonymous_inputs(network):
        encoded = sum(frame[c].nunique() if is_string_column(frame[c]) else 1
                      for c in frame.columns)
        if encoded > network.input_size:
            raise CertgateInputError(
                f"--model {args.model} records no input names (its {network.input_size} inputs "
                f"are only positions: {network.input_names[0]}, …), and {args.data} has "
                f"{encoded} columns once its string columns are one-hot encoded, so the ones it "
                "reads cannot be told apart: give its input names in the network's input order "
                "with --input-names a,b,c (then only those columns, and the protected "
                "attribute's, are fitted)")
        return frame
    inputs = bound_names(network, given, f"--model {args.model}")
    raw = [str(c) for c in frame.columns if is_string_column(frame[c])]
    feeds = {column: [name for name in inputs if name.startswith(f"{column}=")]
             for column in raw}
    fed = {str(c) for c in frame.columns if str(c) in inputs or feeds.get(str(c))}
    fed |= {name for c in fed for name in feeds.get(c, [])}
    missing = [name for name in inputs if name not in fed]
    protected = fit_protected(args)
    kept = [c for c in frame.columns if str(c) in fed or _protects(str(c), protected)]
    if missing:
        raise CertgateInputError(
            f"{args.data}: the network of --model {args.model} reads inputs {missing}, which "
            f"are not columns of the table (nor COL=VALUE of a string column COL); columns: "
            f"{[str(c) for c in frame.columns]}{dummies_hint(missing, frame)}")
    for column in (c for c in raw if c in inputs):
        texts = frame[column].dropna()
        words = texts[to_numeric(texts, errors="coerce").isna()].unique().tolist()
        raise CertgateInputError(
            f"{args.data}: column {column!r} holds text where the network of --model "
            f"{args.model} reads one number (input {column!r}, not {column}=VALUE): "
            + (f"values such as {words[:5]} are not numbers; fix or drop those rows"
               if words else "its values are numbers written as text; store them as numbers"))
    return frame[kept]


def _protects(column: str, protected: str | None) -> bool:
    """Whether table column ``column`` holds the protected attribute ``protected`` (the column
    itself, or one of its one-hot columns ``P=V`` / ``P_V``; ``P=V`` names the feature ``P``):
    kept by ``--model`` though the network may not read it, since the audit conditions on it."""
    if protected is None:
        return False
    feature = protected.split("=", 1)[0]
    return column in (protected, feature) or column.startswith((f"{feature}=", f"{feature}_"))


def write_validated(model: PopulationModel, out: str,
                    check: Callable[[PopulationModel], str] | None = None
                    ) -> tuple[PopulationModel, float, str | None]:
    """Write ``model`` to a temporary file beside ``out``, validate that file as
    ``population validate`` does, run ``check`` on the model read back (e.g. its binding to
    a network), and only then rename it to ``out``: a failure leaves ``out`` as it was.
    Returns the model read back, its total mass and what ``check`` returned."""
    from pipeline_steps.cli.population_checks import validated_file
    from verifier.population import save_population

    target = Path(out)
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                             dir=target.parent if str(target.parent) else ".")
    except OSError as error:
        raise CertgateInputError(f"cannot write {target}: {error.strerror or error}") from error
    os.close(handle)
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(temporary, 0o666 & ~mask)  # mkstemp's 0600 would survive the rename
        try:
            save_population(model, temporary)
        except OSError as error:
            raise CertgateInputError(f"cannot write {target}: {error.strerror or error}") \
                from error
        written, total = validated_file(temporary)
        checked = check(written) if check is not None else None
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return written, total, checked


def run_fit(args: argparse.Namespace) -> int:
    from certgate.population_data import (
        PopulationFitWarning,
        data_source,
        fit_population,
        require_rows,
    )
    from pipeline_steps.cli.population_checks import check_binding

    frame = read_table(args.data)
    require_rows(len(frame))
    if args.model:
        frame = model_columns(args, frame)
    categorical = {key: _names(text, "--categorical", key)
                   for key, text in _pairs(args.categorical, "--categorical").items()}
    parents = {key: _names(text, "--parents", key)
               for key, text in _pairs(args.parents, "--parents").items()}
    if not args.json:
        print(f"{args.data}: fitting a population model of {len(frame):,} rows, "
              f"{frame.shape[1]} columns...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PopulationFitWarning)
        model = fit_population(
            frame, categorical=categorical, domains=parse_domains(args.domain),
            continuous=args.continuous,
            structure="independent" if args.independent else "learned",
            protected=fit_protected(args), parents=parents, bins=parse_bins(args.bins),
            n_components=args.components, min_leaf=args.min_leaf, min_rows=args.min_rows,
            max_discrete_values=args.max_discrete_values, seed=args.seed, name=args.name,
            source=data_source(args.data, len(frame)))
    seconds = time.perf_counter() - started
    notes = [str(w.message) for w in caught if issubclass(w.category, PopulationFitWarning)]
    for other in caught:
        if not issubclass(other.category, PopulationFitWarning):
            warnings.showwarning(other.message, other.category, other.filename, other.lineno)
    if args.model:
        model = in_network_order(args, model)
    written, total, binding = write_validated(
        model, args.out, (lambda fitted: check_binding(args, fitted)) if args.model else None)
    report = {"file": args.out, **summary(written, len(frame)), "total_mass": total,
              "fit_seconds": seconds,
              "warnings": notes}
    if args.model:
        report["network"] = args.model
        report["binding"] = binding
    if args.json:
        emit_json(report)
        return 0
    for warning in report["warnings"]:
        print(f"certgate: warning: {warning}", file=sys.stderr)
    print(f"{args.out}: {report['distribution']} population model of {len(frame)} rows, "
          f"{len(report['columns'])} columns, total mass {total:.12g} (valid), fitted in "
          f"{seconds:.1f} s")
    if report["edges"]:
        print(f"  edges: {', '.join(f'{a} -> {b}' for a, b in report['edges'])}")
    elif report["distribution"] == "bayesian_network":
        print("  edges: none (no dependence found)")
    for feature in report["features"]:
        extra = (f" categories {feature['categories']}" if "categories" in feature
                 else _coded_domain(feature) if "step" in feature
                 else f" domain {feature['domain']}" if "domain" in feature else "")
        print(f"  {feature['name']}: {feature['kind']} {feature['columns']}{extra}")
    if args.model:
        print(f"  {report['binding']} {args.model}")
    return 0


def fit_protected(args: argparse.Namespace) -> str | None:
    """``--protected``, else the one protected attribute the audits of ``--config`` name
    (a one-hot column such as ``sex=Male`` names its feature ``sex``); several different
    ones are refused naming them, since the network has one protected root. With
    ``--independent`` a configuration adds nothing (an independent product has no
    parents)."""
    if args.protected or not args.config or args.independent:
        return args.protected
    from configs.schema import load_config

    named: list[str] = []
    for audit in load_config(args.config).audits:
        protected = getattr(audit, "protected", None)  # one input, or a causal audit's list
        for column in [protected] if isinstance(protected, str) else list(protected or []):
            if column not in named:
                named.append(column)
    features = sorted({column.split("=", 1)[0] for column in named})
    if len(features) > 1:
        raise CertgateInputError(f"--config {args.config}: its audits protect several "
                                 f"attributes ({', '.join(named)}); the learned network has "
                                 "one protected root: give --protected")
    return named[0] if named else None


def in_network_order(args: argparse.Namespace, model: PopulationModel) -> PopulationModel:
    """``model`` with ``column_order`` set to the network's input order (then the columns it
    need not read: :func:`verifier.audits.binding.unread_by_names`) when the network
    names the same columns in another order (so the file binds as written); otherwise
    unchanged, and the binding check reports the difference."""
    from verifier.audits.binding import (
        anonymous_inputs,
        bound_names,
        parse_input_names,
        unread_by_names,
    )
    from verifier.population import PopulationModel

    network = read_network(args.model)
    given = parse_input_names(args.input_names)
    if given is None and anonymous_inputs(network):
        return model
    names = bound_names(network, given, f"--model {args.model}")
    names = [*names, *unread_by_names(model, names)]
    if sorted(names) != sorted(model.columns) or names == list(model.columns):
        return model
    return PopulationModel.model_validate({**model.model_dump(), "column_order": names})


def run_schema(args: argparse.Namespace) -> int:
    from verifier.population import PopulationModel

    schema = PopulationModel.model_json_schema()
    if args.json:
        emit_json(schema)
    else:
        print(json.dumps(schema, indent=2))
    return 0


def _coded_domain(feature: dict[str, Any]) -> str:
    """A coded integer feature's domain in the data's units, with its codes."""
    from verifier.population.schema import code_text

    step, offset = feature["step"], feature["offset"]
    low, high = feature.get("domain", [None, None])
    values = [None if end is None else offset + step * end for end in (low, high)]
    return (f" values {code_text(step, offset)}, domain {values} (codes k in "
            f"[{low}, {high}])")
