"""From a data table to a population model: what ``certgate population fit`` and
:func:`certgate.fit_population` do before the fitting of :mod:`verifier.population.fitting`.

Column handling, in this order:

1. **Raw string columns** (object, string or category dtype) are one-hot encoded in place: a
   column ``C`` with values ``v1 < v2 < …`` (sorted as strings) becomes the columns
   ``C=v1, C=v2, …`` (0/1 integers) at ``C``'s position, forming the categorical feature ``C``
   with categories ``[v1, v2, …]``. A missing value or a single distinct value is an error
   naming the column.
2. **Given one-hot groups** (``categorical``: feature name → its columns) are used as given.
3. **Detected one-hot groups**: the remaining columns named ``NAME=VALUE`` that share a
   ``NAME`` (at least two of them) form the categorical feature ``NAME`` with categories
   ``VALUE…`` in column order.
4. Every other column is binary (bool, or integers in {0, 1}), integer, or continuous
   (:func:`verifier.population.fitting.infer_features`).

The model's columns are the table's columns after step 1, in table order: a network trained
on the same encoded table binds to it by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from verifier.population.errors import PopulationError

if TYPE_CHECKING:
    import pandas as pd

    from verifier.population import PopulationModel
    from verifier.population.schema import Feature

ContinuousMethod = Literal["normal", "gaussian_mixture", "density_tree"]
CONTINUOUS_METHODS: tuple[str, ...] = ("normal", "gaussian_mixture", "density_tree")
Domain = tuple[float | None, float | None]


def is_string_column(series: pd.Series) -> bool:
    """Whether ``series`` holds raw strings (object, string or category dtype)."""
    import pandas as pd

    return (pd.api.types.is_object_dtype(series) or pd.api.types.is_string_dtype(series)
            or isinstance(series.dtype, pd.CategoricalDtype))


def encode_strings(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """``frame`` with every raw string column one-hot encoded in place (step 1 of the module
    docstring), and each encoded column's categories."""
    import pandas as pd

    parts: list[pd.DataFrame] = []
    categories: dict[str, list[str]] = {}
    for column in frame.columns:
        series = frame[column]
        if not is_string_column(series):
            parts.append(frame[[column]])
            continue
        if series.isna().any():
            raise PopulationError(f"column {column!r}: missing values (fill or drop them first)")
        text = series.astype(str)
        values = sorted(text.unique())
        if len(values) < 2:
            raise PopulationError(
                f"column {column!r}: a string column needs at least 2 distinct values to be a "
                f"categorical feature, got {values}")
        categories[str(column)] = values
        parts.append(pd.DataFrame({f"{column}={value}": (text == value).astype("int64")
                                   for value in values}, index=frame.index))
    encoded = pd.concat(parts, axis=1) if parts else frame
    duplicated = sorted({c for c in encoded.columns if list(encoded.columns).count(c) > 1})
    if duplicated:
        raise PopulationError(f"one-hot encoding produced columns that already exist: "
                              f"{duplicated}")
    return encoded, categories


def detect_groups(columns: Sequence[str], taken: set[str]) -> dict[str, list[str]]:
    """Step 3: columns ``NAME=VALUE`` not in ``taken``, grouped by ``NAME`` (groups of at
    least two columns, in column order)."""
    groups: dict[str, list[str]] = {}
    for column in columns:
        if column in taken or "=" not in column:
            continue
        name = column.split("=", 1)[0]
        groups.setdefault(name, []).append(column)
    return {name: members for name, members in groups.items() if len(members) >= 2}


def fit_population(
    frame: pd.DataFrame,
    *,
    categorical: Mapping[str, Sequence[str]] | None = None,
    domains: Mapping[str, Domain] | None = None,
    continuous: ContinuousMethod = "normal",
    parents: Mapping[str, Sequence[str]] | None = None,
    bins: Mapping[str, Sequence[float]] | None = None,
    n_components: int = 3,
    min_leaf: int = 50,
    min_rows: int = 30,
    max_discrete_values: int = 20,
    seed: int = 0,
    name: str | None = None,
    description: str | None = None,
) -> PopulationModel:
    """A population model of ``frame`` (columns as in the module docstring): a Bayesian
    network with ``parents`` (feature name → parent feature names; continuous and many-valued
    integer parents need ``bins``), else an independent product whose continuous features are
    fitted by ``continuous``. ``domains`` bounds numeric features (``None`` = unbounded side).
    Raises :class:`PopulationError` naming the column or feature on bad input."""
    from verifier.population.fitting import (
        fit_bayesian_network,
        fit_product,
        infer_features,
    )

    if continuous not in CONTINUOUS_METHODS:
        raise PopulationError(f"continuous must be one of {list(CONTINUOUS_METHODS)}, "
                              f"got {continuous!r}")
    if parents and continuous != "normal":
        raise PopulationError("a Bayesian network (parents) fits every continuous node as a "
                              f"(truncated) normal; continuous={continuous!r} applies to the "
                              "independent product only")
    encoded, string_categories = encode_strings(frame)
    groups = {key: list(columns) for key, columns in (categorical or {}).items()}
    groups.update({column: [f"{column}={value}" for value in values]
                   for column, values in string_categories.items()})
    taken = {column for columns in groups.values() for column in columns}
    detected = detect_groups([str(c) for c in encoded.columns], taken)
    clash = sorted(set(detected) & set(groups))
    if clash:
        raise PopulationError(f"one-hot groups {clash} are both given and detected from "
                              "NAME=VALUE columns; name the group's columns in one place")
    groups.update(detected)
    domains = dict(domains or {})
    features = infer_features(encoded, groups, domains)
    numeric = {f.name for f in features if f.kind != "categorical"}
    unknown = sorted(set(domains) - numeric)
    if unknown:
        raise PopulationError(f"domain given for {unknown}, which are not numeric columns "
                              f"(numeric columns: {sorted(numeric)})")
    features = [_with_categories(feature, groups, string_categories) for feature in features]
    if parents:
        model = fit_bayesian_network(
            encoded, features, {k: list(v) for k, v in parents.items()},
            {k: [float(b) for b in v] for k, v in (bins or {}).items()},
            min_rows=min_rows, max_discrete_values=max_discrete_values)
    else:
        if bins:
            raise PopulationError("bins cut a Bayesian network's parents; give parents too")
        model = fit_product(encoded, features, continuous, n_components=n_components,
                            min_leaf=min_leaf, max_discrete_values=max_discrete_values,
                            seed=seed)
    if name is not None or description is not None:
        model = model.model_copy(update={"name": name, "description": description})
    return model


def _with_categories(feature: Feature, groups: Mapping[str, list[str]],
                     string_categories: Mapping[str, list[str]]) -> Feature:
    """``feature`` with category names: the string values of an encoded column, the
    ``VALUE`` parts of ``NAME=VALUE`` columns."""
    if feature.kind != "categorical" or feature.categories is not None:
        return feature
    if feature.name in string_categories:
        names = string_categories[feature.name]
    else:
        names = [column.split("=", 1)[1] if column.startswith(f"{feature.name}=") else column
                 for column in groups[feature.name]]
    if len(set(names)) != len(names):
        return feature
    return feature.model_copy(update={"categories": names})
