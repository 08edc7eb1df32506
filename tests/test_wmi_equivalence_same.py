"""Equivalence of a network with a surrogate that is the same classifier: probability exactly 1,
proven. Oracles: the closed form (no input disagrees), exact enumeration in ``Fraction`` of a
discrete population whose points tie logits, and a surrogate differing on one atom (closed
form 3/4), which must not be taken for the same classifier."""

from __future__ import annotations

import copy
import itertools
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest

from verifier.network import Layer, Network
from verifier.population import Discrete, Factor, Feature, PopulationModel, Product, Uniform
from verifier.wmi import WMIInputError, equivalence
from verifier.wmi.properties.equivalence import same_classifier

RELU3 = Network([
    Layer(np.array([[1.0, -1.0], [-2.0, 0.5], [0.3, 1.0]]), np.array([0.0, 0.5, -0.2]), "relu"),
    Layer(np.array([[1.0, -1.0, 0.5], [0.0, 1.0, -1.0], [-1.0, 0.0, 1.0]]),
          np.array([0.0, 0.1, 0.2])),
])
# logits (x, x): every point of the population below ties the two classes
TIED = Network([Layer(np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([0.0, 0.0]))])


def uniform_pair() -> PopulationModel:
    return PopulationModel(
        features=[Feature(name="x", kind="continuous"), Feature(name="z", kind="continuous")],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Uniform(lower=0.0, upper=1.0)),
            Factor(columns=["z"], distribution=Uniform(lower=-1.0, upper=2.0))]))


def atom_and_uniform() -> PopulationModel:
    """x on {0, 0.5, 1} with probabilities 1/4, 1/4, 1/2; z ~ U[−1, 2]."""
    return PopulationModel(
        features=[Feature(name="x", kind="continuous"), Feature(name="z", kind="continuous")],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Discrete(values=[0.0, 0.5, 1.0],
                                                        probabilities=[0.25, 0.25, 0.5])),
            Factor(columns=["z"], distribution=Uniform(lower=-1.0, upper=2.0))]))


def test_a_surrogate_that_is_the_model_agrees_with_probability_one_proven() -> None:
    """Before, the float enumeration said 1 unproven and box branching stopped at its
    precision, [0.99990, 1]: a threshold of 1 could never be met."""
    twin = copy.deepcopy(RELU3)
    assert same_classifier(RELU3, twin)
    result = equivalence(RELU3, twin, uniform_pair(), stop_at=1e-12, timeout_s=30, prove=True)
    assert result.proven and result.exact
    assert (result.probability_lower, result.probability_upper) == (1.0, 1.0)
    boxed = equivalence(RELU3, twin, uniform_pair(), center=np.array([0.5, 0.5]), epsilon=0.1)
    assert boxed.proven and (boxed.probability_lower, boxed.probability_upper) == (1.0, 1.0)


def test_tied_logits_on_a_discrete_population_are_the_same_class_in_both() -> None:
    logits = TIED.evaluate(np.array([[x, 0.0] for x in (0.0, 0.5, 1.0)]))
    assert np.array_equal(logits[:, 0], logits[:, 1])
    result = equivalence(TIED, copy.deepcopy(TIED), atom_and_uniform(), timeout_s=30)
    assert result.proven and (result.probability_lower, result.probability_upper) == (1.0, 1.0)


def test_a_surrogate_differing_on_one_atom_is_not_the_same_classifier() -> None:
    """The model is class 1 except at x = 0.5, where its logits tie and class 0 wins; the
    surrogate is class 1 everywhere. With mass 1/4 on x = 0.5, P(agree) = 3/4 exactly.
    Neither network reads z, so z is summed out and the pairs are x's three points: box
    branching proves the interval (its ``probability`` is an end of it, not a float value)."""
    model = Network([
        Layer(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([-0.5, 0.5]), "relu"),
        Layer(np.array([[-1.0, -1.0], [0.0, 0.0], [0.0, 0.0]]), np.array([0.0, 0.0, -1.0])),
    ])
    surrogate = Network([Layer(np.array([[1.0, 0.0]]), np.array([0.0]), "relu"),
                         Layer(np.array([[0.0], [0.0], [0.0]]), np.array([-1.0, 0.0, -1.0]))])
    assert not same_classifier(model, surrogate)

    def classes(network: Network, x: Fraction) -> int:
        hidden = [max(Fraction(0), Fraction(w[0]) * x + Fraction(b))
                  for w, b in zip(network.layers[0].weight, network.layers[0].bias,
                                  strict=True)]
        logits = [sum(Fraction(w) * h for w, h in zip(row, hidden, strict=True)) + Fraction(b)
                  for row, b in zip(network.layers[1].weight, network.layers[1].bias,
                                    strict=True)]
        return logits.index(max(logits))

    masses = {Fraction(0): Fraction(1, 4), Fraction(1, 2): Fraction(1, 4),
              Fraction(1): Fraction(1, 2)}
    oracle = sum(mass for x, mass in masses.items() if classes(model, x) == classes(surrogate, x))
    assert oracle == Fraction(3, 4)
    result = equivalence(model, surrogate, atom_and_uniform(), timeout_s=30)
    assert result.proven and result.extra["method"] == "box branching (PV)"
    assert result.probability_lower <= float(oracle) <= result.probability_upper
    assert result.probability_upper - result.probability_lower < 1e-9


def test_the_same_classifier_over_a_box_without_mass_is_refused() -> None:
    with pytest.raises(WMIInputError, match="probability zero"):
        equivalence(RELU3, copy.deepcopy(RELU3), uniform_pair(), center=np.array([5.0, 5.0]),
                    epsilon=0.1)


def test_a_changed_weight_or_activation_is_another_classifier() -> None:
    for index, change in itertools.product(range(2), ("weight", "activation")):
        layers = list(RELU3.layers)
        layer = layers[index]
        if change == "weight":
            weight = layer.weight.copy()
            weight[0, 0] = np.nextafter(weight[0, 0], np.inf)
            layers[index] = Layer(weight, layer.bias, layer.activation)
        else:
            layers[index] = Layer(layer.weight, layer.bias,
                                  "none" if layer.activation == "relu" else "relu")
        assert not same_classifier(RELU3, Network(layers))


def _folded_model_and_its_floats() -> tuple[Network, Network, float, Fraction]:
    """A Linear → BatchNorm model, folded by the converter into one layer whose bias rounds
    to 0.0 while the model's real bias is about −6.8e-18, and a surrogate holding the folded
    floats themselves. At the returned ``x0`` (between the two roots) the surrogate is class
    1 and the model class 0: its real logit, computed to 100 digits from its own parameters,
    is negative (returned)."""
    import torch

    from verifier.convert.torch_module import from_torch

    eps, gain, mean, var = 1e-5, 1.3, 0.2, 2.0
    shift = float(-(gain * (0.1 - mean) / np.sqrt(var + eps)))
    model = torch.nn.Sequential(torch.nn.Linear(1, 1), torch.nn.BatchNorm1d(1, eps=eps))
    model = model.double().eval()
    with torch.no_grad():
        model[0].weight.fill_(3.0)
        model[0].bias.fill_(0.1)
        model[1].running_mean.fill_(mean)
        model[1].running_var.fill_(var)
        model[1].weight.fill_(gain)
        model[1].bias.fill_(shift)
    network = from_torch(model, input_shape=1, input_names=["x"])
    [layer] = network.layers
    surrogate = Network([Layer(layer.weight.copy(), layer.bias.copy())], input_names=["x"])
    getcontext().prec = 100

    def exact(value: float) -> Decimal:
        ratio = Fraction(value)
        return Decimal(ratio.numerator) / Decimal(ratio.denominator)

    scale = exact(gain) / (exact(var) + exact(eps)).sqrt()
    weight, bias = scale * exact(3.0), scale * (exact(0.1) - exact(mean)) + exact(shift)
    surrogate_root = -Fraction(float(layer.bias[0])) / Fraction(float(layer.weight[0, 0]))
    x0 = float((exact(float(surrogate_root)) + -bias / weight) / 2)
    logit = weight * exact(x0) + bias
    return network, surrogate, x0, Fraction(str(logit))


def test_a_folded_model_and_its_floats_are_not_the_same_classifier() -> None:
    """The surrogate of a folded model (its floats written as plain weights) computes another
    function: on an atom between the two roots they disagree. Before, the same-classifier
    shortcut certified agreement 1, and box branching then [0.9999999999999999, 1] (the
    atom's undecided mass left the upper end); the truth is 0 on the atom, 1/2 with an
    atom of 1/2 where both agree."""
    network, surrogate, x0, logit = _folded_model_and_its_floats()
    assert network.folded and logit < 0
    assert Fraction(float(surrogate.layers[0].weight[0, 0])) * Fraction(x0) + Fraction(
        float(surrogate.layers[0].bias[0])) > 0
    assert not same_classifier(network, surrogate)
    for values, truth in (([x0], 0.0), ([x0, 0.5], 0.5)):
        population = PopulationModel(
            features=[Feature(name="x", kind="continuous")],
            distribution=Product(factors=[Factor(columns=["x"], distribution=Discrete(
                values=values, probabilities=[1 / len(values)] * len(values)))]))
        result = equivalence(network, surrogate, population, stop_at=0.1, timeout_s=30,
                             prove=True)
        assert result.proven
        assert result.probability_lower <= truth <= result.probability_upper
