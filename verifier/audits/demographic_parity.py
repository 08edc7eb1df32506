"""Demographic parity, certified by PV: settings, runner and verdict in one place.

Ratio form: ``P[class = fav | protected ≠ privileged] / P[class = fav | protected =
privileged] > gamma``; difference form: ``|difference| < gamma``. The certificate's
``bounds["value"]`` encloses the ratio (or difference), ``bounds["p_unprivileged"]`` and
``bounds["p_privileged"]`` the two conditional probabilities. The verdict is PV's decision of
the same comparison the gate reads (:attr:`DemographicParitySettings.requirement`).

The class is the network's :meth:`~verifier.network.Network.as_classifier` class: a classifier
head is dropped (it does not change the argmax), and a single output is a binary classifier,
class 1 iff the logit is ``> 0``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, model_validator

from verifier.audits.coded_values import value_code
from verifier.audits.fidelity import parity_check
from verifier.audits.kind import counted, elapsed_text, stopped_text
from verifier.audits.population_fit import check_population_fits, population_columns
from verifier.audits.requirement import (
    NAME_PATTERN,
    Requirement,
    StrictSettings,
    check_class,
    effective_timeout,
)
from verifier.certificate import Certificate
from verifier.errors import CertgateInputError, did_you_mean, one_hot_column, one_hot_columns
from verifier.spec import check_parity_gamma, demographic_parity

if TYPE_CHECKING:
    import numpy as np

    from verifier.network import Network
    from verifier.pv import PVProgress, PVSettings

KIND = "demographic_parity"
PROGRESS = "boxes"
EMPIRICAL_CHECK = parity_check
_BOOLEAN_WORDS = {"true": 1, "yes": 1, "on": 1, "false": 0, "no": 0, "off": 0}
"""Words naming a binary column's value: a configuration's YAML (read by the 1.2 core schema)
keeps ``yes``/``no``/``on``/``off`` as strings, and ``--privileged`` takes any word."""


class DemographicParitySettings(StrictSettings):
    """Demographic parity of ``favorable_class`` between ``protected == privileged`` and the rest.

    ``form: ratio`` certifies ``P[fav | unprivileged] / P[fav | privileged]`` and passes when
    its certified lower bound exceeds ``gamma`` (γ in (0, 1], e.g. the 80 % rule).
    ``form: difference`` certifies ``|P[fav | unprivileged] − P[fav | privileged]|`` and passes
    when its certified upper bound is below ``gamma`` (γ in (0, 1)). ``qualified`` conditions
    every probability on an event over the inputs (e.g. ``"x.income >= 30000"``).
    ``timeout_s`` bounds the search (``null``: no limit); ``precision`` stops it once the
    interval is that narrow.
    """

    BOOLEAN_NUMBERS: ClassVar[frozenset[str]] = frozenset({"privileged"})

    kind: Literal["demographic_parity"]
    name: str = Field(default="demographic_parity", pattern=NAME_PATTERN)
    protected: str = Field(min_length=1)
    privileged: float = Field(allow_inf_nan=False)
    favorable_class: int = Field(ge=0)
    gamma: float
    qualified: str | None = None
    form: Literal["ratio", "difference"] = "ratio"
    timeout_s: float | None = Field(default=60.0, gt=0)
    precision: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _privileged_is_a_value(cls, data: Any, info: ValidationInfo) -> Any:
        """A category's name as ``privileged`` (``sex`` = ``Male``, as the CSV spells it) is
        refused naming the one-hot column to protect instead, whose privileged value is 1:
        spelled as the model's input is when the validation context holds the inputs'
        names (``{"columns": [...]}``, :func:`category_hint`); ``True``/``False`` (which a
        CSV's boolean column holds and the fit reads as a binary column) and ``yes``/``no``/
        ``on``/``off`` also name the binary column's value 1 or 0."""
        if not isinstance(data, dict) or not isinstance(data.get("privileged"), str):
            return data
        value = data["privileged"].strip()
        try:
            float(value)
        except ValueError:
            column = str(data.get("protected", "COLUMN")).split("=", 1)[0]
            columns = (info.context or {}).get("columns")
            boolean = ""
            if value.lower() in _BOOLEAN_WORDS:
                boolean = (f"; a True/False or yes/no column is binary, True 1 and False 0 "
                           f"(protected: {column}, privileged: "
                           f"{_BOOLEAN_WORDS[value.lower()]}); yes and on are 1, no and off 0")
            raise ValueError(
                f"privileged is the protected column's value for the privileged group, a "
                f"number; {value!r} names a category: "
                f"{category_hint(column, value, columns)}{boolean}") from None
        return data

    @model_validator(mode="after")
    def _gamma_in_range(self) -> DemographicParitySettings:
        check_parity_gamma(self.form, self.gamma)
        return self

    def referenced_inputs(self) -> tuple[str, ...]:
        """Input names this audit reads (checked against the model before anything runs)."""
        return (self.protected,)

    def protected_feature(self) -> str:
        """The protected input, whose dependents the fidelity record lists."""
        return self.protected

    @property
    def requirement(self) -> Requirement:
        if self.form == "ratio":
            return Requirement(quantity="value", label="ratio", comparison=">",
                               threshold=self.gamma)
        return Requirement(quantity="value", label="difference", comparison="<",
                           threshold=self.gamma)


SETTINGS = DemographicParitySettings


def engine_options(executor: str, workers: int | None) -> dict[str, Any]:
    """PV bounds each batch of boxes on the executor, so one audit uses every worker."""
    from verifier.pv import PVSettings

    return {"engine": PVSettings(executor=executor, workers=workers)}


def work_done(certificate: Certificate) -> str:
    """PV's boxes bounded and iterations, when the certificate records them."""
    cost = certificate.cost
    if "boxes" not in cost:
        return ""
    return (f"{counted(cost['boxes'], 'box')} bounded in "
            f"{counted(cost.get('iterations', 0), 'iteration')} ({elapsed_text(certificate)})"
            f"{stopped_text(certificate)}")


def run(settings: DemographicParitySettings, network: Network, population: Any,
        budget: float | None = None, progress: Callable[[PVProgress], None] | None = None,
        engine: PVSettings | None = None) -> Certificate:
    """The demographic-parity certificate (see the module docstring). ``budget`` (seconds)
    tightens ``settings.timeout_s``; ``engine`` tunes PV (batch size, split rule, bound
    method, executor; its time limit and precision are replaced by the settings')."""
    from verifier.audits.probability import run_specification
    from verifier.pv import PVSettings

    network = network.as_classifier()
    names = check_population_fits(network, population)
    check(settings, network, population)
    spec = demographic_parity(
        names, protected=settings.protected, privileged=settings.privileged,
        favorable_class=settings.favorable_class, gamma=settings.gamma,
        qualified=settings.qualified, form=settings.form,
    )
    pv = replace(engine or PVSettings(), timeout_s=effective_timeout(settings.timeout_s, budget),
                 precision=settings.precision)
    certificate = run_specification(network, population, spec, pv, progress)
    if settings.form == "ratio":
        _mark_undefined_ratio(certificate, settings.favorable_class)
    _mark_vanishing_group(certificate, population,
                          population_columns(population) or list(names.inputs), settings)
    return certificate


def category_hint(column: str, value: str, columns: list[str] | None) -> str:
    """What to write for ``protected: COLUMN, privileged: VALUE`` where ``VALUE`` names a
    category: its one-hot column, privileged 1, spelled as ``columns`` (the model's inputs)
    spell it (``sex=Male`` or ``sex_Male``), else naming the raw column's one-hot columns
    there, else (the inputs unknown: a configuration read before its model) in both
    spellings certgate's fit and ``pandas.get_dummies`` write."""
    if columns is not None:
        if (found := one_hot_column(column, value, columns)) is not None:
            return f"protect its one-hot column instead (protected: {found}, privileged: 1)"
        if encoded := one_hot_columns(column, columns):
            return (f"protect one of its one-hot columns instead ({', '.join(encoded)}), "
                    "privileged: 1")
    return (f"protect its one-hot column instead (protected: {column}={value}, privileged: 1; "
            f"spelled as the model's input is: {column}_{value} for pandas.get_dummies)")


def demographic_parity_audit(
    network: Network, population: Any, *, protected: str, privileged: float,
    favorable_class: int, gamma: float, qualified: str | None = None,
    form: Literal["ratio", "difference"] = "ratio", timeout_s: float | None = 60.0,
    precision: float | None = None, progress: Callable[[PVProgress], None] | None = None,
    settings: PVSettings | None = None,
) -> Certificate:
    """Keyword form of :func:`run` (``settings``: PV engine settings, whose ``timeout_s`` and
    ``precision`` then apply)."""
    if settings is not None:
        timeout_s, precision = settings.timeout_s, settings.precision
    audit = DemographicParitySettings(
        kind=KIND, protected=protected, privileged=privileged, favorable_class=favorable_class,
        gamma=gamma, qualified=qualified, form=form, timeout_s=timeout_s, precision=precision,
    )
    return run(audit, network, population, progress=progress, engine=settings)


def check(settings: DemographicParitySettings, network: Network | None,
          population: Any) -> None:
    """Raise the input error the audit would meet, before it runs: the protected column must
    be a column of the population model (by its exact spelling; a near miss is named) and
    the privileged value must leave both groups positive probability; on a coded column it
    is a value on the column's grid (:func:`~verifier.audits.coded_values.value_code`; the
    specification's events, ``qualified`` included, are written in codes with every PV
    specification's, :func:`~verifier.audits.coded_values.spec_in_codes`); the favourable
    class must be one of the network's. ``network`` may be ``None`` (only the population is
    at hand)."""
    check_class("favorable_class", settings.favorable_class, network)
    columns = population_columns(population)
    if columns is None and network is not None:
        columns = list(network.input_names)
    if columns is None:
        return
    if settings.protected not in columns:
        raise CertgateInputError(
            f"protected feature {settings.protected!r} is not a column of the population "
            f"model{did_you_mean(settings.protected, columns)}; columns: {', '.join(columns)}"
        )
    _require_mass(population, columns, settings.protected, settings.privileged)


def _require_mass(population: Any, columns: list[str], protected: str,
                  privileged: float) -> None:
    """Both groups must have positive probability, or the ratio is undefined (the
    population's boxes are in codes: a coded column's privileged value is its code)."""
    mass = float(population.prob_boxes(*_privileged_box(population, columns, protected,
                                                         privileged))[0])
    if mass <= 0.0:
        raise CertgateInputError(
            f"the population model gives {protected} = {privileged:g} probability 0: it does "
            f"not cover the privileged group"
        )
    if mass >= 1.0:
        raise CertgateInputError(
            f"the population model gives {protected} = {privileged:g} probability 1: it does "
            f"not cover any unprivileged group"
        )


def _privileged_box(population: Any, columns: list[str], protected: str,
                    privileged: float) -> tuple[np.ndarray, np.ndarray]:
    """The population's support with the protected column fixed at the privileged value (its
    code on a coded column), as one box ``(1, d)``."""
    column = columns.index(protected)
    lower, upper = population.support()
    lo, hi = lower.copy(), upper.copy()
    lo[column] = hi[column] = value_code(population, protected, privileged, "privileged")
    return lo[None, :], hi[None, :]


def _mark_vanishing_group(certificate: Certificate, population: Any, columns: list[str],
                          settings: DemographicParitySettings) -> None:
    """Name the group when an undecided result comes from a group whose certified
    probability reaches 0 (a mass such as 5e-324, which no float enclosure separates from
    0): its rate then cannot be certified whatever the model does, which the note on a rate
    reaching 0 would blame on the model. Proven verdicts are left alone."""
    if certificate.verdict != "unknown" or settings.protected not in columns:
        return
    low, high = population.prob_boxes_interval(*_privileged_box(
        population, columns, settings.protected, settings.privileged))
    groups = ((f"{settings.protected} = {settings.privileged:g}", float(low[0])),
              (f"{settings.protected} ≠ {settings.privileged:g}", 1.0 - float(high[0])))
    for group, certified in groups:
        if certified <= 0.0:
            certificate.details["undefined"] = (
                f"the group {group} has a probability no float enclosure separates from 0 "
                f"under the population model (P({settings.protected} = "
                f"{settings.privileged:g}) is certified in [{float(low[0]):.3g}, "
                f"{float(high[0]):.3g}]): its rate cannot be certified")
            return


def _mark_undefined_ratio(certificate: Certificate, favorable_class: int) -> None:
    """Say so when an undecided ratio is unbounded because its denominator may vanish: the
    certified interval of ``P[fav | privileged]`` reaches 0, where the ratio is undefined (the
    model may never predict the favourable class for the privileged group). Proven verdicts
    are left alone."""
    low, high = certificate.bounds["p_privileged"]
    if certificate.verdict != "unknown" or low > 0.0:
        return
    certificate.details["undefined"] = (
        f"the ratio may be undefined: P[class {favorable_class} | privileged] is certified in "
        f"[{low:.3g}, {high:.3g}], which includes 0 (the model may never predict class "
        f"{favorable_class} for the privileged group)"
    )
