"""PV: certified probability bounds by input-space branch and bound (paper 003, DESIGN D5).

One box tree serves every probability of a specification (they share the input
distribution): each box carries the set of *events* still undecided on it. A box is bounded
once — CROWN on a specification matrix holding every output atom (e.g. ``y_1 − y_0``), exact
intervals for input atoms — and each event's three-valued truth follows by Kleene logic. When
an event is proven true on a box, the box's (rounded-down) mass is added to the event's lower
bound; proven false, it is subtracted from the event's upper bound. Boxes with no undecided
event leave the tree. An open box whose events hang on one open output atom also counts,
while it waits, lower bounds of the mass of its parts that CROWN's linear bounds decide
(:mod:`~verifier.pv.credit`, under populations that bound such parts); these credits leave
the totals when the box is split or decided.

Selection, for a specification with a threshold, is directed
(:mod:`~verifier.pv.direction`): nine tenths of each batch are the boxes whose estimated
open mass most moves the end of the enclosure that must cross the threshold for the verdict
the estimates point to, the rest — and every batch without a threshold — SelectProb (largest
mass no credit covers first). The package's modules, one job each:
:mod:`~verifier.pv.engine` (the loop), :mod:`~verifier.pv.splitting` (split rules, child
boxes, point enumeration), :mod:`~verifier.pv.atoms` (atom bounds, truth, exact point
decisions), :mod:`~verifier.pv.evaluation` (the per-batch work, on any executor),
:mod:`~verifier.pv.credit` (linear credit, share estimates),
:mod:`~verifier.pv.direction` (which boxes move the verdict),
:mod:`~verifier.pv.events` (events and derived probabilities), :mod:`~verifier.pv.domain`,
:mod:`~verifier.pv.inflight` (rounds bounded while the loop records the last one, their
parents' credits held), :mod:`~verifier.pv.pace` (rounds sized to the time left),
:mod:`~verifier.pv.settings`, :mod:`~verifier.pv.result`,
:mod:`~verifier.pv.boxpool` and :mod:`~verifier.pv.quantiles`.

Soundness: every box bound comes from :mod:`verifier.bounds` (sound, with float margins);
masses come as ``(lower, upper)`` enclosures and only lower masses are ever added or
subtracted; sums are rounded down by a relative ``1e-12``; derived probabilities and the
specification's expression use outward-rounded interval arithmetic. A conditional probability
``P[E | C]`` is ``a / (a + b)`` with ``a = P[E ∧ C]``, ``b = P[¬E ∧ C]``, which is monotone
in both and so tighter than dividing two independent intervals. Assumption: continuous
columns have no point masses (a split face shared by two children has probability zero).
"""

from verifier.pv.domain import InputDomain, population_domain
from verifier.pv.engine import ProbabilityBranchAndBound, verify
from verifier.pv.result import PVProgress, PVResult
from verifier.pv.settings import SPLIT_RULES, PVSettings, SplitRule

__all__ = [
    "SPLIT_RULES",
    "InputDomain",
    "PVProgress",
    "PVResult",
    "PVSettings",
    "ProbabilityBranchAndBound",
    "SplitRule",
    "population_domain",
    "verify",
]
