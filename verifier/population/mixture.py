"""Finite mixtures ``Σ_k w_k P_k`` of distributions of any kind on the same coordinates.

Components are either all anonymous (placed by the context, equal dimensions) or all named
with the same set of column names; the mixture's column order is the first component's, and
the other components are matched by name. Weights must sum to 1 (±1e-9) and are normalised.
A 1-D mixture of 1-D components answers the value-space queries (it can be a marginal in a
product or a row of a Bayesian-network CPT).
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal

import numpy as np
from pydantic import model_validator

from verifier.population.base import Distribution, NestedDistribution, indent, union_atoms
from verifier.population.distributions import check_probabilities, renormalisation
from verifier.population.rounding import Enclosure, weighted_sum


class Mixture(Distribution):
    """Mixture with ``weights`` of ``components``."""

    kind: Literal["mixture"] = "mixture"
    weights: list[float]
    components: list[NestedDistribution]

    @model_validator(mode="after")
    def _check_components(self) -> Mixture:
        if not self.components:
            raise ValueError("a mixture needs at least one component")
        if len(self.weights) != len(self.components):
            raise ValueError(
                f"{len(self.weights)} weights for {len(self.components)} components"
            )
        check_probabilities(self.weights, "weights")
        dimensions = {component.dimension for component in self.components}
        if len(dimensions) != 1:
            raise ValueError(f"mixture components differ in dimension: {sorted(dimensions)}")
        names = [component.column_names() for component in self.components]
        if any(name is None for name in names) and any(name is not None for name in names):
            raise ValueError("mixture components must be all named or all anonymous")
        if names[0] is not None:
            for index, name in enumerate(names[1:], start=1):
                if sorted(name) != sorted(names[0]):
                    raise ValueError(
                        f"mixture component {index} has columns {list(name)}, component 0 has "
                        f"{list(names[0])}"
                    )
        return self

    @cached_property
    def normalised_weights(self) -> np.ndarray:
        """Weights divided by their sum, ``(K,)``."""
        return check_probabilities(self.weights, "weights")

    @cached_property
    def _orders(self) -> list[np.ndarray]:
        """Per component: the mixture column of each of its local columns."""
        reference = self.components[0].column_names()
        if reference is None:
            return [np.arange(self.dimension) for _ in self.components]
        position = {name: index for index, name in enumerate(reference)}
        return [
            np.array([position[name] for name in component.column_names()])
            for component in self.components
        ]

    @property
    def _active(self) -> list[int]:
        return [k for k, weight in enumerate(self.normalised_weights) if weight > 0]

    @property
    def dimension(self) -> int:
        return self.components[0].dimension

    def column_names(self) -> tuple[str, ...] | None:
        return self.components[0].column_names()

    def is_univariate(self) -> bool:
        return self.dimension == 1 and all(c.is_univariate() for c in self.components)

    def enclosure(self, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
        parts = [
            component.enclosure(lo[:, order], hi[:, order])
            for component, order in zip(self.components, self._orders, strict=True)
        ]
        return weighted_sum(self.normalised_weights, _stack(parts))

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        labels = rng.choice(len(self.components), size=n, p=self.normalised_weights)
        samples = np.empty((n, self.dimension))
        for k, (component, order) in enumerate(zip(self.components, self._orders, strict=True)):
            chosen = labels == k
            if chosen.any():
                samples[np.ix_(chosen, order)] = component.draw(int(chosen.sum()), rng)
        return samples

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        lows, highs = [], []
        for k in self._active:
            low, high = self.components[k].support()
            order = self._orders[k]
            placed_low, placed_high = np.empty(self.dimension), np.empty(self.dimension)
            placed_low[order], placed_high[order] = low, high
            lows.append(placed_low)
            highs.append(placed_high)
        return np.min(lows, axis=0), np.max(highs, axis=0)

    def _placed(self, k: int, values: np.ndarray) -> np.ndarray:
        placed = np.empty(self.dimension, dtype=values.dtype)
        placed[self._orders[k]] = values
        return placed

    def atomless_columns(self) -> np.ndarray:
        flags = [self._placed(k, self.components[k].atomless_columns()) for k in self._active]
        return np.all(flags, axis=0)

    def integer_columns(self) -> np.ndarray:
        flags = [self._placed(k, self.components[k].integer_columns()) for k in self._active]
        return np.all(flags, axis=0)

    @property
    def atomless(self) -> bool:
        """No point masses in any column (every active component atomless there), as a
        marginal's :attr:`~verifier.population.distributions.Marginal.atomless`."""
        return bool(self.atomless_columns().all())

    @property
    def integer_valued(self) -> bool:
        """All mass on integers in every column, as a marginal's
        :attr:`~verifier.population.distributions.Marginal.integer_valued`: a CPT row that
        mixes a point with a discrete table is then read as purely atomic, so an open gap
        between its values gets no upper mass from the atoms at its ends."""
        return bool(self.integer_columns().all())

    def column_atoms(self) -> list[np.ndarray | None]:
        return self._united("column_atoms")

    def column_point_masses(self) -> list[np.ndarray | None]:
        return self._united("column_point_masses")

    def _united(self, method: str) -> list[np.ndarray | None]:
        """Per column, the union of the active components' value sets ``method`` lists."""
        placed: list[list[np.ndarray | None]] = [[] for _ in range(self.dimension)]
        for k in self._active:
            for local, atoms in enumerate(getattr(self.components[k], method)()):
                placed[int(self._orders[k][local])].append(atoms)
        return [union_atoms(parts) for parts in placed]

    def onehot_groups(self) -> list[tuple[int, ...]]:
        common: set[frozenset[int]] | None = None
        for k in self._active:
            order = self._orders[k]
            groups = {
                frozenset(int(order[i]) for i in group)
                for group in self.components[k].onehot_groups()
            }
            common = groups if common is None else common & groups
        return [tuple(sorted(group)) for group in sorted(common or set(), key=min)]

    # value space (1-D mixtures of 1-D components)
    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        """Element-wise ``P(a <= X <= b)`` of a 1-D mixture."""
        parts = [component.interval(a, b) for component in self.components]
        return weighted_sum(self.normalised_weights, _stack(parts))

    def has_atom(self, t: float) -> bool:
        return any(self.components[k].has_atom(t) for k in self._active)

    def mass_inside(self, s: float, t: float) -> bool:
        return any(self.components[k].mass_inside(s, t) for k in self._active)

    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        hulls = [self.components[k].support_in(lo, hi) for k in self._active]
        hulls = [hull for hull in hulls if hull is not None]
        if not hulls:
            return None
        return min(h[0] for h in hulls), max(h[1] for h in hulls)

    def renormalised(self) -> list[str]:
        return [*renormalisation(self.weights, "weights"),
                *(f"component {index}: {line}" for index, component in
                  enumerate(self.components) for line in component.renormalised())]

    def describe_lines(self) -> list[str]:
        lines = [f"mixture of {len(self.components)} components:"]
        for weight, component in zip(self.weights, self.components, strict=True):
            inner = component.describe_lines()
            lines.append(f"  weight {weight:.6g}: {inner[0]}")
            lines.extend(indent(inner[1:], "    "))
        return lines


def _stack(parts: list[Enclosure]) -> Enclosure:
    return Enclosure(
        np.stack([part.value for part in parts], axis=-1),
        np.stack([part.lower for part in parts], axis=-1),
        np.stack([part.upper for part in parts], axis=-1),
    )
