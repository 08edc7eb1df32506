"""WMI properties against closed forms, brute-force region enumeration and Monte Carlo."""

import itertools

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier

from verifier.network import Layer, Network
from verifier.population import (
    Factor,
    Feature,
    Leaf,
    Normal,
    PiecewiseDensity,
    PopulationModel,
    Product,
    Uniform,
)
from verifier.wmi import (
    equivalence,
    local_robustness,
    monotonicity,
    noise_robustness,
)
from verifier.wmi.polytope import box_constraints, make_polytope


def uniform_box(lower: list[float], upper: list[float]) -> Product:
    return Product(factors=[
        Factor(columns=[f"x{i}"], distribution=Uniform(lower=lo, upper=hi))
        for i, (lo, hi) in enumerate(zip(lower, upper, strict=True))
    ])


def random_net(seed: int, sizes: list[int]) -> Network:
    rng = np.random.default_rng(seed)
    layers = [Layer(rng.normal(size=(b, a)), rng.normal(scale=0.5, size=b), "relu")
              for a, b in itertools.pairwise(sizes[:-1])]
    layers.append(Layer(rng.normal(size=(sizes[-1], sizes[-2])), rng.normal(size=sizes[-1])))
    return Network(layers)


def density_tree_prior() -> PiecewiseDensity:
    """A 2-D piecewise-constant density with unequal leaves on [-1, 1]²."""
    return PiecewiseDensity(leaves=[
        Leaf(lower=[-1, -1], upper=[0, 1], constant=0.1),
        Leaf(lower=[0, -1], upper=[1, 0], constant=0.2),
        Leaf(lower=[0, 0], upper=[1, 1], constant=0.6),
    ])


LINEAR = Network([Layer(np.array([[1.0, -1.0]]), np.array([0.0]))])


def test_linear_classifier_closed_forms() -> None:
    prior = uniform_box([0, 0], [1, 1])
    assert local_robustness(LINEAR, prior, [0.5, 0.5], 0.5, expected_class=1).probability == \
        pytest.approx(0.5, abs=1e-12)
    assert monotonicity(LINEAR, prior, 0).probability == pytest.approx(1.0, abs=1e-12)
    assert monotonicity(LINEAR, prior, 1, decreasing=True).probability == \
        pytest.approx(1.0, abs=1e-12)
    # increasing in x1 fails on {x1 <= x0 < x1'}: volume 1/6 of the half cube
    assert monotonicity(LINEAR, prior, 1).probability == pytest.approx(2 / 3, abs=1e-12)


def test_two_dimensional_relu_uniform() -> None:
    """relu(x0) + relu(x1) − 1 >= 0 on [−1, 1]²: area 1/2 of 4."""
    net = Network([Layer(np.eye(2), np.zeros(2), "relu"),
                   Layer(np.array([[1.0, 1.0]]), np.array([-1.0]))])
    result = local_robustness(net, uniform_box([-1, -1], [1, 1]), [0, 0], 1.0, expected_class=1)
    assert result.probability == pytest.approx(1 / 8, abs=1e-12)


def test_one_dimensional_non_uniform_prior() -> None:
    """Density 2x on [0, 1], logit relu(x − 1/2) − relu(1/2 − x): P(class 1) = 3/4."""
    net = Network([Layer(np.array([[1.0], [-1.0]]), np.array([-0.5, 0.5]), "relu"),
                   Layer(np.array([[1.0, -1.0]]), np.array([0.0]))])
    prior = PiecewiseDensity(leaves=[Leaf(lower=[0], upper=[1], polynomial=[([1], 2.0)])])
    result = local_robustness(net, prior, [0.5], 0.5, expected_class=1)
    assert result.probability == pytest.approx(3 / 4, abs=1e-12)


def test_tent_regressor_monotonicity() -> None:
    """f = 1 − 2|x − 1/2| on U[0,1]: P(f(x) <= f(x′) | x <= x′) = 1/2."""
    net = Network([Layer(np.array([[1.0], [-1.0]]), np.array([-0.5, 0.5]), "relu"),
                   Layer(np.array([[-2.0, -2.0]]), np.array([1.0]))])
    prior = PiecewiseDensity(leaves=[Leaf(lower=[0], upper=[1], constant=1.0)])
    assert monotonicity(net, prior, 0, output=0).probability == pytest.approx(0.5, abs=1e-12)
    assert monotonicity(net, prior, 0, output=0, decreasing=True).probability == \
        pytest.approx(0.5, abs=1e-12)


def test_triangular_noise_on_threshold_classifier() -> None:
    """x ~ U[0,1], class x >= 1/2, n ~ triangular 4 − 8n on [0, 1/2]: violation E[n] = 1/6."""
    net = Network([Layer(np.array([[1.0]]), np.array([-0.5]))])
    prior = PiecewiseDensity(leaves=[Leaf(lower=[0], upper=[1], constant=1.0)])
    noise = PiecewiseDensity(leaves=[Leaf(lower=[0], upper=[0.5],
                                          polynomial=[([0], 4.0), ([1], -8.0)])])
    result = noise_robustness(net, prior, noise, [0])
    assert result.probability == pytest.approx(5 / 6, abs=1e-12)


def test_network_versus_tree_equivalence() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, size=(200, 2))
    tree = DecisionTreeClassifier(max_depth=1).fit(x, (x[:, 0] > 0.3).astype(int))
    threshold = float(tree.tree_.threshold[0])
    net = Network([Layer(np.array([[1.0, 0.0]]), np.array([-0.5]))])
    prior = uniform_box([0, 0], [1, 1])
    assert equivalence(net, tree, prior).probability == \
        pytest.approx(1 - abs(threshold - 0.5), abs=1e-12)
    assert equivalence(tree, tree, prior).probability == 1.0
    assert equivalence(net, net, prior).probability == 1.0


def _brute_force_regions(net: Network, lower: np.ndarray, upper: np.ndarray) -> int:
    """Number of activation patterns whose region has positive volume (no pruning)."""
    A0, b0 = box_constraints(lower, upper)
    sizes = [layer.out_features for layer in net.layers[:-1]]
    count = 0
    for pattern in itertools.product([0, 1], repeat=sum(sizes)):
        A, b = [A0], [b0]
        H, g, start = np.eye(lower.size), np.zeros(lower.size), 0
        for layer, size in zip(net.layers[:-1], sizes, strict=True):
            pre_H, pre_g = layer.weight @ H, layer.weight @ g + layer.bias
            mask = np.array(pattern[start:start + size], dtype=float)
            start += size
            sign = np.where(mask == 1, -1.0, 1.0)
            A.append(sign[:, None] * pre_H)
            b.append(-sign * pre_g)
            H, g = mask[:, None] * pre_H, mask * pre_g
        if make_polytope(np.vstack(A), np.concatenate(b)) is not None:
            count += 1
    return count


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_region_count_equals_brute_force(seed: int) -> None:
    net = random_net(seed, [2, 4, 3, 1])
    prior = uniform_box([-1, -1], [1, 1])
    expected = _brute_force_regions(net, -np.ones(2), np.ones(2))
    with_bp = local_robustness(net, prior, [0, 0], 1.0, expected_class=1)
    without = local_robustness(net, prior, [0, 0], 1.0, expected_class=1, bound_method="none")
    assert with_bp.regions == expected == without.regions
    assert with_bp.probability == pytest.approx(without.probability, abs=1e-12)


@pytest.mark.parametrize("seed", [4, 5])
def test_random_networks_agree_with_monte_carlo(seed: int) -> None:
    prior = density_tree_prior()
    first, second = random_net(seed, [2, 6, 6, 1]), random_net(seed + 100, [2, 6, 1])
    exact = equivalence(first, second, prior).probability
    samples = prior.sample(200_000, np.random.default_rng(seed))
    agree = (first.evaluate(samples)[:, 0] >= 0) == (second.evaluate(samples)[:, 0] >= 0)
    error = np.sqrt(max(agree.mean() * (1 - agree.mean()), 1e-6) / samples.shape[0])
    assert abs(exact - agree.mean()) <= 4 * error


def test_noise_robustness_monte_carlo_multiclass() -> None:
    net = random_net(7, [2, 5, 3])
    prior = density_tree_prior()
    noise = PiecewiseDensity(leaves=[Leaf(lower=[-0.3], upper=[0.3], constant=1 / 0.6)])
    exact = noise_robustness(net, prior, noise, [1]).probability
    rng = np.random.default_rng(1)
    x = prior.sample(200_000, rng)
    shifted = x.copy()
    shifted[:, 1] += rng.uniform(-0.3, 0.3, size=x.shape[0])
    same = net.classify(x) == net.classify(shifted)
    error = np.sqrt(max(same.mean() * (1 - same.mean()), 1e-6) / x.shape[0])
    assert abs(exact - same.mean()) <= 4 * error


def test_early_stop_reports_a_lower_bound() -> None:
    net = random_net(8, [2, 8, 8, 1])
    prior = uniform_box([-1, -1], [1, 1])
    full = local_robustness(net, prior, [0, 0], 1.0, expected_class=1)
    assert full.violation_probability > 0.1
    early = local_robustness(net, prior, [0, 0], 1.0, expected_class=1, stop_at=0.1)
    assert early.stopped_early
    assert 0.1 <= early.violation_probability <= full.violation_probability + 1e-12
    assert early.regions <= full.regions


def test_executor_gives_the_same_answer() -> None:
    from verifier.executor import make_executor

    net = random_net(9, [2, 6, 1])
    prior = density_tree_prior()
    sequential = equivalence(net, LINEAR, prior)
    with make_executor("local") as executor:
        parallel = equivalence(net, LINEAR, prior, executor=executor)
    assert parallel.probability == pytest.approx(sequential.probability, abs=1e-12)


def test_gaussian_prior_gives_a_certified_interval() -> None:
    """A normal prior is no longer refused: P(x >= 0 | |x| <= 0.1) = 1/2 by symmetry lies in
    a narrow certified interval, and the result says it is not exact."""
    prior = PopulationModel(features=[Feature(name="a", kind="continuous")],
                            distribution=Normal(mean=0.0, std=1.0))
    net = Network([Layer(np.array([[1.0]]), np.array([0.0]))])
    result = local_robustness(net, prior, [0.0], 0.1)
    assert not result.exact
    assert result.probability_lower <= 0.5 <= result.probability_upper
    assert result.probability_upper - result.probability_lower <= 1e-4


def test_forest_equivalence_agrees_with_monte_carlo() -> None:
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(12)
    x = rng.uniform(-1, 1, size=(400, 2))
    labels = (x[:, 0] + 0.5 * x[:, 1] ** 2 > 0.1).astype(int)
    forest = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(x, labels)
    net = random_net(13, [2, 5, 1])
    prior = density_tree_prior()
    exact = equivalence(net, forest, prior).probability
    samples = prior.sample(200_000, np.random.default_rng(2))
    agree = (net.evaluate(samples)[:, 0] >= 0).astype(int) == forest.predict(samples)
    error = np.sqrt(max(agree.mean() * (1 - agree.mean()), 1e-6) / samples.shape[0])
    assert abs(exact - agree.mean()) <= 4 * error


def test_monotonicity_agrees_with_monte_carlo() -> None:
    net = random_net(14, [2, 6, 6, 1])
    prior = uniform_box([-1, -1], [1, 1])
    exact = monotonicity(net, prior, 0).probability
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, size=(400_000, 2))
    moved = x.copy()
    moved[:, 0] = rng.uniform(-1, 1, size=x.shape[0])
    keep = x[:, 0] <= moved[:, 0]
    before = net.evaluate(x[keep])[:, 0] >= 0
    after = net.evaluate(moved[keep])[:, 0] >= 0
    holds = ~before | after
    error = np.sqrt(max(holds.mean() * (1 - holds.mean()), 1e-6) / keep.sum())
    assert 0.0 < exact < 1.0
    assert abs(exact - holds.mean()) <= 4 * error


def test_an_early_stop_keeps_the_interval_around_the_probability() -> None:
    """x from a 16-bin histogram on [0, 1], class 1 iff x < 1/2: P(x < 1/2 <= x′ | x < x′)
    = (1/4) / (1/2), so the monotonicity probability is 1/2 exactly. Stopping once the
    violation is known to reach 0.3 leaves roots unenumerated; their possible violation
    stays in the interval, which must still contain 1/2 (it ended at the reached share)."""
    from verifier.population import Mixture

    edges = np.linspace(0.0, 1.0, 17)
    histogram = Mixture(weights=[1 / 16] * 16,
                        components=[Uniform(lower=a, upper=b)
                                    for a, b in itertools.pairwise(edges)])
    prior = PopulationModel(
        features=[Feature(name="x", kind="continuous"), Feature(name="y", kind="continuous")],
        distribution=Product(factors=[Factor(columns=["x"], distribution=histogram),
                                      Factor(columns=["y"], distribution=Uniform(lower=0,
                                                                                 upper=1))]))
    below_half = Network([Layer(np.array([[-1.0, 0.0]]), np.array([0.5]))])
    result = monotonicity(below_half, prior, 0, use_prior=True, stop_at=0.3)
    assert result.stopped_early
    assert result.probability_lower <= 0.5 <= result.probability_upper
    assert monotonicity(below_half, prior, 0, use_prior=True).probability == \
        pytest.approx(0.5, abs=1e-12)
