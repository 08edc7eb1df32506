"""Load and save networks by file name.

``load_network`` picks the reader from the suffix (or ``fmt``): ``.onnx``, ``.nnet``,
``.json`` (``file.json#KEY`` selects one network of several), ``.pt``/``.pth``/``.ts`` (state
dict or TorchScript archive, told apart by content; ``.ts`` is the common name of a
TorchScript archive) and ``.pt2`` (``torch.export`` archive). ``save_network`` writes ``.json``
or ``.onnx``. :data:`FORMATS_BY_SUFFIX` is the one list of network suffixes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from verifier.network import Network, NetworkError

FORMATS_BY_SUFFIX = {
    ".onnx": "onnx",
    ".nnet": "nnet",
    ".json": "json",
    ".pt": "torch",
    ".pth": "torch",
    ".ts": "torch",
    ".pt2": "pt2",
}
LOAD_FORMATS = ("onnx", "nnet", "json", "torch", "pt2")
SAVE_FORMATS = ("json", "onnx")


def _split_key(path: str | Path) -> tuple[Path, str | None]:
    """``file.json#KEY`` → (``file.json``, ``KEY``) unless a file is literally named so."""
    text = str(path)
    if "#" in text and not Path(text).exists():
        base, key = text.rsplit("#", 1)
        return Path(base), key or None
    return Path(text), None


def _format(path: Path, fmt: str | None, allowed: tuple[str, ...]) -> str:
    chosen = fmt or FORMATS_BY_SUFFIX.get(path.suffix.lower())
    if chosen is None:
        raise NetworkError(
            f"cannot tell the network format of {path} from its suffix {path.suffix!r}; "
            f"known suffixes: {', '.join(FORMATS_BY_SUFFIX)} (or pass fmt=...)"
        )
    if chosen not in allowed:
        raise NetworkError(
            f"format {chosen!r} is not supported here; supported: {', '.join(allowed)}"
        )
    return chosen


def load_network(path: str | Path, *, fmt: str | None = None, **options: Any) -> Network:
    """Read a network file into the IR; every reader checks its result against the source.

    ``options`` go to the reader: ``verify`` (all), ``input_names``/``output_names`` (ONNX,
    torch, nnet), ``activation`` and its parameters (state dicts: see
    :mod:`verifier.convert.torch_files`), ``with_input_normalisation`` (nnet: merge the input
    normalisation into layer 0, see :meth:`NNetFile.network_with_input_normalisation`).
    """
    file_path, key = _split_key(path)
    if not file_path.is_file():
        raise NetworkError(f"network file not found: {file_path}")
    chosen = _format(file_path, fmt, LOAD_FORMATS)
    if key is not None and chosen != "json":
        raise NetworkError(f"'#{key}' selects a network in a JSON file; {file_path} is {chosen}")
    try:
        return _load(file_path, chosen, key, options)
    except TypeError as error:
        raise NetworkError(f"bad option for a {chosen} network file: {error}") from error


def load_classifier(path: str | Path, *, fmt: str | None = None,
                    nnet_normalises_inputs: bool = True, **options: Any
                    ) -> tuple[Network, tuple[np.ndarray, np.ndarray] | None]:
    """A model file as a classifier on the inputs users give it, with the input domain the
    file declares.

    The network is :meth:`Network.as_classifier` of the file's (one output: class 1 iff the
    logit is > 0). A ``.nnet`` file's domain is the header's ``[min, max]`` box, inside which
    the file's input clipping is the identity; its network reads raw inputs: with
    ``nnet_normalises_inputs`` (the format's definition) the header's normalisation
    ``(x − mean)/range`` is merged into layer 0; without it the weights apply to the raw values
    directly, as in tools that ignore the normalisation rows (FairQuant's networks are
    evaluated so by FairQuant). Other formats declare no domain (``None``). ``options`` as for
    :func:`load_network`.
    """
    file_path, _ = _split_key(path)
    chosen = _format(file_path, fmt, LOAD_FORMATS)
    if chosen != "nnet":
        return load_network(path, fmt=fmt, **options).as_classifier(), None
    if not file_path.is_file():
        raise NetworkError(f"network file not found: {file_path}")
    from verifier.convert.nnet import read_nnet

    parsed = read_nnet(file_path, **options)
    domain = (parsed.input_mins.copy(), parsed.input_maxs.copy())
    if np.any(domain[0] > domain[1]):
        bad = int(np.flatnonzero(domain[0] > domain[1])[0])
        raise NetworkError(f"{file_path}: input {bad} has minimum above maximum")
    network = parsed.network_with_input_normalisation() if nnet_normalises_inputs else (
        parsed.network)
    return network.as_classifier(), domain


def model_companions(path: Path) -> list[Path]:
    """The files a network file's content continues in: an ONNX model's external data files
    (:func:`verifier.convert.onnx_graph.external_data_files`); none for other formats."""
    if FORMATS_BY_SUFFIX.get(path.suffix.lower()) != "onnx":
        return []
    from verifier.convert.onnx_graph import external_data_files

    return external_data_files(path)


def _load(path: Path, chosen: str, key: str | None, options: dict[str, Any]) -> Network:
    if chosen == "onnx":
        from verifier.convert.onnx_graph import from_onnx

        return from_onnx(path, **options)
    if chosen == "nnet":
        from verifier.convert.nnet import read_nnet

        normalised = bool(options.pop("with_input_normalisation", False))
        parsed = read_nnet(path, **options)
        return parsed.network_with_input_normalisation() if normalised else parsed.network
    if chosen == "json":
        from verifier.convert.json_format import read_json_network

        return read_json_network(path, key, **options)
    if chosen == "torch":
        from verifier.convert.torch_files import load_torch_file

        return load_torch_file(path, **options)
    from verifier.convert.torch_files import load_exported_program

    return load_exported_program(path, **options)


def save_network(network: Network, path: str | Path, *, fmt: str | None = None) -> None:
    """Write ``network`` as JSON (exact) or ONNX (float64 Gemm graph), by suffix or ``fmt``."""
    file_path = Path(path)
    chosen = _format(file_path, fmt, SAVE_FORMATS)
    if chosen == "json":
        from verifier.convert.json_format import write_json_network

        write_json_network(network, file_path)
        return
    import onnx

    from verifier.convert.onnx_export import network_to_onnx

    onnx.save(network_to_onnx(network), str(file_path))
