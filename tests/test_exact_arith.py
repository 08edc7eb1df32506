"""Linear-form bounds against exact rational arithmetic."""

from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from verifier.exact_arith import linear_form_bounds
from verifier.numerics import two_product, two_sum

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
tiny = st.floats(min_value=-1e-300, max_value=1e-300, allow_nan=False)


@given(a=finite, b=finite)
def test_error_free_transformations_are_exact(a: float, b: float) -> None:
    product, error = two_product(np.array([a]), np.array([b]))
    if 0 < abs(Fraction(a) * Fraction(b)) < Fraction(1e-280):
        return  # outside TwoProduct's range: its error is bounded separately
    assert Fraction(float(product[0])) + Fraction(float(error[0])) == Fraction(a) * Fraction(b)
    total, error = two_sum(np.array([a]), np.array([b]))
    assert Fraction(float(total[0])) + Fraction(float(error[0])) == Fraction(a) + Fraction(b)


@given(
    coeffs=st.lists(finite, min_size=3, max_size=3),
    constant=finite,
    corners=st.lists(st.tuples(finite, finite), min_size=3, max_size=3),
)
def test_bounds_contain_the_exact_extremes(coeffs, constant, corners) -> None:
    lo = np.array([[min(a, b) for a, b in corners]])
    hi = np.array([[max(a, b) for a, b in corners]])
    low, high = linear_form_bounds(np.array([coeffs]), np.array([constant]), lo, hi)
    exact_min = Fraction(constant) + sum(
        Fraction(c) * Fraction(float(lo[0, i] if c > 0 else hi[0, i])) for i, c in enumerate(coeffs)
    )
    exact_max = Fraction(constant) + sum(
        Fraction(c) * Fraction(float(hi[0, i] if c > 0 else lo[0, i])) for i, c in enumerate(coeffs)
    )
    assert Fraction(float(low[0, 0])) <= exact_min
    assert Fraction(float(high[0, 0])) >= exact_max


@given(coeff=tiny, corner=tiny, constant=tiny)
def test_bounds_are_sound_where_products_underflow(coeff: float, corner: float,
                                                   constant: float) -> None:
    box = np.array([[corner]])
    low, high = linear_form_bounds(np.array([[coeff]]), np.array([constant]), box, box)
    exact = Fraction(coeff) * Fraction(corner) + Fraction(constant)
    assert Fraction(float(low[0, 0])) <= exact <= Fraction(float(high[0, 0]))


def test_simple_atoms_are_exact_on_point_boxes() -> None:
    lo = hi = np.array([[1.0, 0.0, 18.0]])
    coeffs = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.0, -2.0]])
    low, high = linear_form_bounds(coeffs, np.array([-1.0, -18.0, 35.5]), lo, hi)
    np.testing.assert_array_equal(low, [[0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(high, [[0.0, 0.0, 0.0]])


def test_infinite_sides_only_through_nonzero_coefficients() -> None:
    lo = np.array([[-np.inf, 0.0]])
    hi = np.array([[np.inf, 1.0]])
    low, high = linear_form_bounds(np.array([[0.0, 2.0], [1.0, 0.0]]), np.zeros(2), lo, hi)
    np.testing.assert_array_equal(low, [[0.0, -np.inf]])
    np.testing.assert_array_equal(high, [[2.0, np.inf]])
