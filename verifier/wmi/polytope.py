"""Convex polytopes in H-representation ``A z <= b``: emptiness by LP, vertices, triangulation.

A polytope counts as non-empty only when it contains a ball of radius above ``RADIUS_TOL``
(Chebyshev centre, one HiGHS LP, :mod:`verifier.wmi.lp`): WMI ignores sets of measure zero,
and a convex set whose inscribed ball has radius ``r`` inside a region of diameter ``δ`` has
volume at most ``D · r · δ^(D−1)`` — so a dropped sliver changes an integral by at most that
bound times the weight's maximum (below 1e-9 of the mass on the bounded boxes this module is
used on).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial import Delaunay, HalfspaceIntersection, QhullError

from verifier.errors import CertgateInputError
from verifier.wmi.lp import minimise

RADIUS_TOL = 1e-11


class PolytopeError(CertgateInputError):
    """A polytope is unbounded or cannot be triangulated."""


@dataclass(frozen=True)
class Polytope:
    """``{z : A z <= b}`` with a strictly interior ``point`` (a Chebyshev centre, radius
    ``radius``)."""

    A: np.ndarray
    b: np.ndarray
    point: np.ndarray
    radius: float

    @property
    def dimension(self) -> int:
        return int(self.A.shape[1])


def chebyshev(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float] | None:
    """Centre and radius of the largest ball inside ``A z <= b``, or ``None`` when the set has
    no ball of radius above ``RADIUS_TOL`` (empty or measure zero)."""
    norms = np.linalg.norm(A, axis=1)
    rows = norms > 0
    if np.any(b[~rows] < 0):
        return None
    A, b, norms = A[rows], b[rows], norms[rows]
    dimension = A.shape[1]
    cost = np.zeros(dimension + 1)
    cost[-1] = -1.0
    lower = np.full(dimension + 1, -np.inf)
    lower[-1] = 0.0
    result = minimise(cost, np.hstack([A / norms[:, None], np.ones((A.shape[0], 1))]),
                      b / norms, lower, np.full(dimension + 1, np.inf))
    if result.status == "unbounded":
        raise PolytopeError("the integration domain is unbounded; give a bounded support")
    if result.x is None or result.x[-1] <= RADIUS_TOL:
        return None
    return result.x[:-1], float(result.x[-1])


def make_polytope(A: np.ndarray, b: np.ndarray) -> Polytope | None:
    """The polytope ``A z <= b`` if it has positive volume, else ``None``."""
    A = np.asarray(A, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    found = chebyshev(A, b)
    if found is None:
        return None
    return Polytope(A, b, found[0], found[1])


def box_constraints(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``A, b`` of the box ``lower <= z <= upper``."""
    eye = np.eye(lower.size)
    return np.vstack([eye, -eye]), np.concatenate([upper, -lower])


def vertices(poly: Polytope) -> np.ndarray:
    """Vertices ``(V, D)`` of a bounded polytope (duplicates possible, never missing)."""
    A, b = poly.A, poly.b
    norms = np.linalg.norm(A, axis=1)
    rows = norms > 0
    A, b = A[rows] / norms[rows, None], b[rows] / norms[rows]
    if poly.dimension == 1:
        coef = A[:, 0]
        upper = np.min(b[coef > 0] / coef[coef > 0]) if np.any(coef > 0) else math.inf
        lower = np.max(b[coef < 0] / coef[coef < 0]) if np.any(coef < 0) else -math.inf
        if not (math.isfinite(lower) and math.isfinite(upper)):
            raise PolytopeError("the integration domain is unbounded; give a bounded support")
        return np.array([[lower], [upper]])
    try:
        intersection = HalfspaceIntersection(np.hstack([A, -b[:, None]]), poly.point)
    except QhullError as error:
        raise PolytopeError(f"vertex enumeration failed: {error}") from error
    points = intersection.intersections
    if not np.isfinite(points).all():
        raise PolytopeError("the integration domain is unbounded; give a bounded support")
    return points


def triangulate(poly: Polytope) -> np.ndarray:
    """Simplices ``(S, D + 1, D)`` whose union is the polytope and whose interiors are
    disjoint (Delaunay triangulation of the vertices, which are in convex position)."""
    points = vertices(poly)
    if poly.dimension == 1:
        return points[None, :, :]
    try:
        triangulation = Delaunay(points)
    except QhullError as error:
        raise PolytopeError(f"triangulation failed: {error}") from error
    return points[triangulation.simplices]


def simplex_volumes(simplices: np.ndarray) -> np.ndarray:
    """Volumes of simplices ``(S, D + 1, D)``."""
    edges = simplices[:, 1:, :] - simplices[:, :1, :]
    dimension = simplices.shape[2]
    return np.abs(np.linalg.det(edges)) / math.factorial(dimension)
