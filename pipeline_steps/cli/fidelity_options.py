"""The population-fidelity options of ``certgate verify demographic-parity``: ``--data``,
``--fidelity-level`` and ``--population-contradicted`` (the configuration's
``fidelity.data``, ``fidelity.level`` and ``gate.population_contradicted``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from verifier.certificate import Certificate


def add_fidelity_options(parser: argparse.ArgumentParser) -> None:
    """Add the options of the module docstring."""
    parser.add_argument(
        "--data",
        help="data table (CSV or Parquet; raw string columns one-hot encoded as by "
             "'population fit') to check the population model against: the model's "
             "empirical parity on it, with a confidence interval, must meet the certified "
             "interval. Default: the table the population model records it was fitted from "
             "(fitted_from, if its sha256 still matches); without either no check is made")
    parser.add_argument("--fidelity-level", type=float, default=0.95,
                        help="confidence level of the data's interval (default 0.95)")
    parser.add_argument("--population-contradicted", choices=("fail", "warn"), default="fail",
                        help="exit code when the data contradicts the population model: fail "
                             "(default, exit 1 even when proven) or warn (the verdict's code)")


def fidelity_inputs(args: argparse.Namespace, network: Any, population: Any
                    ) -> tuple[Any, Any]:
    """The check's options and data (``--data``, else the population's ``fitted_from``),
    read before the audit runs so that a bad ``--data`` fails at once."""
    from pipeline_steps.fidelity_data import resolve_data
    from verifier.audits.fidelity import FidelityOptions
    from verifier.errors import CertgateInputError

    try:
        chosen = FidelityOptions(level=args.fidelity_level)
    except ValueError as error:
        raise CertgateInputError(f"--fidelity-level: {error}") from error
    data = resolve_data(list(network.input_names), population, given=args.data,
                        given_origin="--data", population_path=Path(args.population))
    return chosen, data


def check_fidelity(inputs: tuple[Any, Any], settings: Any, certificate: Certificate,
                   network: Any, population: Any) -> None:
    """Record the fidelity check on ``certificate`` (``inputs`` from
    :func:`fidelity_inputs`)."""
    from verifier.audits.fidelity import attach, fidelity_check

    chosen, data = inputs
    attach(certificate, fidelity_check(settings, certificate, network, population, data,
                                       chosen))


def exit_code(args: argparse.Namespace, certificate: Certificate, code: int) -> int:
    """The verb's exit code once the check is read: 1 for a contradicted population under
    ``--population-contradicted fail``."""
    contradicted = certificate.population_fidelity.get("status") == "contradicted"
    return 1 if contradicted and args.population_contradicted == "fail" else code
