"""The discriminated union of every distribution kind (JSON field ``kind``).

Products, mixtures and Bayesian networks nest distributions of any kind
(:data:`verifier.population.base.NestedDistribution`), so their models are completed here,
once every kind is defined.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from verifier.population.base import Distribution, complete_nested
from verifier.population.bayesnet import BayesianNetwork, BayesNode, CPTRow
from verifier.population.distributions import (
    Categorical,
    Discrete,
    DiscretisedNormal,
    Normal,
    PointMass,
    TruncatedNormal,
    Uniform,
)
from verifier.population.histogram import IntegerHistogram
from verifier.population.mixture import Mixture
from verifier.population.piecewise import PiecewiseDensity
from verifier.population.product import Factor, Product

AnyDistribution = Annotated[
    Normal
    | TruncatedNormal
    | Uniform
    | Discrete
    | DiscretisedNormal
    | IntegerHistogram
    | PointMass
    | Categorical
    | Product
    | Mixture
    | BayesianNetwork
    | PiecewiseDensity,
    Field(discriminator="kind"),
]

DISTRIBUTION_KINDS: tuple[str, ...] = (
    "normal", "truncated_normal", "uniform", "discrete", "discretised_normal",
    "integer_histogram", "point", "categorical", "product", "mixture", "bayesian_network",
    "piecewise",
)

complete_nested(AnyDistribution)
for _model in (Factor, Product, Mixture, CPTRow, BayesNode, BayesianNetwork):
    _model.model_rebuild()

_ADAPTER: TypeAdapter[Any] = TypeAdapter(AnyDistribution)


def distribution_from_json(data: dict[str, Any]) -> Distribution:
    """Validate a JSON dict as a distribution of any kind (raises pydantic ValidationError)."""
    return _ADAPTER.validate_python(data)
