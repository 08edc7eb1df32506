"""``certgate verify monotonicity | noise-robustness | equivalence | local-robustness``: exact
WMI audits (DESIGN D7). The lead module ``verify_cmd`` calls :func:`add_wmi_parsers`.

Monotonicity, noise robustness (uniform or triangular noise on one feature) and local
robustness are the configuration's audit kinds: their options are the settings' fields
(:mod:`pipeline_steps.cli.settings_options`) and they run through
:func:`verifier.audits.run_audit`, so a verdict here is the verdict of ``certgate run``.
Equivalence and noise given as a population file are command-line questions only; they share
the same certificate and verdict rule (:func:`verifier.audits.exact_probability.
probability_certificate`). ``--min-probability`` gives the verdict (``satisfied`` only when
the certified interval lies at or above it) and lets the enumeration stop early once it
cannot be reached; without it the probability is reported with no verdict.
"""

from __future__ import annotations

import argparse
import copy
import pickle
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from pipeline_steps.cli.engine_signals import stop_engine_on_signals
from pipeline_steps.cli.exit_codes import EXIT_OK, exit_for
from pipeline_steps.cli.inputs import (
    MODEL_HELP,
    add_input_names,
    bound_network,
    model_network,
    read_certified,
    read_network,
)
from pipeline_steps.cli.output import JSON_HELP, add_no_progress, emit_json, shows_progress
from pipeline_steps.cli.settings_options import RenamedOption, class_index, settings_from_args
from verifier.certificate import Certificate, to_jsonable
from verifier.errors import CertgateInputError
from verifier.executor import make_executor

SKLEARN_SUFFIXES = (".pkl", ".pickle", ".joblib")


def add_wmi_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the four WMI audits under ``certgate verify``."""
    mono = verbs.add_parser(
        "monotonicity", help="exact P(c(x) ⇒ c(x′) | x_i <= x′_i, other features equal)",
        description="Exact monotonicity probability by self-composition (weighted model "
                    "integration). Uniform on the population's support unless --use-prior.")
    _common(mono)
    mono.add_argument("--feature", required=True, help="input column name or index")
    mono.add_argument("--decreasing", action="store_true", default=None,
                      help="certify a decreasing feature: pairs with x_i >= x′_i")
    mono.add_argument("--favorable-class", type=class_index,
                      help="the class whose monotonicity is certified (default 1)")
    mono.add_argument("--positive-class", action=RenamedOption, new="--favorable-class")
    mono.add_argument("--output-index", type=int,
                      help="regressor form: compare this output, P(f(x) <= f(x′))")
    mono.add_argument("--output", action=RenamedOption, new="--output-index")
    mono.add_argument("--use-prior", action="store_true", default=None,
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
    source.add_argument("--noise-uniform", nargs=2, type=float, metavar=("LOW", "HIGH"),
                        help="noise uniform on [LOW, HIGH] added to the one feature named")
    source.add_argument("--noise-triangular", nargs=3, type=float,
                        metavar=("LOW", "MODE", "HIGH"),
                        help="noise with the triangular density on [LOW, HIGH] peaking at "
                             "MODE, added to the one feature named")
    noise.set_defaults(func=run_noise_robustness)

    equiv = verbs.add_parser(
        "equivalence", help="exact P(c₁(x) = c₂(x)) against a surrogate",
        description="Exact agreement probability of the model and a surrogate (network file or "
                    "a pickled scikit-learn tree/forest), globally or in an ε-box.")
    _common(equiv)
    equiv.add_argument("--surrogate", required=True,
                       help="network file, or a pickled scikit-learn classifier (.pkl/.joblib); "
                            "read in the model's input order")
    _box(equiv, required=False)
    equiv.set_defaults(func=run_equivalence)

    local = verbs.add_parser(
        "local-robustness", help="exact P(c(x) = expected class | ‖x − center‖∞ <= ε)",
        description="Exact probabilistic local robustness under the population density.")
    _common(local)
    _box(local, required=True)
    local.add_argument("--expected-class", type=class_index,
                       help="expected class (default: prediction at center)")
    local.add_argument("--label", action=RenamedOption, new="--expected-class")
    local.set_defaults(func=run_local_robustness)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help=f"{MODEL_HELP}; or a pickled sklearn model")
    add_input_names(parser)
    parser.add_argument("--population", required=True, help="population model (JSON)")
    parser.add_argument("--min-probability", type=float,
                        help="verdict 'satisfied' iff the certified probability is >= this; "
                             "enables the early stop once it cannot be reached")
    parser.add_argument("--timeout", type=float,
                        help="time budget in seconds (default 300); on timeout the certified "
                             "interval reached is reported")
    parser.add_argument("--bound-method", choices=("crown", "ibp", "none"), default="crown",
                        help="bound propagation that fixes stable neurons (default crown)")
    parser.add_argument("--executor", default=None,
                        help="parallel over top-level regions: local, process, dask[=ADDRESS]; "
                             "a population whose discrete values cannot be enumerated is "
                             "audited by box branching (a certified interval), on a process "
                             "pool when this is not local")
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    add_no_progress(parser)


def _box(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument("--center", required=required, help="comma-separated centre point")
    parser.add_argument("--epsilon", type=float, required=required, help="L∞ radius")


def _load_model(path: str, option: str = "--model",
                args: argparse.Namespace | None = None) -> Any:
    """A pickled scikit-learn model, or the network ``path`` names (with the verb's
    ``--input-names``/``--input-shape`` when ``args`` are given)."""
    if Path(path).suffix in SKLEARN_SUFFIXES:
        try:
            with open(path, "rb") as handle:
                return pickle.load(handle)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError,
                ValueError) as error:
            raise CertgateInputError(f"{option} {path}: cannot read the model: {error}") \
                from error
    return model_network(args, option) if args is not None else read_network(path, option)


def _columns(args: argparse.Namespace) -> tuple[str, ...]:
    """Load ``--model`` and ``--population`` bound by name (``args.model_object``,
    ``args.prior``) and what the certificate names of their files (``args.provenance``,
    :func:`~pipeline_steps.cli.inputs.read_certified`); returns the bound input names in
    input order (``args.own_names``: the model's own inputs, which lead them; the population's
    columns the network does not read follow, bound with zero weights). A scikit-learn model
    names its inputs with ``feature_names_in_`` when it was fitted on a DataFrame."""
    from verifier.audits.binding import BindingError, ordered_population, parse_input_names
    from verifier.network import Network
    from verifier.population import load_population

    prior, population_read = read_certified(args.population, "--population",
                                            lambda: load_population(args.population))
    model, model_read = read_certified(args.model, "--model",
                                       lambda: _load_model(args.model, args=args))
    args.provenance = {**model_read, **population_read}
    if isinstance(model, Network):
        own = model.input_size
        model, prior = bound_network(args, model, prior)
        names = list(model.input_names)
        args.own_names = names[:own]
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
        args.own_names = list(names)
    args.model_object, args.prior, args.bound_names = model, prior, list(names)
    return tuple(names)


def _name(text: str, columns: tuple[str, ...], what: str) -> str:
    """The input ``text`` names: a column name, or an index into the bound inputs."""
    if text in columns:
        return text
    try:
        value = int(text)
    except ValueError:
        raise CertgateInputError(f"{what}: {text!r} is neither a column ({', '.join(columns)}) "
                                 "nor an index") from None
    if not 0 <= value < len(columns):
        raise CertgateInputError(f"{what}: index {value} is outside 0..{len(columns) - 1}")
    return columns[value]


def _center(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise CertgateInputError(f"--center: {text!r} is not a comma-separated list of numbers"
                                 ) from None


def _min_probability(args: argparse.Namespace) -> float:
    """The threshold of the settings: ``--min-probability``, or 0 (every probability passes,
    no early stop) when it is not given and only the probability is asked for."""
    return 0.0 if args.min_probability is None else args.min_probability


def _engine(args: argparse.Namespace, stack: ExitStack) -> dict[str, Any]:
    """Engine-only options: bound method, executor, and the inputs of a non-IR model."""
    from verifier.network import Network

    engine: dict[str, Any] = {"bound_method": args.bound_method}
    if args.executor:
        engine["executor"] = stack.enter_context(make_executor(args.executor))
    if not isinstance(args.model_object, Network):
        engine["input_names"] = args.bound_names
    return engine


def _run_kind(args: argparse.Namespace, settings: Any, **extra: Any) -> int:
    from pipeline_steps.progress import audit_progress
    from verifier.audits import run_audit

    with ExitStack() as stack:
        engine = _engine(args, stack)
        bar = audit_progress(settings, shows_progress(args))
        try:
            with stop_engine_on_signals():
                certificate = run_audit(settings, args.model_object, args.prior, None, None,
                                        **engine, **extra)
        finally:
            bar.close()
    return _report(args, certificate)


def _report(args: argparse.Namespace, certificate: Certificate) -> int:
    """Name the files read in the certificate's provenance (``args.provenance``), then print
    its probability, proven interval, float interval and cost (the verdict only when
    ``--min-probability`` was given; ``--json`` adds the provenance); exit 0 unless a given
    threshold is not proven. A box-branching result is printed as its interval alone: its
    ``probability`` (kept in ``--json``) is the end of the interval the verdict read, not
    an estimate; an enumeration cut by the time budget prints its value as the mass counted
    before the cut (``timed_out`` in ``--json``), not the probability."""
    certificate.provenance.update(args.provenance)
    details, cost = certificate.details, certificate.cost
    low, high = certificate.bounds["probability"]
    judged = args.min_probability is not None
    document = {
        "probability": details["computed_probability"],
        "probability_interval": [low, high],
        "proven": details["proven"],
        "float_interval": details["float_interval"],
        "violation_probability": details["violation_probability"],
        "regions": int(cost["regions"]), "integrals": int(cost["integrals"]),
        "lps": int(cost["lps"]), "elapsed_s": cost["elapsed_s"],
        "stopped_early": details["stopped_early"], "timed_out": details["timed_out"],
        "stopped_by": details["stopped_by"],
        **({"verdict": certificate.verdict} if judged else {}),
        **{key: details[key] for key in ("expected_class", "method", "boxes", "cells_bounded",
                                         "undecided_because") if key in details},
    }
    if args.json:
        emit_json(to_jsonable({**document, "provenance": certificate.provenance}))
    else:
        cut = "a signal" if details["stopped_by"] == "interrupted" else "the time budget"
        bound = (" (upper bound: stopped early)" if details["stopped_early"] else
                 f" (the mass counted before {cut} cut the enumeration)"
                 if details["timed_out"] else "")
        work = (f"{document['boxes']} boxes ({document['method']})" if "boxes" in document
                else f"{document['regions']} regions, {document['integrals']} integrals")
        float_low, float_high = details["float_interval"]
        proof = ("" if details["proven"] else
                 f" (computed in float64, not proven: [{float_low:.12g}, {float_high:.12g}] "
                 f"with the engineering margin)")
        if details.get("proven_by"):
            proof += f"; proven by {details['proven_by']}, {details['proof_boxes']} boxes"
        # box branching computes no value, only the interval (its `probability` is an end)
        value = ("probability" if "boxes" in document
                 else f"probability {document['probability']:.12g}{bound},")
        print(f"{value} certified in [{low:.12g}, {high:.12g}]{proof}; {work}, "
              f"{document['elapsed_s']:.3f} s")
        if "undecided_because" in details:
            print(f"not proven: {details['undecided_because']}")
        if judged:
            print(f"verdict: {certificate.verdict}"
                  + ("" if details["proven"] else
                     f" (in float64: {details['float_verdict']}, not a proof)"))
    return exit_for(certificate.verdict) if judged else EXIT_OK


def run_monotonicity(args: argparse.Namespace) -> int:
    from verifier.audits import MonotonicitySettings

    columns = _columns(args)
    settings = settings_from_args(MonotonicitySettings, args,
                                  feature=_name(args.feature, columns, "--feature"),
                                  min_probability=_min_probability(args))
    _check_output_index(args.output_index, args.model_object)
    return _run_kind(args, settings, output=args.output_index)


def _check_output_index(index: int | None, model: Any) -> None:
    """``--output-index`` must name one of a network's outputs (a tree's engine checks its
    own)."""
    from verifier.network import Network

    if index is None or not isinstance(model, Network):
        return
    count = model.output_size
    if not 0 <= index < count:
        raise CertgateInputError(
            f"--output-index {index} is out of range: the model has {count} "
            f"output{'s' if count != 1 else ''} (0..{count - 1})")


def run_noise_robustness(args: argparse.Namespace) -> int:
    from verifier.audits import NoiseRobustnessSettings

    columns = _columns(args)
    features = [_name(part.strip(), columns, "--features") for part in args.features.split(",")]
    if args.noise:
        return _noise_file(args, features)
    if len(features) != 1:
        raise CertgateInputError("--noise-uniform/--noise-triangular describe one feature; give "
                                 "a --noise population file for several")
    settings = settings_from_args(NoiseRobustnessSettings, args,
                                  features=features, min_probability=_min_probability(args))
    return _run_kind(args, settings)


def _noise_file(args: argparse.Namespace, features: list[str]) -> int:
    """Noise on several features from a population file (a command-line question only)."""
    from verifier.audits.coded_values import noise_in_codes
    from verifier.audits.exact_probability import (
        probability_certificate,
        requirement_at_least,
        wmi_stop_at,
    )
    from verifier.audits.noise_robustness import KIND
    from verifier.population import load_population
    from verifier.wmi import noise_robustness

    threshold = _min_probability(args)
    stop_at = wmi_stop_at(threshold)
    indices = [args.bound_names.index(name) for name in features]
    noise, read = read_certified(args.noise, "--noise", lambda: load_population(args.noise))
    args.provenance.update(read)
    noise = noise_in_codes(noise, args.prior, features)
    with ExitStack() as stack:
        engine = _engine(args, stack)
        engine.pop("input_names", None)
        timeout = 300.0 if args.timeout is None else args.timeout
        result = noise_robustness(args.model_object, args.prior, noise,
                                  indices, stop_at=stop_at, noise_in_codes=True, prove=True,
                                  timeout_s=timeout, **engine)
    expression = f"P(class(x) = class(x + n)), n ~ {args.noise} on {', '.join(features)}"
    return _report(args, probability_certificate(
        KIND, requirement_at_least(threshold), result, expression, stop_at,
        bound_method=args.bound_method, timeout_s=timeout))


def run_equivalence(args: argparse.Namespace) -> int:
    """Agreement with a surrogate (a command-line question only; same verdict rule)."""
    from pipeline_steps.progress import TimeProgress
    from verifier.audits.exact_probability import (
        model_on_codes,
        probability_certificate,
        requirement_at_least,
        wmi_stop_at,
    )
    from verifier.audits.local_robustness import ball_in_codes
    from verifier.wmi import equivalence

    _columns(args)
    if (args.center is None) != (args.epsilon is None):
        raise CertgateInputError("give both --center and --epsilon, or neither")
    threshold = _min_probability(args)
    stop_at = wmi_stop_at(threshold)
    center, radius = _center(args.center), args.epsilon
    if center is not None:
        center, radius = ball_in_codes(center, args.epsilon, args.bound_names, args.prior,
                                       class_at_center=False)
    surrogate, read = read_certified(args.surrogate, "--surrogate",
                                     lambda: _load_model(args.surrogate, "--surrogate"))
    args.provenance.update(read)
    _check_surrogate_names(surrogate, args.own_names, args.surrogate)
    surrogate = _surrogate_on_codes(_surrogate_on_bound_inputs(surrogate, args), args)
    with ExitStack() as stack:
        engine = _engine(args, stack)
        engine.pop("input_names", None)
        timeout = 300.0 if args.timeout is None else args.timeout
        bar = TimeProgress("equivalence", shows_progress(args), timeout)
        expression = f"P(class_model(x) = class_surrogate(x)), surrogate {args.surrogate}"
        try:
            with stop_engine_on_signals():  # the certificate reads whether a signal stopped it
                result = equivalence(model_on_codes(args.model_object, args.prior), surrogate,
                                     args.prior, None if center is None else np.asarray(center),
                                     radius, stop_at=stop_at, timeout_s=timeout, prove=True,
                                     **engine)
                certificate = probability_certificate(
                    "equivalence", requirement_at_least(threshold), result, expression,
                    stop_at, bound_method=args.bound_method, timeout_s=timeout)
        finally:
            bar.close()
    return _report(args, certificate)


def _surrogate_on_bound_inputs(surrogate: Any, args: argparse.Namespace) -> Any:
    """The surrogate reading the bound inputs: the model's own inputs, then the population's
    columns binding appended to the network with zero weights (a label, a protected
    attribute the model was trained without), which a surrogate of that model does not read
    either. Its outputs at any values of them are the surrogate's, exactly. Raises
    :class:`~verifier.audits.binding.BindingError` when it does not read as many inputs as
    the model."""
    from verifier.audits.binding import BindingError, anonymous_inputs, reading
    from verifier.network import Network
    from verifier.wmi.trees import ForestModel

    extra = args.bound_names[len(args.own_names):]
    forest = None if isinstance(surrogate, Network) else (
        surrogate if isinstance(surrogate, ForestModel) else ForestModel(surrogate))
    size = surrogate.input_size if forest is None else forest.input_size
    if size != len(args.own_names):
        raise BindingError(f"--surrogate {args.surrogate}: it reads {size} inputs, the model "
                           f"{len(args.own_names)} ({', '.join(args.own_names)})")
    if not extra:
        return surrogate
    if forest is None:
        named = surrogate.renamed(input_names=args.own_names) \
            if anonymous_inputs(surrogate) else surrogate
        return reading(named, extra)
    widened = copy.copy(forest)
    widened.input_size = len(args.bound_names)
    return widened


def _surrogate_on_codes(surrogate: Any, args: argparse.Namespace) -> Any:
    """The surrogate reading the population's codes, as the bound model does
    (:func:`verifier.audits.binding.coded_network`), or a scikit-learn surrogate with its
    splits written in codes (:func:`verifier.audits.exact_probability.model_on_codes`)."""
    from verifier.audits.binding import coded_network
    from verifier.audits.exact_probability import model_on_codes
    from verifier.network import Network

    if not args.prior.feature_schema.coded:
        return surrogate
    if not isinstance(surrogate, Network):
        return model_on_codes(surrogate, args.prior)
    return coded_network(surrogate.renamed(input_names=args.bound_names), args.prior)


def _check_surrogate_names(surrogate: Any, names: list[str], path: str) -> None:
    """A surrogate that records input names must record the model's bound names, in order (one
    without names is read in the model's input order)."""
    from verifier.audits.binding import BindingError, anonymous_inputs
    from verifier.network import Network

    if isinstance(surrogate, Network):
        own = None if anonymous_inputs(surrogate) else list(surrogate.input_names)
    else:
        recorded = getattr(surrogate, "feature_names_in_", None)
        own = [str(name) for name in recorded] if recorded is not None else None
    if own is not None and own != names:
        raise BindingError(f"--surrogate {path}: its input names ({', '.join(own)}) are not the "
                           f"model's ({', '.join(names)})")


def run_local_robustness(args: argparse.Namespace) -> int:
    from verifier.audits import LocalRobustnessSettings

    _columns(args)
    settings = settings_from_args(LocalRobustnessSettings, args,
                                  center=_center(args.center),
                                  min_probability=_min_probability(args))
    return _run_kind(args, settings)
