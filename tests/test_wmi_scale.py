"""WMI at every scale: thin heavy cells are counted and no absolute tolerance decides a cell.

Inputs, priors and networks are rescaled by ``s`` from about 1e-12 to 1e12; the oracles are
exact (rational arithmetic with :class:`fractions.Fraction` for uniform priors, normal CDF
differences with mpmath at 50 digits) and the certified interval must contain them. With
power-of-two scales every float in the problem scales exactly, so an exact result may change
only by float64 rounding (which the exact path sets aside).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.network import Layer, Network
from verifier.population import Factor, Feature, Mixture, Normal, PopulationModel, Product, Uniform
from verifier.wmi import local_robustness
from verifier.wmi.interior import volume_bound
from verifier.wmi.polytope import Undecided, make_polytope

mpmath.mp.dps = 50
# The exact (polynomial) path is exact up to float64 rounding of its integrals (DESIGN D7):
# compare it with the rational truth at this relative precision; envelope intervals are
# compared without any slack.
FLOAT_ROUNDING = 1e-12


def band_network(direction: list[float], centre: float, half_width: float) -> Network:
    """Single logit ``|d·x − centre| − half_width``: class 0 (logit <= 0) exactly on the band
    ``|d·x − centre| <= half_width``."""
    d = np.array(direction, dtype=np.float64)
    return Network([Layer(np.stack([d, -d]), np.array([-centre, centre]), "relu"),
                    Layer(np.array([[1.0, 1.0]]), np.array([-half_width]))])


def one_column(distribution: object) -> PopulationModel:
    return PopulationModel(features=[Feature(name="x", kind="continuous")],
                           distribution=distribution)


def normal_mass(a: float, b: float, mean: float, std: float) -> mpmath.mpf:
    """``P(a <= X <= b)`` for ``X ~ N(mean, std²)`` at 50 digits."""
    if a >= b:
        return mpmath.mpf(0)
    lower = (mpmath.mpf(a) - mpmath.mpf(mean)) / mpmath.mpf(std)
    upper = (mpmath.mpf(b) - mpmath.mpf(mean)) / mpmath.mpf(std)
    return mpmath.ncdf(upper) - mpmath.ncdf(lower)


def contains(result: object, truth: float | mpmath.mpf) -> bool:
    return result.probability_lower <= truth <= result.probability_upper


def test_the_thin_heavy_cell_of_issue_33_is_counted() -> None:
    """x ~ N(5e-10, (1e-10)²), class 0 on |x − 5e-10| <= 5e-12 (about 4 % of the mass), L∞
    ball 2e-10 ± 1e-9: the truth is 0.9601224 (closed form); it was certified as
    [0.99999899, 1.0] when the cell was dropped as measure zero."""
    prior = one_column(Normal(mean=5e-10, std=1e-10))
    net = band_network([1.0], 5e-10, 5e-12)
    result = local_robustness(net, prior, [2e-10], 1e-9, timeout_s=30)
    lo, hi = 2e-10 - 1e-9, 2e-10 + 1e-9
    truth = 1 - normal_mass(5e-10 - 5e-12, 5e-10 + 5e-12, 5e-10, 1e-10) / normal_mass(
        lo, hi, 5e-10, 1e-10)
    assert abs(float(truth) - 0.9601224) < 1e-7
    assert contains(result, truth)
    assert result.probability_upper - result.probability_lower <= 1e-4


@pytest.mark.parametrize("width", [1e-300, 1e-100, 1e-12, 1e-11, 1e-10, 1.0, 1e12, 1e100])
def test_a_uniform_prior_of_any_positive_width_is_accepted(width: float) -> None:
    """U(0, w) and class 0 on the middle fifth: 0.8 exactly, at every width."""
    prior = one_column(Uniform(lower=0.0, upper=width))
    net = band_network([1.0], 0.5 * width, 0.1 * width)
    result = local_robustness(net, prior, [0.0], 2 * width, expected_class=1)
    assert result.probability == pytest.approx(0.8, rel=FLOAT_ROUNDING)


def band_area(low: Fraction, high: Fraction) -> Fraction:
    """Area of ``{low <= x0 + x1 <= high}`` inside the unit square (exact)."""
    def below(t: Fraction) -> Fraction:
        t = min(max(t, Fraction(0)), Fraction(2))
        return t * t / 2 if t <= 1 else 1 - (2 - t) * (2 - t) / 2
    return below(high) - below(low) if high > low else Fraction(0)


@settings(max_examples=30, deadline=None)
@given(exponent=st.integers(-40, 40), centre=st.integers(1, 255),
       thinness=st.integers(1, 40))
def test_an_oblique_thin_band_under_a_uniform_prior_is_exact_at_every_scale(
        exponent: int, centre: int, thinness: int) -> None:
    """Uniform on ``[0, s]²`` (``s = 2^exponent``, 1e-12 … 1e12), class 0 on the band
    ``|x0 + x1 − c s| <= h s`` with ``h = 2^-thinness`` (down to 1e-12 of the square): the
    probability is the exact rational ``1 − area``, and the same at every scale (float64
    rounding aside: Qhull's vertices differ in the last bit)."""
    scale = math.ldexp(1.0, exponent)
    c = Fraction(centre, 128)
    h = Fraction(1, 2 ** thinness)
    prior = Product(factors=[Factor(columns=[f"x{i}"], distribution=Uniform(lower=0.0,
                                                                             upper=scale))
                             for i in range(2)])
    net = band_network([1.0, 1.0], float(c) * scale, float(h) * scale)
    result = local_robustness(net, prior, [0.0, 0.0], 4 * scale, expected_class=1)
    truth = 1 - band_area(c - h, c + h)
    assert float(truth) == pytest.approx(result.probability, rel=FLOAT_ROUNDING, abs=1e-15)
    unit = local_robustness(band_network([1.0, 1.0], float(c), float(h)),
                            Product(factors=[Factor(columns=[f"x{i}"],
                                                    distribution=Uniform(lower=0.0, upper=1.0))
                                             for i in range(2)]),
                            [0.0, 0.0], 4.0, expected_class=1)
    assert result.probability == pytest.approx(unit.probability, rel=FLOAT_ROUNDING)
    assert result.exact == unit.exact


@settings(max_examples=25, deadline=None)
@given(scale_exponent=st.floats(-12, 12), offset=st.floats(-2, 2),
       thin=st.floats(-3, 0), centre=st.floats(-2, 2), epsilon=st.floats(0.5, 12))
def test_a_thin_cell_under_a_normal_prior_contains_the_closed_form(
        scale_exponent: float, offset: float, thin: float, centre: float,
        epsilon: float) -> None:
    """``N(μ s, s²)`` with ``s = 10^scale_exponent``, class 0 on ``|x − (μ + offset) s| <= 10^thin
    s``, the ball ``centre s ± epsilon s`` read with label 1: the certified interval holds the
    mpmath closed form at every scale."""
    scale = 10.0 ** scale_exponent
    mean, std = 0.3 * scale, scale
    middle, half = (0.3 + offset) * scale, 10.0 ** thin * scale
    prior = one_column(Normal(mean=mean, std=std))
    net = band_network([1.0], middle, half)
    result = local_robustness(net, prior, [centre * scale], epsilon * scale, expected_class=1,
                              timeout_s=30, tolerance=1e-5)
    lo, hi = (centre - epsilon) * scale, (centre + epsilon) * scale
    inside = normal_mass(max(lo, middle - half), min(hi, middle + half), mean, std)
    truth = 1 - inside / normal_mass(lo, hi, mean, std)
    assert contains(result, truth)
    assert result.probability_upper - result.probability_lower <= 2e-5


@settings(max_examples=15, deadline=None)
@given(scale_exponent=st.floats(-12, 12), spike=st.floats(-9, -3))
def test_a_heavy_spike_of_a_mixture_is_counted_at_every_scale(scale_exponent: float,
                                                              spike: float) -> None:
    """Half the mass in a spike ``N(0, (10^spike s)²)`` on top of ``N(0, s²)``: class 0 on
    ``|x| <= 2 · 10^spike s`` holds about half the mass in a cell ``10^spike`` times thinner
    than the prior's core, and the interval holds the closed form."""
    scale = 10.0 ** scale_exponent
    narrow = 10.0 ** spike * scale
    prior = one_column(Mixture(weights=[0.5, 0.5],
                               components=[Normal(mean=0.0, std=scale),
                                           Normal(mean=0.0, std=narrow)]))
    net = band_network([1.0], 0.0, 2 * narrow)
    result = local_robustness(net, prior, [5 * scale], 20 * scale, expected_class=1, timeout_s=60,
                              tolerance=1e-3)
    lo, hi = -15 * scale, 25 * scale
    inside = (normal_mass(-2 * narrow, 2 * narrow, 0.0, scale)
              + normal_mass(-2 * narrow, 2 * narrow, 0.0, narrow)) / 2
    box = (normal_mass(lo, hi, 0.0, scale) + normal_mass(lo, hi, 0.0, narrow)) / 2
    truth = 1 - inside / box
    assert 0.5 < truth < 0.55
    assert contains(result, truth)


@settings(max_examples=40, deadline=None)
@given(exponent=st.integers(-40, 40), skew=st.floats(-1, 1), gap=st.integers(-60, 0),
       sign=st.sampled_from([-1, 0, 1]))
def test_a_sliver_is_kept_or_proven_empty_by_its_exact_rows(exponent: int, skew: float,
                                                            gap: int, sign: int) -> None:
    """A triangle in its box cut by ``a·z <= c`` and ``−a·z <= −c + g``, ``g = sign · 2^gap
    s`` (taken exactly as the float rows say): a sliver (``g > 0``) is never dropped, a segment
    (``g = 0``) is proven of measure zero, an empty cell (``g < 0``) is dropped or bounded by
    a slab of its (negative) width's size."""
    scale = math.ldexp(1.0, exponent)
    a = np.array([1.0, skew])
    c = 0.25 * scale
    # the root box's rows (every region keeps them), the triangle's edge, the two cuts
    A = np.array([[-1.0, 0.0], [0.0, -1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], a, -a])
    b = np.array([0.0, 0.0, scale, scale, scale, c, -c + sign * math.ldexp(1.0, gap) * scale])
    g = Fraction(float(b[5])) + Fraction(float(b[6]))
    poly = make_polytope(A, b)
    if g > 0:
        assert poly is not None
    if g == 0:
        assert poly is None
    if isinstance(poly, Undecided):
        assert poly.volume <= 4 * abs(float(g)) * scale


def test_volume_bound_is_zero_only_for_a_proven_measure_zero_cell() -> None:
    """``{z0 <= c, −z0 <= −c}`` in a box is a segment (bound 0); widened by one ulp of c it
    has an interior and a positive bound."""
    c = 0.1
    lower, upper = np.array([0.0, 0.0]), np.array([1.0, 1.0])
    A = np.array([[1.0, 0.0], [-1.0, 0.0]])
    y = np.array([0.5, 0.5])
    assert volume_bound(A, np.array([c, -c]), y, lower, upper) == 0.0
    wider = np.array([np.nextafter(c, 1.0), -c])
    assert volume_bound(A, wider, y, lower, upper) > 0.0


def test_a_proven_box_from_overflowing_multipliers_is_the_given_box_not_nan() -> None:
    """Multipliers near the float range (an LP on a column scaled by 1e300) overflow the
    weak-duality sums to ``inf − inf``; the box must then be the propagated one, which holds
    the region ``{z ∈ [0, 1] : 1e10·z <= 1e10, −z <= 0}`` = [0, 1], never NaN ends."""
    from verifier.wmi.interior import safe_box

    A, b = np.array([[1e10], [-1.0]]), np.array([1e10, 0.0])
    lower, upper = safe_box(A, b, np.array([[[1e300, 0.0], [1e300, 0.0]]]), np.array([0.0]),
                            np.array([1.0]))
    assert lower[0] <= 0.0 and upper[0] >= 1.0
