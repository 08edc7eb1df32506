"""A certgate-packaged model in MLflow, flavor-style: save it to a directory
(:func:`save_model`) or log it to a run (:func:`log_model`) — the same directory either way —
with its population model and input/output names, log its self-correcting variant
(:func:`log_self_correcting_variant`), and load any of them back as the verifier's IR
(:func:`load_model`, from a URI or a saved directory) with the population model that travels
with it (:func:`fetch_population`).

**Logging.** The population model goes into the model's ``extra_files`` (``extra_files/
population_model.json`` inside the model directory) and its path, the input and output names,
and optionally the declared input domain into the model's metadata (readable without
downloading the weights). Requirements are given explicitly: MLflow's inference would spawn
a subprocess costing ~10 s per model.

**Loading.** A model to audit comes from the registry, a run, or a local file. MLflow
models are downloaded once into a work directory and read from there: the PyTorch flavour in
both its formats (``pt2``, which loads back as a ``torch.fx.GraphModule``, and ``pickle``, the
original ``nn.Module``), and the ONNX flavour (an ``onnx.ModelProto``). Each is converted with
:mod:`verifier.convert`, which checks the IR against the source model on random
inputs. Input and output names come from the model's metadata (``certgate.input_names``,
``certgate.output_names``, written by :func:`save_model` and :func:`log_model`)
or a column-based signature.

The population model is the model version's ``extra_files/population_model.json`` (its path
recorded in the metadata key ``certgate.population``) unless an explicit URI overrides it: a
local JSON file, or any MLflow artifact URI (a file, or a directory holding
``population_model.json``).
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import mlflow
import numpy as np
from mlflow.entities.model_registry import ModelVersion
from mlflow.models import Model
from mlflow.models.model import ModelInfo
from pydantic import ValidationError

from registry_hooks.connection import Registry, RegistryError, registry_errors
from registry_hooks.tags import (
    SOURCE_MODEL_TAG,
    SOURCE_VERSION_TAG,
    VARIANT_SELF_CORRECTING,
    VARIANT_TAG,
    move_alias,
)
from registry_hooks.uris import parse_model_uri, registered_uri, resolve_version
from verifier.errors import CertgateInputError, first_line
from verifier.file_digest import read_unchanged, read_unchanged_with
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
    ``dtype`` is the float dtype the source computes in (:func:`source_dtype`): ``float32``
    for a PyTorch module with float32 parameters or an ONNX graph with a float32 input, in an
    MLflow model or a local file (:func:`file_dtype`), else ``float64``. ``sha256`` names the
    bytes of a plain local file and ``external_data_sha256`` those of the files an ONNX model
    keeps its tensors in, by name (:func:`verifier.file_digest.read_unchanged_with`); an
    MLflow directory or a registry/run URI has none (a registered version is named by its
    name and version).
    """

    uri: str
    network: Network
    flavor: str
    serialization: str
    metadata: dict[str, Any] = field(default_factory=dict)
    local_dir: Path | None = None
    model_version: ModelVersion | None = None
    dtype: str = "float64"
    sha256: str | None = None
    external_data_sha256: dict[str, str] = field(default_factory=dict)

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


REGISTRY_SCHEMES = ("models:/", "runs:/", "mlflow-artifacts:/")
"""URI prefixes that name a model on a tracking server or store (not a local path)."""


def load_model_source(uri: str, tracking_uri: str | None, workdir: Path, *,
                      input_names: Sequence[str] | None = None,
                      input_shape: Sequence[int] | None = None) -> LoadedModel:
    """The model ``uri`` names, read as ``certgate run`` reads it: a local model file or
    MLflow model directory, or a registry/run URI on ``tracking_uri`` (``None``:
    ``MLFLOW_TRACKING_URI``, else MLflow's default store), downloaded below ``workdir``
    (``input_names``/``input_shape``: see :func:`load_model`)."""
    registry = None
    if uri.startswith(REGISTRY_SCHEMES):
        from registry_hooks.connection import connect

        registry = connect(tracking_uri, None)
    return load_model(uri, registry, workdir, input_names=input_names, input_shape=input_shape)


def load_model(uri: str, registry: Registry | None, workdir: Path, *,
               input_names: Sequence[str] | None = None,
               input_shape: Sequence[int] | None = None) -> LoadedModel:
    """Resolve, download and convert the model ``uri`` names (see :mod:`registry_hooks.uris`).

    Registry aliases are resolved to a version first, and that exact version is downloaded.
    ``input_names`` (the names the user gives) and ``input_shape`` (per sample) tell a pickled
    module that is converted through ``torch.export`` its input shape when the model records
    none (:func:`export_shape`). Raises :class:`CertgateInputError` subclasses naming the URI
    on every failure.
    """
    reference = parse_model_uri(uri)
    if reference.kind == "local_file":
        assert reference.path is not None
        with unreadable_model(uri):
            return load_network_file(reference.path, uri)
    if reference.kind == "local_mlflow_dir":
        assert reference.path is not None
        return load_mlflow_dir(reference.path, uri, input_names, input_shape)
    if registry is None:
        raise RegistryError(f"{uri} needs a tracking server or store; none is configured")
    version = resolve_version(registry, reference) if reference.in_registry else None
    download_uri = registered_uri(version.name, version.version) if version else uri
    local = download(download_uri, workdir / "model", f"cannot download model {uri}")
    loaded = load_mlflow_dir(local, uri, input_names, input_shape)
    loaded.model_version = version
    return loaded


def load_network_file(path: Path, uri: str) -> LoadedModel:
    """The network file ``path`` (named ``uri`` in messages) converted to the IR, with the
    dtype its source computes in (:func:`file_dtype`) and the digests of the bytes both were
    read from: the network and the dtype are read inside one
    :func:`~verifier.file_digest.read_unchanged_with`, so a file changed between the two reads
    is refused rather than described by two different versions of it."""
    from verifier.convert import load_network, model_companions

    (network, dtype), digest, external = read_unchanged_with(
        path, model_companions(path), uri, lambda: (load_network(path), file_dtype(path)))
    return LoadedModel(uri, network, "file", path.suffix.lstrip(".").lower(), dtype=dtype,
                       sha256=digest, external_data_sha256=external)


def file_dtype(path: Path) -> str:
    """:func:`source_dtype` of the network file ``path``, by its format: an ONNX graph's
    input type (read without its external data), a torch file's parameters
    (:func:`~verifier.convert.torch_files.torch_file_module`: TorchScript, state dict or
    ``torch.export`` archive); ``"float64"`` for ``.json`` and ``.nnet`` files, whose readers
    read their numbers as float64."""
    from verifier.convert.files import FORMATS_BY_SUFFIX

    chosen = FORMATS_BY_SUFFIX.get(path.suffix.lower())
    if chosen == "onnx":
        import onnx

        return source_dtype(onnx.load(str(path), load_external_data=False))
    if chosen in ("torch", "pt2"):
        from verifier.convert.torch_files import torch_file_module

        return source_dtype(torch_file_module(path))
    return "float64"


def download(artifact_uri: str, destination: Path, action: str) -> Path:
    """Download an MLflow artifact (file or directory) below ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    with registry_errors(action):
        return Path(mlflow.artifacts.download_artifacts(artifact_uri=artifact_uri,
                                                        dst_path=str(destination)))


def load_mlflow_dir(path: Path, uri: str, input_names: Sequence[str] | None = None,
                    input_shape: Sequence[int] | None = None) -> LoadedModel:
    """Convert the MLflow model stored in directory ``path`` (pytorch or onnx flavour);
    ``input_names``/``input_shape``: see :func:`load_model`."""
    mlmodel = path / "MLmodel"
    if not mlmodel.is_file():
        raise CertgateInputError(f"{uri}: no MLmodel file in {path}; not an MLflow model")
    with unreadable_model(uri):
        model = Model.load(str(mlmodel))
    metadata = dict(model.metadata or {})
    if metadata.get(VARIANT_TAG) == VARIANT_SELF_CORRECTING:
        raise CertgateInputError(
            f"{uri} is a self-correcting variant registered by the deploy step (the SC-layer "
            "around a network), not a network certgate audits: audit its source, the version "
            f"its tags {SOURCE_MODEL_TAG} and {SOURCE_VERSION_TAG} name"
        )
    input_names_recorded, output_names = _names(model, metadata)
    if "pytorch" in model.flavors:
        from verifier.convert.torch_files import quiet_logger
        from verifier.convert.torch_module import from_torch, needs_export

        with registry_errors(f"cannot load the PyTorch model {uri}"), unreadable_model(uri), \
                quiet_logger("torch.export"):
            module = mlflow.pytorch.load_model(str(path))
        serialization = "pt2" if any((path / "data").glob("*.pt2")) else "pickle"
        if serialization == "pickle":
            module.eval()
        shape = None
        if needs_export(module):
            shape = export_shape(model, input_shape, input_names or input_names_recorded)
            if shape is None:
                raise CertgateInputError(
                    f"{uri}: its {type(module).__name__} is converted through torch.export, "
                    "which needs the input shape, and the model records none: log it with a "
                    "signature (mlflow.models.infer_signature), or name its inputs "
                    "(--input-names, model.input_names), or give --input-shape")
        network = from_torch(module, input_shape=shape)
        flavor = "pytorch"
        dtype = source_dtype(module)
    elif "onnx" in model.flavors:
        from verifier.convert.onnx_graph import from_onnx

        with registry_errors(f"cannot load the ONNX model {uri}"), unreadable_model(uri):
            proto = mlflow.onnx.load_model(str(path))
        network = from_onnx(proto)
        flavor = serialization = "onnx"
        dtype = source_dtype(proto)
    else:
        raise CertgateInputError(
            f"{uri}: flavours {', '.join(sorted(model.flavors))} cannot be audited; log the "
            "model with the pytorch or onnx flavour"
        )
    network = _renamed(network, input_names_recorded, output_names, uri)
    return LoadedModel(uri, network, flavor, serialization, metadata, path, dtype=dtype)


def source_dtype(model: Any) -> str:
    """``"float32"`` when ``model`` computes in float32 (a ``torch.nn.Module`` whose float
    parameters are float32 and none float64, read by
    :func:`~verifier.selfcorrect.scnet.parameter_bits`; an ``onnx.ModelProto`` whose first
    input is float32), else ``"float64"``: the dtype its self-correcting variant computes the
    network in (float16 and bfloat16 models are refused by the converters before). Neither reader
    imports the other's package (a ModelProto exists only once onnx is imported)."""
    onnx = sys.modules.get("onnx")
    if onnx is not None and isinstance(model, onnx.ModelProto):
        initialized = {initializer.name for initializer in model.graph.initializer}
        inputs = [value for value in model.graph.input if value.name not in initialized]
        float32 = bool(inputs) and \
            inputs[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
        return "float32" if float32 else "float64"
    from verifier.selfcorrect.scnet import parameter_bits

    return "float32" if parameter_bits(model) == 32 else "float64"


def export_shape(model: Model, given: Sequence[int] | None,
                 names: Sequence[str] | None) -> tuple[int, ...] | None:
    """The per-sample input shape of an MLflow model whose module is converted through
    ``torch.export``: ``given``, else a tensor signature's shape without its batch
    dimension, else one input per name (``names``: given or recorded), else ``None``. A
    wrong shape is caught by the converter's check against the module."""
    if given is not None:
        return tuple(int(size) for size in given)
    signature = model.signature
    if signature is not None and signature.inputs.is_tensor_spec():
        specs = signature.inputs.inputs
        shape = tuple(specs[0].shape) if len(specs) == 1 and specs[0].shape else ()
        if len(shape) >= 2 and shape[0] == -1 and all(size > 0 for size in shape[1:]):
            return tuple(int(size) for size in shape[1:])
    return (len(names),) if names else None


@contextmanager
def unreadable_model(uri: str) -> Iterator[None]:
    """Re-raise any failure to read a stored model's files (truncated or corrupt weights,
    a pickle of a class that no longer exists) as one :class:`CertgateInputError` line."""
    try:
        yield
    except (CertgateInputError, RegistryError):
        raise
    except Exception as error:  # every reader fails differently on bad bytes
        first = first_line(error)
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
        return network.renamed(inputs or None, outputs or None)
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
            "it with registry_hooks.log_model or set model.population_uri"
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
    source = population_source(loaded, population_uri)
    try:
        model, digest = read_unchanged(path, f"population model {path}",
                                       lambda: load_population(path))
    except (CertgateInputError, ValidationError) as error:
        if not source.startswith(loaded.uri):
            raise
        raise CertgateInputError(f"the population model shipped with {source} cannot be read: "
                                 f"{_population_problem(error, path)}") from error
    return PopulationArtifact(model, path, source, digest)


def _population_problem(error: Exception, path: Path) -> str:
    """What is wrong with the population file at ``path`` (a download in a scratch directory
    the user never sees, so its path is left out): each field pydantic refused, else the
    error's text."""
    if isinstance(error, ValidationError):
        return "; ".join(f"{'.'.join(map(str, item['loc'])) or '<root>'}: {item['msg']}"
                         for item in error.errors())
    return str(error).replace(f"{path}: ", "")


EXAMPLE_ROWS = 5


def pinned_requirements(flavor: Literal["pytorch", "onnx"]) -> list[str]:
    """``pip_requirements`` for a logged model: the installed versions, local labels dropped."""
    requirements = [f"mlflow=={mlflow.__version__}"]
    if flavor == "pytorch":
        import torch

        requirements.append(f"torch=={torch.__version__.split('+')[0]}")
    else:
        import onnx

        requirements.append(f"onnx=={onnx.__version__}")
        try:
            import onnxruntime
        except ImportError:
            return requirements
        requirements.append(f"onnxruntime=={onnxruntime.__version__}")
    return requirements


def _population_json(population: Any, directory: Path) -> tuple[Path, Any]:
    """Write (or copy) the population model to ``directory/population_model.json``; return the
    path and the loaded model."""
    from verifier.population import load_population, save_population

    target = directory / POPULATION_FILE
    if isinstance(population, str | Path):
        source = Path(population)
        if not source.is_file():
            raise CertgateInputError(f"population model file not found: {source}")
        model = load_population(source)
    else:
        model = population
    save_population(model, target)
    return target, model


@contextmanager
def _packaged(model: Any, population: Any, *, input_example: np.ndarray | None,
              input_names: Sequence[str] | None, output_names: Sequence[str] | None,
              input_domain: Mapping[str, tuple[float | None, float | None]] | None,
              serialization_format: Literal["pt2", "pickle"]
              ) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """The MLflow flavour module for ``model``, the model to store (a module in eval mode)
    and the arguments the flavour's ``save_model`` and ``log_model`` share (population file
    in ``extra_files``, names and domain in ``metadata``, explicit requirements, an input
    example); the population file lives until the block ends."""
    import onnx
    import torch

    with tempfile.TemporaryDirectory(prefix="certgate-log-") as scratch:
        population_path, population_model = _population_json(population, Path(scratch))
        names = list(input_names) if input_names is not None else list(population_model.columns)
        metadata: dict[str, Any] = {METADATA_POPULATION: f"extra_files/{POPULATION_FILE}"}
        metadata[METADATA_INPUT_NAMES] = names
        if output_names is not None:
            metadata[METADATA_OUTPUT_NAMES] = list(output_names)
        if input_domain is not None:
            metadata[METADATA_INPUT_DOMAIN] = {k: list(v) for k, v in input_domain.items()}
        if input_example is None:
            input_example = population_model.sample(EXAMPLE_ROWS, 0)
        common: dict[str, Any] = {
            "input_example": np.asarray(input_example, dtype=np.float32),
            "extra_files": [str(population_path)],
            "metadata": metadata,
        }
        if isinstance(model, torch.nn.Module):
            yield mlflow.pytorch, model.eval(), {"serialization_format": serialization_format,
                                   "pip_requirements": pinned_requirements("pytorch"),
                                   **common}
        elif isinstance(model, onnx.ModelProto):
            yield mlflow.onnx, model, {"pip_requirements": pinned_requirements("onnx"), **common}
        else:
            raise CertgateInputError(
                f"cannot log a {type(model).__name__}: expected a torch.nn.Module or an "
                "onnx.ModelProto"
            )


def save_model(
    model: Any,
    path: str | Path,
    population: Any,
    *,
    serialization_format: Literal["pt2", "pickle"] = "pt2",
    input_example: np.ndarray | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    input_domain: Mapping[str, tuple[float | None, float | None]] | None = None,
) -> None:
    """Save ``model`` (a ``torch.nn.Module`` or an ``onnx.ModelProto``) with ``population`` (a
    population model or the path of its JSON) as an MLflow model directory at ``path`` (which
    must not exist), in exactly the layout :func:`log_model` logs: :func:`load_model` reads
    it back (``path`` as the URI) with its population model, names and domain."""
    with _packaged(model, population, input_example=input_example, input_names=input_names,
                   output_names=output_names, input_domain=input_domain,
                   serialization_format=serialization_format) as (flavor, stored, arguments), \
            registry_errors(f"cannot save model to {path}"):
        flavor.save_model(stored, str(path), **arguments)


def log_model(
    model: Any,
    population: Any,
    *,
    registered_model_name: str | None = None,
    name: str = "model",
    serialization_format: Literal["pt2", "pickle"] = "pt2",
    input_example: np.ndarray | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    input_domain: Mapping[str, tuple[float | None, float | None]] | None = None,
    alias: str | None = None,
    registry: Registry | None = None,
    tags: Mapping[str, str] | None = None,
) -> ModelInfo:
    """Log ``model`` (a ``torch.nn.Module`` or an ``onnx.ModelProto``) with ``population`` (a
    population model or the path of its JSON) and optionally register it and set ``alias``;
    the directory logged is the one :func:`save_model` writes.

    ``input_names`` default to the population model's columns; ``input_example`` (required by
    the ``pt2`` format) defaults to rows sampled from the population model (seed 0). Logs into
    the active run if there is one. Returns MLflow's ``ModelInfo``.
    """
    if alias is not None and (registered_model_name is None or registry is None):
        raise CertgateInputError("setting an alias needs registered_model_name and a registry")
    with _packaged(model, population, input_example=input_example, input_names=input_names,
                   output_names=output_names, input_domain=input_domain,
                   serialization_format=serialization_format) as (flavor, stored, arguments), \
            registry_errors(f"cannot log model {registered_model_name or name}"):
        info = flavor.log_model(stored, name=name, registered_model_name=registered_model_name,
                                **arguments)
    version = info.registered_model_version
    if registered_model_name is not None and version is not None and registry is not None:
        if tags:
            with registry_errors(f"cannot tag {registered_model_name} version {version}"):
                for key, value in tags.items():
                    registry.client.set_model_version_tag(registered_model_name, str(version),
                                                          key, value)
        if alias is not None:
            move_alias(registry, registered_model_name, alias, str(version))
    return info


def log_model_with_population(model: Any, population: Any, **options: Any) -> ModelInfo:
    """Deprecated name of :func:`log_model` (same arguments); warns once per call site."""
    warnings.warn("registry_hooks.log_model_with_population is deprecated; call "
                  "registry_hooks.log_model (same arguments)", DeprecationWarning, stacklevel=2)
    return log_model(model, population, **options)


VARIANT_ARTIFACT_NAME = "model"


def variant_signature(input_names: Sequence[str] | None, input_size: int,
                      output_columns: Sequence[str], dtype: str = "float64") -> Any:
    """The self-correcting variant's signature: named double columns in (MLflow then binds a
    posted DataFrame's columns by name, in any order, and takes float32 and float64 columns)
    when ``input_names`` are given, a tensor of ``input_size`` columns in ``dtype`` (the
    source's, :func:`source_dtype`: the arrays its model accepted) for a source without
    names; the corrected logits, the ⊥ flag and the class out."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema, TensorSpec

    from registry_hooks import selfcorrect_pyfunc

    if input_names is None:
        inputs = Schema([TensorSpec(np.dtype(dtype), (-1, input_size))])
    else:
        inputs = Schema([ColSpec("double", name) for name in input_names])
    outputs = Schema([*(ColSpec("double", column) for column in output_columns),
                      ColSpec("boolean", selfcorrect_pyfunc.BOTTOM_COLUMN),
                      ColSpec("long", selfcorrect_pyfunc.PREDICTED_COLUMN)])
    return ModelSignature(inputs=inputs, outputs=outputs)


def log_self_correcting_variant(
    name: str, artifacts: Mapping[str, str], *, input_names: Sequence[str],
    named_inputs: Sequence[str] | None, output_columns: Sequence[str], input_example: Any,
    metadata: Mapping[str, Any], tags: Mapping[str, str], requirements: Sequence[str],
    dtype: str = "float64",
) -> str:
    """Log the self-correcting variant (pyfunc model code
    :mod:`registry_hooks.selfcorrect_pyfunc` with ``artifacts``, and its TorchScript artifact
    as the ``pytorch`` flavour: :mod:`registry_hooks.selfcorrect_flavors`) and register it as a
    new version of ``name`` carrying ``tags`` from its creation; returns the version.
    ``named_inputs`` (``None`` for a source without input names) and ``dtype`` shape the
    signature (:func:`variant_signature`); ``requirements`` come on top of MLflow's and
    torch's pins."""
    from registry_hooks import selfcorrect_pyfunc
    from registry_hooks.selfcorrect_flavors import SelfCorrectingFlavors

    with registry_errors(f"cannot register the self-correcting variant as {name}"):
        info = Model.log(
            artifact_path=None,
            name=VARIANT_ARTIFACT_NAME,
            flavor=SelfCorrectingFlavors,
            flavor_name="pyfunc.ModelFromCode",
            torchscript=artifacts[selfcorrect_pyfunc.TORCHSCRIPT_ARTIFACT],
            python_model=selfcorrect_pyfunc.__file__,
            artifacts=dict(artifacts),
            model_config={"input_names": list(input_names),
                          "output_columns": list(output_columns)},
            signature=variant_signature(named_inputs, len(input_names), output_columns,
                                        dtype),
            input_example=input_example,
            pip_requirements=[*pinned_requirements("pytorch"), *requirements],
            metadata=dict(metadata),
        )
        registered = mlflow.register_model(info.model_uri, name, tags=dict(tags))
    return str(registered.version)
