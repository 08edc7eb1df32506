"""When CROWN's intermediate rows may be back-substituted in float32, and the margin that
keeps them sound there.

CROWN's intermediate rows (the pre-activation bounds of a hidden layer's unstable neurons)
are most of the work of bounding a box on a network with two or more hidden layers; in
float32 they take about two thirds of the time (half the memory traffic, twice the SIMD
width). Their result is a lower bound of a real sum of products, so any evaluation error is
sound once the margin covers it. The argument is the float64 one of
:mod:`verifier.bounds` with float32's unit roundoff ``u = 2⁻²⁴``:

* *Rounding.* Every value in the evaluation of a row — the casts of the weights, biases,
  relaxation coefficients and layer bounds to float32, the midpoints and radii, every
  product and every sum, whatever the order of summation — is a sum of products whose real
  terms have absolute values adding up to at most the row's *magnitude* ``M`` (see
  ``_Magnitudes`` in :mod:`verifier.bounds.intermediate`). A float evaluation in which each
  term meets at most ``n`` roundings is within ``γ_n·M`` of the real value,
  ``γ_n = n·u / (1 − n·u)``; ``n`` counts, per layer down to the input, its fan-in
  plus 8 (casts, the relaxation's product and intercept, the midpoint and radius), plus
  twice the input width, the one-hot groups and 16
  (:func:`verifier.numerics.rounding.network_roundings`, the count of the float64 rows'
  margin too). The margin is ``2·γ_n·M``: the factor 2 also covers the float64 evaluation
  of ``M`` itself.
* *Folds.* A network whose folds left ``F`` float64 roundings in its coefficients
  (:attr:`verifier.network.Network.fold_roundings`) adds ``⌈F / 2²⁹⌉`` to ``n``: a float64
  ``θ_F`` is at most ``F·2⁻⁵³ = (F/2²⁹)·2⁻²⁴``, a float32 ``θ`` of that many roundings. A
  network with a folded layer not counted (``F`` is ``None``) adds one rounding: its float64
  bounds take the flat relative margin :data:`~verifier.numerics.SOUNDNESS_REL_MARGIN`
  (``1e-9``) for the fold, and one float32 rounding, ``2⁻²⁴ ≈ 6e-8``, is more.
* *Range.* Rows go to float32 only when every weight, bias, intercept, layer bound,
  magnitude and every coefficient a row can reach (the weights' column sums times the
  slopes, composed) and its product with a layer bound stay below ``2⁶⁰``: no product of two
  such values, and no partial sum, can overflow float32's ``2¹²⁸``.
* *Underflow.* A product that underflows is off by at most ``2⁻¹⁵⁰`` absolutely, scaled
  afterwards by at most the largest composed coefficient times the largest layer bound;
  their number is at most the product of the fan-ins (plus 2 each) times the input width
  (plus the groups and 4). Twice that total is added to the absolute margin, and rows go to
  float32 only when it stays below the absolute margin itself.
* *Structural zeros.* A row whose real terms are all zero (``M = 0`` and no term may be
  non-zero) is exactly zero in float32 as in float64: no margin.

Outside these conditions the rows stay in float64; the bounds are sound either way. Which
rows go to float32 (the last hidden layer's, where the margin is small beside the row's
width) is decided in :mod:`verifier.bounds.intermediate`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from verifier.arrays import Array, astype, namespace, size
from verifier.numerics import network_roundings
from verifier.numerics.tensor import up_tensor

UNIT = 2.0**-24
RANGE = 2.0**60
UNDERFLOW = 2.0**-150
MAX_UNIT_SHARE = 1.0 / 64.0  # n·u above this: float32 is too coarse for the row's depth


def _largest(tensors: Sequence[Array | None]) -> float:
    """The largest absolute entry over the arrays (0 for none)."""
    values = [float(namespace(t).abs(t).max()) for t in tensors if t is not None and size(t)]
    return max(values, default=0.0)


def _largest_product(factors: Sequence[float]) -> float:
    """The largest product of consecutive factors (1 for the empty run)."""
    best = 1.0
    for start in range(len(factors)):
        product = 1.0
        for factor in factors[start:]:
            product *= factor
            best = max(best, product)
    return best


def single_margins(
    weights: Sequence[Array], biases: Sequence[Array],
    slope_bounds: Sequence[Array | None], intercepts: Sequence[Array | None],
    bounds: Sequence[Array], groups: int, magnitude: Array,
    support: Array, abs_margin: float, fold_roundings: int | None = 0,
) -> Array | None:
    """Float32 margins of a hidden layer's rows back-substituted in float32, or ``None`` when
    float32 is not safe for them (see the module docstring).

    ``weights``/``biases``: the affine maps from the input up to the layer (the layer's own
    last); ``slope_bounds[j]``/``intercepts[j]``: bounds of the relaxation slopes and its
    upper intercepts after map ``j`` (``None`` without activation; one fewer than the maps);
    ``bounds``: the bounds of every map's input (the box first), lower and upper alike;
    ``groups``: the number of one-hot groups; ``magnitude``/``support``: per box and neuron
    of the layer, the magnitude of its real terms and whether some may be non-zero;
    ``fold_roundings``: the network's float64 fold count (``None``: a fold not counted;
    module docstring). Each
    returned margin is at least ``2·γ_n·M`` plus the absolute margin, rounded up to float32
    (numpy arrays or torch tensors, as given).
    """
    xp = namespace(magnitude)
    width = weights[0].shape[1]
    folds = 1 if fold_roundings is None else math.ceil(fold_roundings / 2**29)
    roundings = network_roundings([w.shape[1] for w in weights], width, groups) + folds
    if roundings * UNIT > MAX_UNIT_SHARE:
        return None
    gamma = roundings * UNIT / (1.0 - roundings * UNIT)
    factors = [_largest([weights[-1]])]
    for weight, slopes in zip(reversed(weights[:-1]), reversed(slope_bounds), strict=True):
        slope = 1.0 if slopes is None else max(1.0, _largest([slopes]))
        factors.append(slope * float(xp.sum(xp.abs(weight), axis=0).max()))
    coefficient = _largest_product(factors)
    layer_bound = max(1.0, _largest(bounds))
    largest = max(
        _largest(weights), _largest(biases), _largest(intercepts), layer_bound,
        float(magnitude.max()) if size(magnitude) else 0.0, coefficient * layer_bound,
    )
    if not math.isfinite(largest) or largest > RANGE:
        return None
    products = math.prod(w.shape[1] + 2 for w in weights) * (width + groups + 4)
    underflow = 2.0 * products * UNDERFLOW * coefficient * layer_bound
    if underflow > abs_margin:
        return None
    margin = 2.0 * gamma * magnitude + (abs_margin + underflow)
    margin = xp.where((magnitude == 0) & (support == 0), 0.0, margin)
    single = astype(margin, xp.float32)
    short = astype(single, xp.float64) < margin
    return xp.where(short, up_tensor(single), single)
