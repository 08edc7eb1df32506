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

A refusal raises the same one-line :class:`~verifier.errors.CertgateInputError` the run would.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from configs.schema import CertgateConfig
from verifier.errors import CertgateInputError


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


def preflight(config: CertgateConfig) -> Preflight:
    """Run the pre-flight (module docstring); raises the run's input error on a refusal."""
    audits = checked_in_advance(config)
    if not audits:
        return Preflight()
    names = [settings.name for settings in audits]
    from registry_hooks.uris import parse_model_uri

    uri = config.model.uri
    try:
        reference = parse_model_uri(uri)
    except CertgateInputError as error:
        return Preflight(unchecked=names, reason=f"the model is not readable here ({error})")
    local_model = reference.kind in ("local_file", "local_mlflow_dir")
    population_file = _local_population_file(config.model.population_uri)
    if config.model.population_uri is not None and population_file is None:
        return Preflight(unchecked=names, reason=f"population_uri "
                         f"{config.model.population_uri} is not a local file (it is fetched "
                         "at run time)")
    if not local_model and population_file is None:
        return Preflight(unchecked=names, reason=f"the population ships with {uri}, which is "
                         "fetched from the registry at run time")
    with tempfile.TemporaryDirectory(prefix="certgate-check-") as scratch:
        if local_model:
            return _with_model(config, audits, Path(scratch))
        assert population_file is not None
        return _population_only(config, audits, population_file)


def _with_model(config: CertgateConfig, audits: list[Any], scratch: Path) -> Preflight:
    from pipeline_steps.audit import bound_inputs
    from registry_hooks.certgate_model import fetch_population, load_model

    loaded = load_model(config.model.uri, None, scratch)
    artifact = fetch_population(loaded, config.model.population_uri, scratch)
    bound_inputs(config, loaded, artifact.model)
    return Preflight(checked=[settings.name for settings in audits],
                     against=f"model {config.model.uri} and population {artifact.source}")


def _population_only(config: CertgateConfig, audits: list[Any], path: Path) -> Preflight:
    from verifier.audits import check_audit
    from verifier.audits.binding import ordered_population
    from verifier.population import load_population

    population = load_population(path)
    given = config.model.input_names
    if given is not None:
        population = ordered_population(population, given, str(path))
    names = list(population.columns)
    for settings in audits:
        missing = [name for name in settings.referenced_inputs() if name not in names]
        if missing:
            raise CertgateInputError(
                f"audit {settings.name!r}: {', '.join(map(repr, missing))} "
                f"{'is not a column' if len(missing) == 1 else 'are not columns'} of the "
                f"population model {path} (columns: {', '.join(names)})"
            )
        check_audit(settings, None, population)
    return Preflight(checked=[settings.name for settings in audits],
                     against=f"population {path} alone ({config.model.uri} is fetched at run "
                     "time; the model-side checks run then)")
