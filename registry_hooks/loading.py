"""Load a model to audit — from the registry, a run, or a local file — as the verifier's IR,
together with the population model that travels with it.

MLflow models are downloaded once into a work directory and read from there: the PyTorch
flavour in both its formats (``pt2``, which loads back as a ``torch.fx.GraphModule``, and
``pickle``, the original ``nn.Module``), and the ONNX flavour (an ``onnx.ModelProto``). Each is
converted with :mod:`verifier.convert`, which checks the IR against the source model on random
inputs. Input and output names come from the model's metadata (``certgate.input_names``,
``certgate.output_names``, written by :func:`registry_hooks.publish.log_model_with_population`)
or a column-based signature.

The population model is the model version's ``extra_files/population_model.json`` (its path
recorded in the metadata key ``certgate.population``) unless an explicit URI overrides it: a
local JSON file, or any MLflow artifact URI (a file, or a directory holding
``population_model.json``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities.model_registry import ModelVersion
from mlflow.models import Model

from registry_hooks.connection import Registry, RegistryError, registry_errors
from registry_hooks.uris import parse_model_uri, registered_uri, resolve_version
from verifier.errors import CertgateInputError
from verifier.network import Network, NetworkError

POPULATION_FILE = "population_model.json"
METADATA_POPULATION = "certgate.population"
METADATA_INPUT_NAMES = "certgate.input_names"
METADATA_OUTPUT_NAMES = "certgate.output_names"
METADATA_INPUT_DOMAIN = "certgate.input_domain"


@dataclass
class LoadedModel:
    """A model converted to the IR, and where it came from.

    ``flavor`` is ``pytorch``, ``onnx`` or ``file``; ``serialization`` is ``pt2``, ``pickle``,
    ``onnx`` or the local file's suffix. ``model_version`` is set for registry URIs;
    ``local_dir`` is the downloaded MLflow model directory (``None`` for a plain file).
    """

    uri: str
    network: Network
    flavor: str
    serialization: str
    metadata: dict[str, Any] = field(default_factory=dict)
    local_dir: Path | None = None
    model_version: ModelVersion | None = None

    @property
    def name(self) -> str | None:
        return self.model_version.name if self.model_version is not None else None

    @property
    def version(self) -> str | None:
        return str(self.model_version.version) if self.model_version is not None else None

    @property
    def model_id(self) -> str | None:
        """The MLflow 3 logged-model id behind the version (for linking metrics), if any."""
        if self.model_version is None:
            return None
        if self.model_version.model_id:
            return str(self.model_version.model_id)
        source = self.model_version.source or ""
        return source.removeprefix("models:/") if source.startswith("models:/m-") else None

    def input_domain(self) -> dict[str, tuple[float, float]] | None:
        """The input domain declared with the model (``certgate.input_domain``), if any."""
        declared = self.metadata.get(METADATA_INPUT_DOMAIN)
        if declared is None:
            return None
        if not isinstance(declared, dict):
            raise CertgateInputError(
                f"model metadata {METADATA_INPUT_DOMAIN} must map input names to [low, high]"
            )
        domain = {}
        for name, bounds in declared.items():
            if not (isinstance(bounds, list | tuple) and len(bounds) == 2):
                raise CertgateInputError(
                    f"model metadata {METADATA_INPUT_DOMAIN}.{name}: expected [low, high]"
                )
            low, high = (float("-inf") if bounds[0] is None else float(bounds[0]),
                         float("inf") if bounds[1] is None else float(bounds[1]))
            domain[str(name)] = (low, high)
        return domain


def load_model(uri: str, registry: Registry | None, workdir: Path) -> LoadedModel:
    """Resolve, download and convert the model ``uri`` names (see :mod:`registry_hooks.uris`).

    Registry aliases are resolved to a version first, and that exact version is downloaded.
    Raises :class:`CertgateInputError` subclasses naming the URI on every failure.
    """
    reference = parse_model_uri(uri)
    if reference.kind == "local_file":
        from verifier.convert import load_network

        assert reference.path is not None
        with unreadable_model(uri):
            network = load_network(reference.path)
        return LoadedModel(uri, network, "file", reference.path.suffix.lstrip(".").lower())
    if reference.kind == "local_mlflow_dir":
        assert reference.path is not None
        return load_mlflow_dir(reference.path, uri)
    if registry is None:
        raise RegistryError(f"{uri} needs a tracking server or store; none is configured")
    version = resolve_version(registry, reference) if reference.in_registry else None
    download_uri = registered_uri(version.name, version.version) if version else uri
    local = download(download_uri, workdir / "model", f"cannot download model {uri}")
    loaded = load_mlflow_dir(local, uri)
    loaded.model_version = version
    return loaded


def download(artifact_uri: str, destination: Path, action: str) -> Path:
    """Download an MLflow artifact (file or directory) below ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    with registry_errors(action):
        return Path(mlflow.artifacts.download_artifacts(artifact_uri=artifact_uri,
                                                        dst_path=str(destination)))


def load_mlflow_dir(path: Path, uri: str) -> LoadedModel:
    """Convert the MLflow model stored in directory ``path`` (pytorch or onnx flavour)."""
    mlmodel = path / "MLmodel"
    if not mlmodel.is_file():
        raise CertgateInputError(f"{uri}: no MLmodel file in {path}; not an MLflow model")
    with unreadable_model(uri):
        model = Model.load(str(mlmodel))
    metadata = dict(model.metadata or {})
    input_names, output_names = _names(model, metadata)
    if "pytorch" in model.flavors:
        from verifier.convert import from_torch

        with registry_errors(f"cannot load the PyTorch model {uri}"), unreadable_model(uri):
            module = mlflow.pytorch.load_model(str(path))
        serialization = "pt2" if any((path / "data").glob("*.pt2")) else "pickle"
        if serialization == "pickle":
            module.eval()
        network = from_torch(module)
        flavor = "pytorch"
    elif "onnx" in model.flavors:
        from verifier.convert import from_onnx

        with registry_errors(f"cannot load the ONNX model {uri}"), unreadable_model(uri):
            proto = mlflow.onnx.load_model(str(path))
        network = from_onnx(proto)
        flavor = serialization = "onnx"
    else:
        raise CertgateInputError(
            f"{uri}: flavours {', '.join(sorted(model.flavors))} cannot be audited; log the "
            "model with the pytorch or onnx flavour"
        )
    network = _renamed(network, input_names, output_names, uri)
    return LoadedModel(uri, network, flavor, serialization, metadata, path)


@contextmanager
def unreadable_model(uri: str) -> Iterator[None]:
    """Re-raise any failure to read a stored model's files (truncated or corrupt weights,
    a pickle of a class that no longer exists) as one :class:`CertgateInputError` line."""
    try:
        yield
    except (CertgateInputError, RegistryError):
        raise
    except Exception as error:  # every reader fails differently on bad bytes
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CertgateInputError(
            f"cannot read the model files of {uri}: {type(error).__name__}: {first}"
        ) from error


def _names(model: Model, metadata: dict[str, Any]) -> tuple[list[str] | None, list[str] | None]:
    inputs = metadata.get(METADATA_INPUT_NAMES)
    outputs = metadata.get(METADATA_OUTPUT_NAMES)
    signature = model.signature
    if signature is not None and not signature.inputs.is_tensor_spec() \
            and signature.inputs.has_input_names():
        signed = [str(name) for name in signature.inputs.input_names()]
        if inputs is not None and list(map(str, inputs)) != signed:
            raise CertgateInputError(
                f"the model's {METADATA_INPUT_NAMES} metadata ({', '.join(map(str, inputs))}) "
                f"disagrees with its MLflow signature ({', '.join(signed)})"
            )
        inputs = signed
    return (list(map(str, inputs)) if inputs else None,
            list(map(str, outputs)) if outputs else None)


def _renamed(network: Network, inputs: list[str] | None, outputs: list[str] | None,
             uri: str) -> Network:
    try:
        return Network(network.layers, inputs or list(network.input_names),
                       outputs or list(network.output_names))
    except NetworkError as error:
        raise NetworkError(f"{uri}: the names recorded with the model do not fit: {error}") \
            from error


def population_source(loaded: LoadedModel, population_uri: str | None) -> str:
    """Where the population model will be read from (for messages and run parameters)."""
    if population_uri:
        return population_uri
    return f"{loaded.uri} ({_shipped_path(loaded)})"


def _shipped_path(loaded: LoadedModel) -> str:
    return str(loaded.metadata.get(METADATA_POPULATION, f"extra_files/{POPULATION_FILE}"))


def population_file(loaded: LoadedModel, population_uri: str | None, workdir: Path) -> Path:
    """The local JSON file of the population model to use (see the module docstring)."""
    if population_uri:
        return _explicit_population(population_uri, workdir)
    if loaded.local_dir is None:
        raise CertgateInputError(
            f"{loaded.uri} is a plain network file and carries no population model; set "
            "model.population_uri in the configuration"
        )
    shipped = loaded.local_dir / _shipped_path(loaded)
    if not shipped.is_file():
        raise CertgateInputError(
            f"{loaded.uri} ships no population model ({_shipped_path(loaded)} is missing); log "
            "it with registry_hooks.log_model_with_population or set model.population_uri"
        )
    return shipped


def _explicit_population(uri: str, workdir: Path) -> Path:
    local = Path(uri.removeprefix("file://"))
    if local.is_file():
        return local
    if ":/" not in uri:
        raise CertgateInputError(f"population model not found: {uri}")
    fetched = download(uri, workdir / "population", f"cannot download population model {uri}")
    if fetched.is_dir():
        candidates = [fetched / POPULATION_FILE, fetched / "extra_files" / POPULATION_FILE]
        found = next((candidate for candidate in candidates if candidate.is_file()), None)
        if found is None:
            what = "model" if uri.startswith("models:/") else "directory"
            raise CertgateInputError(f"population model {uri}: the {what} holds no "
                                     f"{POPULATION_FILE}")
        return found
    return fetched


def load_population_model(loaded: LoadedModel, population_uri: str | None,
                          workdir: Path) -> tuple[Any, str]:
    """The population model for ``loaded`` and a description of where it came from (see
    :func:`fetch_population` for its file and hash too)."""
    artifact = fetch_population(loaded, population_uri, workdir)
    return artifact.model, artifact.source


@dataclass(frozen=True)
class PopulationArtifact:
    """The population model an audit uses: the loaded model, the local file it was read from,
    where that came from (for messages and run parameters) and the file's sha256 (recorded in
    every certificate, so the exact population can be checked against the logged artifact)."""

    model: Any
    path: Path
    source: str
    sha256: str


def fetch_population(loaded: LoadedModel, population_uri: str | None,
                     workdir: Path) -> PopulationArtifact:
    """The population model for ``loaded`` (see the module docstring), with its provenance."""
    from verifier.population import load_population

    path = population_file(loaded, population_uri, workdir)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return PopulationArtifact(load_population(path), path,
                              population_source(loaded, population_uri), digest)
