"""A prior term's continuous factors placed on the coordinates of a query's integration
space (:func:`place_term`): its polynomial factors as weight factors, each non-polynomial 1-D
density as weight 1 on its core with an envelope coordinate (its tail beyond the core counted
as ``lost`` mass), and the box the factors span; and how many root regions those factors list
(:func:`root_count`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from verifier.wmi.encode import WeightFactor, WeightPiece, WMIInputError
from verifier.wmi.marginals import Density1D
from verifier.wmi.polynomial import constant
from verifier.wmi.properties.term_mass import factor_mass
from verifier.wmi.terms import Term


@dataclass
class Layout:
    """Weight factors, envelope coordinates and left-out mass of one term's query."""

    factors: list[WeightFactor]
    envelopes: list[tuple[int, Density1D]]
    lost: float
    lower: np.ndarray
    upper: np.ndarray


def place_term(term: Term, index: dict[int, int], width: int) -> Layout:
    """The term's continuous factors on the integration coordinates ``index[column]``."""
    factors, envelopes, lost = [], [], 0.0
    lower, upper = np.full(width, -np.inf), np.full(width, np.inf)
    for factor in term.poly:
        positions = [index[j] for j in factor.positions]
        factors.append(WeightFactor(positions, list(factor.pieces)))
        lower[positions] = np.min([p.lower for p in factor.pieces], axis=0)
        upper[positions] = np.max([p.upper for p in factor.pieces], axis=0)
    for j, density in term.densities.items():
        if place_density(j, index[j], density, factors, envelopes, lower, upper):
            lost += term.coefficient[2] * tail_mass(density) * factor_mass(term, j)
    return Layout(factors, envelopes, lost, lower, upper)


def place_density(column: int, position: int, density: Density1D,
                  factors: list[WeightFactor], envelopes: list[tuple[int, Density1D]],
                  lower: np.ndarray, upper: np.ndarray) -> bool:
    """Put a column's density on ``position``: exact pieces, or weight 1 on its core with an
    envelope entry (then ``True``)."""
    if density.polynomial():
        pieces = density.polynomial_pieces()
        if not pieces:
            raise WMIInputError(f"column {column} has no mass in a part of the prior")
        factors.append(WeightFactor([position], pieces))
        lower[position] = min(p.lower[0] for p in pieces)
        upper[position] = max(p.upper[0] for p in pieces)
        return False
    low, high, _ = density.core()
    factors.append(WeightFactor([position], [WeightPiece(np.array([low]), np.array([high]),
                                                         constant(1.0, 1))]))
    envelopes.append((position, density))
    lower[position], upper[position] = low, high
    return True


def tail_mass(density: Density1D) -> float:
    """An upper bound of the density's mass beyond its core (what its envelope leaves out)."""
    return density.core()[2]


def root_count(term: Term, dimension: int, box_lo: np.ndarray | None = None,
               box_hi: np.ndarray | None = None) -> int:
    """How many root regions the term's factors list: the product of their piece counts,
    counting only the pieces that meet the precondition box ``[box_lo, box_hi]`` (by column;
    none: no box)."""
    free = [j for j in range(dimension) if j not in term.atoms]
    layout = place_term(term, {j: k for k, j in enumerate(free)}, len(free))
    if box_lo is None or box_hi is None:
        return math.prod(len(factor.pieces) for factor in layout.factors)
    lo, hi = box_lo[free], box_hi[free]
    return math.prod(
        sum(bool(np.all(np.maximum(piece.lower, lo[factor.positions])
                        < np.minimum(piece.upper, hi[factor.positions])))
            for piece in factor.pieces)
        for factor in layout.factors)


def term_offset(term: Term, dimension: int) -> np.ndarray:
    """The input with the term's fixed columns at their values and 0 elsewhere."""
    offset = np.zeros(dimension)
    for j, v in term.atoms.items():
        offset[j] = v
    return offset
