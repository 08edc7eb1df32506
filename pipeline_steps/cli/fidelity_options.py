"""The population-fidelity options of ``certgate verify demographic-parity``: ``--data``,
``--fidelity-level`` and ``--population-contradicted`` (the configuration's
``fidelity.data``, ``fidelity.level`` and ``gate.population_contradicted``)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from pipeline_steps.cli.exit_codes import EXIT_FAILED
from verifier.certificate import Certificate
from verifier.errors import CertgateInputError


def add_fidelity_options(parser: argparse.ArgumentParser) -> None:
    """Add the options of the module docstring."""
    parser.add_argument(
        "--data",
        help="data table (CSV or Parquet; raw string columns one-hot encoded as by "
             "'population fit') to check the population model against: the model's "
             "empirical parity on it, with a confidence interval, must meet the certified "
             "interval. Default: the table the population model records it was fitted from "
             "(fitted_from, if its sha256 still matches), else for a models:/ model the "
             "file-backed dataset logged with its version's source run; without any, no "
             "check is made (said, exit code unchanged)")
    parser.add_argument("--fidelity-level", type=float, default=0.95,
                        help="confidence level of the data's interval (default 0.95)")
    parser.add_argument("--population-contradicted", choices=("fail", "warn"), default="fail",
                        help="exit code when the data contradicts the population model: fail "
                             "(default, exit 1 even when proven) or warn (the verdict's code)")


def fidelity_inputs(args: argparse.Namespace, network: Any, population: Any
                    ) -> tuple[Any, Any]:
    """The check's options and data (``--data``, else the population's ``fitted_from``,
    else for a ``models:/`` model the dataset logged with its version's source run), read
    before the audit runs so that a bad ``--data`` fails at once."""
    from pipeline_steps.fidelity_data import resolve_data
    from verifier.audits.fidelity import FidelityOptions

    try:
        chosen = FidelityOptions(level=args.fidelity_level)
    except ValueError as error:
        raise CertgateInputError(f"--fidelity-level: {error}") from error
    names = list(network.input_names)
    registered = str(args.model).startswith("models:/")
    data = resolve_data(names, population, given=args.data, given_origin="--data",
                        population_path=Path(args.population),
                        mlflow_dataset=(lambda: _logged_rows(args.model, names))
                        if registered else None)
    return chosen, data


def _logged_rows(model_uri: str, names: list[str]) -> Any:
    """The rows of the dataset logged with the source run of the registered version
    ``model_uri`` names (on ``MLFLOW_TRACKING_URI``)."""
    from pipeline_steps.fidelity_data import table_rows
    from registry_hooks.connection import connect
    from registry_hooks.datasets import source_run_dataset
    from registry_hooks.uris import parse_model_uri, resolve_version
    from verifier.audits.fidelity import NoData

    registry = connect(None, None)
    version = resolve_version(registry, parse_model_uri(model_uri))
    with tempfile.TemporaryDirectory(prefix="certgate-dataset-") as workdir:
        table = source_run_dataset(registry, version, Path(workdir))
        if isinstance(table, NoData):
            return table
        return table_rows(table.frame, table.path, names, table.source)


def check_fidelity(inputs: tuple[Any, Any], settings: Any, certificate: Certificate,
                   network: Any, population: Any) -> None:
    """Record the fidelity check on ``certificate`` (``inputs`` from
    :func:`fidelity_inputs`)."""
    from verifier.audits import fidelity_check
    from verifier.audits.fidelity import attach

    chosen, data = inputs
    attach(certificate, fidelity_check(settings, certificate, network, population, data,
                                       chosen))


def exit_code(args: argparse.Namespace, certificate: Certificate, code: int) -> int:
    """The verb's exit code once the check is read: 1 for a contradicted population under
    ``--population-contradicted fail``."""
    contradicted = certificate.population_fidelity.get("status") == "contradicted"
    return EXIT_FAILED if contradicted and args.population_contradicted == "fail" else code
