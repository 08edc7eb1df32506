"""Does a population model fit a network's inputs? (After binding: see
:mod:`verifier.audits.binding`.)"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from verifier.errors import CertgateInputError
from verifier.spec import Names, atoms_of, parse_event

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


def refuse_coded(population: Any, names: Iterable[str], what: str) -> None:
    """Raise a clear input error when one of ``names`` is a coded column of ``population`` (an
    integer feature with a ``step``/``offset``, value = ``offset + step·k``): ``what`` gives
    that column's values in the data's units, while the bound network and the engines read
    its codes ``k``, and the audit does not translate them (yet)."""
    schema = getattr(population, "feature_schema", None)
    if schema is None:
        return
    coded = [name for name in dict.fromkeys(names)
             if name in schema.columns and schema.feature_of(name).coded]
    if coded:
        raise CertgateInputError(
            f"{what} names the coded column(s) {', '.join(coded)} (value = offset + step·k, "
            "an integer feature with a step or offset in the population model): this audit "
            "reads values of such a column only as codes, so it is not supported there; use "
            "a column without a step or offset")


def event_inputs(text: str, names: Names) -> list[str]:
    """The input names an event's text reads (with a non-zero coefficient)."""
    event = parse_event(text, names)
    return [names.inputs[index] for atom in atoms_of(event)
            for index, coefficient in enumerate(atom.input_coeffs) if coefficient != 0.0]
