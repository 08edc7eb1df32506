"""Exact weighted model integration (WMI) audits of piecewise-linear models (DESIGN D7).

Regions of ReLU networks and scikit-learn trees/forests are enumerated depth-first (bound
propagation fixes stable neurons, HiGHS LPs prune empty branches) and polynomial weights are
integrated exactly over each convex cell (triangulation + Grundmann–Möller rules).
"""

from verifier.wmi.encode import WMIInputError, density_pieces
from verifier.wmi.engine import Query, WMIResult, build_roots, solve
from verifier.wmi.properties import (
    ParityResult,
    as_model,
    demographic_parity,
    equivalence,
    local_robustness,
    monotonicity,
    noise_robustness,
)

__all__ = [
    "ParityResult",
    "Query",
    "WMIInputError",
    "WMIResult",
    "as_model",
    "build_roots",
    "demographic_parity",
    "density_pieces",
    "equivalence",
    "local_robustness",
    "monotonicity",
    "noise_robustness",
    "solve",
]
