"""Does a population model fit a network's inputs? (After binding: see
:mod:`verifier.audits.binding`.)"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from verifier.errors import CertgateInputError
from verifier.spec import And, Atom, Event, Names, Not, Or, Specification

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


def spec_in_codes(spec: Specification, population: Any) -> Specification:
    """``spec`` with its events' input terms over the population's codes (the bound network's
    inputs): ``c·x + t`` with a coded column's ``x = offset + step·k`` is
    ``(c·step)·k + (t + c·offset)``, computed in rationals and kept only when every new
    coefficient is a float exactly, so the event holds at exactly the same points (a rounded
    one would move its ties); otherwise an input error names the event. ``spec`` itself when
    no column is coded or no event reads a coded column."""
    schema = getattr(population, "feature_schema", None)
    if schema is None or not schema.coded:
        return spec
    step, offset = schema.column_codes()
    terms = {
        key: replace(term, event=_event_in_codes(term.event, term.event_text, step, offset),
                     condition=None if term.condition is None else _event_in_codes(
                         term.condition, term.condition_text, step, offset))
        for key, term in spec.probabilities.items()}
    return replace(spec, probabilities=terms)


def _event_in_codes(event: Event, text: str, step: np.ndarray, offset: np.ndarray) -> Event:
    if isinstance(event, Atom):
        return _atom_in_codes(event, text, step, offset)
    if isinstance(event, And | Or):
        return type(event)(tuple(_event_in_codes(part, text, step, offset)
                                 for part in event.parts))
    if isinstance(event, Not):
        return Not(_event_in_codes(event.part, text, step, offset))
    return event


def _atom_in_codes(atom: Atom, text: str, step: np.ndarray, offset: np.ndarray) -> Atom:
    coded = [j for j, c in enumerate(atom.input_coeffs)
             if c != 0.0 and (step[j] != 1.0 or offset[j] != 0.0)]
    if not coded:
        return atom
    coefficients = [Fraction(c) for c in atom.input_coeffs]
    constant = Fraction(atom.constant)
    for j in coded:
        constant += coefficients[j] * Fraction(float(offset[j]))
        coefficients[j] *= Fraction(float(step[j]))
    exact = [_exact_float(value, text) for value in (*coefficients, constant)]
    return Atom(atom.output_coeffs, tuple(exact[:-1]), exact[-1], atom.strict)


def _exact_float(value: Fraction, text: str) -> float:
    """``value`` as a float when it is one exactly; else an input error naming the event."""
    try:
        rounded = float(value)
    except OverflowError:
        rounded = math.inf
    if not math.isfinite(rounded) or Fraction(rounded) != value:
        raise CertgateInputError(
            f"the event {text!r} reads a coded column (value = offset + step·k) with a "
            "coefficient or threshold that is not a float exactly once written in the codes "
            "k; write it with a threshold on the column's grid")
    return rounded

