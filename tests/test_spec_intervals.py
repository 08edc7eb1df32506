"""Interval arithmetic of specification expressions (:func:`verifier.spec.interval_eval`):
every result encloses the exact rational value (oracle: ``fractions.Fraction`` at sampled
points of the operand intervals), and a quantity that cannot be negative — a ratio or product
of probabilities, a sum of them — never reports a negative lower end: outward rounding of an
exact 0 gave ``-4.94e-324`` (a denormal), which certified nothing and read as nonsense."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from verifier.spec import BinaryOp, Ref, interval_eval

RATIO = BinaryOp("/", Ref("a"), Ref("b"))


def test_a_ratio_with_a_zero_numerator_starts_at_zero() -> None:
    low, high = interval_eval(RATIO, {"a": (0.0, 0.3), "b": (0.2, 0.4)})
    assert low == 0.0 and str(low) == "0.0"
    assert high >= 1.5


def test_a_product_of_an_exact_zero_stays_zero() -> None:
    product = BinaryOp("*", Ref("a"), Ref("b"))
    assert interval_eval(product, {"a": (0.0, 0.0), "b": (0.2, 0.4)}) == (0.0, 0.0)


def test_an_inexact_difference_rounds_out_and_an_exact_one_stays_exact() -> None:
    """A difference rounds outward only where the float subtraction was inexact: an unknown
    parity difference of two rates in [0, 1] is [-1, 1], not [-1.0000000000000002, 1]."""
    difference = BinaryOp("-", Ref("a"), Ref("b"))
    assert interval_eval(difference, {"a": (0.0, 1.0), "b": (0.0, 1.0)}) == (-1.0, 1.0)
    assert interval_eval(difference, {"a": (0.25, 0.25), "b": (0.25, 0.25)}) == (0.0, 0.0)
    low, high = interval_eval(difference, {"a": (0.1, 0.1), "b": (0.7, 0.7)})
    assert low < high and Fraction(low) <= Fraction(0.1) - Fraction(0.7) <= Fraction(high)


signed = st.tuples(st.floats(-1e308, 1e308), st.floats(-1e308, 1e308)).map(sorted)


@given(a=signed, b=signed, op=st.sampled_from("+-"),
       fa=st.fractions(0, 1), fb=st.fractions(0, 1))
def test_sums_and_differences_enclose_the_exact_value(
        a: list[float], b: list[float], op: str, fa: Fraction, fb: Fraction) -> None:
    low, high = interval_eval(BinaryOp(op, Ref("a"), Ref("b")),  # type: ignore[arg-type]
                              {"a": (a[0], a[1]), "b": (b[0], b[1])})
    x = Fraction(a[0]) + fa * (Fraction(a[1]) - Fraction(a[0]))
    y = Fraction(b[0]) + fb * (Fraction(b[1]) - Fraction(b[0]))
    exact = x + y if op == "+" else x - y
    assert (low == -math.inf or Fraction(low) <= exact)
    assert (high == math.inf or exact <= Fraction(high))


probabilities = st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)).map(sorted)
positive = st.tuples(st.floats(1e-300, 1.0), st.floats(1e-300, 1.0)).map(sorted)


@given(a=probabilities, b=positive, op=st.sampled_from("+*/"),
       fa=st.fractions(0, 1), fb=st.fractions(0, 1))
def test_nonnegative_operations_enclose_the_exact_value_from_zero_up(
        a: list[float], b: list[float], op: str, fa: Fraction, fb: Fraction) -> None:
    low, high = interval_eval(BinaryOp(op, Ref("a"), Ref("b")),  # type: ignore[arg-type]
                              {"a": (a[0], a[1]), "b": (b[0], b[1])})
    assert low >= 0.0
    x = Fraction(a[0]) + fa * (Fraction(a[1]) - Fraction(a[0]))
    y = Fraction(b[0]) + fb * (Fraction(b[1]) - Fraction(b[0]))
    exact = {"+": x + y, "*": x * y, "/": x / y}[op]
    assert Fraction(low) <= exact <= Fraction(high)


reaching_zero = st.tuples(st.just(0.0), st.floats(5e-324, 1.0))


@given(a=probabilities, b=reaching_zero, fa=st.fractions(0, 1),
       fb=st.fractions(0, 1).filter(lambda f: f > 0))
def test_a_ratio_whose_denominator_reaches_zero_is_bounded_below_only(
        a: list[float], b: tuple[float, float], fa: Fraction, fb: Fraction) -> None:
    """``P[fav | unprivileged] / P[fav | privileged]`` with the privileged rate possibly 0:
    ``[a_lo / b_hi, ∞]``, which holds every ``x / y`` with ``y > 0`` in the intervals (and
    ``x / 0 = ∞`` for ``x > 0``), not ``(−∞, ∞)`` nor a finite upper end."""
    low, high = interval_eval(RATIO, {"a": (a[0], a[1]), "b": b})
    assert high == math.inf and 0.0 <= low < math.inf
    x = Fraction(a[0]) + fa * (Fraction(a[1]) - Fraction(a[0]))
    assert Fraction(low) <= x / (fb * Fraction(b[1]))


def test_a_ratio_over_zero_or_nan_or_a_signed_denominator_is_unbounded() -> None:
    for b in ((0.0, 0.0), (math.nan, 0.5), (0.1, math.nan), (-0.5, 0.5)):
        assert interval_eval(RATIO, {"a": (0.3, 0.4), "b": b}) == (-math.inf, math.inf)
    assert interval_eval(RATIO, {"a": (-0.1, 0.4), "b": (0.0, 0.5)}) == (-math.inf, math.inf)
