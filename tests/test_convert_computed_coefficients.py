"""Coefficients a converter computes in float (a divisor's reciprocal, Gemm's and addmm's
``alpha·B`` and ``beta·C``, ``add``'s ``alpha·c``, a batch norm's scale and shift) are the
model's real coefficients only when the float operation was exact; otherwise the IR must say
it holds a rounded stand-in (``Network.folded``), so that no point is decided on it exactly.

Oracle: the source model's value in rational arithmetic, written here from the model's own
constants (``Fraction(x) / Fraction(5)``, ``Fraction(alpha)·Σ Fraction(B)·x``, …), and, for the
causal certificates, a brute force over the integer grid in ``Fraction``. Before, ``x / 5``
was read as ``x · 0.2000000000000000111`` with the flag down: at ``x = 5`` the IR's exact value
of ``x/5 − 1`` was ``2⁻⁵⁴`` (class 1) where the model's is 0 (class 0, the tie rule), and the
causal certificate of ``x/5 − s`` said biased share exactly 2/3 where it is 5/6.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from verifier.causal import CausalSettings, build_problem, certify_causal_fairness
from verifier.convert.onnx_graph import from_onnx
from verifier.convert.torch_module import from_torch
from verifier.exact_arith import exact_outputs
from verifier.network import Network, NetworkError

Oracle = Callable[[list[Fraction]], list[Fraction]]


def _divided(x: list[Fraction]) -> list[Fraction]:
    """``x/5 − s``: class 0 at ``x = 5, s = 1`` (an exact tie), class 1 at ``s = 0, x > 0``."""
    return [x[0] / 5 - x[1]]


def _true_share(oracle: Oracle) -> Fraction:
    """Share of ``x ∈ {0..5}`` whose class (logit > 0) changes with ``s ∈ {0, 1}``."""
    biased = sum(len({oracle([Fraction(x), Fraction(s)])[0] > 0 for s in (0, 1)}) > 1
                 for x in range(6))
    return Fraction(biased, 6)


def _certified_share(network: Network) -> tuple[float, float]:
    network = network.renamed(input_names=["x", "s"])
    problem = build_problem(network, ["s"], integer_inputs="all",
                            domain={"x": (0, 5), "s": (0, 1)})
    certificate = certify_causal_fairness(problem, CausalSettings(timeout_s=10.0))
    return certificate.bounds["biased_share"]


def _assert_real_or_flagged(network: Network, oracle: Oracle, points: list[list[float]]) -> None:
    """Unless the IR is flagged as folded, its exact value is the model's at every point."""
    if network.folded:
        return
    for point in points:
        assert exact_outputs(network, point) == oracle([Fraction(v) for v in point]), point


def _onnx(nodes: list, constants: dict[str, np.ndarray], width: int,
          elem: int = TensorProto.DOUBLE) -> object:
    dtype = np.float64 if elem == TensorProto.DOUBLE else np.float32
    graph = helper.make_graph(
        nodes, "computed", [helper.make_tensor_value_info("x", elem, ["N", width])],
        [helper.make_tensor_value_info("y", elem, None)],
        [numpy_helper.from_array(value.astype(dtype), name) for name, value in constants.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


class _Divide(torch.nn.Module):
    def __init__(self, divisor: float) -> None:
        super().__init__()
        self.register_buffer("divisor", torch.tensor([divisor, 1.0]))
        self.linear = torch.nn.Linear(2, 1)
        with torch.no_grad():
            self.linear.weight[:] = torch.tensor([[1.0, -1.0]])
            self.linear.bias[:] = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x / self.divisor)


def _batch_norm(variance: float) -> torch.nn.Sequential:
    norm = torch.nn.BatchNorm1d(2, eps=0.0)
    linear = torch.nn.Linear(2, 1)
    with torch.no_grad():
        norm.running_mean[:] = 0.0
        norm.running_var[:] = torch.tensor([variance, 1.0])
        linear.weight[:] = torch.tensor([[1.0, -1.0]])
        linear.bias[:] = 0.0
    return torch.nn.Sequential(norm, linear).eval()


def _division_networks() -> dict[str, Network]:
    divide = helper.make_node("Div", ["x", "d"], ["h"])
    gemm = helper.make_node("Gemm", ["h", "W"], ["y"], transB=1)
    onnx_model = _onnx([divide, gemm], {"d": np.array([5.0, 1.0]),
                                        "W": np.array([[1.0, -1.0]])}, 2,
                       elem=TensorProto.FLOAT)
    reciprocal = _onnx([helper.make_node("Reciprocal", ["d"], ["r"]),
                        helper.make_node("Mul", ["x", "r"], ["h"]), gemm],
                       {"d": np.array([5.0, 1.0]), "W": np.array([[1.0, -1.0]])}, 2,
                       elem=TensorProto.FLOAT)
    return {
        "torch.export x / 5": from_torch(_Divide(5.0).eval(), input_shape=(2,)),
        "ONNX Div by 5": from_onnx(onnx_model),
        "ONNX Mul by a folded Reciprocal(5)": from_onnx(reciprocal),
        "BatchNorm1d, variance 25": from_torch(_batch_norm(25.0)),
    }


@pytest.mark.parametrize("name", list(_division_networks()))
def test_a_division_is_certified_at_the_models_real_value(name: str) -> None:
    network = _division_networks()[name]
    truth = _true_share(_divided)
    assert truth == Fraction(5, 6)
    _assert_real_or_flagged(network, _divided, [[x, s] for x in range(6) for s in (0, 1)])
    low, high = _certified_share(network)
    assert low <= truth <= high, (name, low, high)


def test_exact_reciprocals_and_batch_norms_keep_the_models_own_coefficients() -> None:
    """A power-of-two divisor and a batch norm whose square root is rational leave nothing
    rounded: the IR keeps the counted margin and exact point decisions."""
    quartered = from_torch(_Divide(4.0).eval(), input_shape=(2,))
    assert not quartered.folded
    assert exact_outputs(quartered, [4.0, 1.0]) == [Fraction(0)]
    norm = from_torch(_batch_norm(16.0))
    assert not norm.folded
    assert exact_outputs(norm, [4.0, 1.0]) == [Fraction(0)]
    assert from_torch(_batch_norm(25.0)).folded


def test_gemm_alpha_and_beta_products_that_round_are_flagged() -> None:
    """``y = α·(B·x) + β·C`` on float64 constants: ``α·B`` rounds (0.1·3), so the IR holds a
    stand-in; with ``α = 0.5, β = 2`` every product is exact and nothing is flagged."""
    weights, bias = np.array([[3.0, -0.7]]), np.array([0.3])
    for alpha, beta, rounds in ((0.1, 1.0, True), (1.0, 0.1, True), (0.5, 2.0, False)):
        model = _onnx([helper.make_node("Gemm", ["x", "W", "C"], ["y"], transB=1, alpha=alpha,
                                        beta=beta)], {"W": weights, "C": bias}, 2)
        network = from_onnx(model)
        real_alpha, real_beta = (Fraction(float(np.float32(v))) for v in (alpha, beta))

        def oracle(x: list[Fraction], a: Fraction = real_alpha, b: Fraction = real_beta
                   ) -> list[Fraction]:
            return [a * sum(Fraction(w) * v for w, v in zip(weights[0], x, strict=True))
                    + b * Fraction(bias[0])]

        points = [[float(u), float(v)] for u, v in itertools.product((-3, 0, 1, 7), repeat=2)]
        _assert_real_or_flagged(network, oracle, points)
        assert network.folded == rounds


class _Scaled(torch.nn.Module):
    """``addmm(C, x, B, alpha, beta)`` and ``add(h, c, alpha)`` on float64 constants."""

    def __init__(self, alpha: float, beta: float) -> None:
        super().__init__()
        self.alpha, self.beta = alpha, beta
        self.register_buffer("weight", torch.tensor([[3.0], [-0.7]], dtype=torch.float64))
        self.register_buffer("bias", torch.tensor([0.25], dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.addmm(self.bias, x, self.weight, beta=self.beta, alpha=self.alpha)
        return torch.add(h, self.bias, alpha=self.alpha)


def test_torch_alpha_and_beta_products_that_round_are_flagged() -> None:
    for alpha, beta, rounds in ((0.1, 1.0, True), (1.0, 0.1, True), (0.5, 2.0, False)):
        network = from_torch(_Scaled(alpha, beta).double().eval(), input_shape=(2,))

        def oracle(x: list[Fraction], a: Fraction = Fraction(alpha),
                   b: Fraction = Fraction(beta)) -> list[Fraction]:
            linear = Fraction(3.0) * x[0] + Fraction(-0.7) * x[1]
            return [a * linear + b * Fraction(0.25) + a * Fraction(0.25)]

        points = [[float(u), float(v)] for u, v in itertools.product((-3, 0, 1, 7), repeat=2)]
        _assert_real_or_flagged(network, oracle, points)
        assert network.folded == rounds


@pytest.mark.parametrize(("first", "second"), [(0.1, 0.3), (0.5, 0.25)])
def test_consecutive_leaky_relus_keep_the_real_slope(first: float, second: float) -> None:
    """Two LeakyReLUs in a row are one of slope ``first·second`` in real arithmetic; a slope
    product that rounds (0.1·0.3) stays two layers instead of one rounded slope. The module
    is float32, so its kernels apply the slopes rounded to float32."""
    inner, outer = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    with torch.no_grad():
        for linear in (inner, outer):
            linear.weight[:] = 1.0
            linear.bias[:] = 0.0
    network = from_torch(torch.nn.Sequential(inner, torch.nn.LeakyReLU(first),
                                             torch.nn.LeakyReLU(second), outer).eval())

    def oracle(x: list[Fraction]) -> list[Fraction]:
        slopes = [Fraction(float(np.float32(slope))) for slope in (first, second)]
        return [x[0] if x[0] >= 0 else slopes[0] * slopes[1] * x[0]]

    _assert_real_or_flagged(network, oracle, [[-1.0], [-3.0], [0.0], [2.0]])


def test_folded_constants_are_read_at_their_real_value() -> None:
    """A constant the graph computes by rational arithmetic is its exact value rounded, and
    marked unless float64 holds it (``0.1·0.1`` is marked, ``2·0.1`` is not); a square root
    is marked; one it copies (``Identity``, a ``Cast``, which rounds as the operator defines)
    is the model's own; one computed otherwise (``Exp``) is refused naming the node, and so
    is a computed PReLU slope that float64 cannot hold, which the IR has no magnitude to
    mark."""
    def graph(*nodes: object) -> Network:
        return from_onnx(_onnx([*nodes, helper.make_node("Mul", ["x", "c"], ["y"])],
                               {"k": np.array([2.0, 0.1]), "two": np.array([2.0, 2.0])}, 2))

    squared = graph(helper.make_node("Mul", ["k", "k"], ["c"]))
    assert squared.folded
    assert squared.layers[0].weight[1, 1] == float(Fraction(0.1) ** 2)
    assert not graph(helper.make_node("Mul", ["k", "two"], ["c"])).folded
    assert not graph(helper.make_node("Identity", ["k"], ["c"])).folded
    assert not graph(helper.make_node("Cast", ["k"], ["f"], to=TensorProto.FLOAT),
                     helper.make_node("Cast", ["f"], ["c"], to=TensorProto.DOUBLE)).folded
    assert graph(helper.make_node("Sqrt", ["k"], ["c"])).folded
    with pytest.raises(NetworkError, match="computed from constants by Exp node 'power'"):
        graph(helper.make_node("Exp", ["k"], ["c"], name="power"))
    for divisor, refused in ((4.0, False), (3.0, True)):
        model = _onnx([helper.make_node("Reciprocal", ["d"], ["c"]),
                       helper.make_node("PRelu", ["x", "c"], ["y"], name="leaky")],
                      {"d": np.array([divisor, divisor])}, 2)
        if refused:
            with pytest.raises(NetworkError, match="'leaky': slope is computed from constants"):
                from_onnx(model)
        else:
            assert not from_onnx(model).folded


class _Standardise(torch.nn.Module):
    """``linear(x / (scale + eps))`` with ``eps = [1e-12, 0]`` in float32 buffers: the graph
    computes ``scale + eps``, which float32 rounds to 1 (``1 + 1e-12``)."""

    def __init__(self, last: torch.nn.Module | None = None) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor([1.0, 1.0]))
        self.register_buffer("eps", torch.tensor([1e-12, 0.0]))
        self.linear = torch.nn.Linear(2, 1)
        with torch.no_grad():
            self.linear.weight[:] = torch.tensor([[-1.0, 1.0]])
            self.linear.bias[:] = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x / (self.scale + self.eps))


def test_a_divisor_computed_from_buffers_is_read_at_its_real_value() -> None:
    """``s − x/(1 + ε)`` on ``x ∈ {0, 1, 2}``, ``s ∈ {0, 1}``: at ``x = 1`` the model's value
    is ``s − 1/(1 + ε)``, class 1 at ``s = 1`` and 0 at ``s = 0`` (biased); the float32 fold
    made it ``s − 1``, a tie at ``s = 1`` (class 0), and the certificate said 1/3 where the
    truth is 2/3."""
    eps = Fraction(float(np.float32(1e-12)))

    def oracle(x: list[Fraction]) -> list[Fraction]:
        return [x[1] - x[0] / (1 + eps)]

    network = from_torch(_Standardise().eval(), input_shape=(2,))
    _assert_real_or_flagged(network, oracle, [[x, s] for x in range(3) for s in (0, 1)])
    truth = Fraction(sum(len({oracle([Fraction(x), Fraction(s)])[0] > 0 for s in (0, 1)}) > 1
                         for x in range(3)), 3)
    assert truth == Fraction(2, 3)
    problem = build_problem(network.renamed(input_names=["x", "s"]), ["s"], integer_inputs="all",
                            domain={"x": (0, 2), "s": (0, 1)})
    low, high = certify_causal_fairness(problem, CausalSettings(timeout_s=10.0)
                                        ).bounds["biased_share"]
    assert low <= truth <= high


class _Root(torch.nn.Module):
    """``linear(x / sqrt(variance))`` (float32 buffer ``[2, 1]``), or ``exp`` in its place."""

    def __init__(self, function: str = "sqrt") -> None:
        super().__init__()
        self.function = function
        self.register_buffer("variance", torch.tensor([2.0, 1.0]))
        self.linear = torch.nn.Linear(2, 1)
        with torch.no_grad():
            self.linear.weight[:] = torch.tensor([[1.0, 0.0]])
            self.linear.bias[:] = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x / getattr(torch, self.function)(self.variance))


def test_a_square_root_of_a_buffer_is_bounded_at_its_real_value() -> None:
    """``x / √2`` is irrational at ``x = 1``: the IR is flagged and its bounds at the point
    hold ``1/√2`` (checked by squares in ``Fraction``). Main folded ``√2`` in float32, 2·10⁻⁸
    off, and its self-check refused the model. An ``exp`` of a buffer is refused by name."""
    from verifier.bounds import compute_bounds

    network = from_torch(_Root().eval(), input_shape=(2,))
    assert network.folded
    point = np.array([[1.0, 0.0]])
    result = compute_bounds(network, point, point, method="ibp")
    low, high = Fraction(float(result.lower[0, 0])), Fraction(float(result.upper[0, 0]))
    assert low > 0 and low * low <= Fraction(1, 2) <= high * high
    assert float(high - low) < 1e-8
    with pytest.raises(NetworkError, match="computed from constants by exp node"):
        from_torch(_Root("exp").eval(), input_shape=(2,))
