"""Checks every population-model kind must pass (a conformance suite over a model zoo):

* the cells of a random grid covering R^d (infinite cells included) sum to 1 within 1e-12;
* the sound enclosure contains the value, lies in [0, 1], and is tight;
* sampling frequencies agree with box probabilities (|freq − p| <= 4 standard errors);
* samples lie in the support and the feature domains, one-hot groups are one-hot;
* the JSON document round-trips to an equal model with equal probabilities.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from verifier.population import (
    BayesianNetwork,
    BayesNode,
    Categorical,
    CPTRow,
    Discrete,
    DiscretisedNormal,
    Factor,
    Feature,
    Leaf,
    Mixture,
    Normal,
    PiecewiseDensity,
    PointMass,
    PopulationModel,
    Product,
    TruncatedNormal,
    Uniform,
    load_population,
    population_from_json,
)
from verifier.population.fairsquare import population_from_fairsquare

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FAIRSQUARE = (Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "fairsquare"
              / "population_models.json")
INF = np.inf


def single(distribution, kind: str = "continuous", domain=None) -> PopulationModel:
    return PopulationModel(
        features=[Feature(name="x", kind=kind, domain=domain)], distribution=distribution
    )


def mixture_of_products() -> PopulationModel:
    """Named components in different column orders (the mixture matches them by name)."""
    first = Product(factors=[
        Factor(columns=["a"], distribution=Normal(mean=-1.0, std=0.5)),
        Factor(columns=["b"],
               distribution=Discrete(values=[0, 1, 2], probabilities=[0.2, 0.5, 0.3])),
    ])
    second = Product(factors=[
        Factor(columns=["b"], distribution=DiscretisedNormal(mean=1.0, std=1.0, lower=0, upper=2)),
        Factor(columns=["a"], distribution=Uniform(lower=0.0, upper=3.0)),
    ])
    return PopulationModel(
        features=[Feature(name="b", kind="integer", domain=(0, 2)),
                  Feature(name="a", kind="continuous")],
        distribution=Mixture(weights=[0.4, 0.6], components=[first, second]),
    )


def discrete_network() -> PopulationModel:
    """A Bayesian network whose child is categorical (one-hot columns) with integer parents."""
    return PopulationModel(
        features=[
            Feature(name="level", kind="integer", domain=(0, 3)),
            Feature(name="colour", kind="categorical", columns=["red", "green", "blue"]),
            Feature(name="score", kind="continuous"),
        ],
        distribution=BayesianNetwork(nodes=[
            BayesNode(name="level", cpt=[CPTRow(distribution=Discrete(
                values=[0, 1, 2, 3], probabilities=[0.1, 0.2, 0.3, 0.4]))]),
            BayesNode(name="colour", parents=["level"], columns=["red", "green", "blue"], cpt=[
                CPTRow(condition={"level": (None, 1)},
                       distribution=Categorical(probabilities=[0.7, 0.2, 0.1])),
                CPTRow(condition={"level": (2, None)},
                       distribution=Categorical(probabilities=[0.1, 0.3, 0.6])),
            ]),
            BayesNode(name="score", parents=["colour"], cpt=[
                CPTRow(condition={"colour": (0, 0)}, distribution=Normal(mean=0.0, std=1.0)),
                CPTRow(condition={"colour": (1, 2)}, distribution=Mixture(
                    weights=[0.5, 0.5],
                    components=[Normal(mean=2.0, std=0.5), Uniform(lower=-1.0, upper=1.0)])),
            ]),
        ]),
    )


def fairsquare(name: str) -> PopulationModel:
    data = json.loads(FAIRSQUARE.read_text())
    return population_from_fairsquare(data["models"][name], data["variables"])


ZOO = {
    "normal": lambda: single(Normal(mean=1.0, variance=4.0)),
    "truncated_normal": lambda: single(
        TruncatedNormal(mean=0.0, std=2.0, lower=-1.0), domain=(-1, None)),
    "uniform": lambda: single(Uniform(lower=-2.0, upper=5.0), domain=(-2, 5)),
    "discrete": lambda: single(
        Discrete(values=[-2, 0, 3], probabilities=[0.25, 0.5, 0.25]), "integer"),
    "discretised_normal": lambda: single(
        DiscretisedNormal(mean=3.0, std=2.5, lower=0), "integer", (0, None)),
    "point": lambda: single(PointMass(value=1.0), "binary"),
    "categorical": lambda: PopulationModel(
        features=[Feature(name="c", kind="categorical", columns=["c0", "c1", "c2", "c3"])],
        distribution=Categorical(probabilities=[0.1, 0.2, 0.3, 0.4])),
    "piecewise_1d": lambda: single(PiecewiseDensity(leaves=[
        Leaf(lower=[0.0], upper=[1.0], constant=0.5),
        Leaf(lower=[1.0], upper=[2.0], polynomial=[([1], 1.0), ([0], -1.0)])])),
    "mixture_of_products": mixture_of_products,
    "discrete_network": discrete_network,
    "credit_example": lambda: load_population(EXAMPLES / "population_credit.json"),
    "latent_network_example": lambda: load_population(
        EXAMPLES / "population_latent_segments.json"),
    "density_tree_example": lambda: load_population(EXAMPLES / "population_density_tree.json"),
}
if FAIRSQUARE.is_file():
    ZOO["fairsquare_bayes_net_1_clipped"] = lambda: fairsquare("bayes_net_1_clipped")


@pytest.fixture(scope="module", params=sorted(ZOO))
def model(request) -> PopulationModel:
    return ZOO[request.param]()


def grid_cells(model: PopulationModel, rng: np.random.Generator, cuts: int = 3):
    """Closed boxes covering R^d whose pairwise overlaps have probability zero: continuous
    columns are cut at random points (atomless), integer-valued ones at half-integers."""
    low, high = model.support()
    atomless = model.atomless_columns()
    axes = []
    for column in range(model.dimension):
        a = low[column] if np.isfinite(low[column]) else -5.0
        b = high[column] if np.isfinite(high[column]) else 5.0
        points = np.sort(rng.uniform(a - 1.0, b + 1.0, size=cuts))
        if not atomless[column]:
            points = np.unique(np.floor(points) + 0.5)
        edges = [-INF, *points.tolist(), INF]
        axes.append(list(itertools.pairwise(edges)))
    cells = list(itertools.product(*axes))
    lo = np.array([[cell[j][0] for j in range(model.dimension)] for cell in cells])
    hi = np.array([[cell[j][1] for j in range(model.dimension)] for cell in cells])
    return lo, hi


def test_grid_partition_sums_to_one(model: PopulationModel) -> None:
    rng = np.random.default_rng(7)
    for _ in range(3):
        lo, hi = grid_cells(model, rng)
        probabilities = model.prob_boxes(lo, hi)
        assert (probabilities >= 0).all() and (probabilities <= 1).all()
        assert abs(probabilities.sum() - 1.0) <= 1e-12
        lower, upper = model.prob_boxes_interval(lo, hi)
        assert lower.sum() <= 1.0 <= upper.sum()


def test_total_mass_and_enclosure(model: PopulationModel) -> None:
    everything = model.prob_boxes(np.full(model.dimension, -INF), np.full(model.dimension, INF))
    assert abs(everything[0] - 1.0) <= 1e-14
    rng = np.random.default_rng(3)
    lo, hi = grid_cells(model, rng)
    value = model.prob_boxes(lo, hi)
    lower, upper = model.prob_boxes_interval(lo, hi)
    assert (lower <= value).all() and (value <= upper).all()
    assert (lower >= 0).all() and (upper <= 1).all()
    assert (upper - lower <= 1e-9 * value + 1e-14).all()


def test_sampling_frequencies_match_box_probabilities(model: PopulationModel) -> None:
    rng = np.random.default_rng(11)
    n = 40_000
    samples = model.sample(n, rng)
    assert samples.shape == (n, model.dimension)
    lo, hi = grid_cells(model, rng, cuts=2)
    chosen = rng.permutation(lo.shape[0])[:40]
    lo, hi = lo[chosen], hi[chosen]
    probabilities = model.prob_boxes(lo, hi)
    inside = (samples[:, None, :] >= lo[None]) & (samples[:, None, :] <= hi[None])
    frequencies = inside.all(axis=2).mean(axis=0)
    standard_error = np.sqrt(probabilities * (1 - probabilities) / n)
    assert (np.abs(frequencies - probabilities) <= 4 * standard_error + 1e-12).all()


def test_samples_respect_support_domains_and_onehot_groups(model: PopulationModel) -> None:
    samples = model.sample(5000, np.random.default_rng(5))
    low, high = model.support()
    domain_low, domain_high = model.domain_box()
    assert (samples >= low).all() and (samples <= high).all()
    assert (domain_low <= low).all() and (high <= domain_high).all()
    integer = model.integer_columns()
    assert (samples[:, integer] == np.round(samples[:, integer])).all()
    for group in model.onehot_groups():
        assert (samples[:, group].sum(axis=1) == 1).all()


def test_support_is_the_smallest_box(model: PopulationModel) -> None:
    """Every finite face of the support box carries mass arbitrarily close to it (faces whose
    neighbourhood mass underflows float64, e.g. 45 standard deviations out, are skipped)."""
    low, high = model.support()
    atomless = model.atomless_columns()

    def mass_near(column: int, end: float, direction: float, reach: float) -> float:
        lo = np.full(model.dimension, -INF)
        hi = np.full(model.dimension, INF)
        lo[column], hi[column] = sorted((end, end + direction * reach))
        return float(model.prob_boxes(lo, hi)[0])

    checked = 0
    for column in range(model.dimension):
        for end, direction in ((low[column], 1.0), (high[column], -1.0)):
            if not np.isfinite(end):
                continue
            if not atomless[column]:
                assert mass_near(column, end, direction, 0.0) > 0, (model.columns[column], end)
                checked += 1
            elif mass_near(column, end, direction, 1.0) > 0:
                reach = 1e-6 * max(1.0, abs(end))
                assert mass_near(column, end, direction, reach) > 0, (model.columns[column], end)
                checked += 1
    assert checked > 0 or not np.isfinite(np.concatenate([low, high])).any()


def test_json_round_trip(model: PopulationModel) -> None:
    document = json.loads(json.dumps(model.to_json(), allow_nan=False))
    again = population_from_json(document)
    assert again == model
    lo, hi = grid_cells(model, np.random.default_rng(2))
    np.testing.assert_array_equal(again.prob_boxes(lo, hi), model.prob_boxes(lo, hi))


def test_describe_names_every_column(model: PopulationModel) -> None:
    text = model.describe()
    assert all(column in text for column in model.columns)
    assert model.distribution.kind.split("_")[0] in text.lower()


def test_marginal_cdf_is_monotone_and_reaches_one(model: PopulationModel) -> None:
    points = np.linspace(-10, 10, 41)
    for column in model.columns:
        values = model.marginal_cdf(column, points)
        assert (np.diff(values) >= -1e-15).all()
        assert model.marginal_cdf(column, INF) == pytest.approx(1.0, abs=1e-14)
