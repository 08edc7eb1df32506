"""The audited properties as WMI queries (paper 002, Eqs. 5, 6, 9, 10; its demographic parity,
Eq. 8, is certified by PV: :mod:`verifier.audits.demographic_parity`).

Each function returns a :class:`WMIResult`: the probability that the property holds
(``violation_probability`` its complement), exact when every density of the prior is piecewise
polynomial (``exact``), otherwise a certified interval ``[probability_lower,
probability_upper]`` from density envelopes (:mod:`verifier.wmi.envelope`) refined until it is
``tolerance`` wide, decided against ``stop_at`` or ``timeout_s`` runs out (then ``timed_out``,
with the interval reached). ``stop_at = k`` stops as soon as the violation probability is known
to be ``>= k`` (``stopped_early``; ``probability`` is then an upper bound).

The prior is any population model or distribution (:mod:`verifier.wmi.terms`): discrete
columns (binary, integer, one-hot groups) are summed over their values, each value fixing the
column in every copy of the input a property compares (summed once, never squared); values of
columns no model reads are merged into one query. Models are :class:`verifier.network.Network`
s, read as classifiers by :meth:`~verifier.network.Network.as_classifier` (argmax of the logits,
head dropped; a single output is a logit: class 1 iff ``logit > 0``), or fitted scikit-learn
``DecisionTreeClassifier`` / ``RandomForestClassifier``. The regressor form of monotonicity
compares output values and reads the logits only under no head or a sigmoid head (strictly
increasing per output, so ``f(x)[o] <= f(x′)[o]`` is the logits' event); it refuses another
head.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from verifier.network import Network, head_error
from verifier.numerics import EPS, FUNCTION_REL_MARGIN, scaled_down, scaled_up, two_sum
from verifier.population import PopulationModel
from verifier.population.base import Distribution
from verifier.wmi import branched
from verifier.wmi.encode import (
    Decrease,
    Disagreement,
    LostFavorable,
    OtherClass,
    Placement,
    WeightFactor,
    WeightPiece,
    WMIInputError,
)
from verifier.wmi.engine import (
    DEFAULT_TOLERANCE,
    DeadlineReached,
    Query,
    WMIResult,
    build_roots,
    point_query,
    solve,
)
from verifier.wmi.marginals import Density1D
from verifier.wmi.points import point_placement
from verifier.wmi.polynomial import box_integral, constant
from verifier.wmi.regions import NetworkModel, PiecewiseAffineModel
from verifier.wmi.terms import (
    MAX_ROOTS,
    AllDiscrete,
    Coefficient,
    NotEnumerable,
    PolyFactor,
    Term,
    TermSet,
    TooManyRoots,
    combinations,
    prior_terms,
    times,
)
from verifier.wmi.trees import ForestModel

Prior = Distribution | PopulationModel


def as_model(model: Any, bound_method: str = "crown", *,
             values: bool = False) -> PiecewiseAffineModel:
    """Wrap a network or a fitted scikit-learn tree / forest classifier.

    A network is read as a classifier (:meth:`Network.as_classifier`, the rule every class
    reader shares) unless ``values``, for a property comparing one output's values at two
    inputs: then its logits, which are in the same order as its outputs under no head or a
    sigmoid head (strictly increasing per output); another head is refused naming it.
    """
    if isinstance(model, PiecewiseAffineModel):
        return model
    if isinstance(model, Network):
        if not values:
            return NetworkModel(model.as_classifier(), bound_method)
        if model.head not in ("none", "sigmoid"):
            raise head_error(model.head, "the output-value form of monotonicity")
        return NetworkModel(model.logits(), bound_method)
    return ForestModel(model)


def read_columns(model: PiecewiseAffineModel) -> set[int]:
    """Input columns the model's output may depend on (first-layer weights that are not
    zero in real arithmetic; features a tree splits on)."""
    if isinstance(model, NetworkModel):
        layer = model.network.layers[0]
        magnitude = layer.weight_magnitude if layer.weight_magnitude is not None else 0.0
        used = (np.abs(layer.weight) + np.abs(magnitude)) > 0
        return {int(j) for j in np.flatnonzero(used.any(axis=0))}
    if isinstance(model, ForestModel):
        return {int(f) for tree in model.trees for f in tree["feature"] if f >= 0}
    return set(range(_input_size(model)))


def _input_size(*models: PiecewiseAffineModel) -> int:
    sizes = {model.network.input_size if isinstance(model, NetworkModel) else model.input_size
             for model in models}
    if len(sizes) != 1:
        raise WMIInputError(f"the models read different numbers of inputs: {sorted(sizes)}")
    return sizes.pop()


def _predicted(model: PiecewiseAffineModel, point: np.ndarray) -> int:
    if isinstance(model, NetworkModel):
        return int(model.network.classify(point[None])[0])
    if isinstance(model, ForestModel):
        return int(np.argmax(model.predict_scores(point[None])[0]))
    raise WMIInputError("give the expected class explicitly for this model type")


# ------------------------------------------------------------------------------ priors


def _termset(prior: Prior, dimension: int) -> TermSet:
    termset = prior_terms(prior)
    if termset.dimension != dimension:
        raise WMIInputError(f"the prior has {termset.dimension} columns, the model "
                            f"{dimension} inputs")
    return termset


def uniform_terms(prior: Prior, termset: TermSet) -> TermSet:
    """The uniform prior on the support box: every continuous column uniform on its support
    interval, every discrete group uniform over the values it takes. Raises
    :class:`WMIInputError` naming a continuous column with an unbounded support."""
    lower, upper = prior.support()
    discrete = set(termset.discrete_columns())
    pieces = []
    for j in range(termset.dimension):
        if j in discrete:
            continue
        if not (math.isfinite(lower[j]) and math.isfinite(upper[j])):
            raise WMIInputError(f"use_prior false needs a bounded support, but column "
                                f"{termset.name(j)!r} has support [{lower[j]:g}, {upper[j]:g}]")
        if not lower[j] < upper[j]:
            raise WMIInputError(f"column {termset.name(j)!r} has a single-point support")
        height = 1.0 / (float(upper[j]) - float(lower[j]))
        pieces.append(PolyFactor((j,), (WeightPiece(np.array([lower[j]]), np.array([upper[j]]),
                                                    constant(height, 1)),)))
    values = combinations(termset)
    share = 1.0 / len(values)
    terms = [Term((share, share, share), atoms, list(pieces)) for atoms in values]
    return TermSet(termset.dimension, terms, 0.0, termset.names, termset.groups)


def _merge(terms: list[Term], read: set[int]) -> list[Term]:
    """Terms that differ only in atoms of unread columns become one (coefficients added)."""
    merged: dict[tuple, Term] = {}
    for term in terms:
        atoms = {j: v for j, v in term.atoms.items() if j in read}
        key = (term.continuous_key(), tuple(sorted(atoms.items())))
        if key in merged:
            old = merged[key]
            c, d = old.coefficient, term.coefficient
            merged[key] = Term((c[0] + d[0], c[1] + d[1], c[2] + d[2]), old.atoms, old.poly,
                               old.densities)
        else:
            merged[key] = Term(term.coefficient, dict(term.atoms), term.poly, term.densities)
    return list(merged.values())


def _factor_mass(term: Term, skip: int | None = None) -> float:
    """Upper bound on the mass of the term's continuous factors other than column ``skip``."""
    return _factor_masses(term, skip)[1]


class _SkippedMass:
    """Running upper bound of the mass of the terms a builder leaves out at its deadline;
    terms sharing their continuous part (:meth:`Term.continuous_key`) share one bound of its
    mass, so leaving out thousands of terms stays cheap."""

    def __init__(self) -> None:
        self.total = 0.0
        self.masses: dict[tuple, float] = {}

    def add(self, term: Term, factor: float = 1.0) -> None:
        key = term.continuous_key()
        if key not in self.masses:
            self.masses[key] = _factor_mass(term)
        self.total += term.coefficient[2] * self.masses[key] * factor


def _factor_masses(term: Term, skip: int | None = None) -> tuple[float, float]:
    """Enclosure of the mass of the term's continuous factors other than column ``skip``
    (polynomial pieces integrated in float64, widened by the relative
    ``FUNCTION_REL_MARGIN``)."""
    low = high = 1.0
    for j, density in term.densities.items():
        if j != skip:
            total = density.total()
            low, high = low * total[0], high * total[1]
    for factor in term.poly:
        if skip not in factor.positions:
            mass = sum(box_integral(piece.polynomial, piece.lower, piece.upper)
                       for piece in factor.pieces)
            low = scaled_down(low * mass, FUNCTION_REL_MARGIN)
            high = scaled_up(high * mass, FUNCTION_REL_MARGIN)
    return low, high


@dataclass
class _Layout:
    """Weight factors, envelope coordinates and left-out mass of one term's query."""

    factors: list[WeightFactor]
    envelopes: list[tuple[int, Density1D]]
    lost: float
    lower: np.ndarray
    upper: np.ndarray


def _place(term: Term, index: dict[int, int], width: int) -> _Layout:
    """The term's continuous factors on the integration coordinates ``index[column]``."""
    factors, envelopes, lost = [], [], 0.0
    lower, upper = np.full(width, -np.inf), np.full(width, np.inf)
    for factor in term.poly:
        positions = [index[j] for j in factor.positions]
        factors.append(WeightFactor(positions, list(factor.pieces)))
        lower[positions] = np.min([p.lower for p in factor.pieces], axis=0)
        upper[positions] = np.max([p.upper for p in factor.pieces], axis=0)
    for j, density in term.densities.items():
        if _place_density(j, index[j], density, factors, envelopes, lower, upper):
            lost += term.coefficient[2] * _tail(density) * _factor_mass(term, j)
    return _Layout(factors, envelopes, lost, lower, upper)


def _roots(term: Term, dimension: int, box_lo: np.ndarray | None = None,
           box_hi: np.ndarray | None = None) -> int:
    """How many root regions the term's factors list: the product of their piece counts,
    counting only the pieces that meet the precondition box ``[box_lo, box_hi]`` (by column;
    none: no box)."""
    free = [j for j in range(dimension) if j not in term.atoms]
    layout = _place(term, {j: k for k, j in enumerate(free)}, len(free))
    if box_lo is None or box_hi is None:
        return math.prod(len(factor.pieces) for factor in layout.factors)
    lo, hi = box_lo[free], box_hi[free]
    return math.prod(
        sum(bool(np.all(np.maximum(piece.lower, lo[factor.positions])
                        < np.minimum(piece.upper, hi[factor.positions])))
            for piece in factor.pieces)
        for factor in layout.factors)


def _check_roots(counts: Iterable[int], max_roots: int | None) -> None:
    """Raise :class:`TooManyRoots` once the root counts (one per query a property would
    build, :func:`_roots` times the pieces the property adds: a copy's marginal, the noise,
    the other values of a discrete feature) add up to more than ``max_roots`` (``None``: no
    limit). The counts are read lazily and only up to the limit."""
    if max_roots is None:
        return
    total = 0
    for count in counts:
        total += count
        if total > max_roots:
            raise TooManyRoots(f"the prior's pieces make more than {max_roots} root regions "
                               "for exact WMI")


def _root_limit(*models: Any) -> int | None:
    """:data:`MAX_ROOTS` when box branching can take the audit over, else no limit."""
    return MAX_ROOTS if branched.branchable(*models) else None


def _tail(density: Density1D) -> float:
    return density.core()[2]


def _place_density(column: int, position: int, density: Density1D,
                   factors: list[WeightFactor], envelopes: list[tuple[int, Density1D]],
                   lower: np.ndarray, upper: np.ndarray) -> bool:
    """Put a column's density on ``position``: exact pieces, or weight 1 on its core with an
    envelope entry (then ``True``)."""
    if density.polynomial():
        pieces = density.polynomial_pieces()
        if not pieces:
            raise WMIInputError(f"column {column} has no mass in a part of the prior")
        factors.append(WeightFactor([position], pieces))
        lower[position] = min(p.lower[0] for p in pieces)
        upper[position] = max(p.upper[0] for p in pieces)
        return False
    low, high, _ = density.core()
    factors.append(WeightFactor([position], [WeightPiece(np.array([low]), np.array([high]),
                                                         constant(1.0, 1))]))
    envelopes.append((position, density))
    lower[position], upper[position] = low, high
    return True


def _atoms_inside(term: Term, box_lo: np.ndarray, box_hi: np.ndarray) -> bool:
    return all(box_lo[j] <= v <= box_hi[j] for j, v in term.atoms.items())


def _late(deadline: float) -> bool:
    """Whether the deadline has passed: a term the builders then skip (or whose roots
    were being listed, :class:`~verifier.wmi.engine.DeadlineReached`) enters as ``lost`` mass
    (its whole mass, counted on both ends)."""
    return time.perf_counter() >= deadline


def _single_copy_queries(models: list[PiecewiseAffineModel], termset: TermSet,
                         dimension: int, box_lo: np.ndarray, box_hi: np.ndarray,
                         violation: Any, deadline: float = math.inf,
                         max_roots: int | None = None, finite_sum: bool = False
                         ) -> list[Query]:
    """One query per (merged) term whose atoms lie in the precondition box (a term fixing
    every column reads its point). Terms reached after ``deadline`` are left out as
    ``lost`` mass (:func:`_late`); :class:`TooManyRoots` when the pieces meeting the box
    make more than ``max_roots`` roots; :class:`AllDiscrete` as :func:`_points_only`
    says."""
    read = set().union(*(read_columns(model) for model in models))
    terms = _merge([t for t in termset.terms if _atoms_inside(t, box_lo, box_hi)], read)
    _check_roots((_roots(term, dimension, box_lo, box_hi) for term in terms), max_roots)
    queries: list[Query] = []
    skipped = _SkippedMass()
    for term in terms:
        if _late(deadline):
            skipped.add(term)
            continue
        free = [j for j in range(dimension) if j not in term.atoms]
        if not free:
            point = _offset(term, dimension)
            queries.append(point_query([point_placement(model, point) for model in models],
                                       violation, term.coefficient))
            continue
        index = {j: k for k, j in enumerate(free)}
        layout = _place(term, index, len(free))
        lo = np.maximum(layout.lower, box_lo[free])
        hi = np.minimum(layout.upper, box_hi[free])
        try:
            roots, mass_bound = build_roots(len(free), layout.factors, lo, hi,
                                            deadline=deadline, envelopes=tuple(layout.envelopes))
        except DeadlineReached:
            skipped.add(term)
            continue
        embed = np.eye(dimension)[:, free]
        offset = _offset(term, dimension)
        placements = [Placement(model, embed, offset) for model in models]
        queries.append(Query(len(free), roots, placements, violation, term.coefficient,
                             tuple(layout.envelopes), layout.lost, mass_bound=mass_bound))
    return _with_lost(_points_only(queries, finite_sum), termset.lost + skipped.total)


def _offset(term: Term, dimension: int) -> np.ndarray:
    """The input with the term's fixed columns at their values and 0 elsewhere."""
    offset = np.zeros(dimension)
    for j, v in term.atoms.items():
        offset[j] = v
    return offset


def _points_only(queries: list[Query], finite_sum: bool) -> list[Query]:
    """``queries``; :class:`AllDiscrete` when every one reads fixed points (every column
    discrete) unless ``finite_sum``: the caller then branches a network's boxes, or asks
    again for the finite sum over the points."""
    if not finite_sum and queries and all(query.dimension == 0 for query in queries):
        raise AllDiscrete("every input column is discrete: nothing to integrate")
    return queries


def _finite_sum(queries: list[Query], engine: dict[str, Any]) -> WMIResult:
    """The result over queries that all read fixed points."""
    result = _solve(queries, engine)
    result.extra["method"] = "finite sum over the prior's points"
    return result


def _ball(termset: TermSet, center: Any, epsilon: float | np.ndarray | None
          ) -> tuple[np.ndarray, np.ndarray]:
    dimension = termset.dimension
    if center is None:
        return np.full(dimension, -np.inf), np.full(dimension, np.inf)
    point = np.asarray(center, dtype=np.float64).reshape(-1)
    if point.size != dimension:
        raise WMIInputError(f"the centre has {point.size} coordinates, expected {dimension}")
    radius = _radius(epsilon)
    return point - radius, point + radius


def _radius(epsilon: float | np.ndarray | None) -> float | np.ndarray:
    """The ε-box's half-width: one ``ε`` for every column, or one per column (``(d,)``, as a
    coded column's box in its codes, :mod:`verifier.audits.local_robustness`); each > 0."""
    if epsilon is None or not np.all(np.asarray(epsilon, dtype=np.float64) > 0):
        raise WMIInputError(f"epsilon must be > 0, got {epsilon}")
    return epsilon


def _solve(queries: list[Query], engine: dict[str, Any]) -> WMIResult:
    """Solve the queries in the time left of the property's deadline (building the queries
    counted)."""
    deadline = engine["deadline"]
    if not queries and _late(deadline):
        return WMIResult(probability=0.0, violation_probability=1.0, total_mass=0.0,
                         violation_mass=0.0, regions=0, integrals=0, lps=0, elapsed_s=0.0,
                         probability_lower=0.0, probability_upper=1.0, exact=False,
                         timed_out=True)
    if not queries:
        raise WMIInputError("the precondition has probability zero under the prior")
    timeout_s = None if deadline == math.inf else max(0.0, deadline - time.perf_counter())
    return solve(queries, engine["stop_at"], engine["executor"], timeout_s=timeout_s,
                 tolerance=engine["tolerance"])


def _engine(stop_at: float | None, executor: Executor | None, bound_method: str,
            timeout_s: float | None, tolerance: float) -> dict[str, Any]:
    """The run options (the deadline counted from now) of :func:`_solve` and of
    :func:`verifier.wmi.branching.branch`."""
    deadline = math.inf if timeout_s is None else time.perf_counter() + float(timeout_s)
    return {"stop_at": stop_at, "executor": executor, "bound_method": bound_method,
            "deadline": deadline, "tolerance": tolerance}


# ------------------------------------------------------------------------------ properties


def local_robustness_queries(model: Any, prior: Prior, center: Any, epsilon: float | np.ndarray,
                             expected_class: int | None = None, bound_method: str = "crown", *,
                             deadline: float = math.inf, max_roots: int | None = None,
                             finite_sum: bool = False) -> tuple[list[Query], int]:
    """The queries of :func:`local_robustness` and the expected class checked;
    :class:`TooManyRoots` when the prior's pieces meeting the ε-box make more than
    ``max_roots`` roots; :class:`AllDiscrete` as :func:`_points_only` says."""
    wrapped = as_model(model, bound_method)
    point = np.asarray(center, dtype=np.float64).reshape(-1)
    termset = _termset(prior, _input_size(wrapped))
    chosen = _predicted(wrapped, point) if expected_class is None else int(expected_class)
    box_lo, box_hi = _ball(termset, point, epsilon)
    return _single_copy_queries([wrapped], termset, point.size, box_lo, box_hi,
                                OtherClass(chosen), deadline=deadline,
                                max_roots=max_roots, finite_sum=finite_sum), chosen


def local_robustness(model: Any, prior: Prior, center: Any, epsilon: float | np.ndarray,
                     expected_class: int | None = None, *, stop_at: float | None = None,
                     executor: Executor | None = None, bound_method: str = "crown",
                     timeout_s: float | None = None, tolerance: float = DEFAULT_TOLERANCE
                     ) -> WMIResult:
    """``P(class(x) = expected_class | ‖x − center‖∞ <= ε)`` under ``prior`` (Eq. 5);
    ``expected_class`` defaults to the model's prediction at the centre. ``epsilon`` may
    give one half-width per column (``(d,)``, each > 0): the box ``center ± epsilon``."""
    engine = _engine(stop_at, executor, bound_method, timeout_s, tolerance)
    try:
        queries, chosen = local_robustness_queries(model, prior, center, epsilon, expected_class,
                                                   bound_method, deadline=engine["deadline"],
                                                   max_roots=_root_limit(model))
    except AllDiscrete:
        if not branched.branchable(model):
            queries, chosen = local_robustness_queries(
                model, prior, center, epsilon, expected_class, bound_method, finite_sum=True)
            result = _finite_sum(queries, engine)
            result.extra["expected_class"] = chosen
            return result
        return _branched_local_robustness(model, prior, center, epsilon, expected_class,
                                          engine)
    except NotEnumerable:
        if not branched.branchable(model):
            raise
        return _branched_local_robustness(model, prior, center, epsilon, expected_class,
                                          engine)
    result = _solve(queries, engine)
    result.extra["expected_class"] = chosen
    return result


def _branched_local_robustness(model: Any, prior: Prior, center: Any,
                               epsilon: float | np.ndarray, expected_class: int | None,
                               engine: dict[str, Any]) -> WMIResult:
    """:func:`local_robustness` by box branching (a network on a prior the region
    enumeration cannot list)."""
    point = np.asarray(center, dtype=np.float64).reshape(-1)
    chosen = _predicted(as_model(model, engine["bound_method"]), point) \
        if expected_class is None else int(expected_class)
    radius = _radius(epsilon)
    result = branched.local_robustness(model, prior, point - radius, point + radius, chosen,
                                       engine=engine)
    result.extra["expected_class"] = chosen
    return result


def equivalence_queries(model: Any, surrogate: Any, prior: Prior, center: Any = None,
                        epsilon: float | np.ndarray | None = None, bound_method: str = "crown", *,
                        deadline: float = math.inf, max_roots: int | None = None,
                        finite_sum: bool = False) -> list[Query]:
    """The queries of :func:`equivalence`; :class:`TooManyRoots` when the prior's pieces
    (meeting the ε-box, if any) make more than ``max_roots`` roots; :class:`AllDiscrete`
    as :func:`_points_only` says."""
    first, second = as_model(model, bound_method), as_model(surrogate, bound_method)
    termset = _termset(prior, _input_size(first, second))
    box_lo, box_hi = _ball(termset, center, epsilon)
    return _single_copy_queries([first, second], termset, termset.dimension, box_lo, box_hi,
                                Disagreement(), deadline=deadline, max_roots=max_roots,
                                finite_sum=finite_sum)


def equivalence(model: Any, surrogate: Any, prior: Prior, center: Any = None,
                epsilon: float | np.ndarray | None = None, *, stop_at: float | None = None,
                executor: Executor | None = None, bound_method: str = "crown",
                timeout_s: float | None = None, tolerance: float = DEFAULT_TOLERANCE
                ) -> WMIResult:
    """``P(c₁(x) = c₂(x))`` under ``prior``, globally or in the ε-box around ``center``
    (Eq. 6)."""
    engine = _engine(stop_at, executor, bound_method, timeout_s, tolerance)
    try:
        queries = equivalence_queries(model, surrogate, prior, center, epsilon, bound_method,
                                      deadline=engine["deadline"],
                                      max_roots=_root_limit(model, surrogate))
    except AllDiscrete:
        if not branched.branchable(model, surrogate):
            return _finite_sum(equivalence_queries(model, surrogate, prior, center, epsilon,
                                                   bound_method, finite_sum=True), engine)
        return _branched_equivalence(model, surrogate, prior, center, epsilon, engine)
    except NotEnumerable:
        if not branched.branchable(model, surrogate):
            raise
        return _branched_equivalence(model, surrogate, prior, center, epsilon, engine)
    return _solve(queries, engine)


def _branched_equivalence(model: Any, surrogate: Any, prior: Prior, center: Any,
                          epsilon: float | np.ndarray | None, engine: dict[str, Any]) -> WMIResult:
    """:func:`equivalence` by box branching (two networks on a prior the region enumeration
    cannot list)."""
    dimension = len(prior.support()[0])
    if center is None:
        lower, upper = np.full(dimension, -np.inf), np.full(dimension, np.inf)
    else:
        point = np.asarray(center, dtype=np.float64).reshape(-1)
        radius = _radius(epsilon)
        lower, upper = point - radius, point + radius
    return branched.equivalence(model, surrogate, prior, lower, upper, engine=engine)


def _copy_marginal(name: str, terms: list[Term], feature: int
                   ) -> tuple[list[WeightPiece] | None, Density1D | None]:
    """The marginal of column ``feature`` (named ``name``) over ``terms``, each leaving it
    free, for the second copy ``x′_i``: exact pieces when every part is polynomial, else a
    :class:`Density1D`."""
    densities = [t.densities.get(feature) for t in terms]
    if all(d is not None for d in densities) and not all(d.polynomial() for d in densities):
        components = []
        for term, density in zip(terms, densities, strict=True):
            rest_lo, rest_hi = _factor_masses(term, feature)
            components.extend(density.scaled(term.coefficient[0] * rest_lo,
                                             term.coefficient[2] * rest_hi).components)
        return None, Density1D(tuple(components))
    if any(d is not None and not d.polynomial() for d in densities):
        raise WMIInputError(f"column {name!r} mixes a multi-column "
                            "polynomial density with non-polynomial ones")
    pieces: list[WeightPiece] = []
    for term, density in zip(terms, densities, strict=True):
        value = term.coefficient[1] * _factor_mass(term, feature)
        if density is not None:
            pieces.extend(WeightPiece(p.lower, p.upper,
                                      {k: v * value for k, v in p.polynomial.items()})
                          for p in density.polynomial_pieces())
            continue
        factor = next(f for f in term.poly if feature in f.positions)
        where = factor.positions.index(feature)
        for piece in factor.pieces:
            pieces.extend(_marginal_piece(piece, where, value))
    return _same_boxes_added(pieces), None


def _same_boxes_added(pieces: list[WeightPiece]) -> list[WeightPiece]:
    """``pieces`` with those on the same interval made one (polynomials added): the terms
    that differ only in columns other than the feature repeat its pieces."""
    boxes: dict[tuple[float, float], dict[tuple[int, ...], float]] = {}
    for piece in pieces:
        polynomial = boxes.setdefault((float(piece.lower[0]), float(piece.upper[0])), {})
        for exponents, coefficient in piece.polynomial.items():
            polynomial[exponents] = polynomial.get(exponents, 0.0) + coefficient
    return [WeightPiece(np.array([low]), np.array([high]), polynomial)
            for (low, high), polynomial in boxes.items()]


def _marginal_piece(piece: WeightPiece, where: int, scale: float) -> list[WeightPiece]:
    """``∫ piece`` over every coordinate but ``where`` (a polynomial in that coordinate)."""
    result: dict[tuple[int, ...], float] = {}
    for exponents, coefficient in piece.polynomial.items():
        value = coefficient * scale
        for k, (e, low, high) in enumerate(zip(exponents, piece.lower, piece.upper,
                                               strict=True)):
            if k != where:
                value *= (high ** (e + 1) - low ** (e + 1)) / (e + 1)
        key = (exponents[where],)
        result[key] = result.get(key, 0.0) + value
    return [WeightPiece(piece.lower[[where]], piece.upper[[where]], result)]


def monotonicity_queries(model: Any, prior: Prior, feature: int, *, decreasing: bool = False,
                         favorable_class: int = 1, output: int | None = None,
                         use_prior: bool = False, bound_method: str = "crown",
                         deadline: float = math.inf, max_roots: int | None = None,
                         finite_sum: bool = False) -> list[Query]:
    """The queries of :func:`monotonicity`: for each (merged) prior term ``x``, one per part
    of the feature's second draw ``x′_i`` that the order admits — its density part (the
    terms leaving the feature free) and each of its values (the terms fixing it) — with
    ``x_i <= x′_i`` (``>=`` when ``decreasing``) as the precondition, strict where both
    sides are values (equal values cannot violate and leave it, as the measure-zero
    diagonal does between densities). A column with values beside a density (a fitted
    histogram's atoms) takes all four combinations. Terms reached after ``deadline`` are
    left out as ``lost`` mass (:func:`_late`); :class:`TooManyRoots` beyond ``max_roots``
    roots; :class:`AllDiscrete` as :func:`_points_only` says."""
    wrapped = as_model(model, bound_method, values=output is not None)
    dimension = _input_size(wrapped)
    if not 0 <= feature < dimension:
        raise WMIInputError(f"feature index {feature} is outside 0..{dimension - 1}")
    termset = _termset(prior, dimension)
    if not use_prior:
        termset = uniform_terms(prior, termset)
    if any(feature in group for group in termset.groups):
        raise WMIInputError(f"monotonicity needs an ordered feature; column "
                            f"{termset.name(feature)!r} belongs to a one-hot group")
    violation = LostFavorable(favorable_class) if output is None else Decrease(output)
    copy = _SecondDraw(termset, feature, decreasing)
    merged = _merge(termset.terms, read_columns(wrapped) | {feature})
    _check_roots((_roots(term, dimension) * copy.root_factor(term) for term in merged),
                 max_roots)
    queries: list[Query] = []
    skipped = _SkippedMass()
    for term in merged:
        parts = copy.parts(term)
        for part in parts:
            if _late(deadline):
                skipped.add(term, copy.mass(part, termset))
                continue
            try:
                queries.append(copy.query(wrapped, term, part, dimension, violation,
                                          deadline))
            except DeadlineReached:
                skipped.add(term, copy.mass(part, termset))
    if not queries and not skipped.total:
        raise WMIInputError(f"column {termset.name(feature)!r} takes a single value: no pair "
                            "differs in it")
    return _with_lost(_points_only(queries, finite_sum), 2 * termset.lost + skipped.total)


Part = tuple[float, Coefficient] | None
"""One part of the second draw: a value with its probability, or None for its density."""


class _SecondDraw:
    """Monotonicity's second draw ``x′_i`` of the feature, independent of ``x``, split into
    its density part (the terms leaving the feature free: exact pieces, or a
    :class:`Density1D` when some part is not polynomial) and its values (the terms fixing
    it: ``P(x′_i = v)`` as enclosures); either may be empty."""

    def __init__(self, termset: TermSet, feature: int, decreasing: bool) -> None:
        self.feature = feature
        self.decreasing = decreasing
        free = [t for t in termset.terms if feature not in t.atoms]
        fixed = [t for t in termset.terms if feature in t.atoms]
        self.pieces: list[WeightPiece] | None = None
        self.density: Density1D | None = None
        if free:
            self.pieces, self.density = _copy_marginal(termset.name(feature), free, feature)
        self.values = _value_marginal(fixed, feature)
        self._copies = math.nan  # a bound of the density part's mass, when first needed
        self._terms = termset

    def parts(self, term: Term) -> list[Part]:
        """The parts a pair starting at ``term`` may take: the density part, and the values
        the order admits strictly when the term fixes the feature, else every value."""
        density = self.pieces is not None or self.density is not None
        parts: list[Part] = [None] if density else []
        mine = term.atoms.get(self.feature)
        for value, weight in sorted(self.values.items()):
            ordered = mine is None or (value < mine if self.decreasing else value > mine)
            if ordered and weight[2] > 0:
                parts.append((value, weight))
        return parts

    def root_factor(self, term: Term) -> int:
        """Roots per root of the term: the density part's pieces and one per value."""
        pieces = 0
        if self.pieces is not None:
            pieces = len(self.pieces)
        elif self.density is not None:
            pieces = 1
        return pieces + sum(part is not None for part in self.parts(term))

    def mass(self, part: Part, termset: TermSet) -> float:
        """Upper bound of the part's probability (the density part: the prior's mass)."""
        if part is not None:
            return part[1][2]
        if math.isnan(self._copies):
            self._copies = _prior_mass(termset)
        return self._copies

    def query(self, wrapped: PiecewiseAffineModel, term: Term, part: Part, dimension: int,
              violation: Any, deadline: float) -> Query:
        """The query of pairs from ``term`` and ``part`` (a point query when nothing is
        left to integrate)."""
        feature = self.feature
        free = [j for j in range(dimension) if j not in term.atoms]
        index = {j: k for k, j in enumerate(free)}
        width = len(free) + (part is None)
        offset = _offset(term, dimension)
        moved = offset.copy()
        coefficient = term.coefficient
        if part is not None:
            moved[feature] = part[0]
            coefficient = times(coefficient, part[1])
        else:  # the second copy reads the feature from its own coordinate
            moved[feature] = 0.0
        if width == 0:
            return point_query([point_placement(wrapped, offset),
                                point_placement(wrapped, moved)], violation, coefficient)
        layout = _place(term, index, width)
        sign = -1.0 if self.decreasing else 1.0
        order = np.zeros((1, width))
        bound = 0.0
        if part is None:  # x′_i from the density part, on the last coordinate
            copy = width - 1
            if self.pieces is not None:
                layout.factors.append(WeightFactor([copy], self.pieces))
                layout.lower[copy] = min(p.lower[0] for p in self.pieces)
                layout.upper[copy] = max(p.upper[0] for p in self.pieces)
            else:
                _place_density(feature, copy, self.density, layout.factors, layout.envelopes,
                               layout.lower, layout.upper)
                layout.lost += term.coefficient[2] * _factor_mass(term) * _tail(self.density)
            order[0, copy] = -sign
            if feature in index:
                order[0, index[feature]] = sign
            else:
                bound = -sign * term.atoms[feature]
        else:
            layout.lost *= part[1][2]
            if feature in index:
                order[0, index[feature]] = sign
                bound = sign * part[0]
        first = np.zeros((dimension, width))
        for j, k in index.items():
            first[j, k] = 1.0
        second = first.copy()
        if feature in index:
            second[feature, index[feature]] = 0.0
        if part is None:
            second[feature, width - 1] = 1.0
        precondition = (order, np.array([bound])) if order.any() else (None, None)
        roots, mass_bound = build_roots(width, layout.factors, layout.lower, layout.upper,
                                        *precondition, deadline, tuple(layout.envelopes))
        placements = [Placement(wrapped, first, offset), Placement(wrapped, second, moved)]
        return Query(width, roots, placements, violation, coefficient,
                     tuple(layout.envelopes), layout.lost, mass_bound=mass_bound)


def _prior_mass(termset: TermSet) -> float:
    """Upper bound of the total mass of the terms (1 up to rounding)."""
    skipped = _SkippedMass()
    for term in termset.terms:
        skipped.add(term)
    return skipped.total


def _value_marginal(terms: list[Term], feature: int) -> dict[float, Coefficient]:
    """``P(x_feature = v)`` for every value ``v`` the ``terms`` (each fixing the column) give
    it, as enclosures: the sum of the coefficients of the terms fixing ``v``, each times the
    mass of its continuous factors (outward-rounded)."""
    sums: dict[float, list[float]] = {}
    for term in terms:
        low, high = _factor_masses(term)
        c = term.coefficient
        entry = sums.setdefault(term.atoms[feature], [0.0, 0.0, 0.0, 0])
        entry[0] += c[0] * low
        entry[1] += c[1] * 0.5 * (low + high)
        entry[2] += c[2] * high
        entry[3] += 1
    marginal = {}
    for value, (low, mid, high, count) in sums.items():
        margin = FUNCTION_REL_MARGIN + 4 * (count + 2) * EPS
        marginal[value] = (scaled_down(low, margin), mid, scaled_up(high, margin))
    return marginal


def _with_lost(queries: list[Query], lost: float) -> list[Query]:
    """``queries`` with ``lost`` (prior mass no term carries) added to the first query's."""
    if not queries or lost <= 0:
        return queries
    return [replace(queries[0], lost=queries[0].lost + lost), *queries[1:]]


def monotonicity(model: Any, prior: Prior, feature: int, *, decreasing: bool = False,
                 favorable_class: int = 1, output: int | None = None,
                 use_prior: bool = False, stop_at: float | None = None,
                 executor: Executor | None = None, bound_method: str = "crown",
                 timeout_s: float | None = None, tolerance: float = DEFAULT_TOLERANCE
                 ) -> WMIResult:
    """Monotonicity in input ``feature`` by self-composition (Eq. 9): ``x`` and ``x′`` agree
    except on ``feature``, where ``x_i <= x′_i`` (``>=`` when ``decreasing``).

    Classifier (``output`` None): ``P(c(x) = positive ⇒ c(x′) = positive)``. Regressor
    (``output`` given): ``P(f(x)[output] <= f(x′)[output])``. Pairs: ``x`` from the prior and
    ``x′_i`` an independent draw of the feature's marginal (``use_prior``), or both from the
    uniform prior on the support box (continuous columns uniform on their support interval,
    discrete groups uniform over their values; an unbounded support is refused). Discrete
    columns take the same value in both copies. A discrete (binary or integer) ``feature`` is
    compared on its values: ``x′_i`` is drawn from the values the feature takes and pairs
    with ``x_i < x′_i`` (``>`` when ``decreasing``) form the precondition; a column of a
    one-hot group is refused. A column with values beside a density (a fitted histogram's
    atoms; uniform on its support interval when not ``use_prior``) is compared both ways:
    ties between its values leave the precondition, as between a discrete feature's.
    """
    engine = _engine(stop_at, executor, bound_method, timeout_s, tolerance)
    try:
        queries = monotonicity_queries(model, prior, feature, decreasing=decreasing,
                                       favorable_class=favorable_class, output=output,
                                       use_prior=use_prior, bound_method=bound_method,
                                       deadline=engine["deadline"],
                                       max_roots=_root_limit(model))
    except AllDiscrete:
        if branched.branchable(model):
            return branched.monotonicity(model, prior, feature, decreasing=decreasing,
                                         favorable_class=favorable_class, output=output,
                                         use_prior=use_prior, engine=engine)
        return _finite_sum(monotonicity_queries(
            model, prior, feature, decreasing=decreasing, favorable_class=favorable_class,
            output=output, use_prior=use_prior, bound_method=bound_method, finite_sum=True),
            engine)
    except NotEnumerable:
        if not branched.branchable(model):
            raise
        return branched.monotonicity(model, prior, feature, decreasing=decreasing,
                                     favorable_class=favorable_class, output=output,
                                     use_prior=use_prior,
                                     engine=engine)
    return _solve(queries, engine)


def noise_robustness_queries(model: Any, prior: Prior, noise: Distribution | None,
                             features: list[int], bound_method: str = "crown", *,
                             deadline: float = math.inf, max_roots: int | None = None,
                             finite_sum: bool = False, noise_in_codes: bool = False
                             ) -> list[Query]:
    """The queries of :func:`noise_robustness` (pairs reached after ``deadline`` left out
    as ``lost`` mass, :func:`_late`); :class:`TooManyRoots` beyond ``max_roots`` roots;
    :class:`AllDiscrete` as :func:`_points_only` says. A column with values beside a
    density takes a density noise as a continuous column does (its values move off)."""
    wrapped = as_model(model, bound_method)
    dimension = _input_size(wrapped)
    _check_noise(prior, noise, features, dimension, noise_in_codes)
    termset = _termset(prior, dimension)
    noise_set = prior_terms(noise)
    if noise_set.dimension != len(features):
        raise WMIInputError(f"the noise has {noise_set.dimension} columns for "
                            f"{len(features)} features")
    discrete_noise = set(noise_set.discrete_columns())
    for position, f in enumerate(features):
        if f in termset.discrete_columns() and position not in discrete_noise:
            raise WMIInputError(f"noise on column {termset.name(f)!r} needs a continuous "
                                "column or a discrete noise distribution; it is discrete")
    merged = _merge(termset.terms, read_columns(wrapped))
    extra = sum(_roots(noise_term, len(features)) for noise_term in noise_set.terms)
    _check_roots((_roots(term, dimension) * extra for term in merged), max_roots)
    queries: list[Query] = []
    skipped = _SkippedMass()
    for term in merged:
        for noise_term in noise_set.terms:
            if _late(deadline):
                skipped.add(term, noise_term.coefficient[2] * _factor_mass(noise_term))
                continue
            try:
                queries.append(_noise_query(wrapped, term, noise_term, features, dimension,
                                            deadline))
            except (DeadlineReached, InexactShift):
                skipped.add(term, noise_term.coefficient[2] * _factor_mass(noise_term))
    return _with_lost(_points_only(queries, finite_sum),
                      termset.lost + noise_set.lost + skipped.total)


def _noise_query(wrapped: PiecewiseAffineModel, term: Term, noise_term: Term,
                 features: list[int], dimension: int, deadline: float = math.inf) -> Query:
    """One (prior term, noise term) query: the prior's free columns, then the noise's
    continuous columns as integration coordinates; a discrete noise value shifts its feature
    in the second copy by a constant (a point query when nothing is left to integrate)."""
    free = [j for j in range(dimension) if j not in term.atoms]
    moving = [p for p in range(len(features)) if p not in noise_term.atoms]
    width = len(free) + len(moving)
    offset = _offset(term, dimension)
    moved = _shifted(offset, noise_term, features)
    coefficient = times(term.coefficient, noise_term.coefficient)
    if width == 0:
        return point_query([point_placement(wrapped, offset), point_placement(wrapped, moved)],
                           Disagreement(), coefficient)
    index = {j: k for k, j in enumerate(free)}
    layout = _place(term, index, width)
    coordinate = {p: len(free) + k for k, p in enumerate(moving)}
    shifted_noise = Term(noise_term.coefficient, {}, [
        PolyFactor(tuple(coordinate[p] for p in f.positions), f.pieces)
        for f in noise_term.poly], {coordinate[p]: d for p, d in noise_term.densities.items()})
    noise_layout = _place(shifted_noise, {k: k for k in coordinate.values()}, width)
    lower = np.where(np.isfinite(layout.lower), layout.lower, noise_layout.lower)
    upper = np.where(np.isfinite(layout.upper), layout.upper, noise_layout.upper)
    envelopes = tuple(layout.envelopes + noise_layout.envelopes)
    roots, mass_bound = build_roots(width, layout.factors + noise_layout.factors, lower, upper,
                                    deadline=deadline, envelopes=envelopes)
    first = np.zeros((dimension, width))
    for j, k in index.items():
        first[j, k] = 1.0
    shifted = first.copy()
    for p, k in coordinate.items():
        shifted[features[p], k] = 1.0
    lost = (layout.lost * noise_term.coefficient[2] * _factor_mass(noise_term)
            + noise_layout.lost * term.coefficient[2] * _factor_mass(term))
    return Query(width, roots, [Placement(wrapped, first, offset),
                                Placement(wrapped, shifted, moved)],
                 Disagreement(), coefficient, envelopes, lost, mass_bound=mass_bound)


class InexactShift(Exception):
    """A discrete noise value added to a fixed value has no float64 equal to the real sum."""


def _shifted(offset: np.ndarray, noise_term: Term, features: list[int]) -> np.ndarray:
    """``offset`` with each discrete noise value of ``noise_term`` added to its feature, each
    sum exactly the real one; :class:`InexactShift` otherwise (a float atom moved off the
    float grid, e.g. 0.1 + 0.2): a model read at the rounded sum could fall on the other side
    of a boundary, so the caller keeps the pair's mass as lost (possibly violating, the
    interval widens) instead of deciding it at the wrong point. Integers and shifts of a
    free column (offset 0) are always exact."""
    moved = offset.copy()
    for p, value in noise_term.atoms.items():
        total, error = two_sum(np.float64(offset[features[p]]), np.float64(value))
        if error != 0:
            raise InexactShift(f"{offset[features[p]]!r} + {value!r} is not a float64")
        moved[features[p]] = total
    return moved


def _check_noise(prior: Prior, noise: Distribution | None, features: list[int],
                 dimension: int, noise_in_codes: bool) -> None:
    """Refuse a missing noise, bad feature indices, a noise population that codes its own
    columns, and shifts (point masses of the noise) on a coded column of the prior unless
    ``noise_in_codes`` says they are code shifts already
    (:func:`verifier.audits.coded_values.noise_in_codes`,
    which the ``--noise`` verb applies): a shift in the data's units added to a code would
    move the input elsewhere. Checked before the prior is expanded, so that no path (box
    branching included) reads a shift as a code shift."""
    if noise is None:
        raise WMIInputError("noise robustness needs a noise distribution")
    if len(set(features)) != len(features) or not features or \
            not all(0 <= f < dimension for f in features):
        raise WMIInputError(f"noise features {features} must be distinct indices in "
                            f"0..{dimension - 1}")
    if getattr(getattr(noise, "feature_schema", None), "coded", False):
        raise WMIInputError("the noise population codes columns (value = offset + step·k): "
                            "its codes would be added as the shifts; write the noise's values "
                            "without a step or offset")
    shifting = [f for f, atomless in zip(features, noise.atomless_columns(), strict=False)
                if not atomless]  # a density noise is refused on any discrete column later
    coded = [] if noise_in_codes else _coded_columns(prior, shifting)
    if coded:
        raise WMIInputError(f"{', '.join(coded)} is a coded column of the population (value = "
                            "offset + step·k): the noise's shifts in the data's units would be "
                            "added to its codes; write them as code shifts first "
                            "(verifier.audits.coded_values.noise_in_codes, which "
                            "`certgate verify noise-robustness --noise` applies)")


def _coded_columns(prior: Prior, features: list[int]) -> list[str]:
    """The names of the ``features`` (input positions) that ``prior`` codes (value
    ``offset + step·k``); empty for a prior without a schema."""
    schema = getattr(prior, "feature_schema", None)
    if schema is None:
        return []
    columns = schema.columns
    return [columns[f] for f in features
            if f < len(columns) and schema.feature_of(columns[f]).coded]


def noise_robustness(model: Any, prior: Prior, noise: Distribution, features: list[int], *,
                     stop_at: float | None = None, executor: Executor | None = None,
                     bound_method: str = "crown", timeout_s: float | None = None,
                     tolerance: float = DEFAULT_TOLERANCE, noise_in_codes: bool = False
                     ) -> WMIResult:
    """``P(c(x) = c(x + n))`` with ``x ~ prior`` and ``n ~ noise`` added to ``features``
    (Eq. 10); ``noise`` has dimension ``len(features)``: a density (piecewise polynomial, or
    normal-type: then the result is a certified interval) or discrete values (each shifts its
    feature by a constant). A discrete feature of the prior takes discrete noise only (a
    density would move it off its values); on a coded column of the prior the shifts must be
    code shifts, said by ``noise_in_codes`` (:func:`_check_noise`). A shifted fixed value
    whose sum float64 cannot hold keeps its pair's mass as lost (:func:`_shifted`)."""
    engine = _engine(stop_at, executor, bound_method, timeout_s, tolerance)
    try:
        queries = noise_robustness_queries(model, prior, noise, features, bound_method,
                                           deadline=engine["deadline"],
                                           max_roots=_root_limit(model),
                                           noise_in_codes=noise_in_codes)
    except AllDiscrete:
        if branched.branchable(model):
            return branched.noise_robustness(model, prior, noise, features, engine=engine)
        return _finite_sum(noise_robustness_queries(
            model, prior, noise, features, bound_method, finite_sum=True,
            noise_in_codes=noise_in_codes), engine)
    except NotEnumerable:
        if not branched.branchable(model):
            raise
        return branched.noise_robustness(model, prior, noise, features,
                                         engine=engine)
    return _solve(queries, engine)
