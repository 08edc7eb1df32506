"""The deploy step: register the self-correcting (safe-by-construction) variant of a model.

:func:`deploy_self_correcting` loads a registered model version, wraps it in the SC-layer built
from a constraint file (paper 004; :class:`verifier.selfcorrect.SelfCorrectingNetwork`), and
logs the result as a new model version with the pyfunc flavour (model code
:mod:`registry_hooks.selfcorrect_pyfunc`, so it loads and serves without certgate) and the
pytorch flavour of the same TorchScript (``mlflow.pytorch.load_model`` gives the SC-Net as a
module; :mod:`registry_hooks.selfcorrect_flavors`):

* artifacts: the TorchScript SC-Net (checked to reproduce the eager module exactly before it is
  logged), ``constraints.yaml`` (the normalised constraint set), and the source version's
  population model when it ships one (its path recorded in the metadata as usual);
* the network in the source's dtype (a float32 source's variant computes its logits in
  float32 as the source does, so rows that already comply keep the source's logits and
  class; :func:`deploy_self_correcting`);
* a column signature: the source's input names in (MLflow binds a DataFrame's columns by
  name; a source without input names gets a tensor input in the source's dtype),
  ``logit_<class>`` (class names when the source names its classes, else indices),
  ``bottom`` and ``predicted_class`` out; an input example, explicit ``pip_requirements``;
* model-version tags ``certgate.variant=self-correcting``, ``certgate.source_model``,
  ``certgate.source_version``, ``certgate.selfcorrect.on_bottom``,
  ``certgate.selfcorrect.constraints`` (their count) and ``certgate.selfcorrect.sha256`` (the
  fingerprint of everything the SC-Net is built from), then the alias.

Deploying is idempotent: a registered source version whose variant with the same fingerprint
is already a version of the target model gets that version back (the alias is pointed at it),
not another copy (:attr:`DeployRecord.reused`).

Everything that can be wrong with the input (unknown model, constraints that do not fit the
model's classes or inputs, a model TorchScript cannot compile) is checked before anything is
written to the registry; such errors are :class:`~verifier.errors.CertgateInputError`.
:func:`run_deploy` is the pipeline's entry point after a passed gate.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from configs.schema import CertgateConfig
from registry_hooks import selfcorrect_pyfunc
from registry_hooks.audit_runs import use_experiment
from registry_hooks.certgate_model import (
    METADATA_INPUT_NAMES,
    METADATA_POPULATION,
    POPULATION_FILE,
    LoadedModel,
    load_model,
    log_self_correcting_variant,
)
from registry_hooks.connection import Registry
from registry_hooks.selfcorrect_flavors import VARIANT_FLAVORS
from registry_hooks.tags import (
    SOURCE_MODEL_TAG,
    SOURCE_VERSION_TAG,
    VARIANT_SELF_CORRECTING,
    VARIANT_TAG,
    move_alias,
    versions_tagged,
)
from registry_hooks.uris import registered_uri
from verifier import __version__
from verifier.audits.binding import anonymous_inputs, anonymous_outputs, bound_names
from verifier.errors import CertgateInputError
from verifier.network import Network
from verifier.selfcorrect import (
    ConstraintError,
    ConstraintSet,
    SelfCorrectingNetwork,
    scored_module,
    scored_network,
)
from verifier.selfcorrect.export import load_torchscript, save_torchscript
from verifier.selfcorrect.loaders import load_constraints
from verifier.yaml_documents import dump_yaml

ON_BOTTOM_TAG = "certgate.selfcorrect.on_bottom"
CONSTRAINT_COUNT_TAG = "certgate.selfcorrect.constraints"
FINGERPRINT_TAG = "certgate.selfcorrect.sha256"
METADATA_CONSTRAINTS = "certgate.selfcorrect.constraints"
METADATA_OUTPUT_COLUMNS = "certgate.selfcorrect.output_columns"
DEFAULT_ALIAS = "safe"
EXAMPLE_ROWS = 5
CHECK_ROWS = 256


class DeployError(CertgateInputError):
    """The self-correcting variant cannot be built or registered; the message says why."""


@dataclass(frozen=True)
class DeployRecord:
    """The registered variant: ``models:/name/version``, reachable as ``models:/name@alias``
    (``alias`` is ``None`` when none was set)."""

    name: str
    version: str
    alias: str | None
    uri: str
    source_uri: str
    reused: bool = False
    """The variant was already registered (same source version and fingerprint)."""

    def __str__(self) -> str:
        text = (f"self-correcting variant of {self.source_uri} already registered as "
                f"{self.uri} with these constraints (reused)" if self.reused else
                f"self-correcting variant of {self.source_uri} registered as {self.uri}")
        if self.alias is None:
            return text
        return f"{text} (alias {self.alias!r} -> models:/{self.name}@{self.alias})"


@dataclass(frozen=True)
class _ScnetOptions:
    """How the SC-Net is built (see :func:`deploy_self_correcting`)."""

    on_bottom: str
    abstain_class: int | str | None
    constraints_network: str | None
    negate: bool
    input_names: Sequence[str] | None = None


@dataclass(frozen=True)
class _Prepared:
    """Everything to log, built and checked before the registry is touched."""

    loaded: LoadedModel
    constraints: ConstraintSet
    scnet: SelfCorrectingNetwork
    output_columns: list[str]


def run_deploy(config: CertgateConfig, *, registry: Registry, model_name: str | None,
               model_version: str | None) -> DeployRecord:
    """Deploy ``models:/model_name/model_version`` with the configuration's ``deploy`` section.

    Raises:
        DeployError: the configuration has no ``deploy`` section, or no registered version
            was given (a local model file cannot be deployed to the registry).
    """
    settings = config.deploy
    if settings is None:
        raise DeployError("the configuration has no 'deploy' section")
    if model_name is None or model_version is None:
        raise DeployError(
            f"deploy needs a registered model version; {config.model.uri} is not one"
        )
    use_experiment(config.tracking.experiment)
    with tempfile.TemporaryDirectory(prefix="certgate-deploy-") as workdir:
        return deploy_self_correcting(
            registered_uri(model_name, str(model_version)), settings.constraints,
            registry=registry, target_name=settings.registered_model, alias=settings.alias,
            on_bottom=settings.on_bottom, workdir=Path(workdir),
            input_names=config.model.input_names,
        )


def deploy_self_correcting(
    model_uri: str,
    constraints_path: str | Path,
    *,
    registry: Registry,
    target_name: str | None = None,
    alias: str | None = DEFAULT_ALIAS,
    on_bottom: str = "mark",
    abstain_class: int | str | None = None,
    constraints_network: str | None = None,
    negate: bool = False,
    workdir: Path,
    input_names: Sequence[str] | None = None,
) -> DeployRecord:
    """Register the SC-Net of ``model_uri`` under ``constraints_path`` as a new version.

    ``target_name`` defaults to the source's registered model (the variant becomes its next
    version); ``alias`` (``None``: none) is pointed at the new version. ``on_bottom`` and
    ``abstain_class`` are passed to :class:`SelfCorrectingNetwork`; ``constraints_network``
    picks one network's constraints from per-network files (ACAS Xu); ``negate`` negates the
    network's outputs first (argmin networks; the constraints use the max-logit convention).
    ``input_names`` name the inputs of a source model that records none (they must agree
    with the names it records: :func:`verifier.audits.binding.bound_names`).

    Guarantees: the registered TorchScript computes exactly the outputs and ⊥ flags of the
    in-memory ``SelfCorrectingNetwork(scored_module(network, negate, dtype), constraints)``
    (:func:`~verifier.selfcorrect.scored_module`), ``dtype`` the
    source's (:func:`~registry_hooks.certgate_model.source_dtype`: a float32 source's network
    runs in float32, on the source's own weights when no conversion folded them, so its
    logits are the source module's and a row whose logits comply keeps them and the
    source's class); on any input error nothing is written to the registry; a registered
    source version already deployed to ``target_name`` with the same fingerprint
    (:func:`variant_fingerprint`) registers nothing new: that version is returned
    (``reused``) and ``alias`` pointed at it.

    Raises:
        DeployError: the constraints do not fit the model (class count, input width), the
            source is not a registered version and no ``target_name`` is given, or the
            TorchScript export disagrees with the eager module.
        RegistryError: the model URI is unknown or the registry refused a write.
    """
    prepared = _prepare(model_uri, Path(constraints_path), registry, workdir,
                        _ScnetOptions(on_bottom, abstain_class, constraints_network, negate,
                                      input_names))
    loaded = prepared.loaded
    name = target_name or loaded.name
    if name is None:
        raise DeployError(f"{model_uri} is not a registered model version; give target_name")
    tags = {
        VARIANT_TAG: VARIANT_SELF_CORRECTING,
        SOURCE_MODEL_TAG: loaded.name or model_uri,
        ON_BOTTOM_TAG: on_bottom,
        CONSTRAINT_COUNT_TAG: str(len(prepared.constraints)),
        FINGERPRINT_TAG: variant_fingerprint(prepared, on_bottom, abstain_class, negate),
    }
    registered: list[str] = []
    if loaded.version is not None:
        tags[SOURCE_VERSION_TAG] = loaded.version
        registered = versions_tagged(registry, name, tags)
    if registered:
        version = registered[-1]
    else:
        staging = workdir / "variant"
        staging.mkdir(parents=True, exist_ok=True)
        version = _register_variant(prepared, _write_artifacts(prepared, staging), name, tags)
    if alias is not None:
        move_alias(registry, name, alias, version)
    source = registered_uri(loaded.name, loaded.version) if loaded.name and loaded.version \
        else model_uri
    return DeployRecord(name, version, alias, registered_uri(name, version), source,
                        reused=bool(registered))


def variant_fingerprint(prepared: _Prepared, on_bottom: str, abstain_class: int | str | None,
                        negate: bool) -> str:
    """sha256 of what the SC-Net is built from besides the source version: the normalised
    constraint set, the ⊥ handling, the output convention, the bound input names, the dtype the
    network runs in and the output columns, the certgate version (whose SC-layer code the
    variant carries) and the MLflow flavours it is registered with."""
    document = {
        "constraints": prepared.constraints.to_dict(),
        "on_bottom": on_bottom,
        "abstain_class": abstain_class,
        "negate": negate,
        "input_names": list(prepared.loaded.network.input_names),
        "dtype": prepared.loaded.dtype,
        "output_columns": prepared.output_columns,
        "certgate": __version__,
        "flavors": list(VARIANT_FLAVORS),
    }
    text = json.dumps(document, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _prepare(model_uri: str, constraints_path: Path, registry: Registry, workdir: Path,
             options: _ScnetOptions) -> _Prepared:
    if not constraints_path.is_file():
        raise DeployError(f"deploy constraints file not found: {constraints_path}")
    loaded = load_model(model_uri, registry, workdir, input_names=options.input_names)
    if options.input_names is not None:
        names = bound_names(loaded.network, options.input_names, model_uri)
        loaded.network = loaded.network.renamed(input_names=names)
    source = loaded.network
    loaded.network = scored_network(source, options.negate)
    network = loaded.network
    try:
        constraints = load_constraints(constraints_path, num_classes=network.output_size,
                                       network=options.constraints_network,
                                       input_names=network.input_names)
        scnet = SelfCorrectingNetwork(scored_module(source, options.negate,
                                                    getattr(torch, loaded.dtype)),
                                      constraints,
                                      on_bottom=options.on_bottom,
                                      abstain_class=options.abstain_class,
                                      input_size=network.input_size).eval()
    except ConstraintError as error:
        raise DeployError(
            f"constraints {constraints_path} do not fit {model_uri} ({network.input_size} "
            f"inputs, {network.output_size} classes): {error}"
        ) from error
    return _Prepared(loaded, constraints, scnet,
                     variant_output_columns(source, scnet.num_outputs))


def _write_artifacts(prepared: _Prepared, staging: Path) -> dict[str, str]:
    """TorchScript (checked), constraints YAML and the carried-over population model."""
    torchscript = save_torchscript(prepared.scnet, staging / "scnet.pt")
    _check_torchscript(prepared.scnet, torchscript, prepared.loaded.network.input_size)
    constraints_file = staging / "constraints.yaml"
    constraints_file.write_text(dump_yaml(prepared.constraints.to_dict()), encoding="utf-8")
    artifacts = {selfcorrect_pyfunc.TORCHSCRIPT_ARTIFACT: str(torchscript),
                 selfcorrect_pyfunc.CONSTRAINTS_ARTIFACT: str(constraints_file)}
    population = _shipped_population(prepared.loaded)
    if population is not None:
        artifacts["population_model"] = str(population)
    return artifacts


def _check_torchscript(scnet: SelfCorrectingNetwork, path: Path, input_size: int) -> None:
    """The saved module must give the eager module's outputs and ⊥ flags bit for bit on
    ``CHECK_ROWS`` standard-normal rows (seeded)."""
    compiled = load_torchscript(path)
    rows = torch.from_numpy(np.random.default_rng(0).normal(size=(CHECK_ROWS, input_size)))
    with torch.no_grad():
        expected = scnet.forward_with_bottom(rows)
        got = compiled.forward_with_bottom(rows)
    if not (torch.equal(expected[0], got[0]) and torch.equal(expected[1], got[1])):
        raise DeployError(f"{path.name}: the TorchScript SC-Net disagrees with the eager one")


def _shipped_population(loaded: LoadedModel) -> Path | None:
    if loaded.local_dir is None:
        return None
    shipped = loaded.local_dir / str(loaded.metadata.get(METADATA_POPULATION,
                                                         f"extra_files/{POPULATION_FILE}"))
    return shipped if shipped.is_file() else None


def _input_example(loaded: LoadedModel, population: Path | None) -> np.ndarray | pd.DataFrame:
    """A few representative rows in input order: a float64 DataFrame with the input names when
    the model names its inputs, else an array in the source's dtype (the tensor signature's);
    population samples if shipped, else the declared domain's midpoints (zeros for unbounded
    sides), else zeros."""
    network = loaded.network
    if population is not None:
        from verifier.audits.binding import ordered_population, unread_columns
        from verifier.population import load_population

        shipped = load_population(population)
        names = list(network.input_names)
        if not anonymous_inputs(network):     # then the columns it need not read, dropped
            names = [*names, *unread_columns(shipped, names)]
            shipped = ordered_population(shipped, names, loaded.uri)
        rows = np.asarray(shipped.sample(EXAMPLE_ROWS, 0),
                          dtype=np.float64)[:, :network.input_size]
    else:
        domain = loaded.input_domain() or {}
        centre = [_midpoint(*domain.get(name, (0.0, 0.0))) for name in network.input_names]
        rows = np.tile(np.asarray(centre, dtype=np.float64), (EXAMPLE_ROWS, 1))
    if anonymous_inputs(network):
        return rows.astype(loaded.dtype)
    return pd.DataFrame(rows, columns=list(network.input_names))


def _midpoint(low: float, high: float) -> float:
    if np.isfinite(low) and np.isfinite(high):
        return (low + high) / 2.0
    if np.isfinite(low):
        return low
    return high if np.isfinite(high) else 0.0


def variant_output_columns(source: Network, num_outputs: int) -> list[str]:
    """The corrected-logit columns of the SC-Net of ``source`` (the model as loaded, before
    its classifier view): ``logit_<class name>`` when the source names its classes
    (``logit_abstain`` for an appended abstain class), else ``logit_<index>`` (also for
    positional names, :func:`~verifier.audits.binding.anonymous_outputs`: an ONNX output
    tensor ``logits`` read as ``logits[0]``, ``logits[1]`` names no class). A single-logit
    source names its logit, not its classes: they are 0 and 1 (class 1 iff the logit is > 0),
    so its columns are ``logit_0`` (the constant 0 the classifier view puts in front) and
    ``logit_1`` (the logit)."""
    names = list(source.output_names)
    if source.output_size == 1 or anonymous_outputs(source):
        return selfcorrect_pyfunc.logit_columns(num_outputs)
    columns = [f"logit_{name}" for name in names]
    if num_outputs > len(names):
        columns.append("logit_abstain")
    return columns


def _register_variant(prepared: _Prepared, artifacts: dict[str, str], name: str,
                      tags: dict[str, str]) -> str:
    """Log the pyfunc model and register it as a new version of ``name`` carrying ``tags``
    from its creation (event handlers see them with the ``model_version.created`` event)."""
    network = prepared.loaded.network
    output_columns = prepared.output_columns
    population = artifacts.get("population_model")
    metadata: dict[str, Any] = {
        METADATA_INPUT_NAMES: list(network.input_names),
        METADATA_CONSTRAINTS: "artifacts/constraints.yaml",
        METADATA_OUTPUT_COLUMNS: output_columns,
        VARIANT_TAG: VARIANT_SELF_CORRECTING,
    }
    if population is not None:
        metadata[METADATA_POPULATION] = f"artifacts/{Path(population).name}"
    example = _input_example(prepared.loaded, Path(population) if population else None)
    named = None if anonymous_inputs(network) else list(network.input_names)
    return log_self_correcting_variant(
        name, artifacts, input_names=list(network.input_names), named_inputs=named,
        output_columns=output_columns, input_example=example, metadata=metadata, tags=tags,
        requirements=[f"numpy=={np.__version__}", f"pandas=={pd.__version__}"],
        dtype=prepared.loaded.dtype,
    )
