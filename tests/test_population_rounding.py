"""The enclosure arithmetic of population models (``verifier.population.rounding``) against
exact rational arithmetic, down into the subnormal range where a float product underflows."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from verifier.population.rounding import Enclosure, product, weighted_sum

# probabilities from 1 down to far below the smallest normal float, and exact zeros
PROBABILITIES = st.one_of(
    st.just(0.0),
    st.floats(min_value=0.0, max_value=1.0),
    st.builds(lambda m, e: m * 2.0 ** -e, st.floats(0.5, 1.0), st.integers(300, 1074)),
)


def _exact(values: list[float]) -> Enclosure:
    array = np.asarray(values, dtype=np.float64)
    return Enclosure.exact(array)


@given(st.lists(PROBABILITIES, min_size=1, max_size=6))
def test_product_encloses_the_exact_product(factors: list[float]) -> None:
    enclosure = product([_exact([value]) for value in factors])
    truth = Fraction(1)
    for value in factors:
        truth *= Fraction(value)
    assert Fraction(float(enclosure.lower[0])) <= truth <= Fraction(float(enclosure.upper[0]))
    assert (float(enclosure.upper[0]) == 0.0) == (truth == 0)


@given(st.lists(st.tuples(PROBABILITIES, PROBABILITIES), min_size=1, max_size=6))
def test_weighted_sum_encloses_the_exact_sum(terms: list[tuple[float, float]]) -> None:
    weights = np.asarray([weight for weight, _ in terms], dtype=np.float64)
    parts = _exact([part for _, part in terms])
    enclosure = weighted_sum(weights, parts)
    truth = sum((Fraction(weight) * Fraction(part) for weight, part in terms), Fraction(0))
    assert Fraction(float(enclosure.lower)) <= min(truth, Fraction(1))
    assert min(truth, Fraction(1)) <= Fraction(float(enclosure.upper))
    assert (float(enclosure.upper) == 0.0) == (truth == 0)


def test_a_product_that_underflows_is_not_an_exact_zero() -> None:
    tiny = _exact([1e-200])
    enclosure = product([tiny, tiny])
    assert float(enclosure.value[0]) == 0.0 and float(enclosure.lower[0]) == 0.0
    assert float(enclosure.upper[0]) > 0.0
