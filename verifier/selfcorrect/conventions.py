"""Logit conventions: the SC-layer's constraints assume that the predicted class is the argmax.

The layer orders the logits of the network's classifier view
(:meth:`verifier.network.Network.as_classifier`): a classifier head is dropped, since every head
is strictly increasing in the order of the logits, so a strict order the layer establishes
between logits holds between the head's outputs in real arithmetic; re-applying the head in
floating point could round two strictly ordered logits to equal probabilities (a sigmoid is
1.0 in float64 from about 37 on), so the corrected variant outputs logits. A single output is
the two logits ``(0, z)`` of a binary classifier.

Networks that predict the *argmin* (the ACAS Xu ``.nnet``/ONNX networks: the advisory is the
smallest score) are brought to the max-logit convention of paper 004 by negating the last
layer's weights and bias, which negates every output exactly.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from verifier.network import Network, NetworkError

if TYPE_CHECKING:
    import torch


def scored_network(network: Network, negate: bool = False) -> Network:
    """The network whose outputs the SC-layer orders: the classifier view of ``network``
    (module docstring), with every output negated when ``negate`` (argmin networks)."""
    view = network.as_classifier()
    return negate_outputs(view) if negate else view


def scored_module(network: Network, negate: bool = False,
                  dtype: torch.dtype | None = None) -> torch.nn.Module:
    """The torch module of :func:`scored_network` in ``dtype`` (``None``: float64): the same
    outputs in real arithmetic, computed with the model's own layers. A single-logit network
    keeps its one-row last layer and gets its ``0`` by concatenation
    (:class:`~verifier.torch_modules.BinaryLogits`): the classifier view's two-row layer
    computes ``z`` with another float32 product, which rounded ``z`` differently from the
    model's on 5,726 of 20,000 rows of a 6-16-1 net.

    Raises:
        NetworkError: as :func:`scored_network`.
    """
    import torch  # deferred like Network.to_torch's

    from verifier.torch_modules import BinaryLogits

    scored = scored_network(network, negate)
    view = network.logits()
    if view.output_size != 1:
        return scored.to_torch(dtype)
    single = negate_outputs(view) if negate else view
    return torch.nn.Sequential(single.to_torch(dtype), BinaryLogits())


def negate_outputs(network: Network) -> Network:
    """The same network with every output negated (``y' = −y``), exactly: a folded last
    layer keeps its magnitudes and its count (negating a coefficient negates its real terms
    and rounds nothing), so the result is as folded as ``network``.

    Raises:
        NetworkError: the network has a head, or the last layer has an activation (negating
            its affine map would not negate its output).
    """
    if network.head != "none":
        raise NetworkError(
            f"cannot negate the outputs of a network with a {network.head} head; negate its "
            "logits (scored_network)"
        )
    last = network.layers[-1]
    if last.activation != "none":
        raise NetworkError(
            f"cannot negate the outputs: the last layer has activation {last.activation!r}, "
            "expected 'none'"
        )
    negated = replace(last, weight=-last.weight, bias=-last.bias)  # magnitudes and count kept
    return Network(
        [*network.layers[:-1], negated], list(network.input_names), list(network.output_names)
    )
