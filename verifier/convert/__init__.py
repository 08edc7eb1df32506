"""Converters from model formats into the network IR (:mod:`verifier.network`), and back.

Every converter checks its result against the source model on random inputs and raises
:class:`~verifier.network.NetworkError` on a disagreement (``verify=False`` skips the check);
the tolerance is stated in :mod:`verifier.convert.self_check`.

The package exports what reads and writes files and the numpy-only formats (JSON, ``.nnet``).
The converters of in-memory models live in their modules, imported from there, so that
loading a ``.json`` or ``.nnet`` network (the CLI's common path) imports neither onnx nor the
torch converters: :func:`verifier.convert.torch_module.from_torch`,
:func:`verifier.convert.torch_files.network_from_state_dict`,
:func:`verifier.convert.onnx_graph.from_onnx` and
:func:`verifier.convert.onnx_export.network_to_onnx`. :func:`load_network` and
:func:`save_network` import the reader or writer of the file's format when they need it.
"""

from verifier.convert.files import load_classifier, load_network, model_companions, save_network
from verifier.convert.json_format import network_from_json, network_to_json
from verifier.convert.nnet import NNetFile, read_nnet

__all__ = [
    "NNetFile",
    "load_classifier",
    "load_network",
    "model_companions",
    "network_from_json",
    "network_to_json",
    "read_nnet",
    "save_network",
]
