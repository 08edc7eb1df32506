"""``certgate config check``'s pre-flight: every audit's inputs are checked against what the
configuration names and can be loaded here, with the checks ``certgate run`` makes before any
audit starts (:func:`pipeline_steps.audit.bound_inputs`: the population bound to the model by
name, every input an audit names present — a near miss named —, and each kind's own pre-run
check, :func:`verifier.audits.check_audit`, e.g. the privileged group's mass, or what
weighted model integration cannot run):

* a local model (network file or MLflow model directory) and its population (a local
  ``model.population_uri`` file, or the one shipped in the model directory): the full check;
* a registry model on a tracking store that answers (``tracking.tracking_uri``, else
  ``MLFLOW_TRACKING_URI``: an ``http(s)`` server whose ``/health`` answers, or a local store
  that exists — none is created): loaded from there, the full check;
* otherwise, with a local ``model.population_uri`` file: the population side alone (columns
  bound to ``model.input_names`` when given; every column counted as read);
* anything else is not fetched, and :attr:`Preflight.reason` says what could not be checked
  and why (no store configured, a store that does not answer, a model not registered yet).

MLflow is imported only where a model may come from MLflow (a local model directory, a
``models:/`` or ``runs:/`` URI).

A refusal raises the same one-line :class:`~verifier.errors.CertgateInputError` the run would.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from configs.schema import CertgateConfig
from pipeline_steps.audit_inputs import check_audits
from verifier.errors import CertgateInputError, first_line

PROBE_TIMEOUT_S = 2.0
"""How long config check waits for a tracking server's ``/health``."""


@dataclass(frozen=True)
class Preflight:
    """Which audits were checked, against what, and which could not be, with the reason."""

    checked: list[str] = field(default_factory=list)
    against: str = ""
    unchecked: list[str] = field(default_factory=list)
    reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"checked": self.checked, "against": self.against or None,
                "unchecked": self.unchecked, "reason": self.reason}


def _local_population_file(uri: str | None) -> Path | None:
    if uri is None:
        return None
    path = Path(uri.removeprefix("file://"))
    return path if path.is_file() else None


def _in_registry(uri: str) -> bool:
    """A ``models:/`` or ``runs:/`` URI (classified without importing MLflow)."""
    return uri.strip().startswith(("models:", "runs:"))


def _local_model(uri: str) -> tuple[str, Path] | None:
    """``("mlflow_dir" | "file", path)`` of a local model that exists, else ``None``."""
    path = Path(uri.strip().removeprefix("file://"))
    if path.is_dir() and (path / "MLmodel").is_file():
        return "mlflow_dir", path
    if path.is_file():
        return "file", path
    return None


def preflight(config: CertgateConfig) -> Preflight:
    """Run the pre-flight (module docstring); raises the run's input error on a refusal."""
    names = [settings.name for settings in config.audits]
    uri = config.model.uri
    given = config.model.population_uri
    population_file = _local_population_file(given)
    if given is not None and population_file is None:
        return Preflight(unchecked=names, reason=f"population_uri {given} is not a local file "
                         "(it is fetched at run time)")
    if _in_registry(uri):
        with tempfile.TemporaryDirectory(prefix="certgate-check-") as scratch:
            loaded, why = _registry_model(config, Path(scratch))
            if loaded is not None:
                return _with_loaded_model(config, loaded, Path(scratch))
        if population_file is None:
            return Preflight(unchecked=names, reason=f"the population ships with {uri}, which "
                             f"is fetched from the registry at run time; {why}")
        return _population_only(config, population_file, why)
    local = _local_model(uri)
    if local is None:
        return Preflight(unchecked=names, reason=f"the model {uri} is not a local file or MLflow "
                         "model directory here")
    kind, path = local
    if kind == "mlflow_dir":
        from registry_hooks.certgate_model import load_model

        with tempfile.TemporaryDirectory(prefix="certgate-check-") as scratch:
            loaded = load_model(uri, None, Path(scratch), input_names=config.model.input_names)
            return _with_loaded_model(config, loaded, Path(scratch))
    if population_file is None:
        raise CertgateInputError(f"{uri} is a plain network file and carries no population "
                                 "model; set model.population_uri in the configuration")
    return _with_network_file(config, path, population_file)


def _store_answers(uri: str) -> str | None:
    """Why the tracking store ``uri`` cannot be read here (``None``: it can): a server that
    does not answer ``/health``, or a local store that does not exist (never created here)."""
    from registry_hooks.connection import RegistryError, is_remote, probe

    if is_remote(uri):
        try:
            probe(uri, timeout_s=PROBE_TIMEOUT_S, read_timeout_s=PROBE_TIMEOUT_S)
        except RegistryError as error:
            return str(error)
        return None
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        path = Path(uri.removeprefix("sqlite:///"))  # sqlite:////abs keeps its leading /
    elif parsed.scheme in ("", "file"):
        path = Path(parsed.path if parsed.scheme else uri)
    else:
        return f"the tracking store {uri} is not one config check reads"
    return None if path.exists() else f"the tracking store {uri} does not exist here"


def _registry_model(config: CertgateConfig, scratch: Path) -> tuple[Any, str]:
    """The registry model of ``config`` loaded from a store that answers, or ``None`` and why
    it was not (see the module docstring)."""
    tracking = config.tracking.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if not tracking:
        return None, "no tracking store is configured here (tracking.tracking_uri, " \
                     "MLFLOW_TRACKING_URI)"
    problem = _store_answers(tracking)
    if problem is not None:
        return None, problem
    from registry_hooks.certgate_model import load_model
    from registry_hooks.connection import RegistryError, RegistryUnreachableError, connect
    from registry_hooks.uris import parse_model_uri, resolve_version

    try:
        registry = connect(tracking, config.tracking.registry_uri)
    except RegistryUnreachableError as error:
        return None, str(error)
    reference = parse_model_uri(config.model.uri)
    if reference.in_registry:
        try:
            resolve_version(registry, reference)
        except RegistryError as error:
            return None, f"{error} (not registered yet?)"
    return load_model(config.model.uri, registry, scratch,
                      input_names=config.model.input_names), ""


def _with_loaded_model(config: CertgateConfig, loaded: Any, scratch: Path) -> Preflight:
    """The full check on an MLflow model (local directory or registry) and its population."""
    from pipeline_steps.audit import bound_inputs
    from registry_hooks.certgate_model import fetch_population

    artifact = fetch_population(loaded, config.model.population_uri, scratch)
    bound_inputs(config, loaded, artifact.model)
    return Preflight(checked=[settings.name for settings in config.audits],
                     against=f"model {config.model.uri} and population {artifact.source}")


def _with_network_file(config: CertgateConfig, model: Path,
                       population_file: Path) -> Preflight:
    """The checks of :func:`pipeline_steps.audit.bound_inputs` on a network file."""
    from verifier.audits.binding import bind
    from verifier.convert import load_network
    from verifier.population import load_population

    try:
        network = load_network(model)
    except CertgateInputError:
        raise
    except Exception as error:  # as registry_hooks.certgate_model.unreadable_model words it
        raise CertgateInputError(f"cannot read the model files of {config.model.uri}: "
                                 f"{type(error).__name__}: {first_line(error)}") from error
    network, population = bind(network, load_population(population_file),
                               config.model.input_names, config.model.uri)
    check_audits(config.audits, network, population, list(network.input_names),
                 ("an input of the model", "inputs of the model"))
    return Preflight(checked=[settings.name for settings in config.audits],
                     against=f"model {config.model.uri} and population {population_file}")


def _population_only(config: CertgateConfig, path: Path, why: str) -> Preflight:
    from verifier.audits.binding import ordered_population
    from verifier.population import load_population

    population = load_population(path)
    given = config.model.input_names
    if given is not None:
        population = ordered_population(population, given, str(path))
    check_audits(config.audits, None, population, list(population.columns),
                 (f"a column of the population model {path}",
                  f"columns of the population model {path}"))
    return Preflight(checked=[settings.name for settings in config.audits],
                     against=f"population {path} alone ({config.model.uri} is fetched at run "
                     f"time; the model-side checks run then: {why})")
