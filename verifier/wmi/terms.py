"""A prior as a finite sum of product terms over the model's input columns.

Every supported population distribution is rewritten as

    w(x) = Σ_terms  c_t · Π_{discrete groups} 1[x_group = a_t] · Π_poly p_t(x_P) · Π_j g_tj(x_j)

where ``c_t`` is a probability known as an interval, the discrete groups (a binary or integer
column, the columns of a one-hot group) take the fixed values ``a_t``, ``p_t`` are exact
piecewise-polynomial factors (uniform marginals, density-estimation trees) and ``g_tj`` are
1-D densities (:class:`verifier.wmi.marginals.Density1D`: normals, truncated normals, mixtures,
each possibly restricted to an interval by a Bayesian-network regime). Products expand into the
Cartesian product of their factors' terms, mixtures into the union of their components' terms
(1-D atomless mixtures stay one density), Bayesian networks into one term per regime (the rows
of every node, each continuous node restricted to the interval its children's rows impose, the
latent nodes' probability in ``c_t``), discrete marginals into one term per value.
A column may be fixed in some terms and integrated in others (point masses beside a density:
a fitted histogram's atoms are components of its mixture); each term is integrated as it
stands, so the column's integral is each atom's weight times the integrand at its value
plus the density's integral, and a term that fixes every column is one point.

``lost`` bounds the mass no term carries (the tails of unbounded discretised normals). Nothing
is approximated otherwise; a kind that cannot be written this way raises
:class:`WMIInputError` naming the column.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from verifier.numerics import FUNCTION_REL_MARGIN, scaled_down, scaled_up
from verifier.population import (
    BayesianNetwork,
    Categorical,
    Discrete,
    DiscretisedNormal,
    IntegerHistogram,
    Mixture,
    PiecewiseDensity,
    PointMass,
    PopulationModel,
    Product,
)
from verifier.population.base import Distribution
from verifier.wmi.coefficients import ONE, Coefficient, added, times
from verifier.wmi.encode import WeightPiece, WMIInputError, density_pieces
from verifier.wmi.marginals import CORE_SIGMAS, Component, Density1D, supported_marginal
from verifier.wmi.unread import SumOut

Prior = Distribution | PopulationModel
"""What a WMI property integrates over: a population model, or a bare distribution whose
columns are the model's inputs in order."""

MAX_TERMS = 20_000

MAX_LISTED = 10 * MAX_TERMS
"""Terms a Bayesian network's regimes may list while the columns no property reads are
merged away (:class:`Merged`); only the merged count is compared with :data:`MAX_TERMS`.
Listing and merging cost ~15 µs a term (2026-11-30, load ~7): 200,000 terms ~3 CPU s, paid
by the configuration check too."""

MAX_ROOTS = 8192
"""Root regions (combinations of the pieces of a term's factors, summed over the terms, times
the pieces a property adds) above which a network's property is audited by box branching
instead: each root costs exact WMI an LP and a region enumeration. The income demo's default
fit (16-bin histograms on three columns) lists 9 728 roots for noise on yexp (not decided in
120 s, 52 CPU s) and 155 648 for monotonicity in hpw (not one region in 120 s); branching
decides both in under a second. Paper 002's Tables I–III prior (a 64-leaf density tree)
lists 4 096 for monotonicity and stays exact (2026-11-28)."""


@dataclass(frozen=True)
class PolyFactor:
    """Exact pieces on the columns ``positions``."""

    positions: tuple[int, ...]
    pieces: tuple[WeightPiece, ...]


@dataclass
class Term:
    """One product term (see the module docstring)."""

    coefficient: Coefficient
    atoms: dict[int, float] = field(default_factory=dict)
    poly: list[PolyFactor] = field(default_factory=list)
    densities: dict[int, Density1D] = field(default_factory=dict)

    def combined(self, other: Term) -> Term:
        return Term(times(self.coefficient, other.coefficient), {**self.atoms, **other.atoms},
                    [*self.poly, *other.poly], {**self.densities, **other.densities})

    def continuous_key(self) -> tuple:
        """Identifies the continuous part (terms with equal keys differ only in atoms)."""
        return (tuple((f.positions, id(f.pieces)) for f in self.poly),
                tuple(sorted((j, d.key()) for j, d in self.densities.items())))


@dataclass
class TermSet:
    """The terms of a prior in model column order."""

    dimension: int
    terms: list[Term]
    lost: float
    names: list[str]
    groups: list[tuple[int, ...]]

    def name(self, column: int) -> str:
        return self.names[column] if column < len(self.names) else f"column {column}"

    def discrete_columns(self) -> list[int]:
        """The columns every term fixes (binary, integer, one-hot: summed over values)."""
        return sorted(set.intersection(*(set(term.atoms) for term in self.terms)))

    def mixed_columns(self) -> list[int]:
        """The columns some terms fix and others integrate: point masses beside a density
        (e.g. the atoms a fitted histogram keeps for values holding 5 % of the rows). Each
        term is integrated as it stands, so such a column's integral is the atoms' weights
        times the integrand at their values plus the density's integral."""
        fixed = {j for term in self.terms for j in term.atoms}
        return sorted(fixed - set(self.discrete_columns()))


class NotEnumerable(WMIInputError):
    """A prior exact WMI cannot enumerate, though box branching (:mod:`verifier.wmi.branched`)
    can audit a network under it."""


class TooManyTerms(NotEnumerable):
    """The prior expands into more than :data:`MAX_TERMS` product terms."""


class TooManyRoots(NotEnumerable):
    """A property's queries would list more than :data:`MAX_ROOTS` root regions (product
    pieces of the prior's factors, over all its terms)."""


class AllDiscrete(NotEnumerable):
    """Every integration coordinate is fixed by discrete values: there is nothing to
    integrate (region enumeration needs at least one continuous column)."""


def _check_count(terms: list[Term]) -> list[Term]:
    _check_size(len(terms))
    return terms


def _check_size(count: int) -> None:
    if count > MAX_TERMS:
        raise TooManyTerms(f"the prior expands into more than {MAX_TERMS} product terms "
                           "(discrete values × mixture components × network regimes)")


def _discrete_sizes(prior: PopulationModel, out: SumOut | None) -> str:
    """``'name' n × …`` over the population's discrete features that the property reads
    (all of them when ``out`` is None): an integer feature counts the values its marginal's
    table lists, else ``up to n`` from its declared domain, else ``unbounded`` (a marginal
    on all integers, e.g. a discretised normal)."""
    atoms = prior.distribution.column_atoms()
    local = {int(model): k for k, model in enumerate(prior._order)}
    parts = []
    for feature in prior.features:
        placed = [prior.columns.index(name) for name in feature.column_names()]
        if out is not None and out.unread(placed):
            continue
        if feature.kind == "binary":
            parts.append(f"{feature.name!r} 2")
        elif feature.kind == "categorical":
            parts.append(f"{feature.name!r} {len(feature.columns or [])}")
        elif feature.kind == "integer":
            table = atoms[local[placed[0]]]
            low, high = feature.domain or (None, None)
            if table is not None:
                size = str(len(table))
            elif low is not None and high is not None:
                size = f"up to {int(high - low) + 1}"
            else:
                size = "unbounded"
            parts.append(f"{feature.name!r} {size}")
    return " × ".join(parts)


def _too_many(error: TooManyTerms, prior: Prior, out: SumOut | None) -> WMIInputError:
    sizes = _discrete_sizes(prior, out) if isinstance(prior, PopulationModel) else ""
    read = "discrete values read" if out is not None else "discrete values"
    where = f"; {read}: {sizes}" if sizes else ""
    summed = (f" ({out.unread_count()} columns no model reads summed out)"
              if out is not None else "")
    return TooManyTerms(f"{error}{where}{summed}. WMI enumerates the model's regions once per "
                        "combination of the discrete values it reads: audit a population with "
                        "fewer or coarser discrete columns, or use an audit kind that "
                        "partitions the input space (demographic_parity, causal_fairness)")


def _atoms(distribution: Distribution, columns: list[int], low: float, high: float
           ) -> tuple[list[Term], float]:
    """One term per value of a discrete 1-D marginal inside ``[low, high]``."""
    if isinstance(distribution, PointMass):
        values = np.array([distribution.value])
    elif isinstance(distribution, Discrete):
        values = np.asarray(distribution.values, np.float64)
    elif isinstance(distribution, IntegerHistogram):
        if distribution.integer_count() > MAX_TERMS:
            raise TooManyTerms(f"column {columns[0]}: an integer histogram with "
                               f"{distribution.integer_count()} values")
        values = distribution.charged_integers()
    else:
        first, last = distribution.support_in(low, high) or (0.0, -1.0)
        mean, sigma = distribution.mean, distribution.sigma
        first = max(first, math.floor(mean - CORE_SIGMAS * sigma - 1))
        last = min(last, math.ceil(mean + CORE_SIGMAS * sigma + 1))
        values = np.arange(first, last + 1, dtype=np.float64)
        if values.size > MAX_TERMS:
            raise TooManyTerms(f"column {columns[0]}: a discretised normal with "
                               f"{values.size} values in its core")
    values = values[(values >= low) & (values <= high)]
    lows, highs = distribution.prob_boxes_interval(values[:, None], values[:, None])
    mids = distribution.prob_boxes(values[:, None], values[:, None])
    terms = [Term((float(a), float(m), float(b)), {columns[0]: float(v)})
             for v, a, m, b in zip(values, lows, mids, highs, strict=True) if b > 0]
    lost = 0.0
    if isinstance(distribution, DiscretisedNormal):
        inside = distribution.prob_boxes_interval(np.array([[low]]), np.array([[high]]))[1][0]
        lost = max(0.0, float(inside - sum(t.coefficient[0] for t in terms)))
    return terms, lost


def _categories(distribution: Categorical, columns: list[int], low: float, high: float
                ) -> list[Term]:
    weights = distribution.weights
    margin = distribution.margin
    terms = []
    for index, weight in enumerate(weights):
        if weight > 0 and low <= index <= high:
            atoms = {column: float(j == index) for j, column in enumerate(columns)}
            terms.append(Term((scaled_down(weight, margin), float(weight),
                               scaled_up(weight, margin)), atoms))
    return terms


def _continuous(distribution: Distribution, column: int, low: float, high: float) -> Term:
    if not supported_marginal(distribution):
        raise WMIInputError(f"a {distribution.kind} distribution on column {column} has no "
                            "density WMI can bound")
    return Term(ONE, densities={column: Density1D((Component(1.0, 1.0, distribution, low,
                                                             high),))})


def decompose(distribution: Distribution, columns: list[int], low: float = -math.inf,
              high: float = math.inf, out: SumOut | None = None) -> tuple[list[Term], float]:
    """Terms of ``distribution`` placed on model ``columns`` (1-D kinds restricted to
    ``[low, high]``, category indices for a categorical) and the mass they leave out. With
    ``out``, a distribution none of whose columns is read is one term without factors: its
    certified mass in ``out``'s box (:meth:`SumOut.mass`); terms built from such parts that
    agree on every read column are merged (:func:`merged`)."""
    if out is not None and out.unread(columns):
        coefficient = out.mass(distribution, columns, low, high)
        return ([Term(coefficient)] if coefficient[2] > 0 else []), 0.0
    if isinstance(distribution, Categorical):
        return _categories(distribution, columns, low, high), 0.0
    if isinstance(distribution, Discrete | PointMass | DiscretisedNormal | IntegerHistogram):
        return _atoms(distribution, columns, low, high)
    if isinstance(distribution, Product):
        return _product(distribution, columns, out)
    if isinstance(distribution, BayesianNetwork):
        return _bayesian(distribution, columns, out)
    if isinstance(distribution, Mixture):
        if distribution.dimension == 1 and bool(distribution.atomless_columns()[0]):
            return [_continuous(distribution, columns[0], low, high)], 0.0
        return _mixture(distribution, columns, low, high, out)
    if isinstance(distribution, PiecewiseDensity) and distribution.dimension > 1:
        pieces = tuple(density_pieces(distribution))
        return [Term(ONE, poly=[PolyFactor(tuple(columns), pieces)])], 0.0
    if distribution.dimension == 1:
        return [_continuous(distribution, columns[0], low, high)], 0.0
    raise WMIInputError(f"a {distribution.kind} distribution cannot be written as WMI terms")


class Merged:
    """Terms accumulated with those that agree on every atom and every continuous factor made
    one, their coefficients added with outward rounding (:func:`~verifier.wmi.coefficients.
    added`); first-seen order."""

    def __init__(self) -> None:
        self.found: dict[tuple, Term] = {}

    def add(self, terms: Iterable[Term]) -> None:
        for term in terms:
            key = (term.continuous_key(), tuple(sorted(term.atoms.items())))
            old = self.found.get(key)
            self.found[key] = term if old is None else Term(
                added(old.coefficient, term.coefficient), old.atoms, old.poly, old.densities)

    def terms(self) -> list[Term]:
        return list(self.found.values())


def merged(terms: list[Term]) -> list[Term]:
    """The terms merged as :class:`Merged` merges them."""
    accumulated = Merged()
    accumulated.add(terms)
    return accumulated.terms()


def _cartesian(parts: list[tuple[list[Term], float]]) -> tuple[list[Term], float]:
    terms = [Term(ONE)]
    lost = 0.0
    for part_terms, part_lost in parts:
        lost += part_lost
        _check_size(len(terms) * len(part_terms))
        terms = [a.combined(b) for a in terms for b in part_terms]
    return terms, lost


def _product(product: Product, columns: list[int], out: SumOut | None
             ) -> tuple[list[Term], float]:
    parts = []
    for factor, piece in zip(product.factors, product._slices(), strict=True):
        parts.append(decompose(factor.distribution, columns[piece], out=out))
    return _cartesian(parts)


def _mixture(mixture: Mixture, columns: list[int], low: float, high: float,
             out: SumOut | None) -> tuple[list[Term], float]:
    terms, lost = [], 0.0
    for weight, component, order in zip(mixture.normalised_weights, mixture.components,
                                        mixture._orders, strict=True):
        if weight <= 0:
            continue
        part, part_lost = decompose(component, [columns[j] for j in order], low, high, out)
        scale = (scaled_down(weight, FUNCTION_REL_MARGIN), float(weight),
                 scaled_up(weight, FUNCTION_REL_MARGIN))
        terms.extend(Term(times(scale, t.coefficient), t.atoms, t.poly, t.densities)
                     for t in part)
        lost += weight * part_lost
    return _check_count(terms if out is None else merged(terms)), lost


def _bayesian(network: BayesianNetwork, columns: list[int], out: SumOut | None
              ) -> tuple[list[Term], float]:
    """One term per regime and combination of its nodes' terms. With ``out``, the nodes
    :meth:`SumOut.kept_nodes` drops are left out of the regimes (their probability is 1 in
    each), an unread node's row enters as its mass, and the terms are merged as they are
    listed (:func:`merged`): :data:`MAX_TERMS` bounds the merged count, :data:`MAX_LISTED`
    the terms listed."""
    offsets = np.cumsum([0, *[len(node.observed_columns()) for node in network.nodes]])
    kept = list(range(len(network.nodes))) if out is None else out.kept_nodes(network, columns)
    if len(kept) < len(network.nodes):
        network = BayesianNetwork.model_construct(nodes=[network.nodes[u] for u in kept])
    try:
        plan = network._plan
    except ValueError as error:
        raise TooManyTerms(f"the Bayesian network's regimes cannot be listed: {error}") from error
    terms, lost, listed = [], 0.0, 0
    found = Merged()
    for r in range(plan.regime_rows.shape[0]):
        parts = []
        for u, node in enumerate(network.nodes):
            if node.latent:
                continue
            row = node.cpt[int(plan.regime_rows[r, u])].distribution
            where = columns[offsets[kept[u]]:offsets[kept[u] + 1]]
            parts.append(decompose(row, where, float(plan.regime_lo[r, u]),
                                   float(plan.regime_hi[r, u]), out))
        regime_terms, regime_lost = _cartesian(parts)
        scale = ONE
        if plan.latent is not None:
            scale = (float(plan.latent.lower[r]), float(plan.latent.value[r]),
                     float(plan.latent.upper[r]))
        scaled = [Term(times(scale, t.coefficient), t.atoms, t.poly, t.densities)
                  for t in regime_terms]
        lost += scale[2] * regime_lost
        if out is None:
            terms.extend(scaled)
            _check_count(terms)
            continue
        listed += len(scaled)
        if listed > MAX_LISTED:
            raise TooManyTerms(f"the Bayesian network's regimes list more than {MAX_LISTED} "
                               "terms before the columns no model reads are summed out")
        found.add(scaled)
        _check_size(len(found.found))
    return (terms if out is None else found.terms()), lost


def prior_terms(prior: Prior, read: Iterable[int] | None = None,
                box: tuple[np.ndarray, np.ndarray] | None = None) -> TermSet:
    """The prior's terms in model column order (see the module docstring); more than
    :data:`MAX_TERMS` raise :class:`TooManyTerms` naming the discrete features.

    ``read``: the columns the property reads (None: every column). The others are summed out
    of the prior exactly (:mod:`verifier.wmi.unread`), restricted to the precondition
    ``box`` ``(lower, upper)`` (None: no restriction): each term then fixes them at one
    value inside the box (:meth:`SumOut.value`), and only the terms left after merging the
    ones that agree on every read column count towards :data:`MAX_TERMS`."""
    dimension, groups = _layout(prior)
    out = None if read is None else SumOut.of(dimension, read, groups, box)
    try:
        return _prior_terms(prior, out)
    except TooManyTerms as error:
        raise _too_many(error, prior, out) from error


def _layout(prior: Prior) -> tuple[int, list[tuple[int, ...]]]:
    """The prior's number of columns and its one-hot groups in model column order."""
    if isinstance(prior, PopulationModel):
        return prior.dimension, [tuple(int(prior._order[i]) for i in group)
                                 for group in prior.distribution.onehot_groups()]
    return prior.dimension, [tuple(group) for group in prior.onehot_groups()]


def _prior_terms(prior: Prior, out: SumOut | None) -> TermSet:
    dimension, groups = _layout(prior)
    if isinstance(prior, PopulationModel):
        terms, lost = decompose(prior.distribution, [int(j) for j in prior._order], out=out)
        names = list(prior.columns)
    else:
        terms, lost = decompose(prior, list(range(dimension)), out=out)
        names = list(prior.column_names() or [f"column {j}" for j in range(dimension)])
    terms = [t for t in terms if t.coefficient[2] > 0]
    if not terms:
        raise WMIInputError("the prior has no positive term")
    placed = []
    for term in terms:
        covered = set(term.atoms) | set(term.densities) | {
            j for f in term.poly for j in f.positions}
        missing = sorted(set(range(dimension)) - covered)
        summed = [j for j in missing if out is not None and out.unread([j])]
        if len(summed) < len(missing):
            raise WMIInputError(f"the prior leaves columns {missing} without a distribution")
        placed.append(Term(term.coefficient, {**term.atoms, **{j: out.value(j) for j in summed}},
                           term.poly, term.densities) if summed else term)
    return TermSet(dimension, placed, lost, names, groups)


def value_groups(termset: TermSet) -> list[tuple[tuple[int, ...], list[tuple[float, ...]]]]:
    """The discrete columns grouped (one-hot groups together, other columns alone) with the
    values each group takes in some term."""
    discrete = termset.discrete_columns()
    grouped = [g for g in termset.groups if set(g) <= set(discrete)]
    alone = [(j,) for j in discrete if not any(j in g for g in grouped)]
    result = []
    for group in [*grouped, *alone]:
        seen = sorted({tuple(t.atoms[j] for j in group) for t in termset.terms})
        result.append((group, seen))
    return result


def combinations(termset: TermSet) -> list[dict[int, float]]:
    """Every combination of the groups' values (for uniform priors)."""
    groups = value_groups(termset)
    result = []
    for choice in itertools.product(*(values for _, values in groups)):
        atoms = {}
        for (group, _), values in zip(groups, choice, strict=True):
            atoms.update(dict(zip(group, values, strict=True)))
        result.append(atoms)
        if len(result) > MAX_TERMS:
            raise TooManyTerms(f"the discrete columns take more than {MAX_TERMS} value "
                               "combinations")
    return result
