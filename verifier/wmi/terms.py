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
from dataclasses import dataclass, field

import numpy as np

from verifier.numerics import EPS, FUNCTION_REL_MARGIN, scaled_down, scaled_up
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
from verifier.wmi.encode import WeightPiece, WMIInputError, density_pieces
from verifier.wmi.marginals import CORE_SIGMAS, Component, Density1D, supported_marginal

Prior = Distribution | PopulationModel
"""What a WMI property integrates over: a population model, or a bare distribution whose
columns are the model's inputs in order."""

MAX_TERMS = 20_000
Coefficient = tuple[float, float, float]  # (lower, value, upper)
ONE: Coefficient = (1.0, 1.0, 1.0)

MAX_ROOTS = 8192
"""Root regions (combinations of the pieces of a term's factors, summed over the terms, times
the pieces a property adds) above which a network's property is audited by box branching
instead: each root costs exact WMI an LP and a region enumeration. The income demo's default
fit (16-bin histograms on three columns) lists 9 728 roots for noise on yexp (not decided in
120 s, 52 CPU s) and 155 648 for monotonicity in hpw (not one region in 120 s); branching
decides both in under a second. Paper 002's Tables I–III prior (a 64-leaf density tree)
lists 4 096 for monotonicity and stays exact (2026-11-28)."""


def times(first: Coefficient, second: Coefficient) -> Coefficient:
    """Outward-rounded product of two non-negative coefficient enclosures."""
    margin = FUNCTION_REL_MARGIN + 4 * EPS
    return (scaled_down(first[0] * second[0], margin), first[1] * second[1],
            scaled_up(first[2] * second[2], margin))


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
    if len(terms) > MAX_TERMS:
        raise TooManyTerms(f"the prior expands into more than {MAX_TERMS} product terms "
                           "(discrete values × mixture components × network regimes)")
    return terms


def _discrete_sizes(prior: PopulationModel) -> str:
    """``'name' n × …`` over the population's discrete features: an integer feature counts
    the values its marginal's table lists, else ``up to n`` from its declared domain, else
    ``unbounded`` (a marginal on all integers, e.g. a discretised normal)."""
    atoms = prior.distribution.column_atoms()
    local = {int(model): k for k, model in enumerate(prior._order)}
    parts = []
    for feature in prior.features:
        if feature.kind == "binary":
            parts.append(f"{feature.name!r} 2")
        elif feature.kind == "categorical":
            parts.append(f"{feature.name!r} {len(feature.columns or [])}")
        elif feature.kind == "integer":
            column = prior.columns.index((feature.columns or [feature.name])[0])
            table = atoms[local[column]]
            low, high = feature.domain or (None, None)
            if table is not None:
                size = str(len(table))
            elif low is not None and high is not None:
                size = f"up to {int(high - low) + 1}"
            else:
                size = "unbounded"
            parts.append(f"{feature.name!r} {size}")
    return " × ".join(parts)


def _too_many(error: TooManyTerms, prior: Prior) -> WMIInputError:
    sizes = _discrete_sizes(prior) if isinstance(prior, PopulationModel) else ""
    where = f"; discrete values: {sizes}" if sizes else ""
    return TooManyTerms(f"{error}{where}. WMI enumerates the model's regions once per "
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
              high: float = math.inf) -> tuple[list[Term], float]:
    """Terms of ``distribution`` placed on model ``columns`` (1-D kinds restricted to
    ``[low, high]``, category indices for a categorical) and the mass they leave out."""
    if isinstance(distribution, Categorical):
        return _categories(distribution, columns, low, high), 0.0
    if isinstance(distribution, Discrete | PointMass | DiscretisedNormal | IntegerHistogram):
        return _atoms(distribution, columns, low, high)
    if isinstance(distribution, Product):
        return _product(distribution, columns)
    if isinstance(distribution, BayesianNetwork):
        return _bayesian(distribution, columns)
    if isinstance(distribution, Mixture):
        if distribution.dimension == 1 and bool(distribution.atomless_columns()[0]):
            return [_continuous(distribution, columns[0], low, high)], 0.0
        return _mixture(distribution, columns, low, high)
    if isinstance(distribution, PiecewiseDensity) and distribution.dimension > 1:
        pieces = tuple(density_pieces(distribution))
        return [Term(ONE, poly=[PolyFactor(tuple(columns), pieces)])], 0.0
    if distribution.dimension == 1:
        return [_continuous(distribution, columns[0], low, high)], 0.0
    raise WMIInputError(f"a {distribution.kind} distribution cannot be written as WMI terms")


def _cartesian(parts: list[tuple[list[Term], float]]) -> tuple[list[Term], float]:
    terms = [Term(ONE)]
    lost = 0.0
    for part_terms, part_lost in parts:
        lost += part_lost
        terms = _check_count([a.combined(b) for a in terms for b in part_terms])
    return terms, lost


def _product(product: Product, columns: list[int]) -> tuple[list[Term], float]:
    parts = []
    for factor, piece in zip(product.factors, product._slices(), strict=True):
        parts.append(decompose(factor.distribution, columns[piece]))
    return _cartesian(parts)


def _mixture(mixture: Mixture, columns: list[int], low: float, high: float
             ) -> tuple[list[Term], float]:
    terms, lost = [], 0.0
    for weight, component, order in zip(mixture.normalised_weights, mixture.components,
                                        mixture._orders, strict=True):
        if weight <= 0:
            continue
        part, part_lost = decompose(component, [columns[j] for j in order], low, high)
        scale = (scaled_down(weight, FUNCTION_REL_MARGIN), float(weight),
                 scaled_up(weight, FUNCTION_REL_MARGIN))
        terms.extend(Term(times(scale, t.coefficient), t.atoms, t.poly, t.densities)
                     for t in part)
        lost += weight * part_lost
    return _check_count(terms), lost


def _bayesian(network: BayesianNetwork, columns: list[int]) -> tuple[list[Term], float]:
    try:
        plan = network._plan
    except ValueError as error:
        raise TooManyTerms(f"the Bayesian network's regimes cannot be listed: {error}") from error
    offsets = np.cumsum([0, *[len(node.observed_columns()) for node in network.nodes]])
    terms, lost = [], 0.0
    for r in range(plan.regime_rows.shape[0]):
        parts = []
        for u, node in enumerate(network.nodes):
            if node.latent:
                continue
            row = node.cpt[int(plan.regime_rows[r, u])].distribution
            parts.append(decompose(row, columns[offsets[u]:offsets[u + 1]],
                                   float(plan.regime_lo[r, u]), float(plan.regime_hi[r, u])))
        regime_terms, regime_lost = _cartesian(parts)
        scale = ONE
        if plan.latent is not None:
            scale = (float(plan.latent.lower[r]), float(plan.latent.value[r]),
                     float(plan.latent.upper[r]))
        terms.extend(Term(times(scale, t.coefficient), t.atoms, t.poly, t.densities)
                     for t in regime_terms)
        lost += scale[2] * regime_lost
        _check_count(terms)
    return terms, lost


def prior_terms(prior: Prior) -> TermSet:
    """The prior's terms in model column order (see the module docstring); more than
    :data:`MAX_TERMS` raise :class:`TooManyTerms` naming the discrete features."""
    try:
        return _prior_terms(prior)
    except TooManyTerms as error:
        raise _too_many(error, prior) from error


def _prior_terms(prior: Prior) -> TermSet:
    if isinstance(prior, PopulationModel):
        order = [int(j) for j in prior._order]
        terms, lost = decompose(prior.distribution, order)
        names = list(prior.columns)
        groups = [tuple(int(prior._order[i]) for i in group)
                  for group in prior.distribution.onehot_groups()]
        dimension = prior.dimension
    else:
        dimension = prior.dimension
        terms, lost = decompose(prior, list(range(dimension)))
        names = list(prior.column_names() or [f"column {j}" for j in range(dimension)])
        groups = [tuple(group) for group in prior.onehot_groups()]
    terms = [t for t in terms if t.coefficient[2] > 0]
    if not terms:
        raise WMIInputError("the prior has no positive term")
    for term in terms:
        covered = set(term.atoms) | set(term.densities) | {
            j for f in term.poly for j in f.positions}
        if covered != set(range(dimension)):
            missing = sorted(set(range(dimension)) - covered)
            raise WMIInputError(f"the prior leaves columns {missing} without a distribution")
    return TermSet(dimension, terms, lost, names, groups)


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
