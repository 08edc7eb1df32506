"""What an unsupported operator usually is in the user's model, for the readers' errors.

The ONNX, ``torch.fx``, ``torch.nn`` and TorchScript readers each name the operator they cannot
convert; a few operators are not what the user wrote (exact ``torch.nn.GELU`` exports to ONNX
as an ``Erf`` node, and decomposed graphs may carry ``erf``), so :func:`operator_hint` adds
what they came from and which activations certgate does verify. One table, used by all readers.
"""

from __future__ import annotations

SUPPORTED_ACTIVATIONS = (
    "ReLU, LeakyReLU/PReLU (slopes in [0, 1]), Hardtanh/ReLU6/Clip, and Sigmoid/Softmax/LogSoftmax "
    "as the classifier head only"
)
_RETRAIN = f"retrain with one of the supported activations: {SUPPORTED_ACTIVATIONS}"
_GELU = f"GELU (torch.nn.GELU) is not piecewise linear and is not supported; {_RETRAIN}"
_SMOOTH = {
    "tanh": "Tanh",
    "elu": "ELU",
    "celu": "CELU",
    "selu": "SELU",
    "softplus": "Softplus (also the first step of Mish)",
    "softsign": "Softsign",
    "mish": "Mish",
    "silu": "SiLU/Swish",
    "hardswish": "HardSwish",
}
_ROW_MEAN = (
    "a mean over a row's features is what x.mean(dim=1) in forward exports to (standardising "
    "each row by its own mean): it combines the data with itself, so the layers no longer "
    "form a chain; standardise with constants (buffers or Python floats) instead"
)
_LAYER_NORM = (
    "LayerNorm divides each row by its own standard deviation: not piecewise linear, so not "
    "supported; use BatchNorm1d (in eval mode) or standardise with constants"
)
_HINTS = {
    "erf": f"Erf is what exact GELU becomes when exported: {_GELU}",
    "gelu": _GELU,
    "hardsigmoid": (
        "HardSigmoid is piecewise linear but not read as one operator; write it as "
        "torch.clamp(x / 6 + 0.5, 0, 1), which certgate verifies"
    ),
    "reducemean": _ROW_MEAN,
    "mean": _ROW_MEAN,
    "layernormalization": _LAYER_NORM,
    "layer_norm": _LAYER_NORM,
    "native_layer_norm": _LAYER_NORM,
    "cast": (
        "a Cast of the data tensor changes the precision the model computes in (x.float() or "
        "x.double() in forward); export the model in one float type, without the cast"
    ),
    **{
        key: f"{name} is not piecewise linear and is not supported; {_RETRAIN}"
        for key, name in _SMOOTH.items()
    },
}
PRODUCT_HINT = (
    "; a product of two data tensors is what SiLU/Swish (x * sigmoid(x)) and gated units "
    f"export to: not piecewise linear, so not supported; {_RETRAIN}"
)
"""Said where a reader meets the product of two data tensors (an ONNX ``Mul``)."""
SUM_HINT = (
    "; a sum of two data tensors is what a residual (skip) connection x + f(x) exports to: "
    "the graph branches, and certgate reads only networks whose layers form a chain"
)
"""Said where a reader meets the sum or difference of two data tensors (an ONNX ``Add``)."""


def operator_hint(name: str) -> str:
    """``"; <explanation>"`` for an operator (any reader's spelling: ``Erf``, ``erf``,
    ``GELU``) whose origin or replacement is worth saying, else ``""``."""
    hint = _HINTS.get(name.lower())
    return f"; {hint}" if hint else ""
