"""Fitting helpers recover the parameters of data drawn from known distributions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from verifier.population import (
    Categorical,
    Discrete,
    DiscretisedNormal,
    Feature,
    Mixture,
    Normal,
    PiecewiseDensity,
    PopulationError,
    TruncatedNormal,
)
from verifier.population.fitting import (
    fit_bayesian_network,
    fit_density_tree,
    fit_gaussian_mixture,
    fit_marginal,
    fit_product,
    infer_features,
)

N = 20_000


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(12)
    colour = rng.choice(3, size=N, p=[0.2, 0.5, 0.3])
    return pd.DataFrame({
        "height": rng.normal(170.0, 8.0, size=N),
        "wait": TruncatedNormal(mean=1.0, std=2.0, lower=0.0, upper=5.0).sample(N, rng)[:, 0],
        "children": rng.choice([0, 1, 2, 3], size=N, p=[0.4, 0.3, 0.2, 0.1]),
        "visits": np.round(rng.normal(50.0, 12.0, size=N)).astype(np.int64),
        "member": rng.integers(0, 2, size=N),
        "red": (colour == 0).astype(np.int64),
        "green": (colour == 1).astype(np.int64),
        "blue": (colour == 2).astype(np.int64),
    })


def test_infer_features_from_dtypes(frame: pd.DataFrame) -> None:
    features = infer_features(frame, categorical={"colour": ["red", "green", "blue"]},
                              domains={"wait": (0.0, 5.0)})
    kinds = {feature.name: feature.kind for feature in features}
    assert kinds == {"height": "continuous", "wait": "continuous", "children": "integer",
                     "visits": "integer", "member": "binary", "colour": "categorical"}
    assert [f.name for f in features] == ["height", "wait", "children", "visits", "member",
                                          "colour"]


def test_normal_and_truncated_normal_parameters_are_recovered(frame: pd.DataFrame) -> None:
    normal = fit_marginal(frame, Feature(name="height", kind="continuous"))
    assert isinstance(normal, Normal)
    assert abs(normal.mean - 170.0) <= 4 * 8.0 / np.sqrt(N)
    assert abs(normal.sigma - 8.0) <= 4 * 8.0 / np.sqrt(2 * N)
    truncated = fit_marginal(frame, Feature(name="wait", kind="continuous", domain=(0, 5)))
    assert isinstance(truncated, TruncatedNormal)
    assert (truncated.lower, truncated.upper) == (0.0, 5.0)
    assert truncated.mean == pytest.approx(1.0, abs=0.15)
    assert truncated.sigma == pytest.approx(2.0, abs=0.1)


def test_integer_and_categorical_frequencies(frame: pd.DataFrame) -> None:
    children = fit_marginal(frame, Feature(name="children", kind="integer", domain=(0, None)))
    assert isinstance(children, Discrete) and children.values == [0, 1, 2, 3]
    for estimate, truth in zip(children.probabilities, [0.4, 0.3, 0.2, 0.1], strict=True):
        assert abs(estimate - truth) <= 4 * np.sqrt(truth * (1 - truth) / N)
    visits = fit_marginal(frame, Feature(name="visits", kind="integer"))
    assert isinstance(visits, DiscretisedNormal)
    assert visits.mean == pytest.approx(50.0, abs=4 * 12 / np.sqrt(N))
    colour = fit_marginal(frame, Feature(name="colour", kind="categorical",
                                         columns=["red", "green", "blue"]))
    assert isinstance(colour, Categorical)
    np.testing.assert_allclose(colour.probabilities, [0.2, 0.5, 0.3], atol=4 * 0.5 / np.sqrt(N))


def test_gaussian_mixture_recovers_separated_components() -> None:
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.normal(-5.0, 1.0, 6000), rng.normal(4.0, 0.5, 14000)])
    frame = pd.DataFrame({"x": values})
    mixture = fit_gaussian_mixture(frame, Feature(name="x", kind="continuous"), n_components=2)
    assert isinstance(mixture, Mixture)
    order = np.argsort([c.mean for c in mixture.components])
    weights = np.array(mixture.weights)[order]
    means = np.array([mixture.components[i].mean for i in order])
    stds = np.array([mixture.components[i].sigma for i in order])
    np.testing.assert_allclose(weights, [0.3, 0.7], atol=0.015)
    np.testing.assert_allclose(means, [-5.0, 4.0], atol=0.05)
    np.testing.assert_allclose(stds, [1.0, 0.5], atol=0.05)
    bounded = fit_gaussian_mixture(frame.clip(-8, 8), Feature(name="x", kind="continuous",
                                                               domain=(-8, 8)), n_components=2)
    assert all(isinstance(c, TruncatedNormal) for c in bounded.components)


def test_density_tree_counts_match_leaf_masses() -> None:
    rng = np.random.default_rng(3)
    data = np.column_stack([rng.beta(2, 5, 5000), rng.uniform(0, 10, 5000)])
    frame = pd.DataFrame(data, columns=["a", "b"])
    tree = fit_density_tree(frame, ["a", "b"], min_leaf=100, lower=[0, 0], upper=[1, 10])
    assert isinstance(tree, PiecewiseDensity) and len(tree.leaves) >= 16
    lo = np.array([leaf.lower for leaf in tree.leaves])
    hi = np.array([leaf.upper for leaf in tree.leaves])
    masses = tree.prob_boxes(lo, hi)
    assert masses.sum() == pytest.approx(1.0, abs=1e-12)
    # a point on a split face went to the lower leaf, so leaves are (lower, upper] here
    # (no data point lies on the outer lower faces 0)
    inside = (data[None] > lo[:, None]) & (data[None] <= hi[:, None])
    counts = inside.all(axis=2).sum(axis=1)
    assert counts.sum() == 5000 and (counts >= 100).all()
    np.testing.assert_allclose(masses * 5000, counts, rtol=1e-9)
    # the density follows the Beta(2, 5) shape of column a: more mass below 0.3 than above
    below = tree.prob_boxes([[-np.inf, -np.inf]], [[0.3, np.inf]])[0]
    assert below == pytest.approx(np.mean(data[:, 0] <= 0.3), abs=0.02)


def test_fit_product_with_each_continuous_method(frame: pd.DataFrame) -> None:
    features = infer_features(frame, categorical={"colour": ["red", "green", "blue"]},
                              domains={"wait": (0.0, 5.0)})
    for method in ("normal", "gaussian_mixture", "density_tree"):
        model = fit_product(frame, features, continuous=method, min_leaf=500)
        assert model.columns == tuple(frame.columns)
        total = model.prob_boxes(np.full(model.dimension, -np.inf),
                                 np.full(model.dimension, np.inf))[0]
        assert total == pytest.approx(1.0, abs=1e-12)
        frequency = np.mean(frame["height"] <= 165)
        assert model.marginal_cdf("height", 165.0) == pytest.approx(frequency, abs=0.02)


def test_fit_bayesian_network_recovers_the_tables() -> None:
    rng = np.random.default_rng(5)
    n = 30_000
    group = rng.integers(0, 2, size=n)
    income = np.where(group == 0, rng.normal(30.0, 5.0, n), rng.normal(50.0, 10.0, n))
    approved = (rng.random(n) < np.where(income <= 40.0, 0.2, 0.7)).astype(np.int64)
    frame = pd.DataFrame({"group": group, "income": income, "approved": approved})
    features = infer_features(frame)
    model = fit_bayesian_network(frame, features,
                                 parents={"income": ["group"], "approved": ["income"]},
                                 bins={"income": [40.0]})
    nodes = {node.name: node for node in model.distribution.nodes}
    assert [node.name for node in model.distribution.nodes] == ["group", "income", "approved"]
    rows = nodes["income"].cpt
    assert rows[0].condition == {"group": (0.0, 0.0)}
    assert rows[0].distribution.mean == pytest.approx(30.0, abs=0.15)
    assert rows[1].distribution.sigma == pytest.approx(10.0, abs=0.2)
    approval = nodes["approved"].cpt
    assert approval[0].condition == {"income": (None, 40.0)}
    assert approval[0].distribution.probabilities[1] == pytest.approx(0.2, abs=0.015)
    assert approval[1].distribution.probabilities[1] == pytest.approx(0.7, abs=0.015)
    box = model.prob_boxes([1, 45.0, 1], [1, np.inf, 1])[0]
    assert box == pytest.approx(np.mean((group == 1) & (income >= 45) & (approved == 1)), abs=0.01)


def test_fitting_errors_name_the_feature() -> None:
    frame = pd.DataFrame({"x": [1.0, 2.0, np.nan], "k": [0.5, 1.0, 2.0], "c": [3.0, 3.0, 3.0]})
    with pytest.raises(PopulationError, match=r"'x'.*NaN"):
        fit_marginal(frame, Feature(name="x", kind="continuous"))
    with pytest.raises(PopulationError, match="'k' is integer"):
        fit_marginal(frame, Feature(name="k", kind="integer"))
    with pytest.raises(PopulationError, match="'c' is constant"):
        fit_marginal(frame, Feature(name="c", kind="continuous"))
    with pytest.raises(PopulationError, match="domain"):
        fit_marginal(frame, Feature(name="k", kind="continuous", domain=(0, 1)))
    with pytest.raises(PopulationError, match="needs bins"):
        fit_bayesian_network(frame.fillna(0.0), [Feature(name="x", kind="continuous"),
                                                Feature(name="k", kind="continuous")],
                             parents={"k": ["x"]})
    with pytest.raises(PopulationError, match="cycle"):
        fit_bayesian_network(frame.fillna(0.0), [Feature(name="x", kind="continuous"),
                                                Feature(name="k", kind="continuous")],
                             parents={"k": ["x"], "x": ["k"]}, bins={"x": [1.0], "k": [1.0]})
