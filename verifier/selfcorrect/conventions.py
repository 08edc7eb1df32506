"""Logit conventions: the SC-layer's constraints assume that the predicted class is the argmax.

Networks that predict the *argmin* (the ACAS Xu ``.nnet``/ONNX networks: the advisory is the
smallest score) are brought to the max-logit convention of paper 004 by negating the last
layer's weights and bias, which negates every output exactly.
"""

from __future__ import annotations

from verifier.network import Layer, Network, NetworkError


def negate_outputs(network: Network) -> Network:
    """The same network with every output negated (``y' = −y``), exactly.

    Raises:
        NetworkError: the last layer has an activation (negating its affine map would not
            negate its output).
    """
    last = network.layers[-1]
    if last.activation != "none":
        raise NetworkError(
            f"cannot negate the outputs: the last layer has activation {last.activation!r}, "
            "expected 'none'"
        )
    negated = Layer(-last.weight, -last.bias, "none")
    return Network(
        [*network.layers[:-1], negated], list(network.input_names), list(network.output_names)
    )
