"""Convex polytopes in H-representation ``A z <= b``: positive volume decided by proof, vertices,
triangulation.

:func:`make_polytope` returns a :class:`Polytope` only with a point proven strictly inside every
row (:func:`verifier.wmi.interior.strictly_inside`), ``None`` only when the polytope is proven
empty or of measure zero (:func:`verifier.wmi.interior.volume_bound` returns 0), and otherwise
an :class:`Undecided` box holding it with a bound on its volume (tiny for a sliver). The LP
that finds the candidates (a Chebyshev centre, HiGHS through :mod:`verifier.wmi.lp`) runs in
the coordinates of the polytope's own bounding box (constraint propagation,
:mod:`verifier.wmi.propagation`) scaled to ``[-1, 1]^D``, so its tolerances are relative to
the cell's scale; they only choose candidates, the proofs use the original data. No absolute
radius or tolerance drops a cell: a thin cell keeps its mass at every scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial import Delaunay, HalfspaceIntersection, QhullError

from verifier.errors import CertgateInputError
from verifier.wmi.interior import strictly_inside, volume_bound
from verifier.wmi.lp import LPError, minimise
from verifier.wmi.propagation import row_box, tightened

THIN = 1e-3  # Chebyshev radius, relative to the cell's box, below which a volume bound is kept


class PolytopeError(CertgateInputError):
    """A polytope is unbounded or cannot be triangulated."""


class TriangulationError(PolytopeError):
    """Qhull could not enumerate the vertices of, or triangulate, a bounded polytope."""


@dataclass(frozen=True)
class Polytope:
    """``{z : A z <= b}`` with a ``point`` proven strictly inside (at distance about
    ``radius`` from the nearest facet) and an upper bound ``volume`` on its volume (computed
    for cells thinner than :data:`THIN` of their box, else infinite)."""

    A: np.ndarray
    b: np.ndarray
    point: np.ndarray
    radius: float
    volume: float = math.inf

    @property
    def dimension(self) -> int:
        return int(self.A.shape[1])


@dataclass(frozen=True)
class Undecided:
    """A polytope neither proven to have an interior nor proven to have none, the box
    ``[lower, upper]`` proven to hold it and an upper bound ``volume`` on its volume."""

    lower: np.ndarray
    upper: np.ndarray
    volume: float


def row_norms(A: np.ndarray) -> np.ndarray:
    """Euclidean norms of the rows, free of overflow and underflow (each row scaled by its
    largest magnitude first), so that they mean the same at every scale."""
    largest = np.abs(A).max(axis=1, initial=0.0)
    safe = np.where(largest > 0, largest, 1.0)
    return largest * np.linalg.norm(A / safe[:, None], axis=1)


def enclosing_box(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A box proven to hold ``A z <= b`` (propagation from the single-coordinate rows); the
    whole space when those rows leave a coordinate unbounded; ``None`` when proven empty."""
    start = row_box(A, b)
    if start is None:
        dimension = A.shape[1]
        return np.full(dimension, -np.inf), np.full(dimension, np.inf)
    return tightened(A, b, start[0], start[1], sweeps=5)


def scaling(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre and half-widths mapping ``[-1, 1]^D`` onto the box (unit where unbounded)."""
    finite = np.isfinite(lower) & np.isfinite(upper)
    low, high = np.where(finite, lower, -1.0), np.where(finite, upper, 1.0)
    return 0.5 * low + 0.5 * high, 0.5 * high - 0.5 * low


def chebyshev(A: np.ndarray, b: np.ndarray) -> Polytope | Undecided | None:
    """Decide whether ``A z <= b`` has an interior (module docstring): a :class:`Polytope`
    with a proven interior point, ``None`` when proven empty or of measure zero, else
    :class:`Undecided`."""
    norms = row_norms(A)
    rows = norms > 0
    if np.any(b[~rows] < 0):
        return None  # a row 0 <= b_i < 0: no point at all
    A, b, norms = A[rows], b[rows], norms[rows]
    box = enclosing_box(A, b)
    if box is None:
        return None
    lower, upper = box
    if np.any(lower >= upper):
        return None  # the polytope lies in a hyperplane z_j = const
    middle, half = scaling(lower, upper)
    scaled = A * half[None, :]
    shifted = b - A @ middle
    scale = row_norms(scaled)
    if np.any(scale == 0):
        return Undecided(lower, upper, float(np.prod(upper - lower)))
    dimension = A.shape[1]
    cost = np.zeros(dimension + 1)
    cost[-1] = -1.0
    free = np.full(dimension + 1, np.inf)
    try:
        result = minimise(cost, np.hstack([scaled / scale[:, None],
                                           np.ones((A.shape[0], 1))]),
                          shifted / scale, -free, free)
    except LPError:
        return Undecided(lower, upper, float(np.prod(upper - lower)))
    if result.status == "unbounded":
        raise PolytopeError("the integration domain is unbounded; give a bounded support")
    if result.x is None or result.dual is None:
        return Undecided(lower, upper, float(np.prod(upper - lower)))
    centre = middle + half * result.x[:-1]
    # multipliers of the original rows, up to a common positive factor (the certificate is
    # homogeneous in them) chosen so that no scale overflows
    multipliers = result.dual * (scale.min() / scale)
    if result.x[-1] > 0 and strictly_inside(A, b, centre).all():
        distance = (b - A @ centre) / norms
        volume = math.inf
        if result.x[-1] < THIN:
            volume = volume_bound(A, b, multipliers, lower, upper) or math.inf
        return Polytope(A, b, centre, float(distance.min()), volume)
    volume = volume_bound(A, b, multipliers, lower, upper)
    return None if volume == 0.0 else Undecided(lower, upper, volume)


def make_polytope(A: np.ndarray, b: np.ndarray) -> Polytope | Undecided | None:
    """The polytope ``A z <= b`` with a proven interior point, ``None`` if proven empty or
    of measure zero, else :class:`Undecided` (see :func:`chebyshev`)."""
    return chebyshev(np.asarray(A, dtype=np.float64), np.asarray(b, dtype=np.float64))


def box_constraints(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``A, b`` of the box ``lower <= z <= upper``."""
    eye = np.eye(lower.size)
    return np.vstack([eye, -eye]), np.concatenate([upper, -lower])


def vertices(poly: Polytope) -> np.ndarray:
    """Vertices ``(V, D)`` of a bounded polytope (duplicates possible, never missing)."""
    points, middle, half = _unit_vertices(poly)
    return middle + half * points


def _unit_vertices(poly: Polytope) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The vertices in the coordinates ``u`` of the polytope's enclosing box scaled to
    ``[-1, 1]^D`` (``z = middle + half · u``), with ``middle`` and ``half``. Qhull's
    tolerances are relative to the data's extent, so a cell 1e-12 wide in one coordinate and
    1000 in another is a flat simplex to it in ``z`` (its halfspaces' dual points reach
    1e12) but a well-shaped one in ``u``. A coordinate the box leaves unbounded keeps its
    unit scale (:func:`scaling`)."""
    box = enclosing_box(poly.A, poly.b)
    if box is None:  # proven empty: cannot be, the polytope holds a point strictly inside
        raise TriangulationError("vertex enumeration failed: the cell's box is empty")
    middle, half = scaling(*box)
    A, b = poly.A * half[None, :], poly.b - poly.A @ middle
    norms = row_norms(A)
    rows = norms > 0
    A, b = A[rows] / norms[rows, None], b[rows] / norms[rows]
    if poly.dimension == 1:
        coef = A[:, 0]
        upper = np.min(b[coef > 0] / coef[coef > 0]) if np.any(coef > 0) else math.inf
        lower = np.max(b[coef < 0] / coef[coef < 0]) if np.any(coef < 0) else -math.inf
        if not (math.isfinite(lower) and math.isfinite(upper)):
            raise PolytopeError("the integration domain is unbounded; give a bounded support")
        return np.array([[lower], [upper]]), middle, half
    try:
        intersection = HalfspaceIntersection(np.hstack([A, -b[:, None]]),
                                             (poly.point - middle) / half)
    except QhullError as error:
        raise TriangulationError(f"vertex enumeration failed: {error}") from error
    points = intersection.intersections
    if not np.isfinite(points).all():
        raise PolytopeError("the integration domain is unbounded; give a bounded support")
    return points, middle, half


def triangulate(poly: Polytope) -> np.ndarray:
    """Simplices ``(S, D + 1, D)`` whose union is the polytope and whose interiors are
    disjoint (Delaunay triangulation of the vertices, which are in convex position, taken in
    the scaled coordinates of :func:`_unit_vertices`: an affine map keeps a triangulation
    one)."""
    points, middle, half = _unit_vertices(poly)
    if poly.dimension == 1:
        return (middle + half * points)[None, :, :]
    try:
        triangulation = Delaunay(points)
    except QhullError as error:
        raise TriangulationError(f"triangulation failed: {error}") from error
    return (middle + half * points)[triangulation.simplices]


def simplex_volumes(simplices: np.ndarray) -> np.ndarray:
    """Volumes of simplices ``(S, D + 1, D)``."""
    edges = simplices[:, 1:, :] - simplices[:, :1, :]
    dimension = simplices.shape[2]
    return np.abs(np.linalg.det(edges)) / math.factorial(dimension)
