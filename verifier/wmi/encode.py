"""Weights and queries: polynomial pieces placed on coordinates of the integration space
``z``, models placed on affine images of ``z``, and violation conditions.

:func:`density_pieces` gives the exact pieces of the piecewise-polynomial kinds (a
:class:`PiecewiseDensity` — density-estimation tree or polynomial leaves — and a ``Uniform``
marginal); every other kind reaches WMI through :mod:`verifier.wmi.terms` (discrete values,
mixtures, Bayesian networks) and :mod:`verifier.wmi.marginals` (certified envelopes of
normal-type densities).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from verifier.errors import CertgateInputError
from verifier.population import PiecewiseDensity, Uniform
from verifier.population.base import Distribution
from verifier.wmi.polynomial import Polynomial, constant
from verifier.wmi.regions import Outputs, PiecewiseAffineModel


class WMIInputError(CertgateInputError):
    """A density, model or property cannot be encoded for WMI."""


@dataclass(frozen=True)
class WeightPiece:
    """A box ``[lower, upper]`` carrying a polynomial (in the box's own variables)."""

    lower: np.ndarray
    upper: np.ndarray
    polynomial: Polynomial


def density_pieces(distribution: Distribution) -> list[WeightPiece]:
    """The density of a piecewise-polynomial distribution as polynomial pieces on boxes (local
    column order; overlapping pieces add up)."""
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
        height = 1.0 / (distribution.upper - distribution.lower)
        if not math.isfinite(height):
            raise WMIInputError(f"a uniform on [{distribution.lower!r}, {distribution.upper!r}] "
                                "has a density 1/width beyond float64's range; rescale the "
                                "column")
        return [WeightPiece(np.array([distribution.lower]), np.array([distribution.upper]),
                            constant(height, 1))]
    raise WMIInputError(
        f"a {getattr(distribution, 'kind', type(distribution).__name__)} distribution is not "
        "piecewise polynomial"
    )


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
    lowest index), ``None`` if empty. A network's outputs here are those of its
    :meth:`~verifier.network.Network.as_classifier` view (a single logit is two outputs)."""
    S, t = outputs
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
    """Number of classes: the output size (of the classifier view)."""
    return outputs[0].shape[0]


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
class LostFavorable:
    """Violation: ``first`` predicts ``favorable`` and ``second`` does not (¬(c ⇒ c′))."""

    favorable: int
    first: int = 0
    second: int = 1

    def __call__(self, outputs: list[Outputs]) -> list[Cell]:
        one, two = outputs[self.first], outputs[self.second]
        cells = [both(class_cell(one, self.favorable), class_cell(two, k))
                 for k in range(class_count(two)) if k != self.favorable]
        return [cell for cell in cells if cell is not None]

    def prefix_cell(self, outputs: list[Outputs]) -> Cell | None:
        """Where a violation is still possible once the first placement's outputs are known
        (the first copy must predict the favorable class)."""
        return class_cell(outputs[self.first], self.favorable)


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
