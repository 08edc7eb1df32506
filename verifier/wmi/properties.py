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

from verifier.causal.witness import certified_classes
from verifier.network import Network, head_error
from verifier.numerics import EPS, FUNCTION_REL_MARGIN, scaled_down, scaled_up
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
    point_sum,
    solve,
)
from verifier.wmi.marginals import Density1D
from verifier.wmi.polynomial import constant
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


def _point_classes(model: PiecewiseAffineModel, points: np.ndarray) -> np.ndarray:
    """The class of each point (argmax, ties to the lowest index), ``-1`` where it is not
    decided: a network's in real arithmetic (:func:`~verifier.causal.witness.certified_classes`,
    ties included), a tree's or forest's by its reference scores
    (:meth:`~verifier.wmi.trees.ForestModel.predict_scores`, as its leaves are encoded)."""
    if isinstance(model, NetworkModel):
        return certified_classes(model.network, points)
    if isinstance(model, ForestModel):
        return np.argmax(model.predict_scores(points), axis=1)
    raise WMIInputError(f"cannot classify points with a {type(model).__name__}")


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
            mass = sum(_piece_mass(piece) for piece in factor.pieces)
            low = scaled_down(low * mass, FUNCTION_REL_MARGIN)
            high = scaled_up(high * mass, FUNCTION_REL_MARGIN)
    return low, high


def _piece_mass(piece: WeightPiece) -> float:
    total = 0.0
    for exponents, coefficient in piece.polynomial.items():
        value = coefficient
        for e, low, high in zip(exponents, piece.lower, piece.upper, strict=True):
            value *= (high ** (e + 1) - low ** (e + 1)) / (e + 1)
        total += value
    return total


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
                         max_roots: int | None = None) -> list[Query]:
    """One query per (merged) term whose atoms lie in the precondition box. Terms reached
    after ``deadline`` are left out as ``lost`` mass (:func:`_late`); :class:`TooManyRoots`
    when the pieces meeting the box make more than ``max_roots`` roots."""
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
            raise AllDiscrete("every input column is discrete: nothing to integrate")
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
        offset = np.zeros(dimension)
        for j, v in term.atoms.items():
            offset[j] = v
        placements = [Placement(model, embed, offset) for model in models]
        queries.append(Query(len(free), roots, placements, violation, term.coefficient,
                             tuple(layout.envelopes), layout.lost, mass_bound=mass_bound))
    return _with_lost(queries, termset.lost + skipped.total)


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
                             deadline: float = math.inf, max_roots: int | None = None
                             ) -> tuple[list[Query], int]:
    """The queries of :func:`local_robustness` and the expected class checked;
    :class:`TooManyRoots` when the prior's pieces meeting the ε-box make more than
    ``max_roots`` roots."""
    wrapped = as_model(model, bound_method)
    point = np.asarray(center, dtype=np.float64).reshape(-1)
    termset = _termset(prior, _input_size(wrapped))
    chosen = _predicted(wrapped, point) if expected_class is None else int(expected_class)
    box_lo, box_hi = _ball(termset, point, epsilon)
    return _single_copy_queries([wrapped], termset, point.size, box_lo, box_hi,
                                OtherClass(chosen), deadline=deadline,
                                max_roots=max_roots), chosen


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
    except NotEnumerable as error:
        whole_points = isinstance(error, AllDiscrete) and not branched.branchable(model)
        if not (whole_points or branched.branchable(model)):
            raise
        point = np.asarray(center, dtype=np.float64).reshape(-1)
        chosen = _predicted(as_model(model, bound_method), point) if expected_class is None \
            else int(expected_class)
        radius = _radius(epsilon)
        if whole_points:
            result = point_local_robustness(model, prior, point, epsilon, chosen, bound_method)
        else:
            result = branched.local_robustness(model, prior, point - radius,
                                               point + radius, chosen, engine=engine)
        result.extra["expected_class"] = chosen
        return result
    result = _solve(queries, engine)
    result.extra["expected_class"] = chosen
    return result


def equivalence_queries(model: Any, surrogate: Any, prior: Prior, center: Any = None,
                        epsilon: float | np.ndarray | None = None, bound_method: str = "crown", *,
                        deadline: float = math.inf, max_roots: int | None = None
                        ) -> list[Query]:
    """The queries of :func:`equivalence`; :class:`TooManyRoots` when the prior's pieces
    (meeting the ε-box, if any) make more than ``max_roots`` roots."""
    first, second = as_model(model, bound_method), as_model(surrogate, bound_method)
    termset = _termset(prior, _input_size(first, second))
    box_lo, box_hi = _ball(termset, center, epsilon)
    return _single_copy_queries([first, second], termset, termset.dimension, box_lo, box_hi,
                                Disagreement(), deadline=deadline, max_roots=max_roots)


def _prior_points(termset: TermSet, box_lo: np.ndarray, box_hi: np.ndarray
                  ) -> tuple[list[Coefficient], np.ndarray]:
    """The coefficients and points of the prior's terms inside ``[box_lo, box_hi]`` when
    every term fixes every column (all columns discrete).

    Raises:
        AllDiscrete: some terms fix every column and others leave one free (a mixed prior,
            which neither the region enumeration nor a finite sum covers).
    """
    terms = [term for term in termset.terms if _atoms_inside(term, box_lo, box_hi)]
    dimension = termset.dimension
    if any(len(term.atoms) < dimension for term in terms):
        raise AllDiscrete("some prior terms fix every column and others leave one free: "
                          "neither a region enumeration nor a finite sum covers them")
    points = np.array([[term.atoms[j] for j in range(dimension)] for term in terms],
                      dtype=np.float64).reshape(len(terms), dimension)
    return [term.coefficient for term in terms], points


def _finite_sum(coefficients: list[Coefficient], violating: list[tuple[float, float]],
                lost: float, started: float) -> WMIResult:
    result = point_sum(coefficients, violating, lost, started)
    result.extra["method"] = "finite sum over the prior's points"
    return result


def point_equivalence(model: Any, surrogate: Any, prior: Prior, center: Any = None,
                      epsilon: float | np.ndarray | None = None,
                      bound_method: str = "crown") -> WMIResult:
    """:func:`equivalence` on a prior whose every term fixes every column (all columns
    discrete): a finite sum over the prior's points (in the ε-box, if any), each point's
    two classes decided as :func:`_point_classes` says (a network's ties included); a point
    a class of which is not decided counts as possibly violating. :class:`AllDiscrete` for
    a mixed prior (:func:`_prior_points`)."""
    started = time.perf_counter()
    first, second = as_model(model, bound_method), as_model(surrogate, bound_method)
    termset = _termset(prior, _input_size(first, second))
    coefficients, points = _prior_points(termset, *_ball(termset, center, epsilon))
    one, two = _point_classes(first, points), _point_classes(second, points)
    violating = [(0.0, 1.0) if a < 0 or b < 0 else (1.0, 1.0) if a != b else (0.0, 0.0)
                 for a, b in zip(one.tolist(), two.tolist(), strict=True)]
    return _finite_sum(coefficients, violating, termset.lost, started)


def point_local_robustness(model: Any, prior: Prior, center: Any, epsilon: float | np.ndarray,
                           expected_class: int, bound_method: str = "crown") -> WMIResult:
    """:func:`local_robustness` on a prior whose every term fixes every column: a finite
    sum over the prior's points in the ε-box, as :func:`point_equivalence`."""
    started = time.perf_counter()
    wrapped = as_model(model, bound_method)
    termset = _termset(prior, _input_size(wrapped))
    coefficients, points = _prior_points(termset, *_ball(termset, center, epsilon))
    violating = [(0.0, 1.0) if c < 0 else (0.0, 0.0) if c == expected_class else (1.0, 1.0)
                 for c in _point_classes(wrapped, points).tolist()]
    return _finite_sum(coefficients, violating, termset.lost, started)


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
            return point_equivalence(model, surrogate, prior, center, epsilon, bound_method)
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


def _copy_marginal(termset: TermSet, feature: int) -> tuple[list[WeightPiece] | None,
                                                           Density1D | None]:
    """The marginal of column ``feature`` over all terms, for the second copy ``x′_i``:
    exact pieces when every part is polynomial, else a :class:`Density1D`."""
    terms = termset.terms
    densities = [t.densities.get(feature) for t in terms]
    if all(d is not None for d in densities) and not all(d.polynomial() for d in densities):
        components = []
        for term, density in zip(terms, densities, strict=True):
            rest_lo, rest_hi = _factor_masses(term, feature)
            components.extend(density.scaled(term.coefficient[0] * rest_lo,
                                             term.coefficient[2] * rest_hi).components)
        return None, Density1D(tuple(components))
    if any(d is not None and not d.polynomial() for d in densities):
        raise WMIInputError(f"column {termset.name(feature)!r} mixes a multi-column "
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
    return pieces, None


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
                         deadline: float = math.inf, max_roots: int | None = None
                         ) -> list[Query]:
    """The queries of :func:`monotonicity` (terms reached after ``deadline`` left out as
    ``lost`` mass, :func:`_late`); :class:`TooManyRoots` beyond ``max_roots`` roots."""
    wrapped = as_model(model, bound_method, values=output is not None)
    dimension = _input_size(wrapped)
    if not 0 <= feature < dimension:
        raise WMIInputError(f"feature index {feature} is outside 0..{dimension - 1}")
    termset = _termset(prior, dimension)
    if not use_prior:
        termset = uniform_terms(prior, termset)
    violation = LostFavorable(favorable_class) if output is None else Decrease(output)
    if feature in termset.discrete_columns():
        return _with_lost(_discrete_monotonicity_queries(wrapped, termset, feature, decreasing,
                                                         violation, deadline, max_roots),
                          2 * termset.lost)
    copy_pieces, copy_density = _copy_marginal(termset, feature)
    merged = _merge(termset.terms, read_columns(wrapped))
    extra = 1 if copy_pieces is None else len(copy_pieces)
    _check_roots((_roots(term, dimension) * extra for term in merged), max_roots)
    queries: list[Query] = []
    skipped = _SkippedMass()
    copies = math.nan  # the second copy's mass, bounded when a term is first left out
    for term in merged:
        if _late(deadline):
            copies = _prior_mass(termset) if math.isnan(copies) else copies
            skipped.add(term, copies)
            continue
        free = [j for j in range(dimension) if j not in term.atoms]
        index = {j: k for k, j in enumerate(free)}
        width = len(free) + 1
        layout = _place(term, index, width)
        copy = width - 1
        if copy_pieces is not None:
            layout.factors.append(WeightFactor([copy], copy_pieces))
            layout.lower[copy] = min(p.lower[0] for p in copy_pieces)
            layout.upper[copy] = max(p.upper[0] for p in copy_pieces)
        else:
            _place_density(feature, copy, copy_density, layout.factors, layout.envelopes,
                           layout.lower, layout.upper)
            layout.lost += term.coefficient[2] * _factor_mass(term) * _tail(copy_density)
        order = np.zeros((1, width))
        mine = index[feature]
        order[0, mine], order[0, copy] = (-1.0, 1.0) if decreasing else (1.0, -1.0)
        try:
            roots, mass_bound = build_roots(width, layout.factors, layout.lower,
                                            layout.upper, order, np.zeros(1), deadline,
                                            tuple(layout.envelopes))
        except DeadlineReached:
            copies = _prior_mass(termset) if math.isnan(copies) else copies
            skipped.add(term, copies)
            continue
        first = np.zeros((dimension, width))
        for j, k in index.items():
            first[j, k] = 1.0
        second = first.copy()
        second[feature, mine] = 0.0
        second[feature, copy] = 1.0
        offset = np.zeros(dimension)
        for j, v in term.atoms.items():
            offset[j] = v
        placements = [Placement(wrapped, first, offset), Placement(wrapped, second, offset)]
        queries.append(Query(width, roots, placements, violation, term.coefficient,
                             tuple(layout.envelopes), layout.lost, mass_bound=mass_bound))
    return _with_lost(queries, 2 * termset.lost + skipped.total)


def _prior_mass(termset: TermSet) -> float:
    """Upper bound of the total mass of the terms (1 up to rounding)."""
    skipped = _SkippedMass()
    for term in termset.terms:
        skipped.add(term)
    return skipped.total


def _value_marginal(termset: TermSet, feature: int) -> dict[float, Coefficient]:
    """``P(x_feature = v)`` for every value ``v`` of a discrete column, as enclosures: the sum
    of the coefficients of the terms fixing ``v``, each times the mass of its continuous
    factors (outward-rounded)."""
    sums: dict[float, list[float]] = {}
    for term in termset.terms:
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


def _discrete_monotonicity_queries(wrapped: PiecewiseAffineModel, termset: TermSet,
                                   feature: int, decreasing: bool, violation: Any,
                                   deadline: float = math.inf, max_roots: int | None = None
                                   ) -> list[Query]:
    """Monotonicity in a discrete (binary or integer) column: one query per (merged) prior
    term ``x`` and value ``v′`` of the feature's marginal with ``x_i < v′`` (``>`` when
    ``decreasing``); both copies share the term's continuous coordinates and differ only in
    the feature's fixed value, weighted by ``P(x_i′ = v′)``. Pairs with equal values cannot
    violate the property and are left out of the precondition, as the measure-zero diagonal
    is in the continuous case. :class:`TooManyRoots` when the queries would enumerate more
    than ``max_roots`` roots (a term's roots once per other value)."""
    if any(feature in group for group in termset.groups):
        raise WMIInputError(f"monotonicity needs an ordered feature; column "
                            f"{termset.name(feature)!r} belongs to a one-hot group")
    marginal = _value_marginal(termset, feature)
    dimension = termset.dimension

    def larger_values(term: Term) -> list[tuple[float, Coefficient]]:
        value = term.atoms[feature]
        return [(v, c) for v, c in sorted(marginal.items())
                if (v < value if decreasing else v > value) and c[2] > 0]

    merged = _merge(termset.terms, read_columns(wrapped) | {feature})
    _check_roots((_roots(term, dimension) * len(larger_values(term)) for term in merged),
                 max_roots)
    queries: list[Query] = []
    skipped = _SkippedMass()
    for term in merged:
        larger = larger_values(term)
        if not larger:
            continue
        if _late(deadline):
            skipped.add(term, sum(c[2] for _, c in larger))
            continue
        free = [j for j in range(dimension) if j not in term.atoms]
        if not free:
            raise AllDiscrete("every input column is discrete: nothing to integrate")
        index = {j: k for k, j in enumerate(free)}
        layout = _place(term, index, len(free))
        try:
            roots, mass_bound = build_roots(len(free), layout.factors, layout.lower,
                                            layout.upper, deadline=deadline,
                                            envelopes=tuple(layout.envelopes))
        except DeadlineReached:
            skipped.add(term, sum(c[2] for _, c in larger))
            continue
        embed = np.eye(dimension)[:, free]
        offset = np.zeros(dimension)
        for j, v in term.atoms.items():
            offset[j] = v
        for other, weight in larger:
            moved = offset.copy()
            moved[feature] = other
            placements = [Placement(wrapped, embed, offset), Placement(wrapped, embed, moved)]
            queries.append(Query(len(free), roots, placements, violation,
                                 times(term.coefficient, weight), tuple(layout.envelopes),
                                 layout.lost * weight[2], mass_bound=mass_bound))
    if not queries and not skipped.total:
        raise WMIInputError(f"column {termset.name(feature)!r} takes a single value: no pair "
                            "differs in it")
    return _with_lost(queries, skipped.total)


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
    one-hot group is refused.
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
        return point_monotonicity(model, prior, feature, decreasing=decreasing,
                                  favorable_class=favorable_class, use_prior=use_prior,
                                  bound_method=bound_method)
    except NotEnumerable:
        if not branched.branchable(model):
            raise
        return branched.monotonicity(model, prior, feature, decreasing=decreasing,
                                     favorable_class=favorable_class, output=output,
                                     use_prior=use_prior,
                                     engine=engine)
    return _solve(queries, engine)


def point_monotonicity(model: Any, prior: Prior, feature: int, *, decreasing: bool = False,
                       favorable_class: int = 1, use_prior: bool = False,
                       bound_method: str = "crown") -> WMIResult:
    """:func:`monotonicity` of a classifier on a prior whose every term fixes every column:
    a finite sum over the pairs the discrete form compares (each point ``x`` and each value
    ``v′`` of the feature with ``x_i < v′``, ``>`` when ``decreasing``, weighted by the term's
    coefficient times ``P(x_i′ = v′)``), the classes decided as :func:`_point_classes` says.
    :class:`AllDiscrete` for a mixed prior (:func:`_prior_points`)."""
    started = time.perf_counter()
    wrapped = as_model(model, bound_method)
    dimension = _input_size(wrapped)
    termset = _termset(prior, dimension)
    if not use_prior:
        termset = uniform_terms(prior, termset)
    if any(feature in group for group in termset.groups):
        raise WMIInputError(f"monotonicity needs an ordered feature; column "
                            f"{termset.name(feature)!r} belongs to a one-hot group")
    everywhere = np.full(dimension, np.inf)
    weights, points = _prior_points(termset, -everywhere, everywhere)
    marginal = _value_marginal(termset, feature)
    coefficients: list[Coefficient] = []
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    for weight, point in zip(weights, points, strict=True):
        for value, share in sorted(marginal.items()):
            if share[2] > 0 and (value < point[feature] if decreasing
                                 else value > point[feature]):
                moved = point.copy()
                moved[feature] = value
                coefficients.append(times(weight, share))
                pairs.append((point, moved))
    if not pairs:
        raise WMIInputError(f"column {termset.name(feature)!r} takes a single value: no pair "
                            "differs in it")
    first = _point_classes(wrapped, np.array([pair[0] for pair in pairs]))
    second = _point_classes(wrapped, np.array([pair[1] for pair in pairs]))
    violating = [(0.0, 1.0) if a < 0 or b < 0
                 else (1.0, 1.0) if a == favorable_class and b != favorable_class
                 else (0.0, 0.0)
                 for a, b in zip(first.tolist(), second.tolist(), strict=True)]
    return _finite_sum(coefficients, violating, 2 * termset.lost, started)


def noise_robustness_queries(model: Any, prior: Prior, noise: Distribution | None,
                             features: list[int], bound_method: str = "crown", *,
                             deadline: float = math.inf, max_roots: int | None = None
                             ) -> list[Query]:
    """The queries of :func:`noise_robustness` (pairs reached after ``deadline`` left out
    as ``lost`` mass, :func:`_late`); :class:`TooManyRoots` beyond ``max_roots`` roots."""
    wrapped = as_model(model, bound_method)
    dimension = _input_size(wrapped)
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
    coded = _coded_columns(prior, features)
    if coded:
        raise WMIInputError(f"{', '.join(coded)} is a coded column of the population (value = "
                            "offset + step·k): the noise's values would be added to its codes; "
                            "noise on a coded column is not supported")
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
            except DeadlineReached:
                skipped.add(term, noise_term.coefficient[2] * _factor_mass(noise_term))
    return _with_lost(queries, termset.lost + noise_set.lost + skipped.total)


def _noise_query(wrapped: PiecewiseAffineModel, term: Term, noise_term: Term,
                 features: list[int], dimension: int, deadline: float = math.inf) -> Query:
    """One (prior term, noise term) query: the prior's free columns, then the noise's
    continuous columns as integration coordinates; a discrete noise value shifts its feature
    in the second copy by a constant."""
    free = [j for j in range(dimension) if j not in term.atoms]
    moving = [p for p in range(len(features)) if p not in noise_term.atoms]
    width = len(free) + len(moving)
    if width == 0:
        raise AllDiscrete("every input column and the noise are discrete: nothing to "
                          "integrate")
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
    offset = np.zeros(dimension)
    for j, v in term.atoms.items():
        offset[j] = v
    moved = offset.copy()
    for p, value in noise_term.atoms.items():
        moved[features[p]] += value
    coefficient = times(term.coefficient, noise_term.coefficient)
    lost = (layout.lost * noise_term.coefficient[2] * _factor_mass(noise_term)
            + noise_layout.lost * term.coefficient[2] * _factor_mass(term))
    return Query(width, roots, [Placement(wrapped, first, offset),
                                Placement(wrapped, shifted, moved)],
                 Disagreement(), coefficient, envelopes, lost, mass_bound=mass_bound)


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
                     tolerance: float = DEFAULT_TOLERANCE) -> WMIResult:
    """``P(c(x) = c(x + n))`` with ``x ~ prior`` and ``n ~ noise`` added to ``features``
    (Eq. 10); ``noise`` has dimension ``len(features)``: a density (piecewise polynomial, or
    normal-type: then the result is a certified interval) or discrete values (each shifts its
    feature by a constant). A discrete feature of the prior takes discrete noise only (a
    density would move it off its values)."""
    engine = _engine(stop_at, executor, bound_method, timeout_s, tolerance)
    try:
        queries = noise_robustness_queries(model, prior, noise, features, bound_method,
                                           deadline=engine["deadline"],
                                           max_roots=_root_limit(model))
    except AllDiscrete:
        if branched.branchable(model):
            return branched.noise_robustness(model, prior, noise, features, engine=engine)
        return point_noise_robustness(model, prior, noise, features, bound_method)
    except NotEnumerable:
        if not branched.branchable(model):
            raise
        return branched.noise_robustness(model, prior, noise, features,
                                         engine=engine)
    return _solve(queries, engine)


def point_noise_robustness(model: Any, prior: Prior, noise: Distribution, features: list[int],
                           bound_method: str = "crown") -> WMIResult:
    """:func:`noise_robustness` on a prior and a noise whose every term fixes every column
    (all discrete; the arguments as :func:`noise_robustness_queries` accepted them): a finite
    sum over the pairs ``(x, x + n)`` of a prior point and a noise value, weighted by the
    product of their coefficients, the classes decided as :func:`_point_classes` says.
    :class:`AllDiscrete` for a mixed prior or noise (:func:`_prior_points`)."""
    started = time.perf_counter()
    wrapped = as_model(model, bound_method)
    termset = _termset(prior, _input_size(wrapped))
    everywhere = np.full(termset.dimension, np.inf)
    weights, points = _prior_points(termset, -everywhere, everywhere)
    noise_set = prior_terms(noise)
    reach = np.full(noise_set.dimension, np.inf)
    noise_weights, shifts = _prior_points(noise_set, -reach, reach)
    coefficients = [times(weight, noise_weight) for weight in weights
                    for noise_weight in noise_weights]
    moved = np.repeat(points, len(shifts), axis=0)
    moved[:, features] += np.tile(shifts, (len(points), 1))
    before = np.repeat(_point_classes(wrapped, points), len(shifts))
    after = _point_classes(wrapped, moved)
    violating = [(0.0, 1.0) if a < 0 or b < 0 else (1.0, 1.0) if a != b else (0.0, 0.0)
                 for a, b in zip(before.tolist(), after.tolist(), strict=True)]
    return _finite_sum(coefficients, violating, termset.lost + noise_set.lost, started)


