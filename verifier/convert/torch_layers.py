"""The ``torch.nn`` layers the IR reads, applied to an :class:`AffineChain`, and the check of
a converted network against its source module. Shared by :mod:`verifier.convert.torch_module`
(``nn.Sequential``), :mod:`verifier.convert.torch_fx` (graph modules) and
:mod:`verifier.convert.torchscript`."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import torch

from verifier.convert.affine_chain import AffineChain
from verifier.convert.self_check import assert_agrees
from verifier.convert.unsupported import operator_hint
from verifier.network import Network, NetworkError
from verifier.torch_modules import PerNeuronLeakyReLU

ModuleRule = Callable[[AffineChain, torch.nn.Module, str], None]


def _array(tensor: torch.Tensor | None) -> np.ndarray | None:
    return None if tensor is None else tensor.detach().cpu().to(torch.float64).numpy()


def _linear(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    chain.linear_last_dim(_array(module.weight), _array(module.bias))


def _relu(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    chain.relu()


def _leaky_relu(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    slope = chain.kernel_scalar(float(module.negative_slope))
    if not 0.0 <= slope <= 1.0:
        raise NetworkError(f"module {name!r}: LeakyReLU slope {slope} is outside [0, 1]")
    chain.leaky_relu(slope)


def _per_neuron_leaky_relu(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    slopes = _array(module.slopes)
    if slopes is None or not np.all((slopes >= 0.0) & (slopes <= 1.0)):
        raise NetworkError(f"module {name!r}: per-neuron slopes must lie in [0, 1]")
    chain.leaky_relu(slopes)


def prelu_slopes(chain: AffineChain, slopes: np.ndarray, where: str) -> None:
    """``torch.nn.PReLU`` (``F.prelu``, ``aten.prelu``): ``max(0, h) + a·min(0, h)`` with one
    slope ``a``, or one per channel (the first feature dimension, the batch's dimension 1, as
    torch applies it); with slopes in [0, 1] that is the IR's LeakyReLU, exactly (the kernel
    multiplies by the slopes as stored, which the IR holds unrounded)."""
    slopes = np.asarray(slopes, dtype=np.float64).reshape(-1)
    if not np.all((slopes >= 0.0) & (slopes <= 1.0)):
        raise NetworkError(f"{where}: PReLU slopes must lie in [0, 1], got "
                           f"{slopes.min()} to {slopes.max()}")
    if slopes.size == 1:
        chain.leaky_relu(float(slopes[0]))
        return
    if not chain.known:
        chain.assume_shape((slopes.size,), where)
    shape = chain.shape or ()
    if shape[0] != slopes.size:
        raise NetworkError(f"{where}: {slopes.size} PReLU slopes for a tensor of per-sample "
                           f"shape {shape} (one per channel, its first dimension)")
    chain.leaky_relu(slopes.reshape((slopes.size,) + (1,) * (len(shape) - 1)))


def _prelu(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    prelu_slopes(chain, _array(module.weight), f"module {name!r}")


def _hardtanh(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    chain.clip(chain.kernel_scalar(float(module.min_val)),
               chain.kernel_scalar(float(module.max_val)))


def _identity(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    """Identity and eval-mode Dropout leave the tensor unchanged."""
    if module.training and isinstance(module, torch.nn.Dropout) and module.p > 0:
        raise NetworkError(f"module {name!r}: Dropout is in training mode; call model.eval()")


def _flatten(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    flatten_features(chain, int(module.start_dim), int(module.end_dim), name)


def flatten_features(chain: AffineChain, start_dim: int, end_dim: int, name: str) -> None:
    """``torch.flatten(x, start_dim, end_dim)`` on a batch: the batch dimension must stay."""
    if not chain.known:
        if start_dim == 1 and end_dim == -1:
            return
        raise NetworkError(f"{name!r}: flatten of a tensor of unknown shape")
    shape = chain.shape or ()
    rank = len(shape) + 1
    start = start_dim % rank
    end = end_dim % rank
    if start == 0:
        raise NetworkError(f"{name!r}: flatten from dimension 0 would merge the batch")
    if end < start:
        raise NetworkError(f"{name!r}: flatten with end_dim {end_dim} before start_dim {start_dim}")
    merged = int(np.prod(shape[start - 1 : end]))
    chain.reshape((*shape[: start - 1], merged, *shape[end:]))


def _batch_norm(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    if module.training or module.running_mean is None:
        raise NetworkError(
            f"module {name!r}: BatchNorm1d uses batch statistics (training mode or "
            "track_running_stats=False); call model.eval() on a model with running statistics"
        )
    chain.batch_norm(
        _array(module.running_mean),
        _array(module.running_var),
        _array(module.weight),
        _array(module.bias),
        float(module.eps),
        f"module {name!r}",
    )


def _sigmoid(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    chain.head("sigmoid", f"module {name!r}")


def _softmax(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    kind = "softmax" if isinstance(module, torch.nn.Softmax) else "log_softmax"
    chain.head(kind, f"module {name!r}", None if module.dim is None else int(module.dim))


MODULE_RULES: dict[type[torch.nn.Module], ModuleRule] = {
    torch.nn.Linear: _linear,
    torch.nn.ReLU: _relu,
    torch.nn.LeakyReLU: _leaky_relu,
    PerNeuronLeakyReLU: _per_neuron_leaky_relu,
    torch.nn.PReLU: _prelu,
    torch.nn.Hardtanh: _hardtanh,
    torch.nn.ReLU6: _hardtanh,
    torch.nn.Identity: _identity,
    torch.nn.Dropout: _identity,
    torch.nn.Flatten: _flatten,
    torch.nn.BatchNorm1d: _batch_norm,
    torch.nn.Sigmoid: _sigmoid,
    torch.nn.Softmax: _softmax,
    torch.nn.LogSoftmax: _softmax,
}
"""One rule per module class; ``Sigmoid``, ``Softmax`` and ``LogSoftmax`` are read only as the
model's last operation (a classifier head, :meth:`AffineChain.head`)."""
SUPPORTED_MODULES = ("Sequential", *(kind.__name__ for kind in MODULE_RULES))


def apply_module(chain: AffineChain, module: torch.nn.Module, name: str) -> None:
    """Apply one module (a ``Sequential`` recursively) to the chain, or raise naming it."""
    if type(module) is torch.nn.Sequential:
        for child_name, child in module.named_children():
            apply_module(chain, child, f"{name}.{child_name}" if name else child_name)
        return
    rule = MODULE_RULES.get(type(module))
    if rule is None:
        raise NetworkError(
            f"unsupported module {type(module).__name__} at {name or '<root>'!r}; supported: "
            f"{', '.join(SUPPORTED_MODULES)}{operator_hint(type(module).__name__)}"
        )
    try:
        rule(chain, module, name)
    except NetworkError as error:
        where = f"module {name or '<root>'!r}"
        if where in str(error):
            raise
        raise NetworkError(f"{where} ({type(module).__name__}): {error}") from error


def parameter_dtype(module: torch.nn.Module) -> torch.dtype:
    """The float type ``module`` computes in: that of its first float parameter or buffer
    (float32 without any)."""
    for tensor in (*module.parameters(), *module.buffers()):
        if tensor.is_floating_point():
            return tensor.dtype
    return torch.float32


def refuse_reduced_precision(dtype: torch.dtype) -> None:
    """Refuse a model computing in float16 or bfloat16 (``NetworkError`` naming the fix).

    certgate certifies the real-arithmetic network of a model's weights. A float32 model's
    kernels stay within ~2⁻²⁴ of it per operation; a float16 (2⁻¹¹) or bfloat16 (2⁻⁸) model's
    round every layer's output so coarsely that its classes differ from that network's on a
    share of the population no proof accounts for: a bfloat16 copy of a 15-input network
    differed on 1.23e-3 of the mass, and PV proved it satisfied 0.00002 above a ratio the
    model as torch runs it misses (docs/decisions.md, 2026-11-30). ONNX files of float16
    are refused the same way."""
    significant_bits = {torch.float16: 11, torch.bfloat16: 8}.get(dtype)
    if significant_bits is not None:
        raise NetworkError(
            f"the model computes in {dtype}: its kernels round every layer's output to "
            f"{significant_bits} significant bits, so its classes differ from "
            "the real-arithmetic network certgate certifies on a share of the population "
            "that no proof accounts for; certify and deploy model.float() (or "
            "model.double()) instead"
        )


def module_chain(module: torch.nn.Module, feature_shape: Sequence[int] | None = None,
                 dtype: torch.dtype | None = None) -> AffineChain:
    """An empty chain for ``module``'s layers, reading scalars as its kernels apply them for
    ``dtype`` (default: the module's :func:`parameter_dtype`): in float64 for float64, in
    float32 for float32; float16 and bfloat16 are refused (:func:`refuse_reduced_precision`)."""
    chosen = parameter_dtype(module) if dtype is None else dtype
    refuse_reduced_precision(chosen)
    return AffineChain(feature_shape, np.float64 if chosen == torch.float64 else np.float32)


def torch_source(module: torch.nn.Module) -> Callable[[np.ndarray], np.ndarray]:
    """Evaluate ``module`` on numpy arrays (in the arrays' dtype) without gradients."""

    def run(inputs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            output = module(torch.from_numpy(np.ascontiguousarray(inputs)))
        if isinstance(output, tuple | list) and len(output) == 1:
            output = output[0]
        if not isinstance(output, torch.Tensor):
            raise NetworkError(f"the model returns {type(output).__name__}, expected one tensor")
        return output.detach().cpu().to(torch.float64).numpy()

    return run


def check_against_module(
    network: Network,
    module: torch.nn.Module,
    input_shape: Sequence[int],
    what: str,
    *,
    batch_size: int | None = None,
    own_dtype: bool = False,
) -> None:
    """Check ``network`` against ``module`` on random inputs.

    The check runs a float64 copy of the module (float32 weights are exact in float64) when
    that copy runs; with ``own_dtype`` (the converter rounded a scalar to what the kernels
    apply, a float32 LeakyReLU's slope, :meth:`AffineChain.kernel_scalar`, which a float64
    copy would apply unrounded) a float32 copy, with the float32 tolerance of
    :mod:`verifier.convert.self_check`. A graph whose copy does not run (it pins its
    dtype: constants, guards) is checked in its own dtype.
    """
    wanted = torch.float32 if own_dtype else torch.float64
    copied = _runnable_copy(module, wanted, input_shape, batch_size)
    source, dtype = ((module, parameter_dtype(module)) if copied is None
                     else (copied, wanted))
    assert_agrees(network, torch_source(source), input_shape,
                  torch.empty(0, dtype=dtype).numpy().dtype, what, batch_size=batch_size)


def _runnable_copy(module: torch.nn.Module, dtype: torch.dtype, input_shape: Sequence[int],
                   batch_size: int | None) -> torch.nn.Module | None:
    """A copy of ``module`` in ``dtype``, or None where the copy does not run."""
    with warnings.catch_warnings():
        # torch warns about its own internals when copying exported or scripted modules
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", UserWarning)
        copied = copy.deepcopy(module).to(dtype)
    zeros = np.zeros((batch_size or 2, *input_shape), torch.empty(0, dtype=dtype).numpy().dtype)
    try:
        torch_source(copied)(zeros)
    except (RuntimeError, TypeError, AssertionError):
        return None
    return copied
