"""Bounds of folded networks with the fold's counted roundings (``Layer.fold_roundings``).

A batch norm or an input normalisation folded into a Linear layer is rounded in float64; the
bounds take the relative margin ``2·gamma(r + F)``, ``F`` the roundings the folds left in the
coefficients, instead of the flat ``1e-9``. Oracles:

* the fold lemma itself in rationals: folds of folds of random layers (cancelling terms
  included) against the exact product of the original layers, ``|c̃ − c| ≤ γ_f·Σ|t|`` and
  ``m̃ ≥ Σ|t|·(1 − γ_f)``;
* the UNFOLDED model in interval arithmetic at 300 bits (mpmath ``iv``: the batch norm's
  ``1/sqrt(var + eps)`` and the normalisation's division enclosed rigorously, not rounded):
  IBP, CROWN and alpha-CROWN bounds, numpy and torch, of every pairwise output difference
  of the converted (folded) network, at random points and at points found by bisection on
  the float decision boundary (near ties), as point boxes and as boxes of radius 2⁻³⁰, must
  contain the real values' enclosures.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpmath import iv

import verifier.bounds.affine as affine
from verifier.bounds import compute_bounds, pairwise_difference_spec
from verifier.convert import network_from_json, network_to_json
from verifier.convert.affine_chain import AffineChain
from verifier.convert.torch_module import from_torch
from verifier.network import Layer, Network, fold_affine
from verifier.numerics import SOUNDNESS_REL_MARGIN

iv.prec = 300
UNIT = Fraction(1, 2**53)
RUNS = (("ibp", "numpy"), ("ibp", "torch"), ("crown", "numpy"), ("crown", "torch"),
        ("alpha-crown", "torch"))  # alpha-CROWN runs on torch tensors only


def _higham(count: int) -> Fraction:
    """Higham's ``γ_n = n·u/(1 − n·u)``, exactly."""
    return count * UNIT / (1 - count * UNIT)


def _exact(matrix: np.ndarray) -> list[list[Fraction]]:
    return [[Fraction(float(v)) for v in row] for row in np.atleast_2d(matrix)]


def _product(a: list[list[Fraction]], b: list[list[Fraction]]) -> list[list[Fraction]]:
    return [[sum((a[i][j] * b[j][k] for j in range(len(b))), Fraction(0))
             for k in range(len(b[0]))] for i in range(len(a))]


def _affine_matrix(layer: Layer) -> np.ndarray:
    """``[W b; 0 1]``: composing affine maps is multiplying these."""
    top = np.hstack([layer.weight, layer.bias[:, None]])
    return np.vstack([top, np.eye(1, top.shape[1], top.shape[1] - 1)])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 5), st.integers(1, 5))
def test_folds_of_folds_are_within_their_count_of_the_exact_product(
        seed: int, a: int, b: int, c: int) -> None:
    rng = np.random.default_rng(seed)

    def layer(rows: int, columns: int) -> Layer:
        weight = rng.normal(size=(rows, columns)) * rng.choice([1e-3, 1.0, 1e3], (rows, columns))
        weight[rng.random((rows, columns)) < 0.2] = 0.0
        return Layer(weight, rng.normal(size=rows) * 10.0)

    first, second, third = layer(b, a), layer(c, b), layer(2, c)
    inner = Layer(**fold_affine(second, first))
    folded = Layer(**fold_affine(third, inner))
    assert inner.fold_roundings is not None and folded.fold_roundings is not None
    real = _product(_exact(_affine_matrix(third)),
                    _product(_exact(_affine_matrix(second)), _exact(_affine_matrix(first))))
    terms = _product(_exact(np.abs(_affine_matrix(third))),
                     _product(_exact(np.abs(_affine_matrix(second))),
                              _exact(np.abs(_affine_matrix(first)))))
    got = np.hstack([folded.weight, folded.bias[:, None]])
    magnitude = np.hstack([folded.weight_magnitude, folded.bias_magnitude[:, None]])
    bound = _higham(folded.fold_roundings)
    for i in range(got.shape[0]):
        for k in range(got.shape[1]):
            assert abs(Fraction(float(got[i, k])) - real[i][k]) <= bound * terms[i][k]
            assert Fraction(float(magnitude[i, k])) >= terms[i][k] * (1 - bound)


def test_counts_add_along_a_fold_of_a_fold_and_stop_where_a_product_may_underflow() -> None:
    own = Layer(np.array([[0.1, 0.3], [0.7, -0.2]]), np.array([0.5, -1.1]))
    once = Layer(**fold_affine(own, own))
    assert once.fold_roundings == 0 + 0 + 2 + 1
    twice = Layer(**fold_affine(once, once))
    assert twice.fold_roundings == 3 + 3 + 2 + 1
    assert Network([twice]).fold_roundings == 9
    tiny = Layer(np.array([[1e-200]]), np.array([0.0]))
    assert Layer(**fold_affine(tiny, Layer(np.array([[3e-200]]), np.array([0.0])))
                 ).fold_roundings is None
    assert Layer(**fold_affine(tiny, Layer(np.array([[3e180]]), np.array([0.0])))
                 ).fold_roundings == 2


def test_a_constant_the_graph_computed_is_not_counted_and_keeps_the_flat_margin() -> None:
    chain = AffineChain((2,))
    chain.batch_norm(np.array([0.1, 0.2]), np.array([0.3, 0.7]), None, None, 1e-5, "bn",
                     computed=True)
    chain.linear_last_dim(np.array([[0.3, -0.4]]), np.array([0.1]))
    network = chain.network(None, None)
    assert network.folded and network.fold_roundings is None
    assert affine._network_rel_margin(network.lowered()) == SOUNDNESS_REL_MARGIN


def test_a_json_document_holds_the_floats_as_the_model() -> None:
    """The JSON format carries no magnitudes: a folded network written to it is read back as
    a network of its floats, unfolded (as before counts existed); old documents are read as
    they were."""
    network = from_torch(_sequential(np.random.default_rng(3), 3, 4, 2, True, False).double())
    assert network.folded and network.fold_roundings is not None
    back = network_from_json(network_to_json(network))
    assert not back.folded and back.fold_roundings == 0


# -- the unfolded model in interval arithmetic ---------------------------------------------

class _Normalised(torch.nn.Module):
    """``(x − mean)/std`` then a Sequential: converted through ``torch.export``."""

    def __init__(self, mean: np.ndarray, std: np.ndarray, body: torch.nn.Sequential) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean))
        self.register_buffer("std", torch.tensor(std))
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body((x - self.mean) / self.std)


def _batch_norm(rng: np.random.Generator, width: int) -> torch.nn.BatchNorm1d:
    norm = torch.nn.BatchNorm1d(width, eps=float(rng.choice([1e-5, 1e-3, 0.1])))
    with torch.no_grad():
        norm.running_mean.copy_(torch.tensor(rng.uniform(-2.0, 2.0, width)))
        norm.running_var.copy_(torch.tensor(rng.uniform(0.05, 3.0, width)
                                            * rng.choice([1e-4, 1.0], width)))
        norm.weight.copy_(torch.tensor(rng.normal(size=width)))
        norm.bias.copy_(torch.tensor(rng.normal(size=width)))
    return norm


def _sequential(rng: np.random.Generator, inputs: int, hidden: int, outputs: int,
                batch_norm_first: bool, leaky: bool) -> torch.nn.Sequential:
    modules: list[torch.nn.Module] = [_batch_norm(rng, inputs)] if batch_norm_first else []
    modules += [torch.nn.Linear(inputs, hidden), _batch_norm(rng, hidden),
                torch.nn.LeakyReLU(0.125) if leaky else torch.nn.ReLU(),
                torch.nn.Linear(hidden, hidden), torch.nn.BatchNorm1d(hidden), torch.nn.ReLU(),
                torch.nn.Linear(hidden, outputs)]
    module = torch.nn.Sequential(*modules).double().eval()
    module[-3].load_state_dict(_batch_norm(rng, hidden).double().state_dict())
    for linear in (m for m in module if isinstance(m, torch.nn.Linear)):
        with torch.no_grad():
            linear.weight.copy_(torch.tensor(rng.normal(size=linear.weight.shape)))
            linear.bias.copy_(torch.tensor(rng.normal(size=linear.bias.shape)))
    return module


def _real_outputs(module: torch.nn.Module, x: np.ndarray) -> list:
    """The module's outputs at the float point ``x`` in real arithmetic, as 300-bit
    intervals (the square roots and divisions enclosed, every parameter read exactly)."""
    values = [iv.mpf(float(v)) for v in x]
    if isinstance(module, _Normalised):
        values = [(v - iv.mpf(float(m))) / iv.mpf(float(s))
                  for v, m, s in zip(values, module.mean.tolist(), module.std.tolist(),
                                     strict=True)]
        module = module.body
    for layer in module:
        if isinstance(layer, torch.nn.Linear):
            weight, bias = layer.weight.detach().numpy(), layer.bias.detach().numpy()
            values = [sum((iv.mpf(float(w)) * v for w, v in zip(row, values, strict=True)),
                          iv.mpf(float(b))) for row, b in zip(weight, bias, strict=True)]
        elif isinstance(layer, torch.nn.BatchNorm1d):
            eps = iv.mpf(float(layer.eps))
            values = [(v - iv.mpf(float(m))) / iv.sqrt(iv.mpf(float(s)) + eps)
                      * iv.mpf(float(g)) + iv.mpf(float(b))
                      for v, m, s, g, b in zip(values, layer.running_mean.tolist(),
                                               layer.running_var.tolist(),
                                               layer.weight.tolist(), layer.bias.tolist(),
                                               strict=True)]
        elif isinstance(layer, torch.nn.ReLU):
            values = [iv.mpf(0) if v.b <= 0 else v if v.a >= 0 else iv.mpf([0, v.b])
                      for v in values]
        elif isinstance(layer, torch.nn.LeakyReLU):
            slope = iv.mpf(float(layer.negative_slope))
            values = [v * slope if v.b <= 0 else v if v.a >= 0 else iv.mpf([v.a * slope, v.b])
                      for v in values]
    return values


def _fraction(raw: tuple) -> Fraction:
    sign, mantissa, exponent, _ = raw
    return Fraction(-mantissa if sign else mantissa) * Fraction(2) ** exponent


def _ends(value) -> tuple[Fraction, Fraction]:
    low, high = value._mpi_
    return _fraction(low), _fraction(high)


def _near_tie(network: Network, rng: np.random.Generator, inputs: int) -> np.ndarray | None:
    """A float point within a few ulps of the float network's boundary between outputs 0
    and 1 (bisection on a segment whose ends the float network classes differently)."""
    for _ in range(20):
        a, b = rng.uniform(-3.0, 3.0, (2, inputs))
        sides = [np.sign(np.diff(network.evaluate(p)[:2])[0]) for p in (a, b)]
        if sides[0] * sides[1] < 0:
            for _ in range(80):
                middle = 0.5 * a + 0.5 * b
                side = np.sign(np.diff(network.evaluate(middle)[:2])[0])
                if side == 0:
                    return middle
                a, b = (middle, b) if side == sides[0] else (a, middle)
            return a
    return None


def _converted(data: st.DataObject) -> tuple[torch.nn.Module, Network, int]:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    inputs, hidden, outputs = (data.draw(st.integers(2, 3)), data.draw(st.integers(2, 5)),
                               data.draw(st.integers(2, 3)))
    body = _sequential(rng, inputs, hidden, outputs, data.draw(st.booleans()),
                       data.draw(st.booleans()))
    if data.draw(st.booleans(), label="normalised"):
        module: torch.nn.Module = _Normalised(rng.uniform(-1.0, 1.0, inputs),
                                              rng.uniform(0.1, 3.0, inputs), body).eval()
        network = from_torch(module, input_shape=(inputs,))
    else:
        module, network = body, from_torch(body)
    return module, network, inputs


def _assert_contained(network: Network, module: torch.nn.Module, points: np.ndarray,
                      radius: float) -> None:
    spec = pairwise_difference_spec(network.output_size)
    pairs = [(c, d) for c in range(network.output_size) for d in range(network.output_size)
             if c != d]
    real = [_real_outputs(module, point) for point in points]
    for method, backend in RUNS:
        result = compute_bounds(network, points - radius, points + radius, spec, method,
                                backend=backend)
        for row, outputs in enumerate(real):
            for column, (c, d) in enumerate(pairs):
                low, high = _ends(outputs[c] - outputs[d])
                assert Fraction(float(result.lower[row, column])) <= low, (method, backend)
                assert high <= Fraction(float(result.upper[row, column])), (method, backend)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_bounds_of_the_folded_network_hold_the_unfolded_real_network(
        data: st.DataObject) -> None:
    module, network, inputs = _converted(data)
    assert network.folded and network.fold_roundings is not None
    assert affine._network_rel_margin(network.lowered()) < 1e-12
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="points"))
    points = [rng.uniform(-3.0, 3.0, inputs) for _ in range(3)]
    tie = _near_tie(network, rng, inputs)
    points += [] if tie is None else [tie]
    for radius in (0.0, 2.0**-30):
        _assert_contained(network, module, np.array(points), radius)


def test_near_tie_points_are_decided_by_the_counted_margin_and_not_by_the_flat_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Points moved off a near tie of the real network (found by bisection) by steps of
    1e-12 to 1e-4: where the real class margin lies between ten times the counted bounds'
    width and a tenth of the flat margin's, the counted CROWN bounds decide the real class
    and the flat margin's interval holds 0. (Widths are relative to the network's magnitude:
    its batch norms scale by up to ~100 here.)"""
    spec = pairwise_difference_spec(2)[1:]                       # y1 − y0
    decided = 0
    for seed in (11, 12):
        rng = np.random.default_rng(seed)
        module = _sequential(rng, 3, 5, 2, True, False)
        network = from_torch(module)
        tie = _near_tie(network, rng, 3)
        assert tie is not None
        direction = rng.normal(size=3)
        for step in (sign * 10.0**-k for k in range(4, 13) for sign in (1, -1)):
            point = tie + step * direction
            outputs = _real_outputs(module, point)
            low, high = _ends(outputs[1] - outputs[0])
            assert low > 0 or high < 0
            counted = compute_bounds(network, point, point, spec, "crown", backend="numpy")
            assert Fraction(float(counted.lower[0, 0])) <= low
            assert high <= Fraction(float(counted.upper[0, 0]))
            with monkeypatch.context() as patch:
                patch.setattr(affine, "_network_rel_margin", lambda _: SOUNDNESS_REL_MARGIN)
                flat = compute_bounds(network, point, point, spec, "crown", backend="numpy")
            counted_width = counted.upper[0, 0] - counted.lower[0, 0]
            flat_width = flat.upper[0, 0] - flat.lower[0, 0]
            assert flat_width > 1000 * counted_width
            if not 10 * counted_width < abs(float(low)) < flat_width / 10:
                continue
            assert (counted.lower[0, 0] > 0) == (low > 0)
            assert (counted.upper[0, 0] < 0) == (high < 0)
            assert flat.lower[0, 0] < 0 < flat.upper[0, 0]
            decided += 1
    assert decided >= 4


def test_the_oracle_sees_the_folds_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle is the unfolded real network, not the folded floats: at near ties the
    folded IR evaluated exactly in rationals lies outside the real network's enclosure
    (the fold's rounding), and with no relative margin at all the containment check fails."""
    from verifier.exact_arith import exact_outputs

    rng = np.random.default_rng(5)
    failures, off = 0, 0
    for _ in range(6):
        module = _sequential(rng, 3, 4, 2, True, False)
        network = from_torch(module)
        points = [p for p in (_near_tie(network, rng, 3) for _ in range(4)) if p is not None]
        if not points:
            continue
        for point in points:
            folded = exact_outputs(network, point)
            real = _real_outputs(module, point)
            for value, enclosure in zip(folded, real, strict=True):
                low, high = _ends(enclosure)
                off += not low <= value <= high
        with monkeypatch.context() as patch:
            patch.setattr(affine, "_network_rel_margin", lambda _: 0.0)
            try:
                _assert_contained(network, module, np.array(points), 0.0)
            except AssertionError:
                failures += 1
    assert off > 0
    assert failures > 0


def test_negated_outputs_keep_a_folded_last_layer() -> None:
    """The SC-layer's argmin convention negates the last layer: a batch norm folded into it
    stays folded and counted (it was rebuilt without magnitudes, so the IR looked like the
    model's own floats)."""
    from verifier.selfcorrect import negate_outputs

    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2),
                                 _batch_norm(np.random.default_rng(2), 2)).double().eval()
    network = from_torch(module)
    negated = negate_outputs(network)
    assert network.folded and negated.folded
    assert negated.fold_roundings == network.fold_roundings is not None
    point = np.array([0.3, -0.2, 0.9])
    spec = pairwise_difference_spec(2)
    result = compute_bounds(negated, point, point, spec, "crown")
    real = [-value for value in _real_outputs(module, point)]
    for column, (c, d) in enumerate(((0, 1), (1, 0))):
        low, high = _ends(real[c] - real[d])
        assert Fraction(float(result.lower[0, column])) <= low
        assert high <= Fraction(float(result.upper[0, column]))


class _ScaledShift(torch.nn.Module):
    """``torch.sub(x, c, alpha=0.3)`` then a Linear layer: the converter rounds ``0.3·c``."""

    def __init__(self, shift: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> None:
        super().__init__()
        self.register_buffer("shift", torch.tensor(shift))
        self.linear = torch.nn.Linear(weight.shape[1], weight.shape[0]).double()
        with torch.no_grad():
            self.linear.weight.copy_(torch.tensor(weight))
            self.linear.bias.copy_(torch.tensor(bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.sub(x, self.shift, alpha=0.3))


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_an_alpha_scaled_shift_is_counted_and_its_bounds_hold_the_real_model(seed: int) -> None:
    rng = np.random.default_rng(seed)
    module = _ScaledShift(rng.normal(size=3), rng.normal(size=(2, 3)), rng.normal(size=2)).eval()
    network = from_torch(module, input_shape=(3,))
    assert network.folded and network.fold_roundings == 1 + 3 + 1
    spec = pairwise_difference_spec(2)
    points = rng.uniform(-3.0, 3.0, (4, 3))
    weight, bias = module.linear.weight.detach().numpy(), module.linear.bias.detach().numpy()
    for method, backend in RUNS:
        result = compute_bounds(network, points, points, spec, method, backend=backend)
        for row, point in enumerate(points):
            shifted = [iv.mpf(float(x)) - iv.mpf(0.3) * iv.mpf(float(c))
                       for x, c in zip(point, module.shift.tolist(), strict=True)]
            outputs = [sum((iv.mpf(float(w)) * v for w, v in zip(line, shifted, strict=True)),
                           iv.mpf(float(b))) for line, b in zip(weight, bias, strict=True)]
            for column, (c, d) in enumerate(((0, 1), (1, 0))):
                low, high = _ends(outputs[c] - outputs[d])
                assert Fraction(float(result.lower[row, column])) <= low
                assert high <= Fraction(float(result.upper[row, column]))
