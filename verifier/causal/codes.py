"""The causal engine's codes: partition statuses and split-rule names.

They live apart from :mod:`verifier.causal.analysis` (which loads the bound propagators and
torch) so that the certifier, the share bounds, the exact enumeration of finite queries
(:mod:`verifier.causal.enumeration`) and the progress display read them without loading the
analysis.
"""

from __future__ import annotations

FAIR, BIASED_EVERYWHERE, BIASED_WITNESS, SPLIT, EXCLUDED = 0, 1, 2, 3, 4
UNFINISHED = 7
STATUS_NAMES = ("fair", "biased_everywhere", "biased_witness", "split", "excluded")
SPLIT_RULES = ("smear", "bounds")
