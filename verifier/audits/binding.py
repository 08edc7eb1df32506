"""Binding a network's inputs to a population model's columns, explicitly and by name.

A network reads a vector; a population model describes named columns. Which column feeds which
input must come from the *model* (names recorded with it: an MLflow signature, certgate
metadata, ONNX metadata, a named JSON network) or from the *user* (``model.input_names`` in a
configuration, ``--input-names`` on the command line), never from the population model: a
population whose columns happen to be in another order would otherwise be certified against
the wrong inputs and the certificate would be wrong.

:func:`bind` applies the rules:

* the model's names are *anonymous* when they are only positions (``x0, x1, …``, the IR's
  default, or ``<tensor>[0], <tensor>[1], …``, what an ONNX graph's single input tensor gives);
* names given by the user must agree with the model's real names, if it has any (an error
  names both lists);
* an anonymous model without given names is refused, with one line that says how to name it;
* the population model must then hold every one of these columns: in the same order, or in
  another order when its distribution addresses columns by name (then it is re-ordered to the
  network's inputs: ``column_order``); a missing column is an error naming both lists. The
  population's other columns are read with zero weights (:func:`unread_by_names`,
  :func:`reading`): a protected attribute the model was trained without is what a parity
  audit conditions on, and the model's outputs do not depend on it. When a name is missing,
  only a categorical feature's one column that the model lacks while it reads all the others
  (a one-hot group whose category was dropped, as ``pandas.get_dummies(...,
  drop_first=True)`` drops it: that category is the row of zeros, a function of the others)
  is read that way (:func:`unread_columns`), and the rest is an error naming both;
* when the population codes a column (an integer feature with a ``step``/``offset``: the
  value is ``offset + step·k``), the bound network reads the codes: it is the model composed
  with that exact affine input map (:func:`coded_network`), so every engine keeps seeing the
  integers ``k`` the population describes while the model is evaluated at its real inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from verifier.errors import ONE_HOT_SEPARATORS, CertgateInputError
from verifier.network import Layer, Network, compose, positional_names


class BindingError(CertgateInputError):
    """The network's inputs cannot be bound to the population model's columns."""


def anonymous_inputs(network: Network) -> bool:
    """True when the network's input names carry no meaning beyond their position."""
    return positional_names(network.input_names, "x")


def anonymous_outputs(network: Network) -> bool:
    """True when the network's output names carry no meaning beyond their position (the
    readers' defaults ``y0, y1, …``, or one output tensor's ``logits[0], logits[1], …``):
    they name no classes."""
    return positional_names(network.output_names, "y")


def parse_input_names(text: str | Sequence[str] | None) -> list[str] | None:
    """Names from ``--input-names a,b,c`` (or a list); ``None`` stays ``None``."""
    if text is None:
        return None
    parts = text.split(",") if isinstance(text, str) else list(text)
    names = [str(part).strip() for part in parts]
    if not names or any(not name for name in names):
        raise BindingError(f"input names {text!r}: expected comma-separated non-empty names")
    if len(set(names)) != len(names):
        doubled = sorted({name for name in names if names.count(name) > 1})
        raise BindingError(f"input names list {', '.join(doubled)} more than once")
    return names


def _shown(names: Sequence[str]) -> str:
    return ", ".join(names)


def bound_names(network: Network, given: Sequence[str] | None, where: str) -> list[str]:
    """The network's input names after binding (see the module docstring); ``where`` names the
    model in messages (its path or URI)."""
    own = None if anonymous_inputs(network) else list(network.input_names)
    if given is not None:
        names = list(given)
        if len(names) != network.input_size:
            raise BindingError(
                f"{where}: {len(names)} input names given ({_shown(names)}) but the network has "
                f"{network.input_size} inputs"
            )
        if own is not None and own != names:
            raise BindingError(
                f"{where}: the input names given ({_shown(names)}) disagree with the names "
                f"recorded with the model ({_shown(own)})"
            )
        return names
    if own is None:
        raise BindingError(
            f"{where}: the model records no input names (its {network.input_size} inputs are "
            f"only positions: {_shown(network.input_names)}); give them in the network's input "
            "order with model.input_names in the configuration, --input-names a,b,c, "
            "certgate.audit(..., input_names=[...]) or, in mlflow.models.evaluate, "
            "evaluator_config['certgate']['input_names']"
        )
    return own


def bind(network: Network, population: Any, given: Sequence[str] | None,
         where: str) -> tuple[Network, Any]:
    """The network with its bound input names, reading the population's codes
    (:func:`coded_network`) and its dropped categories (:func:`reading`), and the population
    model with its columns in the network's input order; raises :class:`BindingError` (see
    the module docstring)."""
    columns = list(population.columns)
    if len(columns) > network.input_size and given is None and anonymous_inputs(network):
        raise BindingError(                     # which columns it reads only names can say
            f"{where}: the population model has {len(columns)} columns ({_shown(columns)}) but "
            f"the network has {network.input_size} inputs, and the model records no input "
            f"names (only positions: {_shown(network.input_names)}); if it reads some of these "
            "columns, give their names in the network's input order with model.input_names in "
            "the configuration or --input-names a,b,c"
        )
    named = given is not None or not anonymous_inputs(network)
    unread = unread_columns(population, network.input_names if given is None else given)
    if not named and len(columns) != network.input_size + len(unread):
        raise BindingError(
            f"{where}: the population model has {len(columns)} columns ({_shown(columns)}) but "
            f"the network has {network.input_size} inputs"
        )
    names = bound_names(network, given, where)
    unread = unread_by_names(population, names)
    if names != list(network.input_names):
        network = network.renamed(input_names=names)
    network = reading(network, unread)
    population = ordered_population(population, network.input_names, where)
    return coded_network(network, population), population


def unread_columns(population: Any, names: Sequence[str]) -> list[str]:
    """The population's columns that a model with inputs ``names`` does not read and need not:
    of every categorical feature, the one column missing from ``names`` when ``names`` hold
    all its other columns (a one-hot group whose category was dropped: that column is 1
    exactly where the others are all 0). Population columns order."""
    schema = getattr(population, "feature_schema", None)
    if schema is None:
        return []
    given = set(names)
    unread = []
    for feature in schema.features:
        if feature.kind == "categorical":
            missing = [column for column in feature.column_names() if column not in given]
            if len(missing) == 1:
                unread.extend(missing)
    return [column for column in population.columns if column in unread]


def unread_by_names(population: Any, names: Sequence[str]) -> list[str]:
    """The population's columns that a model whose inputs are named ``names`` does not read,
    in population column order: when every name is a population column, every other column
    (a protected attribute the model was trained without, a column it never used: its
    outputs do not depend on them, so it reads them with zero weights); else the dropped
    one-hot categories of :func:`unread_columns` (the missing names are then an error of
    :func:`ordered_population`)."""
    columns = list(population.columns)
    if all(name in columns for name in names):
        return [column for column in columns if column not in names]
    return unread_columns(population, names)


def reading(network: Network, columns: Sequence[str]) -> Network:
    """``network`` with the inputs ``columns`` appended, read with zero weights: its outputs
    at any values of them are ``network``'s, exactly."""
    if not columns:
        return network
    first = network.layers[0]
    zeros = np.zeros((first.out_features, len(columns)))
    magnitude = first.weight_magnitude
    widened = replace(first, weight=np.hstack([first.weight, zeros]),
                      weight_magnitude=None if magnitude is None else np.hstack([magnitude,
                                                                                 zeros]))
    return Network([widened, *network.layers[1:]], [*network.input_names, *columns],
                   list(network.output_names), network.head)


def coded_network(network: Network, population: Any) -> Network:
    """``network`` reading the codes of ``population``'s columns (in the network's input
    order): composed with the affine input map ``x = offset + step·k`` of every coded column
    (identity elsewhere), folded into its first layer; ``network`` itself when no column is
    coded.

    Guarantee: the result in real arithmetic at codes ``k`` is ``network`` in real arithmetic
    at ``offset + step·k``. The fold's float coefficients carry the magnitudes of their real
    terms (:func:`~verifier.network.fold_affine`), so bounds keep their rounding margins; a
    fold whose every coefficient is exact (a step that is a power of two and offsets of 0, as
    fitted grids through 0 give, on a first layer of the model's own coefficients) leaves no
    trace, so points are still decided in exact arithmetic
    (:attr:`~verifier.network.Network.folded` stays false); any rounded one flags it."""
    schema = getattr(population, "feature_schema", None)
    if schema is None or not schema.coded:
        return network
    step, offset = schema.column_codes()
    names = list(network.input_names)
    input_map = Network([Layer(np.diag(step), offset.copy())], names, names)
    return compose(input_map, network)


def _numbers_read_as_categories(missing: Sequence[str], unknown: Sequence[str]) -> str:
    """A hint for each population column ``C`` the model does not read whose one-hot columns
    ``C=V`` or ``C_V`` it reads: a category column whose values are digits, read from the table
    as a number (empty when there is none)."""
    hints = [
        f"; '{column}' is a numeric column of the population where the model reads its "
        f"categories ({_shown(reads)}): a category written as digits is read from a table as a "
        "number; fit the population on the table the model was trained on (its one-hot "
        "columns) or write the category as text"
        for column in unknown
        if (reads := [name for name in missing if name.startswith((f"{column}=", f"{column}_"))])
    ]
    return "".join(hints)


def _separated_apart(column: str, name: str) -> tuple[str, str] | None:
    """``(the population's separator, the model's)`` when population column ``column`` and
    model input ``name`` are one one-hot column spelled with different separators
    (:data:`~verifier.errors.ONE_HOT_SEPARATORS`: ``sex=F`` and ``sex_F``), else ``None``."""
    for ours in ONE_HOT_SEPARATORS:
        head, found, tail = column.partition(ours)
        for theirs in ONE_HOT_SEPARATORS:
            if found and head and theirs != ours and name == f"{head}{theirs}{tail}":
                return ours, theirs
    return None


SEPARATOR_FIXES = {
    "_": ("fit the population on the table encoded as the model was trained (the same "
          "pandas.get_dummies call, drop_first included: its COL_VALUE columns are kept as "
          "they are), not on the raw table, whose string columns `population fit` encodes as "
          "COL=VALUE"),
    "=": ("fit the population on the raw table (`population fit` encodes a string column as "
          "COL=VALUE) or on the table encoded with pandas.get_dummies(..., prefix_sep='=')"),
}
"""How to refit a population whose one-hot columns' separator is not the model's, by the
model's separator."""


def _separator_differs(missing: Sequence[str], unknown: Sequence[str]) -> str:
    """A hint when population columns the model does not read and inputs it lacks differ
    only in the separator of their one-hot names (``sex=F`` against ``sex_F``: a population
    fitted on the raw table for a model trained on ``pandas.get_dummies`` columns): which
    separator each side uses, the pairs, and how to refit; empty when there is none."""
    pairs = [(column, name, seps) for column in unknown for name in missing
             if (seps := _separated_apart(column, name)) is not None]
    if not pairs:
        return ""
    ours, theirs = pairs[0][2]
    if any(seps != (ours, theirs) for _, _, seps in pairs):
        return "; only the separators of their one-hot columns differ: " + ", ".join(
            f"{column} vs {name}" for column, name, _ in pairs)
    shown = ", ".join(f"{column} vs {name}" for column, name, _ in pairs)
    return (f"; only the separator differs: the population's columns use {ours!r} where the "
            f"model's inputs use {theirs!r} ({shown}); {SEPARATOR_FIXES[theirs]}")


def ordered_population(population: Any, names: Sequence[str], where: str) -> Any:
    """``population`` with its columns in the order ``names``; raises :class:`BindingError`
    unless it has exactly these columns."""
    names = list(names)
    columns = list(population.columns)
    if columns == names:
        return population
    missing = [name for name in names if name not in columns]
    unknown = [column for column in columns if column not in names]
    if missing or unknown or len(columns) != len(names):
        raise BindingError(
            f"{where}: the population model's columns ({_shown(columns)}) are not the model's "
            f"inputs ({_shown(names)}): inputs missing from the population model "
            f"[{_shown(missing)}], population columns the model does not read "
            f"[{_shown(unknown)}]{_separator_differs(missing, unknown)}"
            f"{_numbers_read_as_categories(missing, unknown)}"
        )
    if population.distribution.column_names() is None:
        raise BindingError(
            f"{where}: the population model's columns ({_shown(columns)}) are in another order "
            f"than the model's inputs ({_shown(names)}) and its distribution addresses columns "
            "by position; set column_order in the population model"
        )
    from verifier.population import population_from_json

    return population_from_json({**population.to_json(), "column_order": names})
