"""What variable elimination reads of a Bayesian network: each node's name, parents, kind,
width, observed columns and conditional table, whose rows give a distribution and the parent
intervals they hold on.

:class:`~verifier.population.bayesnet.BayesianNetwork`, its nodes and their rows satisfy these
protocols. :mod:`~verifier.population.elimination` and :mod:`~verifier.population.excess`
depend on them, not on :mod:`~verifier.population.bayesnet`, which builds on those two: so
no import runs in a circle, type annotations included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from verifier.population.base import Distribution


class ConditionalRow(Protocol):
    """One row of a node's conditional table."""

    @property
    def distribution(self) -> Distribution: ...

    def interval(self, parent: str) -> tuple[float, float]:
        """The interval of ``parent``'s value this row holds on."""
        ...


class NetworkNode(Protocol):
    """One node: a feature (or a latent variable) and its conditional table."""

    @property
    def name(self) -> str: ...

    @property
    def parents(self) -> Sequence[str]: ...

    @property
    def latent(self) -> bool: ...

    @property
    def categorical(self) -> bool: ...

    @property
    def width(self) -> int: ...

    @property
    def cpt(self) -> Sequence[ConditionalRow]: ...

    def observed_columns(self) -> list[str]:
        """The input columns the node occupies (none for a latent node)."""
        ...


class NodeNetwork(Protocol):
    """A Bayesian network as elimination reads it: its nodes in topological order."""

    @property
    def nodes(self) -> Sequence[NetworkNode]: ...
