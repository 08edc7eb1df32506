"""From a data table to a population model: what ``certgate population fit`` and
:func:`certgate.fit_population` do before the fitting of :mod:`verifier.population.fitting`.

Column handling, in this order:

1. **Raw string columns** (object, string or category dtype) are one-hot encoded in place: a
   column ``C`` with values ``v1 < v2 < …`` (sorted as strings) becomes the columns
   ``C=v1, C=v2, …`` (0/1 integers) at ``C``'s position, forming the categorical feature ``C``
   with categories ``[v1, v2, …]``. A missing value, a single distinct value, a different
   value in every row (an identifier) or more than 20 values that all read as dates, or as
   numbers written as text (``$1,234.50``, ``12%``), are errors naming the column, every
   such column of the table in one error (:func:`_non_category_reason`).
2. **Given one-hot groups** (``categorical``: feature name → its columns) are used as given.
3. **Detected one-hot groups**: the remaining columns named ``NAME=VALUE`` that share a
   ``NAME`` (at least two of them) form the categorical feature ``NAME`` with categories
   ``VALUE…`` in column order.
4. **Detected dummies**: 0/1 columns named ``PREFIX_VALUE`` (``pandas.get_dummies``' default
   names, bool or integer) that share a ``PREFIX`` and hold exactly one 1 in every row form
   the categorical feature ``PREFIX`` (:func:`detect_dummies`). Dummies written with
   ``drop_first`` (at most one 1 in every row, some rows all 0: the dropped category) are
   that feature too, with one more column, :func:`dropped_column` (``PREFIX_(dropped)``),
   holding 1 where the others are all 0; a model that reads only the listed columns binds
   to it (:func:`verifier.audits.binding.unread_columns`). Columns with two 1s in some row
   (``has_car``, ``has_house``) stay binary.
5. Every other column is binary (bool, or integers in {0, 1}), integer, or continuous
   (:func:`verifier.population.fitting.infer_features`). A float column of whole numbers
   (``3.0``) is integer, as the integer column holding them is. Another float column with at most
   ``max_discrete_values`` distinct values lying exactly on a grid ``offset + step·k`` is an
   integer feature with that ``step`` and ``offset``, fitted on its integer codes ``k``
   (:func:`verifier.population.fitting.grid_code`): its values keep their mass.

Defaults (bounded and data-shaped, with the dependences kept):

* every integer or continuous feature without a given domain gets the data's range
  ``[min, max]`` as its domain (except ``continuous="normal"``, the unbounded normals of
  earlier releases, which must be asked for);
* marginals are histograms (``continuous="histogram"``: see
  :mod:`verifier.population.fitting`);
* the model is a Bayesian network whose structure is learned from the data
  (:mod:`verifier.population.structure`; ``protected`` makes the audit's protected attribute
  every feature's parent), unless ``structure="independent"`` asks for the independent
  product or ``parents`` gives the structure. The learned edges are written in the model's
  ``description``.

The model's columns are the table's columns after step 1, in table order, with step 4's
dropped columns inserted: a network trained on the same encoded table binds to it by name.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from verifier.population.errors import PopulationError

if TYPE_CHECKING:
    import pandas as pd

    from verifier.population import PopulationModel
    from verifier.population.model import DataSource
    from verifier.population.schema import Feature
    from verifier.population.structure import LearnedStructure

ContinuousMethod = Literal["histogram", "normal", "gaussian_mixture", "density_tree"]
CONTINUOUS_METHODS: tuple[str, ...] = ("histogram", "normal", "gaussian_mixture", "density_tree")
PRODUCT_ONLY: tuple[str, ...] = ("gaussian_mixture", "density_tree")
Structure = Literal["learned", "independent"]


class PopulationFitWarning(UserWarning):
    """Something the fitted population does not hold of its table, said when the fit ends.
    ``certgate population fit`` prints each on stderr and lists it as ``warnings`` in
    ``--json``."""


class FewValuedDensityWarning(PopulationFitWarning):
    """A column holding at most ``max_discrete_values`` distinct values lies on no exact
    binary-float grid (tenths, for instance, do not), so :func:`fit_population` fitted it as
    a continuous density and its values get no probability mass of their own. The message
    names the column and the fix (scale it to integers in the data and the model).
    ``certgate population fit`` prints it on stderr and lists it as ``warnings`` in
    ``--json``."""


class LostDependenceWarning(PopulationFitWarning):
    """Two numeric columns that are near functions of each other in the data (|rank
    correlation| at least :data:`STRONG_DEPENDENCE`) are much less so in the fitted
    population (:data:`DEPENDENCE_LOSS`): a
    Bayesian network holds a child's dependence on a numeric parent through a few cells of
    the parent, so the population holds pairs of values the data never does, and an audit of
    a model reading both is a proof about those pairs (:func:`lost_dependences`)."""


Domain = tuple[float | None, float | None]
DROPPED = "(dropped)"
FEW_CATEGORIES = 20
STRONG_DEPENDENCE = 0.9
DEPENDENCE_LOSS = (4.0, 0.02)
"""A dependence is lost when ``1 - |rank correlation|`` in the population is at least 4 times
the data's (ranks displaced twice as far: ``1 - rho`` grows with the squared rank
differences) and at least 0.02 more (beyond the sampling error of the draws)."""
DEPENDENCE_DRAWS = 20_000


def is_string_column(series: pd.Series) -> bool:
    """Whether ``series`` holds raw strings (object, string or category dtype)."""
    import pandas as pd

    return (pd.api.types.is_object_dtype(series) or pd.api.types.is_string_dtype(series)
            or isinstance(series.dtype, pd.CategoricalDtype))


MISSING_WORDS = "certgate.missing_words"
"""``DataFrame.attrs`` key of the cells a CSV reader read as missing from a word (``NA``,
``None``, ``null``, …): ``{column: {word: rows}}``
(:func:`pipeline_steps.fidelity_data.read_table`)."""


def _read_from_words(words: dict[str, int]) -> str:
    """What a missing-values message adds when the CSV's cells held words that pandas reads
    as missing (``NA``, ``None``, ``null``, …): a category spelled so is not a missing value
    to fill but a category to rename."""
    if not words:
        return ""
    listed = ", ".join(f"{word!r} in {rows}" for word, rows in words.items())
    return (f", read from the text {listed} (pandas reads NA, N/A, NULL, None, nan and the "
            "like as missing: if it names a category, rename it in the data, e.g. 'NA' to "
            "'N.A.')")


def missing_values_text(frame: pd.DataFrame, column: object) -> str:
    """``column 'C': missing values in N of M rows`` and, where the CSV's cells held words
    that pandas reads as missing (:data:`MISSING_WORDS`), which words in how many rows and
    how to keep such a category (:func:`_read_from_words`)."""
    words = frame.attrs.get(MISSING_WORDS, {})
    return (f"column {column!r}: missing values in {int(frame[column].isna().sum())} of "
            f"{len(frame)} rows{_read_from_words(words.get(str(column), {}))}")


def encode_strings(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """``frame`` with every raw string column one-hot encoded in place (step 1 of the module
    docstring), and each encoded column's categories. A table the fit cannot read is refused
    in one error naming every column at fault: missing values (string or numeric, with
    counts), string columns that are no categories (:func:`_non_category_reason`) and string
    columns with a single value, so a user fixes them all in one pass."""
    import numpy as np
    import pandas as pd

    blank = [missing_values_text(frame, column)
             for column in frame.columns if frame[column].isna().any()]
    problems = ["; ".join(blank) + " (fill or drop them first)"] if blank else []
    parts: list[pd.DataFrame] = []
    categories: dict[str, list[str]] = {}
    for column in frame.columns:
        series = frame[column]
        if not is_string_column(series):
            parts.append(frame[[column]])
            continue
        text = series.dropna().astype(str)
        values = sorted(text.unique())
        reason = _non_category_reason(str(column), text, values)
        if reason is None and len(values) < 2:
            reason = (f"column {column!r}: a string column needs at least 2 distinct values "
                      f"to be a categorical feature, got {values}")
        if reason is not None:
            problems.append(reason)
            continue
        categories[str(column)] = values
        codes = pd.Categorical(series.astype(str), categories=values).codes
        onehot = (codes[:, None] == np.arange(len(values))).astype(np.int64)
        parts.append(pd.DataFrame(onehot, columns=[f"{column}={value}" for value in values],
                                  index=frame.index))
    if problems:
        raise PopulationError("; ".join(problems))
    encoded = pd.concat(parts, axis=1) if parts else frame
    duplicated = sorted({c for c in encoded.columns if list(encoded.columns).count(c) > 1})
    if duplicated:
        raise PopulationError(f"one-hot encoding produced columns that already exist: "
                              f"{duplicated}")
    return encoded, categories


def dummies_hint(names: Sequence[str], frame: pd.DataFrame) -> str:
    """For inputs ``names`` a table lacks: when some are ``COL_VALUE``, ``pandas.get_dummies``'
    name for a value of the raw string column ``COL`` of ``frame``, a sentence saying that the
    table must be encoded as the model was trained (this module encodes ``COL`` as
    ``COL=VALUE``); else ``""``."""
    strings = {str(column): set(frame[column].dropna().astype(str))
               for column in frame.columns if is_string_column(frame[column])}
    columns = sorted({column for name in names for column, values in strings.items()
                      if name.startswith(f"{column}_") and name[len(column) + 1:] in values})
    if not columns:
        return ""
    listed = ", ".join(repr(column) for column in columns)
    return (f"; the model's inputs name values of the string column(s) {listed} as "
            "pandas.get_dummies does (COL_VALUE), while a raw string column is encoded as "
            "COL=VALUE: give the table encoded as the model was trained (the same "
            "get_dummies call, drop_first included)")


def _non_category_reason(column: str, text: pd.Series, values: list[str]) -> str | None:
    """Why a string column is no categorical feature, or ``None`` when it is one. It is none
    when it holds a different value in every row (an identifier), or more than
    :data:`FEW_CATEGORIES` distinct values that all read as dates or times (with digits: month
    names such as ``Jan`` are categories) or as numbers once currency signs, thousands
    separators and a percent sign are removed (an amount saved as ``$1,234.50``). One-hot
    encoded, each is a group of hundreds of columns that no model reads as it was meant."""
    import pandas as pd

    if len(values) <= FEW_CATEGORIES:
        return None
    fix = ("drop it from the table, or fit only the columns the model reads (--model NET; "
           "certgate.fit_population on those columns)")
    if len(values) == len(text):
        return (
            f"column {column!r} holds a different value in every row ({len(values)}, e.g. "
            f"{values[0]!r}), like an identifier: it is no category a model reads; {fix}")
    stripped = pd.Series(values).str.replace(r"[\s$€£¥,%]", "", regex=True)
    if pd.to_numeric(stripped, errors="coerce").notna().all():
        return (
            f"column {column!r} holds numbers written as text ({len(values)} distinct, e.g. "
            f"{values[0]!r}): one-hot encoded they are {len(values)} categories; convert it "
            "to numbers first (pandas.to_numeric after removing the currency sign and the "
            f"thousands separators), or {fix}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dates = pd.to_datetime(pd.Series(values), errors="coerce", format="mixed")
    if dates.notna().all() and all(any(c.isdigit() for c in value) for value in values):
        return (
            f"column {column!r} holds dates or times ({len(values)} distinct, e.g. "
            f"{values[0]!r}): one-hot encoded they are {len(values)} categories; {fix}, or "
            "give the model numbers derived from them (a year, a day count) as columns")
    return None


def identifier_columns(features: Sequence[Feature], frame: pd.DataFrame) -> list[str]:
    """One message per integer feature (not coded) whose column of ``frame`` holds a
    different value in every row of more than :data:`FEW_CATEGORIES`: an identifier, which
    the population spreads over its whole range."""
    messages = []
    for feature in features:
        if feature.kind != "integer" or feature.step is not None \
                or feature.name not in frame.columns or len(frame) <= FEW_CATEGORIES:
            continue
        if frame[feature.name].nunique() == len(frame):
            messages.append(
                f"column {feature.name!r} holds a different integer in every row, like an "
                "identifier; the population spreads it over its whole range: if the model "
                "does not read it, drop it or fit only the model's columns (--model NET)")
    return messages


MIN_ROWS = 2
"""The fewest rows a population model is fitted on (one row has no spread to fit)."""


def require_rows(rows: int) -> None:
    """Raise :class:`PopulationError` unless a table of ``rows`` rows can be fitted."""
    if rows < MIN_ROWS:
        raise PopulationError(f"the table has {rows} row{'' if rows == 1 else 's'}; a "
                              f"population model is fitted on at least {MIN_ROWS}")


def data_source(path: str | Path, rows: int) -> DataSource:
    """What a population fitted from the table file ``path`` records as ``fitted_from``: the
    path as given, the sha256 of the file's bytes and the number of rows the fit used."""
    from verifier.population.model import DataSource

    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return DataSource(uri=str(path), sha256=digest.hexdigest(), rows=rows)


def detect_groups(frame: pd.DataFrame, taken: set[str]) -> dict[str, list[str]]:
    """Step 3: columns ``NAME=VALUE`` of ``frame`` not in ``taken``, grouped by ``NAME``
    (groups of at least two columns, in column order); 0/1 columns written with
    ``drop_first`` (at most one 1 in every row) are led by ``NAME=(dropped)``
    (:func:`with_dropped_group`)."""
    import pandas as pd

    groups: dict[str, list[str]] = {}
    for column in map(str, frame.columns):
        if column in taken or "=" not in column:
            continue
        name = column.split("=", 1)[0]
        groups.setdefault(name, []).append(column)
    found = {}
    for name, members in groups.items():
        if len(members) < 2:
            continue
        numeric = all(pd.api.types.is_bool_dtype(frame[c]) or pd.api.types.is_numeric_dtype(
            frame[c]) for c in members) and frame[members].isin([0, 1]).all().all()
        found[name] = (with_dropped_group(frame, name, members, "=") if numeric else None) \
            or members
    return found


def dropped_column(prefix: str, separator: str = "_") -> str:
    """The column the dummies of ``prefix`` written with ``drop_first`` get for the dropped
    category (``PREFIX_(dropped)``, or ``NAME=(dropped)`` for ``NAME=VALUE`` columns): 1
    exactly where every listed dummy is 0."""
    return f"{prefix}{separator}{DROPPED}"


def with_dropped_group(frame: pd.DataFrame, prefix: str, columns: list[str],
                       separator: str = "_") -> list[str] | None:
    """``columns`` (0/1, named ``prefix`` + ``separator`` + value) as a one-hot group: as they
    are when every row holds exactly one 1; led by :func:`dropped_column` when every row
    holds at most one 1 and some none (dummies written with ``drop_first``); None when some
    row holds two."""
    import numpy as np

    ones = frame[columns].to_numpy(dtype=np.int64).sum(axis=1)
    if (ones == 1).all():
        return columns
    name = dropped_column(prefix, separator)
    if (ones <= 1).all() and name not in frame.columns:
        return [name, *columns]
    return None


def detect_dummies(frame: pd.DataFrame, taken: set[str]) -> dict[str, list[str]]:
    """Step 4: 0/1 columns named ``PREFIX_VALUE`` (``pandas.get_dummies``' default names), not
    in ``taken``, that share a ``PREFIX`` (at least two columns, in column order) and hold at
    most one 1 in every row, grouped by that prefix. When some row holds none (the category
    ``drop_first`` dropped), the group starts with :func:`dropped_column`, which
    :func:`with_dropped_columns` adds to the table. The data puts no row on two of them, so a
    categorical feature is what it shows; fitted as separate binary columns, a network with
    a few parents per node spreads mass there. Where several prefixes of a name give a group,
    the longest names it (``marital_status`` rather than ``marital``); a prefix that is
    already a column or a group's name is not used."""
    import pandas as pd

    names = [str(column) for column in frame.columns]
    binary = [name for name in names if name not in taken
              and (pd.api.types.is_bool_dtype(frame[name])
                   or pd.api.types.is_numeric_dtype(frame[name]))
              and frame[name].isin([0, 1]).all()]
    members: dict[str, list[str]] = {}
    for name in binary:
        for cut, char in enumerate(name):
            if char == "_" and 0 < cut < len(name) - 1:
                members.setdefault(name[:cut], []).append(name)
    groups: dict[str, list[str]] = {}
    used: set[str] = set()
    for prefix in sorted(members, key=len, reverse=True):
        columns = members[prefix]
        if len(columns) < 2 or prefix in names or used & set(columns):
            continue
        group = with_dropped_group(frame, prefix, columns)
        if group is None:
            continue
        groups[prefix] = group
        used.update(columns)
    return {prefix: groups[prefix] for prefix in sorted(groups, key=lambda p: names.index(
        members[p][0]))}


def with_dropped_columns(frame: pd.DataFrame, groups: Mapping[str, Sequence[str]]
                         ) -> pd.DataFrame:
    """``frame`` with every group's :func:`dropped_column` that it lacks inserted before the
    group's first listed column: 1 where the group's other columns are all 0, else 0."""
    frame = frame.copy()
    for columns in groups.values():
        name = columns[0]
        if name.endswith(DROPPED) and name not in frame.columns:
            listed = [column for column in columns if column != name]
            ones = frame[listed].to_numpy(dtype="int64").sum(axis=1)
            frame.insert(list(frame.columns).index(listed[0]), name, (ones == 0).astype("int64"))
    return frame


def fit_population(
    frame: pd.DataFrame,
    *,
    categorical: Mapping[str, Sequence[str]] | None = None,
    domains: Mapping[str, Domain] | None = None,
    continuous: ContinuousMethod = "histogram",
    structure: Structure = "learned",
    protected: str | None = None,
    parents: Mapping[str, Sequence[str]] | None = None,
    bins: Mapping[str, Sequence[float]] | None = None,
    n_components: int = 3,
    min_leaf: int = 50,
    min_rows: int = 1,
    max_discrete_values: int = 20,
    seed: int = 0,
    name: str | None = None,
    description: str | None = None,
    source: DataSource | None = None,
) -> PopulationModel:
    """A population model of ``frame`` (columns and defaults as in the module docstring): a
    Bayesian network with the given ``parents`` (feature name → parent feature names;
    continuous and many-valued integer parents need ``bins``) or, without them, with a
    structure learned from the data (``structure="learned"``, the protected feature
    ``protected`` a parent of every other feature), else (``structure="independent"``) an
    independent product. ``continuous`` fits the marginals. ``domains`` bounds numeric
    features (``None`` = unbounded side). ``source`` is recorded as the model's
    ``fitted_from``. Raises :class:`PopulationError` naming the column, feature or option on
    bad input; warns a :class:`FewValuedDensityWarning` per few-valued column it fits as a
    density (no exact grid)."""
    from verifier.population.fitting import (
        ATOM_SHARE,
        coded_frame,
        fit_bayesian_network,
        fit_product,
        infer_features,
    )

    if continuous not in CONTINUOUS_METHODS:
        raise PopulationError(f"continuous must be one of {list(CONTINUOUS_METHODS)}, "
                              f"got {continuous!r}")
    if structure not in ("learned", "independent"):
        raise PopulationError(f"structure must be 'learned' or 'independent', got {structure!r}")
    if parents and structure == "independent":
        raise PopulationError("parents give a Bayesian network; an independent product has "
                              "none (drop one of the two)")
    network = bool(parents) or structure == "learned"
    if network and continuous in PRODUCT_ONLY:
        raise PopulationError(f"continuous={continuous!r} applies to the independent product "
                              "only: ask for it (structure='independent', --independent) or "
                              "fit the network's nodes as histograms or normals")
    if protected is not None and not network:
        raise PopulationError("protected makes the protected attribute every feature's parent "
                              "in a learned network; the independent product has no parents")
    require_rows(len(frame))
    encoded, string_categories = encode_strings(frame)
    groups = {key: list(columns) for key, columns in (categorical or {}).items()}
    groups.update({column: [f"{column}={value}" for value in values]
                   for column, values in string_categories.items()})
    taken = {column for columns in groups.values() for column in columns}
    detected = detect_groups(encoded, taken)
    clash = sorted(set(detected) & set(groups))
    if clash:
        raise PopulationError(f"one-hot groups {clash} are both given and detected from "
                              "NAME=VALUE columns; name the group's columns in one place")
    groups.update(detected)
    dummies = detect_dummies(encoded, {c for columns in groups.values() for c in columns})
    dummies = {prefix: columns for prefix, columns in dummies.items() if prefix not in groups}
    groups.update(dummies)
    encoded = with_dropped_columns(encoded, {**detected, **dummies})
    domains = dict(domains or {})
    features = infer_features(encoded, groups, domains, max_discrete_values)
    numeric = {f.name for f in features if f.kind != "categorical"}
    unknown = sorted(set(domains) - numeric)
    if unknown:
        raise PopulationError(f"domain given for {unknown}, which are not numeric columns "
                              f"(numeric columns: {sorted(numeric)})")
    features = [_with_categories(feature, groups, string_categories) for feature in features]
    atom_share = ATOM_SHARE if continuous == "histogram" else None
    for text in few_valued_densities(features, encoded, max_discrete_values, atom_share):
        warnings.warn(FewValuedDensityWarning(text), stacklevel=2)
    for text in identifier_columns(features, encoded):
        warnings.warn(PopulationFitWarning(text), stacklevel=2)
    encoded = coded_frame(encoded, features)
    if continuous != "normal":
        features = [_on_data_range(feature, encoded) for feature in features]
    if bins and not parents:
        raise PopulationError("bins cut a Bayesian network's parents; give parents too")
    notes = []
    if parents:
        model = fit_bayesian_network(
            encoded, features, {k: list(v) for k, v in parents.items()},
            {k: code_cuts(features, k, v) for k, v in (bins or {}).items()},
            min_rows=min_rows, max_discrete_values=max_discrete_values, continuous=continuous,
            sparse_cells="own")
    elif structure == "learned":
        from verifier.population.structure import learn_structure

        learned = learn_structure(encoded, features, protected)
        model = fit_bayesian_network(encoded, features, learned.parents, learned.bins,
                                     min_rows=min_rows, max_discrete_values=max_discrete_values,
                                     continuous=continuous, sparse_cells="own")
        notes.append(learned_note(learned, len(encoded)))
    else:
        model = fit_product(encoded, features, continuous, n_components=n_components,
                            min_leaf=min_leaf, max_discrete_values=max_discrete_values,
                            seed=seed)
        notes.append("Independent product: every column independent of the others.")
    text = "\n".join([*([description] if description else []), *notes]) or None
    model = model.model_copy(update={"name": name, "description": text, "fitted_from": source})
    for text in lost_dependences(model, encoded, seed):
        warnings.warn(LostDependenceWarning(text), stacklevel=2)
    return model


def lost_dependences(model: PopulationModel, frame: pd.DataFrame, seed: int = 0) -> list[str]:
    """One message per pair of integer or continuous columns whose Spearman rank correlation
    is at least :data:`STRONG_DEPENDENCE` in absolute value in ``frame`` (the rows the model
    was fitted on) and is lost (:data:`DEPENDENCE_LOSS`) in :data:`DEPENDENCE_DRAWS` draws of
    ``model`` (seeded by ``seed``): a dependence the data
    holds and the population does not (:class:`LostDependenceWarning`). Rank correlations
    are the same on values and on a coded column's codes."""
    import numpy as np
    import pandas as pd

    numeric = [feature.name for feature in model.features
               if feature.kind in ("integer", "continuous") and feature.name in frame.columns]
    if len(numeric) < 2:
        return []
    data = frame[numeric].astype(np.float64).corr(method="spearman").to_numpy()
    strong = np.abs(data) >= STRONG_DEPENDENCE
    np.fill_diagonal(strong, False)
    if not strong.any():
        return []
    columns = list(model.columns)
    drawn = model.sample(DEPENDENCE_DRAWS, np.random.default_rng(seed))
    fitted = pd.DataFrame(drawn[:, [columns.index(name) for name in numeric]]).corr(
        method="spearman").to_numpy()
    messages = []
    for first, second in zip(*np.nonzero(np.triu(strong)), strict=True):
        held, kept = float(data[first, second]), float(fitted[first, second])
        factor, floor = DEPENDENCE_LOSS
        if 1 - abs(kept) >= max(factor * (1 - abs(held)), 1 - abs(held) + floor):
            messages.append(
                f"columns {numeric[first]!r} and {numeric[second]!r} have a rank correlation "
                f"of {held:.3f} in the data but {kept:.3f} in the fitted population: it holds "
                "pairs of their values the data never does (a Bayesian network keeps a "
                "dependence on a numeric parent only through a few cells of it), so an audit "
                "of a model that reads both is a proof about those pairs; give the model one "
                "of the two, or a function of both as one column")
    return messages


def few_valued_densities(features: Sequence[Feature], frame: pd.DataFrame,
                         max_discrete_values: int, atom_share: float | None = None
                         ) -> list[str]:
    """One message per continuous feature whose column of ``frame`` holds at most
    ``max_discrete_values`` distinct values of which some get no mass of their own
    (:class:`FewValuedDensityWarning`): the fit found no exact grid for them (decimal steps
    such as tenths are none in binary floats), so the population spreads their mass over a
    density. ``atom_share``: the share of the rows from which the fit keeps a value as an
    atom (the histogram fit's ``ATOM_SHARE``; None for fits that keep none); a column whose
    every value holds that share keeps all its values and gets no message."""
    messages = []
    for feature in features:
        if feature.kind != "continuous" or feature.name not in frame.columns:
            continue
        shares = frame[feature.name].value_counts(normalize=True)
        if shares.size > max_discrete_values:
            continue
        kept = 0 if atom_share is None else int((shares >= atom_share).sum())
        if kept == shares.size:
            continue
        fate = ("its values get no probability mass of their own" if kept == 0 else
                f"the {shares.size - kept} of its values holding less than "
                f"{atom_share:.0%} of the rows get no probability mass of their own (the "
                f"other {kept} are kept as atoms)")
        messages.append(
            f"column {feature.name!r} holds only {shares.size} distinct values, but they lie "
            "on no exact binary-float grid (tenths, for instance, do not), so it is fitted "
            f"as a continuous density and {fate}; if the model only ever reads these values, "
            "scale the column to integers in the data and the model (e.g. tenths × 10), then "
            "fit again")
    return messages


def code_cuts(features: Sequence[Feature], name: str, cuts: Sequence[float]) -> list[float]:
    """``--bins`` cut points of feature ``name`` as the fit reads them: in the data's units,
    turned into codes for a coded integer feature (a cell ``value <= b`` is ``k <= floor((b −
    offset) / step)``, exactly)."""
    feature = next((f for f in features if f.name == name), None)
    if feature is None or not feature.coded:
        return [float(b) for b in cuts]
    step, offset = feature.code()
    return [float(math.floor((Fraction(b) - Fraction(offset)) / Fraction(step))) for b in cuts]


def learned_note(learned: LearnedStructure, rows: int) -> str:
    """The description line of a learned structure: how it was learned and its edges."""
    protected = (f"; protected attribute {learned.protected!r} is every feature's parent"
                 if learned.protected else "")
    return (f"Bayesian network, structure learned from {rows} rows by hill climbing on the BIC "
            f"score (pgmpy) and moves adding two parents at once{protected}. Edges: "
            f"{learned.edge_text()}.")


def _on_data_range(feature: Feature, frame: pd.DataFrame) -> Feature:
    """``feature`` with the data's range as its domain when it is integer or continuous and
    has no domain (a given domain is kept)."""
    if feature.kind not in ("integer", "continuous") or feature.domain is not None:
        return feature
    values = frame[feature.name]
    return feature.model_copy(update={"domain": (float(values.min()), float(values.max()))})


def _with_categories(feature: Feature, groups: Mapping[str, list[str]],
                     string_categories: Mapping[str, list[str]]) -> Feature:
    """``feature`` with category names: the string values of an encoded column, the
    ``VALUE`` parts of ``NAME=VALUE`` and ``NAME_VALUE`` columns."""
    if feature.kind != "categorical" or feature.categories is not None:
        return feature
    if feature.name in string_categories:
        names = string_categories[feature.name]
    else:
        names = [column[len(feature.name) + 1:]
                 if column.startswith((f"{feature.name}=", f"{feature.name}_")) else column
                 for column in groups[feature.name]]
    if len(set(names)) != len(names):
        return feature
    return feature.model_copy(update={"categories": names})
