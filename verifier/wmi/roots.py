"""A query's top-level regions, its roots: one box per combination of its weight factors'
pieces that meets the precondition (:func:`build_roots`), and a bound of their total mass
that costs one pass over the pieces, not over the roots (:func:`roots_mass_bound`), which is
how the solver (:mod:`verifier.wmi.engine`) bounds the roots a deadline leaves unprepared.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np

from verifier.numerics import add_up, mul_up
from verifier.wmi.encode import Root, WeightFactor, WMIInputError
from verifier.wmi.marginals import Density1D
from verifier.wmi.polynomial import box_bound, compiled, constant, embed, multiply


class DeadlineReached(Exception):
    """The deadline passed while :func:`build_roots` listed combinations of pieces, while
    the solver enumerated a root's regions (:func:`verifier.wmi.engine.root_masses`), or
    while box branching's uniform measure listed the values of positive probability
    (:class:`verifier.wmi.measures.SupportUniform`)."""


def build_roots(dimension: int, factors: list[WeightFactor], pre_lower: np.ndarray,
                pre_upper: np.ndarray, pre_A: np.ndarray | None = None,
                pre_b: np.ndarray | None = None, deadline: float = np.inf,
                envelopes: tuple[tuple[int, Density1D], ...] = ()
                ) -> tuple[list[Root], float]:
    """One root per combination of pieces whose boxes meet inside the precondition box
    ``[pre_lower, pre_upper]`` (extra precondition rows ``pre_A z <= pre_b``), and an upper
    bound of the sum of the roots' masses (:func:`roots_mass_bound`; ``envelopes`` as in
    :class:`~verifier.wmi.engine.Query`); raises :class:`DeadlineReached` once ``deadline``
    (``time.perf_counter()``) has passed."""
    if not (np.isfinite(pre_lower).all() and np.isfinite(pre_upper).all()):
        raise WMIInputError("the integration domain is unbounded: every coordinate needs a "
                            "bounded support or precondition box")
    pre_A = np.zeros((0, dimension)) if pre_A is None else np.asarray(pre_A, np.float64)
    pre_b = np.zeros(0) if pre_b is None else np.asarray(pre_b, np.float64)
    roots = []
    for count, combination in enumerate(itertools.product(*(factor.pieces
                                                            for factor in factors))):
        if count % 1024 == 0 and time.perf_counter() >= deadline:
            raise DeadlineReached
        lower, upper = pre_lower.copy(), pre_upper.copy()
        weight = constant(1.0, dimension)
        for factor, piece in zip(factors, combination, strict=True):
            positions = factor.positions
            lower[positions] = np.maximum(lower[positions], piece.lower)
            upper[positions] = np.minimum(upper[positions], piece.upper)
            weight = multiply(weight, embed(piece.polynomial, positions, dimension))
        if np.all(lower < upper):
            roots.append(Root(lower, upper, pre_A, pre_b, weight))
    return roots, roots_mass_bound(factors, pre_lower, pre_upper, envelopes)


def roots_mass_bound(factors: list[WeightFactor], pre_lower: np.ndarray,
                     pre_upper: np.ndarray, envelopes: tuple[tuple[int, Density1D], ...] = ()
                     ) -> float:
    """An upper bound of ``Σ_roots ∫_root w`` over the roots :func:`build_roots` lists, in
    time linear in the number of pieces (not of roots).

    Guarantee: with the factors on disjoint coordinates, each root's box is a product of one
    piece box per factor (cut to the precondition box) and its weight the product of those
    pieces' polynomials, so the sum over all combinations is at most
    ``Π_factors Σ_pieces ∫_{piece ∩ pre} |p|``; each inner integral is bounded by
    :func:`~verifier.wmi.polynomial.box_bound`, or, on an envelope coordinate (weight 1 on
    the density's core), by the certified mass of its density
    (:meth:`~verifier.wmi.marginals.Density1D.mass`). Sums and products round upward through
    :mod:`verifier.numerics`. Factors that share a coordinate give ``inf`` (no bound)."""
    positions = [p for factor in factors for p in factor.positions]
    if len(set(positions)) != len(positions):
        return math.inf
    densities = dict(envelopes)
    bound = 1.0
    for factor in factors:
        where = factor.positions
        total = 0.0
        for piece in factor.pieces:
            lower = np.maximum(piece.lower, pre_lower[where])
            upper = np.minimum(piece.upper, pre_upper[where])
            if not np.all(lower < upper):
                continue
            if len(where) == 1 and where[0] in densities:
                mass = float(densities[where[0]].mass(lower, upper)[1][0])
            else:
                mass = box_bound(*compiled(piece.polynomial, len(where)), lower, upper)
            total = float(add_up(total, mass))
        bound = float(mul_up(bound, total))
    return bound
