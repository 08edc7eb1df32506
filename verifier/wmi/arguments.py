"""The argument checks a property makes on both of its paths, region enumeration
(:mod:`verifier.wmi.properties`) and box branching (:mod:`verifier.wmi.branched`), so that
both refuse the same input with the same :class:`~verifier.wmi.encode.WMIInputError`.
"""

from __future__ import annotations

import math

from verifier.wmi.encode import WMIInputError


def check_feature(feature: int, dimension: int) -> None:
    """Refuse a feature index outside ``0..dimension − 1``."""
    if not 0 <= feature < dimension:
        raise WMIInputError(f"feature index {feature} is outside 0..{dimension - 1}")


def check_ordered_feature(feature: int, groups: list[tuple[int, ...]], name: str) -> None:
    """Refuse a monotonicity feature (named ``name``) that is a column of a one-hot group:
    its values have no order."""
    if any(feature in group for group in groups):
        raise WMIInputError(f"monotonicity needs an ordered feature; column "
                            f"{name!r} belongs to a one-hot group")


def check_noise_features(features: list[int], dimension: int) -> None:
    """Refuse noise features that are empty, repeated or outside ``0..dimension − 1``."""
    if len(set(features)) != len(features) or not features or \
            not all(0 <= f < dimension for f in features):
        raise WMIInputError(f"noise features {features} must be distinct indices in "
                            f"0..{dimension - 1}")


def check_noise_width(columns: int, features: list[int]) -> None:
    """Refuse a noise whose number of columns is not one per noisy feature."""
    if columns != len(features):
        raise WMIInputError(f"the noise has {columns} columns for {len(features)} features")


def check_noise_kind(name: str, discrete_column: bool, discrete_noise: bool) -> None:
    """Refuse a density noise on a discrete column (named ``name``): it would move the
    column off its values."""
    if discrete_column and not discrete_noise:
        raise WMIInputError(f"noise on column {name!r} needs a continuous column or a "
                            "discrete noise distribution; it is discrete")


def check_uniform_support(name: str, lower: float, upper: float) -> None:
    """Refuse a column (named ``name``) whose support ``[lower, upper]`` carries no uniform
    density: an unbounded side, or a single point (``use_prior`` false spreads the column
    uniformly over its support)."""
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise WMIInputError(f"use_prior false needs a bounded support, but column "
                            f"{name!r} has support [{lower:g}, {upper:g}]")
    if not lower < upper:
        raise WMIInputError(f"column {name!r} has a single-point support")
