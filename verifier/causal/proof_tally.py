"""How an exact check's "fair" was proven: the tally of MILP-certificate proofs that the
exact checks keep and the causal certificate reports in its cost.

Kept apart from :mod:`verifier.causal.exact_check` (which imports scipy at the first exact
check, not before) so that the analysis and the certificate can carry tallies without
importing it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

COST_KEYS = {
    "relaxation": "proofs_relaxation",
    "certified": "proofs_branch_and_bound",
    "nodes": "proof_lps",
    "unproven": "proof_searches_unproven",
    "refused": "milp_infeasible_refused",
}
"""The certificate's cost key of each :class:`ProofTally` field."""


@dataclass
class ProofTally:
    """How the class pairs of exact checks were proven absent, each by
    :mod:`verifier.causal.milp_certificate`: at its root, the LP relaxation (``relaxation``),
    or by its branch and bound (``certified``); ``nodes``: the certificate's LPs in all;
    ``unproven``: certificate runs that proved nothing (the pair then went to the MILP);
    ``refused``: MILP "infeasible" answers that no certificate proved (each left the
    partition undecided)."""

    relaxation: int = 0
    certified: int = 0
    nodes: int = 0
    unproven: int = 0
    refused: int = 0

    def add(self, other: ProofTally) -> None:
        """Count ``other``'s proofs in this tally too."""
        for item in fields(self):
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))

    def as_cost(self) -> dict[str, float]:
        """The tally under the certificate's cost keys (:data:`COST_KEYS`)."""
        return {COST_KEYS[item.name]: float(getattr(self, item.name)) for item in fields(self)}
