"""What every audit verb reads the same way: the model (``--model``), its input names
(``--input-names``), and the population model bound to it by name
(:mod:`verifier.audits.binding`)."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from verifier.errors import CertgateInputError, first_line
from verifier.file_digest import read_unchanged_with

if TYPE_CHECKING:
    from registry_hooks.certgate_model import LoadedModel
    from verifier.network import Network

Read = TypeVar("Read")

INPUT_NAMES_HELP = ("the network's input names in input order, comma-separated (needed when the "
                    "model file records none; must agree with the names it records)")


INPUT_SHAPE_HELP = ("the model's per-sample input shape, e.g. 12 or 1,28,28: needed only by a "
                    "pickled torch module that is not a plain Sequential (converted through "
                    "torch.export) when the model has no signature and no input names")


def add_input_names(parser: argparse.ArgumentParser) -> None:
    """Add ``--input-names`` and ``--input-shape``."""
    parser.add_argument("--input-names", help=INPUT_NAMES_HELP)
    parser.add_argument("--input-shape", help=INPUT_SHAPE_HELP)


def input_shape(args: argparse.Namespace) -> tuple[int, ...] | None:
    """``--input-shape`` as a tuple of positive sizes (``None`` when not given)."""
    text = getattr(args, "input_shape", None)
    if text is None:
        return None
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError:
        shape = ()
    if not shape or min(shape) <= 0:
        raise CertgateInputError(f"--input-shape {text!r}: expected positive sizes, e.g. 12 "
                                 "or 1,28,28")
    return shape


def model_network(args: argparse.Namespace, option: str = "--model") -> Network:
    """:func:`read_network` of ``--model`` with the ``--input-names``/``--input-shape`` the
    verb was given."""
    from verifier.audits.binding import parse_input_names

    return read_network(getattr(args, option.removeprefix("--").replace("-", "_")), option,
                        input_names=parse_input_names(getattr(args, "input_names", None)),
                        shape=input_shape(args))


MODEL_HELP = ("the model: a network file (.onnx, .nnet, .json, .pt, .ts), a local MLflow model "
              "directory, or models:/NAME@ALIAS, models:/NAME/VERSION, runs:/RUN/PATH on "
              "MLFLOW_TRACKING_URI")


def read_network(path: str, option: str = "--model", *, input_names: list[str] | None = None,
                 shape: tuple[int, ...] | None = None) -> Network:
    """The model ``path`` names as the IR: a network file, or (as ``certgate run`` reads
    them) a local MLflow model directory or a registry/run URI on ``MLFLOW_TRACKING_URI``
    (``input_names``/``shape``: what a pickled module converted through ``torch.export`` may
    need, :func:`registry_hooks.certgate_model.load_model`). A missing, truncated or corrupt
    file is one :class:`CertgateInputError` line naming the option and the file."""
    if _stored_model(path):
        return read_model(path, option, input_names=input_names, shape=shape).network
    from verifier.convert import load_network

    with _network_file_errors(path, option):
        return load_network(path)


def read_model(path: str, option: str = "--model", *, input_names: list[str] | None = None,
               shape: tuple[int, ...] | None = None) -> LoadedModel:
    """:func:`read_network`'s model with the dtype its source computes in
    (:attr:`~registry_hooks.certgate_model.LoadedModel.dtype`): a network file is read with
    its dtype from the same bytes
    (:func:`~registry_hooks.certgate_model.load_network_file`); a ``file.json#KEY``
    selection is read as :func:`read_network` reads it, float64 as JSON is."""
    from registry_hooks.certgate_model import LoadedModel, load_model_source, load_network_file

    if _stored_model(path):
        with tempfile.TemporaryDirectory(prefix="certgate-model-") as workdir:
            return load_model_source(path, None, Path(workdir), input_names=input_names,
                                     input_shape=shape)
    if not Path(path).is_file():
        return LoadedModel(path, read_network(path, option), "file", "json")
    with _network_file_errors(path, option):
        return load_network_file(Path(path), path)


def _stored_model(path: str) -> bool:
    """``path`` names an MLflow model (a URI or a local model directory), not a network file."""
    return ":/" in path or Path(path).is_dir()


@contextmanager
def _network_file_errors(path: str, option: str) -> Iterator[None]:
    """Any failure to read the network file ``path`` as one :class:`CertgateInputError` line
    naming ``option`` and the file (every reader fails differently on bad bytes)."""
    try:
        yield
    except (CertgateInputError, FileNotFoundError, IsADirectoryError):
        raise
    except Exception as error:
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


def read_certified(path: str, option: str, read: Callable[[], Read]) -> tuple[Read, dict[str, Any]]:
    """``read()`` (which reads ``path``) and what a certificate names of it: the path under
    the option's name (``--model`` → ``model``) and, for a local file, its sha256 under
    ``model_sha256`` and, for an ONNX model whose tensors are stored beside it, each such
    file's sha256 by name under ``model_external_data_sha256``
    (:func:`verifier.convert.model_companions`), taken by
    :func:`verifier.file_digest.read_unchanged_with` (a file that changes while it is read is
    a :class:`CertgateInputError` naming the option). A directory or a registry/run URI is
    named by its path alone."""
    from verifier.convert import model_companions

    key = option.removeprefix("--").replace("-", "_")
    local = Path(path)
    if ":/" in path or not local.is_file():
        return read(), {key: path}
    value, digest, external = read_unchanged_with(local, model_companions(local),
                                                  f"{option} {path}", read)
    named: dict[str, Any] = {key: path, f"{key}_sha256": digest}
    if external:
        named[f"{key}_external_data_sha256"] = external
    return value, named
