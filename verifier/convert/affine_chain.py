"""Build the IR from a chain of affine maps and activations, in the order a model applies them.

Every converter walks its source (a torch ``Sequential``, an fx graph, an ONNX graph, a JSON
document) and tells an :class:`AffineChain` what happens to the one tensor that flows through
the model. The chain keeps the tensor's per-sample feature shape (the batch dimension is never
part of it) and a *pending* affine map: every affine operation since the last activation
(Linear, BatchNorm in eval mode, constant shifts and scales, reshapes) is composed into it, so
consecutive affine maps become one IR layer, and the next activation closes that layer. An
activation with nothing pending gets an identity affine layer.

Features are the C-order flattening of the feature shape, which is what ``Flatten`` and
``Reshape`` in torch and ONNX do; a reshape therefore only relabels the shape.

A classifier head (a final sigmoid, softmax or log-softmax; :data:`verifier.network.HEADS`) is
recorded by :meth:`AffineChain.head` and becomes the network's ``head``. It is read only as
the last operation: reshapes (which only relabel) may follow it, any other operation is an
error naming the head's layer or node.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

import numpy as np

from verifier.network import NORMAL_PRODUCT, HeadName, Layer, Network, NetworkError, fold_affine
from verifier.numerics import SMALLEST_SUBNORMAL, gamma, two_product, widened_up

_SAFE_LOW, _SAFE_HIGH = 1e-280, 1e290
"""Where :func:`~verifier.numerics.two_product` is error-free: products and operands whose
magnitudes lie in this range (zeros are exact anyway); others are checked in rationals."""


def exact_product(a: np.ndarray | float, b: np.ndarray | float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(a·b in float64, whether that float is the real product)``, broadcast."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    a, b = (np.broadcast_to(np.asarray(v, np.float64), shape).reshape(-1) for v in (a, b))
    with np.errstate(all="ignore"):
        product, error = two_product(a, b)
    exact = (error == 0.0) & np.isfinite(product)
    sizes = np.abs(np.stack([a, b, product]))
    unsafe = ((sizes > _SAFE_HIGH) | ((sizes < _SAFE_LOW) & (sizes > 0.0))).any(axis=0)
    for i in np.flatnonzero(unsafe):
        exact[i] = bool(np.isfinite(product[i])) and Fraction(
            float(product[i])) == Fraction(float(a[i])) * Fraction(float(b[i]))
    return product.reshape(shape), exact.reshape(shape)


def computed_magnitudes(value: np.ndarray, exact: np.ndarray,
                        terms: np.ndarray | None = None, roundings: int = 1) -> np.ndarray:
    """Magnitudes of coefficients the chain computes in float from the model's constants (a
    reciprocal, a scaled weight, a batch norm's scale and shift), as :class:`Layer` takes
    them: ``|value|`` where ``exact`` (the float is the real coefficient); elsewhere strictly
    above both ``|value|`` and ``terms`` (the absolute values of the real terms the coefficient
    is a sum of; default ``|value|``) by ``γ_roundings``, at least the smallest subnormal. A
    magnitude above its coefficient's absolute value makes :attr:`Network.folded` true: the IR
    then holds a rounded stand-in for the model's real coefficient, which exact evaluation
    never reads as the model's and the bound propagators cover with their rounding margin."""
    absolute = np.abs(value)
    largest = absolute if terms is None else np.maximum(absolute, terms)
    raised = np.maximum(widened_up(largest, gamma(roundings)), SMALLEST_SUBNORMAL)
    return np.where(exact, absolute, raised)


def counted(roundings: int, *results: np.ndarray | float) -> int | None:
    """``roundings`` when every non-zero float ``result`` of a product or quotient is at
    least :data:`~verifier.network.NORMAL_PRODUCT` in absolute value (its real value is then
    a normal float and its rounding relative: no underflow), else ``None``: the count a
    :class:`Layer` of coefficients computed with at most ``roundings`` roundings each carries
    (``fold_roundings``)."""
    for result in results:
        size = np.abs(np.asarray(result, dtype=np.float64))
        if ((size > 0) & (size < NORMAL_PRODUCT)).any():
            return None
    return roundings


def _batch_norm_exact(mean: np.ndarray, variance: np.ndarray, gain: np.ndarray, beta: np.ndarray,
                      eps: float, scale: np.ndarray, shift: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Per channel, in rationals: whether ``scale`` is the real ``gain / sqrt(variance + eps)``
    (same sign, and ``scale²·(variance + eps) = gain²``) and ``shift`` the real
    ``beta − mean·scale`` (where the scale is, or the mean is 0)."""
    scale_exact = np.zeros(scale.shape, dtype=bool)
    shift_exact = np.zeros(shift.shape, dtype=bool)
    for c in range(scale.size):
        s, g = Fraction(float(scale[c])), Fraction(float(gain[c]))
        scale_exact[c] = (s > 0) == (g > 0) and s * s * (Fraction(float(variance[c]))
                                                        + Fraction(eps)) == g * g
        shift_exact[c] = (scale_exact[c] or mean[c] == 0.0) and Fraction(float(shift[c])) == (
            Fraction(float(beta[c])) - Fraction(float(mean[c])) * s)
    return scale_exact, shift_exact


class AffineChain:
    """Accumulates ``activation(W·h + b)`` layers for a single flowing tensor.

    ``feature_shape`` is the per-sample shape of the model input, or ``None`` when the
    converter learns it from the first operation that fixes it (a Linear layer's input width,
    a BatchNorm's feature count, a constant's shape). ``scalar_dtype`` is the float type the
    source model computes in: a kernel reads a scalar given as a Python float (a LeakyReLU
    slope, a Hardtanh bound) in that type (:meth:`kernel_scalar`).
    """

    def __init__(self, feature_shape: Sequence[int] | None = None,
                 scalar_dtype: type[np.floating] = np.float64) -> None:
        self.scalar_dtype = scalar_dtype
        self.rounded_scalars = False
        self.input_shape: tuple[int, ...] | None = None
        self.shape: tuple[int, ...] | None = None
        self.layers: list[Layer] = []
        self._pending: Layer | None = None  # affine map (no activation) not yet closed
        self._head: HeadName = "none"
        self._head_where = ""
        if feature_shape is not None:
            self._fix_shape(tuple(int(size) for size in feature_shape))

    # -- shape -------------------------------------------------------------------------------

    def _fix_shape(self, shape: tuple[int, ...]) -> None:
        if any(size <= 0 for size in shape):
            raise NetworkError(f"feature shape {shape} has a non-positive dimension")
        if self.input_shape is None:
            self.input_shape = shape
        self.shape = shape

    @property
    def known(self) -> bool:
        """Whether the feature shape is known yet."""
        return self.shape is not None

    @property
    def width(self) -> int:
        """Number of features of the flowing tensor."""
        return math.prod(self._require_shape("this operation"))

    def _require_shape(self, what: str) -> tuple[int, ...]:
        if self.shape is None:
            raise NetworkError(
                f"cannot apply {what} before the model's input size is known; pass the input "
                "size (input_shape=...) to the converter"
            )
        return self.shape

    def assume_shape(self, shape: Sequence[int], what: str) -> None:
        """Fix the feature shape if still unknown, else check that it matches."""
        shape = tuple(int(size) for size in shape)
        if self.shape is None:
            self._fix_shape(shape)
        elif math.prod(self.shape) != math.prod(shape):
            raise NetworkError(
                f"{what} expects {math.prod(shape)} features {shape}, but the tensor reaching it "
                f"has {self.width} {self.shape}"
            )

    # -- affine operations --------------------------------------------------------------------

    def affine(self, weight: np.ndarray, bias: np.ndarray | None, out_shape: Sequence[int],
               weight_magnitude: np.ndarray | None = None,
               bias_magnitude: np.ndarray | None = None, roundings: int | None = None) -> None:
        """Compose ``h ↦ weight @ h + bias`` on the flattened features; the result has
        ``out_shape``. The magnitudes (:class:`Layer`'s; default the absolute values: the
        coefficients are the model's own) mark coefficients computed in float, and
        ``roundings`` is their count (:class:`Layer`'s ``fold_roundings``; ``None``: not
        counted)."""
        weight = np.asarray(weight, dtype=np.float64)
        out_shape = tuple(int(size) for size in out_shape)
        if self.shape is None:
            self._fix_shape((weight.shape[1],))
        if weight.shape != (math.prod(out_shape), self.width):
            raise NetworkError(
                f"affine map of shape {weight.shape} does not fit {self.width} input features "
                f"and output shape {out_shape}"
            )
        bias_vector = (
            np.zeros(weight.shape[0])
            if bias is None
            else np.broadcast_to(np.asarray(bias, dtype=np.float64).reshape(-1), weight.shape[:1])
        )
        self._then(Layer(weight.copy(), bias_vector.copy(), weight_magnitude=weight_magnitude,
                         bias_magnitude=bias_magnitude, fold_roundings=roundings))
        self.shape = out_shape

    def _then(self, step: Layer) -> None:
        """Compose the affine map ``step`` after the pending one (folded, with magnitudes)."""
        self._refuse_after_head()
        self._pending = step if self._pending is None else Layer(**fold_affine(step, self._pending))

    def linear_last_dim(self, weight: np.ndarray, bias: np.ndarray | None, alpha: float = 1.0,
                        beta: float = 1.0, *, computed_weight: bool = False,
                        computed_bias: bool = False) -> None:
        """``alpha·(h @ weight.T) + beta·bias`` over the last feature dimension
        (``torch.nn.Linear``, ``Gemm``, ``MatMul``, ``addmm``); ``weight`` is ``(out, in)``.
        Leading feature dimensions are kept, each slice mapped by the same weight. A product
        ``alpha·weight`` or ``beta·bias`` that rounds in float64, and every entry of a
        ``computed_weight`` or ``computed_bias`` (the float result of other operations, not
        the model's own constant), is marked as computed (:func:`computed_magnitudes`). The
        products carry one rounding each (counted, :func:`counted`); computed operands are
        not counted."""
        weight = np.asarray(weight, dtype=np.float64)
        if weight.ndim != 2:
            raise NetworkError(f"linear weight must be 2-D, got shape {weight.shape}")
        out_features, in_features = weight.shape
        if self.shape is None:
            self._fix_shape((in_features,))
        shape = self._require_shape("a linear map")
        if shape[-1] != in_features:
            raise NetworkError(
                f"linear map expects {in_features} features in the last dimension, the tensor "
                f"reaching it has shape {shape}"
            )
        bias_vector = (
            np.zeros(out_features)
            if bias is None
            else np.broadcast_to(np.asarray(bias, dtype=np.float64).reshape(-1), (out_features,))
        )
        weight, weight_exact = exact_product(alpha, weight)
        bias_vector, bias_exact = exact_product(beta, bias_vector)
        weight_exact &= not computed_weight
        bias_exact &= not computed_bias
        weight_magnitude = computed_magnitudes(weight, weight_exact)
        bias_magnitude = computed_magnitudes(bias_vector, bias_exact)
        roundings = None if computed_weight or computed_bias else counted(1, weight, bias_vector)
        leading = math.prod(shape[:-1])
        if leading == 1:
            self.affine(weight, bias_vector, (*shape[:-1], out_features), weight_magnitude,
                        bias_magnitude, roundings)
            return
        self.affine(
            np.kron(np.eye(leading), weight),
            np.tile(bias_vector, leading),
            (*shape[:-1], out_features),
            np.kron(np.eye(leading), weight_magnitude),
            np.tile(bias_magnitude, leading),
            roundings,
        )

    def elementwise(self, scale: np.ndarray | float, shift: np.ndarray | float,
                    scale_magnitude: np.ndarray | float | None = None,
                    shift_magnitude: np.ndarray | float | None = None,
                    roundings: int | None = None) -> None:
        """``h ↦ scale * h + shift`` with numpy broadcasting against one sample ``(1, *shape)``.

        The constants may carry a leading batch dimension of size 1; they must not enlarge the
        tensor (that would change the model's output shape per sample). The magnitudes
        (broadcast like the constants; default their absolute values, the model's own
        coefficients) mark constants computed in float (:func:`computed_magnitudes`), with
        ``roundings`` their count (as in :meth:`affine`).
        """
        scale_array = np.asarray(scale, dtype=np.float64)
        shift_array = np.asarray(shift, dtype=np.float64)
        if self.shape is None:
            self._infer_shape_from_constants(scale_array, shift_array)
        shape = self._require_shape("an element-wise operation")
        sample = (1, *shape)
        try:
            result = np.broadcast_shapes(sample, scale_array.shape, shift_array.shape)
        except ValueError as error:
            raise NetworkError(
                f"constant of shape {scale_array.shape or shift_array.shape} does not broadcast "
                f"against the tensor of per-sample shape {shape}"
            ) from error
        if result != sample:
            constant = max((scale_array, shift_array), key=lambda array: array.ndim).shape
            raise NetworkError(
                f"a constant of shape {constant} broadcast against one sample of shape "
                f"{sample} gives shape {result}: it would enlarge each sample (or the batch); "
                "only per-feature or scalar constants are supported"
            )
        scale_vector = np.broadcast_to(scale_array, sample).reshape(-1)
        shift_vector = np.broadcast_to(shift_array, sample).reshape(-1)
        scale_size, shift_size = (
            np.abs(vector) if given is None else np.broadcast_to(
                np.asarray(given, dtype=np.float64), np.broadcast_shapes(sample, np.shape(given))
            ).reshape(-1)
            for vector, given in ((scale_vector, scale_magnitude), (shift_vector, shift_magnitude))
        )
        self._then(Layer(np.diag(scale_vector), shift_vector.copy(),
                         weight_magnitude=np.diag(scale_size), bias_magnitude=shift_size,
                         fold_roundings=roundings))

    def divide(self, divisor: np.ndarray | float, computed: bool = False) -> None:
        """``h ↦ h / divisor`` (broadcast as in :meth:`elementwise`): a multiplication by the
        float reciprocal, marked as computed (:func:`computed_magnitudes`) wherever the
        reciprocal is not the real one (every divisor but a power of two). ``h / 5`` is then
        never read as ``h·0.2000000000000000111``: at ``h = 5`` the model's real value is 1,
        the rounded reciprocal's is above it, and a tie such as ``h/5 − 1 = 0`` would change
        class. A ``computed`` divisor (the float result of other operations) marks every
        reciprocal. A reciprocal of the model's own divisor is one rounding (counted,
        :func:`counted`)."""
        divisor = np.asarray(divisor, dtype=np.float64)
        reciprocal = 1.0 / divisor
        product, exact = exact_product(reciprocal, divisor)
        exact &= (product == 1.0) & (not computed)
        self.elementwise(reciprocal, 0.0, computed_magnitudes(reciprocal, exact), 0.0,
                         None if computed else counted(1, reciprocal))

    def channel_affine(self, scale: np.ndarray, shift: np.ndarray, what: str,
                       scale_magnitude: np.ndarray | None = None,
                       shift_magnitude: np.ndarray | None = None,
                       roundings: int | None = None) -> None:
        """``h ↦ scale[c] * h + shift[c]`` along the first feature dimension (the channel
        dimension of ``BatchNorm1d`` and ONNX ``BatchNormalization``); a tensor of unknown shape
        is taken to have exactly these channels. Magnitudes and ``roundings`` as in
        :meth:`elementwise`."""
        scale = np.asarray(scale, dtype=np.float64).reshape(-1)
        shift = np.asarray(shift, dtype=np.float64).reshape(-1)
        if self.shape is None:
            self._fix_shape((scale.size,))
        shape = self._require_shape(what)
        if shape[0] != scale.size or shift.size != scale.size:
            raise NetworkError(
                f"{what} has {scale.size} channels, the tensor reaching it has shape {shape}"
            )
        trailing = (1,) * (len(shape) - 1)
        per_channel = (scale.size, *trailing)
        self.elementwise(
            scale.reshape(per_channel), shift.reshape(per_channel),
            None if scale_magnitude is None else np.reshape(scale_magnitude, per_channel),
            None if shift_magnitude is None else np.reshape(shift_magnitude, per_channel),
            roundings,
        )

    def batch_norm(
        self,
        mean: np.ndarray,
        variance: np.ndarray,
        weight: np.ndarray | None,
        bias: np.ndarray | None,
        eps: float,
        what: str,
        computed: bool = False,
    ) -> None:
        """Inference-mode batch normalisation ``(h − mean)/sqrt(variance + eps)·weight + bias``
        folded into the pending affine map as ``scale·h + shift``. The float ``scale`` and
        ``shift`` are the real ones only where :func:`_batch_norm_exact` proves it (a square
        root is rarely rational); elsewhere they are marked as computed
        (:func:`computed_magnitudes`: four roundings in the scale, two more in the shift),
        and everywhere when a parameter is ``computed`` (the float result of other
        operations).

        Count (``fold_roundings`` 6, unless a parameter is computed or a product or quotient
        may have underflowed, :func:`counted`): ``fl(variance + eps)`` is
        ``(variance + eps)(1 + δ₁)``, its square root ``sqrt(variance + eps)·(1 + δ₁)^½·
        (1 + δ₂)`` with ``|(1 + δ₁)^½ − 1| ≤ u``, and the quotient gives ``scalẽ =
        scale·(1 + θ₃)`` for the real ``scale = weight/sqrt(variance + eps)``; then
        ``shift̃ = fl(bias − fl(mean·scalẽ)) = bias·(1 + θ₁) − mean·scale·(1 + θ₅)``, two real
        terms each within ``θ₆``. The magnitudes (``|scalẽ|`` raised by ``gamma(4)``, and
        ``|bias| + |mean|·m_scale`` raised by ``gamma(6)``, :func:`computed_magnitudes`;
        ``gamma(k)`` is about ``4·k·u``) exceed ``|scale|·(1 + γ₆)`` and ``(|bias| +
        |mean·scale|)·(1 + γ₆)`` after their own roundings."""
        mean = np.asarray(mean, dtype=np.float64).reshape(-1)
        variance = np.asarray(variance, dtype=np.float64).reshape(-1)
        gain = np.ones_like(mean) if weight is None else np.asarray(weight, np.float64).reshape(-1)
        beta = np.zeros_like(mean) if bias is None else np.asarray(bias, np.float64).reshape(-1)
        if np.any(variance + eps <= 0):
            raise NetworkError(f"{what}: running variance + eps must be positive")
        scale = gain / np.sqrt(variance + eps)
        shift = beta - mean * scale
        scale_exact, shift_exact = _batch_norm_exact(mean, variance, gain, beta, eps, scale,
                                                     shift)
        scale_exact &= not computed
        shift_exact &= not computed
        scale_magnitude = computed_magnitudes(scale, scale_exact, roundings=4)
        shift_magnitude = computed_magnitudes(
            shift, shift_exact, np.abs(beta) + np.abs(mean) * scale_magnitude, roundings=6)
        roundings = None if computed else counted(6, scale, mean * scale)
        self.channel_affine(scale, shift, what, scale_magnitude, shift_magnitude, roundings)

    def _infer_shape_from_constants(self, *constants: np.ndarray) -> None:
        widest = max(constants, key=lambda array: array.ndim)
        if widest.ndim == 0 or widest.size == 1:
            self._require_shape("a scalar element-wise operation")
        shape = widest.shape[1:] if widest.ndim >= 2 and widest.shape[0] == 1 else widest.shape
        self._fix_shape(tuple(int(size) for size in shape))

    def reshape(self, shape: Sequence[int]) -> None:
        """Relabel the feature shape (C-order flattening is unchanged)."""
        shape = tuple(int(size) for size in shape)
        current = self._require_shape("a reshape")
        if math.prod(shape) != math.prod(current):
            raise NetworkError(
                f"cannot reshape {math.prod(current)} features {current} to {shape} per sample"
            )
        self.shape = shape

    def resolve_reshape(self, target: Sequence[int | None]) -> tuple[int, ...]:
        """Per-sample shape of ``reshape(x, target)``, where ``target[0]`` is the batch size
        (``None`` for a symbolic batch size, ``-1``, ``0`` or a literal) and ``-1``/``0`` elsewhere
        mean "inferred" and "copied", as in torch and ONNX. Raises when the reshape would mix
        samples of a batch."""
        current = self._require_shape("a reshape")
        width = math.prod(current)
        if len(target) == 0:
            raise NetworkError("reshape to a scalar is not supported")
        rest = [
            current[index] if size == 0 and index < len(current) else size
            for index, size in enumerate(target[1:], start=0)
        ]
        if any(size is None for size in rest):
            raise NetworkError(f"reshape target {list(target)} has a symbolic non-batch size")
        if rest.count(-1) > 1:
            raise NetworkError(f"reshape target {list(target)} has more than one -1")
        known = math.prod(size for size in rest if size != -1)
        if -1 in rest:
            if known == 0 or width % known:
                raise NetworkError(f"cannot reshape {width} features to {list(target)}")
            rest = [width // known if size == -1 else size for size in rest]
        if math.prod(rest) != width:
            raise NetworkError(
                f"reshape to {list(target)} changes the number of features per sample from "
                f"{width} to {math.prod(rest)}: it would mix the samples of a batch"
            )
        return tuple(int(size) for size in rest) if rest else (1,)

    def append_layer(self, layer: Layer) -> None:
        """Append a whole IR layer unchanged, or composed with the pending affine map if one is
        pending (so that layers read from a file keep their exact weights)."""
        self._refuse_after_head()
        if self._pending is not None:
            pending = self._pending
            self.affine(layer.weight, layer.bias, (layer.out_features,))
            self.layers.append(replace(layer, **fold_affine(layer, pending)))
            self._pending = None
            return
        if self.shape is None:
            self._fix_shape((layer.in_features,))
        if self.width != layer.in_features:
            raise NetworkError(
                f"layer expects {layer.in_features} inputs, the previous layer has {self.width}"
            )
        self.layers.append(layer)
        self.shape = (layer.out_features,)

    # -- activations ---------------------------------------------------------------------------

    def _close_layer(self, **activation: object) -> None:
        self._refuse_after_head()
        if self._merge_into_last(activation):
            return
        width = self.width
        affine = self._pending or Layer(np.eye(width), np.zeros(width))
        self.layers.append(replace(affine, **activation))  # type: ignore[arg-type]
        self._pending = None

    def _merge_into_last(self, activation: dict[str, object]) -> bool:
        """Compose an activation applied right after another into one, when the IR can
        express the composition exactly: clamps of overlapping intervals (ReLU is
        ``clamp(0, ∞)``), and LeakyReLUs (slopes multiply; ReLU has slope 0) whose slopes'
        float products are exact (``0.5·0.25``, not ``0.1·0.3``: the IR has no magnitude to
        mark a rounded slope with, so those stay two layers)."""
        kind = activation.get("activation")
        if self._pending is not None or not self.layers or kind == "none":
            return False
        last = self.layers[-1]
        clamps = {"relu", "hardtanh"}
        if last.activation in clamps and kind in clamps:
            lower = max(
                last.min_val if last.activation == "hardtanh" else 0.0,
                float(activation.get("min_val", 0.0)),
            )  # type: ignore[arg-type]
            upper = min(
                last.max_val if last.activation == "hardtanh" else math.inf,
                float(activation.get("max_val", math.inf)),
            )  # type: ignore[arg-type]
            if not lower < upper or (upper == math.inf and lower != 0.0):
                return False
            merged = (
                replace(last, activation="relu")
                if upper == math.inf
                else replace(last, activation="hardtanh", min_val=lower, max_val=upper)
            )
        elif last.activation in ("relu", "leaky_relu") and kind in ("relu", "leaky_relu"):
            slope = activation.get("negative_slope", 0.0)
            if last.activation == "relu" or kind == "relu":
                merged = replace(last, activation="relu")
            else:
                product, exact = exact_product(last.negative_slope_effective,
                                               np.asarray(slope, dtype=np.float64))
                if not exact.all():  # a rounded slope would be read as the model's own
                    return False
                merged = replace(last, negative_slope=(
                    tuple(product.tolist()) if isinstance(slope, tuple)
                    or isinstance(last.negative_slope, tuple) else float(product[0])))
        else:
            return False
        self.layers[-1] = merged
        return True

    def relu(self) -> None:
        self._close_layer(activation="relu")

    def kernel_scalar(self, value: float, dtype: type[np.floating] | None = None) -> float:
        """``value`` as the source's kernels use it: rounded to ``dtype``, by default
        :attr:`scalar_dtype` (torch turns a float32 LeakyReLU's slope 0.01 into
        0.009999999776…, so the model's negative side is that slope times its input, exactly).
        An exact float64 value; :attr:`rounded_scalars` records that one differed from
        ``value``."""
        rounded = float((dtype or self.scalar_dtype)(value))
        self.rounded_scalars |= rounded != value
        return rounded

    def leaky_relu(self, negative_slope: float | Sequence[float]) -> None:
        """LeakyReLU with one slope or one slope per feature (each in [0, 1])."""
        slopes = np.asarray(negative_slope, dtype=np.float64)
        if slopes.ndim == 0:
            self._close_layer(activation="leaky_relu", negative_slope=float(slopes))
            return
        per_feature = np.broadcast_to(slopes, (1, *self._require_shape("a PReLU"))).reshape(-1)
        self._close_layer(activation="leaky_relu", negative_slope=tuple(per_feature.tolist()))

    def clip(self, lower: float | None, upper: float | None) -> None:
        """``clamp(h, lower, upper)`` with either bound optional.

        Both bounds: ``hardtanh``. Lower only: ``relu(h − lower) + lower``. Upper only:
        ``upper − relu(upper − h)``. Neither: the identity. Exact in real arithmetic.
        """
        if lower is not None and not math.isfinite(lower):
            lower = None
        if upper is not None and not math.isfinite(upper):
            upper = None
        if lower is not None and upper is not None:
            if not lower < upper:
                raise NetworkError(f"clip needs lower < upper, got {lower} and {upper}")
            self._close_layer(activation="hardtanh", min_val=float(lower), max_val=float(upper))
        elif lower == 0.0:
            self.relu()
        elif lower is not None:
            self.elementwise(1.0, -float(lower))
            self.relu()
            self.elementwise(1.0, float(lower))
        elif upper is not None:
            self.elementwise(-1.0, float(upper))
            self.relu()
            self.elementwise(-1.0, float(upper))

    def window_max(self, windows: Sequence[Sequence[int]], out_shape: Sequence[int]) -> None:
        """``out[i] = max(h[j] for j in windows[i])`` over the flattened features (max
        pooling), exactly, as a tournament of ReLU layers.

        Each round pairs a window's candidates ``a, b`` into ``max(a, b) = b + relu(a − b)``:
        two neurons of a LeakyReLU layer with per-neuron slopes, slope 1 (pass ``b`` through)
        and slope 0 (``relu(a − b)``); a pair shared by overlapping windows is computed once.
        ``⌈log2(largest window)⌉`` rounds, then the selected sums feed the next affine map.
        """
        width = self.width
        if not windows or any(len(window) == 0 for window in windows):
            raise NetworkError("max pooling needs non-empty windows")
        if any(not 0 <= index < width for window in windows for index in window):
            raise NetworkError(f"max-pooling window index outside the {width} features")
        Row = tuple[tuple[int, float], ...]
        candidates: list[list[Row]] = [[((int(j), 1.0),) for j in window] for window in windows]
        while any(len(window) > 1 for window in candidates):
            neurons: dict[tuple[Row, float], int] = {}

            def neuron(row: Row, slope: float, neurons: dict = neurons) -> int:
                return neurons.setdefault((row, slope), len(neurons))

            rounds: list[list[Row]] = []
            for window in candidates:
                merged: list[Row] = []
                for first, second in zip(window[0::2], window[1::2], strict=False):
                    passed = neuron(second, 1.0)
                    difference = dict(first)
                    for index, coefficient in second:
                        difference[index] = difference.get(index, 0.0) - coefficient
                    kink = neuron(tuple(sorted(difference.items())), 0.0)
                    merged.append(((passed, 1.0), (kink, 1.0)))
                if len(window) % 2:
                    merged.append(((neuron(window[-1], 1.0), 1.0),))
                rounds.append(merged)
            self._apply_rows([row for row, _ in neurons], self.width, None)
            self.leaky_relu([slope for _, slope in neurons])
            candidates = rounds
        self._apply_rows([window[0] for window in candidates], self.width, out_shape)

    def _apply_rows(
        self,
        rows: Sequence[tuple[tuple[int, float], ...]],
        width: int,
        out_shape: Sequence[int] | None,
    ) -> None:
        matrix = np.zeros((len(rows), width))
        for row_index, row in enumerate(rows):
            for column, coefficient in row:
                matrix[row_index, column] += coefficient
        self.affine(matrix, None, tuple(out_shape) if out_shape else (len(rows),))

    # -- classifier head -------------------------------------------------------------------

    def head(self, kind: HeadName, where: str, dim: int | None = None) -> None:
        """Record the classifier head ``kind`` (read at ``where``, a layer or node name).

        ``softmax``/``log_softmax`` must run over the features of a one-dimensional
        per-sample tensor: ``dim`` is the dimension of the batched tensor (1 or -1; ``None``
        means the features).
        """
        self._refuse_after_head()
        if kind in ("softmax", "log_softmax"):
            shape = self._require_shape(f"a {kind}")
            if len(shape) != 1 or dim not in (None, 1, -1):
                raise NetworkError(
                    f"{where}: {kind} over dimension {dim} of a tensor with per-sample shape "
                    f"{shape}; a head must run over the outputs of a flat (batch, outputs) tensor"
                )
        if self._pending is not None or not self.layers:
            self._close_layer(activation="none")
        self._head, self._head_where = kind, where

    def _refuse_after_head(self) -> None:
        if self._head != "none":
            raise NetworkError(
                f"the {self._head} at {self._head_where} is followed by another operation; a "
                f"{self._head} is read only as the network's last operation (a classifier head)"
            )

    # -- result --------------------------------------------------------------------------------

    def network(
        self, input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None
    ) -> Network:
        """The IR network, with the recorded head; a pending affine map becomes a final layer
        without activation."""
        if self._pending is not None or not self.layers:
            self._close_layer(activation="none")
        return Network(
            list(self.layers),
            list(input_names) if input_names else [],
            list(output_names) if output_names else [],
            self._head,
        )
