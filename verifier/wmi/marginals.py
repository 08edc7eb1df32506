"""One-column densities for WMI: weighted, interval-restricted mixtures of 1-D marginals.

A :class:`Density1D` is ``g(t) = Σ_k w_k · f_k(t) · 1[lo_k <= t <= hi_k]`` with each weight
known only as an interval ``[w_lo, w_hi]`` and each ``f_k`` the density of an atomless
population marginal (normal, truncated normal, uniform, a 1-D piecewise density, or a 1-D
mixture of those). It is what a column of a prior term contributes to the weight.

Guarantees (real arithmetic, float rounding included):

* :meth:`Density1D.mass` encloses ``∫_a^b g`` (the marginals' own certified interval
  probabilities, weights at their ends).
* :meth:`Density1D.bounds` gives ``L <= g(t) <= U`` for every ``t`` in ``[a, b]``: a normal
  density is unimodal, so its extremes on an interval are at the clamped mode and at the end
  farther from it; ``exp`` and the standardisation are widened by
  ``FUNCTION_REL_MARGIN + 16 eps z²`` relative (the error model of
  :mod:`verifier.population.rounding`).
* :meth:`Density1D.polynomial_pieces` is the exact piecewise-polynomial form when every
  component has one (uniform, piecewise); then WMI stays exact.
* :meth:`Density1D.core` is a finite interval outside which the mass is at most
  :data:`TAIL_MASS` (about ``1e-15`` relative) — the part the integration domain keeps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from verifier.numerics import EPS, FUNCTION_REL_MARGIN, scaled_down, scaled_up
from verifier.population import (
    Mixture,
    Normal,
    PiecewiseDensity,
    TruncatedNormal,
    Uniform,
)
from verifier.population.base import Distribution, lower_bound, upper_bound
from verifier.population.rounding import TINY, normal_interval
from verifier.wmi.encode import WeightPiece, WMIInputError, density_pieces

CORE_SIGMAS = 8.0
TAIL_MASS = 1e-14
SQRT_2PI = math.sqrt(2.0 * math.pi)


def _has_polynomial_form(marginal: Distribution) -> bool:
    if isinstance(marginal, Uniform | PiecewiseDensity):
        return True
    if isinstance(marginal, Mixture):
        return all(_has_polynomial_form(c) for c in marginal.components)
    return False


def supported_marginal(marginal: Distribution) -> bool:
    """Whether ``marginal`` is an atomless 1-D kind this module can bound."""
    if isinstance(marginal, Normal | TruncatedNormal | Uniform):
        return True
    if isinstance(marginal, PiecewiseDensity):
        return marginal.dimension == 1
    if isinstance(marginal, Mixture):
        return marginal.dimension == 1 and all(supported_marginal(c) for c in marginal.components)
    return False


def _gaussian_bounds(mean: float, sigma: float, a: np.ndarray, b: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Certified ``min``/``max`` of the ``N(mean, sigma²)`` density on ``[a, b]`` (a <= b)."""
    mode = np.clip(mean, a, b)
    far = np.where(np.abs(a - mean) >= np.abs(b - mean), a, b)
    values = []
    for point in (far, mode):
        z = (point - mean) / sigma
        z2 = np.minimum(z * z, 1e6)
        value = np.exp(-0.5 * z2) / (sigma * SQRT_2PI)
        values.append((value, FUNCTION_REL_MARGIN + 16.0 * EPS * (z2 + 1.0)))
    (low, low_err), (high, high_err) = values
    return np.maximum(scaled_down(low, low_err) - TINY, 0.0), scaled_up(high, high_err) + TINY


def _marginal_bounds(marginal: Distribution, a: np.ndarray, b: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(L, U)`` with ``L <= f(t) <= U`` on ``[a, b]`` for the density ``f`` of ``marginal``."""
    if isinstance(marginal, Normal):
        return _gaussian_bounds(marginal.mean, marginal.sigma, a, b)
    if isinstance(marginal, TruncatedNormal):
        low_end, high_end = lower_bound(marginal.lower), upper_bound(marginal.upper)
        inside_a, inside_b = np.maximum(a, low_end), np.minimum(b, high_end)
        empty = inside_a > inside_b
        low, high = _gaussian_bounds(marginal.mean, marginal.sigma, np.where(empty, a, inside_a),
                                     np.where(empty, b, inside_b))
        normaliser = marginal._normaliser
        scale_low = scaled_down(1.0 / float(normaliser.upper), FUNCTION_REL_MARGIN)
        scale_high = scaled_up(1.0 / float(normaliser.lower), FUNCTION_REL_MARGIN)
        covered = (a >= low_end) & (b <= high_end)
        return (np.where(covered, low * scale_low, 0.0),
                np.where(empty, 0.0, high * scale_high))
    if isinstance(marginal, Uniform):
        height = 1.0 / (marginal.upper - marginal.lower)
        covered = (a >= marginal.lower) & (b <= marginal.upper)
        meets = (b >= marginal.lower) & (a <= marginal.upper)
        return (np.where(covered, scaled_down(height, FUNCTION_REL_MARGIN), 0.0),
                np.where(meets, scaled_up(height, FUNCTION_REL_MARGIN), 0.0))
    if isinstance(marginal, PiecewiseDensity):
        return _piecewise_bounds(marginal, a, b)
    if isinstance(marginal, Mixture):
        low, high = np.zeros_like(a), np.zeros_like(a)
        for weight, component in zip(marginal.normalised_weights, marginal.components,
                                     strict=True):
            part_low, part_high = _marginal_bounds(component, a, b)
            low, high = low + weight * part_low, high + weight * part_high
        return (scaled_down(low, 4.0 * FUNCTION_REL_MARGIN),
                scaled_up(high, 4.0 * FUNCTION_REL_MARGIN))
    raise WMIInputError(f"a {marginal.kind} marginal has no density this module can bound")


def _piecewise_bounds(density: PiecewiseDensity, a: np.ndarray, b: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of a 1-D piecewise-polynomial density: every monomial ``c t^e`` is bounded by
    interval arithmetic over the overlap of the leaf with ``[a, b]``."""
    low, high = np.zeros_like(a), np.zeros_like(a)
    for leaf in density.leaves:
        left, right = leaf.lower[0], leaf.upper[0]
        meet_a, meet_b = np.maximum(a, left), np.minimum(b, right)
        meets = meet_a <= meet_b
        exps, coefs = leaf.terms()
        term_low, term_high = np.zeros_like(a), np.zeros_like(a)
        for (e,), c in zip(exps, coefs, strict=True):
            ends = np.stack([meet_a ** e, meet_b ** e])
            lo_pow, hi_pow = ends.min(axis=0), ends.max(axis=0)
            if e % 2 == 0 and e > 0:
                lo_pow = np.where((meet_a <= 0) & (meet_b >= 0), 0.0, lo_pow)
            pair = np.stack([c * lo_pow, c * hi_pow])
            term_low, term_high = term_low + pair.min(axis=0), term_high + pair.max(axis=0)
        covered = (a >= left) & (b <= right)
        scale = 1.0 + 8.0 * (len(coefs) + 2) * EPS + FUNCTION_REL_MARGIN
        low = low + np.where(covered, np.maximum(term_low, 0.0) / scale, 0.0)
        high = high + np.where(meets, np.maximum(term_high, 0.0) * scale, 0.0)
    return low, high


def _marginal_core(marginal: Distribution) -> tuple[float, float]:
    """A finite interval holding all but a ``TAIL_MASS``-small part of the marginal."""
    if isinstance(marginal, Normal | TruncatedNormal):
        low = marginal.mean - CORE_SIGMAS * marginal.sigma
        high = marginal.mean + CORE_SIGMAS * marginal.sigma
        if isinstance(marginal, TruncatedNormal):
            low = max(low, lower_bound(marginal.lower))
            high = min(high, upper_bound(marginal.upper))
        return low, high
    if isinstance(marginal, Mixture):
        ends = [_marginal_core(component) for component in marginal.components]
        return min(e[0] for e in ends), max(e[1] for e in ends)
    low, high = marginal.support()
    return float(low[0]), float(high[0])


@dataclass(frozen=True)
class Component:
    """``weight · f(t) · 1[lower <= t <= upper]`` with ``weight ∈ [weight_lo, weight_hi]``."""

    weight_lo: float
    weight_hi: float
    marginal: Distribution
    lower: float = -math.inf
    upper: float = math.inf

    def scaled(self, low: float, high: float) -> Component:
        """The component with its weight multiplied by ``[low, high]``."""
        return Component(scaled_down(self.weight_lo * low, FUNCTION_REL_MARGIN),
                         scaled_up(self.weight_hi * high, FUNCTION_REL_MARGIN), self.marginal,
                         self.lower, self.upper)

    def key(self) -> tuple:
        return (self.weight_lo, self.weight_hi, self.marginal.model_dump_json(), self.lower,
                self.upper)


@dataclass(frozen=True)
class Density1D:
    """A non-negative weighted sum of restricted 1-D marginal densities (module docstring)."""

    components: tuple[Component, ...]

    def key(self) -> tuple:
        return tuple(component.key() for component in self.components)

    def scaled(self, low: float, high: float) -> Density1D:
        return Density1D(tuple(c.scaled(low, high) for c in self.components))

    @cached_property
    def _flat(self) -> tuple[dict[str, np.ndarray], list[Component]]:
        """Normal and truncated-normal components (nested mixtures flattened) as arrays, and
        the other components."""
        gaussian: list[tuple[float, ...]] = []
        others: list[Component] = []
        stack = list(self.components)
        while stack:
            c = stack.pop()
            m = c.marginal
            if isinstance(m, Mixture):
                stack.extend(Component(scaled_down(c.weight_lo * w, FUNCTION_REL_MARGIN),
                                       scaled_up(c.weight_hi * w, FUNCTION_REL_MARGIN), inner,
                                       c.lower, c.upper)
                             for w, inner in zip(m.normalised_weights, m.components,
                                                 strict=True))
            elif isinstance(m, Normal | TruncatedNormal):
                cut_lo, cut_hi, z_lo, z_hi = -math.inf, math.inf, 1.0, 1.0
                if isinstance(m, TruncatedNormal):
                    cut_lo, cut_hi = lower_bound(m.lower), upper_bound(m.upper)
                    z_lo, z_hi = float(m._normaliser.lower), float(m._normaliser.upper)
                gaussian.append((scaled_down(c.weight_lo / z_hi, FUNCTION_REL_MARGIN),
                                 scaled_up(c.weight_hi / z_lo, FUNCTION_REL_MARGIN),
                                 m.mean, m.sigma,
                                 max(c.lower, cut_lo), min(c.upper, cut_hi)))
            else:
                others.append(c)
        table = np.array(gaussian, dtype=np.float64).reshape(-1, 6)
        names = ("w_lo", "w_hi", "mean", "sigma", "lo", "hi")
        return {name: table[:, k] for k, name in enumerate(names)}, others

    def mass(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Enclosure ``(lower, upper)`` of ``∫_a^b g`` (element-wise over ``a``, ``b``)."""
        a = np.atleast_1d(np.asarray(a, np.float64))
        b = np.atleast_1d(np.asarray(b, np.float64))
        table, others = self._flat
        low, high = np.zeros(a.shape), np.zeros(a.shape)
        if table["mean"].size:
            left = np.maximum(a[:, None], table["lo"][None])
            right = np.minimum(b[:, None], table["hi"][None])
            part = normal_interval(np.minimum(left, right), right, table["mean"][None],
                                   table["sigma"][None])
            empty = left > right
            low = low + np.where(empty, 0.0, part.lower) @ table["w_lo"]
            high = high + np.where(empty, 0.0, part.upper) @ table["w_hi"]
        for c in others:
            left, right = np.maximum(a, c.lower), np.minimum(b, c.upper)
            part_low, part_high = c.marginal.prob_boxes_interval(
                np.minimum(left, right)[:, None], right[:, None])
            empty = left > right
            low = low + c.weight_lo * np.where(empty, 0.0, part_low)
            high = high + c.weight_hi * np.where(empty, 0.0, part_high)
        margin = 4.0 * (len(others) + table["mean"].size + 1) * EPS + FUNCTION_REL_MARGIN
        return scaled_down(low, margin), scaled_up(high, margin)

    def bounds(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(L, U)`` with ``L <= g(t) <= U`` for all ``t ∈ [a, b]`` (element-wise)."""
        a = np.atleast_1d(np.asarray(a, np.float64))
        b = np.atleast_1d(np.asarray(b, np.float64))
        table, others = self._flat
        low, high = np.zeros(a.shape), np.zeros(a.shape)
        if table["mean"].size:
            part_low, part_high = _gaussian_bounds(table["mean"][None], table["sigma"][None],
                                                   a[:, None], b[:, None])
            covered = (a[:, None] >= table["lo"][None]) & (b[:, None] <= table["hi"][None])
            meets = (b[:, None] >= table["lo"][None]) & (a[:, None] <= table["hi"][None])
            low = low + np.where(covered, part_low, 0.0) @ table["w_lo"]
            high = high + np.where(meets, part_high, 0.0) @ table["w_hi"]
        for c in others:
            part_low, part_high = _marginal_bounds(c.marginal, a, b)
            covered = (a >= c.lower) & (b <= c.upper)
            meets = (b >= c.lower) & (a <= c.upper)
            low = low + c.weight_lo * np.where(covered, part_low, 0.0)
            high = high + c.weight_hi * np.where(meets, part_high, 0.0)
        margin = 4.0 * (len(others) + table["mean"].size + 1) * EPS + FUNCTION_REL_MARGIN
        return scaled_down(low, margin), scaled_up(high, margin)

    def core(self) -> tuple[float, float, float]:
        """``(low, high, tail)``: a finite interval and an upper bound on the mass of ``g``
        outside it."""
        ends = []
        for c in self.components:
            low, high = _marginal_core(c.marginal)
            low, high = max(low, c.lower), min(high, c.upper)
            if low < high:
                ends.append((low, high))
        if not ends:
            raise WMIInputError("a column's density has no mass")
        low, high = min(e[0] for e in ends), max(e[1] for e in ends)
        total = self.mass(np.array([-math.inf]), np.array([math.inf]))[1][0]
        kept = self.mass(np.array([low]), np.array([high]))[0][0]
        return low, high, max(0.0, float(total - kept))

    def total(self) -> tuple[float, float]:
        """Enclosure of the whole mass ``∫ g``."""
        low, high = self.mass(np.array([-math.inf]), np.array([math.inf]))
        return float(low[0]), float(high[0])

    def polynomial(self) -> bool:
        """Whether every component is piecewise polynomial (exact WMI applies)."""
        return all(_has_polynomial_form(c.marginal) for c in self.components)

    def polynomial_pieces(self) -> list[WeightPiece]:
        """The exact pieces (value weights) of a polynomial density, clipped to the
        restrictions; overlapping pieces add up."""
        pieces = []
        for c in self.components:
            for piece, weight in _weighted_pieces(c.marginal):
                low = max(float(piece.lower[0]), c.lower)
                high = min(float(piece.upper[0]), c.upper)
                if low < high:
                    scale = 0.5 * (c.weight_lo + c.weight_hi) * weight
                    pieces.append(WeightPiece(np.array([low]), np.array([high]),
                                              {k: v * scale for k, v in piece.polynomial.items()}))
        return pieces


def _weighted_pieces(marginal: Distribution) -> list[tuple[WeightPiece, float]]:
    if isinstance(marginal, Mixture):
        return [(piece, weight * inner)
                for weight, component in zip(marginal.normalised_weights, marginal.components,
                                             strict=True)
                for piece, inner in _weighted_pieces(component)]
    if isinstance(marginal, PiecewiseDensity | Uniform):
        return [(piece, 1.0) for piece in density_pieces(marginal)]
    raise WMIInputError(f"a {marginal.kind} marginal is not piecewise polynomial")


def uniform_density(low: float, high: float) -> Density1D:
    """The uniform density on ``[low, high]``."""
    return Density1D((Component(1.0, 1.0, Uniform(lower=low, upper=high)),))

