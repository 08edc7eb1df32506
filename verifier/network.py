"""The network IR every certgate algorithm consumes.

A :class:`Network` is a sequence of :class:`Layer` objects, each an affine map ``W·h + b``
followed by an element-wise piecewise-linear activation. Weights are float64 numpy arrays in
PyTorch's ``(out, in)`` layout. The IR evaluates itself (numpy or torch), exports to
``torch.nn`` and can be *lowered* to a form whose activations are only ``none``, ``relu`` and
``leaky_relu`` (every ``hardtanh`` rewritten exactly into two ReLUs), which is the form the bound
propagators, the causal-fairness checker and the WMI encoder work on.

Classifier heads. A network may end in a *head*, a final ``sigmoid``, ``softmax`` or
``log_softmax`` (over its outputs) applied after the last layer (:data:`HEADS`). The head is
part of what the network computes: :meth:`Network.evaluate`, :meth:`Network.to_torch`, the JSON
and ONNX writers and every converter's self-check include it. It is not piecewise linear, so
:meth:`Network.lowered` (the entry of every bound propagator and region enumerator) refuses a
network with a head, and each consumer chooses a view:

* *Class readers* (argmax events, causal fairness, WMI class properties, the SC-layer) use
  :meth:`Network.as_classifier`, the one rule for "the class" of a network: the head is
  dropped, since every head is strictly increasing in the order the class is read from
  (sigmoid element-wise; softmax and log-softmax shift all logits by one common amount, in real
  arithmetic), so the argmax and every strict order ``y_a < y_b`` are the logits'; and a single
  output is a binary classifier whose class is 1 iff the logit is ``> 0``.
* *Value readers* (output bounds, events on output values) read :meth:`Network.logits` only
  where the head preserves what they read, and otherwise bound the head soundly or refuse,
  naming the head (:func:`head_error`).

Loaders from torch modules, ONNX files, ``.nnet`` files and the neutral JSON format live in
:mod:`verifier.convert`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from verifier.arrays import torch_loaded
from verifier.errors import CertgateInputError
from verifier.numerics import SMALLEST_SUBNORMAL, two_product, two_sum, up_array

if TYPE_CHECKING:
    import torch

ActivationName = Literal["none", "relu", "leaky_relu", "hardtanh"]
ACTIVATIONS: tuple[str, ...] = ("none", "relu", "leaky_relu", "hardtanh")
HeadName = Literal["none", "sigmoid", "softmax", "log_softmax"]
HEADS: tuple[str, ...] = ("none", "sigmoid", "softmax", "log_softmax")


class NetworkError(CertgateInputError):
    """A network cannot be represented, converted or evaluated as asked."""


@dataclass(frozen=True)
class Layer:
    """``activation(weight @ h + bias)``.

    ``negative_slope`` is used by ``leaky_relu``: one slope for the layer, or a tuple with one
    slope per neuron (slope 1 passes a neuron through unchanged, slope 0 is a ReLU), which lets
    pre-processing such as ``min(a, b) = a − relu(a − b)`` be composed with a network.
    ``min_val``/``max_val`` are used by ``hardtanh``.

    ``weight_magnitude``/``bias_magnitude`` (same shapes as ``weight``/``bias``; default their
    absolute values) bound the sum of the absolute values of the real terms each coefficient
    was computed from when it is the float result of folding several maps (a normalisation
    merged into a Linear layer, a lowered hardtanh): the bound propagators' rounding margins
    are taken from them, since a folded float coefficient may have cancelled (even to an
    exact zero) where the real one did not. An entry is zero only if every term is exactly
    zero (see :func:`fold_affine`).

    ``fold_roundings`` counts the roundings a folded coefficient carries (``None``: not
    counted). A count ``f`` promises, for every coefficient ``c̃`` (weight or bias) with
    recorded magnitude ``m̃``, real terms ``t_k`` whose sum is the model's real coefficient
    (products of the model's own parameters and of real values such as ``1/sqrt(var + eps)``)
    with ``c̃ = Σ t_k·(1 + θ_k)`` and ``m̃ ≥ Σ |t_k|·(1 + θ'_k)``, every ``|θ|`` at most
    Higham's ``γ_f = f·u/(1 − f·u)`` (``u = 2⁻⁵³``): the float coefficient and its magnitude
    are float evaluations of the real terms and of their absolute values in which each term
    met at most ``f`` roundings. A coefficient that is its own real value (magnitude
    ``|c̃|``) keeps it with the single term ``c̃``, so a layer of the model's own coefficients
    needs no count (:attr:`fold_count` is 0). The bound propagators add the counts of every
    layer to the roundings their margin counts (:attr:`Network.fold_roundings`).
    """

    weight: np.ndarray
    bias: np.ndarray
    activation: ActivationName = "none"
    negative_slope: float | tuple[float, ...] = 0.01
    min_val: float = -1.0
    max_val: float = 1.0
    weight_magnitude: np.ndarray | None = None
    bias_magnitude: np.ndarray | None = None
    fold_roundings: int | None = None

    def __post_init__(self) -> None:
        weight = np.ascontiguousarray(np.asarray(self.weight, dtype=np.float64))
        bias = np.ascontiguousarray(np.asarray(self.bias, dtype=np.float64).reshape(-1))
        if weight.ndim != 2:
            raise NetworkError(f"layer weight must be 2-D (out, in), got shape {weight.shape}")
        if bias.shape != (weight.shape[0],):
            raise NetworkError(
                f"layer bias has shape {bias.shape}, expected ({weight.shape[0]},) to match the "
                f"weight's {weight.shape[0]} outputs"
            )
        if self.activation not in ACTIVATIONS:
            raise NetworkError(
                f"unsupported activation {self.activation!r}; supported: {', '.join(ACTIVATIONS)}"
            )
        if not (np.all(np.isfinite(weight)) and np.all(np.isfinite(bias))):
            raise NetworkError("layer weights and biases must be finite")
        if isinstance(self.negative_slope, list | tuple | np.ndarray):
            slopes = tuple(float(value) for value in np.asarray(self.negative_slope).reshape(-1))
            if len(slopes) != weight.shape[0]:
                raise NetworkError(
                    f"{len(slopes)} per-neuron slopes for a layer with {weight.shape[0]} neurons"
                )
            object.__setattr__(self, "negative_slope", slopes)
        if self.activation == "leaky_relu" and not all(
            0.0 <= slope <= 1.0 for slope in np.atleast_1d(self.negative_slope)
        ):
            raise NetworkError(f"leaky_relu slopes must lie in [0, 1], got {self.negative_slope}")
        if self.activation == "hardtanh" and not self.min_val < self.max_val:
            raise NetworkError(
                f"hardtanh needs min_val < max_val, got {self.min_val}, {self.max_val}"
            )
        if self.fold_roundings is not None and (
                not isinstance(self.fold_roundings, int) or self.fold_roundings < 0):
            raise NetworkError(f"fold_roundings must be a count, got {self.fold_roundings!r}")
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "bias", bias)
        for name, value in (("weight_magnitude", weight), ("bias_magnitude", bias)):
            given = getattr(self, name)
            magnitude = np.abs(value)
            if given is not None:
                given = np.asarray(given, dtype=np.float64)
                if given.shape != value.shape:
                    raise NetworkError(f"{name} must have the shape {value.shape}")
                magnitude = np.maximum(magnitude, given)
            object.__setattr__(self, name, np.ascontiguousarray(magnitude))

    @property
    def in_features(self) -> int:
        return int(self.weight.shape[1])

    @property
    def fold_count(self) -> int | None:
        """The roundings the margin must add for this layer's coefficients: 0 where every
        one is the model's own value (magnitude = absolute value), else
        :attr:`fold_roundings` (``None``: not counted, the network keeps the flat margin)."""
        if _own_values(self):
            return 0
        return self.fold_roundings

    @property
    def out_features(self) -> int:
        return int(self.weight.shape[0])

    @property
    def negative_slope_effective(self) -> np.ndarray:
        """Per-neuron slope left of the kink at 0: 0 for ReLU, the leak for LeakyReLU, 1 for
        ``none``."""
        if self.activation == "relu":
            return np.zeros(self.out_features)
        if self.activation == "leaky_relu":
            return np.broadcast_to(
                np.asarray(self.negative_slope, dtype=np.float64), (self.out_features,)
            ).copy()
        if self.activation == "none":
            return np.ones(self.out_features)
        raise NetworkError("hardtanh has two kinks; lower the network first")

    def activate(self, z: torch.Tensor) -> torch.Tensor:
        """Apply this layer's activation to pre-activations ``z``."""
        import torch  # deferred: the numpy paths (point enclosures, readers) run without it

        if self.activation == "relu":
            return torch.relu(z)
        if self.activation == "leaky_relu":
            slope = torch.as_tensor(self.negative_slope_effective, dtype=z.dtype)
            return torch.where(z < 0, z * slope, z)
        if self.activation == "hardtanh":
            return torch.clamp(z, self.min_val, self.max_val)
        return z


@dataclass
class Network:
    """A feed-forward piecewise-linear network ``layers[-1](…layers[0](x))``, optionally
    followed by a classifier ``head`` over its outputs (module docstring).

    ``input_names`` and ``output_names`` name the columns of the input and output vectors (the
    head keeps one output per logit).
    """

    layers: list[Layer]
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    head: HeadName = "none"

    def __post_init__(self) -> None:
        if not self.layers:
            raise NetworkError("a network needs at least one layer")
        if self.head not in HEADS:
            raise NetworkError(f"unsupported head {self.head!r}; supported: {', '.join(HEADS)}")
        if self.head in ("softmax", "log_softmax") and self.layers[-1].out_features == 1:
            raise NetworkError(
                f"a {self.head} head over a single output is a constant; a binary classifier "
                "with one logit ends in a sigmoid or in no head"
            )
        for index, (previous, layer) in enumerate(zip(self.layers, self.layers[1:], strict=False)):
            if previous.out_features != layer.in_features:
                raise NetworkError(
                    f"layer {index + 1} expects {layer.in_features} inputs but layer {index} "
                    f"produces {previous.out_features}"
                )
        if not self.input_names:
            self.input_names = [f"x{i}" for i in range(self.input_size)]
        if not self.output_names:
            self.output_names = [f"y{i}" for i in range(self.output_size)]
        if len(self.input_names) != self.input_size:
            raise NetworkError(
                f"{len(self.input_names)} input names for a network with {self.input_size} inputs"
            )
        if len(self.output_names) != self.output_size:
            raise NetworkError(
                f"{len(self.output_names)} output names for a network with {self.output_size} "
                "outputs"
            )

    @property
    def input_size(self) -> int:
        return self.layers[0].in_features

    @property
    def output_size(self) -> int:
        return self.layers[-1].out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Evaluate on a batch ``x`` of shape ``(batch, input_size)`` in ``x``'s dtype, head
        included."""
        import torch  # deferred: the numpy paths (point enclosures, readers) run without it

        h = x
        for layer in self.layers:
            weight = torch.as_tensor(layer.weight, dtype=x.dtype, device=x.device)
            bias = torch.as_tensor(layer.bias, dtype=x.dtype, device=x.device)
            h = layer.activate(h @ weight.T + bias)
        return apply_head(self.head, h)

    def evaluate(self, x: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
        """Evaluate on a numpy batch in float64, head included; a 1-D input is treated as one
        row. On torch (:meth:`forward`) when this process has imported it, else on numpy
        (:meth:`evaluate_numpy`: the same operations, matrix products perhaps summed in
        another order), so that a float evaluation never costs torch's import."""
        array = np.asarray(x, dtype=np.float64)
        single = array.ndim == 1
        batch = array.reshape(1, -1) if single else array
        if batch.shape[1] != self.input_size:
            raise NetworkError(
                f"input has {batch.shape[1]} columns, the network expects {self.input_size}"
            )
        if not torch_loaded():
            out = self.evaluate_numpy(batch)
            return out[0] if single else out
        import torch  # deferred: the numpy paths (point enclosures, readers) run without it

        with torch.no_grad():
            out = self.forward(torch.from_numpy(np.ascontiguousarray(batch))).numpy()
        return out[0] if single else out

    def evaluate_numpy(self, x: np.ndarray) -> np.ndarray:
        """The network evaluated layer by layer on a float64 numpy batch ``(batch, inputs)``,
        head included (the semantics of :meth:`forward`, without torch)."""
        hidden = x
        for layer in self.layers:
            hidden = hidden @ layer.weight.T + layer.bias
            if layer.activation == "relu":
                hidden = np.maximum(hidden, 0.0)
            elif layer.activation == "leaky_relu":
                hidden = np.where(hidden < 0.0, hidden * layer.negative_slope_effective, hidden)
            elif layer.activation == "hardtanh":
                hidden = np.clip(hidden, layer.min_val, layer.max_val)
        return apply_head_numpy(self.head, hidden)

    def classify(self, x: np.ndarray) -> np.ndarray:
        """The class of every row by :meth:`as_classifier`: the index of the largest logit
        (ties go to the lowest index); for a single output, 1 iff the logit is ``> 0``."""
        return np.argmax(self.as_classifier().evaluate(x), axis=-1)

    def read_inputs(self) -> np.ndarray:
        """Boolean mask of the input columns some output depends on: there is a path of
        non-zero weights from the column to an output (a column passed through a first layer
        but ignored afterwards is not read). A folded weight that rounded to zero still counts
        when its real value may be non-zero (its magnitude is not zero)."""
        needed = np.ones(self.output_size, dtype=bool)
        for layer in reversed(self.layers):
            assert layer.weight_magnitude is not None
            needed = (layer.weight_magnitude[needed] > 0.0).any(axis=0)
        return needed

    @property
    def folded(self) -> bool:
        """Whether some coefficient is the rounded float result of folding several maps (its
        magnitude exceeds its absolute value: :func:`fold_affine` raises it on every fold it
        cannot prove exact, whether or not its terms cancelled): the IR is then a rounded
        stand-in for the model, and evaluating it exactly does not give the model's
        real-arithmetic value. A fold proven exact (an identity, a permutation, a scaling by
        a power of two) leaves the coefficients the model's own and does not count."""
        return any(
            bool((layer.weight_magnitude != np.abs(layer.weight)).any())
            or bool((layer.bias_magnitude != np.abs(layer.bias)).any())
            for layer in self.layers
        )

    @property
    def fold_roundings(self) -> int | None:
        """The roundings every real term of a bound meets in the folds of its coefficients:
        the sum of the layers' :attr:`Layer.fold_count` (a term of a bound is a product of one
        term of one coefficient per layer, and Higham's ``(1 + θ_a)(1 + θ_b) = 1 + θ_{a+b}``),
        0 when nothing is folded; ``None`` when some folded layer is not counted."""
        counts = [layer.fold_count for layer in self.layers]
        if any(count is None for count in counts):
            return None
        return sum(count for count in counts if count is not None)

    def relu_layer_sizes(self) -> list[int]:
        """Number of neurons of every layer with a kink (after lowering; the head has none)."""
        return [layer.out_features for layer in self.logits().lowered().layers
                if layer.activation != "none"]

    def renamed(
        self, input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None
    ) -> Network:
        """The same network (layers and head) with new input and/or output names."""
        return replace(
            self,
            layers=list(self.layers),
            input_names=list(self.input_names if input_names is None else input_names),
            output_names=list(self.output_names if output_names is None else output_names),
        )

    def logits(self) -> Network:
        """The network without its head: its outputs are the logits the head reads (the
        network itself when it has no head)."""
        if self.head == "none":
            return self
        return replace(self, layers=list(self.layers), input_names=list(self.input_names),
                       output_names=list(self.output_names), head="none")

    def lowered(self) -> Network:
        """An equivalent network whose activations are only ``none``, ``relu``, ``leaky_relu``.

        ``hardtanh(z) = a + relu(z − a) − relu(z − b)`` for ``a < b``: a hardtanh layer becomes a
        ReLU layer of twice the width whose outputs the next layer (or a new final affine layer)
        combines. The rewrite is exact in real arithmetic; in float64 it moves biases by at most
        one rounding, well inside the certified-comparison margins of :mod:`verifier.bounds`.

        Raises:
            NetworkError: the network has a head, which no piecewise-linear network equals;
                a consumer lowers :meth:`as_classifier` (class readers) or :meth:`logits`
                (value readers that account for the head), never the headed network.
        """
        if self.head != "none":
            raise NetworkError(
                f"the network ends in a {self.head} head, which is not piecewise linear: lower "
                "its as_classifier() view to read classes, or its logits() where the reader "
                "accounts for the head"
            )
        if all(layer.activation != "hardtanh" for layer in self.layers):
            return self
        layers: list[Layer] = []
        pending: tuple[np.ndarray, np.ndarray] | None = None  # affine map to fold into next layer
        for layer in self.layers:
            if pending is not None:
                layer = replace(layer, **fold_affine(layer, pending))
                pending = None
            if layer.activation != "hardtanh":
                layers.append(layer)
                continue
            width = layer.out_features
            shifts = Layer(
                np.vstack([np.eye(width), np.eye(width)]),
                np.concatenate([np.full(width, -layer.min_val), np.full(width, -layer.max_val)]),
            )
            layers.append(Layer(activation="relu", **fold_affine(shifts, layer)))
            identity = np.eye(width)
            pending = Layer(np.hstack([identity, -identity]), np.full(width, layer.min_val))
        if pending is not None:
            layers.append(pending)
        return Network(layers, list(self.input_names), list(self.output_names))

    def as_classifier(self) -> Network:
        """The network as a classifier over argmax classes: the one rule every class reader
        (argmax events, causal fairness, WMI class properties, the SC-layer) applies.

        The head is dropped: the class and every strict order between outputs are the
        logits' (module docstring). A network with one output is a binary classifier whose
        class is 1 iff the output (a logit) is ``> 0``, the reading of a single-logit or
        sigmoid head (sigmoid > 0.5 iff the logit > 0). Its classifier view has two outputs
        ``(0, z)``: the last layer gains a zero row in front, so ``y_1 − y_0 = z`` exactly (no
        rounding is added) and "class 1 wins strictly" is "z > 0". At ``z = 0`` the two
        outputs tie and argmax's lowest index gives class 0, as "class 1 iff z > 0" does: a
        tie is a class, and every certifier reads it as this one (never as "no class", which
        would hide a sensitive change from ``z = 0`` to ``z > 0``). Networks with two or more
        outputs keep their layers.

        Raises:
            NetworkError: the single output passes through an activation (it is not a logit).
        """
        view = self.logits()
        if view.output_size != 1:
            return view
        last = view.layers[-1]
        if last.activation != "none":
            raise NetworkError(
                f"the single output passes through {last.activation}; a binary classifier's "
                "logit must be the last affine layer's output"
            )
        zero_row = np.zeros((1, last.in_features))
        assert last.weight_magnitude is not None and last.bias_magnitude is not None
        layer = replace(
            last,
            weight=np.vstack([zero_row, last.weight]),
            bias=np.concatenate([[0.0], last.bias]),
            weight_magnitude=np.vstack([zero_row, last.weight_magnitude]),
            bias_magnitude=np.concatenate([[0.0], last.bias_magnitude]),
            negative_slope=(0.0, *last.negative_slope)
            if isinstance(last.negative_slope, tuple) else last.negative_slope,
        )
        name = view.output_names[0]
        return Network([*view.layers[:-1], layer], list(view.input_names),
                       [f"{name} <= 0", f"{name} > 0"])

    def to_torch(self, dtype: torch.dtype | None = None) -> torch.nn.Sequential:
        """Export as ``torch.nn.Sequential`` of ``Linear`` and activation modules in ``dtype``
        (``None``: float64, the IR's own values).

        In float32 the weights and biases are rounded to float32, which is exact for a layer
        read from a float32 model and not folded (:attr:`folded`): such a layer then runs the
        source's own ``Linear`` kernel on the source's own values, and LeakyReLU slopes are
        applied as the float32 kernel applies them (the IR stores the kernel's slope)."""
        import torch  # deferred: the numpy paths (point enclosures, readers) run without it

        dtype = torch.float64 if dtype is None else dtype
        modules: list[torch.nn.Module] = []
        for layer in self.layers:
            linear = torch.nn.Linear(layer.in_features, layer.out_features, dtype=dtype)
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(layer.weight))
                linear.bias.copy_(torch.from_numpy(layer.bias))
            modules.append(linear)
            if layer.activation == "relu":
                modules.append(torch.nn.ReLU())
            elif layer.activation == "leaky_relu":
                modules.append(_leaky_module(layer.negative_slope))
            elif layer.activation == "hardtanh":
                modules.append(torch.nn.Hardtanh(layer.min_val, layer.max_val))
        if self.head != "none":
            modules.append(_head_module(self.head))
        return torch.nn.Sequential(*modules)

    def describe(self) -> str:
        """One line per layer: sizes and activation; then the head, if any."""
        lines = [f"network: {self.input_size} inputs -> {self.output_size} outputs"]
        for index, layer in enumerate(self.layers):
            lines.append(
                f"  layer {index}: {layer.in_features} -> {layer.out_features}, {layer.activation}"
            )
        if self.head != "none":
            lines.append(f"  head: {self.head} over the {self.output_size} outputs")
        return "\n".join(lines)


_INDEXED = re.compile(r"^(?P<tensor>.*)\[(?P<index>\d+)\]$")


def positional_names(names: Sequence[str], letter: str) -> bool:
    """True when ``names`` are ``<letter>0, <letter>1, …`` or the elements ``t[0], t[1], …``
    of one tensor ``t`` (two or more): names that say only a position."""
    names = list(names)
    if names == [f"{letter}{index}" for index in range(len(names))]:
        return True
    matches = [_INDEXED.match(name) for name in names]
    if len(names) < 2 or not all(matches):
        return False
    tensors = {match.group("tensor") for match in matches if match}
    indices = [int(match.group("index")) for match in matches if match]
    return len(tensors) == 1 and indices == list(range(len(names)))


def _head_module(head: str) -> torch.nn.Module:
    """The ``torch.nn`` module of a head (softmax over the last dimension: the outputs)."""
    import torch  # deferred: the numpy paths (point enclosures, readers) run without it

    modules: dict[str, Callable[[], torch.nn.Module]] = {
        "sigmoid": torch.nn.Sigmoid,
        "softmax": functools.partial(torch.nn.Softmax, dim=-1),
        "log_softmax": functools.partial(torch.nn.LogSoftmax, dim=-1),
    }
    return modules[head]()


def apply_head(head: str, logits: torch.Tensor) -> torch.Tensor:
    """``head`` applied to a batch of logits ``(batch, outputs)`` (over the outputs)."""
    import torch  # deferred: the numpy paths (point enclosures, readers) run without it

    if head == "sigmoid":
        return torch.sigmoid(logits)
    if head == "softmax":
        return torch.softmax(logits, dim=-1)
    if head == "log_softmax":
        return torch.log_softmax(logits, dim=-1)
    return logits


def apply_head_numpy(head: str, logits: np.ndarray) -> np.ndarray:
    """:func:`apply_head` on a float64 numpy batch (no torch start-up cost, nor scipy's: the
    converters' self-checks run on every model load). Overflow-free forms: the sigmoid from
    ``exp(−|x|)``, the (log-)softmax after subtracting each row's maximum."""
    if head == "sigmoid":
        small = np.exp(-np.abs(logits))
        return np.where(logits >= 0, 1.0 / (1.0 + small), small / (1.0 + small))
    if head in ("softmax", "log_softmax"):
        shifted = logits - np.max(logits, axis=-1, keepdims=True)
        if head == "log_softmax":
            return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
        scaled = np.exp(shifted)
        return scaled / np.sum(scaled, axis=-1, keepdims=True)
    return logits


def head_error(head: str, reader: str) -> NetworkError:
    """The refusal of a value reader that cannot account for a classifier head: names the
    head, the reader and the ways forward."""
    return NetworkError(
        f"the network ends in a {head} head, and {reader} reads output values, which the "
        f"{head} changes; class audits read the logits (the {head} does not change the class), "
        "and bounds of the logits are `certgate bounds --logits`; or convert the model "
        f"without its final {head}"
    )


def _leaky_module(slope: float | tuple[float, ...]) -> torch.nn.Module:
    import torch  # deferred: the numpy paths (point enclosures, readers) run without it

    from verifier.torch_modules import PerNeuronLeakyReLU

    if isinstance(slope, tuple):
        return PerNeuronLeakyReLU(slope)
    return torch.nn.LeakyReLU(slope)


def fold_affine(outer: Layer, inner: Layer) -> dict[str, np.ndarray]:
    """Weights, biases and their magnitudes of ``outer``'s affine map after ``inner``'s
    (``inner``'s activation is ignored): ``W_o·W_i`` and ``W_o·b_i + b_o``, as keyword
    arguments for :class:`Layer`.

    The magnitudes are ``|W_o|·|W_i|`` and ``|W_o|·|b_i| + |b_o|`` over the operands'
    magnitudes; an entry that underflowed to zero although some term is non-zero
    (structurally: both factors non-zero) is raised to the smallest positive float, so a
    zero magnitude always means an exactly zero real coefficient. A coefficient proven to be
    its real value (:func:`_exact_entries`: operands that are their own values, every product
    and partial sum exact) keeps its absolute value as its magnitude, so an exact fold (an
    identity, a permutation, a scaling by a power of two) leaves no trace; every other
    non-zero coefficient gets a magnitude strictly above its absolute value (one float up
    where no term cancelled), so :attr:`Network.folded` flags every fold that rounded.

    ``fold_roundings`` (:class:`Layer`'s count) is ``f_o + f_i + n + 1`` for operands
    counted ``f_o`` and ``f_i`` (:attr:`Layer.fold_count`) and ``n`` the most products of
    two non-zero magnitudes in one coefficient's sum (at most the inner width), or ``None``
    when an operand is not counted, a product may have underflowed, or the count exceeds
    :data:`FOLD_COUNT_LIMIT`. Proof, with Higham's model ``fl(a ∘ b) = (a ∘ b)(1 + δ)``,
    ``|δ| ≤ u``, which holds for every product whose real value is at least ``2⁻¹⁰²²``
    (no underflow) and for every sum (a sum that lands below ``2⁻¹⁰²²`` is exact):

    * *No underflow.* Every product the fold forms — ``a·b`` of two non-zero coefficients
      and ``m_a·m_b`` of two non-zero magnitudes — is, per inner index ``j``, at least the
      product of the smallest non-zero entries of column ``j`` of the outer operand and row
      ``j`` of the inner one (and of the inner bias); the count is kept only where those
      products, computed in float, are at least ``2⁻¹⁰²¹``, so each real product is at least
      ``2⁻¹⁰²²``. Products with a zero factor are exact zeros.
    * *Coefficients.* A weight ``c̃ = fl(Σ_j a_j·b_j)`` (any order of summation, BLAS
      blocking or fused multiply-adds included) is ``Σ_j a_j·b_j·(1 + θ_n)``: each product
      meets one rounding and at most ``n − 1`` additions (a product with a factor of
      magnitude 0 is an exact zero, and adding it rounds nothing). A bias
      ``fl(Σ_j a_j·β_j + β_o)`` sums ``n + 1`` terms: ``θ_{n+1}``. Substituting the
      operands' own terms (``a_j = Σ t·(1 + θ_{f_o})``, ``b_j = Σ s·(1 + θ_{f_i})``,
      ``β_o`` likewise) gives ``c̃ = Σ t·s·(1 + θ_{f_o})(1 + θ_{f_i})(1 + θ_{n+1})``, and
      Higham's lemma 3.3, ``(1 + θ_a)(1 + θ_b) = 1 + θ_{a+b}``, makes every term ``t·s``
      (their sum is the real coefficient: the fold is exact in real arithmetic) meet at
      most ``f_o + f_i + n + 1``.
    * *Magnitudes.* ``fl(Σ_j m_a·m_b)`` (and ``+ m_β``) sums non-negative products the
      same way, each ``(1 + θ_{n+1})``; with ``m_a ≥ Σ |t|·(1 + θ'_{f_o})`` and
      ``m_b ≥ Σ |s|·(1 + θ'_{f_i})`` (all factors positive) it is at least
      ``Σ |t·s|·(1 + θ'_{f_o + f_i + n + 1})``. Raising a magnitude afterwards (to one
      float above ``|c̃|``, or from an underflowed 0 to the smallest subnormal) only
      increases it; an entry proven exact keeps ``|c̃|``, which is its single term ``c̃``.
    """
    outer_w, inner_w = outer.weight_magnitude, inner.weight_magnitude
    assert outer_w is not None and inner_w is not None
    assert outer.bias_magnitude is not None and inner.bias_magnitude is not None
    weight = outer.weight @ inner.weight
    bias = outer.weight @ inner.bias + outer.bias
    weight_magnitude = outer_w @ inner_w
    bias_magnitude = outer_w @ inner.bias_magnitude + outer.bias_magnitude
    outer_support = (outer_w != 0).astype(np.float64)
    weight_support = outer_support @ (inner_w != 0).astype(np.float64) > 0
    bias_support = (outer_support @ (inner.bias_magnitude != 0) > 0) | (
        outer.bias_magnitude != 0
    )
    tiny = SMALLEST_SUBNORMAL
    weight_magnitude = np.where(weight_support & (weight_magnitude == 0), tiny, weight_magnitude)
    bias_magnitude = np.where(bias_support & (bias_magnitude == 0), tiny, bias_magnitude)
    own = _own_values(outer) and _own_values(inner)
    exact_weight = own & _exact_entries(outer.weight, inner.weight, None, weight)
    exact_bias = own & _exact_entries(outer.weight, inner.bias[:, None], outer.bias,
                                      bias[:, None])[:, 0]
    return {
        "weight": weight,
        "bias": bias,
        "weight_magnitude": _rounded_magnitude(weight, weight_magnitude, exact_weight),
        "bias_magnitude": _rounded_magnitude(bias, bias_magnitude, exact_bias),
        "fold_roundings": _fold_count(outer, inner),
    }


FOLD_COUNT_LIMIT = 1_000_000
"""The largest count a folded layer keeps (:func:`fold_affine`): ``γ_f`` stays below
``1.2e-10``, so the bound propagators' test for a coefficient's certain sign
(``|c̃| > 1e-9·m̃``) stays sound for every counted layer."""

NORMAL_PRODUCT = 2.0**-1021
"""A float product at least this large is a product whose real value is a normal float
(at least ``2⁻¹⁰²²``): its rounding is relative (no underflow)."""


def _fold_count(outer: Layer, inner: Layer) -> int | None:
    """``fold_roundings`` of ``outer ∘ inner`` (:func:`fold_affine` proves it)."""
    outer_count, inner_count = outer.fold_count, inner.fold_count
    if outer_count is None or inner_count is None or not (
            _no_underflow(outer.weight, np.hstack([inner.weight, inner.bias[:, None]]))
            and _no_underflow(outer.weight_magnitude, np.hstack(
                [inner.weight_magnitude, inner.bias_magnitude[:, None]]))):
        return None
    assert outer.weight_magnitude is not None and inner.weight_magnitude is not None
    assert inner.bias_magnitude is not None
    inner_support = np.hstack([inner.weight_magnitude, inner.bias_magnitude[:, None]]) != 0
    products = (outer.weight_magnitude != 0).astype(np.float64) @ inner_support
    count = outer_count + inner_count + int(products.max(initial=0.0)) + 1
    return count if count <= FOLD_COUNT_LIMIT else None


def _no_underflow(outer: np.ndarray | None, inner: np.ndarray | None) -> bool:
    """Whether every product ``outer[i, j]·inner[j, k]`` of two non-zero entries is, in
    float, at least :data:`NORMAL_PRODUCT` (per ``j``: the smallest non-zero entries of
    column ``j`` and of row ``j``)."""
    assert outer is not None and inner is not None
    outer_abs, inner_abs = np.abs(outer), np.abs(inner)
    smallest_outer = np.where(outer_abs > 0, outer_abs, np.inf).min(axis=0, initial=np.inf)
    smallest_inner = np.where(inner_abs > 0, inner_abs, np.inf).min(axis=1, initial=np.inf)
    with np.errstate(over="ignore"):
        products = smallest_outer * smallest_inner
    return bool((products >= NORMAL_PRODUCT).all())


FOLD_CHECK_WORK = 20_000_000
"""Products above which :func:`_exact_entries` does not check a fold (it is then taken as
rounded: flagged, never trusted)."""


def _own_values(layer: Layer) -> bool:
    """Whether every coefficient of ``layer`` is its own real value (magnitude = |value|)."""
    assert layer.weight_magnitude is not None and layer.bias_magnitude is not None
    return bool((layer.weight_magnitude == np.abs(layer.weight)).all()
                and (layer.bias_magnitude == np.abs(layer.bias)).all())


def _exact_entries(outer: np.ndarray, inner: np.ndarray, added: np.ndarray | None,
                   result: np.ndarray) -> np.ndarray:
    """``(n, m)`` bool: where ``result`` is exactly ``outer @ inner`` (``+ added[:, None]``)
    in real arithmetic. Sufficient test: in the order ``k = 0, 1, …`` every non-zero product
    and every partial sum is exact (error-free transformations), and the exact sum equals
    ``result``; all False when the products number more than :data:`FOLD_CHECK_WORK`."""
    rows = [np.flatnonzero(outer[:, k]) for k in range(outer.shape[1])]
    columns = [np.flatnonzero(inner[k]) for k in range(inner.shape[0])]
    if sum(r.size * c.size for r, c in zip(rows, columns, strict=True)) > FOLD_CHECK_WORK:
        return np.zeros(result.shape, dtype=bool)
    total = np.zeros(result.shape)
    exact = np.ones(result.shape, dtype=bool)
    with np.errstate(all="ignore"):
        for k, (r, c) in enumerate(zip(rows, columns, strict=True)):
            if r.size == 0 or c.size == 0:
                continue
            cell = np.ix_(r, c)
            product, error = two_product(outer[r, k][:, None], inner[k, c][None, :])
            summed, rest = two_sum(total[cell], product)
            exact[cell] &= (error == 0) & (rest == 0)
            total[cell] = summed
        if added is not None:
            summed, rest = two_sum(total, added[:, None])
            exact &= rest == 0
            total = summed
    return exact & np.isfinite(total) & (total == result)


def _rounded_magnitude(value: np.ndarray, magnitude: np.ndarray, exact: np.ndarray
                       ) -> np.ndarray:
    """``|value|`` where the folded coefficient is exact; elsewhere a magnitude strictly
    above ``|value|`` unless both are zero (:func:`fold_affine`)."""
    absolute = np.abs(value)
    raised = np.where(magnitude > absolute, magnitude, up_array(absolute))
    return np.where(exact, absolute, np.where(magnitude == 0, magnitude, raised))


def compose(first: Network, second: Network) -> Network:
    """The network ``second ∘ first`` (``first``'s outputs feed ``second``'s inputs).

    When ``first`` ends in an affine layer without activation it is merged into ``second``'s
    first layer (exact in real arithmetic), so composing adds no layer. The result keeps
    ``second``'s head; ``first`` must have none.
    """
    if first.output_size != second.input_size:
        raise NetworkError(
            f"cannot compose: the first network has {first.output_size} outputs, the second "
            f"{second.input_size} inputs"
        )
    if first.head != "none":
        raise NetworkError(
            f"cannot compose: the first network ends in a {first.head} head, which is read "
            "only as a network's last operation"
        )
    front, tail = list(first.layers), list(second.layers)
    if front[-1].activation == "none":
        tail[0] = replace(tail[0], **fold_affine(tail[0], front.pop()))
    return Network([*front, *tail], list(first.input_names), list(second.output_names),
                   second.head)


def min_feature_transform(input_names: list[str], target: str, other: str) -> Network:
    """Pre-processing that replaces ``target`` by ``min(target, other)`` and passes every other
    input through: ``min(a, b) = a − relu(a − b)``, one pass-through/ReLU layer plus an affine
    layer. Exact."""
    for name in (target, other):
        if name not in input_names:
            raise NetworkError(f"unknown input {name!r}; inputs: {', '.join(input_names)}")
    width = len(input_names)
    t, o = input_names.index(target), input_names.index(other)
    gap = np.zeros((1, width))
    gap[0, t], gap[0, o] = 1.0, -1.0
    first = Layer(
        np.vstack([np.eye(width), gap]), np.zeros(width + 1), "leaky_relu",
        negative_slope=(*([1.0] * width), 0.0),
    )
    combine = np.hstack([np.eye(width), np.zeros((width, 1))])
    combine[t, width] = -1.0
    second = Layer(combine, np.zeros(width), "none")
    return Network([first, second], list(input_names), list(input_names))
