"""The audit configuration: what to audit, against which thresholds, and what to do with it.

A configuration is a YAML file validated by :class:`CertgateConfig` (pydantic v2, unknown keys
rejected everywhere). String values may reference environment variables as ``${NAME}`` or
``${NAME:-default}`` (``$${`` writes a literal ``${``); expansion happens on the parsed values,
so a variable can never inject YAML structure. :func:`load_config` turns every problem — a
missing file, broken YAML, an undefined variable, a typo'd key, an out-of-range value — into a
:class:`ConfigError` whose one-line message names the file and the field.

Audits form a discriminated union on ``kind``; a new audit kind is a new model class added to
:data:`AuditSettings`. Each audit declares the certified quantity its gate reads and the
threshold it must clear (:class:`Requirement`); only a *proven* comparison passes.
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
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from verifier.errors import CertgateInputError

NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*$"
ALIAS_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]*$"
EXECUTOR_PATTERN = re.compile(r"^(local|process|dask(=\S+)?)$")
RESERVED_AUDIT_NAMES = frozenset({"audit", "gate", "variant", "selfcorrect", "source_model",
                                  "source_version"})
"""Names no audit may take (second segments of ``certgate.*`` tags that are not results; the
same set as :data:`registry_hooks.tags.RESERVED_AUDIT_NAMES`)."""
_ENV_REFERENCE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigError(CertgateInputError):
    """A configuration that cannot be used: the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Requirement(_Strict):
    """What a gate demands of one certificate: ``bounds[quantity]`` must lie entirely on the
    passing side of ``threshold``. ``>``/``>=``: its lower bound exceeds / reaches it;
    ``<``/``<=``: its upper bound stays below / at most at it."""

    quantity: str
    label: str
    comparison: Literal[">", "<", ">=", "<="]
    threshold: float

    def proven_pass(self, lower: float, upper: float) -> bool:
        """True only when every value in ``[lower, upper]`` passes."""
        match self.comparison:
            case ">":
                return lower > self.threshold
            case ">=":
                return lower >= self.threshold
            case "<":
                return upper < self.threshold
            case _:
                return upper <= self.threshold

    def proven_fail(self, lower: float, upper: float) -> bool:
        """True only when no value in ``[lower, upper]`` passes."""
        match self.comparison:
            case ">":
                return upper <= self.threshold
            case ">=":
                return upper < self.threshold
            case "<":
                return lower >= self.threshold
            case _:
                return lower > self.threshold

    @property
    def greater_is_better(self) -> bool:
        """True for ``>``/``>=``: the lower bound is the side that must clear the threshold."""
        return self.comparison in (">", ">=")

    def describe(self) -> str:
        return f"{self.label} {self.comparison} {self.threshold:g}"


class DemographicParityAudit(_Strict):
    """Demographic parity of ``favorable_class`` between ``protected == privileged`` and the rest.

    ``form: ratio`` certifies ``P[fav | unprivileged] / P[fav | privileged]`` and passes when
    its certified lower bound exceeds ``gamma`` (γ in (0, 1], e.g. the 80 % rule).
    ``form: difference`` certifies ``|P[fav | unprivileged] − P[fav | privileged]|`` and passes
    when its certified upper bound is below ``gamma`` (γ in (0, 1)). ``qualified`` conditions
    every probability on an event over the inputs (e.g. ``"x.income >= 30000"``).
    ``timeout_s`` bounds the search (``null``: no limit); ``precision`` stops it once the
    interval is that narrow.
    """

    kind: Literal["demographic_parity"]
    name: str = Field(default="demographic_parity", pattern=NAME_PATTERN)
    protected: str = Field(min_length=1)
    privileged: float
    favorable_class: int = Field(ge=0)
    gamma: float
    qualified: str | None = None
    form: Literal["ratio", "difference"] = "ratio"
    timeout_s: float | None = Field(default=60.0, gt=0)
    precision: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _gamma_in_range(self) -> DemographicParityAudit:
        if self.form == "ratio" and not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must lie in (0, 1] for the ratio form, got {self.gamma}")
        if self.form == "difference" and not 0.0 < self.gamma < 1.0:
            raise ValueError(f"gamma must lie in (0, 1) for the difference form, got {self.gamma}")
        return self

    def referenced_inputs(self) -> tuple[str, ...]:
        """Input names this audit reads (checked against the model before anything runs)."""
        return (self.protected,)

    @property
    def requirement(self) -> Requirement:
        if self.form == "ratio":
            return Requirement(quantity="value", label="ratio", comparison=">",
                               threshold=self.gamma)
        return Requirement(quantity="value", label="difference", comparison="<",
                           threshold=self.gamma)


class CausalFairnessAudit(_Strict):
    """Causal fairness (input partitioning, :mod:`verifier.causal`): a non-sensitive point is
    *biased* when two values of the ``sensitive`` input(s) give it two different classes.

    Every network input is taken to range over ``[0, 1]`` (min-max scaled), so the population
    model's support must lie in the unit cube. ``sensitive`` names one continuous input
    (``sensitive_kind: continuous``, its range cut into cells at ``split_values``, default
    0.5) or the inputs of a one-hot group (``one_hot``). ``onehot_groups`` lists the
    non-sensitive one-hot groups by input name (``null``: the population model's categorical
    features); ``query`` restricts the question to a box (``name: [low, high]``; unnamed
    inputs range over ``[0, 1]``). ``lower_edge`` (L) is the smallest partition edge before
    a partition is excluded, ``max_unstable`` (U) the most unstable ReLUs handed to the exact
    MILP check; ``timeout_s`` is the time budget and ``target_width`` stops refining once the
    uniform biased-share interval is that narrow.

    The gate reads the biased share of the query under ``measure`` — ``uniform``: the share
    of the query's volume (``biased_share``); ``population``: ``P(biased | query)`` under the
    population model (``biased_share_population``) — and passes when its certified *upper*
    bound is strictly below ``max_biased_share`` (in ``(0, 1]``).
    """

    model_config = ConfigDict(allow_inf_nan=False)

    kind: Literal["causal_fairness"]
    name: str = Field(default="causal_fairness", pattern=NAME_PATTERN)
    sensitive: list[str] = Field(min_length=1)
    sensitive_kind: Literal["continuous", "one_hot"] = "continuous"
    split_values: list[float] | None = None
    onehot_groups: list[Annotated[list[str], Field(min_length=2)]] | None = None
    query: dict[str, tuple[float, float]] | None = None
    lower_edge: float = Field(default=0.0, ge=0)
    max_unstable: int = Field(default=8, ge=0)
    timeout_s: float = Field(default=60.0, gt=0)
    target_width: float = Field(default=0.005, ge=0)
    measure: Literal["uniform", "population"] = "uniform"
    max_biased_share: float

    @field_validator("split_values")
    @classmethod
    def _splits_inside(cls, values: list[float] | None) -> list[float] | None:
        for value in values or []:
            if not 0.0 < value < 1.0:
                raise ValueError(f"every split value must lie in (0, 1), got {value}")
        return values

    @field_validator("query")
    @classmethod
    def _query_intervals(cls, query: dict[str, tuple[float, float]] | None
                         ) -> dict[str, tuple[float, float]] | None:
        for input_name, (low, high) in (query or {}).items():
            if low > high:
                raise ValueError(f"the query interval of {input_name!r} is empty: "
                                 f"[{low}, {high}]")
        return query

    @model_validator(mode="after")
    def _consistent(self) -> CausalFairnessAudit:
        if len(set(self.sensitive)) != len(self.sensitive):
            raise ValueError(f"sensitive lists an input twice: {self.sensitive}")
        if self.sensitive_kind == "continuous" and len(self.sensitive) != 1:
            raise ValueError("a continuous sensitive feature is exactly one input; use "
                             "sensitive_kind: one_hot for a one-hot group")
        if self.sensitive_kind == "one_hot" and len(self.sensitive) < 2:
            raise ValueError("a one_hot sensitive feature needs at least two inputs")
        if self.sensitive_kind == "one_hot" and self.split_values is not None:
            raise ValueError("split_values only apply to a continuous sensitive input")
        if not 0.0 < self.max_biased_share <= 1.0:
            raise ValueError(
                f"max_biased_share must lie in (0, 1], got {self.max_biased_share} (the gate "
                "passes only when the certified upper bound is strictly below it)"
            )
        return self

    def referenced_inputs(self) -> tuple[str, ...]:
        """Input names this audit reads (checked against the model before anything runs)."""
        grouped = [name for group in self.onehot_groups or [] for name in group]
        return (*self.sensitive, *grouped, *(self.query or {}))

    @property
    def requirement(self) -> Requirement:
        quantity = "biased_share" if self.measure == "uniform" else "biased_share_population"
        return Requirement(quantity=quantity, label=quantity, comparison="<",
                           threshold=self.max_biased_share)


class _ProbabilityAudit(_Strict):
    """An exact-probability audit (weighted model integration, :mod:`verifier.wmi`) under the
    population model.

    The gate passes when the certified *lower* bound of the probability is at least
    ``min_probability`` (``probability >= min_probability``). The probability is exact in real
    arithmetic but computed in float64, so the certificate widens it by a documented float
    allowance (``pipeline_steps.audit_kinds.WMI_FLOAT_ALLOWANCE``): a threshold within that
    allowance of the computed value stays undecided, and 1 can never be certified.
    """

    model_config = ConfigDict(allow_inf_nan=False)

    min_probability: float

    @field_validator("min_probability")
    @classmethod
    def _probability_below_one(cls, value: float) -> float:
        if not 0.0 <= value < 1.0:
            raise ValueError(
                f"min_probability must lie in [0, 1), got {value} (a probability of exactly 1 "
                "cannot be certified from floating-point integration)"
            )
        return value

    def referenced_inputs(self) -> tuple[str, ...]:
        """Input names this audit reads (checked against the model before anything runs)."""
        return ()

    @property
    def requirement(self) -> Requirement:
        return Requirement(quantity="probability", label="probability", comparison=">=",
                           threshold=self.min_probability)


class MonotonicityAudit(_ProbabilityAudit):
    """Monotonicity in the input ``feature`` by self-composition: the probability that
    ``class(x) = positive_class`` implies ``class(x') = positive_class`` for pairs that agree
    except on ``feature``, where ``x <= x'`` (``x >= x'`` when ``decreasing``). Pairs are
    uniform on the population's support box, or weighted by the population density when
    ``use_prior``. Passes when ``P >= min_probability`` is proven (see
    :class:`_ProbabilityAudit`).
    """

    kind: Literal["monotonicity"]
    name: str = Field(default="monotonicity", pattern=NAME_PATTERN)
    feature: str = Field(min_length=1)
    decreasing: bool = False
    positive_class: int = Field(default=1, ge=0)
    use_prior: bool = False

    def referenced_inputs(self) -> tuple[str, ...]:
        """Input names this audit reads (checked against the model before anything runs)."""
        return (self.feature,)


class NoiseRobustnessAudit(_ProbabilityAudit):
    """Robustness to additive noise: ``P(class(x) = class(x + n))`` with ``x`` drawn from the
    population and ``n`` added to the one input in ``features``, uniform on
    ``noise_uniform: [low, high]`` or triangular with ``noise_triangular: [low, mode, high]``
    (exactly one of the two). Passes when ``P >= min_probability`` is proven.
    """

    kind: Literal["noise_robustness"]
    name: str = Field(default="noise_robustness", pattern=NAME_PATTERN)
    features: list[str] = Field(min_length=1)
    noise_uniform: tuple[float, float] | None = None
    noise_triangular: tuple[float, float, float] | None = None

    def referenced_inputs(self) -> tuple[str, ...]:
        """Input names this audit reads (checked against the model before anything runs)."""
        return tuple(self.features)

    @model_validator(mode="after")
    def _one_noise(self) -> NoiseRobustnessAudit:
        if (self.noise_uniform is None) == (self.noise_triangular is None):
            raise ValueError("give exactly one of noise_uniform: [low, high] and "
                             "noise_triangular: [low, mode, high]")
        if len(self.features) != 1:
            raise ValueError(f"noise_uniform/noise_triangular describe the noise on one "
                             f"feature, got features {self.features}")
        if self.noise_uniform is not None and not self.noise_uniform[0] < self.noise_uniform[1]:
            raise ValueError(f"noise_uniform needs low < high, got {list(self.noise_uniform)}")
        if self.noise_triangular is not None:
            low, mode, high = self.noise_triangular
            if not (low <= mode <= high and low < high):
                raise ValueError("noise_triangular needs low <= mode <= high and low < high, "
                                 f"got {list(self.noise_triangular)}")
        return self


class LocalRobustnessAudit(_ProbabilityAudit):
    """Probabilistic local robustness: ``P(class(x) = label | ‖x − center‖∞ <= epsilon)``
    under the population model (``center``: one value per network input, in input order;
    ``label`` defaults to the class predicted at ``center``). Passes when
    ``P >= min_probability`` is proven.
    """

    kind: Literal["local_robustness"]
    name: str = Field(default="local_robustness", pattern=NAME_PATTERN)
    center: list[float] = Field(min_length=1)
    epsilon: float = Field(gt=0)
    label: int | None = Field(default=None, ge=0)


AUDIT_TYPES: tuple[type[BaseModel], ...] = (
    DemographicParityAudit,
    CausalFairnessAudit,
    MonotonicityAudit,
    NoiseRobustnessAudit,
    LocalRobustnessAudit,
)
"""Every audit kind a configuration may list; extend this tuple to add one."""

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


class GatePolicy(_Strict):
    """How certificates become a decision.

    ``undecided: fail`` makes an unproven audit (timeout, interval straddling the threshold)
    fail the gate; ``warn`` lets the pipeline continue but still never promotes.
    ``promote_alias`` is moved to the audited version on a proven pass (``null``: never move).
    ``mlflow_validation`` also runs the decision through ``mlflow.validate_evaluation_results``.
    """

    undecided: Literal["fail", "warn"] = "fail"
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
    audits: list[AuditSettings] = Field(min_length=1)
    gate: GatePolicy = GatePolicy()
    deploy: DeploySettings | None = None
    executor: str = Field(default="local", description="local, process, dask or dask=ADDRESS")

    @field_validator("executor")
    @classmethod
    def _known_executor(cls, value: str) -> str:
        if not EXECUTOR_PATTERN.match(value):
            raise ValueError(
                f"unknown executor {value!r}; use local, process, dask or dask=ADDRESS"
            )
        return value

    def audit_fingerprint(self) -> str:
        """A short hash of everything that determines the certificates (population source,
        data validation, audits); a version audited under another fingerprint is due again."""
        relevant: dict[str, Any] = {
            "population_uri": self.model.population_uri,
            "validation": self.validation.model_dump(mode="json"),
            "audits": [audit.model_dump(mode="json") for audit in self.audits],
        }
        if self.model.input_names is not None:
            relevant["input_names"] = list(self.model.input_names)
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
        document = yaml.safe_load(file.read_text(encoding="utf-8"))
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

