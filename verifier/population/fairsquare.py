"""Population models of the FairSquare benchmark (paper 003) in certgate's format.

The benchmark's ``population_models.json`` (shared benchmarks folder) writes normals as mean
and VARIANCE, truncated normals with a ``truncation`` interval, the integer ``sex`` as a
categorical over the values {0, 1}, and Bayesian networks as nodes with box-conditioned CPT
rows. The conversion is exact: variances are kept as ``variance`` (no rounding to a standard
deviation), the CPT intervals are copied, and the rows are validated to partition their
parents' space by :class:`~verifier.population.bayesnet.BayesianNetwork`.

Not converted: ``preprocessing`` (Bayes Net 2's ``education_num' = min(education_num, age)``)
transforms the *sample* before the classifier; it is not part of the distribution and belongs
to the network (compose it in front of the classifier).
"""

from __future__ import annotations

from typing import Any

from verifier.population.base import Distribution
from verifier.population.bayesnet import BayesianNetwork, BayesNode, CPTRow
from verifier.population.distributions import Discrete, Normal, TruncatedNormal
from verifier.population.errors import PopulationError
from verifier.population.model import PopulationModel
from verifier.population.product import Factor, Product
from verifier.population.schema import Feature


def _distribution(spec: dict[str, Any], use_probspecs_variance: bool, where: str) -> Distribution:
    kind = spec.get("distribution")
    variance = spec.get("variance")
    if use_probspecs_variance and "variance_used_by_probspecs" in spec:
        variance = spec["variance_used_by_probspecs"]
    if kind == "normal":
        return Normal(mean=spec["mean"], variance=variance)
    if kind == "truncated_normal":
        low, high = spec["truncation"]
        return TruncatedNormal(mean=spec["mean"], variance=variance, lower=low, upper=high)
    if kind == "categorical":
        return Discrete(values=spec["values"], probabilities=spec["probabilities"])
    raise PopulationError(f"{where}: unknown FairSquare distribution {kind!r}")


def _feature(name: str, spec: dict[str, Any] | None, space: list[Any]) -> Feature:
    integer = spec is not None and spec.get("distribution") == "categorical"
    return Feature(
        name=name, kind="integer" if integer else "continuous", domain=(space[0], space[1])
    )


def population_from_fairsquare(
    model_json: dict[str, Any], variables: list[str], use_probspecs_variance: bool = False
) -> PopulationModel:
    """Convert one entry of the benchmark's ``models`` (``independent``, ``bayes_net_1``, …)
    with the benchmark's ``variables`` (the network's input order).

    ``use_probspecs_variance`` takes the variance that paper 003's reference code used where
    the benchmark records one (``variance_used_by_probspecs``, a copy slip of case c4).
    """
    kind = model_json.get("kind")
    space = model_json["input_space"]
    missing = [name for name in variables if name not in space]
    if missing:
        raise PopulationError(f"FairSquare model has no input space for {missing}")
    if kind == "independent":
        marginals = model_json["marginals"]
        factors = [
            Factor(
                columns=[name],
                distribution=_distribution(marginals[name], use_probspecs_variance, name),
            )
            for name in variables
        ]
        features = [_feature(name, marginals[name], space[name]) for name in variables]
        distribution: Distribution = Product(factors=factors)
    elif kind == "bayesian_network":
        nodes = []
        first_row: dict[str, dict[str, Any]] = {}
        for node in model_json["nodes"]:
            rows = []
            for index, row in enumerate(node["cpt"]):
                where = f"node {node['name']} row {index}"
                rows.append(
                    CPTRow(
                        condition={p: tuple(v) for p, v in row["condition"].items()},
                        distribution=_distribution(row["distribution"], use_probspecs_variance,
                                                   where),
                        label=row.get("case"),
                    )
                )
            first_row[node["name"]] = node["cpt"][0]["distribution"]
            nodes.append(BayesNode(name=node["name"], parents=node["parents"], cpt=rows))
        distribution = BayesianNetwork(nodes=nodes)
        features = [_feature(name, first_row.get(name), space[name]) for name in variables]
    else:
        raise PopulationError(f"unknown FairSquare model kind {kind!r}")
    clipped = " (clipped)" if model_json.get("clipped") else ""
    return PopulationModel(
        name=f"FairSquare {kind}{clipped}",
        features=features,
        distribution=distribution,
    )
