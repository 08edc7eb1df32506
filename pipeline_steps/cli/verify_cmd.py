"""``certgate verify …``: certified probabilistic audits from the command line."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from pipeline_steps.cli.causal_cmd import add_causal_parser
from pipeline_steps.cli.engine_signals import stop_engine_on_signals
from pipeline_steps.cli.exit_codes import exit_for
from pipeline_steps.cli.fidelity_options import (
    add_fidelity_options,
    check_fidelity,
    exit_code,
    fidelity_inputs,
)
from pipeline_steps.cli.inputs import (
    MODEL_HELP,
    add_input_names,
    bound_network,
    model_network,
    read_certified,
)
from pipeline_steps.cli.output import JSON_HELP, add_no_progress, emit_json, shows_progress
from pipeline_steps.cli.settings_options import class_index, settings_from_args
from pipeline_steps.cli.wmi_cmd import add_wmi_parsers
from verifier.certificate import Certificate, to_jsonable
from verifier.errors import CertgateInputError
from verifier.text_files import read_text
from verifier.yaml_documents import load_yaml

if TYPE_CHECKING:
    from verifier.pv import PVSettings

SPLIT_CHOICES = ("smear", "smear-longest-edge", "babsb", "babsb-longest-edge", "longest-edge")
"""``verifier.pv.SPLIT_RULES``, listed here so that ``certgate verify … --help`` does not
import the PV engine (and torch); ``tests/test_cli_startup.py`` checks they agree."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "verify", help="certify a probabilistic property of a network under a population model"
    )
    verbs = parser.add_subparsers(dest="verify_command", metavar="AUDIT", required=True)

    parity = verbs.add_parser(
        "demographic-parity",
        help="certified bounds on P[fav | unprivileged] / P[fav | privileged]",
        description=(
            "Certify demographic parity: the ratio P[class = K | protected != V] / "
            "P[class = K | protected = V] must exceed GAMMA. The class is the argmax of the "
            "logits (a final sigmoid/softmax/log-softmax head changes no class); a one-output "
            "model is a binary classifier, class 1 iff its logit > 0. Exit code 0 when proven, "
            "1 when violated or undecided, 2 on bad input."
        ),
    )
    _common(parity)
    parity.add_argument("--protected", required=True, help="protected feature (input column)")
    parity.add_argument("--privileged", required=True,
                        help="value of the protected feature for the privileged group (a "
                             "number; a one-hot column's is 1)")
    parity.add_argument("--favorable-class", required=True, type=class_index,
                        help="index of the favourable output class (argmax of the logits; a "
                             "one-output model: class 1 iff its logit > 0)")
    parity.add_argument("--gamma", required=True, type=float,
                        help="threshold: in (0, 1] for the ratio form, (0, 1) for the difference")
    parity.add_argument("--qualified", help='condition of qualification, e.g. "age >= 18"')
    parity.add_argument("--form", choices=("ratio", "difference"), default="ratio",
                        help="ratio (default): P[class = K | protected != V] / P[class = K | "
                             "protected = V] must exceed GAMMA; difference: |P[class = K | "
                             "protected != V] - P[class = K | protected = V]| must stay below "
                             "GAMMA")
    add_fidelity_options(parity)
    parity.set_defaults(func=run_demographic_parity)

    probability = verbs.add_parser(
        "probability",
        help="certified bounds on a specification over probabilities",
        description=(
            "Certify a specification file (YAML/JSON): named probabilities {event, given}, an "
            "expression over them, and optionally a comparison and threshold. On a model "
            "ending in a sigmoid, softmax or log-softmax head, events may order two outputs "
            "(y.high > y.low, read on the logits); an event on output values is refused."
        ),
    )
    _common(probability)
    probability.add_argument("--spec", required=True, help="specification file (YAML or JSON)")
    probability.set_defaults(func=run_probability)
    add_causal_parser(verbs)
    add_wmi_parsers(verbs)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help=MODEL_HELP)
    add_input_names(parser)
    parser.add_argument("--population", required=True, help="population model (JSON)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="wall-time budget in seconds (default 60), the workers' start "
                             "and end included: rounds are sized to the time left; on "
                             "timeout the bounds reached are reported with verdict unknown")
    parser.add_argument("--precision", type=float,
                        help="stop once every probability interval is at most this wide")
    parser.add_argument("--batch-size", type=int,
                        help="boxes refined per round (default 1024 in-process; on a "
                             "process pool or Dask a 16th of the open boxes, 128 to 2048 "
                             "per worker)")
    parser.add_argument("--rounds-in-flight", type=int,
                        help="rounds whose boxes are bounded at once: the next round is "
                             "chosen while the workers bound the last (default: 1 "
                             "in-process; on a process pool or Dask 2 once the open boxes "
                             "fill 64 of its smallest rounds, 1 before)")
    parser.add_argument("--max-open-boxes", type=int,
                        help="stop with the bounds reached (verdict unknown unless proven) "
                             "once this many boxes are open (default: as many as half the "
                             "memory available at the start holds)")
    parser.add_argument("--split", choices=SPLIT_CHOICES, default="smear-longest-edge",
                        help="the column a box is split on: smear (CROWN's input "
                             "coefficient times the width), babsb (paper 003's BaBSB) or the "
                             "longest edge; the *-longest-edge rules take the longest edge every "
                             "10th level (default smear-longest-edge)")
    parser.add_argument("--executor", default="local",
                        help="where each batch of boxes is bounded: local, process, dask or "
                             "dask=ADDRESS (default local)")
    parser.add_argument("--workers", type=int, help="worker count for process/dask pools")
    parser.add_argument("--enumerate-points", type=int, default=0,
                        help="finish a box with at most this many discrete points by "
                             "evaluating every point (default 0: never)")
    parser.add_argument("--no-linear-credit", dest="linear_credit", action="store_false",
                        help="count an open box only once a bound decides it whole (by "
                             "default the part its linear bounds decide is credited)")
    parser.add_argument("--selection", choices=("directed", "mass"), default="directed",
                        help="which open boxes to refine first: directed (default) favours "
                             "those whose mass moves the end of the interval that must "
                             "cross the threshold, and bounds their parts' linear credit only "
                             "on the side that moves it; mass takes the heaviest undecided "
                             "ones")
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    add_no_progress(parser)


def _settings(args: argparse.Namespace) -> PVSettings:
    from verifier.pv import PVSettings

    if args.timeout is not None and args.timeout <= 0:
        raise CertgateInputError("--timeout must be positive")
    return PVSettings(timeout_s=args.timeout, precision=args.precision,
                      batch_size=args.batch_size, rounds_in_flight=args.rounds_in_flight,
                      max_open_boxes=args.max_open_boxes, split=args.split, executor=args.executor,
                      workers=args.workers, enumerate_points=args.enumerate_points,
                      linear_credit=args.linear_credit, selection=args.selection)


def _load(args: argparse.Namespace) -> tuple[Any, Any, dict[str, Any]]:
    """The network and the population model, bound by name (see
    :mod:`verifier.audits.binding`), and what the certificate names of the two files
    (:func:`~pipeline_steps.cli.inputs.read_certified`)."""
    from verifier.population import load_population

    network, model_read = read_certified(args.model, "--model", lambda: model_network(args))
    population, population_read = read_certified(
        args.population, "--population", lambda: load_population(args.population))
    network, population = bound_network(args, network, population)
    return network, population, {**model_read, **population_read}


def _report(certificate: Certificate, as_json: bool, value_name: str) -> int:
    from pipeline_steps.fidelity_step import fidelity_line, fidelity_summary

    elapsed = certificate.cost["elapsed_s"]
    value = certificate.bounds["value"]
    probabilities = {k: v for k, v in certificate.bounds.items() if k != "value"}
    if as_json:
        payload = {
            "verdict": certificate.verdict,
            value_name: list(value),
            "probabilities": {k: list(v) for k, v in probabilities.items()},
            "elapsed_s": elapsed,
            "boxes": certificate.cost["boxes"],
            "stopped_by": certificate.details["stopped_by"],
        }
        if "undefined" in certificate.details:
            payload["undefined"] = certificate.details["undefined"]
        if certificate.population_fidelity:
            payload["population_fidelity"] = fidelity_summary(certificate)
        payload["provenance"] = certificate.provenance
        emit_json(to_jsonable(payload))
    else:
        details = certificate.details
        comparison = (f" {details['comparison']} {details['threshold']}"
                      if details.get("comparison") else "")
        print(f"{certificate.audit}: {details['expression']}{comparison}")
        print(f"  verdict: {certificate.verdict} ({details['stopped_by']}, "
              f"{certificate.cost['boxes']} boxes, {elapsed:.2f} s)")
        if "undefined" in certificate.details:
            print(f"  {value_name}: {certificate.details['undefined']}")
        else:
            print(f"  {value_name}: [{_fmt(value[0])}, {_fmt(value[1])}]")
        for name, (low, high) in probabilities.items():
            print(f"  {name} = {details['probabilities'][name]}: [{_fmt(low)}, {_fmt(high)}]")
        if certificate.population_fidelity:
            print(f"  {fidelity_line(certificate)}")
    return exit_for(certificate.verdict)


def _fmt(value: float) -> str:
    return f"{value:.6g}" if math.isfinite(value) else str(value)


def run_demographic_parity(args: argparse.Namespace) -> int:
    """The ``demographic_parity`` audit kind (:mod:`verifier.audits.demographic_parity`) with
    the settings given as options, exactly as ``certgate run`` runs it."""
    from pipeline_steps.fidelity_step import announce_check
    from pipeline_steps.progress import audit_progress
    from verifier.audits import DemographicParitySettings, run_audit

    network, population, read = _load(args)
    settings = settings_from_args(DemographicParitySettings, args,
                                  columns=list(network.input_names))
    engine = _settings(args)
    inputs = fidelity_inputs(args, network, population)
    bar = audit_progress(settings, shows_progress(args))
    try:
        with stop_engine_on_signals():
            certificate = run_audit(settings, network, population, None, bar.callback,
                                    engine=engine)
    finally:
        bar.close()
    certificate.provenance.update(read)
    announce_check(settings, inputs[1], shows_progress(args))
    check_fidelity(inputs, settings, certificate, network, population)
    code = _report(certificate, args.json, settings.requirement.label)
    return exit_code(args, certificate, code)


def run_probability(args: argparse.Namespace) -> int:
    from pipeline_steps.progress import BoxProgress
    from verifier.audits import probability_audit

    path = Path(args.spec)
    try:
        document = load_yaml(read_text(path))
    except yaml.YAMLError as error:
        raise CertgateInputError(f"--spec {path}: not valid YAML/JSON ({error})") from error
    if not isinstance(document, dict):
        raise CertgateInputError(f"--spec {path}: expected a mapping at the top level")
    network, population, read = _load(args)
    bar = BoxProgress("probability", "value", shows_progress(args))
    try:
        with stop_engine_on_signals():
            certificate = probability_audit(network, population, document,
                                            settings=_settings(args), progress=bar.callback)
    finally:
        bar.close()
    certificate.provenance.update(read)
    return _report(certificate, args.json, "value")
