"""Population fidelity: does the data contradict the population model a certificate assumed?

A certificate is a proof about the population model, so it is only as true as that model.
Where data is at hand, :func:`verifier.audits.fidelity_check` computes the model's
*empirical* value of the audited quantity on the data rows with a confidence interval and
compares it with the certified interval:

* ``contradicted`` — the two intervals are disjoint: at the stated ``level``, the data is
  not what the population model describes, and the proof is about another population;
* ``consistent`` — they overlap (the data does not refute the premise; it does not prove it);
* ``unchecked`` — no data, or no empirical counterpart for the audit kind (causal fairness,
  local robustness, uniform monotonicity: each kind's ``EMPIRICAL_CHECK`` is the check or
  the reason there is none); ``reason`` says which.

**Demographic parity.** The groups (and a ``qualified`` condition) are the certificate's own
specification (:func:`verifier.spec.demographic_parity`) evaluated at the rows. A row's class
is decided in real arithmetic (:func:`verifier.causal.witness.certified_classes`, the class
rule of :meth:`~verifier.network.Network.as_classifier`); a row whose class that leaves
undecided (a tie, or rounding too close to call) counts as favourable for the upper end and
as unfavourable for the lower one. Each rate ``P(fav | group)`` gets an exact Clopper–Pearson
interval (``scipy.stats.binomtest``) at level ``1 − (1 − level)/2``, so that both hold
together with probability at least ``level`` (Bonferroni); the ratio ``p_u / p_p`` (or
``|p_u − p_p|``) is then enclosed by interval arithmetic, rounded outward. The interval is
conditional on the group sizes, hence also unconditional. The check is ``contradicted`` when
that interval is disjoint from the certified ratio, *or* when either rate's interval is
disjoint from the certified rate (``bounds["p_unprivileged"]``, ``bounds["p_privileged"]``,
which PV's certificates hold): both rates lie in their intervals together with probability
at least ``level``, so either disjointness refutes the population at that level, as the
ratio's does. A small group's
rate interval is wide, and so is the ratio's, but the larger group's rate is pinned by its
rows: a population that keeps the larger group's favourable rate 5 standard errors from its
rows (two numeric columns held apart, the rule in their joint tail) moved the certified
ratio by a fifth and was called consistent by the ratio alone.
The record also gives ``data_verdict``, the verdict the rows give by themselves (their
estimate's, and their interval's: ``unknown`` when it holds both sides of γ); a proven
verdict that the rows' estimate is on the other side of, within the rows' sampling error, is
``consistent`` (the rows do not refute the population), and the reason says so: on a
20,000-row table the default fit proved the ratio above 0.545, [0.546, 0.562], where the
model's ratio on the rows is 0.538 (interval [0.469, 0.616]), and the gate promoted it
without a word.

**Noise robustness.** ``P(class(x) = class(x + n))`` with ``x`` a data row and ``n`` one
seeded draw of the audit's noise per row: each row is one Bernoulli trial of the data's
probability, so its Clopper–Pearson interval at ``level`` covers it (classes decided as above;
a row whose two classes are not both decided counts as a success for the upper end only).

**Monotonicity** (population-weighted pairs, ``use_prior``; uniform pairs on the support
box assume nothing data could refute). The certified probability is over ``x`` from the
population and ``x′`` equal to ``x`` but for the feature, an independent draw of its
marginal, given the order precondition (strict for a discrete feature). Its data counterpart:
the rows are paired at random (seeded) and the second row of each pair lends the first its
feature value, so the pairs are independent draws of exactly that distribution (no row serves
twice); those meeting the precondition are Bernoulli trials of "the favourable class is not
lost" (classes as above; an undecided pair counts for the upper end only), with a
Clopper–Pearson interval at ``level``.

**Fit statistics** (diagnostics, not part of the verdict): the protected group's share in the
data (Clopper–Pearson) against the population's exact box probability; per other column, the
difference of the group means (unprivileged − privileged) in the data and in the population
model, the latter estimated from ``population_samples`` seeded draws, both with normal
intervals at ``level`` (the population's interval is its sampling error); and the share of
data rows outside the population's support box.

**Assumptions** (:func:`population_assumptions`) are read from the population document: an
independent product's factors, a Bayesian network's edges, and which columns the model lets
depend on the protected attribute at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from verifier.audits.coded_values import spec_in_codes
from verifier.certificate import Certificate
from verifier.numerics import add_down, add_up, nonnegative_quotient

if TYPE_CHECKING:
    from verifier.network import Network

STATUSES = ("consistent", "contradicted", "unchecked")
DEFAULT_LEVEL = 0.95
DEFAULT_POPULATION_SAMPLES = 20_000
CHUNK_ROWS = 65_536
"""Rows whose classes are bounded at once (the memory of one bound pass stays bounded)."""

@dataclass(frozen=True)
class FidelityOptions:
    """How the check is made: the confidence ``level`` of the empirical interval and of the
    fit statistics, and the seeded draws from the population model for its group means."""

    level: float = DEFAULT_LEVEL
    population_samples: int = DEFAULT_POPULATION_SAMPLES
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"the fidelity level must lie in (0, 1), got {self.level}")
        if self.population_samples < 2:
            raise ValueError("the fidelity check needs at least 2 population samples")


@dataclass(frozen=True)
class DataRows:
    """Data rows encoded as the network's inputs (``(n, d)``, network input order, in the
    data's units: :func:`verifier.audits.fidelity_check` turns a coded column's values into
    the population's codes, which the bound network reads), and where they came from
    (``source``: origin, uri, sha256, rows read, used and dropped)."""

    rows: np.ndarray
    source: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NoData:
    """Why no data rows are at hand (``source``: what was tried, if anything)."""

    reason: str
    source: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------ assumptions


def population_assumptions(population: Any, protected: str | None = None) -> dict[str, Any]:
    """What the population model assumes about dependence, read from its document:
    ``structure`` (``independent`` for a product, ``bayesian_network``, else the
    distribution's kind), the independent ``factors`` (feature names) or the ``edges``
    (parent, child: node names), the columns the model lets depend on ``protected``
    (``protected_dependents``: same factor, or a common ancestor in the network, latent
    nodes included), the data it records being ``fitted_from``, the tables it had
    ``renormalised`` (sums off 1 within float32 precision) and a one-line ``summary``."""
    distribution = population.distribution
    columns = list(population.columns)
    record: dict[str, Any] = {"distribution": distribution.kind}
    fitted = getattr(population, "fitted_from", None)
    if fitted is not None:
        record["fitted_from"] = fitted.model_dump(mode="json")
    renormalised = list(getattr(population, "renormalised", []))
    if renormalised:
        record["renormalised"] = renormalised
    if distribution.kind == "product":
        features = _factor_features(population, distribution.factors)
        record.update(structure="independent", factors=features)
        joint = [factor for factor in features if len(factor) > 1]
        record["summary"] = ("independent features" if not joint else
                             "independent factors, joint within " + "; ".join(
                                 "(" + ", ".join(factor) + ")" for factor in joint))
        if protected is not None:
            record["protected_dependents"] = next(
                ([c for c in factor.columns if c != protected]
                 for factor in distribution.factors if protected in factor.columns), [])
    elif distribution.kind == "bayesian_network":
        nodes = {node.name: node for node in distribution.nodes}
        edges = [[parent, node.name] for node in distribution.nodes for parent in node.parents]
        record.update(structure="bayesian_network", edges=edges)
        record["summary"] = ("Bayesian network with edges " + ", ".join(
            f"{parent} -> {child}" for parent, child in edges)) if edges else \
            "Bayesian network without edges (independent features)"
        if protected is not None:
            record["protected_dependents"] = _dependents(nodes, protected)
    else:
        record.update(structure=distribution.kind,
                      summary=f"a joint {distribution.kind} distribution: any column may "
                              "depend on any other")
        if protected is not None:
            record["protected_dependents"] = [c for c in columns if c != protected]
    return record


def _factor_features(population: Any, factors: list[Any]) -> list[list[str]]:
    """The feature names of every factor (a categorical feature's one-hot columns are one
    feature)."""
    schema = population.feature_schema
    return [list(dict.fromkeys(schema.feature_of(column).name for column in factor.columns))
            for factor in factors]


def _dependents(nodes: dict[str, Any], protected: str) -> list[str]:
    """Columns marginally dependent on ``protected`` in the network: those of nodes sharing
    an ancestor (themselves included) with the protected column's node (d-connection given
    nothing)."""
    ancestry: dict[str, set[str]] = {}
    for name, node in nodes.items():  # topological order
        ancestry[name] = {name}.union(*(ancestry[parent] for parent in node.parents))
    home = next((name for name, node in nodes.items()
                 if protected in node.observed_columns()), None)
    if home is None:
        return []
    return [column for name, node in nodes.items() if ancestry[name] & ancestry[home]
            for column in node.observed_columns() if column != protected]


# ------------------------------------------------------------------------------ intervals


def clopper_pearson(successes: int, trials: int, level: float) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval of a binomial proportion at ``level``, by
    ``scipy.stats.binomtest``."""
    from scipy.stats import binomtest

    interval = binomtest(int(successes), int(trials)).proportion_ci(
        confidence_level=level, method="exact")
    return float(interval.low), float(interval.high)


def ratio_interval(unprivileged: tuple[float, float],
                   privileged: tuple[float, float]) -> tuple[float, float]:
    """``[u_lo / p_hi, u_hi / p_lo]`` for rates in ``[0, 1]``, rounded outward (``inf`` where
    ``p_lo = 0``): :func:`verifier.numerics.nonnegative_quotient`."""
    low, high = nonnegative_quotient(unprivileged[0], unprivileged[1], privileged[0],
                                     privileged[1])
    return float(low), float(high)


def absolute_difference_interval(unprivileged: tuple[float, float],
                                 privileged: tuple[float, float]) -> tuple[float, float]:
    """The range of ``|u − p|`` over the two intervals, rounded outward (an exact difference,
    zero included, stays exact: :func:`verifier.numerics.add_down`)."""
    low_d = float(add_down(unprivileged[0], -privileged[1]))
    high_d = float(add_up(unprivileged[1], -privileged[0]))
    straddles = low_d <= 0.0 <= high_d
    low = 0.0 if straddles else (low_d if low_d > 0.0 else -high_d)
    return low, max(-low_d, high_d)


def _disjoint(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[1] < b[0] or b[1] < a[0]


# ------------------------------------------------------------------------------ the check


def unchecked(reason: str, assumptions: dict[str, Any],
              source: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record of a check that could not be made."""
    record: dict[str, Any] = {"status": "unchecked", "reason": reason,
                              "assumptions": assumptions}
    if source:
        record["data"] = source
    return record


def attach(certificate: Certificate, record: dict[str, Any]) -> Certificate:
    """Record the check on the certificate (``certificate.population_fidelity``)."""
    certificate.population_fidelity = record
    return certificate


def parity_check(settings: Any, certificate: Certificate, network: Network, population: Any,
                  data: DataRows, options: FidelityOptions,
                  assumptions: dict[str, Any]) -> dict[str, Any]:
    """The demographic-parity record (module docstring)."""
    from verifier.causal.witness import certified_classes
    from verifier.spec import Names, demographic_parity, evaluate_event_at_points

    classifier = network.as_classifier()
    rows = np.asarray(data.rows, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != network.input_size:
        raise ValueError(f"data rows must be (n, {network.input_size}), got {rows.shape}")
    names = Names.of(list(network.input_names), list(classifier.output_names))
    spec = spec_in_codes(demographic_parity(
        names, protected=settings.protected, privileged=settings.privileged,
        favorable_class=settings.favorable_class, gamma=settings.gamma,
        qualified=settings.qualified, form=settings.form), population)
    chunks = [rows[start:start + CHUNK_ROWS] for start in range(0, len(rows), CHUNK_ROWS)]
    outputs = np.concatenate([classifier.evaluate(chunk) for chunk in chunks]) if chunks \
        else np.zeros((0, classifier.output_size))
    classes = np.concatenate([certified_classes(classifier, chunk) for chunk in chunks]) \
        if chunks else np.zeros(0, dtype=int)
    estimated = np.argmax(outputs, axis=1) if len(rows) else np.zeros(0, dtype=int)
    sided = 1.0 - (1.0 - options.level) / 2.0
    groups: dict[str, dict[str, Any]] = {}
    members: dict[str, np.ndarray] = {}
    for label in ("unprivileged", "privileged"):
        term = spec.probabilities[f"p_{label}"]
        assert term.condition is not None
        inside = evaluate_event_at_points(term.condition, rows, outputs)
        members[label] = inside
        trials = int(inside.sum())
        if trials == 0:
            return unchecked(
                f"no check possible: the data has no {label} rows ({term.condition_text})",
                assumptions, data.source)
        favourable = int(np.sum(inside & (classes == settings.favorable_class)))
        undecided = int(np.sum(inside & (classes < 0)))
        low = clopper_pearson(favourable, trials, sided)[0]
        high = clopper_pearson(favourable + undecided, trials, sided)[1]
        groups[f"p_{label}"] = {
            "condition": term.condition_text, "rows": trials, "favourable": favourable,
            "undecided": undecided,
            "estimate": float(np.mean(estimated[inside] == settings.favorable_class)),
            "interval": [low, high],
        }
    unpriv = tuple(groups["p_unprivileged"]["interval"])
    priv = tuple(groups["p_privileged"]["interval"])
    u_hat, p_hat = groups["p_unprivileged"]["estimate"], groups["p_privileged"]["estimate"]
    if settings.form == "ratio":
        empirical = ratio_interval(unpriv, priv)  # type: ignore[arg-type]
        estimate = u_hat / p_hat if p_hat > 0 else math.inf
    else:
        empirical = absolute_difference_interval(unpriv, priv)  # type: ignore[arg-type]
        estimate = abs(u_hat - p_hat)
    certified = tuple(float(v) for v in certificate.bounds["value"])
    quantity = "ratio" if settings.form == "ratio" else "difference"
    contradicted = _disjoint(empirical, certified)  # type: ignore[arg-type]
    reasons = [_reason(quantity, empirical, certified, contradicted,  # type: ignore[arg-type]
                       options.level)]
    for label, group in groups.items():
        if label not in certificate.bounds:
            continue
        rate = tuple(float(v) for v in certificate.bounds[label])
        group["certified"] = list(rate)
        if _disjoint(tuple(group["interval"]), rate):  # type: ignore[arg-type]
            contradicted = True
            reasons.insert(0, _reason(f"P(favourable | {group['condition']})",
                                      tuple(group["interval"]), rate, True,  # type: ignore[arg-type]
                                      options.level))
    on_data = data_verdict(settings.form, settings.gamma, estimate, empirical)
    if not contradicted and certificate.verdict in ("satisfied", "violated") \
            and on_data["estimate"] != certificate.verdict:
        reasons.append(_disagreement(quantity, estimate, settings.gamma, certificate.verdict,
                                     options.level))
    return {
        "status": "contradicted" if contradicted else "consistent",
        "reason": "; ".join(reasons),
        "quantity": quantity,
        "data_verdict": on_data,
        "level": options.level,
        "method": ("Clopper-Pearson per rate at level 1-(1-level)/2 (Bonferroni), each rate "
                   "and the ratio/difference (interval arithmetic) against the certified ones; "
                   "classes decided in real arithmetic"),
        "empirical": {"interval": list(empirical), "estimate": estimate, **groups},
        "certified": list(certified),
        "data": data.source,
        "assumptions": assumptions,
        "fit_statistics": fit_statistics(settings, network, population, rows, members,
                                         options),
    }


def noise_check(settings: Any, certificate: Certificate, network: Network, population: Any,
                 data: DataRows, options: FidelityOptions,
                 assumptions: dict[str, Any]) -> dict[str, Any]:
    """The noise-robustness record (module docstring)."""
    from verifier.network import Network as IRNetwork

    if not isinstance(network, IRNetwork):
        return unchecked("no check possible: the model is not a network certgate evaluates",
                         assumptions, data.source)
    rows = np.asarray(data.rows, dtype=np.float64)
    if len(rows) == 0:
        return unchecked("no check possible: the data has no rows", assumptions, data.source)
    classifier = network.as_classifier()
    column = list(network.input_names).index(settings.features[0])
    rng = np.random.default_rng(options.seed)
    if settings.noise_uniform is not None:
        noise = rng.uniform(*settings.noise_uniform, size=len(rows))
    else:
        noise = rng.triangular(*settings.noise_triangular, size=len(rows))
    moved = rows.copy()
    moved[:, column] += noise
    before, after = _pair_classes(classifier, rows, moved)
    decided = (before >= 0) & (after >= 0)
    kept = int(np.sum(decided & (before == after)))
    return _probability_record(
        settings, certificate, data, options, assumptions, kept, int(np.sum(~decided)),
        len(rows), "one seeded noise draw per data row, Clopper-Pearson on the rows whose "
        "class is kept; classes decided in real arithmetic", {"rows": len(rows)})


def monotonicity_check(settings: Any, certificate: Certificate, network: Network,
                       population: Any, data: DataRows, options: FidelityOptions,
                       assumptions: dict[str, Any]) -> dict[str, Any]:
    """The monotonicity record (module docstring)."""
    from verifier.network import Network as IRNetwork

    if not settings.use_prior:
        return unchecked("no check possible: the certified pairs are uniform on the support "
                         "box, not drawn from the population (use_prior: false), so data "
                         "cannot refute them", assumptions, data.source)
    if not isinstance(network, IRNetwork):
        return unchecked("no check possible: the model is not a network certgate evaluates",
                         assumptions, data.source)
    rows = np.asarray(data.rows, dtype=np.float64)
    column = list(network.input_names).index(settings.feature)
    order = np.random.default_rng(options.seed).permutation(len(rows))
    half = len(rows) // 2
    first_rows = rows[order[:half]]
    moved = first_rows.copy()
    moved[:, column] = rows[order[half:2 * half], column]
    before, after = first_rows[:, column], moved[:, column]
    ordered = before >= after if settings.decreasing else before <= after
    if _is_discrete(population, settings.feature):
        ordered &= before != after
    trials = int(ordered.sum())
    if trials == 0:
        return unchecked("no check possible: no data pair meets the order precondition",
                         assumptions, data.source)
    first, second = _pair_classes(network.as_classifier(), first_rows[ordered],
                                  moved[ordered])
    decided = (first >= 0) & (second >= 0)
    favourable = settings.favorable_class
    kept = int(np.sum(decided & ~((first == favourable) & (second != favourable))))
    return _probability_record(
        settings, certificate, data, options, assumptions, kept, int(np.sum(~decided)),
        trials, "rows paired at random (seeded), the second row of a pair lending the first "
        "its feature value, pairs meeting the order precondition kept, Clopper-Pearson on "
        "those whose favourable class is not lost; classes decided in real arithmetic",
        {"rows": len(rows), "pairs": trials})


def _pair_classes(classifier: Network, first: np.ndarray, second: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The real-arithmetic classes of two row sets of one length (−1 where undecided), in
    chunks of :data:`CHUNK_ROWS`."""
    from verifier.causal.witness import certified_classes

    pairs = np.vstack([first, second])
    classes = np.concatenate([certified_classes(classifier, pairs[start:start + CHUNK_ROWS])
                              for start in range(0, len(pairs), CHUNK_ROWS)])
    return classes[: len(first)], classes[len(first):]


def _probability_record(settings: Any, certificate: Certificate, data: DataRows,
                        options: FidelityOptions, assumptions: dict[str, Any], kept: int,
                        undecided: int, trials: int, method: str,
                        counts: dict[str, int]) -> dict[str, Any]:
    """The record of a probability estimated by ``trials`` Bernoulli trials, ``kept`` of
    them successes and ``undecided`` counted for the upper end only (Clopper–Pearson at the
    options' level), against the certified interval."""
    empirical = (clopper_pearson(kept, trials, options.level)[0],
                 clopper_pearson(kept + undecided, trials, options.level)[1])
    certified = tuple(float(v) for v in certificate.bounds[settings.requirement.quantity])
    contradicted = _disjoint(empirical, certified)  # type: ignore[arg-type]
    return {
        "status": "contradicted" if contradicted else "consistent",
        "reason": _reason("probability", empirical, certified, contradicted, options.level),
        "quantity": "probability",
        "level": options.level,
        "method": method,
        "empirical": {"interval": list(empirical), "estimate": kept / trials, **counts,
                      "kept": kept, "undecided": undecided, "seed": options.seed},
        "certified": list(certified),
        "data": data.source,
        "assumptions": assumptions,
    }


def _is_discrete(population: Any, column: str) -> bool:
    """Whether the population's ``column`` carries point masses (an integer, binary or
    categorical feature's, or a continuous one whose fitted histogram kept atoms): the
    exact engine makes the order precondition strict on such a column (its terms fix it),
    so the data counterpart does too."""
    columns = list(getattr(population, "columns", ()))
    if column not in columns:
        return False
    return not bool(np.asarray(population.atomless_columns())[columns.index(column)])


def _reason(quantity: str, empirical: tuple[float, float], certified: tuple[float, ...],
            contradicted: bool, level: float) -> str:
    if contradicted:
        return (f"the data's {quantity} interval {_text(empirical)} and the certified "
                f"{_text(certified)} are disjoint: the population model contradicts the "
                f"data at level {level:g}")
    return (f"the data's {quantity} interval {_text(empirical)} meets the certified "
            f"{_text(certified)} at level {level:g}")


def data_verdict(form: str, gamma: float, estimate: float,
                 interval: tuple[float, float]) -> dict[str, str]:
    """The parity verdict the data's rows give by themselves, under the certificate's rule
    (ratio ``> gamma``, difference ``< gamma``: :func:`verifier.spec.demographic_parity`):
    ``estimate`` is the verdict of the model's value on the rows, ``interval`` that of its
    confidence interval (``unknown`` when the interval holds ``gamma``'s both sides)."""
    def holds(value: float) -> bool:
        return value > gamma if form == "ratio" else value < gamma

    best, worst = (interval[1], interval[0]) if form == "ratio" else interval
    return {"estimate": "satisfied" if holds(estimate) else "violated",
            "interval": "satisfied" if holds(worst) else
            "violated" if not holds(best) else "unknown"}


def _disagreement(quantity: str, estimate: float, gamma: float, verdict: str,
                  level: float) -> str:
    return (f"the model's {quantity} on the data's rows, {estimate:.4g}, is on the other side "
            f"of gamma {gamma:g} from the proven verdict {verdict!r}: the data neither "
            f"refutes nor confirms the verdict at level {level:g} (the proof's margin to "
            f"gamma is within the data's sampling error)")


def _text(interval: tuple[float, ...] | list[float]) -> str:
    return "[" + ", ".join(f"{value:.4g}" for value in interval) + "]"


def fit_statistics(settings: Any, network: Network, population: Any, rows: np.ndarray,
                   members: dict[str, np.ndarray], options: FidelityOptions) -> dict[str, Any]:
    """The population's fit statistics the parity audit relies on (see the module
    docstring), data against population model."""
    from scipy.stats import norm

    names = list(network.input_names)
    protected = names.index(settings.protected)
    lower, upper = population.support()
    box_lo, box_hi = lower.copy(), upper.copy()
    box_lo[protected] = box_hi[protected] = settings.privileged
    privileged_mass = float(population.prob_boxes(box_lo[None, :], box_hi[None, :])[0])
    priv_rows = int(np.sum(rows[:, protected] == settings.privileged))
    share = clopper_pearson(priv_rows, len(rows), options.level)
    drawn = population.sample_codes(options.population_samples,
                                    np.random.default_rng(options.seed))
    drawn_priv = drawn[:, protected] == settings.privileged
    row_values, drawn_values = population.values_of(rows), population.values_of(drawn)
    skip = {protected}.union(*(set(group) for group in population.onehot_groups()
                               if protected in group))
    z = float(norm.ppf(1.0 - (1.0 - options.level) / 2.0))
    dependence = []
    for column, name in enumerate(names):
        if column in skip:
            continue
        in_data = _mean_difference(row_values[:, column], members["unprivileged"],
                                   members["privileged"], z)
        in_model = _mean_difference(drawn_values[:, column], ~drawn_priv, drawn_priv, z)
        dependence.append({
            "column": name, "data": in_data, "population": in_model,
            "disjoint": in_data is not None and in_model is not None
            and _disjoint(tuple(in_data["interval"]), tuple(in_model["interval"])),
        })
    outside = np.any((rows < lower) | (rows > upper), axis=1)
    return {
        "protected_share": {
            "condition": f"{settings.protected} == {settings.privileged!r}",
            "data": {"rows": priv_rows, "of": len(rows), "estimate": priv_rows / len(rows),
                     "interval": list(share)},
            "population": privileged_mass,
            "disjoint": not share[0] <= privileged_mass <= share[1],
        },
        "group_mean_difference": dependence,
        "population_samples": options.population_samples,
        "seed": options.seed,
        "rows_outside_support": int(outside.sum()),
        "method": ("group means: unprivileged minus privileged, normal interval at the level "
                   "(population: its sampling error over the seeded draws)"),
    }


def _mean_difference(values: np.ndarray, first: np.ndarray, second: np.ndarray,
                     z: float) -> dict[str, Any] | None:
    """Mean of ``values[first]`` minus mean of ``values[second]`` with a normal interval
    (Welch standard error); ``None`` when a group has fewer than 2 rows."""
    a, b = values[first], values[second]
    if len(a) < 2 or len(b) < 2:
        return None
    difference = float(a.mean() - b.mean())
    error = math.sqrt(float(a.var(ddof=1)) / len(a) + float(b.var(ddof=1)) / len(b))
    return {"unprivileged_mean": float(a.mean()), "privileged_mean": float(b.mean()),
            "difference": difference,
            "interval": [difference - z * error, difference + z * error]}
