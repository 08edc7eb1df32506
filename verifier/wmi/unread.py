"""The columns a property does not read, summed out of the prior before its terms are listed.

A property reads the columns its models read (first-layer weights that are not zero, a
tree's split features) and the ones it names (monotonicity's feature, the noise's features);
a one-hot group is read whole when any of its columns is. Its precondition box (local
robustness's ε-box, equivalence in a box) may restrict the other columns to intervals, which
is all the property needs of them: their probability. :class:`SumOut` says which columns
these are, gives the certified mass of a distribution none of whose columns is read on the
box (:meth:`SumOut.mass`: a Bayesian-network node's row on the interval its regime and the
box leave, a product's factor, a whole categorical), drops the Bayesian-network nodes that
need no summing (:meth:`SumOut.kept_nodes`) and names the value the summed-out columns take
in every term (:meth:`SumOut.value`).

Exactness: the prior's marginal on the read columns, restricted to the box on the others, is
the same distribution before and after. Summing out a node multiplies its regime's terms by
its row's probability of the regime's interval; terms that then agree on every read column
are one term (their coefficients added with outward rounding,
:func:`verifier.wmi.terms.merged`). The summed-out columns are given one value inside the
box in every term: no model reads them, so the property's integrand does not depend on
their value, and the box holds it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from verifier.population import BayesianNetwork, Categorical
from verifier.population.base import Distribution, as_boxes
from verifier.wmi.coefficients import Coefficient

ZERO: Coefficient = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class SumOut:
    """The columns (model order) a property reads, and the precondition box (±inf where a
    column is not restricted)."""

    read: frozenset[int]
    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def of(cls, dimension: int, read: Iterable[int], groups: Sequence[Sequence[int]],
           box: tuple[np.ndarray, np.ndarray] | None = None) -> SumOut | None:
        """The columns summed out of a ``dimension``-column prior whose property reads
        ``read`` (a one-hot group of ``groups`` is read whole when any column of it is), in
        the precondition ``box``; ``None`` when every column is read."""
        reads = set(read)
        for group in groups:
            if reads.intersection(group):
                reads.update(group)
        if reads >= set(range(dimension)):
            return None
        lower, upper = box if box is not None else (np.full(dimension, -math.inf),
                                                    np.full(dimension, math.inf))
        return cls(frozenset(reads), np.asarray(lower, np.float64).reshape(dimension),
                   np.asarray(upper, np.float64).reshape(dimension))

    def unread(self, columns: Sequence[int]) -> bool:
        """Whether no column of ``columns`` is read (vacuously true for none)."""
        return not self.read.intersection(columns)

    def free(self, columns: Sequence[int]) -> bool:
        """Whether every column of ``columns`` is unread and not restricted by the box."""
        return self.unread(columns) and all(
            self.lower[j] == -math.inf and self.upper[j] == math.inf for j in columns)

    def unread_count(self) -> int:
        """How many columns are summed out."""
        return self.lower.size - len(self.read)

    def value(self, column: int) -> float:
        """The value a summed-out column takes in every term: a point of its box."""
        if math.isfinite(self.lower[column]):
            return float(self.lower[column])
        return float(self.upper[column]) if math.isfinite(self.upper[column]) else 0.0

    def mass(self, distribution: Distribution, columns: Sequence[int],
             low: float = -math.inf, high: float = math.inf) -> Coefficient:
        """Enclosure of the probability that ``distribution`` (on the unread model
        ``columns``) puts in the box, its 1-D value (a categorical's category index)
        restricted to ``[low, high]`` too (a Bayesian-network regime's interval); computed
        by the distribution's own sound box probability."""
        positions = list(columns)
        lo, hi = self.lower[positions].copy(), self.upper[positions].copy()
        if isinstance(distribution, Categorical):
            index = np.arange(len(positions))
            hi = np.where((index < low) | (index > high), np.minimum(hi, 0.0), hi)
        elif len(positions) == 1:
            lo, hi = np.maximum(lo, low), np.minimum(hi, high)
        boxes_lo, boxes_hi, empty = as_boxes(lo, hi, distribution.dimension)
        if empty[0]:
            return ZERO
        enclosure = distribution.enclosure(boxes_lo, boxes_hi)
        return (float(enclosure.lower[0]), float(enclosure.value[0]),
                float(enclosure.upper[0]))

    def kept_nodes(self, network: BayesianNetwork, columns: Sequence[int]) -> list[int]:
        """The nodes (indices, in order) that are read, restricted by the box, or ancestors
        of such a node; the others (unread, unrestricted, and so are all their descendants:
        barren nodes) sum to 1 in every regime of the kept ones and are dropped."""
        offsets = np.cumsum([0, *[len(node.observed_columns()) for node in network.nodes]])
        index = {node.name: u for u, node in enumerate(network.nodes)}
        needed = [False] * len(network.nodes)
        for u in reversed(range(len(network.nodes))):
            if not self.free(columns[offsets[u]:offsets[u + 1]]):
                needed[u] = True
            if needed[u]:
                for parent in network.nodes[u].parents:
                    needed[index[parent]] = True
        return [u for u, keep in enumerate(needed) if keep]
