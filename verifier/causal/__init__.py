"""Causal-fairness certification by partitioning the non-protected input space (paper 000)."""

from verifier.causal.certify import CausalSettings, certify_causal_fairness
from verifier.causal.problem import (
    CausalInputError,
    FairnessProblem,
    build_problem,
    load_libra_spec,
    load_query_box,
)

__all__ = [
    "CausalInputError",
    "CausalSettings",
    "FairnessProblem",
    "build_problem",
    "certify_causal_fairness",
    "load_libra_spec",
    "load_query_box",
]
