"""The feature schema: what each input column of the network means.

A feature has a ``name``, a ``kind`` and the input ``columns`` it occupies:

* ``continuous`` — one real column; ``domain`` a closed interval (``null`` = unbounded side).
* ``integer`` — one column of integers; ``domain`` an integer range (``null`` = unbounded).
  With ``step`` (> 0) and/or ``offset`` the integers are *codes*: the column's value is
  ``offset + step·k`` for the integer ``k`` the distribution and the domain describe (a
  rating 0.5, 1.0, …, 3.0 is ``step: 0.5`` over ``k`` in 1..6). Without them ``step`` is 1
  and ``offset`` 0: the value is the integer itself, as in files written before the fields.
* ``binary`` — one column in {0, 1}; ``domain`` defaults to ``[0, 1]``.
* ``categorical`` — a one-hot group of ``k >= 2`` columns (exactly one is 1), with one
  category name per column (``categories``, default: the column names); no ``domain``.

The model's input columns are the features' columns in feature order, unless
``column_order`` gives another order (a permutation of the same names).
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Literal

import numpy as np
from pydantic import field_validator, model_validator

from verifier.population.base import Bound, PopulationBase, finite_or_none, lower_bound, upper_bound

FeatureKind = Literal["continuous", "integer", "binary", "categorical"]
FEATURE_KINDS: tuple[str, ...] = ("continuous", "integer", "binary", "categorical")


class Feature(PopulationBase):
    """One feature of the input (see the module docstring)."""

    name: str
    kind: FeatureKind
    domain: tuple[Bound, Bound] | None = None
    columns: list[str] | None = None
    categories: list[str] | None = None
    step: float | None = None
    offset: float | None = None
    description: str | None = None

    @field_validator("domain")
    @classmethod
    def _normalise_domain(cls, domain: tuple[Bound, Bound] | None) -> tuple[Bound, Bound] | None:
        if domain is None:
            return None
        return finite_or_none(domain[0]), finite_or_none(domain[1])

    @model_validator(mode="after")
    def _check_feature(self) -> Feature:
        where = f"feature {self.name!r}"
        if not self.name:
            raise ValueError("a feature needs a non-empty name")
        if self.kind == "categorical":
            if self.columns is None or len(self.columns) < 2:
                raise ValueError(f"{where}: a categorical feature needs at least 2 columns")
            if self.domain is not None:
                raise ValueError(f"{where}: a categorical feature has no domain (columns are 0/1)")
            if self.categories is not None and len(self.categories) != len(self.columns):
                raise ValueError(
                    f"{where}: {len(self.categories)} categories for {len(self.columns)} columns"
                )
        else:
            if self.columns is not None and len(self.columns) != 1:
                raise ValueError(f"{where}: a {self.kind} feature occupies exactly one column")
            if self.categories is not None:
                raise ValueError(f"{where}: only categorical features have categories")
        if len(set(self.column_names())) != len(self.column_names()) or "" in self.column_names():
            raise ValueError(f"{where}: column names must be distinct and non-empty")
        low, high = self.interval()
        if low > high:
            raise ValueError(f"{where}: empty domain [{low}, {high}]")
        if self.kind in ("integer", "binary") and not all(
            math.isinf(end) or float(end).is_integer() for end in (low, high)
        ):
            raise ValueError(
                f"{where}: an {self.kind} domain needs integer ends, got {self.domain}"
            )
        if self.kind == "binary" and not (low >= 0 and high <= 1):
            raise ValueError(f"{where}: a binary domain must lie in [0, 1], got {self.domain}")
        self._check_code(where)
        return self

    def _check_code(self, where: str) -> None:
        if self.step is None and self.offset is None:
            return
        if self.kind != "integer":
            raise ValueError(f"{where}: only an integer feature has a step and an offset "
                             f"(value = offset + step·k), not a {self.kind} one")
        if self.step is not None and not (math.isfinite(self.step) and self.step > 0):
            raise ValueError(f"{where}: step must be a finite number > 0, got {self.step}")
        if self.offset is not None and not math.isfinite(self.offset):
            raise ValueError(f"{where}: offset must be a finite number, got {self.offset}")

    @property
    def coded(self) -> bool:
        """Whether the column's value is ``offset + step·k`` with ``(step, offset)`` other
        than ``(1, 0)`` (module docstring)."""
        return self.code() != (1.0, 0.0)

    def code(self) -> tuple[float, float]:
        """``(step, offset)``: the column's value is ``offset + step·k`` for the integer
        ``k`` the distribution describes (``(1.0, 0.0)`` unless the feature says otherwise)."""
        return (1.0 if self.step is None else float(self.step),
                0.0 if self.offset is None else float(self.offset))

    def column_names(self) -> list[str]:
        """The input columns the feature occupies."""
        return list(self.columns) if self.columns is not None else [self.name]

    def category_names(self) -> list[str]:
        """Category names of a categorical feature (the column names by default)."""
        return list(self.categories) if self.categories is not None else self.column_names()

    def interval(self) -> tuple[float, float]:
        """The closed domain of each column as floats (±inf when unbounded)."""
        if self.kind == "categorical":
            return 0.0, 1.0
        if self.domain is None:
            return (0.0, 1.0) if self.kind == "binary" else (-math.inf, math.inf)
        return lower_bound(self.domain[0]), upper_bound(self.domain[1])

    def describe(self) -> str:
        low, high = self.interval()
        if self.kind == "categorical":
            detail = f"categories {', '.join(self.category_names())}"
        elif self.coded:
            step, offset = self.code()
            detail = (f"values {code_text(step, offset)} in [{offset + step * low:g}, "
                      f"{offset + step * high:g}] (codes k in [{low:g}, {high:g}])")
        else:
            detail = f"domain [{low:g}, {high:g}]"
        columns = ", ".join(self.column_names())
        return f"{self.name}: {self.kind}, {detail}, columns {columns}"


def code_text(step: float, offset: float) -> str:
    """``offset + step·k`` as text (``step·k`` when the offset is 0)."""
    return f"{step:g}·k" if offset == 0 else f"{offset:g} + {step:g}·k"


class FeatureSchema(PopulationBase):
    """The ordered features and the resulting input columns."""

    features: list[Feature]
    column_order: list[str] | None = None

    @model_validator(mode="after")
    def _check_schema(self) -> FeatureSchema:
        if not self.features:
            raise ValueError("a population model needs at least one feature")
        names = [feature.name for feature in self.features]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"feature names {repeated} are used twice")
        columns = [name for feature in self.features for name in feature.column_names()]
        repeated = sorted({name for name in columns if columns.count(name) > 1})
        if repeated:
            raise ValueError(f"columns {repeated} belong to more than one feature")
        if self.column_order is not None and sorted(self.column_order) != sorted(columns):
            missing = sorted(set(columns) - set(self.column_order))
            extra = sorted(set(self.column_order) - set(columns))
            raise ValueError(
                f"column_order must list every feature column once (missing {missing}, "
                f"unknown or repeated {extra or 'duplicates'})"
            )
        return self

    @cached_property
    def columns(self) -> tuple[str, ...]:
        """Input column names in input order."""
        if self.column_order is not None:
            return tuple(self.column_order)
        return tuple(name for feature in self.features for name in feature.column_names())

    @property
    def dimension(self) -> int:
        return len(self.columns)

    @cached_property
    def _feature_of_column(self) -> dict[str, Feature]:
        return {name: feature for feature in self.features for name in feature.column_names()}

    def feature_of(self, column: str) -> Feature:
        """The feature that occupies ``column``."""
        return self._feature_of_column[column]

    def column_index(self, column: str | int) -> int:
        """Index of a column given by name or index (errors name the column)."""
        if isinstance(column, int | np.integer):
            if not 0 <= column < self.dimension:
                raise ValueError(f"column index {column} outside 0..{self.dimension - 1}")
            return int(column)
        if column not in self.columns:
            raise ValueError(f"unknown column {column!r}; columns are {list(self.columns)}")
        return self.columns.index(column)

    def column_kinds(self) -> list[str]:
        """The feature kind of every input column, in input order."""
        return [self.feature_of(name).kind for name in self.columns]

    def onehot_groups(self) -> list[list[int]]:
        """Column indices of every categorical feature's one-hot group (category order)."""
        return [
            [self.columns.index(name) for name in feature.column_names()]
            for feature in self.features
            if feature.kind == "categorical"
        ]

    def integer_columns(self) -> np.ndarray:
        """``(d,)`` bool: columns whose values are integers (integer, binary, categorical)."""
        return np.array([kind != "continuous" for kind in self.column_kinds()])

    def domain_box(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)``, each ``(d,)``: the declared domain of every column (in codes)."""
        bounds = [self.feature_of(name).interval() for name in self.columns]
        return np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])

    def column_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(step, offset)``, each ``(d,)`` float64: every column's value is
        ``offset + step·code`` (step 1 and offset 0 except for coded integer features)."""
        codes = [self.feature_of(name).code() for name in self.columns]
        return (np.array([c[0] for c in codes], dtype=np.float64),
                np.array([c[1] for c in codes], dtype=np.float64))

    @property
    def coded(self) -> bool:
        """Whether some column's value is not its code (a feature with a step or offset)."""
        return any(feature.coded for feature in self.features)
