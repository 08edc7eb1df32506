"""Settings in the data's units, written in the codes the bound network reads.

A population's coded column holds the values ``x = offset + step·k`` of integer codes ``k``;
binding composes the network with that map (:func:`verifier.audits.binding.coded_network`),
so every engine reads ``k``. Audit settings name such a column's *values* (parity's
privileged value, causal fairness's protected values, query and domain, local robustness's
center, events); this module writes them in codes, exactly, in rationals, and nowhere else:

- a single value must lie on the grid (:func:`value_code`); one that does not is an input
  error naming the column and the value;
- an interval ``[low, high]`` of values becomes the interval of the codes whose values lie in
  it, ``[⌈(low − offset)/step⌉, ⌊(high − offset)/step⌋]`` (:func:`code_interval`): the same
  lattice points, the ends anywhere (a step is positive); an interval holding no grid value
  is an input error;
- a decision tree's split ``x <= t`` on a coded column is ``k <= ⌊(t − offset)/step⌋``
  (:func:`split_thresholds_in_codes`), so a scikit-learn model is read at the values;
- a discrete noise's shift ``n`` on a coded column moves every grid value to a grid value
  exactly when ``n/step`` is an integer; it is then the code shift ``n/step``
  (:func:`noise_in_codes`), and any other shift is an input error naming the column;
- an event's atom that reads one coded column and nothing else is such a one-sided interval,
  written with an integer threshold on the code; any other atom reading a coded column is
  rewritten affinely and kept only when every new coefficient is a float exactly
  (:func:`spec_in_codes`).

Each translation keeps the set of population points a setting selects exactly, so the
audit's probability, share or verdict is the one the data's units state.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from verifier.errors import CertgateInputError
from verifier.spec import And, Atom, Event, Not, Or, Specification


def column_code(population: Any, name: str) -> tuple[Fraction, Fraction] | None:
    """``(step, offset)`` of ``population``'s column ``name`` as rationals when it is coded
    (value ``offset + step·k``), else ``None`` (no schema, no such column, or not coded)."""
    schema = getattr(population, "feature_schema", None)
    if schema is None or name not in schema.columns:
        return None
    feature = schema.feature_of(name)
    if not feature.coded:
        return None
    step, offset = feature.code()
    return Fraction(step), Fraction(offset)


def value_code(population: Any, name: str, value: float, what: str) -> float:
    """The code ``k`` of ``value`` of column ``name`` (``value`` itself when the column is
    not coded): ``value`` must equal ``offset + step·k`` exactly for an integer ``k``, else an
    input error names ``what``, the column, the value and its grid."""
    code = column_code(population, name)
    if code is None:
        return float(value)
    step, offset = code
    exact = (_rational(value, what, name) - offset) / step
    if exact.denominator != 1:
        raise CertgateInputError(
            f"{what}: {value!r} is not a value of the coded column {name!r}, whose values are "
            f"{_grid_text(step, offset)} for integers k; give a value on its grid")
    return _code_float(exact, what, name)


def code_interval(population: Any, name: str, low: float | Fraction, high: float | Fraction,
                  what: str) -> tuple[float, float]:
    """The codes ``[k_low, k_high]`` whose values lie in ``[low, high]`` (``(low, high)``
    unchanged when the column is not coded): ``k_low = ⌈(low − offset)/step⌉``, ``k_high =
    ⌊(high − offset)/step⌋``, in rationals, so the interval holds exactly the grid values of
    ``[low, high]``; an infinite end stays infinite. An interval holding no grid value, or
    an end whose code is not a float exactly (beyond 2⁵³ codes), is an input error naming
    ``what`` and the column."""
    code = column_code(population, name)
    if code is None:
        return float(low), float(high)
    step, offset = code
    k_low = -math.inf if low == -math.inf else _code_float(
        Fraction(math.ceil((_rational(low, what, name) - offset) / step)), what, name)
    k_high = math.inf if high == math.inf else _code_float(
        Fraction(math.floor((_rational(high, what, name) - offset) / step)), what, name)
    if k_low > k_high:
        raise CertgateInputError(
            f"{what}: [{float(low):.15g}, {float(high):.15g}] holds no value of the coded column "
            f"{name!r}, whose values are {_grid_text(step, offset)} for integers k")
    return k_low, k_high


def noise_in_codes(noise: Any, population: Any, features: list[str]) -> Any:
    """``noise`` (a population model of additive noise whose column ``p`` is added to the
    input ``features[p]``, its values in the data's units) with its shifts on coded columns
    written as code shifts: ``offset + step·k + n = offset + step·(k + n/step)``, a grid
    value exactly when ``n/step`` is an integer (in rationals), so ``n`` becomes ``n/step``
    and the pair ``(x, x + n)`` the code pair ``(k, k + n/step)``. The noise on a coded column
    must be a factor of its own listing its shifts (a ``discrete`` or ``point``
    distribution), each a multiple of the step; otherwise an input error names the column
    and why. ``noise`` itself when no feature is coded; the noise's columns must be plain
    values (a coded noise column is refused by the engine)."""
    coded = {}
    for position, name in enumerate(features):
        code = column_code(population, name)
        if code is not None:
            coded[list(noise.columns)[position]] = (name, code[0])
    if not coded:
        return noise
    from verifier.population import population_from_json  # scipy, which settings must not

    document = noise.to_json()
    distribution = document["distribution"]
    factors = distribution["factors"] if distribution["kind"] == "product" else \
        [{"columns": list(noise.columns), "distribution": distribution}]
    for factor in factors:
        for column in factor["columns"]:
            if column in coded:
                _shifts_in_codes(factor, column, *coded[column])
    for feature in document["features"]:
        column = (feature.get("columns") or [feature["name"]])[0]
        if column not in coded:
            continue
        feature["kind"] = "integer"  # code shifts are integers, as the codes they move
        if feature.get("domain") is not None:
            step = coded[column][1]
            low, high = (None if end is None else Fraction(end) / step
                         for end in feature["domain"])
            feature["domain"] = [None if low is None else math.floor(low),
                                 None if high is None else math.ceil(high)]
    return population_from_json(document)


def _shifts_in_codes(factor: dict[str, Any], column: str, name: str, step: Fraction) -> None:
    """Rewrite in place the shifts of the noise factor holding ``column`` (added to the coded
    input ``name``) as code shifts (:func:`noise_in_codes`)."""
    distribution = factor["distribution"]
    if factor["columns"] != [column] or distribution["kind"] not in ("discrete", "point"):
        raise CertgateInputError(
            f"noise on the coded column {name!r} (value = offset + step·k) is written in codes "
            "only when the noise file gives that column a factor of its own listing its "
            f"shifts (a discrete or point distribution), not a {distribution['kind']} "
            f"distribution over {factor['columns']}")
    key = "values" if distribution["kind"] == "discrete" else "value"
    shifts = distribution[key] if key == "values" else [distribution[key]]
    codes = []
    for shift in shifts:
        code = _rational(shift, "noise", name) / step
        if code.denominator != 1:
            raise CertgateInputError(
                f"noise on the coded column {name!r}: the shift {shift!r} is not a multiple "
                f"of its step {float(step):.15g}, so it would move its values off their grid "
                "(value = offset + step·k); give shifts that are multiples of the step")
        codes.append(_code_float(code, "noise", name))
    distribution[key] = codes if key == "values" else codes[0]


def split_thresholds_in_codes(features: np.ndarray, thresholds: np.ndarray,
                              step: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """The thresholds of a tree's splits ``x[feature] <= t`` (``(n,)``; a negative feature
    marks a leaf) with every split on a coded column (``step``/``offset`` per column,
    ``(d,)``) written as ``k <= ⌊(t − offset)/step⌋``, in rationals: the same integer codes
    go left, so the tree reads each code at its value ``offset + step·k``."""
    result = np.array(thresholds, dtype=np.float64)
    for node, feature in enumerate(np.asarray(features).tolist()):
        if feature < 0 or (step[feature] == 1.0 and offset[feature] == 0.0):
            continue
        code = math.floor((Fraction(float(result[node])) - Fraction(float(offset[feature])))
                          / Fraction(float(step[feature])))
        result[node] = _code_float(Fraction(code), "a tree's split", f"#{feature}")
    return result


def spec_in_codes(spec: Specification, population: Any) -> Specification:
    """``spec`` with its events over the population's codes (the bound network's inputs), so
    that every event holds at exactly the population points it held at in values (module
    docstring): an atom reading one coded column alone becomes ``k >= K`` or ``k <= K`` with
    an integer ``K`` (floor and ceiling in rationals); another atom ``c·x + t`` reading a
    coded column ``x = offset + step·k`` becomes ``(c·step)·k + (t + c·offset)``, computed in
    rationals and kept only when every new coefficient is a float exactly (a rounded one
    would move its ties), else an input error names the event. ``spec`` itself when no
    column is coded."""
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
    read = [j for j, c in enumerate(atom.input_coeffs) if c != 0.0]
    coded = [j for j in read if step[j] != 1.0 or offset[j] != 0.0]
    if not coded:
        return atom
    if len(read) == 1 and not atom.reads_outputs:
        return _bound_in_codes(atom, read[0], text, Fraction(float(step[read[0]])),
                               Fraction(float(offset[read[0]])))
    coefficients = [Fraction(c) for c in atom.input_coeffs]
    constant = Fraction(atom.constant)
    for j in coded:
        constant += coefficients[j] * Fraction(float(offset[j]))
        coefficients[j] *= Fraction(float(step[j]))
    exact = [_exact_float(value, text) for value in (*coefficients, constant)]
    return Atom(atom.output_coeffs, tuple(exact[:-1]), exact[-1], atom.strict)


def _bound_in_codes(atom: Atom, column: int, text: str, step: Fraction,
                    offset: Fraction) -> Atom:
    """``c·x + t > 0`` (or ``>= 0``) on the one coded column ``x = offset + step·k`` as a
    bound on ``k`` with an integer threshold: for ``c > 0``, ``x >= r`` (``x > r``) with ``r =
    −t/c`` is ``k >= ⌈q⌉`` (``k >= ⌊q⌋ + 1``), ``q = (r − offset)/step``; for ``c < 0``,
    ``x <= r`` (``x < r``) is ``k <= ⌊q⌋`` (``k <= ⌈q⌉ − 1``). The same integers satisfy it."""
    c = Fraction(atom.input_coeffs[column])
    q = (-Fraction(atom.constant) / c - offset) / step
    zeros = [0.0] * len(atom.input_coeffs)
    if c > 0:
        threshold = math.floor(q) + 1 if atom.strict else math.ceil(q)
        zeros[column] = 1.0
        return Atom(atom.output_coeffs, tuple(zeros), -_exact_float(Fraction(threshold), text),
                    False)
    threshold = math.ceil(q) - 1 if atom.strict else math.floor(q)
    zeros[column] = -1.0
    return Atom(atom.output_coeffs, tuple(zeros), _exact_float(Fraction(threshold), text), False)


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


def _rational(value: float | Fraction, what: str, name: str) -> Fraction:
    if not math.isfinite(value):
        raise CertgateInputError(f"{what}: {value!r} is not a finite value of column {name!r}")
    return Fraction(value)


def _code_float(code: Fraction, what: str, name: str) -> float:
    """An integer code as a float, when it is one exactly."""
    rounded = float(code)
    if Fraction(rounded) != code:
        raise CertgateInputError(f"{what}: the code of column {name!r} is too large to be a "
                                 "float exactly")
    return rounded


def _grid_text(step: Fraction, offset: Fraction) -> str:
    """The grid as the population's files write it (only on an error path: the population
    package imports scipy, which the settings' import must not)."""
    from verifier.population.schema import code_text

    return code_text(float(step), float(offset))
