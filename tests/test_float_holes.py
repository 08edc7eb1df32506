"""Float holes: bounds that must stay sound in real arithmetic, whatever float rounding does.

Every oracle here is exact: the network evaluated in rational arithmetic
(:func:`verifier.exact_arith.exact_outputs`) at the box's corners and at sampled points.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.bounds import METHODS, compute_bounds
from verifier.causal.witness import certified_classes, confirmed_pairs
from verifier.exact_arith import exact_outputs
from verifier.network import Layer, Network, compose
from verifier.pv import InputDomain, PVResult, PVSettings, verify
from verifier.spec import Names, specification_from_dict


def _contains(lower: float, upper: float, value: Fraction) -> bool:
    """``lower <= value <= upper`` compared exactly (no float rounding of ``value``)."""
    if np.isnan(lower) or np.isnan(upper):
        return False
    above = lower == -np.inf or Fraction(lower) <= value
    below = upper == np.inf or value <= Fraction(upper)
    return above and below


def _spec_values(network: Network, spec: np.ndarray, point: np.ndarray) -> list[Fraction]:
    outputs = exact_outputs(network, point)
    return [
        sum((Fraction(float(c)) * y for c, y in zip(row, outputs, strict=True)), Fraction(0))
        for row in spec
    ]


def _shown(value: Fraction) -> str:
    """An exact value for a failure message (floats overflow beyond ~1.8e308)."""
    if abs(value) < Fraction(10) ** 300:
        return repr(float(value))
    digits = len(str(abs(value.numerator) // value.denominator))
    return f"{'-' if value < 0 else ''}~1e{digits - 1}"


def _check_points(
    network: Network, spec: np.ndarray, lo: np.ndarray, hi: np.ndarray, points: np.ndarray,
    method: str,
) -> None:
    result = compute_bounds(network, lo[None], hi[None], spec, method)  # type: ignore[arg-type]
    for point in points:
        for row, value in enumerate(_spec_values(network, spec, point)):
            assert _contains(result.lower[0, row], result.upper[0, row], value), (
                f"{method}: row {row} at {point.tolist()} is {_shown(value)}, outside "
                f"[{result.lower[0, row]!r}, {result.upper[0, row]!r}]"
            )


def _corners(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    grids = np.meshgrid(*[[a, b] for a, b in zip(lo, hi, strict=True)], indexing="ij")
    return np.stack([g.reshape(-1) for g in grids], axis=1)


@pytest.mark.parametrize("method", METHODS)
def test_a_spec_row_that_cancels_to_a_float_zero_keeps_its_margin(method: str) -> None:
    weight = 3.694644520472026
    network = Network([Layer(np.array([[weight], [np.nextafter(weight, np.inf)]]), np.zeros(2))])
    spec = np.array([[3.2717539328810625, -3.2717539328810625]])
    lo, hi = np.array([0.0]), np.array([1e20])
    value = _spec_values(network, spec, hi)[0]
    assert float(value) == pytest.approx(-145295.06, rel=1e-6)
    _check_points(network, spec, lo, hi, np.array([[0.0], [1.0], [1e20]]), method)


@pytest.mark.parametrize("method", METHODS)
def test_unit_coefficients_on_a_tiny_output_keep_their_margin(method: str) -> None:
    network = Network([Layer(np.array([[1.0], [2.0**-60], [1.0]]), np.zeros(3))])
    spec = np.array([[1.0, 1.0, -1.0]])
    lo, hi = np.array([1.0]), np.array([2.0])
    result = compute_bounds(network, lo[None], hi[None], spec, method)  # type: ignore[arg-type]
    assert result.upper[0, 0] >= 2.0**-59 and result.lower[0, 0] <= 2.0**-60
    _check_points(network, spec, lo, hi, np.array([[1.0], [1.5], [2.0]]), method)


@pytest.mark.parametrize("method", METHODS)
def test_boxes_wider_than_float64_widen_to_infinity_never_nan(method: str) -> None:
    network = Network([
        Layer(np.array([[0.0, 1.0], [1.0, 1.0]]), np.zeros(2), "relu"),
        Layer(np.array([[1.0, -1.0]]), np.zeros(1)),
    ])
    spec = np.eye(1)
    lo, hi = np.array([-9e307, 0.0]), np.array([9e307, 1.0])
    points = np.vstack([_corners(lo, hi), [[0.0, 0.5], [-1.0, 1.0]]])
    _check_points(network, spec, lo, hi, points, method)


@pytest.mark.parametrize("method", METHODS)
def test_overflowing_products_give_infinite_bounds(method: str) -> None:
    linear = Network([Layer(np.array([[1e200, 1e200]]), np.zeros(1))])
    lo, hi = np.full(2, -1e150), np.full(2, 1e150)
    result = compute_bounds(linear, lo[None], hi[None], None, method)  # type: ignore[arg-type]
    assert result.lower[0, 0] == -np.inf and result.upper[0, 0] == np.inf
    deep = Network([
        Layer(np.array([[1e200, 1.0], [1.0, -1.0]]), np.zeros(2), "relu"),
        Layer(np.array([[1e200, -1e200]]), np.zeros(1)),
    ])
    _check_points(deep, np.eye(1), lo, hi, _corners(lo, hi), method)
    tiny = np.full(2, 1e-150)
    _check_points(deep, np.eye(1), -tiny, tiny, _corners(-tiny, tiny), method)


@pytest.mark.parametrize("method", METHODS)
def test_a_folded_bias_that_cancels_keeps_its_margin(method: str) -> None:
    """Normalisation folded into a layer: ``w·(x − μ) + b`` with ``w·μ`` close to ``b``."""
    mu = 0.1
    shift = Network([Layer(np.eye(1), np.array([-mu]))])
    head = Network([Layer(np.array([[3.0]]), np.array([3.0 * mu]))])
    network = compose(shift, head)
    assert network.layers[0].bias[0] == 0.0  # the fold cancelled to an exact float zero
    zero = np.zeros(1)
    real = exact_outputs(head, exact_outputs(shift, zero))[0]  # the unfolded network
    assert real > 0
    result = compute_bounds(network, zero[None], zero[None], None, method)  # type: ignore[arg-type]
    assert _contains(result.lower[0, 0], result.upper[0, 0], real)


# -- property-based: near-cancelling rows, huge and tiny weights, boxes near the float range

_SCALES = st.sampled_from([1e-300, 1e-150, 1e-20, 1e-8, 1.0, 3.0, 1e8, 1e20, 1e150, 1e300])


@st.composite
def _awkward_float(draw: st.DrawFn) -> float:
    mantissa = draw(st.floats(-4.0, 4.0, allow_nan=False, allow_infinity=False))
    value = mantissa * draw(_SCALES)
    if draw(st.booleans()):
        value = float(np.nextafter(value, draw(st.sampled_from([-np.inf, np.inf]))))
    return value


@st.composite
def _awkward_case(draw: st.DrawFn) -> tuple[Network, np.ndarray, np.ndarray, np.ndarray]:
    inputs = draw(st.integers(1, 3))
    hidden = draw(st.integers(1, 3))
    outputs = draw(st.integers(2, 3))
    first = np.array([[draw(_awkward_float()) for _ in range(inputs)] for _ in range(hidden)])
    # near-duplicate output rows make the spec's difference rows cancel
    base = [draw(_awkward_float()) for _ in range(hidden)]
    second = np.array([
        [float(np.nextafter(w, np.inf)) if k and draw(st.booleans()) else w for w in base]
        if draw(st.booleans()) else [draw(_awkward_float()) for _ in range(hidden)]
        for k in range(outputs)
    ])
    network = Network([
        Layer(first, np.array([draw(_awkward_float()) for _ in range(hidden)]),
              draw(st.sampled_from(["relu", "leaky_relu", "none"])), negative_slope=0.25),
        Layer(second, np.array([draw(_awkward_float()) for _ in range(outputs)])),
    ])
    c = draw(_awkward_float())
    spec = np.zeros((2, outputs))
    spec[0, 0], spec[0, 1] = c, -c
    spec[1] = [draw(_awkward_float()) for _ in range(outputs)]
    centre = np.array([draw(_awkward_float()) for _ in range(inputs)])
    radius = np.array([abs(draw(_awkward_float())) for _ in range(inputs)])
    lo = np.clip(centre - radius, -1.7e308, 1.7e308)
    hi = np.clip(centre + radius, -1.7e308, 1.7e308)
    return network, spec, np.minimum(lo, hi), np.maximum(lo, hi)


def _check_corners_and_samples(
    case: tuple[Network, np.ndarray, np.ndarray, np.ndarray], fractions: list[list[float]]
) -> None:
    """Every method's bounds contain the exact value at the box's corners and at the points
    ``fractions`` place inside it (points that overflow are left out)."""
    network, spec, lo, hi = case
    width = lo.size
    sampled = [lo + np.array(f[:width]) * (hi * 0.5 - lo * 0.5) * 2.0 for f in fractions]
    points = np.vstack([_corners(lo, hi), *[np.clip(p, lo, hi)[None] for p in sampled]])
    points = points[np.isfinite(points).all(axis=1)]
    for method in METHODS:
        _check_points(network, spec, lo, hi, points, method)


@settings(max_examples=150, deadline=None)
@given(case=_awkward_case(), fractions=st.lists(
    st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3), min_size=1, max_size=3))
def test_bounds_contain_the_exact_value_at_corners_and_sampled_points(
    case: tuple[Network, np.ndarray, np.ndarray, np.ndarray], fractions: list[list[float]]
) -> None:
    _check_corners_and_samples(case, fractions)


def _rational_reference(network: Network, x: list[Fraction]) -> list[Fraction]:
    """The network evaluated one rational operation at a time (the oracle of the integer
    evaluation in :func:`exact_outputs`)."""
    values = x
    for layer in network.layers:
        rows = [sum((Fraction(float(w)) * v for w, v in zip(row, values, strict=True)),
                    Fraction(float(b))) for row, b in zip(layer.weight, layer.bias, strict=True)]
        if layer.activation == "hardtanh":
            rows = [min(max(z, Fraction(layer.min_val)), Fraction(layer.max_val)) for z in rows]
        elif layer.activation != "none":
            slopes = layer.negative_slope_effective
            rows = [z if z >= 0 else Fraction(float(s)) * z for z, s in zip(rows, slopes,
                                                                             strict=True)]
        values = rows
    return values


@settings(max_examples=150, deadline=None)
@given(case=_awkward_case(), clamp=st.tuples(_awkward_float(), _awkward_float()),
       thirds=st.lists(st.integers(-5, 5), min_size=3, max_size=3), hardtanh=st.booleans())
def test_exact_outputs_equal_the_rational_evaluation(
    case: tuple[Network, np.ndarray, np.ndarray, np.ndarray], clamp: tuple[float, float],
    thirds: list[int], hardtanh: bool,
) -> None:
    network, _, lo, hi = case
    low, high = sorted(clamp)
    if hardtanh and low < high:
        first, second = network.layers
        network = Network([Layer(first.weight, first.bias, "hardtanh", min_val=low,
                                 max_val=high), second])
    for point in ([*lo], [*hi], [Fraction(t, 3) for t in thirds[: lo.size]]):
        if all(np.isfinite(float(v)) for v in point):
            rational = [v if isinstance(v, Fraction) else Fraction(float(v)) for v in point]
            assert exact_outputs(network, point) == _rational_reference(network, rational)


# -- the same holes inside PV events, and exactly decidable ties


def _discrete_masses(values: np.ndarray, pmf: np.ndarray):
    def masses(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inside = (values[None, :] >= lo[:, :1]) & (values[None, :] <= hi[:, :1])
        p = (inside * pmf[None, :]).sum(axis=1)
        return p * (1 - 1e-12), np.minimum(p * (1 + 1e-12), 1.0)

    return masses


def _uniform_masses(low: float, high: float):
    def masses(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        width = np.clip(np.minimum(hi[:, 0], high) - np.maximum(lo[:, 0], low), 0.0, None)
        p = width / (high - low)
        return p * (1 - 1e-12), np.minimum(p * (1 + 1e-12), 1.0)

    return masses


def _probability(
    network: Network, event: str, masses, domain: InputDomain, timeout_s: float = 30.0
) -> PVResult:
    names = Names.of(network.input_names, network.output_names)
    spec = specification_from_dict({"probabilities": {"p": {"event": event}}}, names)
    return verify(network, spec, masses, domain, PVSettings(precision=1e-9, timeout_s=timeout_s))


def test_a_cancelling_pv_event_is_not_certified_from_a_float_zero() -> None:
    weight = 3.694644520472026
    network = Network(
        [Layer(np.array([[weight], [np.nextafter(weight, np.inf)]]), np.zeros(2))],
        ["x"], ["y0", "y1"],
    )
    c = 3.2717539328810625
    domain = InputDomain(np.array([1e6]), np.array([2e6]), np.zeros(1, dtype=bool))
    # exactly: c·(w − w')·x < 0 for every x > 0, far below −1e-10 on [1e6, 2e6]
    gap = Fraction(c) * (Fraction(weight) - Fraction(float(np.nextafter(weight, np.inf))))
    assert gap * Fraction(10**6) < Fraction(-1, 10**10)
    result = _probability(
        network, f"{c!r}*y.y0 - {c!r}*y.y1 < -1e-10", _uniform_masses(1e6, 2e6), domain,
        timeout_s=2.0,
    )
    low, high = result.probabilities["p"]
    assert low <= 1.0 <= high


def test_a_tie_at_an_atom_of_the_population_is_decided_exactly() -> None:
    network = Network(
        [Layer(np.array([[0.0], [1.0]]), np.array([0.0, -1.0]))], ["u"], ["y0", "y1"]
    )
    domain = InputDomain(np.array([0.0]), np.array([2.0]), np.ones(1, dtype=bool))
    masses = _discrete_masses(np.array([0.0, 1.0, 2.0]), np.array([0.25, 0.5, 0.25]))
    result = _probability(network, "y.y1 > y.y0", masses, domain)
    low, high = result.probabilities["p"]
    assert low <= 0.25 <= high and high - low <= 1e-9
    weak = _probability(network, "y.y1 >= y.y0", masses, domain)
    low, high = weak.probabilities["p"]
    assert low <= 0.75 <= high and high - low <= 1e-9


# -- witnesses decided in real arithmetic

_TIE_WEIGHTS = np.array([0.1257302210933933, -0.1321048632913019, 0.6404226504432821,
                         0.10490011715303971, -0.535669373161111, 0.36159505490948474])
_TIE_VALUE = 0.5648738071467869  # w·1 rounds to exactly this in float64; the real sum exceeds it


def _tie_network() -> Network:
    """``y0 = c``, ``y1 = w·x``: at ``x = 1`` float64 says ``y0 == y1``, exactly ``y1 > y0``."""
    weight = np.vstack([np.zeros(6), _TIE_WEIGHTS])
    return Network([Layer(weight, np.array([_TIE_VALUE, 0.0]))])


def test_the_tie_is_a_float_tie_and_an_exact_win() -> None:
    network = _tie_network()
    ones = np.ones(6)
    y = network.evaluate(ones[None])[0]
    assert y[0] == y[1]
    exact = exact_outputs(network, ones)
    assert exact[1] > exact[0]
    assert network.classify(ones[None])[0] == 0  # what float argmax (and torch) report


def test_witness_classes_are_certified_in_real_arithmetic() -> None:
    network = _tie_network()
    ones = np.ones(6)
    moved = ones.copy()
    moved[5] = 2.0
    assert certified_classes(network, np.vstack([ones, moved])).tolist() == [1, 1]
    genuine, class_a, class_b = confirmed_pairs(network, ones[None], moved[None])
    assert not genuine[0] and class_a[0] == class_b[0] == 1
    lowered = moved.copy()
    lowered[5] = -2.0
    genuine, class_a, class_b = confirmed_pairs(network, ones[None], lowered[None])
    assert genuine[0] and (class_a[0], class_b[0]) == (1, 0)


@st.composite
def _deep_kinked_case(draw: st.DrawFn) -> tuple[Network, np.ndarray, np.ndarray, np.ndarray]:
    """Two or three hidden layers (ReLU, LeakyReLU, hardtanh) of awkward weights, each
    neuron's bias set, where float64 holds it exactly, so that the pre-activation is exactly 0
    at the box's lower corner (a kink at the box's end; ties there are real ties)."""
    inputs = draw(st.integers(1, 3))
    lo = np.array([draw(_awkward_float()) for _ in range(inputs)])
    hi = lo + np.array([abs(draw(_awkward_float())) for _ in range(inputs)])
    if not np.isfinite(hi).all():
        hi = lo.copy()
    layers, corner, width = [], [Fraction(float(v)) for v in lo], inputs
    for _ in range(draw(st.integers(2, 3))):
        neurons = draw(st.integers(1, 3))
        weight = np.array([[draw(_awkward_float()) for _ in range(width)]
                           for _ in range(neurons)])
        bias = np.array([draw(_awkward_float()) for _ in range(neurons)])
        for i in range(neurons):
            pre = sum((Fraction(float(w)) * v for w, v in zip(weight[i], corner, strict=True)),
                      Fraction(0))
            if draw(st.booleans()) and abs(pre) < Fraction(10) ** 300 and Fraction(
                    float(-pre)) == -pre:
                bias[i] = float(-pre)
        activation = draw(st.sampled_from(["relu", "leaky_relu", "hardtanh"]))
        layer = Layer(weight, bias, activation, negative_slope=0.25, min_val=-1.0, max_val=0.5)
        layers.append(layer)
        corner = _rational_reference(Network([layer]), corner)
        width = neurons
    layers.append(Layer(np.array([[draw(_awkward_float()) for _ in range(width)]
                                  for _ in range(2)]), np.zeros(2)))
    return Network(layers), np.array([[1.0, -1.0], [1.0, 0.0]]), lo, hi


@settings(max_examples=80, deadline=None)
@given(case=_deep_kinked_case(), fractions=st.lists(
    st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3), min_size=1, max_size=3))
def test_deep_bounds_with_kinks_at_the_box_end_contain_the_exact_value(
    case: tuple[Network, np.ndarray, np.ndarray, np.ndarray], fractions: list[list[float]]
) -> None:
    _check_corners_and_samples(case, fractions)
