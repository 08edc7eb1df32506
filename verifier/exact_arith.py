"""Rigorous bounds of linear forms over boxes, exact whenever float64 arithmetic is exact, and
exact rational evaluation of a network at a point (:func:`exact_outputs`).

Input atoms such as ``x.sex >= 1`` must be decided *exactly* on the point box ``sex = 1``:
a blanket rounding margin would leave ``0 >= 0`` undecided forever. Here every product and
every addition is accompanied by its exact rounding error (error-free transformations:
Veltkamp–Dekker ``TwoProduct`` and Knuth's ``TwoSum``), so the computed value plus the sum of
the errors is the exact real result. The returned bounds widen the value by twice the sum of
the absolute errors (then one ulp): no widening at all when every step was exact, a rigorous
one otherwise. Valid for finite operands and products below ~1e290 in magnitude (Veltkamp
splitting must not overflow); where an operand or the product is larger, the product's error
falls back to the relative margin :data:`~verifier.numerics.FUNCTION_REL_MARGIN` (1e-12). Products
smaller than ~1e-280 (where splitting underflows) use the rigorous bound
``2⁻⁵³·|product| + 2⁻¹⁰⁷⁴`` on their rounding error instead of the computed one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from verifier.network import Layer, Network, NetworkError
from verifier.numerics import FUNCTION_REL_MARGIN, down_array, two_product, two_sum, up_array

_SAFE = 1e290
_TINY = 1e-280


def linear_form_bounds(
    coeffs: np.ndarray, constants: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sound ``[min, max]`` of ``coeffs[a]·x + constants[a]`` over every box, shape (B, A).

    Exact (no widening) when every product and sum is exact in float64. Infinite box sides
    give infinite bounds only through non-zero coefficients; a finite form whose products or
    sums overflow gets the infinity on the bound's own side (``−∞`` below, ``+∞`` above).
    """
    coeffs = np.asarray(coeffs, dtype=np.float64)
    constants = np.asarray(constants, dtype=np.float64)
    count, forms = lower.shape[0], coeffs.shape[0]
    result = []
    for minimise in (True, False):
        value = np.broadcast_to(constants, (count, forms)).copy()
        error_mass = np.zeros((count, forms))
        minus_inf = np.zeros((count, forms), dtype=bool)
        plus_inf = np.zeros((count, forms), dtype=bool)
        for column in range(coeffs.shape[1]):
            c = coeffs[:, column][None, :]
            if not c.any():
                continue
            # the corner that minimises (or maximises) c·x
            take_low = (c > 0) if minimise else (c < 0)
            corner = np.where(take_low, lower[:, column : column + 1],
                              upper[:, column : column + 1])
            active = c != 0
            infinite = active & ~np.isfinite(corner)
            term_sign = np.sign(c) * np.sign(corner)
            minus_inf |= infinite & (term_sign < 0)
            plus_inf |= infinite & (term_sign > 0)
            finite_corner = np.where(infinite | ~active, 0.0, corner)
            product, product_error = two_product(np.broadcast_to(c, finite_corner.shape),
                                                 finite_corner)
            tiny = (np.abs(product) < _TINY) & (finite_corner != 0)
            # TwoProduct needs both operands and the product below _SAFE (Veltkamp's split
            # of 2e300 overflows even where the product, 8e-320·2e300, is small): beyond it
            # the correctly rounded product's own error bound
            large = ((np.abs(finite_corner) > _SAFE) | (np.abs(c) > _SAFE)
                     | (np.abs(product) > _SAFE))
            product_error = np.where(
                tiny, 2.0**-53 * np.abs(product) + 2.0**-1074,
                np.where(large, FUNCTION_REL_MARGIN * np.abs(product), product_error))
            value, sum_error = two_sum(value, product)
            error_mass += np.abs(product_error) + np.abs(sum_error)
        # an overflow (a product or sum beyond the float range, inf − inf) widens to the
        # infinity on the bound's own side, never to the other one
        margin = np.where(np.isnan(error_mass) | np.isnan(value), np.inf, 2.0 * error_mass)
        if minimise:
            bound = np.where(margin > 0, down_array(value - margin), value)
            bound = np.where(np.isnan(bound) | (bound == np.inf), -np.inf, bound)
        else:
            bound = np.where(margin > 0, up_array(value + margin), value)
            bound = np.where(np.isnan(bound) | (bound == -np.inf), np.inf, bound)
        bound = np.where(minus_inf, -np.inf, bound)
        bound = np.where(plus_inf, np.inf, bound)
        result.append(bound)
    return result[0], result[1]


def exact_outputs(network: Network, x: Sequence[float | Fraction]) -> list[Fraction]:
    """The network's outputs at the point ``x`` in exact rational arithmetic.

    Every float weight, bias, slope, clamp bound and coordinate is exactly a rational, so
    this is the network's real-arithmetic value, free of rounding. Each layer's values are
    integers over one common denominator (floats are dyadic: integers over powers of two),
    so the work is integer products and sums, without a rational normalisation per
    operation (still slow next to float: for deciding a few points where float evaluation
    cannot, e.g. ties and witnesses).

    Raises:
        NetworkError: the network has a classifier head (not rational); evaluate its
            :meth:`~Network.logits` or :meth:`~Network.as_classifier` view.
    """
    if network.head != "none":
        raise NetworkError(
            f"exact evaluation reads rational outputs, but the network ends in a {network.head} "
            "head; evaluate its logits() or as_classifier() view"
        )
    values = [v if isinstance(v, Fraction) else Fraction(float(v)) for v in x]
    denominator = math.lcm(1, *(v.denominator for v in values))
    numerators = [v.numerator * (denominator // v.denominator) for v in values]
    for layer in network.layers:
        numerators, denominator = _exact_layer(layer, numerators, denominator)
    return [Fraction(n, denominator) for n in numerators]


def _dyadic(values: Sequence[float]) -> tuple[list[int], int]:
    """Integers ``m`` and one power of two ``scale`` with ``values[i] == m[i] / scale``
    exactly."""
    ratios = [float(v).as_integer_ratio() for v in values]
    scale = max((d for _, d in ratios), default=1)
    return [n * (scale // d) for n, d in ratios], scale


@functools.lru_cache(maxsize=256)
def _dyadic_matrix(data: bytes) -> tuple[list[int], int]:
    """:func:`_dyadic` of a weight matrix's float64 bytes (row-major), converted once per
    matrix: a witness check evaluates the same layers at many points."""
    return _dyadic(np.frombuffer(data, dtype=np.float64))


def _exact_layer(layer: Layer, numerators: list[int], denominator: int
                 ) -> tuple[list[int], int]:
    """``layer`` applied exactly to the values ``numerators / denominator``; the outputs over
    their own common denominator (reduced by the numerators' common factor)."""
    weights, weight_scale = _dyadic_matrix(np.asarray(layer.weight, dtype=np.float64).tobytes())
    biases, bias_scale = _dyadic(layer.bias)
    width = layer.weight.shape[1]
    products_scale = weight_scale * denominator
    scale = math.lcm(products_scale, bias_scale)
    up, bias_up = scale // products_scale, scale // bias_scale
    outputs = []
    for i, bias in enumerate(biases):
        row = weights[i * width : (i + 1) * width]
        total = sum(w * v for w, v in zip(row, numerators, strict=True) if w)
        outputs.append(total * up + bias * bias_up)
    outputs, scale = _exact_activation(layer, outputs, scale)
    common = math.gcd(scale, *outputs)
    return [z // common for z in outputs], scale // common


def _exact_activation(layer: Layer, values: list[int], scale: int) -> tuple[list[int], int]:
    """The activation applied exactly to ``values / scale``."""
    if layer.activation == "none":
        return values, scale
    if layer.activation == "hardtanh":
        (low, high), bound_scale = _dyadic([layer.min_val, layer.max_val])
        common = math.lcm(scale, bound_scale)
        up, bound_up = common // scale, common // bound_scale
        low, high = low * bound_up, high * bound_up
        return [min(max(z * up, low), high) for z in values], common
    slopes, slope_scale = _dyadic(layer.negative_slope_effective)
    return [z * slope_scale if z >= 0 else z * slope
            for z, slope in zip(values, slopes, strict=True)], scale * slope_scale


def exact_linear_value(
    output_coeffs: Sequence[float], input_coeffs: Sequence[float], constant: float,
    outputs: Sequence[Fraction], x: Sequence[float],
) -> Fraction:
    """``output_coeffs·y + input_coeffs·x + constant`` exactly (``y`` = ``outputs``; zero
    coefficients are skipped, so ``outputs`` may be empty when no output coefficient is
    non-zero)."""
    total = Fraction(float(constant))
    for coeffs, values in ((output_coeffs, outputs), (input_coeffs, x)):
        for c, v in zip(coeffs, values, strict=False):
            if c != 0.0:
                total += Fraction(float(c)) * (v if isinstance(v, Fraction) else Fraction(float(v)))
    return total
