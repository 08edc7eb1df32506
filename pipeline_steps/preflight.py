"""``certgate config check``'s pre-flight: the audits that can tell in advance whether they
run (the weighted-model-integration kinds, :func:`verifier.audits.check_audit`) are checked
on what the configuration names *locally*, with the checks ``certgate run`` makes before any
audit starts (:func:`pipeline_steps.audit.bound_inputs`).

* a local model (network file or MLflow model directory) and its population (a local
  ``model.population_uri`` file, or the one shipped in the model directory): the full check;
* a registry model with a local ``model.population_uri`` file: the population side alone
  (columns bound to ``model.input_names`` when given; every column counted as read);
* a population only reachable through a registry or tracking server: nothing is fetched, and
  :attr:`Preflight.reason` says what could not be checked.

MLflow is imported only for a local MLflow model directory (reading it needs MLflow anyway).

A refusal raises the same one-line :class:`~verifier.errors.CertgateInputError` the run would.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from configs.schema import CertgateConfig
from pipeline_steps.audit_inputs import check_audits
from verifier.errors import CertgateInputError, first_line


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


def checked_in_advance(config: CertgateConfig) -> list[Any]:
    """The audits of ``config`` whose kind has a pre-flight check."""
    from verifier.audits import KINDS

    return [settings for settings in config.audits
            if getattr(KINDS[settings.kind], "check", None) is not None]


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
    """Run the pre-flight (module docstring); raises the run's input error on a refusal.
    MLflow is imported only for a local MLflow model directory."""
    audits = checked_in_advance(config)
    if not audits:
        return Preflight()
    names = [settings.name for settings in audits]
    uri = config.model.uri
    given = config.model.population_uri
    population_file = _local_population_file(given)
    if given is not None and population_file is None:
        return Preflight(unchecked=names, reason=f"population_uri {given} is not a local file "
                         "(it is fetched at run time)")
    if _in_registry(uri):
        if population_file is None:
            return Preflight(unchecked=names, reason=f"the population ships with {uri}, which "
                             "is fetched from the registry at run time")
        return _population_only(config, audits, population_file)
    local = _local_model(uri)
    if local is None:
        return Preflight(unchecked=names, reason=f"the model {uri} is not a local file or MLflow "
                         "model directory here")
    kind, path = local
    if kind == "mlflow_dir":
        with tempfile.TemporaryDirectory(prefix="certgate-check-") as scratch:
            return _with_mlflow_dir(config, audits, Path(scratch))
    if population_file is None:
        raise CertgateInputError(f"{uri} is a plain network file and carries no population "
                                 "model; set model.population_uri in the configuration")
    return _with_network_file(config, audits, path, population_file)


def _with_mlflow_dir(config: CertgateConfig, audits: list[Any], scratch: Path) -> Preflight:
    from pipeline_steps.audit import bound_inputs
    from registry_hooks.certgate_model import fetch_population, load_model

    loaded = load_model(config.model.uri, None, scratch)
    artifact = fetch_population(loaded, config.model.population_uri, scratch)
    bound_inputs(config, loaded, artifact.model)
    return Preflight(checked=[settings.name for settings in audits],
                     against=f"model {config.model.uri} and population {artifact.source}")


def _with_network_file(config: CertgateConfig, audits: list[Any], model: Path,
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
    check_audits(audits, network, population, list(network.input_names),
                 ("an input of the model", "inputs of the model"))
    return Preflight(checked=[settings.name for settings in audits],
                     against=f"model {config.model.uri} and population {population_file}")


def _population_only(config: CertgateConfig, audits: list[Any], path: Path) -> Preflight:
    from verifier.audits.binding import ordered_population
    from verifier.population import load_population

    population = load_population(path)
    given = config.model.input_names
    if given is not None:
        population = ordered_population(population, given, str(path))
    check_audits(audits, None, population, list(population.columns),
                 (f"a column of the population model {path}",
                  f"columns of the population model {path}"))
    return Preflight(checked=[settings.name for settings in audits],
                     against=f"population {path} alone ({config.model.uri} is fetched at run "
                     "time; the model-side checks run then)")
