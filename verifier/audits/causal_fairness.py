"""Causal fairness (input partitioning, :mod:`verifier.causal`): settings, runner and verdict
in one place. A thin layer over :class:`verifier.causal.CausalSettings`: the settings below
name the question (protected inputs, query, measure, threshold) and the engine's budget
(:func:`engine_settings` maps them onto the engine's own settings, in one place).

Inputs are addressed by ``network.input_names``; every input must range over ``[0, 1]``, so
the population model's support must lie in the unit cube. The population model is always
passed on, so the certificate carries ``biased_share`` (uniform on the query) and
``biased_share_population`` (``P(biased | query)``); ``measure`` chooses which one the gate
reads. Without configured ``onehot_groups`` the population model's one-hot groups
(categorical features) that contain no protected input are used, so one-hot columns are never
taken for continuous ones. The verdict is the requirement judged on the chosen bound
(:func:`verifier.audits.requirement.judged_verdict`); the engine's own verdict
(``fair``/``biased``/``unknown``) is kept as ``details["causal_verdict"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import ConfigDict, Field, field_validator, model_validator

from verifier.audits.coded_values import code_interval, column_code, value_code
from verifier.audits.kind import counted, elapsed_text
from verifier.audits.population_fit import check_population_fits
from verifier.audits.requirement import (
    NAME_PATTERN,
    Requirement,
    StrictSettings,
    effective_timeout,
    judged_verdict,
)
from verifier.certificate import Certificate
from verifier.errors import CertgateInputError
from verifier.numerics import grid_values

if TYPE_CHECKING:
    from verifier.network import Network

KIND = "causal_fairness"
PROGRESS = "partitions"
EMPIRICAL_CHECK = (
    "the biased share is a property of the model over the input space (which points have "
    "a counterpart of another class), not a frequency the data rows estimate"
)
PARTITION_TEXT = {"biased_everywhere": "biased everywhere",
                  "biased_witness": "with a witness", "refining": "still refining"}
"""How the report names the engine's final partition statuses."""


class CausalFairnessSettings(StrictSettings):
    """Causal fairness (input partitioning, :mod:`verifier.causal`): a point of the other
    inputs is *biased* when two values of the ``protected`` input(s) give it two different
    classes.

    The inputs range over ``domain`` (``name: [min, max]``), else the population model's
    declared feature domains (its support where unbounded), else the model file's own (a
    ``.nnet`` header), else ``[0, 1]``.
    ``integer_inputs`` (``all`` or names; default: the population's integer columns) are
    analysed on their integer points: cuts between integers, integer witnesses, shares that
    count points. A single-output network is a binary classifier (class 1 iff its logit is
    > 0). ``protected`` names one input (``protected_kind: continuous``, its range cut into
    cells at ``split_values``, default its midpoint; an integer input is compared at each of
    its values) or the inputs of a one-hot group (``one_hot``); ``protected_values`` compares
    only those values (numbers, or input names of the group). ``onehot_groups`` lists the
    other one-hot groups by input name (``null``: the population model's categorical
    features); ``query`` restricts the question to a box (``name: [low, high]``; its range of
    a protected input conditions the population measure, and a point is still biased when
    any two protected values give it two classes).
    ``lower_edge`` (L) is the smallest partition edge before
    a partition is excluded, ``max_unstable`` (U) the most unstable ReLUs handed to the exact
    MILP check; ``timeout_s`` is the time budget and ``target_width`` stops refining once the
    uniform biased-share interval is that narrow and the share ``measure`` judges no longer
    holds ``max_biased_share`` (a narrow interval around it is refined on).

    The gate reads the biased share of the query under ``measure`` — ``uniform``: the share
    of the query's volume (``biased_share``); ``population``: ``P(biased | query)`` under the
    population model (``biased_share_population``) — and passes when its certified *upper*
    bound is strictly below ``max_biased_share`` (in ``(0, 1]``).

    The old keys ``sensitive``, ``sensitive_kind`` and ``sensitive_values`` are refused,
    naming ``protected``, ``protected_kind`` and ``protected_values`` (one vocabulary with
    demographic parity and the engine, :mod:`verifier.causal`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    RENAMED: ClassVar[Mapping[str, str]] = {
        "sensitive": "protected", "sensitive_kind": "protected_kind",
        "sensitive_values": "protected_values"}

    kind: Literal["causal_fairness"]
    name: str = Field(default="causal_fairness", pattern=NAME_PATTERN)
    protected: list[str] = Field(min_length=1)
    protected_kind: Literal["continuous", "one_hot"] = "continuous"
    split_values: list[float] | None = None
    onehot_groups: list[Annotated[list[str], Field(min_length=2)]] | None = None
    query: dict[str, tuple[float, float]] | None = None
    domain: dict[str, tuple[float, float]] | None = None
    integer_inputs: Literal["all"] | list[str] | None = None
    protected_values: list[float] | list[str] | None = None
    lower_edge: float = Field(default=0.0, ge=0)
    max_unstable: int = Field(default=8, ge=0)
    timeout_s: float = Field(default=60.0, gt=0)
    target_width: float = Field(default=0.005, ge=0)
    measure: Literal["uniform", "population"] = "uniform"
    max_biased_share: float

    @field_validator("protected", mode="before")
    @classmethod
    def _one_name(cls, names: Any) -> Any:
        """One input may be given as its name alone (``protected: sex``), as for demographic
        parity."""
        return [names] if isinstance(names, str) else names

    @field_validator("query", "domain")
    @classmethod
    def _nonempty_intervals(cls, boxes: dict[str, tuple[float, float]] | None, info: Any
                            ) -> dict[str, tuple[float, float]] | None:
        for input_name, (low, high) in (boxes or {}).items():
            if low > high:
                raise ValueError(f"the {info.field_name} interval of {input_name!r} is empty: "
                                 f"[{low}, {high}]")
        return boxes

    @model_validator(mode="after")
    def _consistent(self) -> CausalFairnessSettings:
        if len(set(self.protected)) != len(self.protected):
            raise ValueError(f"protected lists an input twice: {self.protected}")
        if self.protected_kind == "continuous" and len(self.protected) != 1:
            raise ValueError("a continuous protected feature is exactly one input; use "
                             "protected_kind: one_hot for a one-hot group")
        if self.protected_kind == "one_hot" and len(self.protected) < 2:
            raise ValueError(
                "a one_hot protected feature needs at least two inputs: list the group's "
                f"columns, or give the categorical feature's name ({self.protected[0]!r}) "
                "without protected_kind, which reads it as its whole one-hot group")
        if self.protected_kind == "one_hot" and self.split_values is not None:
            raise ValueError("split_values only apply to a continuous protected input")
        if not 0.0 < self.max_biased_share <= 1.0:
            raise ValueError(
                f"max_biased_share must lie in (0, 1], got {self.max_biased_share} (the gate "
                "passes only when the certified upper bound is strictly below it)"
            )
        return self

    def referenced_inputs(self) -> tuple[str, ...]:
        """Input names this audit reads (checked against the model before anything runs)."""
        grouped = [name for group in self.onehot_groups or [] for name in group]
        return (*self.protected, *grouped, *(self.query or {}))

    @property
    def requirement(self) -> Requirement:
        quantity = "biased_share" if self.measure == "uniform" else "biased_share_population"
        return Requirement(quantity=quantity, label=quantity, comparison="<",
                           threshold=self.max_biased_share)


def engine_settings(settings: CausalFairnessSettings, budget: float | None = None,
                    **engine: Any) -> Any:
    """The :class:`verifier.causal.CausalSettings` of ``settings`` (``engine``: further
    engine-only options, e.g. ``chunk_size``)."""
    from verifier.causal import CausalSettings

    return CausalSettings(min_edge=settings.lower_edge, max_unstable=settings.max_unstable,
                          timeout_s=effective_timeout(settings.timeout_s, budget),
                          target_width=settings.target_width,
                          judged_below=settings.max_biased_share,
                          judged_measure=settings.measure, **engine)


def input_domain(settings: CausalFairnessSettings, network: Network, population: Any,
                 model_domain: Any = None) -> Any:
    """The inputs' ``[min, max]``: the configured ``domain``, else the population's declared
    feature domains (its support where a domain is unbounded), else the model file's own (a
    ``.nnet`` header), else ``None`` (``[0, 1]``, Libra's convention). An input still
    unbounded is refused."""
    if settings.domain is not None:
        return {name: (low, high) for name, (low, high) in settings.domain.items()}
    if population is not None:
        declared_low, declared_high = population.domain_box()
        support_low, support_high = population.support()
        low = np.where(np.isfinite(declared_low), declared_low, support_low).astype(np.float64)
        high = np.where(np.isfinite(declared_high), declared_high, support_high).astype(
            np.float64)
        unbounded = np.flatnonzero(~(np.isfinite(low) & np.isfinite(high)))
        if unbounded.size:
            name = network.input_names[int(unbounded[0])]
            raise CertgateInputError(
                f"causal fairness partitions a bounded input space, but the population's "
                f"support of {name!r} is [{low[unbounded[0]]:g}, {high[unbounded[0]]:g}]; "
                "give domain: {name: [min, max]}"
            )
        return low, high
    return model_domain


def integer_inputs(settings: CausalFairnessSettings, network: Network,
                   population: Any) -> str | list[str] | None:
    """The integer-coded inputs: as configured, else the population's integer columns outside
    one-hot groups, else none."""
    if settings.integer_inputs is not None or population is None:
        return settings.integer_inputs
    grouped = {index for group in population.onehot_groups() for index in group}
    flags = np.asarray(population.integer_columns(), dtype=bool)
    return [name for index, name in enumerate(network.input_names)
            if flags[index] and index not in grouped]


def _onehot_groups(settings: CausalFairnessSettings, network: Network,
                   population: Any) -> list[list[str]]:
    """The configured one-hot groups of the other inputs, or (``null``) the population
    model's one-hot groups that do not contain a protected input."""
    if settings.onehot_groups is not None:
        return [list(group) for group in settings.onehot_groups]
    if population is None:
        return []
    names = list(network.input_names)
    groups = [[names[index] for index in group] for group in population.onehot_groups()]
    return [group for group in groups if not set(group) & set(settings.protected)]


def _named_categorical(protected: list[str], population: Any) -> list[str] | None:
    """The columns of the population's categorical feature when ``protected`` is its name
    alone (``race`` for ``race=A, race=B, …``) and no input column is called so; else None."""
    if len(protected) != 1 or protected[0] in population.columns:
        return None
    for feature in population.features:
        if feature.name == protected[0] and feature.kind == "categorical":
            return list(feature.columns)
    return None


def protected_group(settings: CausalFairnessSettings,
                    population: Any) -> CausalFairnessSettings:
    """``settings`` with a protected categorical feature named in full.

    A one-hot group of the population model is one feature, and a causal audit compares its
    categories: a protected input inside a group cannot be varied alone (the group's other
    columns would be free inputs, and the pairs compared points the feature never takes).
    Protected inputs naming every column of a group but one are that group, as a model
    reading every column of a group but one reads the last with zero weights (binding):
    ``sex=Male`` of ``sex=Female, sex=Male``, or pandas' ``drop_first`` dummies ``race_B,
    race_C`` of ``race_(dropped), race_B, race_C``; so is the categorical feature's own name
    (``race``) when no input column has that name. They become the whole group (one-hot;
    all its categories compared unless ``protected_values`` names some). ``settings`` itself
    when no protected input lies in a group or they already name a whole one.

    Raises:
        CertgateInputError: the protected inputs leave out two or more columns of a group
            (which categories are meant is ambiguous), mix a group's columns with other
            inputs, or give numeric ``protected_values`` for a group named by part.
    """
    if population is None:
        return settings
    names = list(population.columns)
    whole = _named_categorical(settings.protected, population)
    if whole is not None:
        return settings.model_copy(update={"protected": whole, "protected_kind": "one_hot"})
    named = set(settings.protected)
    for indices in population.onehot_groups():
        group = [names[index] for index in indices]
        if not named & set(group) or named == set(group):
            continue
        listed = ", ".join(group)
        if named - set(group):
            raise CertgateInputError(
                f"protected inputs {', '.join(settings.protected)} mix columns of the one-hot "
                f"group ({listed}) with other inputs; protect one feature: the whole group or "
                "one input outside it")
        missing = [column for column in group if column not in named]
        if len(missing) > 1:
            raise CertgateInputError(
                f"protected {', '.join(settings.protected)} is part of the one-hot group "
                f"({listed}): a causal audit compares a categorical feature's categories, so "
                f"protect the whole group (--protected {','.join(group)}) and name the "
                "categories to compare with --protected-values")
        values = settings.protected_values
        if values is not None and not all(isinstance(value, str) for value in values):
            raise CertgateInputError(
                f"protected {', '.join(settings.protected)} is read as the one-hot group "
                f"({listed}); give protected_values as names of its columns")
        return settings.model_copy(update={"protected": group, "protected_kind": "one_hot"})
    return settings


SETTINGS = CausalFairnessSettings
in_full = protected_group
"""The kind's hook of :func:`verifier.audits.settings_in_full`: the protected group in full."""


def engine_options(executor: str, workers: int | None) -> None:
    """Whole causal audits run on the configured executor (the engine spreads its own
    partitions only over the executor it is given)."""
    return None


def check(settings: CausalFairnessSettings, network: Network | None, population: Any) -> None:
    """Raise the input error :func:`run` would meet before any partition is analysed: the
    population measure needs a population model; a protected input inside a one-hot group
    must name it (:func:`protected_group`); ``protected_values``, ``query`` and
    ``domain`` give values in the data's units, which on a coded column must lie on its grid
    or hold a value of it (:func:`settings_in_codes`)."""
    if population is None and settings.measure == "population":
        raise CertgateInputError("measure: population needs a population model")
    grouped = protected_group(settings, population)
    _values_are_numbers(grouped)
    settings_in_codes(grouped, population)


def _values_are_numbers(settings: CausalFairnessSettings) -> None:
    """A protected input that is one column (not a one-hot group) takes numbers as its
    ``protected_values``; a word is refused naming the field (``yes``/``no`` are words in the
    configuration's YAML, not 1/0)."""
    if settings.protected_kind != "continuous" or not settings.protected_values:
        return
    for value in settings.protected_values:
        try:
            float(value)
        except ValueError:
            raise CertgateInputError(
                f"protected_values: {value!r} is not a number, and {settings.protected[0]!r} is "
                "one input, not a one-hot group (whose protected values are its input names): "
                "give the column's values as numbers (a binary column's are 0 and 1)") from None


def settings_in_codes(settings: CausalFairnessSettings,
                      population: Any) -> CausalFairnessSettings:
    """``settings`` with a coded column's values (value ``offset + step·k``) written in the
    codes ``k`` the engine partitions, exactly (:mod:`verifier.audits.coded_values`): a
    protected value must be a value of the grid; a ``query`` or ``domain`` interval becomes
    the codes whose values lie in it (the same grid points). A coded column is analysed on
    its codes, so it must be one of the ``integer_inputs`` when they are configured.
    ``settings`` itself when no setting names a coded column."""
    named = [*settings.protected, *(settings.query or {}), *(settings.domain or {})]
    coded = [name for name in dict.fromkeys(named) if column_code(population, name)]
    if not coded:
        return settings
    configured = settings.integer_inputs
    if isinstance(configured, list):
        missing = [name for name in coded if name not in configured]
        if missing:
            raise CertgateInputError(
                f"integer_inputs leaves out the coded column(s) {', '.join(missing)} (value = "
                "offset + step·k): a coded column is analysed on its grid points; list it in "
                "integer_inputs or leave integer_inputs unset")
    update: dict[str, Any] = {}
    values = settings.protected_values
    if values is not None and settings.protected_kind == "continuous" \
            and all(isinstance(value, int | float) for value in values):
        [name] = settings.protected
        update["protected_values"] = [value_code(population, name, float(value),
                                                 "protected_values") for value in values]
    for field in ("query", "domain"):
        boxes = getattr(settings, field)
        if boxes is not None:
            update[field] = {name: code_interval(population, name, low, high, field)
                             for name, (low, high) in boxes.items()}
    return settings.model_copy(update=update)


def work_done(certificate: Certificate) -> str:
    """The certified shares first (decided = certified fair + certified biased everywhere,
    then contains bias and undecided), then partitions analysed, rounds, the final partitions
    by status and the share of the query each status holds, when the certificate records
    them, and the exact checks' MILPs and proofs when there were any."""
    cost, details = certificate.cost, certificate.details
    if "analysed_partitions" not in cost:
        return ""
    certified = details.get("certified_shares")
    headline = "" if certified is None else (
        f"decided {_percent(certified['decided'])} of the query (certified fair "
        f"{_percent(certified['fair'])} + certified biased everywhere "
        f"{_percent(certified['biased_everywhere'])}); contains bias "
        f"{_percent(certified['contains_bias'])}, undecided {_percent(certified['undecided'])}. ")
    counts = details.get("partition_counts", {})
    shares = ", ".join(f"{label} {_percent(details[key])}" for label, key in (
        ("proven fair", "fair_fraction"),
        ("biased everywhere", "biased_everywhere_fraction"),
        ("with a witness", "witnessed_fraction"), ("excluded", "excluded_fraction"),
        ("still refining", "refining_fraction")) if key in details)
    tally = ", ".join(f"{float(number):,.0f} {PARTITION_TEXT.get(name, name)}"
                      for name, number in counts.items() if number)
    proven = cost.get("proofs_relaxation", 0.0) + cost.get("proofs_branch_and_bound", 0.0)
    exact = "" if not (proven or cost.get("milps")) else (
        f"; exact checks: {counted(cost.get('milps', 0), 'MILP')}, "
        f"{counted(proven, 'class pair')} proven absent "
        f"({cost.get('proofs_relaxation', 0.0):,.0f} by the LP relaxation, "
        f"{cost.get('proofs_branch_and_bound', 0.0):,.0f} by branch and bound)")
    return (headline + f"{counted(cost['analysed_partitions'], 'partition')} analysed in "
            f"{counted(cost.get('rounds', 0), 'round')} ({elapsed_text(certificate)})"
            + (f"; final partitions: {tally}" if tally else "")
            + (f"; share of the query: {shares}" if shares else "") + exact)


def _percent(value: Any) -> str:
    return f"{100 * float(value):.3g} %"


def run(settings: CausalFairnessSettings, network: Network, population: Any,
        budget: float | None = None, progress: Any = None, executor: Any = None,
        model_domain: Any = None, **engine: Any) -> Certificate:
    """The causal-fairness certificate of ``network`` (see the module docstring): bounds
    ``biased_share`` and, with a population model, ``biased_share_population``. ``progress``
    is accepted for the common signature and not called (the engine reports no anytime
    bounds); ``executor`` runs the partitions (default in-process); ``model_domain``: the
    inputs' domain the model file records (:func:`input_domain`)."""
    from verifier.causal import build_problem, certify_causal_fairness

    check(settings, network, population)
    if population is not None:
        check_population_fits(network, population)
    asked = protected_group(settings, population)   # the certificate names the whole group
    settings = settings_in_codes(asked, population)
    problem = build_problem(
        network, list(settings.protected), protected_kind=settings.protected_kind,
        split_values=settings.split_values,
        onehot_groups=_onehot_groups(settings, network, population),
        query={name: (low, high) for name, (low, high) in (settings.query or {}).items()},
        domain=input_domain(settings, network, population, model_domain),
        integer_inputs=integer_inputs(settings, network, population),
        protected_values=settings.protected_values,
    )
    causal = engine_settings(settings, budget, **engine)
    certificate = certify_causal_fairness(problem, causal, executor, population=population)
    return judged(asked, points_in_values(certificate, population))


def points_in_values(certificate: Certificate, population: Any) -> Certificate:
    """The certificate with its witnesses and biased regions in the data's units: a coded
    column's codes ``k`` (what the engine partitions) shown as ``offset + step·k``
    (:meth:`~verifier.population.model.PopulationModel.values_of`; an interval of codes maps
    to the interval of its values, the step being positive). Unchanged without codes."""
    schema = getattr(population, "feature_schema", None)
    if schema is None or not schema.coded:
        return certificate
    step, offset = schema.column_codes()
    columns = list(schema.columns)

    def point(values: list[float]) -> list[float]:
        return population.values_of(np.asarray([values]))[0].tolist()

    def witness(record: dict[str, Any]) -> dict[str, Any]:
        return {**record, "x": point(record["x"]), "x_other": point(record["x_other"])}

    def region(record: dict[str, Any]) -> dict[str, Any]:
        box = {name: grid_values(np.asarray(ends, dtype=np.float64)[:, None],
                               step[columns.index(name):columns.index(name) + 1],
                               offset[columns.index(name):columns.index(name) + 1])[:, 0].tolist()
               for name, ends in record["box"].items()}
        shown = {**record, "box": box}
        if "witness" in record:
            shown["witness"] = witness(record["witness"])
        return shown

    details = dict(certificate.details)
    if "witnesses" in details:
        details["witnesses"] = [witness(record) for record in details["witnesses"]]
    if "regions" in details:
        details["regions"] = [region(record) for record in details["regions"]]
    return replace(certificate, details=details)


def judged(settings: CausalFairnessSettings, certificate: Certificate) -> Certificate:
    """The engine's certificate with the audit's verdict (the requirement on the chosen
    bound); the engine's verdict is kept as ``details["causal_verdict"]``."""
    requirement = settings.requirement
    low, high = certificate.bounds[requirement.quantity]
    return replace(
        certificate,
        audit=settings.kind,
        verdict=judged_verdict(requirement, low, high),
        details={
            "expression": (f"share of the query whose class depends on "
                           f"{', '.join(settings.protected)} ({settings.measure} measure)"),
            "comparison": requirement.comparison,
            "threshold": requirement.threshold,
            "causal_verdict": certificate.verdict,
            **certificate.details,
        },
    )
