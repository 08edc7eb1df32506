"""Local robustness's expected class, when not given, is the model's class at the centre in
real arithmetic (the tie rule), not the class of its float evaluation.

Oracle: ``z = relu(x + 1/2) − relu(x) − 1/2`` is exactly 0 for every ``x ≥ 0`` (class 0, the
tie rule), a closed form; float evaluation gives ``fl(x + 1/2) − x − 1/2``, which is
``2⁻⁵³`` at ``x = 0.6`` (class 1). Before, the centre's class was read in float: expected class
1, and ``P(class(x) = 1 | |x − 0.6| <= 0.01)`` was certified exactly 0 where the model's
probability of keeping its class is 1.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from verifier.exact_arith import exact_outputs
from verifier.network import Layer, Network
from verifier.population import Factor, Feature, PopulationModel, Product, Uniform
from verifier.wmi import WMIInputError, local_robustness

FLAT = Network([Layer(np.array([[1.0], [1.0]]), np.array([0.5, 0.0]), "relu"),
                Layer(np.array([[1.0, -1.0]]), np.array([-0.5]))], ["x"], ["z"])
UNIFORM = PopulationModel(
    features=[Feature(name="x", kind="continuous")],
    distribution=Product(factors=[Factor(columns=["x"],
                                         distribution=Uniform(lower=0.0, upper=1.0))]))


def test_the_flat_network_rounds_to_class_one_at_the_centre() -> None:
    """The premise: float says class 1 at 0.6, real arithmetic a tie (class 0)."""
    assert FLAT.evaluate(np.array([[0.6]]))[0, 0] > 0
    assert exact_outputs(FLAT, [0.6]) == [Fraction(0)]


def test_the_expected_class_is_the_real_class_at_the_centre() -> None:
    result = local_robustness(FLAT, UNIFORM, [0.6], 0.01)
    assert result.extra["expected_class"] == 0
    assert result.probability_lower <= 1.0 <= result.probability_upper
    assert result.probability_lower == pytest.approx(1.0, abs=1e-9)


def test_an_undecidable_centre_asks_for_the_class() -> None:
    """A folded network whose centre ties cannot be read exactly: the class is asked for."""
    folded = Network([Layer(np.array([[0.1]]), np.array([-0.1]), weight_magnitude=np.array(
        [[0.2]]))], ["x"], ["z"])
    assert folded.folded
    with pytest.raises(WMIInputError, match="expected class"):
        local_robustness(folded, UNIFORM, [1.0], 0.01)
