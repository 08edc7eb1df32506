"""Linear preconditions of the SC-layer are decided in real arithmetic.

Oracle: ``fractions.Fraction`` evaluation of ``a·x − b`` on the float values. Points are drawn
within a few ulps of the hyperplanes (exact ties included), where a float dot product decides
either way; the eager layer and its TorchScript compilation must agree with the oracle.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from verifier.selfcorrect import parse_constraints
from verifier.selfcorrect.exact_sign import ExactSignRangeError, exact_linear_sign
from verifier.selfcorrect.preconditions import PreconditionEvaluator


def _exact_sign(x: np.ndarray, a: np.ndarray, b: float) -> int:
    value = sum((Fraction(float(ai)) * Fraction(float(xi)) for ai, xi in zip(a, x, strict=True)),
                Fraction(0)) - Fraction(float(b))
    return (value > 0) - (value < 0)


def _near_hyperplane_rows(seed: int, count: int, width: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    scales = 10.0 ** rng.integers(-6, 7, size=(count, 1))
    a = rng.normal(size=(count, width)) * scales
    x = rng.normal(size=(count, width)) * 10.0 ** rng.integers(-3, 4, size=(count, 1))
    b = np.einsum("ij,ij->i", a, x)
    steps = rng.integers(-2, 3, size=count)
    for _ in range(2):
        up, down = np.nextafter(b, np.inf), np.nextafter(b, -np.inf)
        b = np.where(steps > 0, up, np.where(steps < 0, down, b))
    return a, x, b


def test_signs_near_and_on_the_hyperplane_are_exact() -> None:
    a, x, b = _near_hyperplane_rows(0, 13450, 4)
    scripted = torch.jit.script(exact_linear_sign)
    disagreements_with_float = 0
    for start in range(0, a.shape[0], 1345):
        rows = slice(start, start + 1345)
        xs = torch.from_numpy(x[rows])
        # one atom per row: evaluate the diagonal of the (rows × atoms) table
        table = exact_linear_sign(xs, torch.from_numpy(a[rows]), torch.from_numpy(b[rows]))
        compiled = scripted(xs, torch.from_numpy(a[rows]), torch.from_numpy(b[rows]))
        assert torch.equal(table, compiled)
        signs = torch.diagonal(table).numpy()
        for row, sign in zip(range(start, start + signs.size), signs, strict=True):
            exact = _exact_sign(x[row], a[row], b[row])
            assert sign == exact, (row, sign, exact)
            float_sign = np.sign(float(x[row] @ a[row]) - b[row])
            disagreements_with_float += int(float_sign != exact)
    assert disagreements_with_float > 0  # the rows do exercise the rounding-sensitive cases


def test_layer_and_torchscript_apply_the_exact_semantics() -> None:
    a, x, b = _near_hyperplane_rows(1, 600, 3)
    row = a[0]
    points = x.copy()
    points[:, :] = x[0]
    points[:, 0] = x[0, 0] + np.arange(-300, 300) * np.spacing(x[0, 0])
    for strict in (False, True):
        constraints = parse_constraints({
            "num_classes": 2, "input_size": 3,
            "constraints": [{
                "name": "linear", "postcondition": [[[0, 1]]],
                "precondition": {"kind": "linear", "a": row.tolist(), "b": float(b[0]),
                                 "strict": strict},
            }],
        })
        evaluator = PreconditionEvaluator(constraints.constraints, 2, 3)
        predicted = torch.zeros(points.shape[0], dtype=torch.long)
        active = evaluator(torch.from_numpy(points), predicted)[:, 0].numpy()
        compiled = torch.jit.script(evaluator)(torch.from_numpy(points), predicted)[:, 0].numpy()
        expected = [
            _exact_sign(p, row, b[0]) < 0 or (not strict and _exact_sign(p, row, b[0]) == 0)
            for p in points
        ]
        assert active.tolist() == expected
        assert compiled.tolist() == expected


def test_products_outside_the_exact_range_are_refused_near_the_hyperplane() -> None:
    x = torch.tensor([[1e300, 1e-300]], dtype=torch.float64)
    a = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    with pytest.raises(ExactSignRangeError):
        exact_linear_sign(x, a, torch.tensor([1e300], dtype=torch.float64))


def test_an_overflowing_dot_product_is_refused_not_read_as_a_sign() -> None:
    """``1e10·1e300 − 1e10·0.9e300`` overflows to ``inf − inf`` (NaN) in float; its real value
    is ``+1e309``. It used to come out as sign 0, so ``a·x <= 0`` held where it is false."""
    a = torch.tensor([[1e10, -1e10]], dtype=torch.float64)
    for row in ([1e300, 0.9e300], [0.9e300, 1e300], [1e300, 1e300]):
        with pytest.raises(ExactSignRangeError):
            exact_linear_sign(torch.tensor([row], dtype=torch.float64), a,
                              torch.tensor([0.0], dtype=torch.float64))


def _extended_sign(x: list[float], a: list[float], b: float) -> int | None:
    """Oracle in the extended reals: zero coefficients drop their coordinate; the infinite
    terms decide when they agree; ``None`` for ``∞ − ∞``."""
    infinite = {int(np.sign(ai) * np.sign(xi)) for ai, xi in zip(a, x, strict=True)
                if ai != 0.0 and np.isinf(xi)}
    if len(infinite) == 2:
        return None
    if infinite:
        return infinite.pop()
    finite = [(ai, xi) for ai, xi in zip(a, x, strict=True) if ai != 0.0]
    return _exact_sign(np.array([xi for _, xi in finite]), np.array([ai for ai, _ in finite]), b)


def test_infinite_coordinates_are_read_in_the_extended_reals() -> None:
    """``x = [5, inf]`` against ``x0 <= 1`` (``a = [1, 0]``): the precondition is false. The
    float dot product is NaN (``0·inf``) and the atom used to hold, so the layer corrected a
    row no active constraint asked it to; ``[inf, 0]`` was refused with a message about
    products out of range."""
    rng = np.random.default_rng(3)
    values = [0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, 1e300]
    coefficients = [0.0, 1.0, -1.0, 0.25, 3.0]
    scripted = torch.jit.script(exact_linear_sign)
    checked = refused = 0
    for _ in range(400):
        x = rng.choice(values, size=(1, 3))
        a = rng.choice(coefficients, size=(1, 3))
        b = float(rng.choice([0.0, 1.0, -0.5]))
        expected = _extended_sign(x[0].tolist(), a[0].tolist(), b)
        args = (torch.from_numpy(x), torch.from_numpy(a), torch.tensor([b], dtype=torch.float64))
        near_range = any(ai != 0.0 and abs(xi) == 1e300 for ai, xi in zip(a[0], x[0],
                                                                           strict=True))
        if expected is None:
            with pytest.raises(ExactSignRangeError, match="inf - inf"):
                exact_linear_sign(*args)
            refused += 1
            continue
        try:
            got = exact_linear_sign(*args)
        except ExactSignRangeError:
            assert near_range  # only a huge finite product may be out of the exact range
            continue
        assert int(got[0, 0]) == expected, (x, a, b)
        assert torch.equal(scripted(*args), got)
        checked += 1
    assert checked > 200 and refused > 10
    constraints = parse_constraints({
        "num_classes": 2, "input_size": 2,
        "constraints": [{"name": "x0_small", "postcondition": [[[1, 0]]],
                         "precondition": {"kind": "linear", "a": [1.0, 0.0], "b": 1.0}}],
    })
    evaluator = PreconditionEvaluator(constraints.constraints, 2, 2)
    points = torch.tensor([[5.0, np.inf], [0.0, np.inf], [np.inf, 0.0], [-np.inf, 7.0]],
                          dtype=torch.float64)
    active = evaluator(points, torch.zeros(4, dtype=torch.long))[:, 0]
    assert active.tolist() == [False, True, False, True]
