"""Model URIs certgate understands, parsed into what they point to.

* ``models:/NAME@ALIAS`` and ``models:/NAME/VERSION``: a registered model version;
* ``models:/m-<id>``: an MLflow 3 logged model;
* ``runs:/RUN_ID/PATH``: a model logged under a run;
* a local network file (a suffix :data:`verifier.convert.files.FORMATS_BY_SUFFIX` knows:
  ``.onnx``, ``.pt``/``.pth``/``.ts``, ``.pt2``, ``.nnet``, ``.json``), or a local MLflow model
  directory (one holding an ``MLmodel`` file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mlflow.entities.model_registry import ModelVersion

from registry_hooks.connection import Registry, RegistryError, registry_errors
from verifier.convert.files import FORMATS_BY_SUFFIX
from verifier.errors import CertgateInputError

NETWORK_SUFFIXES = tuple(FORMATS_BY_SUFFIX)
_REGISTERED = re.compile(r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/]+)|/(?P<version>\d+))/?$")
_LOGGED = re.compile(r"^models:/(?P<model_id>m-[0-9a-f]+)/?$")
_RUN = re.compile(r"^runs:/(?P<run_id>[^/]+)/(?P<path>.+)$")

UriKind = Literal["registered", "logged_model", "run", "local_file", "local_mlflow_dir"]


@dataclass(frozen=True)
class ModelReference:
    """What a model URI names. Only the fields of its ``kind`` are set."""

    uri: str
    kind: UriKind
    name: str | None = None
    alias: str | None = None
    version: str | None = None
    model_id: str | None = None
    run_id: str | None = None
    path: Path | None = None

    @property
    def in_registry(self) -> bool:
        return self.kind == "registered"


def parse_model_uri(uri: str) -> ModelReference:
    """Classify ``uri``; raises :class:`CertgateInputError` naming the URI when it is none of
    the supported forms (or a local path that does not exist)."""
    text = uri.strip()
    if match := _LOGGED.match(text):
        return ModelReference(text, "logged_model", model_id=match["model_id"])
    if match := _REGISTERED.match(text):
        return ModelReference(text, "registered", name=match["name"], alias=match["alias"],
                              version=match["version"])
    if match := _RUN.match(text):
        return ModelReference(text, "run", run_id=match["run_id"], path=Path(match["path"]))
    if text.startswith(("models:", "runs:")):
        raise CertgateInputError(
            f"model URI {uri!r} is malformed; use models:/NAME@ALIAS, models:/NAME/VERSION, "
            "models:/m-ID or runs:/RUN_ID/PATH"
        )
    path = Path(text.removeprefix("file://"))
    if path.is_dir() and (path / "MLmodel").is_file():
        return ModelReference(text, "local_mlflow_dir", path=path)
    if path.suffix.lower() in NETWORK_SUFFIXES:
        if not path.is_file():
            raise CertgateInputError(f"model file not found: {path}")
        return ModelReference(text, "local_file", path=path)
    raise CertgateInputError(
        f"model URI {uri!r} is neither a registry URI nor an existing model file "
        f"({', '.join(NETWORK_SUFFIXES)}) or MLflow model directory"
    )


def registered_uri(name: str, version: str) -> str:
    """``models:/NAME/VERSION``."""
    return f"models:/{name}/{version}"


def resolve_version(registry: Registry, reference: ModelReference) -> ModelVersion:
    """The registered model version a ``models:/NAME@ALIAS`` or ``models:/NAME/N`` URI names.

    Raises :class:`RegistryError` naming the URI when the model, version or alias is missing.
    """
    if not reference.in_registry or reference.name is None:
        raise RegistryError(f"{reference.uri} is not a registered model version URI")
    where = f"the registry at {registry.registry_uri}"
    with registry_errors(f"cannot read {reference.uri} from {where}",
                         missing=f"model {reference.uri} not found in {where}"):
        if reference.alias is not None:
            return registry.client.get_model_version_by_alias(reference.name, reference.alias)
        return registry.client.get_model_version(reference.name, str(reference.version))
