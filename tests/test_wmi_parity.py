"""Demographic parity with a discrete protected column, certified by PV, against an exact
oracle of its own (half-plane clipping of the activation regions in rational arithmetic, no
code of ``verifier``); and WMI's sums over discrete values (local robustness, monotonicity).
WMI has no parity engine: parity is PV's (``verifier.audits.demographic_parity``)."""

import itertools
from fractions import Fraction

import numpy as np
import pytest

from verifier.audits import demographic_parity_audit
from verifier.network import Layer, Network
from verifier.population import (
    Discrete,
    Factor,
    Feature,
    Leaf,
    PiecewiseDensity,
    PopulationModel,
    Product,
)
from verifier.wmi import local_robustness, monotonicity

Point = tuple[Fraction, Fraction]
HalfPlane = tuple[Fraction, Fraction, Fraction]  # a·x + b·y + c >= 0


def population(continuous: object) -> PopulationModel:
    return PopulationModel(
        features=[Feature(name="x", kind="continuous"), Feature(name="y", kind="continuous"),
                  Feature(name="s", kind="integer")],
        distribution=Product(factors=[
            Factor(columns=["x", "y"], distribution=continuous),
            Factor(columns=["s"], distribution=Discrete(values=[0.0, 1.0],
                                                         probabilities=[0.4, 0.6]))]))


UNIFORM_2D = PiecewiseDensity(columns=["x", "y"],
                              leaves=[Leaf(lower=[0, 0], upper=[1, 1], constant=1.0)])


def _clip(polygon: list[Point], plane: HalfPlane) -> list[Point]:
    """Sutherland–Hodgman: the part of a convex polygon where ``a·x + b·y + c >= 0``."""
    a, b, c = plane
    kept: list[Point] = []
    for p, q in zip(polygon, polygon[1:] + polygon[:1], strict=True):
        fp, fq = a * p[0] + b * p[1] + c, a * q[0] + b * q[1] + c
        if fp >= 0:
            kept.append(p)
        if (fp >= 0) != (fq >= 0):
            t = fp / (fp - fq)
            kept.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    return kept


def _area(polygon: list[Point]) -> Fraction:
    twice = sum((p[0] * q[1] - q[0] * p[1] for p, q in
                 zip(polygon, polygon[1:] + polygon[:1], strict=True)), Fraction(0))
    return abs(twice) / 2


def exact_favorable_share(net: Network, leaves: list[tuple[list[float], list[float], float]],
                          s: float, favorable: int) -> Fraction:
    """``P[argmax net(x, y, s) = favorable]`` for ``(x, y)`` of the piecewise-constant density
    ``leaves`` (``(lower, upper, constant)``), exactly: the network (at most one hidden ReLU
    layer, two outputs) is affine on each activation pattern's polygon, where the favorable
    class is one more half-plane; the float weights are read as the rationals they are."""
    hidden = net.layers[:-1]
    last = net.layers[-1]
    assert len(hidden) <= 1 and last.weight.shape[0] == 2
    sign = 1 if favorable == 0 else -1
    s_frac = Fraction(s)

    def affine_rows(weight: np.ndarray, bias: np.ndarray) -> list[HalfPlane]:
        return [(Fraction(w[0]), Fraction(w[1]), Fraction(w[2]) * s_frac + Fraction(b))
                for w, b in zip(weight.tolist(), bias.tolist(), strict=True)]

    units = affine_rows(hidden[0].weight, hidden[0].bias) if hidden else []
    out_weight = [[Fraction(v) for v in row] for row in last.weight.tolist()]
    out_bias = [Fraction(v) for v in last.bias.tolist()]
    mass = favorable_mass = Fraction(0)
    for lower, upper, constant in leaves:
        (x0, y0), (x1, y1) = map(Fraction, lower), map(Fraction, upper)
        box = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
        density = Fraction(constant)
        mass += density * _area(box)
        for pattern in itertools.product((0, 1), repeat=len(units)):
            polygon = box
            for on, (a, b, c) in zip(pattern, units, strict=True):
                polygon = _clip(polygon, (a, b, c) if on else (-a, -b, -c))
            # the logit difference on this pattern: Σ_i on_i·(W0_i − W1_i)·h_i + (b0 − b1),
            # or the last layer's affine map directly without a hidden layer
            if units:
                diff = [out_weight[0][i] - out_weight[1][i] for i in range(len(units))]
                a = sum((d * u[0] for d, u, on in zip(diff, units, pattern, strict=True) if on),
                        Fraction(0))
                b = sum((d * u[1] for d, u, on in zip(diff, units, pattern, strict=True) if on),
                        Fraction(0))
                c = sum((d * u[2] for d, u, on in zip(diff, units, pattern, strict=True) if on),
                        Fraction(0)) + out_bias[0] - out_bias[1]
            else:
                (a, b, c), = affine_rows(np.array([last.weight[0] - last.weight[1]]),
                                        np.array([last.bias[0] - last.bias[1]]))
            polygon = _clip(polygon, (sign * a, sign * b, sign * c))
            if len(polygon) >= 3:
                favorable_mass += density * _area(polygon)
    return favorable_mass / mass


def test_the_oracle_meets_the_closed_form() -> None:
    """Class 0 iff x + 0.5 s >= 0.75 (two logits): P(fav|s=0) = 1/4, P(fav|s=1) = 3/4, with
    or without a hidden layer in front (an identity through two ReLUs)."""
    linear = Network([Layer(np.array([[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]]),
                            np.array([-0.75, 0.0]))])
    hidden = Network([Layer(np.array([[1.0, 0.0, 0.5], [-1.0, 0.0, -0.5]]), np.zeros(2), "relu"),
                      Layer(np.array([[1.0, -1.0], [0.0, 0.0]]), np.array([-0.75, 0.0]))])
    square = [([0.0, 0.0], [1.0, 1.0], 1.0)]
    for net in (linear, hidden):
        assert exact_favorable_share(net, square, 0.0, 0) == Fraction(1, 4)
        assert exact_favorable_share(net, square, 1.0, 0) == Fraction(3, 4)
        assert exact_favorable_share(net, square, 1.0, 1) == Fraction(1, 4)


def _assert_inside(certificate: object, p_unprivileged: Fraction,
                   p_privileged: Fraction) -> None:
    bounds = certificate.bounds  # type: ignore[attr-defined]
    for name, value in (("p_unprivileged", p_unprivileged), ("p_privileged", p_privileged),
                        ("value", p_unprivileged / p_privileged)):
        low, high = bounds[name]
        assert Fraction(low) <= value <= Fraction(high), name


def test_parity_closed_form_inside_pv_interval() -> None:
    """The closed form above (privileged s = 1): ratio (1/4) / (3/4) = 1/3."""
    net = Network([Layer(np.array([[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]]),
                         np.array([-0.75, 0.0]))], ["x", "y", "s"], ["a", "b"])
    certificate = demographic_parity_audit(net, population(UNIFORM_2D), protected="s",
                                           privileged=1.0, favorable_class=0, gamma=0.5,
                                           timeout_s=20, precision=0.05)
    _assert_inside(certificate, Fraction(1, 4), Fraction(3, 4))


def test_parity_inside_pv_interval() -> None:
    rng = np.random.default_rng(9)
    net = Network([Layer(rng.normal(size=(6, 3)), rng.normal(scale=0.3, size=6), "relu"),
                   Layer(rng.normal(size=(2, 6)), rng.normal(scale=0.3, size=2))],
                  ["x", "y", "s"], ["a", "b"])
    leaves = [([0.0, 0.0], [0.5, 1.0], 0.6), ([0.5, 0.0], [1.0, 1.0], 1.4)]
    prior = population(PiecewiseDensity(columns=["x", "y"], leaves=[
        Leaf(lower=lower, upper=upper, constant=constant) for lower, upper, constant in leaves]))
    p_unprivileged = exact_favorable_share(net, leaves, 1.0, 0)
    p_privileged = exact_favorable_share(net, leaves, 0.0, 0)
    assert 0.1 < p_privileged < 0.9 and 0.1 < p_unprivileged < 0.9
    certificate = demographic_parity_audit(net, prior, protected="s", privileged=0.0,
                                           favorable_class=0, gamma=0.74, timeout_s=20,
                                           precision=0.05)
    _assert_inside(certificate, p_unprivileged, p_privileged)


def test_local_robustness_sums_discrete_values() -> None:
    """Class 1 (single logit) iff x − s/2 >= 0: on the whole box P = 0.4·1 + 0.6·0.5."""
    net = Network([Layer(np.array([[1.0, 0.0, -0.5]]), np.array([0.0]))])
    result = local_robustness(net, population(UNIFORM_2D), [0.5, 0.5, 0.5], 0.5, expected_class=1)
    assert result.probability == pytest.approx(0.4 + 0.6 * 0.5, abs=1e-12)


def test_self_composition_sums_discrete_columns_and_compares_a_discrete_feature() -> None:
    """Class 1 iff x >= s/2 is increasing in x for every s: probability exactly 1. In the
    binary s the only ordered pair is (0, 1), which loses the positive class exactly when
    x < 1/2: probability 1/2 increasing (either weighting), 1 decreasing."""
    net = Network([Layer(np.array([[1.0, 0.0, -0.5]]), np.array([0.0]))])
    assert monotonicity(net, population(UNIFORM_2D), 0).probability == 1.0
    for use_prior in (False, True):
        result = monotonicity(net, population(UNIFORM_2D), 2, use_prior=use_prior)
        assert result.exact and result.probability == pytest.approx(0.5, abs=1e-12)
    assert monotonicity(net, population(UNIFORM_2D), 2, decreasing=True).probability == 1.0
