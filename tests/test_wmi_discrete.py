"""Discrete and categorical columns in WMI: hand-computed exact cases (Fraction arithmetic)."""

from fractions import Fraction

import numpy as np
import pytest

from verifier.network import Layer, Network
from verifier.population import (
    Categorical,
    Discrete,
    Factor,
    Feature,
    PopulationModel,
    Product,
    Uniform,
)
from verifier.wmi import (
    WMIInputError,
    local_robustness,
    monotonicity,
    noise_robustness,
)
from verifier.wmi.noise import uniform_noise
from verifier.wmi.properties.local_robustness import local_robustness_queries

S_PROBABILITIES = (0.7, 0.3)


def binary_and_uniform() -> PopulationModel:
    """s ~ Bernoulli(0.3) (binary column 0), x ~ U[0, 1] (column 1)."""
    return PopulationModel(
        features=[Feature(name="s", kind="binary"), Feature(name="x", kind="continuous")],
        distribution=Product(factors=[
            Factor(columns=["s"], distribution=Discrete(values=[0.0, 1.0],
                                                         probabilities=list(S_PROBABILITIES))),
            Factor(columns=["x"], distribution=Uniform(lower=0.0, upper=1.0))]))


# logit = 0.5 − relu(x) + 2 relu(x + s − 1) − 0.75 relu(s): on x ∈ [0, 1] it is 0.5 − x for
# s = 0 (class 1 iff x <= 1/2: decreasing) and x − 0.25 for s = 1 (class 1 iff x >= 1/4).
THRESHOLD = Network([
    Layer(np.array([[0.0, 1.0], [1.0, 1.0], [1.0, 0.0]]), np.array([0.0, -1.0, 0.0]), "relu"),
    Layer(np.array([[-1.0, 2.0, -0.75]]), np.array([0.5])),
])


def _violation_given_s0() -> Fraction:
    """P(x <= 1/2 < x′ | x <= x′) for independent uniforms: (1/2 · 1/2) / (1/2)."""
    return Fraction(1, 4) / Fraction(1, 2)


def test_threshold_monotonicity_sums_the_binary_column_once() -> None:
    """Pairs share s; its probability enters once (squaring it would give a different value):
    P(violation) = P(s = 0) · 1/2 exactly."""
    result = monotonicity(THRESHOLD, binary_and_uniform(), 1, use_prior=True)
    expected = 1 - Fraction(7, 10) * _violation_given_s0()
    assert result.exact
    assert result.probability == pytest.approx(float(expected), abs=1e-9)
    squared = Fraction(49, 58) * _violation_given_s0()
    assert abs(result.violation_probability - float(squared)) > 1e-3


def test_threshold_monotonicity_uniform_prior_weights_values_equally() -> None:
    """use_prior false: s uniform over {0, 1}, x uniform on [0, 1]: P = 1 − 1/2 · 1/2."""
    result = monotonicity(THRESHOLD, binary_and_uniform(), 1, use_prior=False)
    assert result.exact
    assert result.probability == pytest.approx(float(1 - Fraction(1, 2) * _violation_given_s0()),
                                                abs=1e-9)


def three_categories() -> PopulationModel:
    """A one-hot colour (columns c0, c1, c2; probabilities 0.2 / 0.5 / 0.3), x ~ U[0, 1]."""
    return PopulationModel(
        features=[Feature(name="colour", kind="categorical", columns=["c0", "c1", "c2"]),
                  Feature(name="x", kind="continuous")],
        distribution=Product(factors=[
            Factor(columns=["c0", "c1", "c2"],
                   distribution=Categorical(probabilities=[0.2, 0.5, 0.3])),
            Factor(columns=["x"], distribution=Uniform(lower=0.0, upper=1.0))]))


# class 1 iff x >= t(colour), t = 0.2 / 0.5 / 0.8
CATEGORY_THRESHOLDS = Network([Layer(np.array([[-0.2, -0.5, -0.8, 1.0]]), np.array([0.0]))])


def test_categorical_column_sums_its_three_values() -> None:
    """P(class 1) = 0.2 · 0.8 + 0.5 · 0.5 + 0.3 · 0.2 over the whole support."""
    expected = (Fraction(2, 10) * Fraction(8, 10) + Fraction(5, 10) * Fraction(5, 10)
                + Fraction(3, 10) * Fraction(2, 10))
    result = local_robustness(CATEGORY_THRESHOLDS, three_categories(), [0.5, 0.5, 0.5, 0.5],
                              0.5, expected_class=1)
    assert result.exact
    assert result.probability == pytest.approx(float(expected), abs=1e-9)


def test_categorical_box_keeps_only_the_categories_inside() -> None:
    """An ε-box around colour 1 (ε = 0.4 on the one-hot columns) holds only that category."""
    result = local_robustness(CATEGORY_THRESHOLDS, three_categories(), [0.0, 1.0, 0.0, 0.5],
                              0.4, expected_class=1)
    assert result.probability == pytest.approx(float(Fraction(1, 2)), abs=1e-9)


def test_categorical_noise_robustness_closed_form() -> None:
    """Uniform noise n ∈ [0, 0.1] on x flips the class iff t − n <= x < t: probability E[n]
    = 0.05 for every colour."""
    result = noise_robustness(CATEGORY_THRESHOLDS, three_categories(), uniform_noise(0.0, 0.1),
                              [3])
    assert result.exact
    assert result.probability == pytest.approx(float(1 - Fraction(1, 20)), abs=1e-9)


def test_unread_discrete_values_share_one_query() -> None:
    """A network that ignores s gets one query for both values of s, with the same answer."""
    ignores_s = Network([Layer(np.array([[0.0, 1.0]]), np.array([-0.25]))])
    queries, _ = local_robustness_queries(ignores_s, binary_and_uniform(), [0.5, 0.5], 0.5, 1)
    assert len(queries) == 1
    result = local_robustness(ignores_s, binary_and_uniform(), [0.5, 0.5], 0.5, expected_class=1)
    assert result.probability == pytest.approx(0.75, abs=1e-9)


def test_discrete_feature_cannot_carry_noise() -> None:
    with pytest.raises(WMIInputError, match="'s'"):
        noise_robustness(THRESHOLD, binary_and_uniform(), uniform_noise(0.0, 0.1), [0])


def loan_population() -> PopulationModel:
    """The issue's new user: age, salary, tenure and a binary gender fitted by fit_product
    (truncated normals on bounded domains, a normal on salary, an empirical binary column)."""
    import pandas as pd

    from verifier.population.fitting import fit_product, infer_features

    rng = np.random.default_rng(0)
    n = 2000
    frame = pd.DataFrame({
        "age": np.clip(rng.normal(40, 10, n), 18, 90),
        "salary": rng.normal(50, 15, n),
        "tenure": np.clip(rng.normal(8, 4, n), 0, 40),
        "gender": rng.integers(0, 2, n),
    })
    features = infer_features(frame, domains={"age": (18, 90), "tenure": (0, 40)})
    return fit_product(frame, features)


def test_new_users_loan_model_runs_both_audits() -> None:
    """A model increasing in salary whatever the gender: monotonicity is 1 up to the tail
    mass the envelopes leave out; uniform pairs are refused naming the unbounded column."""
    from verifier.wmi import check_wmi_property
    from verifier.wmi.noise import triangular_noise

    net = Network([Layer(np.array([[0.01, 0.05, 0.02, -0.3]]), np.array([-3.5]))])
    prior = loan_population()
    result = monotonicity(net, prior, 1, use_prior=True)
    assert not result.exact
    assert result.probability_upper == 1.0 and result.probability_lower >= 1 - 1e-9
    with pytest.raises(WMIInputError, match="'salary'"):
        check_wmi_property("monotonicity", net, prior, feature=1, use_prior=False)
    noisy = noise_robustness(net, prior, triangular_noise(0.0, 0.0, 2.0), [2], stop_at=0.05,
                             timeout_s=60)
    assert noisy.probability_lower >= 0.95 or noisy.probability_upper < 0.95


def all_discrete() -> PopulationModel:
    """k ∈ {0, 1, 2} with probabilities 0.2 / 0.5 / 0.3 and a three-way category c:
    every column discrete, nothing to integrate."""
    return PopulationModel(
        features=[Feature(name="k", kind="integer"),
                  Feature(name="c", kind="categorical", columns=["c0", "c1", "c2"],
                          categories=["a", "b", "c"])],
        distribution=Product(factors=[
            Factor(columns=["k"], distribution=Discrete(values=[0.0, 1.0, 2.0],
                                                         probabilities=[0.2, 0.5, 0.3])),
            Factor(columns=["c0", "c1", "c2"],
                   distribution=Categorical(probabilities=[0.5, 0.25, 0.25]))]))


# class 1 iff k − 1 + c2 − c0 > 0; exactly 0 (a tie, class 0) at (1, b), (0, c) and (2, a)
TIED = Network([Layer(np.array([[1.0, -1.0, 0.0, 1.0]]), np.array([-1.0]))])


def test_equivalence_with_a_tree_on_an_all_discrete_population_is_a_finite_sum() -> None:
    from sklearn.tree import DecisionTreeClassifier

    from verifier.wmi import equivalence

    points = np.array([[k, *np.eye(3)[c]] for k in range(3) for c in range(3)])
    # the tree's class is 1 iff k >= 1
    tree = DecisionTreeClassifier(random_state=0).fit(points, points[:, 0] >= 1)
    weights = {0: Fraction(1, 5), 1: Fraction(1, 2), 2: Fraction(3, 10)}
    shares = (Fraction(1, 2), Fraction(1, 4), Fraction(1, 4))
    agree = Fraction(0)
    for k in range(3):
        for c in range(3):
            logit = k - 1 + (c == 2) - (c == 0)
            if int(logit > 0) == int(k >= 1):
                agree += weights[k] * shares[c]
    result = equivalence(TIED, tree, all_discrete())
    assert result.exact
    assert result.probability_lower <= float(agree) <= result.probability_upper
    assert result.probability == pytest.approx(float(agree), abs=1e-12)


def test_local_robustness_of_a_tree_on_an_all_discrete_population_is_a_finite_sum() -> None:
    from sklearn.tree import DecisionTreeClassifier

    points = np.array([[k, *np.eye(3)[c]] for k in range(3) for c in range(3)])
    labels = (points[:, 0] + points[:, 3] >= 2).astype(int)  # class 1 iff k + c2 >= 2
    tree = DecisionTreeClassifier(random_state=0).fit(points, labels)
    weights = {0: Fraction(1, 5), 1: Fraction(1, 2), 2: Fraction(3, 10)}
    shares = (Fraction(1, 2), Fraction(1, 4), Fraction(1, 4))
    # the box |x − (2, 0, 0, 1)|∞ <= 1 keeps k ∈ {1, 2} and every category; class 1 there
    # iff k = 2 or c = c
    inside = kept = Fraction(0)
    for k in (1, 2):
        for c in range(3):
            inside += weights[k] * shares[c]
            if k + (c == 2) >= 2:
                kept += weights[k] * shares[c]
    result = local_robustness(tree, all_discrete(), [2.0, 0.0, 0.0, 1.0], 1.0)
    assert result.exact and result.extra["expected_class"] == 1
    assert result.probability_lower <= float(kept / inside) <= result.probability_upper
    assert result.probability == pytest.approx(float(kept / inside), abs=1e-12)


def test_monotonicity_of_a_tree_on_an_all_discrete_population_is_a_finite_sum() -> None:
    from sklearn.tree import DecisionTreeClassifier

    points = np.array([[k, *np.eye(3)[c]] for k in range(3) for c in range(3)])
    labels = ((points[:, 0] == 1) | (points[:, 3] == 1)).astype(int)  # class 1 iff k = 1 or c
    tree = DecisionTreeClassifier(random_state=0).fit(points, labels)
    weights = {0: Fraction(1, 5), 1: Fraction(1, 2), 2: Fraction(3, 10)}
    shares = (Fraction(1, 2), Fraction(1, 4), Fraction(1, 4))
    pairs = lost = Fraction(0)
    for c in range(3):
        for k in range(3):
            for other in range(k + 1, 3):
                weight = weights[k] * shares[c] * weights[other]
                pairs += weight
                if (k == 1 or c == 2) and not (other == 1 or c == 2):
                    lost += weight  # class 1 at k, class 0 at the larger value
    expected = 1 - lost / pairs
    result = monotonicity(tree, all_discrete(), 0, use_prior=True)
    assert result.exact and expected < 1
    assert result.probability_lower <= float(expected) <= result.probability_upper
    assert result.probability == pytest.approx(float(expected), abs=1e-12)


def test_noise_robustness_of_a_tree_on_an_all_discrete_population_is_a_finite_sum() -> None:
    from sklearn.tree import DecisionTreeClassifier

    points = np.array([[k, *np.eye(3)[c]] for k in range(5) for c in range(3)])
    tree = DecisionTreeClassifier(random_state=0).fit(points, (points[:, 0] >= 2).astype(int))
    weights = {0: Fraction(1, 5), 1: Fraction(1, 2), 2: Fraction(3, 10)}
    shifts = {-1: Fraction(1, 4), 1: Fraction(3, 4)}
    kept = Fraction(0)
    for k, weight in weights.items():  # the category is not read: its shares sum to 1
        for shift, share in shifts.items():
            if (k >= 2) == (k + shift >= 2):
                kept += weight * share
    noise = Discrete(values=[-1.0, 1.0], probabilities=[0.25, 0.75])
    result = noise_robustness(tree, all_discrete(), noise, [0])
    assert result.exact and kept < 1
    assert result.probability_lower <= float(kept) <= result.probability_upper
    assert result.probability == pytest.approx(float(kept), abs=1e-12)
