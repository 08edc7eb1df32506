"""Fitting population models from a pandas DataFrame.

* :func:`infer_features` — a feature schema from column dtypes (one-hot groups given); a
  float column with at most ``max_discrete_values`` distinct values that lie exactly on a
  grid ``offset + step·k`` (:func:`grid_code`) is an integer feature with that step and
  offset, whose codes ``k`` (:func:`coded_frame`) every fit below reads.
* :func:`fit_marginal` — one feature's marginal. With ``continuous="histogram"`` (the
  data-shaped, bounded default of :func:`certgate.population_data.fit_population`): a
  continuous feature gets an equal-mass histogram on the data's range (a mixture of uniforms
  and a point mass for every value holding at least ``ATOM_SHARE`` of the rows,
  :func:`fit_continuous_histogram`), an integer feature with more than
  ``max_discrete_values`` distinct values an :class:`IntegerHistogram` on its observed range
  with an atom for every value holding at least ``ATOM_SHARE`` of the rows
  (:func:`fit_integer_histogram`). With ``continuous="normal"``: normal (unbounded domain)
  or truncated normal (maximum likelihood on the domain), and a discretised normal on the
  domain for many-valued integers. Either way integer/binary features with at most
  ``max_discrete_values`` distinct values get their empirical distribution and a one-hot
  group its category frequencies.
* :func:`fit_gaussian_mixture` — a 1-D Gaussian mixture (scikit-learn ``GaussianMixture``);
  on a bounded domain every component is truncated to the domain (an approximation of the
  maximum-likelihood truncated mixture that keeps the support inside the domain).
* :func:`fit_density_tree` — a piecewise-constant density: recursive median splits (widest
  relative edge first) down to ``min_leaf`` points per leaf; leaf density ``count / (n ·
  volume)`` on a bounded box (the domain, or the data's range where the domain is unbounded).
* :func:`fit_product` — an independent product of the above, as a :class:`PopulationModel`.
* :func:`fit_bayesian_network` — a Bayesian network for a given structure: each node gets
  one CPT row per combination of its parents' cells (continuous parents cut at the given
  ``bins``; integer parents at ``value <= bin``; discrete parents per observed value;
  categorical parents per category; a continuous parent's cut on an atom of its rows moves
  to the next float above it), fitted on the rows of the data in that cell. With
  ``sparse_cells="own"`` (the default fit's), a node whose
  pooled fit is its data's frequencies (binary, categorical, few-valued integer) fits every
  cell holding a row on that cell's frequencies, as the data holds them; a node fitted as a
  density needs ``min_rows`` rows. A cell with fewer is fitted on the rows matching its
  condition on its first ``k`` parents, for the largest ``k`` that leaves enough (``k = 0``:
  the node's pooled fit; the learned structure lists the protected attribute first); with
  ``"pooled"`` a cell with fewer than ``min_rows`` rows gets the pooled fit. Pooling
  every sparse cell over all rows erased a small protected group's dependence: a 3 % group's
  favourable rate of 0.29 in the data became the majority's 0.46. Backing off drops a
  parent's dependence too (a 100-row group's income fitted over every job: its favourable
  rate 0.29 in the data became 0.45), so :func:`certgate.population_data.fit_population`
  asks for ``min_rows=1``: every cell holding a row is fitted on its own rows.

A histogram has one bin per ``MIN_BIN_ROWS`` rows (at most ``HISTOGRAM_BINS``): between its
edges it spreads a bin's mass evenly, so the fitted probability of a half-line differs from the
rows' share by about one bin's share at most, ``MIN_BIN_ROWS / rows`` for a cell of fewer than
``HISTOGRAM_BINS · MIN_BIN_ROWS`` rows. With 20 rows a bin, a 50-row cell was two bins whose
uniform tails passed a threshold in the group's upper tail at 0.35 where its rows pass at 0.285.
For the same reason the outer bins are halved towards the ends (:func:`bin_shares`).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Literal

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.stats import truncnorm

from verifier.numerics import up
from verifier.population.base import Distribution
from verifier.population.bayesnet import BayesianNetwork, BayesNode, CPTRow
from verifier.population.bin_refinement import refine_bins, rows_in
from verifier.population.distributions import (
    Categorical,
    Discrete,
    DiscretisedNormal,
    Normal,
    PointMass,
    TruncatedNormal,
    Uniform,
)
from verifier.population.errors import PopulationError
from verifier.population.histogram import IntegerHistogram
from verifier.population.mixture import Mixture
from verifier.population.model import PopulationModel, grid_codes
from verifier.population.piecewise import Leaf, PiecewiseDensity
from verifier.population.product import Factor, Product
from verifier.population.schema import Feature

ContinuousMethod = Literal["histogram", "normal", "gaussian_mixture", "density_tree"]
MAX_DISCRETE_VALUES = 20
HISTOGRAM_BINS = 16
MIN_BIN_ROWS = 5
ATOM_SHARE = 0.05
MAX_GRID_STEPS = 4096
"""The most steps ``(max − min) / step`` a float column's grid may span (:func:`grid_code`)."""
LARGEST_CODE = 2**31
"""A grid through 0 (offset 0) is used only while its codes stay within ±``LARGEST_CODE``."""
LARGEST_EXACT_INTEGER = 2**53


def grid_code(distinct: np.ndarray) -> tuple[float, float] | None:
    """``(step, offset)`` of the coarsest grid holding every value of ``distinct`` (sorted,
    distinct, finite float64 values) exactly in real arithmetic — each value is
    ``offset + step·k`` for an integer ``k`` — or ``None`` when there is none of at most
    :data:`MAX_GRID_STEPS` steps whose step is a float.

    The step is the greatest common divisor of the values' differences, taken in exact
    rationals (floats are dyadic, so it exists); the offset is 0 when the values are integer
    multiples of the step (codes within ±:data:`LARGEST_CODE`), else the least value. Values
    that are all integers give ``(1, 0)``: the integers themselves, as an integer column
    holding them is read; one other value gives ``(1, value)``."""
    values = [Fraction(float(value)) for value in distinct]
    low = values[0]
    if all(value.denominator == 1 for value in values):
        return 1.0, 0.0
    if len(values) == 1:
        return 1.0, float(low)
    common = math.lcm(*(value.denominator for value in values))
    step = Fraction(math.gcd(*(int((value - low) * common) for value in values[1:])), common)
    if Fraction(float(step)) != step or (values[-1] - low) / step > MAX_GRID_STEPS:
        return None
    first = low / step
    if first.denominator == 1 and abs(first) <= LARGEST_CODE:
        return float(step), 0.0
    return float(step), float(low)


def _grid_feature(name: str, series: pd.Series, domain: tuple[float | None, float | None] | None,
                  max_discrete_values: int) -> Feature | None:
    """The integer (or binary) feature of a float column on a grid (:func:`grid_code`) with
    at most ``max_discrete_values`` distinct values, its ``domain`` (data units) turned into
    codes; ``None`` when the column is not such a one."""
    distinct = np.unique(series.to_numpy(dtype=np.float64))
    if not np.isfinite(distinct).all() or not 1 <= distinct.size <= max_discrete_values:
        return None
    code = grid_code(distinct)
    if code is None:
        return None
    step, offset = code
    if code == (1.0, 0.0):
        kind = "binary" if set(distinct.tolist()) <= {0.0, 1.0} else "integer"
        return Feature(name=name, kind=kind, domain=_code_domain(domain, step, offset))
    return Feature(name=name, kind="integer", step=step, offset=offset or None,
                   domain=_code_domain(domain, step, offset))


def _code_domain(domain: tuple[float | None, float | None] | None, step: float,
                 offset: float) -> tuple[float | None, float | None] | None:
    """The codes ``k`` whose values ``offset + step·k`` lie in ``domain`` (exact)."""
    if domain is None:
        return None
    low, high = domain
    return (None if low is None else float(math.ceil((Fraction(low) - Fraction(offset))
                                                     / Fraction(step))),
            None if high is None else float(math.floor((Fraction(high) - Fraction(offset))
                                                       / Fraction(step))))


def coded_frame(frame: pd.DataFrame, features: list[Feature]) -> pd.DataFrame:
    """``frame`` with the column of every integer or binary feature held as floats replaced
    by its integer codes ``k`` (value = ``offset + step·k`` exactly, else
    :class:`PopulationError` naming the feature): the table the fits read. Call it once:
    codes are not values."""
    coded = frame.copy()
    for feature in features:
        if feature.kind not in ("integer", "binary") or feature.name not in frame.columns:
            continue
        if pd.api.types.is_integer_dtype(frame[feature.name]) and not feature.coded:
            continue
        values = frame[feature.name].to_numpy(dtype=np.float64)
        coded[feature.name] = grid_codes(values, feature, "the data").astype(np.int64)
    return coded


def infer_features(
    frame: pd.DataFrame,
    categorical: dict[str, list[str]] | None = None,
    domains: dict[str, tuple[float | None, float | None]] | None = None,
    max_discrete_values: int = MAX_DISCRETE_VALUES,
) -> list[Feature]:
    """Features for every column of ``frame`` in column order: the given one-hot groups
    (feature name → its columns) become categorical features placed at their first column;
    bool columns and integer columns holding only 0/1 are binary, other integer columns are
    integer, and so is a float column whose values are all integers (:func:`_whole_numbers`:
    a count written as ``3.0``), however many values it holds; another float column with at
    most ``max_discrete_values`` distinct values on a grid (:func:`grid_code`) is an integer
    feature with its ``step`` and ``offset``; everything else is continuous.
    ``domains`` sets a feature's domain in the data's units (default unbounded)."""
    categorical = categorical or {}
    domains = domains or {}
    grouped = {column: name for name, columns in categorical.items() for column in columns}
    missing = sorted(set(grouped) - set(frame.columns))
    if missing:
        raise PopulationError(f"one-hot columns {missing} are not in the data")
    features: list[Feature] = []
    for column in frame.columns:
        if column in grouped:
            name = grouped[column]
            if all(f.name != name for f in features):
                features.append(Feature(name=name, kind="categorical", columns=categorical[name]))
            continue
        series = frame[column]
        domain = domains.get(column)
        whole = pd.api.types.is_integer_dtype(series) or _whole_numbers(series)
        if pd.api.types.is_bool_dtype(series) or (whole and set(series.unique()) <= {0, 1}):
            features.append(Feature(name=column, kind="binary", domain=domain))
        elif whole:
            features.append(Feature(name=column, kind="integer", domain=domain))
        else:
            grid = _grid_feature(column, series, domain, max_discrete_values)
            features.append(grid or Feature(name=column, kind="continuous", domain=domain))
    return features


def _whole_numbers(series: pd.Series) -> bool:
    """Whether every value of a float column is an integer of magnitude below 2**53 (where
    every integer is a float): a count written as ``3.0`` is read as the integer column
    holding 3 is, whatever its number of values, so that its values keep their mass."""
    values = series.to_numpy(dtype=np.float64)
    return bool(values.size) and bool(np.isfinite(values).all()) and \
        bool((np.abs(values) < LARGEST_EXACT_INTEGER).all()) and \
        bool((values == np.floor(values)).all())


def _values(frame: pd.DataFrame, feature: Feature) -> np.ndarray:
    missing = [c for c in feature.column_names() if c not in frame.columns]
    if missing:
        raise PopulationError(f"feature {feature.name!r}: columns {missing} are not in the data")
    values = frame[feature.column_names()].to_numpy(dtype=np.float64)
    if not np.isfinite(values).all():
        bad = int((~np.isfinite(values)).any(axis=1).sum())
        raise PopulationError(f"feature {feature.name!r}: the data holds NaN or infinite values "
                              f"in {bad} of {values.shape[0]} rows (fill or drop them first, as "
                              "the model's training data was)")
    if values.shape[0] == 0:
        raise PopulationError(f"feature {feature.name!r}: no data rows to fit")
    low, high = feature.interval()
    if (values < low).any() or (values > high).any():
        raise PopulationError(
            f"feature {feature.name!r}: data outside the domain [{low:g}, {high:g}]"
        )
    return values if feature.kind == "categorical" else values[:, 0]


def fit_truncated_normal(values: np.ndarray, lower: float, upper: float) -> TruncatedNormal:
    """Maximum-likelihood normal truncated to ``[lower, upper]`` (either side may be ±inf)."""
    start = np.array([values.mean(), math.log(max(values.std(), 1e-6 * (1 + abs(values.mean()))))])

    def negative_log_likelihood(parameters: np.ndarray) -> float:
        mean, log_std = parameters
        std = math.exp(log_std)
        a, b = (lower - mean) / std, (upper - mean) / std
        total = truncnorm.logpdf(values, a, b, loc=mean, scale=std).sum()
        return float(-total) if np.isfinite(total) else 1e300

    result = minimize(negative_log_likelihood, start, method="Nelder-Mead",
                      options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
    mean, log_std = result.x
    return TruncatedNormal(
        mean=float(mean), std=float(math.exp(log_std)),
        lower=None if math.isinf(lower) else lower, upper=None if math.isinf(upper) else upper,
    )


def _bin_count(rows: int) -> int:
    """Histogram bins for ``rows`` data rows: ``HISTOGRAM_BINS``, fewer so that a bin holds
    ``MIN_BIN_ROWS`` rows on average."""
    return max(1, min(HISTOGRAM_BINS, rows // MIN_BIN_ROWS))


def bin_shares(pieces: int, rows: int, least: int = MIN_BIN_ROWS, most: int | None = None
               ) -> np.ndarray:
    """The shares of ``rows`` sorted values at which a histogram's bins end (sorted, from 0 to
    1): every ``1/pieces`` (equal mass), and in each outer bin ``s`` and ``1 − s`` for
    ``s = 1/(2·pieces), 1/(4·pieces), …`` while ``s·rows`` holds ``least`` rows (and, given
    ``most``, the bins number at most ``most``). An
    outer bin stretches from a quantile to the extreme value, where the rows thin out; spread
    evenly, it gave a threshold in a group's upper tail 2.3 times the rows' share (0.040
    against 0.017 of 1,000 rows, 16 equal bins). Halved towards the ends, a tail bin holds
    half the share of the rows beyond its inner edge, which bounds the error of a threshold
    inside it."""
    shares = [k / pieces for k in range(pieces + 1)]
    share = 1 / (2 * pieces)
    while share * rows >= least and (most is None or len(shares) + 1 <= most):
        shares += [share, 1 - share]
        share /= 2
    return np.unique(shares)


def fit_continuous_histogram(values: np.ndarray, bins: int = HISTOGRAM_BINS,
                             atom_share: float = ATOM_SHARE) -> Mixture:
    """An equal-mass histogram of ``values`` with their common values kept as atoms: every
    value holding at least ``atom_share`` of the rows (a zero-inflated balance's 0.0, say)
    is a :class:`PointMass` weighted by exactly its share of the rows, so a model that
    treats that value apart is audited on the mass the data puts there. The other values get
    the histogram on their range ``[min, max]``: the edges are the ``bins``-quantiles of
    those values (at most :func:`_bin_count` of their rows), with the outer bins halved
    towards the ends (:func:`bin_shares`; repeated edges merged), each bin
    a uniform density weighted by the share of all rows in it (the last bin closed; empty
    bins left out), each bin whose rows reject that uniform split at their median
    (:func:`~verifier.population.bin_refinement.refine_bins`), or one more point mass when
    they are all equal. Bounded by construction; the weights are the rows' shares and add up
    to one."""
    if np.ptp(values) == 0:
        raise PopulationError("a histogram needs values that are not all equal")
    distinct, counts = np.unique(values, return_counts=True)
    heavy = counts >= atom_share * values.size
    components: list[Distribution] = [PointMass(value=float(v)) for v in distinct[heavy]]
    weights = (counts[heavy] / values.size).tolist()
    rest = values[~np.isin(values, distinct[heavy])]
    if rest.size and np.ptp(rest) == 0:
        components.append(PointMass(value=float(rest[0])))
        weights.append(rest.size / values.size)
    elif rest.size:
        pieces = min(bins, _bin_count(rest.size))
        edges = np.unique(np.quantile(rest, bin_shares(pieces, rest.size)))
        in_bins, _ = np.histogram(rest, bins=edges)
        keep = in_bins > 0
        bins = refine_bins(rest, list(zip(edges[:-1][keep], edges[1:][keep], strict=True)),
                           MIN_BIN_ROWS, integer=False)
        ordered = np.sort(rest)
        components.extend(Uniform(lower=float(a), upper=float(b)) for a, b in bins)
        weights.extend(rows_in(ordered, a, b, False, closed=b == bins[-1][1]).size / values.size
                       for a, b in bins)
    return Mixture(weights=weights, components=components)


def fit_integer_histogram(values: np.ndarray, bins: int = HISTOGRAM_BINS,
                          atom_share: float = ATOM_SHARE) -> IntegerHistogram:
    """An :class:`IntegerHistogram` of integer ``values`` on their observed range: every
    value holding at least ``atom_share`` of the rows is a one-integer bin (an atom, e.g. a
    skewed column's mode); each run of values between atoms is cut into about
    ``bins × its share`` bins of equal mass, contiguous from the run's first to its last
    observed value, the run's outer bins halved towards its ends (:func:`bin_shares`), each
    bin whose rows reject its uniform split at their median into bins spanning their rows
    (:func:`~verifier.population.bin_refinement.refine_bins`). Bin probabilities are the
    shares of the rows in them."""
    distinct, counts = np.unique(values.astype(np.int64), return_counts=True)
    total = counts.sum()
    heavy = counts >= atom_share * total
    ranges: list[tuple[int, int]] = []
    start = 0
    while start < distinct.size:
        if heavy[start]:
            ranges.append((int(distinct[start]), int(distinct[start])))
            start += 1
            continue
        stop = start
        while stop < distinct.size and not heavy[stop]:
            stop += 1
        run = counts[start:stop]
        pieces = max(1, round(bins * run.sum() / total))
        cumulative = np.cumsum(run)
        targets = run.sum() * bin_shares(pieces, int(run.sum()))[1:-1]
        cuts = np.unique(np.searchsorted(cumulative, targets, side="left"))
        first = int(distinct[start])
        previous = 0
        for cut in [*cuts.tolist(), run.size - 1]:
            if cut < previous:
                continue
            last = int(distinct[start + cut])
            ranges.append((first, last))
            first, previous = last + 1, cut + 1
        start = stop
    ordered = np.sort(values.astype(np.int64))
    ranges = refine_bins(ordered, ranges, MIN_BIN_ROWS, integer=True)
    masses = [rows_in(ordered, low, high, True, closed=True).size for low, high in ranges]
    return IntegerHistogram(bins=ranges, probabilities=(np.array(masses) / total).tolist())


def _continuous(values: np.ndarray, feature: Feature, method: str = "normal") -> Distribution:
    low, high = feature.interval()
    if np.ptp(values) == 0:
        raise PopulationError(f"feature {feature.name!r} is constant; it has no density")
    if method == "histogram":
        return fit_continuous_histogram(values, _bin_count(values.size))
    if math.isinf(low) and math.isinf(high):
        return Normal(mean=float(values.mean()), std=float(values.std()))
    return fit_truncated_normal(values, low, high)


def _integer(values: np.ndarray, feature: Feature, max_discrete_values: int,
             method: str = "normal") -> Distribution:
    if not np.all(values == np.floor(values)):
        raise PopulationError(f"feature {feature.name!r} is {feature.kind} but the data is not")
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size == 1:
        return PointMass(value=float(distinct[0]))
    if distinct.size <= max_discrete_values:
        return Discrete(values=distinct.tolist(), probabilities=(counts / counts.sum()).tolist())
    if method != "normal":
        return fit_integer_histogram(values, _bin_count(values.size))
    low, high = feature.interval()
    return DiscretisedNormal(
        mean=float(values.mean()), std=float(max(values.std(), 0.5)),
        lower=None if math.isinf(low) else int(low), upper=None if math.isinf(high) else int(high),
    )


def _categories(values: np.ndarray, feature: Feature) -> Categorical:
    if not (np.isin(values, (0.0, 1.0)).all() and (values.sum(axis=1) == 1).all()):
        raise PopulationError(
            f"feature {feature.name!r}: every row of columns {feature.column_names()} must be "
            "one-hot (exactly one 1)"
        )
    frequencies = values.mean(axis=0)
    return Categorical(probabilities=(frequencies / frequencies.sum()).tolist())


def fit_marginal(
    frame: pd.DataFrame, feature: Feature, max_discrete_values: int = MAX_DISCRETE_VALUES,
    continuous: ContinuousMethod = "normal",
) -> Distribution:
    """The marginal of one feature (see the module docstring): ``continuous="histogram"``
    gives the data-shaped histograms, anything else the (truncated/discretised) normals."""
    return _marginal_of(_values(frame, feature), feature, max_discrete_values, continuous)


def _marginal_of(values: np.ndarray, feature: Feature, max_discrete_values: int,
                 continuous: ContinuousMethod) -> Distribution:
    """:func:`fit_marginal` of values already read and checked by :func:`_values`."""
    if feature.kind == "categorical":
        return _categories(values, feature)
    if feature.kind == "continuous":
        return _continuous(values, feature, continuous)
    return _integer(values, feature, max_discrete_values, continuous)


def fit_gaussian_mixture(
    frame: pd.DataFrame, feature: Feature, n_components: int = 3, seed: int = 0
) -> Mixture:
    """A 1-D Gaussian mixture of a continuous feature (truncated to a bounded domain)."""
    from sklearn.mixture import GaussianMixture

    if feature.kind != "continuous":
        raise PopulationError(
            f"feature {feature.name!r}: a Gaussian mixture needs a continuous feature"
        )
    values = _values(frame, feature)
    fitted = GaussianMixture(n_components=n_components, random_state=seed).fit(values[:, None])
    weights = fitted.weights_ / fitted.weights_.sum()
    low, high = feature.interval()
    components: list[Distribution] = []
    for mean, covariance in zip(fitted.means_[:, 0], fitted.covariances_.reshape(-1), strict=True):
        std = float(math.sqrt(covariance))
        if math.isinf(low) and math.isinf(high):
            components.append(Normal(mean=float(mean), std=std))
        else:
            components.append(TruncatedNormal(
                mean=float(mean), std=std, lower=None if math.isinf(low) else low,
                upper=None if math.isinf(high) else high,
            ))
    return Mixture(weights=weights.tolist(), components=components)


def fit_density_tree(
    frame: pd.DataFrame,
    columns: list[str],
    min_leaf: int = 50,
    lower: list[float] | None = None,
    upper: list[float] | None = None,
) -> PiecewiseDensity:
    """Piecewise-constant density of ``columns`` by recursive median splits (module docstring).

    ``lower``/``upper`` give the bounded box (default: the data's range per column); every
    data point must lie in it.
    """
    data = frame[columns].to_numpy(dtype=np.float64)
    count = data.shape[0]
    if count < max(1, min_leaf) or min_leaf < 1:
        raise PopulationError(f"a density tree needs at least min_leaf={min_leaf} >= 1 rows")
    box_lo = np.asarray(lower, dtype=np.float64) if lower is not None else data.min(axis=0)
    box_hi = np.asarray(upper, dtype=np.float64) if upper is not None else data.max(axis=0)
    if not (np.isfinite(box_lo).all() and np.isfinite(box_hi).all()):
        raise PopulationError("a density tree needs a bounded box")
    flat = [columns[i] for i in np.flatnonzero(box_hi <= box_lo)]
    if flat:
        raise PopulationError(f"columns {flat} have an empty or zero-width range")
    if ((data < box_lo) | (data > box_hi)).any():
        raise PopulationError("data points lie outside the density tree's box")
    width = box_hi - box_lo
    leaves: list[Leaf] = []
    stack = [(np.arange(count), box_lo.copy(), box_hi.copy())]
    while stack:
        index, low, high = stack.pop()
        split = None
        if index.size >= 2 * min_leaf:
            for dim in np.argsort(-(high - low) / width, kind="stable"):
                median = float(np.median(data[index, dim]))
                left = data[index, dim] <= median
                balanced = min_leaf <= left.sum() <= index.size - min_leaf
                if low[dim] < median < high[dim] and balanced:
                    split = (dim, median, left)
                    break
        if split is None:
            volume = float(np.prod(high - low))
            leaves.append(Leaf(lower=low.tolist(), upper=high.tolist(),
                               constant=index.size / (count * volume)))
            continue
        dim, median, left = split
        left_high, right_low = high.copy(), low.copy()
        left_high[dim] = median
        right_low[dim] = median
        stack.append((index[~left], right_low, high))
        stack.append((index[left], low, left_high))
    return PiecewiseDensity(columns=list(columns), leaves=leaves)


def fit_product(
    frame: pd.DataFrame,
    features: list[Feature],
    continuous: ContinuousMethod = "normal",
    n_components: int = 3,
    min_leaf: int = 50,
    max_discrete_values: int = MAX_DISCRETE_VALUES,
    seed: int = 0,
) -> PopulationModel:
    """Independent product of per-feature marginals; continuous features by ``continuous``:
    ``normal`` (normal/truncated normal), ``gaussian_mixture`` (per feature), or
    ``density_tree`` (one joint piecewise-constant density over all continuous features)."""
    factors: list[Factor] = []
    tree_columns: list[str] = []
    domains: dict[str, tuple[float, float]] = {}
    for feature in features:
        if feature.kind == "continuous" and continuous == "density_tree":
            tree_columns.extend(feature.column_names())
            domains[feature.column_names()[0]] = feature.interval()
            continue
        if feature.kind == "continuous" and continuous == "gaussian_mixture":
            distribution: Distribution = fit_gaussian_mixture(frame, feature, n_components, seed)
        else:
            distribution = fit_marginal(frame, feature, max_discrete_values, continuous)
        factors.append(Factor(columns=feature.column_names(), distribution=distribution))
    if tree_columns:
        data = frame[tree_columns]
        lower = [domains[c][0] if math.isfinite(domains[c][0]) else float(data[c].min())
                 for c in tree_columns]
        upper = [domains[c][1] if math.isfinite(domains[c][1]) else float(data[c].max())
                 for c in tree_columns]
        tree = fit_density_tree(frame, tree_columns, min_leaf, lower, upper)
        factors.append(Factor(columns=tree_columns, distribution=tree))
    return PopulationModel(features=features, distribution=Product(factors=factors))


def _topological(features: list[Feature], parents: dict[str, list[str]]) -> list[Feature]:
    by_name = {feature.name: feature for feature in features}
    named = {p for ps in parents.values() for p in ps} | set(parents)
    unknown = sorted(name for name in named if name not in by_name)
    if unknown:
        raise PopulationError(f"the network structure names unknown features {unknown}")
    ordered: list[Feature] = []
    placed: set[str] = set()
    while len(ordered) < len(features):
        ready = [
            f for f in features
            if f.name not in placed and all(p in placed for p in parents.get(f.name, []))
        ]
        if not ready:
            cycle = sorted(f.name for f in features if f.name not in placed)
            raise PopulationError(f"the network structure has a cycle among {cycle}")
        ordered.append(ready[0])
        placed.add(ready[0].name)
    return ordered


def _parent_cells(
    frame: pd.DataFrame, feature: Feature, bins: list[float] | None, max_discrete_values: int,
    rows: list[Distribution],
) -> list[tuple[float | None, float | None]]:
    """Closed value intervals of a parent that partition its values (category index for a
    categorical parent); ``rows`` are the parent's fitted CPT-row distributions. Adjacent
    cells of a continuous parent share their cut, so a cut on one of the rows' atoms moves
    to the next float above it (:func:`_cut_off_atoms`): the atom's mass is then in one cell
    only, and the shared face carries none."""
    if feature.kind == "categorical":
        return [(float(j), float(j)) for j in range(len(feature.column_names()))]
    if feature.kind == "continuous":
        if not bins:
            raise PopulationError(f"continuous parent {feature.name!r} needs bins (cut points)")
        cuts = _cut_off_atoms(sorted(float(b) for b in bins), rows, feature)
        return list(itertools.pairwise([None, *cuts, None]))
    if bins:
        cuts = sorted({math.floor(b) for b in bins})
        starts = [None, *[c + 1.0 for c in cuts]]
        ends = [*[float(c) for c in cuts], None]
        return list(zip(starts, ends, strict=True))
    values = np.unique(frame[feature.name].to_numpy(dtype=np.float64))
    if values.size > max_discrete_values:
        raise PopulationError(
            f"integer parent {feature.name!r} has {values.size} distinct values; give bins"
        )
    return [(float(v), float(v)) for v in values]


def _cut_off_atoms(cuts: list[float], rows: list[Distribution], feature: Feature
                   ) -> list[float]:
    """``cuts`` (sorted) with every cut at which some of ``rows`` has an atom replaced by the
    next float above it (sorted, distinct): the atom stays below the cut, strictly inside
    one closed cell. :class:`PopulationError` when that float is an atom too (two atoms one
    float apart: no shared face can avoid them)."""
    moved = []
    for cut in cuts:
        if any(row.has_atom(cut) for row in rows):
            cut = up(cut)
            if any(row.has_atom(cut) for row in rows):
                raise PopulationError(
                    f"continuous parent {feature.name!r} has atoms at adjacent floats near "
                    f"{cut!r}; no cut between its cells avoids them: give bins between them")
        moved.append(cut)
    return sorted(set(moved))


def _parent_values(frame: pd.DataFrame, feature: Feature) -> np.ndarray:
    if feature.kind == "categorical":
        return np.argmax(frame[feature.column_names()].to_numpy(dtype=np.float64), axis=1)
    return frame[feature.name].to_numpy(dtype=np.float64)


def _cell_fit(subset: np.ndarray, feature: Feature, pooled: Distribution, min_rows: int,
              max_discrete_values: int, continuous: ContinuousMethod) -> Distribution:
    """A CPT row's marginal from the cell's values (read by :func:`_values`), or the pooled
    fit when the cell has fewer than ``min_rows`` rows. A cell whose continuous values are
    all equal gets that value as a point mass under the histogram fit (which keeps atoms),
    the pooled fit under the others (no density)."""
    if len(subset) < min_rows:
        return pooled
    if feature.kind == "continuous" and np.ptp(subset) == 0:
        return PointMass(value=float(subset[0])) if continuous == "histogram" else pooled
    return _marginal_of(subset, feature, max_discrete_values, continuous)


def fit_bayesian_network(
    frame: pd.DataFrame,
    features: list[Feature],
    parents: dict[str, list[str]],
    bins: dict[str, list[float]] | None = None,
    min_rows: int = 30,
    max_discrete_values: int = MAX_DISCRETE_VALUES,
    continuous: ContinuousMethod = "normal",
    sparse_cells: Literal["pooled", "own"] = "pooled",
) -> PopulationModel:
    """A Bayesian network with the given ``parents`` (feature name → parent feature names);
    see the module docstring for the CPT rows, whose marginals :func:`fit_marginal` fits
    by ``continuous`` (``histogram`` or ``normal``). ``sparse_cells="pooled"`` fits a cell
    with fewer than ``min_rows`` rows on every row (the benchmarks' fixed populations);
    ``"own"`` (what ``certgate population fit`` asks for) fits few-valued nodes on each cell's
    own rows and backs a sparse density cell off to its first parents (module docstring)."""
    if continuous not in ("histogram", "normal"):
        raise PopulationError(f"a Bayesian network fits its rows as histograms or normals, "
                              f"not {continuous!r}")
    bins = bins or {}
    by_name = {feature.name: feature for feature in features}
    ordered = _topological(features, parents)
    parent_names = {p for ps in parents.values() for p in ps}
    parent_values = {name: _parent_values(frame, by_name[name]) for name in parent_names}
    cells: dict[str, list[tuple[float | None, float | None]]] = {}
    nodes: list[BayesNode] = []
    for feature in ordered:
        node_parents = parents.get(feature.name, [])
        for parent in node_parents:
            if parent not in cells:
                fitted = next(node for node in nodes if node.name == parent)
                cells[parent] = _parent_cells(frame, by_name[parent], bins.get(parent),
                                              max_discrete_values,
                                              [row.distribution for row in fitted.cpt])
        own = _values(frame, feature)
        pooled = _marginal_of(own, feature, max_discrete_values, continuous)
        fits: dict[tuple[tuple[float | None, float | None], ...], Distribution] = {(): pooled}
        own_rows = sparse_cells == "own"
        needed = 1 if own_rows and isinstance(pooled, Discrete | Categorical | PointMass) \
            else min_rows
        rows = []
        for combination in itertools.product(*(cells[p] for p in node_parents)):
            selected = np.ones(len(frame), dtype=bool)
            kept = 0
            for parent, (low, high) in zip(node_parents, combination, strict=True):
                values = parent_values[parent]
                low_f = -np.inf if low is None else low
                high_f = np.inf if high is None else high
                narrower = selected & (values >= low_f) & (values <= high_f)
                if narrower.sum() < needed:
                    break
                selected, kept = narrower, kept + 1
            prefix = combination[:kept] if own_rows or kept == len(node_parents) else ()
            if prefix not in fits:
                fits[prefix] = _cell_fit(own[selected], feature, pooled, needed,
                                         max_discrete_values, continuous)
            distribution = fits[prefix]
            rows.append(CPTRow(condition=dict(zip(node_parents, combination, strict=True)),
                               distribution=distribution))
        nodes.append(BayesNode(name=feature.name, parents=node_parents,
                               columns=feature.column_names(), cpt=rows))
    return PopulationModel(features=features, distribution=BayesianNetwork(nodes=nodes))
