"""The audit configuration: what to audit, against which thresholds, and what to do with it.

A configuration is a YAML file validated by :class:`CertgateConfig` (pydantic v2, unknown keys
rejected everywhere). String values may reference environment variables as ``${NAME}`` or
``${NAME:-default}`` (``$${`` writes a literal ``${``); expansion happens on the parsed values,
so a variable can never inject YAML structure. :func:`load_config` turns every problem — a
missing file, broken YAML, an undefined variable, a typo'd key, an out-of-range value — into a
:class:`ConfigError` whose one-line message names the file and the field.

Audits form a discriminated union on ``kind`` over the settings of the audit-kind modules in
:mod:`verifier.audits` (one module per kind: settings, runner, verdict). Each audit declares
the certified quantity its gate reads and the threshold it must clear (:class:`Requirement`);
only a *proven* comparison passes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from verifier.audits import SETTINGS_TYPES
from verifier.audits.requirement import NAME_PATTERN as NAME_PATTERN
from verifier.audits.requirement import Requirement as Requirement
from verifier.audits.requirement import StrictSettings
from verifier.errors import CertgateInputError
from verifier.text_files import read_text
from verifier.yaml_documents import load_yaml

ALIAS_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]*$"
EXECUTOR_PATTERN = re.compile(r"^(local|process|dask(=\S+)?)$")
BINDING_RULE = "inputs-by-name/1"
"""Part of every fingerprint: audits recorded before inputs were bound by name (when an
unnamed model took the population's column order) are never reused, their versions are due
again."""
RESERVED_AUDIT_NAMES = frozenset({"audit", "gate", "variant", "selfcorrect", "source_model",
                                  "source_version"})
"""Names no audit may take (second segments of ``certgate.*`` tags that are not results; the
same set as :data:`registry_hooks.tags.RESERVED_AUDIT_NAMES`)."""
_ENV_REFERENCE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigError(CertgateInputError):
    """A configuration that cannot be used: the message names the file and the field."""


_Strict = StrictSettings
_OLD_CLASS_NAMES = {"DemographicParityAudit": "DemographicParitySettings",
                    "CausalFairnessAudit": "CausalFairnessSettings",
                    "MonotonicityAudit": "MonotonicitySettings",
                    "NoiseRobustnessAudit": "NoiseRobustnessSettings",
                    "LocalRobustnessAudit": "LocalRobustnessSettings"}
"""Old second names of the settings classes (one class, one name: the ``*Settings`` of
:mod:`verifier.audits`); importing one is refused with an error naming the class to import."""


def __getattr__(name: str) -> Any:
    if name in _OLD_CLASS_NAMES:
        raise AttributeError(f"configs.schema.{name} is now verifier.audits."
                             f"{_OLD_CLASS_NAMES[name]}: import that")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

AUDIT_TYPES: tuple[type[BaseModel], ...] = SETTINGS_TYPES
"""Every audit kind a configuration may list: the settings of each module in
:mod:`verifier.audits` (a new kind is a new module registered there)."""

AuditSettings = Annotated[Union[AUDIT_TYPES], Field(discriminator="kind")]  # noqa: UP007
_AUDIT_KINDS = frozenset(get_args(kind.model_fields["kind"].annotation)[0] for kind in AUDIT_TYPES)


class ModelSource(_Strict):
    """The model to audit and, optionally, where its population model lives.

    ``uri``: ``models:/NAME@ALIAS``, ``models:/NAME/VERSION``, ``runs:/RUN_ID/PATH``, or a local
    ``.onnx``/``.pt``/``.nnet``/``.json`` file. ``population_uri``: an MLflow artifact URI or a
    local JSON file; ``null`` uses the ``population_model.json`` shipped inside the model
    version. ``input_names``: the network's input names in input order, for a model that
    records none (a plain ``mlflow.pytorch.log_model``, an ONNX export with one input tensor);
    when the model records names they must agree. The population model is bound to these names
    and never the other way round.
    """

    uri: str = Field(min_length=1)
    population_uri: str | None = None
    input_names: list[Annotated[str, Field(min_length=1)]] | None = Field(default=None,
                                                                          min_length=1)

    @field_validator("input_names")
    @classmethod
    def _distinct_names(cls, names: list[str] | None) -> list[str] | None:
        if names is not None and len(set(names)) != len(names):
            doubled = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(f"input names listed twice: {', '.join(doubled)}")
        return names


class TrackingSettings(_Strict):
    """Where MLflow lives. ``null`` URIs fall back to ``MLFLOW_TRACKING_URI``/MLflow defaults."""

    tracking_uri: str | None = None
    registry_uri: str | None = None
    experiment: str = Field(default="certgate-audits", min_length=1)


class ValidationSettings(_Strict):
    """Data checks before any audit: ``population_samples`` rows drawn (seeded) from the
    population model, and an optional ``audit_data`` CSV with one column per network input."""

    population_samples: int = Field(default=2000, ge=1)
    seed: int = 0
    audit_data: Path | None = None


class FidelitySettings(_Strict):
    """The population-fidelity check of every audit (:mod:`verifier.audits.fidelity`).

    ``data``: a CSV or Parquet table of the population (raw string columns are one-hot
    encoded as for ``population fit``); ``null`` uses the table the population model records
    it was fitted from (``fitted_from``, when its sha256 still matches), else a file-backed
    dataset logged with the model version's source run, else no check is possible (said on
    the certificate, not an error). ``level``: confidence of the empirical interval.
    ``population_samples``/``seed``: draws from the population model for its fit statistics.
    """

    data: Path | None = None
    level: float = Field(default=0.95, gt=0.0, lt=1.0)
    population_samples: int = Field(default=20_000, ge=2)
    seed: int = 0


class GatePolicy(_Strict):
    """How certificates become a decision.

    ``undecided: fail`` makes an unproven audit (timeout, interval straddling the threshold)
    fail the gate; ``warn`` lets the pipeline continue but still never promotes.
    ``population_contradicted: fail`` fails an audit whose population model the data
    contradicts (``population_fidelity: contradicted``), whatever it proved; ``warn`` lets
    the pipeline continue but never promotes.
    ``population_unchecked`` is what a proven pass whose population the data could not test
    (``population_fidelity: unchecked``: no data reached, the table the population was
    fitted from changed since the fit, or no empirical check for the audit kind) does to the
    gate: ``pass`` (the default) passes it, ``warn`` lets the pipeline continue but never
    promotes, ``fail`` fails it.
    ``promote_alias`` is moved to the audited version on a proven pass (``null``: never move).
    ``mlflow_validation`` also runs the decision through ``mlflow.validate_evaluation_results``.
    """

    undecided: Literal["fail", "warn"] = "fail"
    population_contradicted: Literal["fail", "warn"] = "fail"
    population_unchecked: Literal["pass", "warn", "fail"] = "pass"
    promote_alias: str | None = Field(default="champion", pattern=ALIAS_PATTERN)
    mlflow_validation: bool = False


class DeploySettings(_Strict):
    """The self-correcting deployment: safe-ordering constraints and where to register it."""

    constraints: Path
    registered_model: str | None = Field(
        default=None, min_length=1,
        description="where to register the variant (default: the audited registered model)",
    )
    alias: str = Field(default="safe", pattern=ALIAS_PATTERN)
    on_bottom: Literal["mark", "raise", "abstain"] = Field(
        default="mark", description="rows whose constraints cannot be met: flag, raise, abstain"
    )


class CertgateConfig(_Strict):
    """One audit configuration (see the module docstring and ``certgate config schema``)."""

    tracking: TrackingSettings = TrackingSettings()
    model: ModelSource
    validation: ValidationSettings = ValidationSettings()
    fidelity: FidelitySettings = FidelitySettings()
    audits: list[AuditSettings] = Field(min_length=1)
    gate: GatePolicy = GatePolicy()
    deploy: DeploySettings | None = None
    executor: str = Field(
        default="local",
        description="local, process, dask or dask=ADDRESS: PV audits bound their batches of "
                    "boxes on it, other audits run on it in parallel",
    )
    workers: int | None = Field(default=None, ge=1,
                                description="worker count for process/dask (default: cores)")

    @field_validator("executor")
    @classmethod
    def _known_executor(cls, value: str) -> str:
        if not EXECUTOR_PATTERN.match(value):
            raise ValueError(
                f"unknown executor {value!r}; use local, process, dask or dask=ADDRESS"
            )
        return value

    def audit_fingerprint(self) -> str:
        """A short hash of everything that determines the certificates (the binding rule,
        population source, input names, data validation, the fidelity check, audits); a
        version audited under another fingerprint is due again."""
        relevant: dict[str, Any] = {
            "binding": BINDING_RULE,
            "population_uri": self.model.population_uri,
            "input_names": self.model.input_names,
            "validation": self.validation.model_dump(mode="json"),
            "fidelity": self.fidelity.model_dump(mode="json"),
            "audits": [audit.fingerprint_fields() for audit in self.audits],
        }
        text = json.dumps(relevant, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @model_validator(mode="after")
    def _unique_audit_names(self) -> CertgateConfig:
        seen: set[str] = set()
        for audit in self.audits:
            if audit.name in RESERVED_AUDIT_NAMES:
                raise ValueError(
                    f"an audit cannot be named {audit.name!r}: certgate.{audit.name}.* tags are "
                    f"not audit results (reserved: {', '.join(sorted(RESERVED_AUDIT_NAMES))})"
                )
            if audit.name in seen:
                raise ValueError(
                    f"two audits are named {audit.name!r}; give each a distinct 'name'"
                )
            seen.add(audit.name)
        return self


def json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`CertgateConfig` (what ``certgate config schema`` prints)."""
    return CertgateConfig.model_json_schema()


def expand_environment(value: Any, environ: Mapping[str, str] | None = None,
                       location: str = "") -> Any:
    """Replace ``${NAME}``/``${NAME:-default}`` in every string of a parsed YAML document.

    Raises :class:`ConfigError` naming the field when a variable without default is unset.
    """
    env = os.environ if environ is None else environ
    if isinstance(value, dict):
        return {key: expand_environment(item, env, _join(location, str(key)))
                for key, item in value.items()}
    if isinstance(value, list):
        return [expand_environment(item, env, f"{location}[{index}]")
                for index, item in enumerate(value)]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ConfigError(
            f"{location or '<root>'}: environment variable {name} is not set "
            f"(write ${{{name}:-default}} to give a default)"
        )

    return _ENV_REFERENCE.sub(substitute, value)


def parse_config(document: Any, source: str = "<config>") -> CertgateConfig:
    """Validate an already-parsed document (after environment expansion)."""
    if not isinstance(document, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got "
                          f"{type(document).__name__}")
    try:
        expanded = expand_environment(document)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from error
    try:
        return CertgateConfig.model_validate(expanded)
    except ValidationError as error:
        raise ConfigError(f"{source}: {describe_validation_error(error)}") from error


def load_config(path: str | Path) -> CertgateConfig:
    """Read, expand and validate a YAML configuration file."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file not found: {file}")
    try:
        document = load_yaml(read_text(file))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{file}:{where}: invalid YAML: {problem}") from error
    return parse_config(document, str(file))


def describe_validation_error(error: ValidationError) -> str:
    """One line per problem joined by ``; ``, each naming the field as ``a.b[0].c``."""
    problems = []
    for item in error.errors():
        field = _field_path(item["loc"])
        if item["type"] == "extra_forbidden":
            problems.append(f"{field}: unknown key")
        elif item["type"] == "missing":
            problems.append(f"{field}: required key missing")
        elif item["type"] == "union_tag_not_found":
            known = ", ".join(sorted(_AUDIT_KINDS))
            problems.append(f"{_join(field, 'kind')}: required key missing (one of: {known})")
        elif item["type"] == "union_tag_invalid":
            tag = item["ctx"]["tag"]
            known = ", ".join(sorted(_AUDIT_KINDS))
            problems.append(f"{_join(field, 'kind')}: unknown audit kind {tag!r}; known: {known}")
        else:
            message = item["msg"].removeprefix("Value error, ")
            problems.append(f"{field}: {message}")
    return "; ".join(problems)


def _field_path(location: tuple[Any, ...]) -> str:
    """``('audits', 0, 'demographic_parity', 'gamm')`` -> ``audits[0].gamm`` (union tags
    dropped)."""
    path = ""
    previous_was_index = False
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
            previous_was_index = True
            continue
        if previous_was_index and part in _AUDIT_KINDS:
            previous_was_index = False
            continue
        path = _join(path, part)
        previous_was_index = False
    return path or "<root>"


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key

