"""Independent products: each factor is a distribution placed on named columns.

A product's columns are the concatenation of its factors' ``columns``. A factor may be any
distribution kind: a 1-D marginal on one column, a categorical on the columns of a one-hot
group, or a multi-column distribution (whose own column names, if it has any, must equal the
factor's ``columns``). The box probability is the product of the factors' box probabilities.
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal

import numpy as np
from pydantic import model_validator

from verifier.population.base import Distribution, NestedDistribution, PopulationBase, indent
from verifier.population.rounding import Enclosure, product


class Factor(PopulationBase):
    """One independent factor: ``distribution`` on the named ``columns``."""

    columns: list[str]
    distribution: NestedDistribution

    @model_validator(mode="after")
    def _check_columns(self) -> Factor:
        if not self.columns:
            raise ValueError("a factor needs at least one column")
        if len(set(self.columns)) != len(self.columns):
            raise ValueError(f"factor columns repeat a name: {self.columns}")
        dimension = self.distribution.dimension
        if dimension != len(self.columns):
            raise ValueError(
                f"factor on columns {self.columns} has a {self.distribution.kind} distribution "
                f"of dimension {dimension}"
            )
        names = self.distribution.column_names()
        if names is not None and list(names) != self.columns:
            raise ValueError(
                f"factor columns {self.columns} differ from the columns of its "
                f"{self.distribution.kind} distribution {list(names)}"
            )
        return self


class Product(Distribution):
    """Independent product of ``factors`` (columns: the factors' columns in order)."""

    kind: Literal["product"] = "product"
    factors: list[Factor]

    @model_validator(mode="after")
    def _check_factors(self) -> Product:
        if not self.factors:
            raise ValueError("a product needs at least one factor")
        names = [name for factor in self.factors for name in factor.columns]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"columns {repeated} appear in more than one factor")
        return self

    @cached_property
    def _offsets(self) -> np.ndarray:
        sizes = [len(factor.columns) for factor in self.factors]
        return np.concatenate([[0], np.cumsum(sizes)]).astype(int)

    @property
    def dimension(self) -> int:
        return int(self._offsets[-1])

    def column_names(self) -> tuple[str, ...]:
        return tuple(name for factor in self.factors for name in factor.columns)

    def _slices(self) -> list[slice]:
        offsets = self._offsets
        return [slice(offsets[i], offsets[i + 1]) for i in range(len(self.factors))]

    def enclosure(self, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
        parts = [
            factor.distribution.enclosure(lo[:, part], hi[:, part])
            for factor, part in zip(self.factors, self._slices(), strict=True)
        ]
        return product(parts)

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.concatenate(
            [factor.distribution.draw(n, rng) for factor in self.factors], axis=1
        ).reshape(n, self.dimension)

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        bounds = [factor.distribution.support() for factor in self.factors]
        return (
            np.concatenate([low for low, _ in bounds]),
            np.concatenate([high for _, high in bounds]),
        )

    def atomless_columns(self) -> np.ndarray:
        return np.concatenate([f.distribution.atomless_columns() for f in self.factors])

    def integer_columns(self) -> np.ndarray:
        return np.concatenate([f.distribution.integer_columns() for f in self.factors])

    def column_atoms(self) -> list[np.ndarray | None]:
        return [atoms for f in self.factors for atoms in f.distribution.column_atoms()]

    def column_point_masses(self) -> list[np.ndarray | None]:
        return [points for f in self.factors for points in f.distribution.column_point_masses()]

    def onehot_groups(self) -> list[tuple[int, ...]]:
        groups = []
        for factor, offset in zip(self.factors, self._offsets, strict=False):
            for group in factor.distribution.onehot_groups():
                groups.append(tuple(int(offset) + index for index in group))
        return groups

    def renormalised(self) -> list[str]:
        return [f"factor {', '.join(factor.columns)}: {line}" for factor in self.factors
                for line in factor.distribution.renormalised()]

    def describe_lines(self) -> list[str]:
        lines = [f"independent product of {len(self.factors)} factors:"]
        for factor in self.factors:
            inner = factor.distribution.describe_lines()
            target = ", ".join(factor.columns)
            if len(inner) == 1:
                lines.append(f"  {target} ~ {inner[0]}")
            else:
                lines.append(f"  {target} ~")
                lines.extend(indent(inner, "    "))
        return lines
