"""Piecewise-constant and piecewise-polynomial densities on axis-aligned boxes.

The density is ``Σ_leaves 1[x ∈ leaf] · p_leaf(x)`` where each leaf is a finite box
``[lower, upper]`` carrying either a ``constant`` density or a ``polynomial`` in the absolute
coordinates, written as a list of ``[exponents, coefficient]`` pairs (``exponents`` has one
non-negative integer per coordinate). Density-estimation trees give disjoint leaves; overlapping
leaves simply add up. The box probability is exact: the integral of a monomial over the
intersection box is ``Π_j (h_j^{e_j+1} − l_j^{e_j+1}) / (e_j + 1)``.

Validation: leaves are finite with positive volume; constant densities are non-negative;
polynomial leaves are evaluated on a grid of at most ``NONNEGATIVITY_GRID_POINTS`` points
(corners included) and rejected where negative (a necessary check: non-negativity of a
polynomial between the grid points is the author's responsibility); the total mass must be
1 within ``MASS_TOLERANCE`` and is normalised exactly to 1.

Rounding: each integral term has error below ``margin · |coefficient| · Π_j (|h_j|^{e_j+1} +
|l_j|^{e_j+1}) / (e_j + 1)`` with ``margin = max(1e-12, 8 (degree + d + terms) eps)``; the
normalisation is an outward-rounded ratio.
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal

import numpy as np
from pydantic import model_validator

from verifier.numerics import EPS, FUNCTION_REL_MARGIN
from verifier.population.base import Distribution, PopulationBase
from verifier.population.errors import PopulationError
from verifier.population.rounding import TINY, Enclosure, ratio

MASS_TOLERANCE = 1e-9
NONNEGATIVITY_GRID_POINTS = 4096
CHUNK_ELEMENTS = 2_000_000
MAX_REJECTION_ROUNDS = 10_000


class Leaf(PopulationBase):
    """A box with a constant or polynomial density (exactly one of the two)."""

    lower: list[float]
    upper: list[float]
    constant: float | None = None
    polynomial: list[tuple[list[int], float]] | None = None

    @model_validator(mode="after")
    def _check_leaf(self) -> Leaf:
        if len(self.lower) != len(self.upper) or not self.lower:
            raise ValueError(
                f"leaf lower and upper must have the same positive length, got "
                f"{len(self.lower)} and {len(self.upper)}"
            )
        low, high = np.asarray(self.lower), np.asarray(self.upper)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ValueError("leaf bounds must be finite")
        if not (low < high).all():
            raise ValueError(
                f"leaf needs lower < upper in every coordinate: {self.lower}, {self.upper}"
            )
        if (self.constant is None) == (self.polynomial is None):
            raise ValueError("give exactly one of 'constant' and 'polynomial' per leaf")
        if self.constant is not None and not (np.isfinite(self.constant) and self.constant >= 0):
            raise ValueError(f"a constant density must be finite and >= 0, got {self.constant}")
        for exponents, coefficient in self.polynomial or []:
            if len(exponents) != len(self.lower) or min(exponents) < 0:
                raise ValueError(
                    f"polynomial exponents {exponents} must be {len(self.lower)} non-negative "
                    "integers"
                )
            if not np.isfinite(coefficient):
                raise ValueError(f"polynomial coefficient must be finite, got {coefficient}")
        return self

    def terms(self) -> tuple[np.ndarray, np.ndarray]:
        """``(exponents (T, d) int, coefficients (T,))``; a constant is the zero monomial."""
        d = len(self.lower)
        if self.constant is not None:
            return np.zeros((1, d), dtype=np.int64), np.array([self.constant])
        exponents = np.array([e for e, _ in self.polynomial], dtype=np.int64).reshape(-1, d)
        coefficients = np.array([c for _, c in self.polynomial], dtype=np.float64)
        return exponents, coefficients


def _evaluate(exponents: np.ndarray, coefficients: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Polynomial values at ``(N, d)`` points."""
    monomials = np.prod(points[:, None, :] ** exponents[None, :, :], axis=2)
    return monomials @ coefficients


class PiecewiseDensity(Distribution):
    """Density that is constant or polynomial on each leaf box (see module docstring)."""

    kind: Literal["piecewise"] = "piecewise"
    columns: list[str] | None = None
    leaves: list[Leaf]

    @model_validator(mode="after")
    def _check_density(self) -> PiecewiseDensity:
        if not self.leaves:
            raise ValueError("a piecewise density needs at least one leaf")
        dimensions = {len(leaf.lower) for leaf in self.leaves}
        if len(dimensions) != 1:
            raise ValueError(f"leaves differ in dimension: {sorted(dimensions)}")
        dimension = dimensions.pop()
        if self.columns is not None and len(self.columns) != dimension:
            raise ValueError(
                f"{len(self.columns)} column names for leaves of dimension {dimension}"
            )
        for index, leaf in enumerate(self.leaves):
            if leaf.polynomial is not None:
                _check_nonnegative(index, leaf)
        mass = float(self._raw_mass.value[0])
        if abs(mass - 1.0) > MASS_TOLERANCE:
            raise ValueError(
                f"the density integrates to {mass!r}, not 1 (tolerance {MASS_TOLERANCE:g})"
            )
        return self

    # ------------------------------------------------------------------ compiled arrays
    @cached_property
    def _terms(self) -> dict[str, np.ndarray]:
        leaf_index, exponents, coefficients = [], [], []
        for index, leaf in enumerate(self.leaves):
            exps, coefs = leaf.terms()
            leaf_index.append(np.full(coefs.size, index))
            exponents.append(exps)
            coefficients.append(coefs)
        exps = np.concatenate(exponents)
        return {
            "leaf": np.concatenate(leaf_index),
            "exponents": exps,
            "coefficients": np.concatenate(coefficients),
            "leaf_lo": np.array([leaf.lower for leaf in self.leaves], dtype=np.float64),
            "leaf_hi": np.array([leaf.upper for leaf in self.leaves], dtype=np.float64),
        }

    @cached_property
    def _margin(self) -> float:
        terms = self._terms
        degree = int(terms["exponents"].sum(axis=1).max())
        count = terms["coefficients"].size + self.dimension + degree
        return max(FUNCTION_REL_MARGIN, 8.0 * count * EPS)

    def _integrals(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(signed sum of term integrals, sum of their magnitudes)`` per box, ``(B,)``."""
        terms = self._terms
        leaf = terms["leaf"]
        leaf_lo, leaf_hi = terms["leaf_lo"][leaf], terms["leaf_hi"][leaf]
        powers = terms["exponents"] + 1
        coefficients = terms["coefficients"]
        total = np.zeros(lo.shape[0])
        magnitude = np.zeros(lo.shape[0])
        chunk = max(1, CHUNK_ELEMENTS // max(1, leaf.size * self.dimension))
        for start in range(0, lo.shape[0], chunk):
            part = slice(start, start + chunk)
            raw_lo = np.maximum(lo[part, None, :], leaf_lo[None])
            raw_hi = np.minimum(hi[part, None, :], leaf_hi[None])
            overlap = (raw_hi > raw_lo).all(axis=2)
            low = np.clip(raw_lo, leaf_lo[None], leaf_hi[None])
            high = np.clip(raw_hi, leaf_lo[None], leaf_hi[None])
            signed = (high**powers - low**powers) / powers
            # a power of 1 is exact, so its one rounding (the subtraction) is relative to
            # the width itself, not to the ends: a narrow cell far from 0 keeps its mass
            absolute = np.where(powers == 1, np.abs(signed),
                                (np.abs(high) ** powers + np.abs(low) ** powers) / powers)
            term_values = np.where(overlap, coefficients * signed.prod(axis=2), 0.0)
            term_sizes = np.where(overlap, np.abs(coefficients) * absolute.prod(axis=2), 0.0)
            total[part] = term_values.sum(axis=1)
            magnitude[part] = term_sizes.sum(axis=1)
        return total, magnitude

    def _raw_enclosure(self, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
        total, magnitude = self._integrals(lo, hi)
        error = self._margin * magnitude + TINY
        return Enclosure(total, total - error, total + error)

    @cached_property
    def _raw_mass(self) -> Enclosure:
        terms = self._terms
        return self._raw_enclosure(
            terms["leaf_lo"].min(axis=0)[None, :], terms["leaf_hi"].max(axis=0)[None, :]
        )

    @cached_property
    def _leaf_masses(self) -> np.ndarray:
        terms = self._terms
        masses = np.array([
            self._integrals(terms["leaf_lo"][i][None, :], terms["leaf_hi"][i][None, :])[0][0]
            if self.leaves[i].polynomial is not None
            else self.leaves[i].constant * float(np.prod(terms["leaf_hi"][i] - terms["leaf_lo"][i]))
            for i in range(len(self.leaves))
        ])
        return np.maximum(masses, 0.0)

    # ------------------------------------------------------------------ contract
    @property
    def dimension(self) -> int:
        return len(self.leaves[0].lower)

    def column_names(self) -> tuple[str, ...] | None:
        return tuple(self.columns) if self.columns is not None else None

    def is_univariate(self) -> bool:
        return self.dimension == 1

    def enclosure(self, lo: np.ndarray, hi: np.ndarray) -> Enclosure:
        raw = self._raw_enclosure(lo, hi)
        clipped = Enclosure(
            np.clip(raw.value, 0.0, None), np.clip(raw.lower, 0.0, None), raw.upper
        )
        return ratio(clipped, self._raw_mass)

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        masses = self._leaf_masses
        labels = rng.choice(len(self.leaves), size=n, p=masses / masses.sum())
        samples = np.empty((n, self.dimension))
        for index in np.unique(labels):
            chosen = labels == index
            samples[chosen] = self._draw_leaf(self.leaves[int(index)], int(chosen.sum()), rng)
        return samples

    @staticmethod
    def _draw_leaf(leaf: Leaf, n: int, rng: np.random.Generator) -> np.ndarray:
        low, high = np.asarray(leaf.lower), np.asarray(leaf.upper)
        if leaf.constant is not None:
            return rng.uniform(low, high, size=(n, low.size))
        exponents, coefficients = leaf.terms()
        corner = np.maximum(np.abs(low), np.abs(high))
        ceiling = float(np.abs(coefficients) @ np.prod(corner[None, :] ** exponents, axis=1))
        accepted: list[np.ndarray] = []
        count = 0
        for _ in range(MAX_REJECTION_ROUNDS):
            proposals = rng.uniform(low, high, size=(max(2 * (n - count), 64), low.size))
            keep = rng.uniform(0.0, ceiling, size=proposals.shape[0]) < _evaluate(
                exponents, coefficients, proposals
            )
            accepted.append(proposals[keep])
            count += int(keep.sum())
            if count >= n:
                return np.concatenate(accepted)[:n]
        raise PopulationError(
            f"rejection sampling of a polynomial leaf accepted only {count} of {n} samples"
        )

    def _positive_leaves(self) -> np.ndarray:
        """Leaves that may carry mass (structurally: a positive constant or a non-zero
        polynomial), so that no support or regime is ever dropped because of rounding."""
        return np.array([
            leaf.constant > 0 if leaf.constant is not None
            else any(coefficient != 0 for _, coefficient in leaf.polynomial)
            for leaf in self.leaves
        ])

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        terms = self._terms
        positive = self._positive_leaves()
        return terms["leaf_lo"][positive].min(axis=0), terms["leaf_hi"][positive].max(axis=0)

    def atomless_columns(self) -> np.ndarray:
        return np.ones(self.dimension, dtype=bool)

    def integer_columns(self) -> np.ndarray:
        return np.zeros(self.dimension, dtype=bool)

    # value space (1-D densities)
    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        """Element-wise ``P(a <= X <= b)`` of a 1-D density."""
        a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
        result = self.enclosure(a.reshape(-1, 1), b.reshape(-1, 1))
        return result.zero_where((a > b).reshape(-1)).reshape(a.shape)

    def has_atom(self, t: float) -> bool:
        return False

    def mass_inside(self, s: float, t: float) -> bool:
        return self.support_in(s, t) is not None

    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        terms = self._terms
        positive = self._positive_leaves()
        low = np.maximum(terms["leaf_lo"][positive, 0], lo)
        high = np.minimum(terms["leaf_hi"][positive, 0], hi)
        overlap = high > low
        if not overlap.any():
            return None
        return float(low[overlap].min()), float(high[overlap].max())

    def describe_lines(self) -> list[str]:
        constant = sum(leaf.constant is not None for leaf in self.leaves)
        low, high = self.support()
        box = ", ".join(f"[{a:.6g}, {b:.6g}]" for a, b in zip(low, high, strict=True))
        names = f" on {', '.join(self.columns)}" if self.columns else ""
        return [
            f"piecewise density{names}: {len(self.leaves)} leaves "
            f"({constant} constant, {len(self.leaves) - constant} polynomial), support {box}"
        ]


def _check_nonnegative(index: int, leaf: Leaf) -> None:
    low, high = np.asarray(leaf.lower), np.asarray(leaf.upper)
    if 2**low.size <= NONNEGATIVITY_GRID_POINTS:
        per_axis = max(2, int(NONNEGATIVITY_GRID_POINTS ** (1.0 / low.size)))
        axes = [np.linspace(a, b, per_axis) for a, b in zip(low, high, strict=True)]
        points = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, low.size)
    else:
        shape = (NONNEGATIVITY_GRID_POINTS, low.size)
        corners = np.random.default_rng(0).integers(0, 2, size=shape)
        points = np.where(corners == 1, high, low)
    exponents, coefficients = leaf.terms()
    values = _evaluate(exponents, coefficients, points)
    worst = int(np.argmin(values))
    if values[worst] < 0:
        raise ValueError(
            f"leaf {index}: the polynomial density is negative ({values[worst]:.6g}) at "
            f"{points[worst].tolist()}"
        )
