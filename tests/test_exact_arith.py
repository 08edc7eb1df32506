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


_EXTREMES = st.sampled_from([0.0, 1.0, 0.1, 1 + 2.0**-52, 2.0**53, 1e16, 1e-280, 7e-281,
                             1e-300, 5e-324, 8.095e-320, 3e289, 1e290, 1e300, 1.7e308])


@st.composite
def _extreme(draw: st.DrawFn) -> float:
    return draw(_EXTREMES) * draw(st.sampled_from([1.0, -1.0]))


@given(coeffs=st.lists(_extreme(), min_size=1, max_size=3), constant=_extreme(),
       lower=st.lists(_extreme(), min_size=3, max_size=3),
       width=st.lists(_extreme(), min_size=3, max_size=3))
def test_bounds_hold_for_operands_beyond_the_splitting_range(coeffs, constant, lower,
                                                             width) -> None:
    """Operands near the float range (Veltkamp splitting of ``2e300`` overflows, so the
    error-free product is invalid even where the product itself is small, ``8e-320·2e300``)
    and products beyond it (``1e300·1e16``): the bounds hold the exact extremes, an overflow
    widening to ``∓∞`` on its own side, never NaN and never an infinity on the wrong side."""
    n = len(coeffs)
    lo = np.array([lower[:n]])
    with np.errstate(over="ignore"):
        hi = lo + np.abs(np.array([width[:n]]))
    if not np.isfinite(hi).all():
        return
    with np.errstate(all="ignore"):
        low, high = linear_form_bounds(np.array([coeffs]), np.array([constant]), lo, hi)
    exact_min = Fraction(constant) + sum(
        Fraction(c) * Fraction(float(lo[0, i] if c > 0 else hi[0, i])) for i, c in enumerate(coeffs)
    )
    exact_max = Fraction(constant) + sum(
        Fraction(c) * Fraction(float(hi[0, i] if c > 0 else lo[0, i])) for i, c in enumerate(coeffs)
    )
    assert low[0, 0] == -np.inf or (np.isfinite(low[0, 0])
                                    and Fraction(float(low[0, 0])) <= exact_min)
    assert high[0, 0] == np.inf or (np.isfinite(high[0, 0])
                                    and Fraction(float(high[0, 0])) >= exact_max)
