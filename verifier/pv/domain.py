"""PV's view of the input space: the root box and how each column may be split."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from verifier.errors import CertgateInputError

# A population's sound box-mass enclosure: ``(lo, hi)`` ``(B, D)`` → ``(lower, upper)`` ``(B,)``.
MassFunction = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class InputDomain:
    """The root box of the search and how each input column may be split.

    ``integer[i]``: column ``i`` takes integer values only (split into disjoint integer
    ranges). ``atomless[i]``: column ``i`` has no point masses (split children may share a
    face). Any other column is split into ``[lo, m]`` and ``[next float after m, hi]``: disjoint
    over the floats, so no atom is counted twice; the real gap between two adjacent floats is
    simply never credited to either bound, which is conservative. ``groups``: one-hot groups
    (column indices whose values are 0/1 with exactly one 1). ``atoms``: per column, the sorted
    finite set of values that may carry mass (None: not such a set); boxes are shrunk to them
    and split between them. ``point_masses``: per column, a sorted finite superset of the
    values that may carry a point mass (None: not such a set; as the population lists them,
    see ``column_point_masses``); on a column that also has a density (not integer, not
    atomless, no finite value set) a split may cut a listed point off alone.
    """

    lower: np.ndarray
    upper: np.ndarray
    integer: np.ndarray
    groups: tuple[tuple[int, ...], ...] = ()
    atomless: np.ndarray | None = None
    atoms: tuple[np.ndarray | None, ...] = ()
    point_masses: tuple[np.ndarray | None, ...] = ()

    def __post_init__(self) -> None:
        if self.atomless is None:
            object.__setattr__(self, "atomless", ~np.asarray(self.integer, dtype=bool))
        shapes = {self.lower.shape, self.upper.shape, self.integer.shape, self.atomless.shape}
        if len(shapes) != 1:
            raise CertgateInputError("input domain arrays disagree in length")
        if (self.lower > self.upper).any():
            raise CertgateInputError("input domain is empty (lower > upper)")
        if self.atoms and len(self.atoms) != self.lower.size:
            raise CertgateInputError("input domain atoms disagree in length")
        if self.point_masses and len(self.point_masses) != self.lower.size:
            raise CertgateInputError("input domain point masses disagree in length")


def population_domain(population: Any) -> tuple[MassFunction, InputDomain]:
    """PV's view of a population model: its sound box-mass enclosure and its input domain
    (support box, integer and atomless columns, one-hot groups, finite value sets, listed
    point masses)."""
    lower, upper = population.support()
    domain = InputDomain(
        np.asarray(lower, dtype=np.float64),
        np.asarray(upper, dtype=np.float64),
        np.asarray(population.integer_columns(), dtype=bool),
        tuple(tuple(int(c) for c in group) for group in population.onehot_groups()),
        np.asarray(population.atomless_columns(), dtype=bool),
        tuple(population.column_atoms()) if hasattr(population, "column_atoms") else (),
        tuple(population.column_point_masses())
        if hasattr(population, "column_point_masses") else (),
    )
    return population.prob_boxes_interval, domain
