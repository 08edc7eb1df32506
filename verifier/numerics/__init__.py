"""certgate's numerics core: outward rounding, the margins and their one value each, sound
quotient enclosures and the interval-versus-threshold verdict table. Every sound bound in
:mod:`verifier` rounds through here; ``tests/test_numerics.py`` checks the core against exact
rational arithmetic and ``tests/test_numerics_usage.py`` that nothing else rounds by hand.

Array variants (numpy arrays or torch tensors) live in :mod:`verifier.numerics.tensor`
(imported on its own; neither imports torch).
"""

from verifier.numerics.comparison import (
    COMPARISONS,
    Comparison,
    Verdict,
    interval_verdict,
    proven_fail,
    proven_pass,
)
from verifier.numerics.error_free import two_product, two_sum
from verifier.numerics.grid import grid_values
from verifier.numerics.margins import (
    FUNCTION_REL_MARGIN,
    SOUNDNESS_ABS_MARGIN,
    SOUNDNESS_REL_MARGIN,
)
from verifier.numerics.ratio import (
    nonnegative_quotient,
    probability_ratio,
    share_interval,
    share_intervals,
)
from verifier.numerics.rounding import (
    EPS,
    SMALLEST_SUBNORMAL,
    add_down,
    add_up,
    down,
    down_array,
    gamma,
    mul_down,
    mul_up,
    network_rel_margin,
    network_roundings,
    outward_cast,
    relative_margin,
    scaled_down,
    scaled_up,
    sum_lower,
    sum_upper,
    underflow_allowance,
    up,
    up_array,
    widened_down,
    widened_up,
)

__all__ = [
    "COMPARISONS",
    "EPS",
    "FUNCTION_REL_MARGIN",
    "SMALLEST_SUBNORMAL",
    "SOUNDNESS_ABS_MARGIN",
    "SOUNDNESS_REL_MARGIN",
    "Comparison",
    "Verdict",
    "add_down",
    "add_up",
    "down",
    "down_array",
    "gamma",
    "grid_values",
    "interval_verdict",
    "mul_down",
    "mul_up",
    "network_rel_margin",
    "network_roundings",
    "nonnegative_quotient",
    "outward_cast",
    "probability_ratio",
    "proven_fail",
    "proven_pass",
    "relative_margin",
    "scaled_down",
    "scaled_up",
    "share_interval",
    "share_intervals",
    "sum_lower",
    "sum_upper",
    "two_product",
    "two_sum",
    "underflow_allowance",
    "up",
    "up_array",
    "widened_down",
    "widened_up",
]
