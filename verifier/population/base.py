"""The contract every population distribution fulfils, and the shared pydantic base.

A distribution lives on ``dimension`` *local* coordinates. Multi-column kinds (products,
Bayesian networks, named piecewise densities) name their columns (:meth:`column_names`);
anonymous kinds (1-D marginals, one-hot categoricals, unnamed piecewise densities) are placed
by their context: a product factor's ``columns``, a Bayesian-network node, or the model's
columns at the top level.

Public methods (all float64, batched, vectorised over boxes):

* ``prob_boxes(lo, hi)`` — ``P(x ∈ [lo, hi])`` for closed boxes, shapes ``(B, d)`` (or
  ``(d,)`` for one box); ±inf allowed; ``lo > hi`` on any coordinate gives 0; NaN is an error.
* ``prob_boxes_interval(lo, hi)`` — a sound ``(lower, upper)`` enclosure of the exact
  probability (see :mod:`verifier.population.rounding` for the error model).
* ``sample(n, rng)`` — ``(n, d)`` samples; ``support()`` — the smallest box containing the
  support; ``describe()`` — readable text; ``to_json()``/``from_json()``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, PydanticUndefinedAnnotation
from pydantic_core import CoreSchema

from verifier.population.errors import PopulationError
from verifier.population.rounding import Enclosure

Bound = float | None


class PopulationBase(BaseModel):
    """Closed (``extra="forbid"``), immutable pydantic base of every population-model type.

    Equality compares the serialised fields only (derived arrays cached on an instance do
    not take part).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]


def lower_bound(value: Bound) -> float:
    """A JSON lower bound (``null`` = unbounded) as a float."""
    return -np.inf if value is None else float(value)


def upper_bound(value: Bound) -> float:
    """A JSON upper bound (``null`` = unbounded) as a float."""
    return np.inf if value is None else float(value)


def finite_or_none(value: Bound) -> Bound:
    """Normalise an infinite bound to ``None`` so that documents never hold ±Infinity."""
    if value is None or np.isinf(value):
        return None
    if np.isnan(value):
        raise ValueError("a bound must not be NaN")
    return float(value)


def as_boxes(lo: Any, hi: Any, dimension: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a batch of boxes: returns ``lo``, ``hi`` as ``(B, d)`` float64 and the mask of
    empty boxes (``lo > hi`` on some coordinate)."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if lo.ndim == 1:
        lo = lo[None, :]
    if hi.ndim == 1:
        hi = hi[None, :]
    if lo.ndim != 2 or lo.shape != hi.shape or lo.shape[1] != dimension:
        raise PopulationError(
            f"boxes must have shape (B, {dimension}) for lo and hi alike, got "
            f"{lo.shape} and {hi.shape}"
        )
    if np.isnan(lo).any() or np.isnan(hi).any():
        raise PopulationError("box corners must not be NaN (use ±inf for unbounded sides)")
    return lo, hi, (lo > hi).any(axis=1)


def as_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """A numpy Generator from a Generator, a seed, or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


class Distribution(PopulationBase, ABC):
    """A probability distribution on ``dimension`` local coordinates (see module docstring)."""

    kind: str

    # ------------------------------------------------------------------ to implement
    @property
    @abstractmethod
    def dimension(self) -> int:
        """Number of coordinates."""

    @abstractmethod
    def enclosure(self, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
        """Box probabilities of validated ``(B, d)`` boxes with their sound enclosure.

        Empty boxes may be given; the result must then be 0 or is zeroed by the caller.
        """

    @abstractmethod
    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``(n, d)`` float64 samples."""

    @abstractmethod
    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)``, each ``(d,)``: the smallest box containing the support."""

    @abstractmethod
    def describe_lines(self) -> list[str]:
        """Readable description, one entry per line, without indentation."""

    @abstractmethod
    def atomless_columns(self) -> np.ndarray:
        """``(d,)`` bool: the marginal of the column has no point masses."""

    @abstractmethod
    def integer_columns(self) -> np.ndarray:
        """``(d,)`` bool: the marginal of the column puts all its mass on integers."""

    # ------------------------------------------------------------------ defaults
    def column_atoms(self) -> list[np.ndarray | None]:
        """Per local column: a sorted array of the finitely many values that may carry mass
        (a superset is fine), or None when the column's values are not such a set."""
        return [None] * self.dimension

    def column_point_masses(self) -> list[np.ndarray | None]:
        """Per local column: a sorted array of the values that may carry a point mass (a
        superset is fine; empty for an atomless column), or None when they are not such a
        finite set. Unlike :meth:`column_atoms`, a column with point masses beside a density
        (a fitted histogram's atoms) lists its point masses."""
        return [np.zeros(0) if atomless else atoms for atomless, atoms
                in zip(self.atomless_columns(), self.column_atoms(), strict=True)]

    def column_names(self) -> tuple[str, ...] | None:
        """Names of the local coordinates, or None when the context places them."""
        return None

    def onehot_groups(self) -> list[tuple[int, ...]]:
        """Groups of local columns guaranteed to be one-hot (exactly one 1, the rest 0)."""
        return []

    def renormalised(self) -> list[str]:
        """Where the document's probabilities or weights summed to 1 only within float32
        precision and were renormalised by their sum (one line each, naming the place);
        ``[]`` when every sum was 1 within 1e-9."""
        return []

    def is_univariate(self) -> bool:
        """True when the distribution is 1-D and answers the value-space queries
        ``interval``, ``has_atom``, ``mass_inside`` and ``support_in``."""
        return False

    # ------------------------------------------------------------------ public API
    def prob_boxes(self, lo: Any, hi: Any) -> np.ndarray:
        """``(B,)`` float64: ``P(x ∈ [lo, hi])`` for every closed box (see module docstring)."""
        lo, hi, empty = as_boxes(lo, hi, self.dimension)
        return self.enclosure(lo, hi).zero_where(empty).value

    def prob_boxes_interval(self, lo: Any, hi: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)``, each ``(B,)``: sound enclosures of the exact box probabilities,
        rounded outward as documented in :mod:`verifier.population.rounding`."""
        lo, hi, empty = as_boxes(lo, hi, self.dimension)
        result = self.enclosure(lo, hi).zero_where(empty)
        return result.lower, result.upper

    def sample(self, n: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """``(n, d)`` independent samples."""
        if int(n) != n or n < 0:
            raise PopulationError(f"the number of samples must be a non-negative integer, got {n}")
        return self.draw(int(n), as_generator(rng))

    def describe(self) -> str:
        """Multi-line readable description."""
        return "\n".join(self.describe_lines())

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready dict of this distribution (unset optional fields left out)."""
        return self.model_dump(mode="json", exclude_none=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Distribution:
        """Validate a JSON dict as this kind of distribution (a dict of any kind:
        :func:`verifier.population.union.distribution_from_json`)."""
        field = cls.model_fields.get("kind")
        if field is None:
            raise PopulationError(
                f"{cls.__name__} is not one kind of distribution; read a dict of any kind with "
                "verifier.population.union.distribution_from_json"
            )
        kind = data.get("kind") if isinstance(data, dict) else None
        if kind != field.default:
            raise PopulationError(
                f"expected a distribution of kind {cls.__name__}, got kind {kind!r}"
            )
        return cls.model_validate(data)


_UNION: list[Any] = []


def complete_nested(union: Any) -> None:
    """Make :data:`NestedDistribution` validate and serialise as ``union`` (the
    discriminated union of every kind, which :mod:`verifier.population.union` defines and
    passes here once every kind exists)."""
    _UNION[:] = [union]


class _AsTheUnion:
    """Pydantic's schema hook of :data:`NestedDistribution`: the union's own schema (a dict
    becomes the class its ``kind`` names, a distribution serialises as its own class, errors
    and JSON schema as the union's). Before :func:`complete_nested`, the annotation is
    undefined, as an unresolved forward reference is: its model stays incomplete and fails
    loudly if used."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        if not _UNION:
            raise PydanticUndefinedAnnotation(
                "AnyDistribution", "verifier.population.union defines the union of every kind"
            )
        return handler.generate_schema(_UNION[0])


NestedDistribution = Annotated[Distribution, _AsTheUnion()]
"""A distribution of any kind nested in a product, a mixture or a Bayesian network."""


def union_atoms(parts: list[np.ndarray | None]) -> np.ndarray | None:
    """The sorted union of several columns' atom sets; None if any of them is not finite."""
    if any(part is None for part in parts):
        return None
    return np.unique(np.concatenate([np.asarray(part, dtype=np.float64) for part in parts]))


def indent(lines: list[str], prefix: str = "  ") -> list[str]:
    """Indent nested description lines."""
    return [prefix + line for line in lines]
