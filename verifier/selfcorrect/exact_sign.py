"""The exact sign of ``a·x − b`` for float64 ``a``, ``x``, ``b``, in torch operations only.

Used by the SC-layer's linear preconditions so that the layer, its TorchScript export and any
check of the wrapped model decide ``a·x <= b`` identically, in real arithmetic. The fast path
decides every row whose float dot product is farther from ``b`` than a rigorous bound on its
rounding error; the rest (points within rounding of the hyperplane, exact ties included) are
decided by error-free transformations: every product is split into ``p + e`` exactly
(Veltkamp–Dekker), and the terms are distilled by cascades of ``TwoSum`` until the leading sum
dominates what is left, which then fixes the sign exactly.

Domain: every non-zero product ``|a_i·x_i|`` in ``[2⁻⁹³⁰, 2⁹⁹⁵]`` and every partial sum finite,
where the transformations are exact; a row outside it within rounding of its hyperplane
raises :class:`ExactSignRangeError` rather than guess. A float dot product that overflows
(``∞ − ∞`` is NaN) counts as within rounding, so such a row is refused too, never read as a
sign.

Infinite coordinates are read in the extended reals: a coordinate whose coefficient is 0 is
not part of the form (``0·∞`` counts as 0, not NaN), and ``a_i·x_i = ±∞`` otherwise; the sign
is that of the infinite terms when they agree, the exact finite sign when there are none, and
a row whose infinite terms have both signs (``∞ − ∞``) raises :class:`ExactSignRangeError`.
"""

import torch
from torch import Tensor

from verifier.errors import CertgateInputError

# Constants are written out in the functions (TorchScript compiles no module globals):
# Veltkamp's splitter 2**27 + 1 = 134217729.0; products exact in [2**-930, 2**995]; unit
# roundoff 2**-53; at most 256 distillation passes (each shrinks the remainder by ~2**-52).


class ExactSignRangeError(CertgateInputError):
    """A point within rounding of a linear precondition lies outside the exact domain."""


def _split(a: Tensor) -> tuple[Tensor, Tensor]:
    scaled = 134217729.0 * a
    high = scaled - (scaled - a)
    return high, a - high


def _two_product(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    product = a * b
    a_high, a_low = _split(a)
    b_high, b_low = _split(b)
    error = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
    return product, error


def _two_sum(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    total = a + b
    virtual = total - a
    return total, (a - (total - virtual)) + (b - virtual)


def _distilled_sign(terms: Tensor) -> Tensor:
    """Exact sign of every row's sum of (exact float) ``terms``, ``(R, T)`` -> ``(R,)``."""
    sign = torch.zeros(terms.shape[0], dtype=torch.float64)
    open_rows = torch.arange(terms.shape[0])
    for _ in range(256):
        if open_rows.numel() == 0:
            return sign
        total = torch.zeros(terms.shape[0], dtype=torch.float64)
        errors = torch.zeros_like(terms)
        for column in range(terms.shape[1]):
            total, errors[:, column] = _two_sum(total, terms[:, column])
        if not bool(torch.isfinite(total).all()):
            raise ExactSignRangeError("a partial sum of a linear precondition overflowed")
        rest = errors.abs().sum(dim=1)
        done = (rest == 0) | (total.abs() > 4.0 * rest)
        sign[open_rows[done]] = torch.sign(total[done])
        keep = ~done
        open_rows = open_rows[keep]
        terms = torch.cat([errors[keep], total[keep].unsqueeze(1)], dim=1)
    raise ExactSignRangeError("the exact sign of a linear precondition did not converge")


def exact_linear_sign(x: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``sign(a_j·x_r − b_j)`` in real arithmetic for every row ``r`` of ``x`` ``(B, n)`` and
    atom ``j`` of ``a`` ``(J, n)``, ``b`` ``(J,)``: a ``(B, J)`` float64 tensor in {−1, 0, 1}
    (infinite coordinates in the extended reals, module docstring). ``x`` holds no NaN."""
    x = x.to(torch.float64)
    infinite = torch.isinf(x)
    if not bool(infinite.any()):
        return _finite_sign(x, a, b)
    sign = _finite_sign(x.masked_fill(infinite, 0.0), a, b)
    read = (a != 0.0).unsqueeze(0)
    up = (read & (((x == float("inf")).unsqueeze(1) & (a > 0.0).unsqueeze(0))
                  | ((x == float("-inf")).unsqueeze(1) & (a < 0.0).unsqueeze(0)))).any(dim=2)
    down = (read & (((x == float("inf")).unsqueeze(1) & (a < 0.0).unsqueeze(0))
                    | ((x == float("-inf")).unsqueeze(1) & (a > 0.0).unsqueeze(0)))).any(dim=2)
    if bool((up & down).any()):
        raise ExactSignRangeError(
            "an input row has infinite values whose terms in a linear precondition have both "
            "signs (inf - inf): the precondition is undefined there"
        )
    return torch.where(up, torch.ones_like(sign), torch.where(down, -torch.ones_like(sign), sign))


def _finite_sign(x: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """:func:`exact_linear_sign` for finite ``x``."""
    n = x.shape[1]
    difference = x @ a.t() - b
    magnitude = x.abs() @ a.abs().t() + b.abs()
    rounding = float(n + 2) * 2.0**-52 * magnitude + float(n + 2) * 2.0**-1070
    sign = torch.sign(difference)
    # NaN-safe: an overflowed dot product (inf - inf) is "near" and goes to the exact path,
    # whose range check refuses it
    near = ~(difference.abs() > rounding)
    if not bool(near.any()):
        return sign
    pairs = torch.nonzero(near)
    rows, atoms = pairs[:, 0], pairs[:, 1]
    products, errors = _two_product(x.index_select(0, rows), a.index_select(0, atoms))
    size = products.abs()
    if bool(((size > 2.0**995) | ((size < 2.0**-930) & (size > 0))).any()):
        raise ExactSignRangeError(
            "a point lies within rounding of a linear precondition and a product a_i*x_i is "
            "outside [2^-930, 2^995], where it cannot be decided exactly"
        )
    terms = torch.cat([products, errors, -b.index_select(0, atoms).unsqueeze(1)], dim=1)
    sign[rows, atoms] = _distilled_sign(terms)
    return sign
