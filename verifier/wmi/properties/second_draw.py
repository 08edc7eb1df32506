"""Monotonicity's second copy of the compared feature, ``x′_i``: an independent draw of the
feature's marginal under the prior, split into its density part and its values
(:class:`SecondDraw`), and the query of the pairs that start at one prior term and take one
part (:meth:`SecondDraw.query`).

The marginal sums the prior's terms: each term's part in the feature times its coefficient
and the mass of its other factors (:mod:`~verifier.wmi.properties.term_mass`). A value's
probability is an outward-rounded enclosure; the density part is exact pieces (float64
coefficients, as every polynomial weight) or, when some part is not polynomial, a
:class:`~verifier.wmi.marginals.Density1D` whose components carry the coefficient and mass
enclosures, integrated through certified envelopes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from verifier.numerics import EPS, FUNCTION_REL_MARGIN, scaled_down, scaled_up
from verifier.wmi.encode import Placement, WeightFactor, WeightPiece, WMIInputError
from verifier.wmi.engine import Query, point_query
from verifier.wmi.marginals import Density1D
from verifier.wmi.points import point_placement
from verifier.wmi.properties.layout import place_density, place_term, tail_mass, term_offset
from verifier.wmi.properties.term_mass import factor_mass, factor_masses, termset_mass
from verifier.wmi.regions import PiecewiseAffineModel
from verifier.wmi.roots import build_roots
from verifier.wmi.terms import Coefficient, Term, TermSet, times

Part = tuple[float, Coefficient] | None
"""One part of the second draw: a value with its probability, or None for its density."""


class SecondDraw:
    """Monotonicity's second draw ``x′_i`` of the feature, independent of ``x``, split into
    its density part (the terms leaving the feature free: exact pieces, or a
    :class:`Density1D` when some part is not polynomial) and its values (the terms fixing
    it: ``P(x′_i = v)`` as enclosures); either may be empty."""

    def __init__(self, termset: TermSet, feature: int, decreasing: bool) -> None:
        self.feature = feature
        self.decreasing = decreasing
        free = [t for t in termset.terms if feature not in t.atoms]
        fixed = [t for t in termset.terms if feature in t.atoms]
        self.pieces: list[WeightPiece] | None = None
        self.density: Density1D | None = None
        if free:
            self.pieces, self.density = _copy_marginal(termset.name(feature), free, feature)
        self.values = _value_marginal(fixed, feature)
        self._copies = math.nan  # a bound of the density part's mass, when first needed

    def parts(self, term: Term) -> list[Part]:
        """The parts a pair starting at ``term`` may take: the density part, and the values
        the order admits strictly when the term fixes the feature, else every value."""
        density = self.pieces is not None or self.density is not None
        parts: list[Part] = [None] if density else []
        mine = term.atoms.get(self.feature)
        for value, weight in sorted(self.values.items()):
            ordered = mine is None or (value < mine if self.decreasing else value > mine)
            if ordered and weight[2] > 0:
                parts.append((value, weight))
        return parts

    def root_factor(self, term: Term) -> int:
        """Roots per root of the term: the density part's pieces and one per value."""
        pieces = 0
        if self.pieces is not None:
            pieces = len(self.pieces)
        elif self.density is not None:
            pieces = 1
        return pieces + sum(part is not None for part in self.parts(term))

    def mass(self, part: Part, termset: TermSet) -> float:
        """Upper bound of the part's probability (the density part: the prior's mass)."""
        if part is not None:
            return part[1][2]
        if math.isnan(self._copies):
            self._copies = termset_mass(termset)
        return self._copies

    def query(self, wrapped: PiecewiseAffineModel, term: Term, part: Part, dimension: int,
              violation: Any, deadline: float) -> Query:
        """The query of pairs from ``term`` and ``part`` (a point query when nothing is
        left to integrate)."""
        feature = self.feature
        free = [j for j in range(dimension) if j not in term.atoms]
        index = {j: k for k, j in enumerate(free)}
        width = len(free) + (part is None)
        offset = term_offset(term, dimension)
        moved = offset.copy()
        coefficient = term.coefficient
        if part is not None:
            moved[feature] = part[0]
            coefficient = times(coefficient, part[1])
        else:  # the second copy reads the feature from its own coordinate
            moved[feature] = 0.0
        if width == 0:
            return point_query([point_placement(wrapped, offset),
                                point_placement(wrapped, moved)], violation, coefficient)
        layout = place_term(term, index, width)
        sign = -1.0 if self.decreasing else 1.0
        order = np.zeros((1, width))
        bound = 0.0
        if part is None:  # x′_i from the density part, on the last coordinate
            copy = width - 1
            if self.pieces is not None:
                layout.factors.append(WeightFactor([copy], self.pieces))
                layout.lower[copy] = min(p.lower[0] for p in self.pieces)
                layout.upper[copy] = max(p.upper[0] for p in self.pieces)
            else:
                place_density(feature, copy, self.density, layout.factors, layout.envelopes,
                              layout.lower, layout.upper)
                layout.lost += term.coefficient[2] * factor_mass(term) * tail_mass(self.density)
            order[0, copy] = -sign
            if feature in index:
                order[0, index[feature]] = sign
            else:
                bound = -sign * term.atoms[feature]
        else:
            layout.lost *= part[1][2]
            if feature in index:
                order[0, index[feature]] = sign
                bound = sign * part[0]
        first = np.zeros((dimension, width))
        for j, k in index.items():
            first[j, k] = 1.0
        second = first.copy()
        if feature in index:
            second[feature, index[feature]] = 0.0
        if part is None:
            second[feature, width - 1] = 1.0
        precondition = (order, np.array([bound])) if order.any() else (None, None)
        roots, mass_bound = build_roots(width, layout.factors, layout.lower, layout.upper,
                                        *precondition, deadline, tuple(layout.envelopes))
        placements = [Placement(wrapped, first, offset), Placement(wrapped, second, moved)]
        return Query(width, roots, placements, violation, coefficient,
                     tuple(layout.envelopes), layout.lost, mass_bound=mass_bound)


def _copy_marginal(name: str, terms: list[Term], feature: int
                   ) -> tuple[list[WeightPiece] | None, Density1D | None]:
    """The marginal of column ``feature`` (named ``name``) over ``terms``, each leaving it
    free, for the second copy ``x′_i``: exact pieces when every part is polynomial, else a
    :class:`Density1D`."""
    densities = [t.densities.get(feature) for t in terms]
    if all(d is not None for d in densities) and not all(d.polynomial() for d in densities):
        components = []
        for term, density in zip(terms, densities, strict=True):
            rest_lo, rest_hi = factor_masses(term, feature)
            components.extend(density.scaled(term.coefficient[0] * rest_lo,
                                             term.coefficient[2] * rest_hi).components)
        return None, Density1D(tuple(components))
    if any(d is not None and not d.polynomial() for d in densities):
        raise WMIInputError(f"column {name!r} mixes a multi-column "
                            "polynomial density with non-polynomial ones")
    pieces: list[WeightPiece] = []
    for term, density in zip(terms, densities, strict=True):
        value = term.coefficient[1] * factor_mass(term, feature)
        if density is not None:
            pieces.extend(WeightPiece(p.lower, p.upper,
                                      {k: v * value for k, v in p.polynomial.items()})
                          for p in density.polynomial_pieces())
            continue
        factor = next(f for f in term.poly if feature in f.positions)
        where = factor.positions.index(feature)
        for piece in factor.pieces:
            pieces.extend(_marginal_piece(piece, where, value))
    return _same_boxes_added(pieces), None


def _same_boxes_added(pieces: list[WeightPiece]) -> list[WeightPiece]:
    """``pieces`` with those on the same interval made one (polynomials added): the terms
    that differ only in columns other than the feature repeat its pieces."""
    boxes: dict[tuple[float, float], dict[tuple[int, ...], float]] = {}
    for piece in pieces:
        polynomial = boxes.setdefault((float(piece.lower[0]), float(piece.upper[0])), {})
        for exponents, coefficient in piece.polynomial.items():
            polynomial[exponents] = polynomial.get(exponents, 0.0) + coefficient
    return [WeightPiece(np.array([low]), np.array([high]), polynomial)
            for (low, high), polynomial in boxes.items()]


def _marginal_piece(piece: WeightPiece, where: int, scale: float) -> list[WeightPiece]:
    """``∫ piece`` over every coordinate but ``where`` (a polynomial in that coordinate)."""
    result: dict[tuple[int, ...], float] = {}
    for exponents, coefficient in piece.polynomial.items():
        value = coefficient * scale
        for k, (e, low, high) in enumerate(zip(exponents, piece.lower, piece.upper,
                                               strict=True)):
            if k != where:
                value *= (high ** (e + 1) - low ** (e + 1)) / (e + 1)
        key = (exponents[where],)
        result[key] = result.get(key, 0.0) + value
    return [WeightPiece(piece.lower[[where]], piece.upper[[where]], result)]


def _value_marginal(terms: list[Term], feature: int) -> dict[float, Coefficient]:
    """``P(x_feature = v)`` for every value ``v`` the ``terms`` (each fixing the column) give
    it, as enclosures: the sum of the coefficients of the terms fixing ``v``, each times the
    mass of its continuous factors (outward-rounded)."""
    sums: dict[float, list[float]] = {}
    for term in terms:
        low, high = factor_masses(term)
        c = term.coefficient
        entry = sums.setdefault(term.atoms[feature], [0.0, 0.0, 0.0, 0])
        entry[0] += c[0] * low
        entry[1] += c[1] * 0.5 * (low + high)
        entry[2] += c[2] * high
        entry[3] += 1
    marginal = {}
    for value, (low, mid, high, count) in sums.items():
        margin = FUNCTION_REL_MARGIN + 4 * (count + 2) * EPS
        marginal[value] = (scaled_down(low, margin), mid, scaled_up(high, margin))
    return marginal
