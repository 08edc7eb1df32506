"""One-feature noise densities for :func:`verifier.wmi.noise_robustness`.

Both are piecewise-polynomial :class:`~verifier.population.PiecewiseDensity` objects of
dimension 1, so the noise integrates exactly: ``uniform`` is one constant leaf, ``triangular``
one linear leaf on each side of the mode (a degenerate side is left out).
"""

from __future__ import annotations

from verifier.population import Leaf, PiecewiseDensity
from verifier.wmi.encode import WMIInputError


def uniform_noise(low: float, high: float) -> PiecewiseDensity:
    """The uniform density on ``[low, high]``; raises :class:`WMIInputError` unless
    ``low < high``."""
    if not low < high:
        raise WMIInputError(f"uniform noise needs low < high, got [{low}, {high}]")
    return PiecewiseDensity(leaves=[Leaf(lower=[low], upper=[high],
                                         constant=1.0 / (high - low))])


def triangular_noise(low: float, mode: float, high: float) -> PiecewiseDensity:
    """The triangular density on ``[low, high]`` peaking at ``mode`` (height
    ``2 / (high − low)``); raises :class:`WMIInputError` unless
    ``low <= mode <= high`` and ``low < high``."""
    if not (low <= mode <= high and low < high):
        raise WMIInputError("triangular noise needs low <= mode <= high and low < high, got "
                            f"[{low}, {mode}, {high}]")
    peak = 2.0 / (high - low)
    leaves = []
    if mode > low:
        slope = peak / (mode - low)
        leaves.append(Leaf(lower=[low], upper=[mode],
                           polynomial=[([0], -slope * low), ([1], slope)]))
    if high > mode:
        slope = peak / (high - mode)
        leaves.append(Leaf(lower=[mode], upper=[high],
                           polynomial=[([0], slope * high), ([1], -slope)]))
    return PiecewiseDensity(leaves=leaves)
