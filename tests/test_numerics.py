"""The numerics core against exact rational arithmetic (``fractions.Fraction``): outward
rounding encloses the exact result of every operation, in every range (subnormal, near
overflow); the quotient enclosures contain the exact quotient of any rationals in their
input intervals; the verdict table agrees with exact comparison; and the CLI's one
result→exit-code map."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from pipeline_steps.cli.exit_codes import EXIT_FAILED, EXIT_OK, exit_for
from verifier.numerics import (
    COMPARISONS,
    EPS,
    FUNCTION_REL_MARGIN,
    SMALLEST_SUBNORMAL,
    add_down,
    add_up,
    down,
    down_array,
    interval_verdict,
    mul_down,
    mul_up,
    nonnegative_quotient,
    probability_ratio,
    proven_fail,
    proven_pass,
    relative_margin,
    scaled_down,
    scaled_up,
    share_interval,
    sum_lower,
    sum_upper,
    up,
    up_array,
    widened_down,
    widened_up,
)
from verifier.numerics.tensor import down_tensor, magnitude_margin, up_tensor

MAX = 1.7976931348623157e308
finite = st.floats(allow_nan=False, allow_infinity=False)
nonnegative = st.floats(min_value=0.0, max_value=1e300, allow_nan=False)
tiny = st.floats(min_value=-1e-300, max_value=1e-300, allow_nan=False)
probability = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
fraction_of_one = st.fractions(min_value=0, max_value=1, max_denominator=10**6)
OPS: dict[str, Callable[[Fraction, Fraction], Fraction]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def exact(value: float) -> Fraction:
    return Fraction(value)


def below(bound: float, value: Fraction) -> bool:
    """``bound <= value`` for a float bound that may be infinite."""
    return bound == -math.inf or (math.isfinite(bound) and exact(bound) <= value)


def above(bound: float, value: Fraction) -> bool:
    return bound == math.inf or (math.isfinite(bound) and exact(bound) >= value)


def between(a: float, b: float, t: Fraction) -> Fraction:
    """The rational ``a + t·(b − a)`` (``t`` in [0, 1])."""
    return exact(a) + t * (exact(b) - exact(a))


# ---------------------------------------------------------------------------- rounding


@given(finite | tiny, finite | tiny, st.sampled_from(sorted(OPS)))
def test_one_step_outward_encloses_every_correctly_rounded_operation(
        a: float, b: float, op: str) -> None:
    assume(not (op == "/" and b == 0.0))
    with np.errstate(all="ignore"):
        computed = float({"+": np.add, "-": np.subtract, "*": np.multiply,
                          "/": np.divide}[op](np.float64(a), np.float64(b)))
    truth = OPS[op](exact(a), exact(b))
    assert below(down(computed), truth) and above(up(computed), truth)
    assert float(down_array(computed)) == down(computed)
    assert float(up_array(computed)) == up(computed)


def test_steps_at_the_edges_of_the_float_range() -> None:
    assert down(0.0) == -SMALLEST_SUBNORMAL and up(0.0) == SMALLEST_SUBNORMAL
    assert down(math.inf) == MAX and up(-math.inf) == -MAX
    assert down(-math.inf) == -math.inf and up(math.inf) == math.inf
    assert math.isnan(down(math.nan))


@given(finite, finite)
def test_add_down_and_up_are_the_directed_roundings_of_the_exact_sum(a: float, b: float) -> None:
    truth = exact(a) + exact(b)
    low, high = float(add_down(a, b)), float(add_up(a, b))
    assert below(low, truth) and above(high, truth)
    if math.isfinite(low) and low != MAX:
        assert exact(up(low)) > truth  # the largest float below: nothing tighter
    if math.isfinite(high) and high != -MAX:
        assert exact(down(high)) < truth
    if truth == 0:
        assert low == high == 0.0


@given(finite | tiny, finite | tiny)
def test_products_step_outward_and_a_zero_factor_stays_exact(a: float, b: float) -> None:
    truth = exact(a) * exact(b)
    low, high = float(mul_down(a, b)), float(mul_up(a, b))
    assert below(low, truth) and above(high, truth)
    if a == 0.0 or b == 0.0:
        assert low == high == 0.0


@given(st.lists(nonnegative | st.floats(0.0, 1e-300), min_size=1, max_size=60), st.randoms())
def test_sum_bounds_enclose_any_summation_order(terms: list[float], rng) -> None:
    truth = sum(map(exact, terms))
    rng.shuffle(terms)
    total = 0.0
    for term in terms:
        total += term
    roundings = len(terms) - 1
    assert exact(float(sum_lower(total, roundings))) <= truth
    assert above(float(sum_upper(total, roundings)), truth)
    assert float(sum_lower(total, roundings)) >= 0.0


def test_an_empty_sum_stays_exactly_zero() -> None:
    assert float(sum_lower(0.0, 10)) == 0.0 and float(sum_upper(0.0, 10)) == 0.0


def test_sum_bounds_give_up_past_the_valid_rounding_count() -> None:
    huge = 2**52
    assert float(sum_lower(1.0, huge)) == 0.0 and float(sum_upper(1.0, huge)) == math.inf


@given(finite, st.floats(min_value=-1.0, max_value=1.0),
       st.sampled_from([FUNCTION_REL_MARGIN, 1e-9, 4 * EPS]))
def test_widening_covers_the_stated_relative_error(value: float, share: float,
                                                   relative: float) -> None:
    truth = exact(value) * (1 + exact(share) * exact(relative))
    assert below(float(widened_down(value, relative)), truth)
    assert above(float(widened_up(value, relative)), truth)


def test_widening_steps_past_an_underflowed_zero() -> None:
    assert float(widened_down(0.0, 1e-12)) < 0.0 < float(widened_up(0.0, 1e-12))


@given(st.integers(min_value=0, max_value=10**6))
def test_relative_margin_exceeds_gamma(operations: int) -> None:
    unit = Fraction(1, 2**53)
    count = operations + 1
    gamma = count * unit / (1 - count * unit)
    assert exact(relative_margin(operations)) >= gamma


@given(st.lists(st.floats(min_value=1e-3, max_value=1.0), min_size=1, max_size=40))
def test_scaling_by_relative_margin_encloses_a_chain_of_products(factors: list[float]) -> None:
    """``scaled_down``/``scaled_up`` with :func:`relative_margin` of the chain's length
    enclose the exact product of the factors (Fractions), with no step after the scaling."""
    product = 1.0
    for factor in factors:
        product *= factor
    truth = math.prod(map(exact, factors))
    margin = relative_margin(len(factors))
    assert exact(scaled_down(product, margin)) <= truth <= exact(scaled_up(product, margin))


@given(finite, st.sampled_from([FUNCTION_REL_MARGIN, 1e-9, 4 * EPS, relative_margin(7)]))
def test_scaling_is_the_written_product_and_keeps_the_type(value: float,
                                                           relative: float) -> None:
    """The numbers every caller printed before the scalings moved into the core: ``x·(1 ∓
    m)`` bit for bit, a float stays a float and an array an array."""
    assert math.copysign(1.0, scaled_down(value, relative)) == \
        math.copysign(1.0, value * (1.0 - relative))
    assert scaled_down(value, relative) == value * (1 - relative)
    assert scaled_up(value, relative) == value * (1 + relative)
    assert type(scaled_down(value, relative)) is float
    array = np.array([value, 0.5])
    assert scaled_up(array, relative).tobytes() == (array * (1.0 + relative)).tobytes()
    per_element = np.array([relative, 2 * relative])
    assert scaled_down(array, per_element).tobytes() == (array * (1.0 - per_element)).tobytes()


# ---------------------------------------------------------------------------- quotients


@st.composite
def interval(draw, values=nonnegative) -> tuple[float, float]:
    a, b = draw(values), draw(values)
    return min(a, b), max(a, b)


@given(interval(), interval(), fraction_of_one, fraction_of_one)
def test_quotient_contains_every_rational_quotient(num, den, s, t) -> None:
    n, d = between(*num, s), between(*den, t)
    assume(d > 0)
    low, high = nonnegative_quotient(num[0], num[1], den[0], den[1])
    assert below(float(low), n / d) and above(float(high), n / d)


@given(interval(probability), interval(probability), fraction_of_one, fraction_of_one)
def test_probability_ratio_contains_every_conditional_probability(num, den, s, t) -> None:
    n, d = between(*num, s), between(*den, t)
    assume(d > 0 and n <= d)
    low, high = probability_ratio(num[0], num[1], den[0], den[1])
    assert float(low) >= 0.0 and float(high) <= 1.0
    assert below(float(low), n / d) and above(float(high), n / d)


@given(interval(probability), interval(probability), fraction_of_one, fraction_of_one)
def test_share_contains_every_ratio_of_rationals_in_the_intervals(a_int, b_int, s, t) -> None:
    a, b = between(*a_int, s), between(*b_int, t)
    assume(a + b > 0)
    low, high = share_interval(*a_int, *b_int)
    assert 0.0 <= low <= high <= 1.0
    assert exact(low) <= a / (a + b) <= exact(high)


@given(st.floats(min_value=1e-320, max_value=1e-300), st.floats(min_value=0.5, max_value=1.0))
def test_subnormal_quotients_stay_enclosed(numerator: float, denominator: float) -> None:
    """The relative-margin model this replaced failed here: a subnormal quotient's error is
    absolute, and ``q·(1 − 1e-12)`` rounds back to ``q``."""
    truth = exact(numerator) / 3 / exact(denominator)
    n = numerator / 3
    n_lo, n_hi = down(n), up(n)
    low, high = probability_ratio(n_lo, n_hi, denominator, denominator)
    assert exact(float(low)) <= truth <= exact(float(high))


def test_quotient_with_a_denominator_that_may_be_zero() -> None:
    low, high = probability_ratio(0.2, 0.3, 0.0, 0.5)
    assert float(high) == 1.0 and 0.0 < float(low) <= 0.4
    low, high = nonnegative_quotient(0.2, 0.3, 0.0, 0.0)
    assert float(low) == 0.0 and float(high) == math.inf


# ---------------------------------------------------------------------------- verdicts

EXACT = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


@given(st.sampled_from(COMPARISONS), finite, finite, finite)
def test_verdict_table_agrees_with_exact_comparison(comparison: str, threshold: float,
                                                   a: float, b: float) -> None:
    low, high = min(a, b), max(a, b)
    holds = EXACT[comparison]
    # a half-line is convex: every point of [low, high] passes iff both ends do
    ends = [holds(exact(end), exact(threshold)) for end in (low, high)]
    expected = "satisfied" if all(ends) else "violated" if not any(ends) else "unknown"
    assert interval_verdict(comparison, threshold, low, high) == expected
    assert proven_pass(comparison, threshold, low, high) == (expected == "satisfied")
    assert proven_fail(comparison, threshold, low, high) == (expected == "violated")


@pytest.mark.parametrize(("comparison", "low", "high", "verdict"), [
    (">", 0.81, 0.9, "satisfied"), (">", 0.5, 0.8, "violated"), (">", 0.7, 0.9, "unknown"),
    (">=", 0.8, 0.9, "satisfied"), (">=", 0.5, 0.79, "violated"), ("<", 0.5, 0.79, "satisfied"),
    ("<", 0.8, 0.9, "violated"), ("<=", 0.5, 0.8, "satisfied"), ("<=", 0.81, 0.9, "violated"),
])
def test_verdict_table_at_the_threshold(comparison: str, low: float, high: float,
                                        verdict: str) -> None:
    assert interval_verdict(comparison, 0.8, low, high) == verdict


def test_an_empty_or_nan_interval_proves_nothing() -> None:
    for comparison in COMPARISONS:
        assert interval_verdict(comparison, 0.5, 0.9, 0.1) == "unknown"
        assert interval_verdict(comparison, 0.5, math.nan, 0.9) == "unknown"


def test_an_unknown_comparison_is_refused() -> None:
    with pytest.raises(ValueError, match="comparison must be one of"):
        proven_pass("==", 0.5, 0.1, 0.2)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- torch


@given(st.lists(finite | tiny, min_size=1, max_size=8))
def test_tensor_steps_match_the_float64_ones(values: list[float]) -> None:
    tensor = torch.tensor(values, dtype=torch.float64)
    assert down_tensor(tensor).tolist() == [down(v) for v in values]
    assert up_tensor(tensor).tolist() == [up(v) for v in values]


def test_tensor_steps_keep_the_dtype() -> None:
    single = torch.tensor([1.0], dtype=torch.float32)
    assert up_tensor(single).dtype == torch.float32
    assert float(up_tensor(single)) == float(np.nextafter(np.float32(1.0), np.float32(2.0)))


def test_magnitude_margin_skips_only_structural_zeros() -> None:
    magnitude = torch.tensor([2.0, 0.0, 0.0], dtype=torch.float64)
    support = torch.tensor([True, True, False])
    margin = magnitude_margin(magnitude, lambda: support)
    assert margin.tolist() == [1e-9 * 2.0 + 1e-12, 1e-12, 0.0]


# ---------------------------------------------------------------------------- exit codes


@pytest.mark.parametrize(("result", "code"), [
    ("satisfied", EXIT_OK), ("violated", EXIT_FAILED), ("unknown", EXIT_FAILED),
    ("fair", EXIT_OK), ("biased", EXIT_FAILED),
    ("passed", EXIT_OK), ("warned", EXIT_OK), ("failed", EXIT_FAILED),
    ("no such result", EXIT_FAILED),
])
def test_one_map_from_result_to_exit_code(result: str, code: int) -> None:
    assert exit_for(result) == code


@given(st.floats(1e-300, 1e300), st.floats(1e-300, 1e300))
def test_a_zero_numerator_gives_exactly_zero(den_lo: float, den_width: float) -> None:
    """0 / d is exact for d > 0: no outward step off zero (a fair-everywhere share is
    [0, 0])."""
    low, high = nonnegative_quotient(0.0, 0.0, den_lo, den_lo + den_width, ceiling=1.0)
    assert float(low) == 0.0 and float(high) == 0.0
