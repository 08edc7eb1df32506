"""Depth-first enumeration of the convex regions of piecewise-affine models.

A :class:`Region` is a full-dimensional polytope with an interior witness point. Splitting by a
hyperplane costs at most one LP: the side holding the witness strictly is non-empty for free,
only the other side is checked (Chebyshev LP, HiGHS), unless constraint propagation over the
root box's rows proves it empty first (:func:`verifier.wmi.propagation.provably_empty`, no
LP). A model enumerates ``(region, outputs)`` pairs, ``outputs = (S, t)`` the affine map
``z -> S z + t`` of its output vector on the region; the regions of one model partition its
input region up to measure zero.

ReLU networks branch only on neurons that bound propagation (CROWN over the root's input box,
:func:`verifier.bounds.compute_bounds`) leaves unstable; stable neurons are fixed without an LP.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from verifier.bounds import ACTIVE, compute_bounds
from verifier.network import Network
from verifier.wmi.interior import safe_box, strictly_inside
from verifier.wmi.lp import LPError, coordinate_extremes
from verifier.wmi.polytope import (
    Polytope,
    PolytopeError,
    Undecided,
    enclosing_box,
    make_polytope,
    row_norms,
    scaling,
)
from verifier.wmi.propagation import provably_empty

Outputs = tuple[np.ndarray, np.ndarray]
INTERIOR_MARGIN = 1e-7


@dataclass
class Counters:
    """Work done: LPs solved, complete regions reached, polytopes integrated, and of those
    ``bounded``: cells whose mass is only bounded (``[0, sup |w| · volume]``), not integrated,
    because float64 could neither prove their interior nor triangulate them."""

    lps: int = 0
    regions: int = 0
    integrals: int = 0
    bounded: int = 0

    def add(self, other: Counters) -> None:
        self.lps += other.lps
        self.regions += other.regions
        self.integrals += other.integrals
        self.bounded += other.bounded


@dataclass
class Region:
    """A polytope ``A z <= b`` with a ``point`` proven strictly inside it (so of positive
    volume), or ``point`` None: a cell whose interior could be neither proven nor refuted,
    kept so that its mass is counted as uncertain (:class:`~verifier.wmi.polytope.Undecided`).
    ``volume`` is an upper bound on its volume (infinite when unknown; a sub-region inherits
    it)."""

    A: np.ndarray
    b: np.ndarray
    point: np.ndarray | None
    counters: Counters = field(repr=False)
    volume: float = math.inf

    @property
    def decided(self) -> bool:
        return self.point is not None

    def restrict(self, A: np.ndarray, b: np.ndarray) -> Region | None:
        """The intersection with ``A z <= b``; ``None`` only when proven empty or of measure
        zero."""
        if A.shape[0] == 0:
            return self
        stacked_A, stacked_b = np.vstack([self.A, A]), np.concatenate([self.b, b])
        if self.point is not None and strictly_inside(A, b, self.point).all():
            return Region(stacked_A, stacked_b, self.point, self.counters, self.volume)
        return self._decided(stacked_A, stacked_b)

    def split(self, a: np.ndarray, c: float) -> tuple[Region | None, Region | None]:
        """``(region ∩ {a·z + c >= 0}, region ∩ {a·z + c <= 0})``, each ``None`` only when
        proven of measure zero. A zero ``a`` keeps the whole region on the side the constant
        ``c`` selects."""
        if not np.any(a):
            return (self, None) if c >= 0 else (None, self)
        return self._with(-a, c), self._with(a, -c)

    def _with(self, a: np.ndarray, bound: float) -> Region | None:
        A, b = np.vstack([self.A, a[None]]), np.append(self.b, bound)
        if self.point is not None and strictly_inside(a[None], np.array([bound]),
                                                      self.point)[0]:
            return Region(A, b, self.point, self.counters, self.volume)
        return self._decided(A, b)

    def _decided(self, A: np.ndarray, b: np.ndarray) -> Region | None:
        """The region ``A z <= b`` after propagation and the LP's proofs."""
        if provably_empty(A, b):
            return None
        self.counters.lps += 1
        poly = make_polytope(A, b)
        if poly is None:
            return None
        if isinstance(poly, Undecided):
            return Region(A, b, None, self.counters, min(self.volume, poly.volume))
        return Region(poly.A, poly.b, poly.point, self.counters, min(self.volume, poly.volume))

    def bounding_box(self) -> tuple[np.ndarray, np.ndarray]:
        """A box proven to contain the region: the ``2 D`` LP bounds (HiGHS, in the
        coordinates of the region's propagated box scaled to ``[-1, 1]^D``, one model
        re-solved warm per cost) made rigorous by weak duality
        (:func:`~verifier.wmi.interior.safe_box`), within the propagated box."""
        box = enclosing_box(self.A, self.b)
        if box is None:
            raise PolytopeError("bounding an empty region")
        lower, upper = box
        if not (np.isfinite(lower).all() and np.isfinite(upper).all()):
            raise PolytopeError("the integration domain is unbounded; give a bounded support")
        middle, half = scaling(lower, upper)
        scaled = self.A * half[None, :]
        norms = row_norms(scaled)
        rows = norms > 0
        self.counters.lps += 2 * self.A.shape[1]
        try:
            duals, _ = coordinate_extremes(scaled[rows] / norms[rows, None],
                                           (self.b[rows] - self.A[rows] @ middle) / norms[rows])
        except LPError:
            return lower, upper
        multipliers = np.zeros((*duals.shape[:2], self.A.shape[0]))
        multipliers[:, :, rows] = duals / norms[rows] / np.where(half > 0, half, 1.0)[:, None, None]
        return safe_box(self.A, self.b, multipliers, lower, upper)

    def polytope(self) -> Polytope | Undecided | None:
        """The region for vertex enumeration: with the witness when it is clearly interior
        (every facet at least ``INTERIOR_MARGIN`` times the farthest one away: relative, for
        Qhull's precision), else with a Chebyshev centre; :class:`Undecided` or ``None`` as
        :func:`~verifier.wmi.polytope.make_polytope` decides."""
        if self.point is not None:
            norms = row_norms(self.A)
            slack = (self.b - self.A @ self.point) / np.where(norms > 0, norms, 1.0)
            if slack.min() > INTERIOR_MARGIN * slack.max():
                return Polytope(self.A, self.b, self.point, float(slack.min()))
        self.counters.lps += 1
        return make_polytope(self.A, self.b)


def box_of(region_lo: np.ndarray, region_hi: np.ndarray, matrix: np.ndarray,
           offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Interval image of the box ``[region_lo, region_hi]`` under ``z -> matrix z + offset``."""
    centre, radius = (region_hi + region_lo) / 2, (region_hi - region_lo) / 2
    middle = matrix @ centre + offset
    spread = np.abs(matrix) @ radius
    return middle - spread, middle + spread


class PiecewiseAffineModel:
    """Interface: ``pieces(region, matrix, offset, z_lo, z_hi)`` yields ``(region, outputs)``
    for the model applied to ``x = matrix z + offset`` on ``region`` (inside the z-box)."""

    output_size: int

    def pieces(self, region: Region, matrix: np.ndarray, offset: np.ndarray,
               z_lo: np.ndarray, z_hi: np.ndarray) -> Iterator[tuple[Region, Outputs]]:
        raise TypeError(f"{type(self).__name__} does not enumerate regions")


class NetworkModel(PiecewiseAffineModel):
    """A ReLU / LeakyReLU network (lowered IR) as a piecewise-affine model."""

    def __init__(self, network: Network, bound_method: str = "crown") -> None:
        self.network = network.lowered()
        self.output_size = self.network.output_size
        self.bound_method = bound_method
        self._status_cache: dict[bytes, list[np.ndarray]] = {}

    def status(self, x_lo: np.ndarray, x_hi: np.ndarray) -> list[np.ndarray]:
        """Per layer: 1 stable active, -1 stable inactive, 0 unstable, over the input box (all
        neurons unstable when bound propagation is off)."""
        layers = self.network.layers
        if self.bound_method == "none":
            return [np.zeros(layer.out_features, dtype=np.int8) for layer in layers]
        result = compute_bounds(self.network, x_lo[None], x_hi[None], method=self.bound_method)
        return [result.activation_status(k)[0] if k in result.pre_lower
                else np.zeros(layer.out_features, dtype=np.int8)
                for k, layer in enumerate(layers)]

    def pieces(self, region: Region, matrix: np.ndarray, offset: np.ndarray,
               z_lo: np.ndarray, z_hi: np.ndarray) -> Iterator[tuple[Region, Outputs]]:
        x_lo, x_hi = box_of(z_lo, z_hi, matrix, offset)
        key = x_lo.tobytes() + x_hi.tobytes()
        if key not in self._status_cache:
            self._status_cache = {key: self.status(x_lo, x_hi)}
        status = self._status_cache[key]
        yield from self._walk(region, 0, matrix, offset, status)

    def _walk(self, region: Region, index: int, H: np.ndarray, g: np.ndarray,
              status: list[np.ndarray]) -> Iterator[tuple[Region, Outputs]]:
        layer = self.network.layers[index]
        pre_H, pre_g = layer.weight @ H, layer.weight @ g + layer.bias
        if index == len(self.network.layers) - 1 and layer.activation == "none":
            yield region, (pre_H, pre_g)
            return
        if layer.activation == "none":
            yield from self._walk(region, index + 1, pre_H, pre_g, status)
            return
        unstable = np.flatnonzero(status[index] == 0)
        active = status[index] == ACTIVE
        yield from self._branch(region, index, pre_H, pre_g, active, unstable, 0, status)

    def _branch(self, region: Region, index: int, pre_H: np.ndarray, pre_g: np.ndarray,
                active: np.ndarray, unstable: np.ndarray, position: int,
                status: list[np.ndarray]) -> Iterator[tuple[Region, Outputs]]:
        if position == unstable.size:
            layer = self.network.layers[index]
            slopes = np.where(active, 1.0, layer.negative_slope_effective)
            H, g = slopes[:, None] * pre_H, slopes * pre_g
            if index == len(self.network.layers) - 1:
                yield region, (H, g)
            else:
                yield from self._walk(region, index + 1, H, g, status)
            return
        neuron = unstable[position]
        on, off = region.split(pre_H[neuron], float(pre_g[neuron]))
        for side, is_active in ((on, True), (off, False)):
            if side is None:
                continue
            chosen = active.copy()
            chosen[neuron] = is_active
            yield from self._branch(side, index, pre_H, pre_g, chosen, unstable, position + 1,
                                    status)
