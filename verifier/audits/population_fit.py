"""Does a population model fit a network's inputs? (After binding: see
:mod:`verifier.audits.binding`.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verifier.errors import CertgateInputError
from verifier.spec import Names

if TYPE_CHECKING:
    from verifier.network import Network


def population_columns(population: Any) -> list[str] | None:
    """The population model's column names, when it has them."""
    columns = getattr(population, "columns", None)
    if callable(columns):
        columns = columns()
    if columns is None and hasattr(population, "column_names"):
        columns = population.column_names()
    return list(columns) if columns is not None else None


def check_population_fits(network: Network, population: Any) -> Names:
    """The names events may use; raises a clear error unless the population model's columns
    are the network's inputs, by name and in order. The network's names are never replaced
    by the population's (bind them first: :func:`verifier.audits.binding.bind`)."""
    dimension = int(population.dimension)
    if dimension != network.input_size:
        raise CertgateInputError(
            f"the population model has {dimension} columns but the network has "
            f"{network.input_size} inputs"
        )
    columns = population_columns(population)
    inputs = list(network.input_names)
    if columns is not None and columns != inputs:
        mismatch = next(i for i, (a, b) in enumerate(zip(columns, inputs, strict=True)) if a != b)
        raise CertgateInputError(
            f"population column {mismatch} is {columns[mismatch]!r} but network input "
            f"{mismatch} is {inputs[mismatch]!r}: the population model does not match the "
            "network's inputs (bind them by name first)"
        )
    return Names.of(inputs, network.output_names)
