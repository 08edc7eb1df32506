"""A prior term's probability as an enclosure ``(lower, value, upper)``: the product of two
(:func:`times`) and the sum of two (:func:`added`), each rounded outward so that the real
result lies between the ends.
"""

from __future__ import annotations

from verifier.numerics import EPS, FUNCTION_REL_MARGIN, down, scaled_down, scaled_up, up

Coefficient = tuple[float, float, float]  # (lower, value, upper)
ONE: Coefficient = (1.0, 1.0, 1.0)


def times(first: Coefficient, second: Coefficient) -> Coefficient:
    """Outward-rounded product of two non-negative coefficient enclosures."""
    margin = FUNCTION_REL_MARGIN + 4 * EPS
    return (scaled_down(first[0] * second[0], margin), first[1] * second[1],
            scaled_up(first[2] * second[2], margin))


def added(first: Coefficient, second: Coefficient) -> Coefficient:
    """Outward-rounded sum of two non-negative coefficient enclosures: each end one float
    beyond the rounded sum (an end that adds 0 stays exact)."""
    lower = first[0] + second[0]
    upper = first[2] + second[2]
    return (lower if 0.0 in (first[0], second[0]) else max(0.0, down(lower)),
            first[1] + second[1],
            upper if 0.0 in (first[2], second[2]) else up(upper))
