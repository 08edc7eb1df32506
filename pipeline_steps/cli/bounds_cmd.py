"""``certgate bounds``: certified output bounds of a network over an input box."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from pipeline_steps.cli.inputs import MODEL_HELP, read_network
from pipeline_steps.cli.output import JSON_HELP, emit_json
from verifier.certificate import to_jsonable
from verifier.errors import CertgateInputError
from verifier.text_files import read_text

METHOD_CHOICES = ("ibp", "crown", "alpha-crown")
"""``verifier.bounds.METHODS``, listed here so that ``certgate bounds --help`` does not import
torch; ``tests/test_cli_startup.py`` checks they agree."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bounds",
        help="bound a network's outputs (or C·outputs) over an input box",
        description=(
            "Sound lower/upper bounds of the network outputs, or of C·outputs for a matrix C, "
            "for every input in the box [lower, upper]. Use 'inf'/'-inf' for unbounded sides. "
            "A model ending in a sigmoid, softmax or log-softmax head is bounded through the "
            "head (sound, rounded outward); --logits bounds the logits the head reads instead, "
            "and --spec needs --logits on such a model."
        ),
    )
    parser.add_argument("--model", required=True, help=MODEL_HELP)
    parser.add_argument("--lower", required=True,
                        help="comma-separated lower corner")
    parser.add_argument("--upper", required=True,
                        help="comma-separated upper corner")
    parser.add_argument("--method", choices=METHOD_CHOICES, default="crown",
                        help="bound propagation: interval (ibp), linear (crown, the default) "
                             "or linear with optimised lower slopes (alpha-crown)")
    parser.add_argument("--spec", help="JSON file with a list of rows C (bounds C·outputs)")
    parser.add_argument("--logits", action="store_true",
                        help="bound the logits before the model's classifier head (sigmoid, "
                             "softmax, log-softmax); no effect on a model without one")
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    parser.set_defaults(func=run)


def parse_vector(text: str, name: str) -> np.ndarray:
    """Parse ``"1,2.5,-inf"`` into a float array; errors name the option."""
    try:
        return np.array([float(part) for part in text.split(",")], dtype=np.float64)
    except ValueError as error:
        message = f"--{name}: not a comma-separated list of numbers: {text!r}"
        raise CertgateInputError(message) from error


def load_spec(path: str) -> np.ndarray:
    """A specification matrix from a JSON list of rows."""
    try:
        rows = json.loads(read_text(path))
        matrix = np.array(rows, dtype=np.float64)
    except (json.JSONDecodeError, ValueError, TypeError) as error:
        raise CertgateInputError(f"--spec {path}: expected a JSON list of numeric rows") from error
    if matrix.ndim != 2:
        raise CertgateInputError(
            f"--spec {path}: expected a JSON list of rows, got shape {matrix.shape}"
        )
    return matrix


def run(args: argparse.Namespace) -> int:
    from verifier.bounds import compute_bounds
    from verifier.head_bounds import output_bounds
    from verifier.network import head_error

    network = read_network(args.model)
    if args.logits:
        network = network.logits()
    lower = parse_vector(args.lower, "lower")
    upper = parse_vector(args.upper, "upper")
    spec = load_spec(args.spec) if args.spec else None
    if spec is not None and network.head != "none":
        raise head_error(network.head, "--spec (rows C over the outputs)")
    started = time.perf_counter()
    if spec is None:
        low, high = output_bounds(network, lower[None, :], upper[None, :], args.method)
    else:
        result = compute_bounds(network, lower[None, :], upper[None, :], spec, args.method)
        low, high = result.lower, result.upper
    elapsed = time.perf_counter() - started
    if args.json:
        payload = {"lower": low[0], "upper": high[0], "method": args.method, "elapsed_s": elapsed}
        emit_json(to_jsonable(payload))
        return 0
    names = network.output_names if spec is None else [f"row{i}" for i in range(spec.shape[0])]
    through = f", through the {network.head} head" if network.head != "none" else ""
    print(f"{args.method} bounds over the box{through} ({elapsed * 1e3:.1f} ms):")
    for name, low_i, high_i in zip(names, low[0], high[0], strict=True):
        print(f"  {name}: [{low_i:.9g}, {high_i:.9g}]")
    return 0
