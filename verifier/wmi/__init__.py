"""Weighted model integration (WMI) audits of piecewise-linear models (DESIGN D7, D15).

Regions of ReLU networks and scikit-learn trees/forests are enumerated depth-first (bound
propagation fixes stable neurons, HiGHS LPs prune empty branches) and polynomial weights are
integrated exactly over each convex cell (triangulation + Grundmann–Möller rules). Priors are
sums of product terms (:mod:`verifier.wmi.terms`: discrete values, mixture components,
Bayesian-network regimes); non-polynomial 1-D densities enter through certified envelopes
(:mod:`verifier.wmi.envelope`), so results are exact or a certified interval (``exact``).
"""

from verifier.wmi.check import WMI_KINDS, WMIPlan, check_wmi_property
from verifier.wmi.encode import WMIInputError, density_pieces
from verifier.wmi.engine import DEFAULT_TOLERANCE, Query, WMIResult, solve
from verifier.wmi.properties.equivalence import equivalence
from verifier.wmi.properties.local_robustness import local_robustness
from verifier.wmi.properties.models import as_model
from verifier.wmi.properties.monotonicity import monotonicity
from verifier.wmi.properties.noise_robustness import noise_robustness
from verifier.wmi.roots import build_roots

__all__ = [
    "DEFAULT_TOLERANCE",
    "WMI_KINDS",
    "Query",
    "WMIInputError",
    "WMIPlan",
    "WMIResult",
    "as_model",
    "build_roots",
    "check_wmi_property",
    "density_pieces",
    "equivalence",
    "local_robustness",
    "monotonicity",
    "noise_robustness",
    "solve",
]
