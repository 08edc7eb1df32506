"""Weights and queries: population densities as polynomial pieces placed on coordinates of the
integration space ``z``, models placed on affine images of ``z``, and violation conditions.

Only piecewise-polynomial densities have exact integrals: a :class:`PiecewiseDensity`
(density-estimation tree or polynomial leaves), a ``Uniform`` marginal, and independent
``Product``\\ s of those. Anything else (a Gaussian, a Bayesian network, an unbounded support)
is refused with a :class:`WMIInputError` that says how to approximate it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verifier.errors import CertgateInputError
from verifier.population import (
    Categorical,
    Discrete,
    PiecewiseDensity,
    PointMass,
    PopulationModel,
    Product,
    Uniform,
)
from verifier.population.base import Distribution
from verifier.wmi.polynomial import Polynomial, constant, embed, multiply, substitute_affine
from verifier.wmi.regions import Outputs, PiecewiseAffineModel

APPROXIMATE_HINT = (
    "exact WMI needs a piecewise-polynomial density on a bounded support: approximate it by "
    "a density-estimation tree fitted to data (verifier.population.fitting.fit_density_tree, "
    "or fit_product(..., continuous='density_tree')), or use uniform / piecewise marginals"
)


class WMIInputError(CertgateInputError):
    """A density, model or property cannot be encoded for exact WMI."""


@dataclass(frozen=True)
class WeightPiece:
    """A box ``[lower, upper]`` carrying a polynomial (in the box's own variables)."""

    lower: np.ndarray
    upper: np.ndarray
    polynomial: Polynomial


def density_pieces(distribution: Distribution | PopulationModel) -> list[WeightPiece]:
    """The density as disjoint-or-additive polynomial pieces on boxes, in column order
    (unnormalised constants cancel in every ratio this package computes)."""
    if isinstance(distribution, PopulationModel):
        local = density_pieces(distribution.distribution)
        order = distribution._order
        inverse = np.argsort(order)
        return [WeightPiece(piece.lower[inverse], piece.upper[inverse],
                            embed(piece.polynomial, list(order), order.size))
                for piece in local]
    if isinstance(distribution, PiecewiseDensity):
        pieces = []
        for leaf in distribution.leaves:
            exponents, coefficients = leaf.terms()
            poly = {tuple(int(e) for e in row): float(c)
                    for row, c in zip(exponents, coefficients, strict=True) if c != 0.0}
            if poly:
                pieces.append(WeightPiece(np.asarray(leaf.lower, dtype=np.float64),
                                          np.asarray(leaf.upper, dtype=np.float64), poly))
        return pieces
    if isinstance(distribution, Uniform):
        return [WeightPiece(np.array([distribution.lower]), np.array([distribution.upper]),
                            constant(1.0 / (distribution.upper - distribution.lower), 1))]
    if isinstance(distribution, Product):
        return _product_pieces(distribution)
    if isinstance(distribution, Discrete | PointMass | Categorical):
        return _atom_pieces(distribution)
    raise WMIInputError(
        f"a {getattr(distribution, 'kind', type(distribution).__name__)} distribution is not "
        f"piecewise polynomial; {APPROXIMATE_HINT}"
    )


def _atom_pieces(distribution: Discrete | PointMass | Categorical) -> list[WeightPiece]:
    """Point masses as degenerate boxes (``lower == upper``) carrying their probability."""
    if isinstance(distribution, PointMass):
        atoms = [(np.array([distribution.value]), 1.0)]
    elif isinstance(distribution, Discrete):
        atoms = [(np.array([value]), probability) for value, probability in
                 zip(distribution.values, distribution.probabilities, strict=True)]
    else:
        width = len(distribution.probabilities)
        atoms = [(np.eye(width)[j], probability)
                 for j, probability in enumerate(distribution.probabilities)]
    return [WeightPiece(point, point.copy(), constant(float(probability), point.size))
            for point, probability in atoms if probability > 0]


@dataclass(frozen=True)
class AtomSlice:
    """The prior restricted to one value ``values`` of its discrete columns: continuous pieces
    on the ``free`` columns, and the embedding ``x = embed z + offset`` of the free
    coordinates ``z`` into the input."""

    values: np.ndarray
    free: list[int]
    pieces: list[WeightPiece]
    embed: np.ndarray
    offset: np.ndarray


def atom_slices(pieces: list[WeightPiece]) -> tuple[list[int], list[AtomSlice]]:
    """Split pieces along their discrete columns (those where every piece is a point).
    Returns the discrete columns and one slice per combination of their values."""
    lower = np.array([piece.lower for piece in pieces])
    upper = np.array([piece.upper for piece in pieces])
    flat = lower == upper
    atomic = np.all(flat, axis=0)
    if np.any(flat[:, ~atomic]):
        raise WMIInputError("a column is discrete in some pieces and continuous in others; "
                            f"{APPROXIMATE_HINT}")
    discrete = [int(j) for j in np.flatnonzero(atomic)]
    free = [int(j) for j in np.flatnonzero(~atomic)]
    width = lower.shape[1]
    embed_matrix = np.eye(width)[:, free]
    groups: dict[tuple[float, ...], list[WeightPiece]] = {}
    for piece in pieces:
        key = tuple(float(v) for v in piece.lower[discrete])
        offset = np.zeros(width)
        offset[discrete] = key
        poly = substitute_affine(piece.polynomial, embed_matrix, offset)
        groups.setdefault(key, []).append(
            WeightPiece(piece.lower[free], piece.upper[free], poly))
    slices = []
    for key, members in groups.items():
        offset = np.zeros(width)
        offset[discrete] = key
        slices.append(AtomSlice(np.array(key), free, members, embed_matrix, offset))
    return discrete, slices


def _product_pieces(product: Product) -> list[WeightPiece]:
    names = [column for factor in product.factors for column in factor.columns]
    width = len(names)
    pieces = [WeightPiece(np.empty(0), np.empty(0), constant(1.0, width))]
    start = 0
    for factor in product.factors:
        local = density_pieces(factor.distribution)
        positions = list(range(start, start + len(factor.columns)))
        start += len(factor.columns)
        pieces = [
            WeightPiece(np.concatenate([piece.lower, part.lower]),
                        np.concatenate([piece.upper, part.upper]),
                        multiply(piece.polynomial, embed(part.polynomial, positions, width)))
            for piece in pieces for part in local
        ]
    return pieces


def uniform_pieces(lower: np.ndarray, upper: np.ndarray) -> list[WeightPiece]:
    """The uniform density on a finite box."""
    lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    if not (np.isfinite(lower).all() and np.isfinite(upper).all() and (lower < upper).all()):
        raise WMIInputError(f"a uniform prior needs a finite box with lower < upper, got "
                            f"{lower.tolist()}, {upper.tolist()}")
    return [WeightPiece(lower, upper, constant(1.0 / float(np.prod(upper - lower)), lower.size))]


@dataclass(frozen=True)
class WeightFactor:
    """Pieces of one density placed on the coordinates ``positions`` of ``z``."""

    positions: list[int]
    pieces: list[WeightPiece]


@dataclass(frozen=True)
class Placement:
    """A model applied to ``x = matrix z + offset``."""

    model: PiecewiseAffineModel
    matrix: np.ndarray
    offset: np.ndarray


@dataclass(frozen=True)
class Root:
    """A top-level region: a box in ``z``, extra constraints ``A z <= b``, a polynomial
    weight in ``z``."""

    lower: np.ndarray
    upper: np.ndarray
    A: np.ndarray
    b: np.ndarray
    weight: Polynomial


Cell = tuple[np.ndarray, np.ndarray]


def class_cell(outputs: Outputs, label: int) -> Cell | None:
    """Constraints ``A z <= b`` of ``{z : the predicted class is label}`` (argmax, ties to the
    lowest index; a single output is a logit: class 1 iff ``logit >= 0``), ``None`` if empty."""
    S, t = outputs
    if S.shape[0] == 1:
        rows = [(-S[0], t[0], False)] if label == 1 else [(S[0], -t[0], True)]
    else:
        rows = [(S[j] - S[label], t[label] - t[j], j < label)
                for j in range(S.shape[0]) if j != label]
    kept_A, kept_b = [], []
    for a, bound, strict in rows:
        if not np.any(a):
            if bound < 0 or (strict and bound <= 0):
                return None
            continue
        kept_A.append(a)
        kept_b.append(bound)
    width = S.shape[1]
    return np.array(kept_A).reshape(-1, width), np.array(kept_b)


def both(first: Cell | None, second: Cell | None) -> Cell | None:
    """Conjunction of two cells."""
    if first is None or second is None:
        return None
    return np.vstack([first[0], second[0]]), np.concatenate([first[1], second[1]])


def class_count(outputs: Outputs) -> int:
    """Number of classes: 2 for a single logit, else the output size."""
    return 2 if outputs[0].shape[0] == 1 else outputs[0].shape[0]


@dataclass(frozen=True)
class Disagreement:
    """Violation: the classes of placements ``first`` and ``second`` differ."""

    first: int = 0
    second: int = 1

    def __call__(self, outputs: list[Outputs]) -> list[Cell]:
        one, two = outputs[self.first], outputs[self.second]
        cells = [both(class_cell(one, a), class_cell(two, b))
                 for a in range(class_count(one)) for b in range(class_count(two)) if a != b]
        return [cell for cell in cells if cell is not None]


@dataclass(frozen=True)
class OtherClass:
    """Violation: placement ``placement`` predicts a class other than ``label``."""

    label: int
    placement: int = 0

    def __call__(self, outputs: list[Outputs]) -> list[Cell]:
        mine = outputs[self.placement]
        cells = [class_cell(mine, k) for k in range(class_count(mine)) if k != self.label]
        return [cell for cell in cells if cell is not None]


@dataclass(frozen=True)
class LostPositive:
    """Violation: ``first`` predicts ``positive`` and ``second`` does not (¬(c ⇒ c′))."""

    positive: int
    first: int = 0
    second: int = 1

    def __call__(self, outputs: list[Outputs]) -> list[Cell]:
        one, two = outputs[self.first], outputs[self.second]
        cells = [both(class_cell(one, self.positive), class_cell(two, k))
                 for k in range(class_count(two)) if k != self.positive]
        return [cell for cell in cells if cell is not None]

    def prefix_cell(self, outputs: list[Outputs]) -> Cell | None:
        """Where a violation is still possible once the first placement's outputs are known
        (the first copy must predict the positive class)."""
        return class_cell(outputs[self.first], self.positive)


@dataclass(frozen=True)
class Decrease:
    """Violation: output ``output`` of ``first`` exceeds that of ``second`` (f(x) > f(x′))."""

    output: int
    first: int = 0
    second: int = 1

    def __call__(self, outputs: list[Outputs]) -> list[Cell]:
        (S1, t1), (S2, t2) = outputs[self.first], outputs[self.second]
        a = S2[self.output] - S1[self.output]
        bound = t1[self.output] - t2[self.output]
        if not np.any(a):
            return [(np.zeros((0, a.size)), np.zeros(0))] if bound > 0 else []
        return [(a[None], np.array([bound]))]
