"""Univariate marginals and the one-hot categorical.

Marginals (one coordinate each): ``normal``, ``truncated_normal``, ``uniform``, ``discrete``
(finite values with probabilities), ``discretised_normal`` (a normal rounded to the nearest
integer, conditioned on an integer range) and ``point``. ``categorical`` is a distribution
over the columns of a one-hot group (``k`` columns, one probability per category).

Normal parameters accept either ``std`` or ``variance`` (exactly one); the document keeps the
one given. Probabilities and weights must sum to 1 within float32 precision
(``PROBABILITY_SUM_TOLERANCE`` = 2**-23, the float32 machine epsilon: tables written in
float32 sum to 1 ± a few 1e-8) and are normalised by their sum, which defines the exact
distribution. A sum further from 1 than ``EXACT_SUM_TOLERANCE`` (1e-9, float64 tables) is a
*renormalisation*: it is listed by :meth:`Distribution.renormalised` and shown by the
population model (:attr:`verifier.population.model.PopulationModel.renormalised`).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from functools import cached_property
from typing import Literal

import numpy as np
from pydantic import field_validator, model_validator
from scipy.stats import truncnorm

from verifier.numerics import EPS, FUNCTION_REL_MARGIN
from verifier.population.base import (
    Bound,
    Distribution,
    finite_or_none,
    lower_bound,
    upper_bound,
)
from verifier.population.rounding import Enclosure, normal_interval, ratio

PROBABILITY_SUM_TOLERANCE = float(np.finfo(np.float32).eps)
EXACT_SUM_TOLERANCE = 1e-9
MIN_NORMALISER = 1e-280


def check_probabilities(values: list[float], what: str) -> np.ndarray:
    """Validate non-negative finite probabilities summing to 1 within float32 precision
    (±2**-23); return them normalised by their sum as float64."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        raise ValueError(f"{what} must not be empty")
    if not np.isfinite(array).all() or (array < 0).any():
        raise ValueError(f"{what} must be finite and non-negative, got {values}")
    total = float(array.sum())
    if abs(total - 1.0) > PROBABILITY_SUM_TOLERANCE:
        raise ValueError(f"{what} must sum to 1 within float32 precision "
                         f"(±{PROBABILITY_SUM_TOLERANCE:.3g}), got {total!r}")
    return array / total


def renormalisation(values: list[float], what: str) -> list[str]:
    """``["<what> summed to <total>, renormalised"]`` when accepted ``values`` sum to 1 only
    within float32 precision (further than ``EXACT_SUM_TOLERANCE``), else ``[]``."""
    total = float(np.asarray(values, dtype=np.float64).sum())
    if abs(total - 1.0) <= EXACT_SUM_TOLERANCE:
        return []
    return [f"{what} summed to {total!r}, renormalised"]


def _finite(value: float, what: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value}")
    return value


class Marginal(Distribution):
    """A distribution of one real coordinate that answers value-space queries."""

    @property
    def dimension(self) -> int:
        return 1

    def is_univariate(self) -> bool:
        return True

    @abstractmethod
    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        """Element-wise ``P(a <= X <= b)`` (broadcast); ``a > b`` gives 0."""

    @abstractmethod
    def has_atom(self, t: float) -> bool:
        """Whether ``P(X = t)`` may be positive (never False when it is)."""

    @abstractmethod
    def mass_inside(self, s: float, t: float) -> bool:
        """Whether the open interval ``(s, t)`` may carry mass (never False when it does)."""

    @abstractmethod
    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        """Smallest closed interval containing the support within ``[lo, hi]``; None if the
        closed interval ``[lo, hi]`` has probability zero."""

    @property
    @abstractmethod
    def atomless(self) -> bool:
        """No point masses."""

    @property
    @abstractmethod
    def integer_valued(self) -> bool:
        """All mass on integers."""

    def enclosure(self, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
        return self.interval(lo[:, 0], hi[:, 0])

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        hull = self.support_in(-np.inf, np.inf)
        if hull is None:
            raise ValueError(f"{self.kind} distribution has no support")
        return np.array([hull[0]]), np.array([hull[1]])

    def atomless_columns(self) -> np.ndarray:
        return np.array([self.atomless])

    def integer_columns(self) -> np.ndarray:
        return np.array([self.integer_valued])

    def describe_lines(self) -> list[str]:
        return [self.summary()]

    @abstractmethod
    def summary(self) -> str:
        """One-line description."""


class _GaussianParameters(Marginal):
    """``mean`` with exactly one of ``std`` / ``variance``."""

    mean: float
    std: float | None = None
    variance: float | None = None

    @model_validator(mode="after")
    def _check_scale(self) -> _GaussianParameters:
        _finite(self.mean, "mean")
        if (self.std is None) == (self.variance is None):
            raise ValueError("give exactly one of 'std' and 'variance'")
        scale = self.std if self.std is not None else self.variance
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"'std'/'variance' must be positive and finite, got {scale}")
        return self

    @property
    def sigma(self) -> float:
        """Standard deviation."""
        return float(self.std) if self.std is not None else math.sqrt(self.variance)

    def _scale_text(self) -> str:
        if self.std is not None:
            return f"std={self.std:.6g}"
        return f"variance={self.variance:.6g}"


class Normal(_GaussianParameters):
    """``N(mean, std²)`` on the real line."""

    kind: Literal["normal"] = "normal"

    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        return normal_interval(a, b, self.mean, self.sigma)

    def has_atom(self, t: float) -> bool:
        return False

    def mass_inside(self, s: float, t: float) -> bool:
        return s < t

    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        return (lo, hi) if lo < hi else None

    @property
    def atomless(self) -> bool:
        return True

    @property
    def integer_valued(self) -> bool:
        return False

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(self.mean, self.sigma, size=(n, 1))

    def summary(self) -> str:
        return f"Normal(mean={self.mean:.6g}, {self._scale_text()})"


class TruncatedNormal(_GaussianParameters):
    """``N(mean, std²)`` conditioned on the closed interval ``[lower, upper]``."""

    kind: Literal["truncated_normal"] = "truncated_normal"
    lower: Bound = None
    upper: Bound = None

    @field_validator("lower", "upper")
    @classmethod
    def _normalise_bounds(cls, value: Bound) -> Bound:
        return finite_or_none(value)

    @model_validator(mode="after")
    def _check_truncation(self) -> TruncatedNormal:
        if not lower_bound(self.lower) < upper_bound(self.upper):
            raise ValueError(f"truncation needs lower < upper, got [{self.lower}, {self.upper}]")
        mass = float(self._normaliser.value)
        if not mass > MIN_NORMALISER:
            raise ValueError(
                f"the truncation [{self.lower}, {self.upper}] has probability {mass:.3g} under "
                f"N({self.mean}, {self.sigma}²): too small to represent in float64"
            )
        return self

    @cached_property
    def _normaliser(self) -> Enclosure:
        return normal_interval(
            np.float64(lower_bound(self.lower)), np.float64(upper_bound(self.upper)),
            self.mean, self.sigma,
        )

    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        return truncated_normal_interval(a, b, self.mean, self.sigma, lower_bound(self.lower),
                                         upper_bound(self.upper), self._normaliser)

    def has_atom(self, t: float) -> bool:
        return False

    def mass_inside(self, s: float, t: float) -> bool:
        return max(s, lower_bound(self.lower)) < min(t, upper_bound(self.upper))

    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        low, high = max(lo, lower_bound(self.lower)), min(hi, upper_bound(self.upper))
        return (low, high) if low < high else None

    @property
    def atomless(self) -> bool:
        return True

    @property
    def integer_valued(self) -> bool:
        return False

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        sigma = self.sigma
        a = (lower_bound(self.lower) - self.mean) / sigma
        b = (upper_bound(self.upper) - self.mean) / sigma
        values = truncnorm.rvs(a, b, loc=self.mean, scale=sigma, size=n, random_state=rng)
        values = np.clip(values, lower_bound(self.lower), upper_bound(self.upper))
        return np.asarray(values, dtype=np.float64).reshape(n, 1)

    def summary(self) -> str:
        return (
            f"TruncatedNormal(mean={self.mean:.6g}, {self._scale_text()}, "
            f"[{lower_bound(self.lower):.6g}, {upper_bound(self.upper):.6g}])"
        )


def truncated_normal_interval(
    a: np.ndarray, b: np.ndarray, mean: float | np.ndarray, sigma: float | np.ndarray,
    lower: float | np.ndarray, upper: float | np.ndarray, normaliser: Enclosure,
) -> Enclosure:
    """``P(a <= X <= b)`` for ``X ~ N(mean, sigma²)`` conditioned on ``[lower, upper]``
    (``normaliser``: the enclosure of that interval's probability), element-wise: the
    parameters broadcast with the ends, each entry bit for bit the scalar parameters'."""
    a = np.maximum(a, lower)
    b = np.minimum(b, upper)
    return ratio(normal_interval(a, b, mean, sigma), normaliser)


class Uniform(Marginal):
    """Uniform on the closed interval ``[lower, upper]`` (finite, ``lower < upper``)."""

    kind: Literal["uniform"] = "uniform"
    lower: float
    upper: float

    @model_validator(mode="after")
    def _check_interval(self) -> Uniform:
        _finite(self.lower, "lower")
        _finite(self.upper, "upper")
        if not (self.lower < self.upper and math.isfinite(self.upper - self.lower)):
            raise ValueError(
                f"uniform needs lower < upper and a finite width, got [{self.lower}, {self.upper}]"
            )
        return self

    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        """``(min(b, upper) − max(a, lower)) / (upper − lower)``: both differences and the
        division are correctly rounded operations on exact floats, so the relative error is
        below ``2 eps``, well inside ``FUNCTION_REL_MARGIN``."""
        low = np.maximum(a, self.lower)
        high = np.minimum(b, self.upper)
        length = np.where(high > low, high - low, 0.0)
        value = length / (self.upper - self.lower)
        return Enclosure.from_error(value, FUNCTION_REL_MARGIN * value)

    def has_atom(self, t: float) -> bool:
        return False

    def mass_inside(self, s: float, t: float) -> bool:
        return max(s, self.lower) < min(t, self.upper)

    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        low, high = max(lo, self.lower), min(hi, self.upper)
        return (low, high) if low < high else None

    @property
    def atomless(self) -> bool:
        return True

    @property
    def integer_valued(self) -> bool:
        return False

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(self.lower, self.upper, size=(n, 1))

    def summary(self) -> str:
        return f"Uniform([{self.lower:.6g}, {self.upper:.6g}])"


class _FiniteValues:
    """Sorted support points with prefix and suffix sums for interval probabilities."""

    def __init__(self, values: np.ndarray, probabilities: np.ndarray) -> None:
        order = np.argsort(values, kind="stable")
        self.values = values[order]
        self.probabilities = probabilities[order]
        self.prefix = np.concatenate([[0.0], np.cumsum(self.probabilities)])
        self.suffix = np.concatenate([np.cumsum(self.probabilities[::-1])[::-1], [0.0]])
        self.margin = FUNCTION_REL_MARGIN + 2.0 * (values.size + 1) * EPS
        self.charged = self.values[self.probabilities > 0]

    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
        start = np.searchsorted(self.values, a, side="left")
        stop = np.searchsorted(self.values, b, side="right")
        nonempty = stop > start
        from_left = self.prefix[stop] - self.prefix[start]
        from_right = self.suffix[start] - self.suffix[stop]
        left_scale = self.prefix[stop] + self.prefix[start]
        right_scale = self.suffix[start] + self.suffix[stop]
        use_left = left_scale <= right_scale
        value = np.where(nonempty, np.where(use_left, from_left, from_right), 0.0)
        error = np.where(
            nonempty, self.margin * np.where(use_left, left_scale, right_scale), 0.0
        )
        return Enclosure.from_error(value, error)

    def has_atom(self, t: float) -> bool:
        return bool(np.any(self.charged == t))

    def mass_inside(self, s: float, t: float) -> bool:
        return bool(np.any((self.charged > s) & (self.charged < t)))

    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        inside = self.charged[(self.charged >= lo) & (self.charged <= hi)]
        if inside.size == 0:
            return None
        return float(inside[0]), float(inside[-1])


class Discrete(Marginal):
    """Finitely many real ``values`` with ``probabilities`` (e.g. integer codes)."""

    kind: Literal["discrete"] = "discrete"
    values: list[float]
    probabilities: list[float]

    @model_validator(mode="after")
    def _check_values(self) -> Discrete:
        if len(self.values) != len(self.probabilities):
            raise ValueError(
                f"{len(self.values)} values but {len(self.probabilities)} probabilities"
            )
        if not all(math.isfinite(v) for v in self.values):
            raise ValueError(f"values must be finite, got {self.values}")
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"values must be distinct, got {self.values}")
        check_probabilities(self.probabilities, "probabilities")
        return self

    @cached_property
    def _table(self) -> _FiniteValues:
        return _FiniteValues(
            np.asarray(self.values, dtype=np.float64),
            check_probabilities(self.probabilities, "probabilities"),
        )

    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        return self._table.interval(a, b)

    def has_atom(self, t: float) -> bool:
        return self._table.has_atom(t)

    def mass_inside(self, s: float, t: float) -> bool:
        return self._table.mass_inside(s, t)

    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        return self._table.support_in(lo, hi)

    @property
    def atomless(self) -> bool:
        return False

    @property
    def integer_valued(self) -> bool:
        return bool(np.all(np.floor(self._table.charged) == self._table.charged))

    def column_atoms(self) -> list[np.ndarray | None]:
        return [self._table.charged.copy()]

    def renormalised(self) -> list[str]:
        return renormalisation(self.probabilities, "probabilities")

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        table = self._table
        return rng.choice(table.values, size=n, p=table.probabilities).reshape(n, 1)

    def summary(self) -> str:
        pairs = ", ".join(
            f"{v:g}: {p:.6g}" for v, p in zip(self.values, self.probabilities, strict=True)
        )
        return f"Discrete({{{pairs}}})"


class DiscretisedNormal(_GaussianParameters):
    """``round(Y)`` for ``Y ~ N(mean, std²)``, conditioned on ``lower <= round(Y) <= upper``
    (integer bounds, ``null`` = unbounded): ``P(k) ∝ Φ((k+½−mean)/std) − Φ((k−½−mean)/std)``."""

    kind: Literal["discretised_normal"] = "discretised_normal"
    lower: int | None = None
    upper: int | None = None

    @model_validator(mode="after")
    def _check_range(self) -> DiscretisedNormal:
        if not lower_bound(self.lower) <= upper_bound(self.upper):
            raise ValueError(
                f"integer range needs lower <= upper, got [{self.lower}, {self.upper}]"
            )
        mass = float(self._normaliser.value)
        if not mass > MIN_NORMALISER:
            raise ValueError(
                f"the integer range [{self.lower}, {self.upper}] has probability {mass:.3g} "
                f"under N({self.mean}, {self.sigma}²): too small to represent in float64"
            )
        return self

    @cached_property
    def _normaliser(self) -> Enclosure:
        return normal_interval(
            np.float64(lower_bound(self.lower) - 0.5), np.float64(upper_bound(self.upper) + 0.5),
            self.mean, self.sigma,
        )

    def _integer_range(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        first = np.maximum(np.ceil(a), lower_bound(self.lower))
        last = np.minimum(np.floor(b), upper_bound(self.upper))
        return first, last

    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        first, last = self._integer_range(np.asarray(a, np.float64), np.asarray(b, np.float64))
        numerator = normal_interval(first - 0.5, last + 0.5, self.mean, self.sigma)
        return ratio(numerator, self._normaliser).zero_where(first > last)

    def has_atom(self, t: float) -> bool:
        return float(t).is_integer() and lower_bound(self.lower) <= t <= upper_bound(self.upper)

    def mass_inside(self, s: float, t: float) -> bool:
        first = max(math.floor(s) + 1 if math.isfinite(s) else s, lower_bound(self.lower))
        last = min(math.ceil(t) - 1 if math.isfinite(t) else t, upper_bound(self.upper))
        return first <= last

    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        first, last = self._integer_range(np.float64(lo), np.float64(hi))
        return (float(first), float(last)) if first <= last else None

    @property
    def atomless(self) -> bool:
        return False

    @property
    def integer_valued(self) -> bool:
        return True

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        sigma = self.sigma
        low, high = lower_bound(self.lower), upper_bound(self.upper)
        a = (low - 0.5 - self.mean) / sigma
        b = (high + 0.5 - self.mean) / sigma
        continuous = truncnorm.rvs(a, b, loc=self.mean, scale=sigma, size=n, random_state=rng)
        values = np.clip(np.floor(np.asarray(continuous) + 0.5), low, high)
        return values.astype(np.float64).reshape(n, 1)

    def summary(self) -> str:
        return (
            f"DiscretisedNormal(mean={self.mean:.6g}, {self._scale_text()}, integers in "
            f"[{lower_bound(self.lower):g}, {upper_bound(self.upper):g}])"
        )


class PointMass(Marginal):
    """All mass on one ``value``."""

    kind: Literal["point"] = "point"
    value: float

    @model_validator(mode="after")
    def _check_value(self) -> PointMass:
        _finite(self.value, "value")
        return self

    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        return Enclosure.exact(((a <= self.value) & (self.value <= b)).astype(np.float64))

    def has_atom(self, t: float) -> bool:
        return t == self.value

    def mass_inside(self, s: float, t: float) -> bool:
        return s < self.value < t

    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        return (self.value, self.value) if lo <= self.value <= hi else None

    @property
    def atomless(self) -> bool:
        return False

    @property
    def integer_valued(self) -> bool:
        return float(self.value).is_integer()

    def column_atoms(self) -> list[np.ndarray | None]:
        return [np.array([float(self.value)])]

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full((n, 1), self.value)

    def summary(self) -> str:
        return f"Point({self.value:.6g})"


class Categorical(Distribution):
    """One-hot categorical over ``k >= 2`` columns: category ``j`` is the unit vector ``e_j``.

    The box probability is the sum of the probabilities of the categories whose one-hot
    vector lies in the box. As a Bayesian-network node its *value* is the category index
    ``0..k-1`` (CPT conditions use index intervals such as ``[2, 2]``).
    """

    kind: Literal["categorical"] = "categorical"
    probabilities: list[float]

    @model_validator(mode="after")
    def _check_categories(self) -> Categorical:
        if len(self.probabilities) < 2:
            raise ValueError("a categorical needs at least 2 categories")
        check_probabilities(self.probabilities, "probabilities")
        return self

    @cached_property
    def weights(self) -> np.ndarray:
        """Normalised category probabilities, ``(k,)``."""
        return check_probabilities(self.probabilities, "probabilities")

    @cached_property
    def _index_table(self) -> _FiniteValues:
        return _FiniteValues(np.arange(self.dimension, dtype=np.float64), self.weights)

    @property
    def dimension(self) -> int:
        return len(self.probabilities)

    @property
    def margin(self) -> float:
        """Relative rounding bound of a sum of category probabilities."""
        return FUNCTION_REL_MARGIN + 2.0 * (self.dimension + 1) * EPS

    @staticmethod
    def category_mask(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """``(B, k)`` bool: which one-hot vectors ``e_j`` lie in each ``(B, k)`` box."""
        zero_fails = ~((lo <= 0.0) & (hi >= 0.0))
        one_fits = (lo <= 1.0) & (hi >= 1.0)
        fails = zero_fails.sum(axis=1, keepdims=True) - zero_fails
        return one_fits & (fails == 0)

    def enclosure(self, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
        value = self.category_mask(lo, hi).astype(np.float64) @ self.weights
        return Enclosure.from_error(value, self.margin * value)

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.eye(self.dimension)[self.draw_index(n, rng)]

    def draw_index(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``(n,)`` category indices."""
        return rng.choice(self.dimension, size=n, p=self.weights)

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        return self.support_of_indices(self.weights > 0)

    @staticmethod
    def support_of_indices(charged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Smallest box containing the one-hot vectors of the ``charged`` categories."""
        several = charged.sum() > 1
        lo = np.where(charged & ~several, 1.0, 0.0)
        hi = np.where(charged, 1.0, 0.0)
        return lo, hi

    def atomless_columns(self) -> np.ndarray:
        return np.zeros(self.dimension, dtype=bool)

    def integer_columns(self) -> np.ndarray:
        return np.ones(self.dimension, dtype=bool)

    def onehot_groups(self) -> list[tuple[int, ...]]:
        return [tuple(range(self.dimension))]

    # value space of the category index (Bayesian-network conditions)
    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        """Element-wise ``P(a <= index <= b)``."""
        return self._index_table.interval(a, b)

    def has_atom(self, t: float) -> bool:
        return self._index_table.has_atom(t)

    def mass_inside(self, s: float, t: float) -> bool:
        return self._index_table.mass_inside(s, t)

    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        return self._index_table.support_in(lo, hi)

    def renormalised(self) -> list[str]:
        return renormalisation(self.probabilities, "probabilities")

    def describe_lines(self) -> list[str]:
        return [self.summary()]

    def summary(self) -> str:
        probabilities = ", ".join(f"{p:.6g}" for p in self.probabilities)
        return f"Categorical(one-hot, probabilities=[{probabilities}])"
