"""The population-model document: a feature schema and a distribution over its columns.

JSON form::

    {"format": "certgate.population/v1",
     "features": [{"name": "age", "kind": "continuous", "domain": [0, 125]}, ...],
     "column_order": [...],            # optional, default: the features' columns in order
     "distribution": {"kind": "product", ...},
     "fitted_from": {"uri": "data.csv", "sha256": "...", "rows": 30162}}   # optional

The distribution's columns are matched to the model's columns by name (an anonymous
distribution, e.g. one marginal or an unnamed piecewise density, by position). Validation
checks, besides every distribution's own rules:

* the distribution covers exactly the model's columns;
* (a continuous feature's column may hold point masses, e.g. the atoms a fitted histogram
  keeps; engines read ``atomless_columns()`` to know whether a split face may carry mass);
* integer, binary and categorical columns put all their mass on integers;
* a categorical feature's columns form one one-hot group of the distribution;
* the support of every column lies inside its feature's domain.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cached_property
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from verifier.numerics import grid_values
from verifier.population.base import PopulationBase, as_boxes, as_generator
from verifier.population.errors import PopulationError, PopulationMismatchError
from verifier.population.schema import Feature, FeatureSchema, code_text
from verifier.population.union import AnyDistribution

FORMAT = "certgate.population/v1"


class DataSource(PopulationBase):
    """The table a population was fitted from: where it was read (a path or URI), the
    sha256 of its bytes, and how many rows the fit used. An audit with this table at hand
    can check the population's premise against it."""

    uri: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    rows: int = Field(ge=1)


class PopulationModel(PopulationBase):
    """A probability distribution over a network's input vector, with its feature schema."""

    format: Literal["certgate.population/v1"] = FORMAT
    name: str | None = None
    description: str | None = None
    features: list[Feature]
    column_order: list[str] | None = None
    distribution: AnyDistribution
    fitted_from: DataSource | None = None

    @model_validator(mode="after")
    def _check_model(self) -> PopulationModel:
        schema = self.feature_schema
        distribution = self.distribution
        if distribution.dimension != schema.dimension:
            raise ValueError(
                f"the distribution has {distribution.dimension} columns, the features "
                f"{schema.dimension} ({', '.join(schema.columns)})"
            )
        names = distribution.column_names()
        if names is not None and sorted(names) != sorted(schema.columns):
            missing = sorted(set(schema.columns) - set(names))
            extra = sorted(set(names) - set(schema.columns))
            raise ValueError(
                f"the distribution's columns do not match the features: feature columns the "
                f"distribution lacks {missing}, distribution columns no feature has {extra}"
            )
        integer = self._to_model_order(distribution.integer_columns())
        low, high = (self._to_model_order(end) for end in distribution.support())
        domain_low, domain_high = schema.domain_box()
        groups = {
            frozenset(int(self._order[i]) for i in group)
            for group in distribution.onehot_groups()
        }
        for index, column in enumerate(schema.columns):
            feature = schema.feature_of(column)
            where = f"feature {feature.name!r} (column {column!r})"
            if feature.kind != "continuous" and not integer[index]:
                raise ValueError(
                    f"{where} is {feature.kind} but its distribution is not integer-valued"
                )
            if low[index] < domain_low[index] or high[index] > domain_high[index]:
                raise ValueError(
                    f"{where}: the distribution's support [{low[index]:g}, {high[index]:g}] "
                    f"leaves the domain [{domain_low[index]:g}, {domain_high[index]:g}]"
                )
        for feature in schema.features:
            if feature.kind != "categorical":
                continue
            group = frozenset(schema.columns.index(name) for name in feature.column_names())
            if group not in groups:
                raise ValueError(
                    f"feature {feature.name!r} is categorical over columns "
                    f"{feature.column_names()}, but the distribution does not model them as one "
                    "one-hot categorical"
                )
        return self

    # ------------------------------------------------------------------ layout
    @cached_property
    def feature_schema(self) -> FeatureSchema:
        """The features and the column order, with column helpers."""
        return FeatureSchema(features=self.features, column_order=self.column_order)

    @cached_property
    def _order(self) -> np.ndarray:
        """Model column of each local column of the distribution."""
        names = self.distribution.column_names()
        columns = self.feature_schema.columns
        if names is None:
            return np.arange(len(columns))
        return np.array([columns.index(name) for name in names])

    def _to_model_order(self, local: np.ndarray) -> np.ndarray:
        placed = np.empty(len(local), dtype=np.asarray(local).dtype)
        placed[self._order] = local
        return placed

    @property
    def columns(self) -> tuple[str, ...]:
        """Input column names in input order."""
        return self.feature_schema.columns

    @property
    def dimension(self) -> int:
        return self.feature_schema.dimension

    def column_kinds(self) -> list[str]:
        """Feature kind of every input column."""
        return self.feature_schema.column_kinds()

    def onehot_groups(self) -> list[list[int]]:
        """Column indices of every one-hot group (categorical feature)."""
        return self.feature_schema.onehot_groups()

    def integer_columns(self) -> np.ndarray:
        """``(d,)`` bool: integer-valued columns (integer, binary, categorical features)."""
        return self.feature_schema.integer_columns()

    def column_atoms(self) -> list[np.ndarray | None]:
        """Per input column: a sorted array of the finitely many values that may carry mass
        (a superset), or None (see :meth:`Distribution.column_atoms`)."""
        return self._placed_lists(self.distribution.column_atoms())

    def column_point_masses(self) -> list[np.ndarray | None]:
        """Per input column: a sorted array of the values that may carry a point mass, or
        None (see :meth:`Distribution.column_point_masses`)."""
        return self._placed_lists(self.distribution.column_point_masses())

    def _placed_lists(self, local: list[np.ndarray | None]) -> list[np.ndarray | None]:
        placed: list[np.ndarray | None] = [None] * self.dimension
        for index, values in enumerate(local):
            placed[int(self._order[index])] = values
        return placed

    def atomless_columns(self) -> np.ndarray:
        """``(d,)`` bool: columns whose marginal has no point masses. A continuous feature's
        column may hold some (a fitted histogram keeps the data's common values as atoms,
        :func:`verifier.population.fitting.fit_continuous_histogram`): every engine reads
        this flag, never the feature kind, to decide whether a face may be shared."""
        return self._to_model_order(self.distribution.atomless_columns())

    def domain_box(self) -> tuple[np.ndarray, np.ndarray]:
        """The features' declared domain per column."""
        return self.feature_schema.domain_box()

    # ------------------------------------------------------------------ probabilities
    def prob_boxes(self, lo: Any, hi: Any) -> np.ndarray:
        """``(B,)`` float64: ``P(x ∈ [lo, hi])`` for closed boxes in input-column order.

        ``lo``/``hi``: ``(B, d)`` or ``(d,)``; ±inf allowed; ``lo > hi`` anywhere gives 0.
        """
        lo, hi, empty = as_boxes(lo, hi, self.dimension)
        order = self._order
        return self.distribution.enclosure(lo[:, order], hi[:, order]).zero_where(empty).value

    def prob_boxes_interval(self, lo: Any, hi: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)``: sound enclosures of the exact box probabilities (float
        rounding accounted for as in :mod:`verifier.population.rounding`). This has the
        signature of :data:`verifier.pv.domain.MassFunction`."""
        lo, hi, empty = as_boxes(lo, hi, self.dimension)
        order = self._order
        ends = getattr(self.distribution, "enclosure_ends", None)
        if ends is None:  # only the Bayesian network computes its ends alone
            result = self.distribution.enclosure(lo[:, order], hi[:, order]).zero_where(empty)
            return result.lower, result.upper
        lower, upper = ends(lo[:, order], hi[:, order])
        return np.where(empty, 0.0, lower), np.where(empty, 0.0, upper)

    def prob_excess_lower(self, lo: np.ndarray, hi: np.ndarray, coefficients: np.ndarray,
                          threshold: np.ndarray) -> np.ndarray:
        """``(B,)``: sound lower bounds of ``P(x ∈ [lo, hi] ∧ c·x − min_box(c·x) > τ)`` for
        closed boxes, coefficient rows ``c`` and thresholds ``τ`` in input-column order (the
        minimum over the box's intervals and, for a one-hot group, its allowed categories).
        Zero where the distribution offers no such bound (only Bayesian networks of listable
        nodes do; see :mod:`verifier.population.excess`): always sound."""
        lo, hi, empty = as_boxes(lo, hi, self.dimension)
        bound = getattr(self.distribution, "excess_lower", None)
        if bound is None:
            return np.zeros(lo.shape[0])
        order = self._order
        coefficients = np.asarray(coefficients, dtype=np.float64).reshape(lo.shape)
        result = bound(lo[:, order], hi[:, order], coefficients[:, order],
                       np.asarray(threshold, dtype=np.float64).reshape(-1))
        return np.where(empty, 0.0, result)

    def marginal_cdf(self, column: str | int, t: Any) -> np.ndarray:
        """``P(x_column <= t)`` for every ``t`` (array-like; returns the same shape)."""
        try:
            index = self.feature_schema.column_index(column)
        except ValueError as error:
            raise PopulationError(str(error)) from error
        points = np.asarray(t, dtype=np.float64)
        flat = points.reshape(-1)
        lo = np.full((flat.size, self.dimension), -np.inf)
        hi = np.full((flat.size, self.dimension), np.inf)
        hi[:, index] = flat
        return self.prob_boxes(lo, hi).reshape(points.shape)

    def sample(self, n: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """``(n, d)`` samples in input-column order, in the data's units (a coded integer
        feature's ``offset + step·k``; see :meth:`values_of`)."""
        return self.values_of(self.sample_codes(n, rng))

    def sample_codes(self, n: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """``(n, d)`` samples in input-column order, in the columns' codes (what the
        distribution describes and the engines read; the values themselves but for coded
        integer features). Draws the same values as :meth:`sample` from the same ``rng``."""
        if int(n) != n or n < 0:
            raise PopulationError(f"the number of samples must be a non-negative integer, got {n}")
        local = self.distribution.draw(int(n), as_generator(rng))
        samples = np.empty_like(local)
        samples[:, self._order] = local
        return samples

    def values_of(self, codes: Any) -> np.ndarray:
        """``(n, d)`` float64: the values ``offset + step·k`` of codes ``(n, d)`` in
        input-column order, each the float nearest to the real value
        (:func:`~verifier.numerics.grid_values`: exact for the codes of a fitted grid, whose
        values are ``offset + step·k`` exactly; columns without a code pass unchanged)."""
        points = np.array(codes, dtype=np.float64)
        if not self.feature_schema.coded:
            return points
        return grid_values(points, *self.feature_schema.column_codes())

    def codes_of(self, values: Any, where: str = "the data") -> np.ndarray:
        """``(n, d)`` float64: the codes ``k`` of values ``(n, d)`` in input-column order, the
        inverse of :meth:`values_of`, exact: every value of a coded column must be
        ``offset + step·k`` exactly for an integer ``k``, else :class:`PopulationError`
        names the feature, the value and its grid (``where`` names the values' origin)."""
        points = np.array(values, dtype=np.float64)
        if not self.feature_schema.coded:
            return points
        for index, column in enumerate(self.columns):
            feature = self.feature_schema.feature_of(column)
            if feature.coded:
                points[:, index] = grid_codes(points[:, index], feature, where)
        return points

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)``: the smallest box containing the support, in input-column order."""
        low, high = self.distribution.support()
        return self._to_model_order(low), self._to_model_order(high)

    @property
    def renormalised(self) -> list[str]:
        """Where the document's probabilities summed to 1 only within float32 precision and
        were renormalised by their sum (e.g. ``node 'age' row 3: probabilities summed to
        0.99999997, renormalised``); ``[]`` when none was."""
        return self.distribution.renormalised()

    def describe(self) -> str:
        """Readable multi-line description: features, then the distribution."""
        title = f"population model {self.name!r}" if self.name else "population model"
        lines = [f"{title}: {self.dimension} columns ({', '.join(self.columns)})"]
        if self.description:
            lines.append(self.description)
        lines.append("features:")
        lines.extend(f"  {feature.describe()}" for feature in self.features)
        lines.extend(self._coded_value_lines())
        lines.append("distribution:")
        lines.extend(f"  {line}" for line in self.distribution.describe_lines())
        for line in self.renormalised:
            lines.append(f"renormalised: {line}")
        if self.fitted_from is not None:
            source = self.fitted_from
            lines.append(f"fitted from: {source.uri} ({source.rows} rows, sha256 "
                         f"{source.sha256[:12]}…)")
        return "\n".join(lines)

    def _coded_value_lines(self) -> list[str]:
        """One line per coded feature whose values are finitely many: its values in the
        data's units beside their codes (the distribution below is written in codes)."""
        lines = []
        atoms = self.column_atoms()
        for feature in self.features:
            index = self.columns.index(feature.column_names()[0]) if feature.coded else -1
            if index < 0 or atoms[index] is None:
                continue
            codes = np.asarray(atoms[index], dtype=np.float64)
            step, offset = feature.code()
            values = ", ".join(f"{offset + step * code:g}" for code in codes)
            lines.append(f"  {feature.name} takes the values {values} (codes k = "
                         f"{', '.join(f'{code:g}' for code in codes)}; value = "
                         f"{code_text(step, offset)})")
        return lines

    def to_json(self) -> dict[str, Any]:
        """The JSON document (unset optional fields left out)."""
        return self.model_dump(mode="json", exclude_none=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PopulationModel:
        """Validate a JSON document (raises pydantic ValidationError naming the field)."""
        return cls.model_validate(data)


def grid_codes(values: np.ndarray, feature: Feature, where: str) -> np.ndarray:
    """The integer codes ``k`` (float64) of ``values`` of the coded ``feature``: every value
    must equal ``offset + step·k`` exactly in real arithmetic (checked in rationals, once per
    distinct value), else :class:`PopulationError` names the feature and the value."""
    step, offset = feature.code()
    codes = np.rint((values - offset) / step)
    distinct, first = np.unique(values, return_index=True)
    for value, code in zip(distinct.tolist(), codes[first].tolist(), strict=True):
        if not (math.isfinite(code)
                and Fraction(offset) + Fraction(step) * Fraction(code) == Fraction(value)):
            raise PopulationError(
                f"feature {feature.name!r}: {where} holds the value {value!r}, which is not "
                f"{code_text(step, offset)} for an integer k (the population's step and offset "
                "do not match the data; refit the population on it)")
    return codes


def check_matches_network(
    model: PopulationModel, input_size: int, input_names: list[str] | None = None
) -> None:
    """Raise :class:`PopulationMismatchError` unless the model's columns fit the network's
    inputs: the same count and, when ``input_names`` is given, the same names in order."""
    columns = list(model.columns)
    if len(columns) != input_size:
        raise PopulationMismatchError(
            f"the population model has {len(columns)} columns ({', '.join(columns)}) but the "
            f"network has {input_size} inputs"
        )
    if input_names is None:
        return
    names = list(input_names)
    if len(names) != input_size:
        raise PopulationMismatchError(
            f"{len(names)} input names given for a network with {input_size} inputs"
        )
    if names == columns:
        return
    position = next(i for i, (a, b) in enumerate(zip(columns, names, strict=True)) if a != b)
    if sorted(names) == sorted(columns):
        raise PopulationMismatchError(
            f"the population model and the network have the same columns in a different "
            f"order: input {position} is {columns[position]!r} in the population model and "
            f"{names[position]!r} in the network; set column_order in the population model"
        )
    missing = sorted(set(names) - set(columns))
    unknown = sorted(set(columns) - set(names))
    raise PopulationMismatchError(
        f"input {position} is {columns[position]!r} in the population model and "
        f"{names[position]!r} in the network (network inputs missing from the model: "
        f"{missing}; model columns unknown to the network: {unknown})"
    )
