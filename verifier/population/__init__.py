"""Population models: probability distributions over a network's input vector (DESIGN D4).

A model is data — a JSON document validated by pydantic — holding a feature schema and a
distribution. Every distribution answers exact, batched float64 box probabilities with a sound
enclosure, samples, and reports its support. Fitting helpers live in
:mod:`verifier.population.fitting`, the FairSquare converter in
:mod:`verifier.population.fairsquare`.
"""

from verifier.population.base import Distribution
from verifier.population.bayesnet import BayesianNetwork, BayesNode, CPTRow
from verifier.population.distributions import (
    Categorical,
    Discrete,
    DiscretisedNormal,
    Marginal,
    Normal,
    PointMass,
    TruncatedNormal,
    Uniform,
)
from verifier.population.errors import PopulationError, PopulationMismatchError
from verifier.population.histogram import IntegerHistogram
from verifier.population.io import (
    POPULATION_FILENAME,
    dumps_population,
    load_population,
    population_from_json,
    save_population,
)
from verifier.population.mixture import Mixture
from verifier.population.model import (
    FORMAT,
    DataSource,
    PopulationModel,
    check_matches_network,
)
from verifier.population.piecewise import Leaf, PiecewiseDensity
from verifier.population.product import Factor, Product
from verifier.population.schema import Feature, FeatureSchema
from verifier.population.union import DISTRIBUTION_KINDS, AnyDistribution, distribution_from_json

__all__ = [
    "DISTRIBUTION_KINDS",
    "FORMAT",
    "POPULATION_FILENAME",
    "AnyDistribution",
    "BayesNode",
    "BayesianNetwork",
    "CPTRow",
    "Categorical",
    "DataSource",
    "Discrete",
    "DiscretisedNormal",
    "Distribution",
    "Factor",
    "Feature",
    "FeatureSchema",
    "IntegerHistogram",
    "Leaf",
    "Marginal",
    "Mixture",
    "Normal",
    "PiecewiseDensity",
    "PointMass",
    "PopulationError",
    "PopulationMismatchError",
    "PopulationModel",
    "Product",
    "TruncatedNormal",
    "Uniform",
    "check_matches_network",
    "distribution_from_json",
    "dumps_population",
    "load_population",
    "population_from_json",
    "save_population",
]
