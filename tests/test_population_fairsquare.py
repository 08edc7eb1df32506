"""The FairSquare benchmark's population models (paper 003) in certgate's format."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from scipy.special import ndtr

from verifier.population import BayesianNetwork, PopulationError, Product
from verifier.population.fairsquare import population_from_fairsquare

SOURCE = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "fairsquare" / (
    "population_models.json")
pytestmark = pytest.mark.skipif(not SOURCE.is_file(), reason="shared/benchmarks not present")
DATA = json.loads(SOURCE.read_text()) if SOURCE.is_file() else {"variables": [], "models": {}}
VARIABLES = DATA["variables"]
MODELS = DATA["models"]
INF = np.inf
SEX = 2


def convert(name: str, **options):
    return population_from_fairsquare(MODELS[name], VARIABLES, **options)


def box(**bounds) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.full(6, -INF), np.full(6, INF)
    for name, (low, high) in bounds.items():
        lo[VARIABLES.index(name)], hi[VARIABLES.index(name)] = low, high
    return lo, hi


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_converts_with_the_table_value_for_sex(name: str) -> None:
    model = convert(name)
    assert model.columns == tuple(VARIABLES)
    assert model.column_kinds()[SEX] == "integer"
    female = box(sex=(0, 0))
    p = model.prob_boxes(*female)[0]
    assert abs(p - 0.3307) <= 1e-15
    lower, upper = model.prob_boxes_interval(*female)
    assert lower[0] <= 0.3307 <= upper[0]
    assert model.prob_boxes(*box())[0] == pytest.approx(1.0, abs=1e-15)
    expected_kind = Product if MODELS[name]["kind"] == "independent" else BayesianNetwork
    assert isinstance(model.distribution, expected_kind)


def test_variances_and_truncations_are_kept_exactly() -> None:
    model = convert("bayes_net_1_clipped")
    nodes = {node.name: node for node in model.distribution.nodes}
    c4 = nodes["age"].cpt[3]
    assert c4.label == "c4"
    assert c4.condition == {"sex": (1.0, 1.0), "capital_gain": (5178.0, 65000.0)}
    assert (c4.distribution.variance, c4.distribution.lower, c4.distribution.upper) == (
        187.2747, 0.0, 125.0)
    slip = population_from_fairsquare(MODELS["bayes_net_1_clipped"], VARIABLES,
                                      use_probspecs_variance=True)
    assert {n.name: n for n in slip.distribution.nodes}["age"].cpt[3].distribution.variance == (
        187.2435)
    assert model.to_json()["distribution"]["nodes"][1]["cpt"][0]["distribution"]["variance"] == (
        24248365.5428)


def test_preprocessing_is_not_part_of_the_distribution() -> None:
    assert convert("bayes_net_2").distribution == convert("bayes_net_1").distribution
    clipped = convert("bayes_net_1_clipped").distribution
    assert convert("bayes_net_2_clipped").distribution == clipped


def test_conditional_box_equals_the_cpt_row_closed_form() -> None:
    """P(age ∈ [30, 50] | sex = 0, capital_gain <= 7298) is row c1's normal probability."""
    model = convert("bayes_net_1")
    condition = box(sex=(0, 0), capital_gain=(-INF, 7298.0))
    joint = box(sex=(0, 0), capital_gain=(-INF, 7298.0), age=(30.0, 50.0))
    ratio = model.prob_boxes(*joint)[0] / model.prob_boxes(*condition)[0]
    std = math.sqrt(184.9151)
    expected = ndtr((50 - 38.4208) / std) - ndtr((30 - 38.4208) / std)
    assert ratio == pytest.approx(expected, rel=1e-13)
    gain_std = math.sqrt(24248365.5428)
    assert model.prob_boxes(*condition)[0] == pytest.approx(
        0.3307 * ndtr((7298 - 568.4105) / gain_std), rel=1e-14)


def test_independent_model_is_the_product_of_its_marginals() -> None:
    model = convert("independent_clipped")
    lo, hi = box(age=(18.0, 40.0), sex=(1, 1), capital_gain=(0.0, 5000.0))
    marginals = MODELS["independent_clipped"]["marginals"]

    def truncated(name: str, a: float, b: float) -> float:
        spec = marginals[name]
        std = math.sqrt(spec["variance"])
        low, high = spec["truncation"]
        cdf = [ndtr((x - spec["mean"]) / std) for x in (a, b, low, high)]
        return (cdf[1] - cdf[0]) / (cdf[3] - cdf[2])

    expected = truncated("age", 18, 40) * 0.6693 * truncated("capital_gain", 0, 5000)
    assert model.prob_boxes(lo, hi)[0] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("name", "n"), [("bayes_net_1", 1_000_000), ("bayes_net_1_clipped", 200_000)]
)
def test_bayes_net_matches_monte_carlo_on_boxes(name: str, n: int) -> None:
    model = convert(name)
    samples = model.sample(n, np.random.default_rng(17))
    boxes = [
        box(sex=(0, 0), age=(18.0, 40.0)),
        box(sex=(1, 1), capital_gain=(5178.0, INF), education_num=(9.0, 12.0)),
        box(age=(30.0, 60.0), education_num=(-INF, 10.0), capital_gain=(0.0, 7298.0)),
        box(sex=(0, 1), hours_per_week=(40.0, 45.0), capital_loss=(-INF, 100.0)),
        box(capital_gain=(7298.0, INF)),
    ]
    lo = np.array([b[0] for b in boxes])
    hi = np.array([b[1] for b in boxes])
    probabilities = model.prob_boxes(lo, hi)
    inside = ((samples[:, None, :] >= lo[None]) & (samples[:, None, :] <= hi[None])).all(axis=2)
    frequencies = inside.mean(axis=0)
    error = np.sqrt(probabilities * (1 - probabilities) / n)
    assert (np.abs(frequencies - probabilities) <= 4 * error).all(), (frequencies, probabilities)


def test_a_cpt_that_does_not_partition_its_parents_is_rejected() -> None:
    broken = copy.deepcopy(MODELS["bayes_net_1"])
    age = next(node for node in broken["nodes"] if node["name"] == "age")
    del age["cpt"][1]
    with pytest.raises(ValidationError,
                       match=r"node 'age': the region sex = 0, capital_gain in \(7298, inf\)"):
        population_from_fairsquare(broken, VARIABLES)
    overlapping = copy.deepcopy(MODELS["bayes_net_1"])
    age = next(node for node in overlapping["nodes"] if node["name"] == "age")
    age["cpt"][0]["condition"]["capital_gain"] = [None, 8000.0]
    with pytest.raises(ValidationError, match=r"node 'age': CPT rows \[0, 1\] overlap"):
        population_from_fairsquare(overlapping, VARIABLES)


def test_unknown_model_kind_is_an_error() -> None:
    with pytest.raises(PopulationError, match="unknown FairSquare model kind"):
        population_from_fairsquare({"kind": "svm", "input_space": MODELS["independent"][
            "input_space"]}, VARIABLES)
