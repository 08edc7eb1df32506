"""What every audit verb reads the same way: the model (``--model``), its input names
(``--input-names``), and the population model bound to it by name
(:mod:`verifier.audits.binding`)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifier.errors import CertgateInputError, first_line

if TYPE_CHECKING:
    from verifier.network import Network

INPUT_NAMES_HELP = ("the network's input names in input order, comma-separated (needed when the "
                    "model file records none; must agree with the names it records)")


def add_input_names(parser: argparse.ArgumentParser) -> None:
    """Add ``--input-names``."""
    parser.add_argument("--input-names", help=INPUT_NAMES_HELP)


MODEL_HELP = ("the model: a network file (.onnx, .nnet, .json, .pt), a local MLflow model "
              "directory, or models:/NAME@ALIAS, models:/NAME/VERSION, runs:/RUN/PATH on "
              "MLFLOW_TRACKING_URI")


def read_network(path: str, option: str = "--model") -> Network:
    """The model ``path`` names as the IR: a network file, or (as ``certgate run`` reads
    them) a local MLflow model directory or a registry/run URI on ``MLFLOW_TRACKING_URI``. A
    missing, truncated or corrupt file is one :class:`CertgateInputError` line naming the
    option and the file."""
    if ":/" in path or Path(path).is_dir():
        from registry_hooks.certgate_model import load_model_source

        with tempfile.TemporaryDirectory(prefix="certgate-model-") as workdir:
            return load_model_source(path, None, Path(workdir)).network
    from verifier.convert import load_network

    try:
        return load_network(path)
    except (CertgateInputError, FileNotFoundError, IsADirectoryError):
        raise
    except Exception as error:  # every reader fails differently on bad bytes
        first = first_line(error)
        raise CertgateInputError(
            f"{option} {path}: cannot read the network file ({type(error).__name__}: {first})"
        ) from error


def bound_network(args: argparse.Namespace, network: Network,
                  population: Any) -> tuple[Network, Any]:
    """``network`` named and ``population`` ordered by :func:`verifier.audits.binding.bind`
    with ``--input-names``."""
    from verifier.audits.binding import bind, parse_input_names

    given = parse_input_names(getattr(args, "input_names", None))
    return bind(network, population, given, f"--model {args.model}")


def named_network(args: argparse.Namespace, network: Network) -> Network:
    """``network`` with its bound input names (no population model to order)."""
    from verifier.audits.binding import bound_names, parse_input_names

    names = bound_names(network, parse_input_names(getattr(args, "input_names", None)),
                        f"--model {args.model}")
    if names == list(network.input_names):
        return network
    return network.renamed(input_names=names)
