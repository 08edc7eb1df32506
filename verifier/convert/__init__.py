"""Converters from model formats into the network IR (:mod:`verifier.network`), and back.

Every converter checks its result against the source model on random inputs and raises
:class:`~verifier.network.NetworkError` on a disagreement (``verify=False`` skips the check);
the tolerance is stated in :mod:`verifier.convert.self_check`.
"""

from verifier.convert.files import load_classifier, load_network, save_network
from verifier.convert.json_format import network_from_json, network_to_json
from verifier.convert.nnet import NNetFile, read_nnet
from verifier.convert.onnx_export import network_to_onnx
from verifier.convert.onnx_graph import from_onnx
from verifier.convert.torch_files import network_from_state_dict
from verifier.convert.torch_module import from_torch

__all__ = [
    "NNetFile",
    "from_onnx",
    "from_torch",
    "load_classifier",
    "load_network",
    "network_from_json",
    "network_from_state_dict",
    "network_to_json",
    "network_to_onnx",
    "read_nnet",
    "save_network",
]
