"""The audited properties as exact WMI queries (paper 002, Eqs. 5, 6, 9, 10).

Each function returns a :class:`WMIResult` whose ``probability`` is the exact probability that
the property holds (``violation_probability`` its complement), with the number of complete
regions, of integrated polytopes and of LPs, and the elapsed time. ``stop_at = k`` stops as soon
as the violation probability is known to be ``>= k`` (then ``stopped_early`` is set and the
violation probability reported is a lower bound). Models are :class:`verifier.network.Network`
s (a single output is a logit: class 1 iff ``logit >= 0``; several outputs: argmax) or fitted
scikit-learn ``DecisionTreeClassifier`` / ``RandomForestClassifier``.
"""

from __future__ import annotations

import time
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from verifier.network import Network
from verifier.population import PopulationModel
from verifier.population.base import Distribution
from verifier.wmi.encode import (
    Decrease,
    Disagreement,
    LostPositive,
    OtherClass,
    Placement,
    WeightFactor,
    WMIInputError,
    atom_slices,
    density_pieces,
    uniform_pieces,
)
from verifier.wmi.engine import Query, WMIResult, build_roots, solve
from verifier.wmi.regions import NetworkModel, PiecewiseAffineModel
from verifier.wmi.trees import ForestModel

Prior = Distribution | PopulationModel


def as_model(model: Any, bound_method: str = "crown") -> PiecewiseAffineModel:
    """Wrap a network or a fitted scikit-learn tree / forest classifier."""
    if isinstance(model, PiecewiseAffineModel):
        return model
    if isinstance(model, Network):
        return NetworkModel(model, bound_method)
    return ForestModel(model)


def _prior_pieces(prior: Prior, dimension: int) -> tuple[list, np.ndarray, np.ndarray]:
    pieces = density_pieces(prior)
    if not pieces:
        raise WMIInputError("the prior has no positive piece")
    if pieces[0].lower.size != dimension:
        raise WMIInputError(
            f"the prior has {pieces[0].lower.size} columns, the model {dimension} inputs"
        )
    lower = np.min([piece.lower for piece in pieces], axis=0)
    upper = np.max([piece.upper for piece in pieces], axis=0)
    return pieces, lower, upper


def _identity(dimension: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    return np.eye(dimension, width), np.zeros(dimension)


def _ball(lower: np.ndarray, upper: np.ndarray, center: Any, epsilon: float | None
          ) -> tuple[np.ndarray, np.ndarray]:
    if center is None:
        return lower.copy(), upper.copy()
    point = np.asarray(center, dtype=np.float64).reshape(-1)
    if point.size != lower.size:
        raise WMIInputError(f"the centre has {point.size} coordinates, expected {lower.size}")
    if epsilon is None or not epsilon > 0:
        raise WMIInputError(f"epsilon must be > 0, got {epsilon}")
    return point - epsilon, point + epsilon


def _predicted(model: PiecewiseAffineModel, point: np.ndarray) -> int:
    if isinstance(model, NetworkModel):
        out = model.network.evaluate(point[None])[0]
        return int(out[0] >= 0) if out.size == 1 else int(np.argmax(out))
    if isinstance(model, ForestModel):
        return int(np.argmax(model.predict_scores(point[None])[0]))
    raise WMIInputError("give the expected label explicitly for this model type")


def _sliced_queries(models: list[PiecewiseAffineModel], prior: Prior, dimension: int,
                    center: Any, epsilon: float | None, violation: Any,
                    keep: Any = None) -> list[Query]:
    """One dimension-preserving query per value of the prior's discrete columns (inside the
    ε-box, and accepted by ``keep(values)`` when given)."""
    pieces, lower, upper = _prior_pieces(prior, dimension)
    box_lo, box_hi = _ball(lower, upper, center, epsilon)
    discrete, slices = atom_slices(pieces)
    if len(discrete) == dimension:
        raise WMIInputError("every input column is discrete: nothing to integrate")
    queries = []
    for part in slices:
        values = part.values
        if np.any(values < box_lo[discrete]) or np.any(values > box_hi[discrete]):
            continue
        if keep is not None and not keep(values, discrete):
            continue
        width = len(part.free)
        roots = build_roots(width, [WeightFactor(list(range(width)), part.pieces)],
                            box_lo[part.free], box_hi[part.free])
        placements = [Placement(model, part.embed, part.offset) for model in models]
        queries.append(Query(width, roots, placements, violation))
    return queries


def _continuous_only(prior: Prior, dimension: int, what: str) -> None:
    discrete, _ = atom_slices(_prior_pieces(prior, dimension)[0])
    if discrete:
        raise WMIInputError(f"{what} needs a prior without discrete columns (columns "
                            f"{discrete} are discrete)")


def local_robustness(model: Any, prior: Prior, center: Any, epsilon: float,
                     label: int | None = None, *, stop_at: float | None = None,
                     executor: Executor | None = None, bound_method: str = "crown"
                     ) -> WMIResult:
    """``P(class(x) = label | ‖x − center‖∞ <= ε)`` under ``prior`` (Eq. 5); the label
    defaults to the model's prediction at the centre. Discrete prior columns are summed."""
    wrapped = as_model(model, bound_method)
    point = np.asarray(center, dtype=np.float64).reshape(-1)
    chosen = _predicted(wrapped, point) if label is None else int(label)
    queries = _sliced_queries([wrapped], prior, point.size, point, epsilon, OtherClass(chosen))
    result = solve(queries, stop_at, executor)
    result.extra["label"] = chosen
    return result


def equivalence(model: Any, surrogate: Any, prior: Prior, center: Any = None,
                epsilon: float | None = None, *, stop_at: float | None = None,
                executor: Executor | None = None, bound_method: str = "crown") -> WMIResult:
    """``P(c₁(x) = c₂(x))`` under ``prior``, globally or in the ε-box around ``center``
    (Eq. 6). Discrete prior columns are summed."""
    first, second = as_model(model, bound_method), as_model(surrogate, bound_method)
    dimension = _input_size(first, second)
    queries = _sliced_queries([first, second], prior, dimension, center, epsilon,
                              Disagreement())
    return solve(queries, stop_at, executor)


@dataclass
class ParityResult:
    """Exact demographic parity: ``ratio = p_unprivileged / p_privileged``."""

    ratio: float
    p_unprivileged: float
    p_privileged: float
    regions: int
    integrals: int
    elapsed_s: float


def demographic_parity(model: Any, prior: Prior, protected: int, privileged: float,
                       favorable_class: int, *, executor: Executor | None = None,
                       bound_method: str = "crown") -> ParityResult:
    """``P(class = fav | x_p ≠ V) / P(class = fav | x_p = V)`` (Eq. 8) for a discrete
    protected column ``p`` and privileged value ``V``."""
    wrapped = as_model(model, bound_method)
    dimension = _input_size(wrapped)
    started = time.perf_counter()
    discrete, _ = atom_slices(_prior_pieces(prior, dimension)[0])
    if protected not in discrete:
        raise WMIInputError(f"the protected column {protected} must be discrete in the prior "
                            f"(discrete columns: {discrete})")
    where = discrete.index(protected)
    shares, regions, integrals = [], 0, 0
    for in_group in (False, True):
        queries = _sliced_queries(
            [wrapped], prior, dimension, None, None, OtherClass(favorable_class),
            keep=lambda values, _columns, g=in_group: (values[where] == privileged) == g)
        if not queries:
            raise WMIInputError(f"the {'privileged' if in_group else 'unprivileged'} group "
                                "has probability zero under the prior")
        result = solve(queries, None, executor)
        shares.append(result.probability)
        regions += result.regions
        integrals += result.integrals
    ratio = shares[0] / shares[1] if shares[1] > 0 else float("inf")
    return ParityResult(ratio, shares[0], shares[1], regions, integrals,
                        time.perf_counter() - started)


def _input_size(*models: PiecewiseAffineModel) -> int:
    sizes = {model.network.input_size if isinstance(model, NetworkModel) else model.input_size
             for model in models}
    if len(sizes) != 1:
        raise WMIInputError(f"the models read different numbers of inputs: {sorted(sizes)}")
    return sizes.pop()


def monotonicity(model: Any, prior: Prior, feature: int, *, decreasing: bool = False,
                 positive_class: int = 1, output: int | None = None,
                 use_prior: bool = False, stop_at: float | None = None,
                 executor: Executor | None = None, bound_method: str = "crown") -> WMIResult:
    """Monotonicity in input ``feature`` by self-composition (Eq. 9): ``x`` and ``x′`` agree
    except on ``feature`` where ``x_i <= x′_i`` (``>=`` when ``decreasing``).

    Classifier (``output`` None): ``P(c(x) = positive ⇒ c(x′) = positive)``. Regressor
    (``output`` given): ``P(f(x)[output] <= f(x′)[output])``. Integration is over
    ``z = (x, x′_i)``: uniform on the prior's support box (the paper's choice) unless
    ``use_prior``, then with weight ``w(x)·w(x′)``.
    """
    wrapped = as_model(model, bound_method)
    dimension = _input_size(wrapped)
    if not 0 <= feature < dimension:
        raise WMIInputError(f"feature index {feature} is outside 0..{dimension - 1}")
    _continuous_only(prior, dimension, "monotonicity")
    pieces, lower, upper = _prior_pieces(prior, dimension)
    width = dimension + 1
    copy = list(range(dimension))
    copy[feature] = dimension
    if use_prior:
        factors = [WeightFactor(list(range(dimension)), pieces), WeightFactor(copy, pieces)]
    else:
        factors = [WeightFactor(list(range(dimension)), uniform_pieces(lower, upper)),
                   WeightFactor([dimension], uniform_pieces(lower[[feature]],
                                                            upper[[feature]]))]
    order = np.zeros((1, width))
    order[0, feature], order[0, dimension] = (-1.0, 1.0) if decreasing else (1.0, -1.0)
    roots = build_roots(width, factors, np.append(lower, lower[feature]),
                        np.append(upper, upper[feature]), order, np.zeros(1))
    second = np.eye(dimension, width)
    second[feature] = 0.0
    second[feature, dimension] = 1.0
    violation = (LostPositive(positive_class) if output is None else Decrease(output))
    placements = [Placement(wrapped, *_identity(dimension, width)),
                  Placement(wrapped, second, np.zeros(dimension))]
    return solve(Query(width, roots, placements, violation), stop_at, executor)


def noise_robustness(model: Any, prior: Prior, noise: Distribution, features: list[int], *,
                     stop_at: float | None = None, executor: Executor | None = None,
                     bound_method: str = "crown") -> WMIResult:
    """``P(c(x) = c(x + n))`` with ``x ~ prior`` and ``n ~ noise`` added to ``features``
    (Eq. 10); ``noise`` must be piecewise polynomial of dimension ``len(features)``."""
    wrapped = as_model(model, bound_method)
    dimension = _input_size(wrapped)
    if len(set(features)) != len(features) or not features or \
            not all(0 <= f < dimension for f in features):
        raise WMIInputError(f"noise features {features} must be distinct indices in "
                            f"0..{dimension - 1}")
    _continuous_only(prior, dimension, "noise robustness")
    pieces, lower, upper = _prior_pieces(prior, dimension)
    noise_pieces, noise_lo, noise_hi = _prior_pieces(noise, len(features))
    if np.any(noise_lo >= noise_hi) or any(np.any(p.lower >= p.upper) for p in noise_pieces):
        raise WMIInputError("the noise needs a density (no point masses); "
                            "use a piecewise-polynomial density")
    width = dimension + len(features)
    factors = [WeightFactor(list(range(dimension)), pieces),
               WeightFactor(list(range(dimension, width)), noise_pieces)]
    roots = build_roots(width, factors, np.concatenate([lower, noise_lo]),
                        np.concatenate([upper, noise_hi]))
    shifted = np.eye(dimension, width)
    for position, feature in enumerate(features):
        shifted[feature, dimension + position] = 1.0
    placements = [Placement(wrapped, *_identity(dimension, width)),
                  Placement(wrapped, shifted, np.zeros(dimension))]
    return solve(Query(width, roots, placements, Disagreement()), stop_at, executor)
