"""The one table that turns a certified interval and a threshold into a verdict.

A value ``v`` known only to lie in ``[low, high]`` is *proven* to satisfy ``v <op> t`` when
every value of the interval does, and proven to violate it when none does; otherwise the
verdict is ``unknown``. With closed intervals this reads:

=====  =====================  =====================
 op     satisfied               violated
=====  =====================  =====================
 >      low > t                 high <= t
 >=     low >= t                high < t
 <      high < t                low >= t
 <=     high <= t               low > t
=====  =====================  =====================

The comparisons are exact float comparisons: ``low``, ``high`` and ``t`` are floats, and a
float comparison of floats is exact, so the verdict is that of the real numbers. An empty or
NaN interval is never proven either way.
"""

from __future__ import annotations

from typing import Literal

Comparison = Literal[">", ">=", "<", "<="]
COMPARISONS: tuple[str, ...] = (">", ">=", "<", "<=")
Verdict = Literal["satisfied", "violated", "unknown"]


def proven_pass(comparison: Comparison, threshold: float, low: float, high: float) -> bool:
    """True only when every value in ``[low, high]`` satisfies ``value <comparison>
    threshold``."""
    if not low <= high:
        return False
    match comparison:
        case ">":
            return low > threshold
        case ">=":
            return low >= threshold
        case "<":
            return high < threshold
        case "<=":
            return high <= threshold
    raise ValueError(f"comparison must be one of {COMPARISONS}, got {comparison!r}")


def proven_fail(comparison: Comparison, threshold: float, low: float, high: float) -> bool:
    """True only when no value in ``[low, high]`` satisfies ``value <comparison>
    threshold``."""
    if not low <= high:
        return False
    match comparison:
        case ">":
            return high <= threshold
        case ">=":
            return high < threshold
        case "<":
            return low >= threshold
        case "<=":
            return low > threshold
    raise ValueError(f"comparison must be one of {COMPARISONS}, got {comparison!r}")


def interval_verdict(comparison: Comparison, threshold: float, low: float,
                     high: float) -> Verdict:
    """``satisfied`` when ``[low, high]`` is a proven pass, ``violated`` when a proven fail,
    else ``unknown``."""
    if proven_pass(comparison, threshold, low, high):
        return "satisfied"
    if proven_fail(comparison, threshold, low, high):
        return "violated"
    return "unknown"
