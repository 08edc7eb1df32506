"""Runners of the causal-fairness and exact-probability (WMI) audit kinds.

Each runner has the signature of :data:`pipeline_steps.audit.AUDIT_RUNNERS`' values,
``runner(settings, network, population, progress) -> Certificate``, and returns a certificate
whose bound on ``settings.requirement.quantity`` is what the gate reads. Its verdict is the
requirement applied to that bound — ``satisfied`` (proven pass), ``violated`` (proven fail) or
``unknown`` — and ``details`` records the ``comparison`` and ``threshold`` so the gate can
check the verdict against the interval. Input errors name the audit first
(``audit 'name': …``). The ``progress`` callback reports PV's anytime bounds and does not
apply to these algorithms; it is accepted and not called.

**Causal fairness** (:mod:`verifier.causal`): inputs are addressed by
``network.input_names``; every input must range over ``[0, 1]``, so the population model's
support must lie in the unit cube. The population model is always passed on, so the
certificate carries ``biased_share`` (uniform on the query) and ``biased_share_population``
(``P(biased | query)``); ``measure`` chooses which one the gate reads. Without configured
``onehot_groups`` the population model's one-hot groups (categorical features) that contain no
sensitive input are used, so one-hot columns are never taken for continuous ones. The
verifier's own verdict (``fair``/``biased``/``unknown``) is kept as
``details["causal_verdict"]``.

**Exact probabilities** (:mod:`verifier.wmi`): the probability is exact in real arithmetic
but computed in float64 (LP vertices, triangulation, simplex quadrature). The certificate
encloses it as ``[max(0, p − a), min(1, p + a)]`` with the allowance
``a = WMI_FLOAT_ALLOWANCE``. The enumeration stops early once the violating mass alone shows
``P < min_probability − a`` (``stop_at = 1 − min_probability + 2a``); the reported ``p`` is
then only an upper bound (the violating mass found so far is a lower bound on the true one),
so the certificate's interval is ``[0, min(1, p + a)]``, which lies below the threshold: the
early stop only ever produces proven failures.
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from configs.schema import (
    CausalFairnessAudit,
    LocalRobustnessAudit,
    MonotonicityAudit,
    NoiseRobustnessAudit,
    Requirement,
)
from verifier.audits import check_population_fits
from verifier.certificate import Certificate
from verifier.errors import CertgateInputError
from verifier.network import Network

WMI_FLOAT_ALLOWANCE = 1e-6
"""Absolute allowance between the float64 WMI probability and the exact one. The computed
value is a ratio of sums of simplex integrals over cells whose vertices come from LPs; its
rounding error grows with the number and conditioning of the cells and stays below 1e-12 on
the closed-form tests. The allowance is a documented engineering margin, not a proven bound:
it does not cover a cell an LP wrongly declares empty."""

WMI_ALGORITHM = ("exact weighted model integration: region enumeration with HiGHS LPs, "
                 "simplex quadrature")


# ------------------------------------------------------------------------------ shared


def judged_verdict(requirement: Requirement, low: float, high: float) -> str:
    """``satisfied`` when ``[low, high]`` is a proven pass of ``requirement``, ``violated``
    when a proven fail, else ``unknown``."""
    if requirement.proven_pass(low, high):
        return "satisfied"
    if requirement.proven_fail(low, high):
        return "violated"
    return "unknown"


Runner = Callable[[Any, Network, Any, Any], Certificate]


def naming_the_audit(runner: Runner) -> Runner:
    """Wrap a runner so that every input error it raises names the audit first
    (``audit 'name': …``, same error class)."""

    @functools.wraps(runner)
    def wrapped(settings: Any, network: Network, population: Any,
                progress: Any = None) -> Certificate:
        try:
            return runner(settings, network, population, progress)
        except CertgateInputError as error:
            raise type(error)(f"audit {settings.name!r}: {error}") from error

    return wrapped


def _fitting_population(network: Network, population: Any) -> Any:
    """``population`` after checking it exists and its columns are the network's inputs."""
    if population is None:
        raise CertgateInputError("this audit needs a population model")
    check_population_fits(network, population)
    return population


def _input_index(network: Network, field: str, name: str) -> int:
    """Position of the input ``name``; raises :class:`CertgateInputError` naming the field."""
    names = list(network.input_names)
    if name not in names:
        raise CertgateInputError(
            f"{field} {name!r} is not an input of the network (inputs: {', '.join(names)})"
        )
    return names.index(name)


# ------------------------------------------------------------------------------ causal


def _require_unit_cube(network: Network, population: Any) -> None:
    """Raise unless the population's support lies in ``[0, 1]`` on every input."""
    low, high = (np.asarray(end, dtype=np.float64) for end in population.support())
    outside = np.flatnonzero((low < 0.0) | (high > 1.0))
    if outside.size:
        column = int(outside[0])
        raise CertgateInputError(
            f"causal fairness needs every input scaled to [0, 1], but the population's "
            f"support of {network.input_names[column]!r} is [{low[column]:g}, {high[column]:g}]"
        )


def _onehot_groups(settings: CausalFairnessAudit, network: Network,
                   population: Any) -> list[list[str]]:
    """The configured non-sensitive one-hot groups, or (``null``) the population model's
    one-hot groups that do not contain a sensitive input."""
    if settings.onehot_groups is not None:
        return [list(group) for group in settings.onehot_groups]
    if population is None:
        return []
    names = list(network.input_names)
    groups = [[names[index] for index in group] for group in population.onehot_groups()]
    return [group for group in groups if not set(group) & set(settings.sensitive)]


@naming_the_audit
def run_causal_fairness(settings: CausalFairnessAudit, network: Network, population: Any,
                        progress: Any = None) -> Certificate:
    """The causal-fairness certificate of ``network`` (see the module docstring): bounds
    ``biased_share`` and, with a population model, ``biased_share_population``."""
    from verifier.causal import CausalSettings, build_problem, certify_causal_fairness

    if population is None and settings.measure == "population":
        raise CertgateInputError("measure: population needs a population model")
    if population is not None:
        check_population_fits(network, population)
        _require_unit_cube(network, population)
    problem = build_problem(
        network, list(settings.sensitive), sensitive_kind=settings.sensitive_kind,
        split_values=settings.split_values,
        onehot_groups=_onehot_groups(settings, network, population),
        query={name: (low, high) for name, (low, high) in (settings.query or {}).items()},
    )
    causal = CausalSettings(min_edge=settings.lower_edge, max_unstable=settings.max_unstable,
                            timeout_s=settings.timeout_s, target_width=settings.target_width)
    certificate = certify_causal_fairness(problem, causal, population=population)
    requirement = settings.requirement
    low, high = certificate.bounds[requirement.quantity]
    return replace(
        certificate,
        audit=settings.kind,
        verdict=judged_verdict(requirement, low, high),
        details={
            "expression": (f"share of the query whose class depends on "
                           f"{', '.join(settings.sensitive)} ({settings.measure} measure)"),
            "comparison": requirement.comparison,
            "threshold": requirement.threshold,
            "causal_verdict": certificate.verdict,
            **certificate.details,
        },
    )


# ------------------------------------------------------------------------------ WMI


def wmi_stop_at(min_probability: float) -> float | None:
    """The violation share at which the enumeration may stop: ``1 − t + 2a`` (then
    ``P <= t − 2a`` up to float, so ``P + a < t``), or ``None`` when that is not below 1."""
    stop = 1.0 - min_probability + 2.0 * WMI_FLOAT_ALLOWANCE
    return stop if stop < 1.0 else None


def probability_certificate(settings: Any, result: Any, expression: str,
                            stop_at: float | None) -> Certificate:
    """The certificate of a :class:`verifier.wmi.WMIResult` for an exact-probability audit:
    ``bounds["probability"]`` widened by :data:`WMI_FLOAT_ALLOWANCE`, lower bound 0 after an
    early stop (see the module docstring)."""
    requirement = settings.requirement
    computed = float(result.probability)
    high = min(1.0, computed + WMI_FLOAT_ALLOWANCE)
    low = 0.0 if result.stopped_early else max(0.0, computed - WMI_FLOAT_ALLOWANCE)
    return Certificate(
        audit=settings.kind,
        verdict=judged_verdict(requirement, low, high),
        bounds={requirement.quantity: (low, high)},
        details={
            "expression": expression,
            "comparison": requirement.comparison,
            "threshold": requirement.threshold,
            "computed_probability": computed,
            "violation_probability": float(result.violation_probability),
            "stopped_early": bool(result.stopped_early),
            "stopped_by": ("early stop: the threshold cannot be reached"
                           if result.stopped_early else "complete enumeration"),
            "float_allowance": WMI_FLOAT_ALLOWANCE,
            **result.extra,
        },
        settings={"stop_at": stop_at, "bound_method": "crown"},
        cost={"elapsed_s": float(result.elapsed_s), "regions": float(result.regions),
              "integrals": float(result.integrals), "lps": float(result.lps)},
        algorithm=WMI_ALGORITHM,
    )


@naming_the_audit
def run_monotonicity(settings: MonotonicityAudit, network: Network, population: Any,
                     progress: Any = None) -> Certificate:
    """Exact monotonicity probability in ``settings.feature``
    (:func:`verifier.wmi.monotonicity`)."""
    from verifier.wmi import monotonicity

    prior = _fitting_population(network, population)
    feature = _input_index(network, "feature", settings.feature)
    stop_at = wmi_stop_at(settings.min_probability)
    result = monotonicity(network, prior, feature, decreasing=settings.decreasing,
                          positive_class=settings.positive_class, use_prior=settings.use_prior,
                          stop_at=stop_at)
    order = ">=" if settings.decreasing else "<="
    pairs = "population-weighted" if settings.use_prior else "uniform on the support box"
    c = settings.positive_class
    expression = (f"P(class(x) = {c} ⇒ class(x′) = {c}), x′ = x except "
                  f"x.{settings.feature} {order} x′.{settings.feature}, pairs {pairs}")
    return probability_certificate(settings, result, expression, stop_at)


@naming_the_audit
def run_noise_robustness(settings: NoiseRobustnessAudit, network: Network, population: Any,
                         progress: Any = None) -> Certificate:
    """Exact ``P(class(x) = class(x + n))`` (:func:`verifier.wmi.noise_robustness`)."""
    from verifier.wmi import noise_robustness
    from verifier.wmi.noise import triangular_noise, uniform_noise

    prior = _fitting_population(network, population)
    features = [_input_index(network, "features", name) for name in settings.features]
    if settings.noise_uniform is not None:
        noise = uniform_noise(*settings.noise_uniform)
        described = f"uniform{list(settings.noise_uniform)}"
    else:
        noise = triangular_noise(*settings.noise_triangular)
        described = f"triangular{list(settings.noise_triangular)}"
    stop_at = wmi_stop_at(settings.min_probability)
    result = noise_robustness(network, prior, noise, features, stop_at=stop_at)
    expression = (f"P(class(x) = class(x + n)), n ~ {described} on "
                  f"{', '.join(settings.features)}")
    return probability_certificate(settings, result, expression, stop_at)


@naming_the_audit
def run_local_robustness(settings: LocalRobustnessAudit, network: Network, population: Any,
                         progress: Any = None) -> Certificate:
    """Exact ``P(class(x) = label | ‖x − center‖∞ <= ε)``
    (:func:`verifier.wmi.local_robustness`)."""
    from verifier.wmi import local_robustness

    prior = _fitting_population(network, population)
    if len(settings.center) != network.input_size:
        raise CertgateInputError(
            f"center has {len(settings.center)} values, the network {network.input_size} "
            f"inputs ({', '.join(network.input_names)})"
        )
    stop_at = wmi_stop_at(settings.min_probability)
    result = local_robustness(network, prior, settings.center, settings.epsilon,
                              settings.label, stop_at=stop_at)
    expression = (f"P(class(x) = {result.extra['label']} | ‖x − center‖∞ <= "
                  f"{settings.epsilon:g})")
    return probability_certificate(settings, result, expression, stop_at)


KIND_RUNNERS: dict[str, Runner] = {
    "causal_fairness": run_causal_fairness,
    "monotonicity": run_monotonicity,
    "noise_robustness": run_noise_robustness,
    "local_robustness": run_local_robustness,
}
"""The runners of this module by audit kind (merged into ``AUDIT_RUNNERS``)."""


# ------------------------------------------------------------------------------ CSV tables


def _csv(rows: list[dict[str, Any]], base: list[str]) -> str:
    fields = list(base)
    for row in rows:
        fields.extend(key for key in row if key not in fields)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _witness_columns(witness: dict[str, Any], input_names: Sequence[str],
                     first: str, second: str) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for prefix, key in ((first, "x"), (second, "x_other")):
        row.update({f"{prefix}.{name}": value
                    for name, value in zip(input_names, witness[key], strict=True)})
    row[f"{first}.class"], row[f"{second}.class"] = witness["classes"]
    return row


def detail_tables(certificate: Certificate, input_names: Sequence[str]) -> dict[str, str]:
    """CSV versions of the certificate's ``details["regions"]`` and ``details["witnesses"]``
    (causal fairness) by table name; empty for certificates without them.

    ``regions``: rank, kind, share, ``<input>.lower``/``<input>.upper`` of the box,
    ``<group>.allowed`` categories, and the region's witness pair (``witness.<input>``,
    ``witness_other.<input>``, their classes) when it has one. ``witnesses``: index,
    ``x.<input>``, ``x_other.<input>``, ``x.class``, ``x_other.class``.
    """
    tables: dict[str, str] = {}
    regions = certificate.details.get("regions")
    if isinstance(regions, list):
        rows = []
        for rank, region in enumerate(regions, start=1):
            row: dict[str, Any] = {"rank": rank, "kind": region["kind"], "share": region["share"]}
            for name, (low, high) in region.get("box", {}).items():
                row[f"{name}.lower"], row[f"{name}.upper"] = low, high
            for group, allowed in region.get("categories", {}).items():
                row[f"{group}.allowed"] = "|".join(allowed)
            if "witness" in region:
                row.update(_witness_columns(region["witness"], input_names, "witness",
                                            "witness_other"))
            rows.append(row)
        tables["regions"] = _csv(rows, ["rank", "kind", "share"])
    witnesses = certificate.details.get("witnesses")
    if isinstance(witnesses, list):
        rows = [{"index": index, **_witness_columns(witness, input_names, "x", "x_other")}
                for index, witness in enumerate(witnesses, start=1)]
        tables["witnesses"] = _csv(rows, ["index"])
    return tables
