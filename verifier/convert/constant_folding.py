"""Constants a model computes from its own constants, read at their real value.

A graph may compute a coefficient from its constants (``std + 1e-12``, ``Reciprocal(5)``,
``alpha·c``) before applying it to the data. Evaluated in the graph's float32 that value is a
rounded stand-in for the real one (``1 + 1e-12`` is 1 in float32), and reading it as the
model's own coefficient moves the IR off the model in real arithmetic: a tie such as
``s − x/(1 + 1e-12) = 0`` at ``x = s = 1`` becomes exact where the model's value is positive.

The converters fold such constants here instead. A *rational* operator (add, subtract,
multiply, divide, negate, reciprocal) is evaluated exactly in ``Fraction`` from its operands'
exact values: where float64 holds every result the constant is an ordinary float64 array (the
model's own coefficient, exactly), otherwise a :class:`Computed` constant, its float64 values
correctly rounded and its exact values kept, which the converter marks as computed
(:func:`~verifier.convert.affine_chain.computed_magnitudes`: the IR is then ``folded``). Any
a square root (or its reciprocal) is evaluated in float64 on the exact operand rounded once, a
:class:`Computed` constant within three roundings of the real value, marked likewise (the
bound propagators' ``1e-9`` relative margin covers a few ``2⁻⁵³``). Any other operator with a
float result (an exponential, a power), a rational operator on a root, and a copy of a
computed constant give an :class:`Unreadable` constant, refused by name where it is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from verifier.network import NetworkError

RATIONAL_OPERATORS: dict[str, Callable[..., Any]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "neg": np.negative, "reciprocal": lambda value: 1 / value,
}
"""Operators on constants whose real results are computed exactly, by lower-case name."""


ROOT_OPERATORS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sqrt": np.sqrt, "rsqrt": lambda value: 1.0 / np.sqrt(value),
}
"""Operators on one constant whose real results are irrational in general: evaluated in
float64 on the correctly rounded operand, within three roundings of the real value."""


@dataclass(frozen=True)
class Computed:
    """A float constant computed from the model's constants that float64 cannot hold
    exactly: ``value`` (float64) is ``exact`` (``Fraction`` objects, same shape) correctly
    rounded, or, for a root (``exact`` None), within three float64 roundings of it."""

    value: np.ndarray
    exact: np.ndarray | None


@dataclass(frozen=True)
class Unreadable:
    """A float constant computed by ``by`` (an operator and its node) whose real value is not
    known exactly; ``value`` is the graph's float result, for shapes only."""

    by: str
    value: Any

    def refusal(self, what: str) -> NetworkError:
        """The error for reading it as ``what``."""
        return NetworkError(
            f"{what} is computed from constants by {self.by}, whose real value is not a float "
            "certgate can bound; give it as an initializer or buffer (export with constant "
            "folding)"
        )


def computed_refusal(what: str) -> NetworkError:
    """The error for reading a :class:`Computed` constant as ``what`` where the IR has no
    magnitude to mark it with (a slope, a clamp bound, a scalar factor)."""
    return NetworkError(
        f"{what} is computed from constants and float64 cannot hold its real value; give it as "
        "an initializer or buffer (export with constant folding)"
    )


def exact_values(value: Any) -> np.ndarray:
    """The exact values of a numeric array, scalar or rational :class:`Computed`, as
    ``Fraction`` objects."""
    if isinstance(value, Computed):
        assert value.exact is not None
        return value.exact
    array = np.asarray(value)
    return np.vectorize(lambda v: Fraction(v.item() if hasattr(v, "item") else v),
                        otypes=[object])(array).reshape(array.shape)


def rational_result(operator: str, operands: Sequence[Any]) -> np.ndarray | Computed | None:
    """The real result of a rational ``operator`` on numeric operands (arrays, scalars or
    :class:`Computed`): a float64 array where float64 holds every value, else
    :class:`Computed`; ``None`` for another operator, a non-numeric operand or a division by
    zero."""
    function = RATIONAL_OPERATORS.get(operator)
    if function is None or not all(
            (value.exact is not None) if isinstance(value, Computed)
            else np.asarray(value).dtype.kind in "fiub" for value in operands):
        return None
    try:
        exact = np.asarray(function(*(exact_values(value) for value in operands)), dtype=object)
    except ZeroDivisionError:
        return None
    rounded = np.vectorize(float, otypes=[np.float64])(exact).reshape(exact.shape)
    if all(Fraction(float(v)) == e for v, e in zip(rounded.flat, exact.flat, strict=True)):
        return rounded
    return Computed(rounded, exact)


def root_result(operator: str, operand: Any) -> Computed | None:
    """A root operator (:data:`ROOT_OPERATORS`) of one numeric operand (an array, a scalar or
    a rational :class:`Computed`), evaluated in float64 on its correctly rounded value:
    :class:`Computed` without exact values; ``None`` for another operator, another operand,
    or a negative or zero value."""
    function = ROOT_OPERATORS.get(operator)
    if function is None or (isinstance(operand, Computed) and operand.exact is None) or (
            not isinstance(operand, Computed) and np.asarray(operand).dtype.kind not in "fiub"):
        return None
    exact = exact_values(operand)
    if not all(v > 0 for v in exact.flat):
        return None
    rounded = np.vectorize(float, otypes=[np.float64])(exact).reshape(exact.shape)
    with np.errstate(all="ignore"):
        value = function(rounded)
    return Computed(value, None) if np.isfinite(value).all() else None


def folded_result(operator: str, operands: Sequence[Any]) -> np.ndarray | Computed | None:
    """The real result of ``operator`` on constant operands as the converters read it:
    :func:`rational_result` or :func:`root_result`; ``None`` when neither applies (the
    constant is then the model's own if ``operator`` only copies, else unreadable)."""
    if operator in ROOT_OPERATORS:
        return root_result(operator, operands[0]) if len(operands) == 1 else None
    return rational_result(operator, operands)

