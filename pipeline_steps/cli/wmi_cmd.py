"""``certgate verify monotonicity | noise-robustness | equivalence | local-robustness``: exact
WMI audits (DESIGN D7). The lead module ``verify_cmd`` calls :func:`add_wmi_parsers`."""

from __future__ import annotations

import argparse
import json
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from pipeline_steps.cli.inputs import add_input_names, bound_network, read_network
from verifier.errors import CertgateInputError
from verifier.network import Network

SKLEARN_SUFFIXES = (".pkl", ".pickle", ".joblib")


def add_wmi_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the four WMI audits under ``certgate verify``."""
    mono = verbs.add_parser(
        "monotonicity", help="exact P(c(x) ⇒ c(x′) | x_i <= x′_i, other features equal)",
        description="Exact monotonicity probability by self-composition (weighted model "
                    "integration). Uniform on the population's support unless --use-prior.")
    _common(mono)
    mono.add_argument("--feature", required=True, help="input column name or index")
    mono.add_argument("--decreasing", action="store_true")
    mono.add_argument("--positive-class", type=int, default=1)
    mono.add_argument("--output", type=int,
                      help="regressor form: compare this output, P(f(x) <= f(x′))")
    mono.add_argument("--use-prior", action="store_true",
                      help="weight pairs by the population density instead of uniformly")
    mono.set_defaults(func=run_monotonicity)

    noise = verbs.add_parser(
        "noise-robustness", help="exact P(c(x) = c(x + n)) for noise n on some features",
        description="Exact robustness to additive noise with a piecewise-polynomial density.")
    _common(noise)
    noise.add_argument("--features", required=True,
                       help="comma-separated input columns (names or indices) the noise hits")
    source = noise.add_mutually_exclusive_group(required=True)
    source.add_argument("--noise", help="population JSON of the noise density")
    source.add_argument("--noise-uniform", nargs=2, type=float, metavar=("LOW", "HIGH"))
    source.add_argument("--noise-triangular", nargs=3, type=float,
                        metavar=("LOW", "MODE", "HIGH"))
    noise.set_defaults(func=run_noise_robustness)

    equiv = verbs.add_parser(
        "equivalence", help="exact P(c₁(x) = c₂(x)) against a surrogate",
        description="Exact agreement probability of the model and a surrogate (network file or "
                    "a pickled scikit-learn tree/forest), globally or in an ε-box.")
    _common(equiv)
    equiv.add_argument("--surrogate", required=True,
                       help="network file, or a pickled scikit-learn classifier (.pkl/.joblib)")
    _box(equiv, required=False)
    equiv.set_defaults(func=run_equivalence)

    local = verbs.add_parser(
        "local-robustness", help="exact P(c(x) = label | ‖x − center‖∞ <= ε)",
        description="Exact probabilistic local robustness under the population density.")
    _common(local)
    _box(local, required=True)
    local.add_argument("--label", type=int, help="expected class (default: prediction at center)")
    local.set_defaults(func=run_local_robustness)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True,
                        help="network file (.onnx, .nnet, .json, .pt) or pickled sklearn model")
    add_input_names(parser)
    parser.add_argument("--population", required=True, help="population model (JSON)")
    parser.add_argument("--threshold", type=float,
                        help="verdict 'satisfied' iff the probability is >= this; enables the "
                             "early stop once it cannot be reached")
    parser.add_argument("--bound-method", choices=("crown", "ibp", "none"), default="crown",
                        help="bound propagation that fixes stable neurons (default crown)")
    parser.add_argument("--executor", default=None,
                        help="parallel over top-level regions: local, process, dask[=ADDRESS]")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _box(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument("--center", required=required, help="comma-separated centre point")
    parser.add_argument("--epsilon", type=float, required=required, help="L∞ radius")


def _load_model(path: str, option: str = "--model") -> Any:
    if Path(path).suffix in SKLEARN_SUFFIXES:
        try:
            with open(path, "rb") as handle:
                return pickle.load(handle)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError,
                ValueError) as error:
            raise CertgateInputError(f"{option} {path}: cannot read the model: {error}") \
                from error
    return read_network(path, option)


def _columns(args: argparse.Namespace) -> tuple[str, ...]:
    """Load ``--model`` and ``--population`` bound by name (``args.model_object``,
    ``args.prior``); returns the bound input names in input order. A scikit-learn model names
    its inputs with ``feature_names_in_`` when it was fitted on a DataFrame."""
    from verifier.audits.binding import BindingError, ordered_population, parse_input_names
    from verifier.population import load_population

    prior = load_population(args.population)
    model = _load_model(args.model)
    if isinstance(model, Network):
        model, prior = bound_network(args, model, prior)
        names = list(model.input_names)
    else:
        given = parse_input_names(args.input_names)
        own = getattr(model, "feature_names_in_", None)
        own = [str(name) for name in own] if own is not None else None
        if given is not None and own is not None and given != own:
            raise BindingError(f"--model {args.model}: the input names given ({', '.join(given)})"
                               f" disagree with the model's feature_names_in_ "
                               f"({', '.join(own)})")
        names = given or own
        if names is None:
            raise BindingError(f"--model {args.model}: the model records no input names; give "
                               "them in the model's input order with --input-names a,b,c")
        prior = ordered_population(prior, names, f"--model {args.model}")
    args.model_object, args.prior = model, prior
    return tuple(names)


def _index(text: str, columns: tuple[str, ...], what: str) -> int:
    if text in columns:
        return columns.index(text)
    try:
        value = int(text)
    except ValueError:
        raise CertgateInputError(f"{what}: {text!r} is neither a column ({', '.join(columns)}) "
                                 "nor an index") from None
    if not 0 <= value < len(columns):
        raise CertgateInputError(f"{what}: index {value} is outside 0..{len(columns) - 1}")
    return value


def _center(text: str | None) -> np.ndarray | None:
    if text is None:
        return None
    try:
        return np.array([float(part) for part in text.split(",")])
    except ValueError:
        raise CertgateInputError(f"--center: {text!r} is not a comma-separated list of numbers"
                                 ) from None


def _stop_at(threshold: float | None) -> float | None:
    if threshold is None:
        return None
    if not 0.0 <= threshold <= 1.0:
        raise CertgateInputError(f"--threshold must lie in [0, 1], got {threshold}")
    return math.nextafter(1.0 - threshold, math.inf)


def _solve(args: argparse.Namespace, audit: Any, **options: Any) -> int:
    from verifier.executor import make_executor

    stop_at = _stop_at(args.threshold)
    common = {"stop_at": stop_at, "bound_method": args.bound_method}
    if args.executor:
        with make_executor(args.executor) as executor:
            result = audit(**options, **common, executor=executor)
    else:
        result = audit(**options, **common)
    if args.threshold is not None:
        result.verdict = "satisfied" if result.probability >= args.threshold else "violated"
    document = result.as_json()
    if args.json:
        print(json.dumps(document))
    else:
        bound = " (upper bound: stopped early)" if result.stopped_early else ""
        print(f"probability {result.probability:.12g}{bound}; {result.regions} regions, "
              f"{result.integrals} integrals, {result.elapsed_s:.3f} s")
        if result.verdict is not None:
            print(f"verdict: {result.verdict}")
    return 1 if result.verdict == "violated" else 0


def run_monotonicity(args: argparse.Namespace) -> int:
    from verifier.wmi import monotonicity

    columns = _columns(args)
    return _solve(args, monotonicity, model=args.model_object, prior=args.prior,
                  feature=_index(args.feature, columns, "--feature"),
                  decreasing=args.decreasing, positive_class=args.positive_class,
                  output=args.output, use_prior=args.use_prior)


def _noise_density(args: argparse.Namespace, count: int) -> Any:
    from verifier.population import load_population
    from verifier.wmi.noise import triangular_noise, uniform_noise

    if args.noise:
        return load_population(args.noise)
    if count != 1:
        raise CertgateInputError("--noise-uniform/--noise-triangular describe one feature; give "
                                 "a --noise population file for several")
    if args.noise_uniform:
        return uniform_noise(*args.noise_uniform)
    return triangular_noise(*args.noise_triangular)


def run_noise_robustness(args: argparse.Namespace) -> int:
    from verifier.wmi import noise_robustness

    columns = _columns(args)
    features = [_index(part.strip(), columns, "--features") for part in args.features.split(",")]
    return _solve(args, noise_robustness, model=args.model_object, prior=args.prior,
                  noise=_noise_density(args, len(features)), features=features)


def run_equivalence(args: argparse.Namespace) -> int:
    from verifier.wmi import equivalence

    _columns(args)
    if (args.center is None) != (args.epsilon is None):
        raise CertgateInputError("give both --center and --epsilon, or neither")
    return _solve(args, equivalence, model=args.model_object,
                  surrogate=_load_model(args.surrogate, "--surrogate"), prior=args.prior,
                  center=_center(args.center), epsilon=args.epsilon)


def run_local_robustness(args: argparse.Namespace) -> int:
    from verifier.wmi import local_robustness

    _columns(args)
    return _solve(args, local_robustness, model=args.model_object, prior=args.prior,
                  center=_center(args.center), epsilon=args.epsilon, label=args.label)
