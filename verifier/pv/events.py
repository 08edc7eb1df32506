"""The events PV tracks for a specification, and the probabilities that derive from them.

A conditional probability ``P[E | C]`` is ``a / (a + b)`` with ``a = P[E ∧ C]`` and
``b = P[¬E ∧ C]``, monotone in both, which keeps the correlation that dividing independent
intervals of ``P[E ∧ C]`` and ``P[C]`` would lose. Every derived end is rounded outward.
"""

from __future__ import annotations

import numpy as np

from verifier.numerics import share_intervals
from verifier.spec import And, Atom, Event, Interval, Not, Specification, atoms_of


class TrackedEvents:
    """The events tracked for a specification and how probabilities derive from them."""

    def __init__(self, spec: Specification) -> None:
        self.events: list[Event] = []
        self.terms: dict[str, tuple[int, int | None]] = {}
        for name, term in spec.probabilities.items():
            if term.condition is None:
                self.terms[name] = (self._add(term.event), None)
            else:
                joint = self._add(And((term.event, term.condition)))
                complement = self._add(And((Not(term.event), term.condition)))
                self.terms[name] = (joint, complement)
        self.atoms: list[Atom] = []
        for event in self.events:
            for atom in atoms_of(event):
                if atom not in self.atoms:
                    self.atoms.append(atom)

    def _add(self, event: Event) -> int:
        if event not in self.events:
            self.events.append(event)
        return self.events.index(event)

    def probabilities(self, lower: np.ndarray, upper: np.ndarray) -> dict[str, Interval]:
        """Sound intervals of every named probability from the event intervals."""
        return self.probability_rows(np.asarray(lower, dtype=np.float64)[None, :],
                                     np.asarray(upper, dtype=np.float64)[None, :])[0]

    def probability_rows(self, lower: np.ndarray, upper: np.ndarray) -> list[dict[str, Interval]]:
        """:meth:`probabilities` of every row of ``(K, events)`` event intervals, each
        conditional probability's ends computed for all rows at once
        (:func:`~verifier.numerics.share_intervals`: bit for bit each row's own)."""
        rows: list[dict[str, Interval]] = [{} for _ in range(lower.shape[0])]
        for name, (joint, complement) in self.terms.items():
            if complement is None:
                for row, (low, high) in zip(rows, zip(lower[:, joint].tolist(),
                                                      upper[:, joint].tolist(), strict=True),
                                            strict=True):
                    row[name] = (max(0.0, low), min(1.0, high))
                continue
            lows, highs = share_intervals(lower[:, joint], upper[:, joint],
                                          lower[:, complement], upper[:, complement])
            for row, low, high in zip(rows, lows.tolist(), highs.tolist(), strict=True):
                row[name] = (low, high)
        return rows
