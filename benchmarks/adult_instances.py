"""Adult-k: paper 003's MiniACSIncome construction (§6.4) rebuilt on the Adult census data.

An instance is the first ``k`` variables of :data:`VARIABLES` (sex; workclass; education;
hours-per-week; marital-status; race; relationship; age; then occupation; education-num;
capital-gain; capital-loss; native-country) from ``../shared/benchmarks/libra/census/data/
census.csv`` (resolved from the checkout root). ``sex`` is one binary column (1 = Male, 0 =
Female); the other categorical variables are one-hot groups (columns ``variable=category``,
categories sorted by name); integer variables are integer columns on their observed range.

* Population: :func:`verifier.population.fitting.fit_bayesian_network` with the structure of
  :data:`PARENTS` restricted to the variables present (a parent outside the first ``k``
  variables is dropped, so the child's table is fitted on the data pooled over it); ``age``
  as a parent is cut at 34 and 59. Every integer variable (at most 118 distinct values here)
  gets its empirical distribution per table row (``max_discrete_values`` =
  :data:`MAX_INTEGER_VALUES`), as paper 003 fits work hours: the helper's default, a single
  discretised normal above 20 values, cannot represent capital gain/loss (92 %/95 % zeros).
* Network: a ReLU MLP with the given hidden sizes and two outputs (class 1 = income >50K),
  trained with Adam on 80 % of the rows (seeded shuffle), the integer columns z-scored by a
  fixed first ``Linear`` layer that the converter folds into the first hidden layer; converted
  with :func:`verifier.convert.torch_module.from_torch` and round-tripped through certgate's
  JSON format, so a freshly built instance and one read from the cache are the same network.

:func:`build_instance` is deterministic in ``(k, hidden, seed, epochs)`` and the data file;
built instances are cached (network JSON, population JSON, metadata) in :data:`CACHE_DIR`
(untracked). :func:`exact_reference` enumerates every discrete point with probabilities
computed from the fitted tables in 40-digit arithmetic and the network's class decided
exactly at float ties; :func:`monte_carlo_reference` estimates the same quantities by
sampling. Both are independent of PV and of the population's box-probability code.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pandas as pd
import torch

from verifier.convert import network_from_json, network_to_json
from verifier.convert.torch_module import from_torch
from verifier.network import Network
from verifier.population import PopulationModel, load_population, save_population
from verifier.population.bayesnet import BayesianNetwork
from verifier.population.distributions import Categorical, Discrete, DiscretisedNormal, PointMass
from verifier.population.fitting import fit_bayesian_network
from verifier.population.schema import Feature

REPOSITORY = Path(__file__).resolve().parents[1]
CENSUS_RELATIVE = Path("../shared/benchmarks/libra/census/data/census.csv")
CACHE_DIR = REPOSITORY / "benchmarks" / ".adult_cache"
CONSTRUCTION_VERSION = 2
MAX_INTEGER_VALUES = 200

VARIABLES: tuple[str, ...] = (
    "sex", "workclass", "education", "hours-per-week", "marital-status", "race",
    "relationship", "age", "occupation", "education-num", "capital-gain", "capital-loss",
    "native-country",
)
PARENTS: dict[str, tuple[str, ...]] = {
    "education": ("sex", "race"),
    "marital-status": ("education", "age"),
    "relationship": ("marital-status",),
    "workclass": ("education", "marital-status"),
    "hours-per-week": ("education", "marital-status"),
    "occupation": ("education", "sex"),
}
BINS: dict[str, list[float]] = {"age": [34.0, 59.0]}
PROTECTED = "sex"
PRIVILEGED = 1.0  # sex = 1 encodes "Male" in the data
PRIVILEGED_LABEL = "Male"
FAVORABLE_CLASS = 1  # output 1: income >50K
TARGET = "earning"
POSITIVE_LABEL = ">50K"
OUTPUT_NAMES = ("income<=50K", "income>50K")
DEFAULT_EPOCHS = 5
LEARNING_RATE = 1e-3
BATCH = 128
TRAIN_SHARE = 0.8
ORACLE_DIGITS = 40
MAX_ENUMERATED_POINTS = 5_000_000


class AdultDataError(RuntimeError):
    """The census data is missing or does not have the expected columns."""


@dataclass(frozen=True)
class AdultInstance:
    """One Adult-k benchmark instance (see the module docstring)."""

    k: int
    hidden: tuple[int, ...]
    seed: int
    epochs: int
    variables: tuple[str, ...]
    columns: tuple[str, ...]
    network: Network
    population: PopulationModel
    protected: str
    privileged: float
    favorable_class: int
    validation_accuracy: float
    network_path: Path | None = None
    population_path: Path | None = None

    @property
    def name(self) -> str:
        return f"adult-{self.k}/{network_label(self.hidden)}/seed{self.seed}"


@dataclass(frozen=True)
class ParityReference:
    """Reference values of the demographic-parity quantities.

    ``joint`` holds ``P[fav ∧ unprivileged]``, ``P[¬fav ∧ unprivileged]``, ``P[fav ∧
    privileged]``, ``P[¬fav ∧ privileged]``. For ``method == "exact"`` every value is within
    ``error`` of the real value; for Monte Carlo ``*_se`` are standard errors.
    """

    method: str
    p_unprivileged: float
    p_privileged: float
    ratio: float
    p_unprivileged_se: float = 0.0
    p_privileged_se: float = 0.0
    ratio_se: float = 0.0
    samples: int = 0
    points: int = 0
    error: float = 0.0
    joint: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


def network_label(hidden: Sequence[int]) -> str:
    """``(32, 32)`` → ``2×32``; mixed widths as ``10-16``."""
    sizes = tuple(int(h) for h in hidden)
    if len(set(sizes)) == 1:
        return f"{len(sizes)}×{sizes[0]}"
    return "-".join(str(h) for h in sizes)


def census_path() -> Path:
    """The census CSV next to the checkout; a clear error when it is absent."""
    path = (REPOSITORY / CENSUS_RELATIVE).resolve()
    if not path.is_file():
        raise AdultDataError(
            f"census data not found at {path} (expected {CENSUS_RELATIVE} relative to the "
            f"checkout root {REPOSITORY})"
        )
    return path


def load_census(path: Path | None = None) -> pd.DataFrame:
    """The census rows; raises :class:`AdultDataError` naming a missing column."""
    frame = pd.read_csv(path or census_path(), skipinitialspace=True)
    missing = [c for c in (*VARIABLES, TARGET) if c not in frame.columns]
    if missing:
        raise AdultDataError(f"census data lacks the columns {missing}")
    return frame


def _is_integer(series: pd.Series) -> bool:
    return pd.api.types.is_integer_dtype(series)


def encode(frame: pd.DataFrame, variables: Sequence[str]) -> tuple[pd.DataFrame, list[Feature]]:
    """The encoded columns of ``variables`` and their features (module docstring)."""
    encoded: dict[str, np.ndarray] = {}
    features: list[Feature] = []
    for variable in variables:
        series = frame[variable]
        if variable == PROTECTED:
            labels = set(series.unique())
            if labels != {"Male", "Female"}:
                raise AdultDataError(f"column {variable!r}: expected Male/Female, got {labels}")
            encoded[variable] = (series == PRIVILEGED_LABEL).to_numpy(dtype=np.int64)
            features.append(Feature(name=variable, kind="binary"))
        elif _is_integer(series):
            encoded[variable] = series.to_numpy(dtype=np.int64)
            domain = (float(series.min()), float(series.max()))
            features.append(Feature(name=variable, kind="integer", domain=domain))
        else:
            categories = sorted(str(c) for c in series.unique())
            columns = [f"{variable}={c}" for c in categories]
            for category, column in zip(categories, columns, strict=True):
                encoded[column] = (series.astype(str) == category).to_numpy(dtype=np.int64)
            features.append(Feature(name=variable, kind="categorical", columns=columns,
                                    categories=categories))
    return pd.DataFrame(encoded), features


def restricted_parents(variables: Sequence[str]) -> dict[str, list[str]]:
    """:data:`PARENTS` restricted to ``variables`` (absent parents dropped)."""
    present = set(variables)
    return {
        child: [p for p in parents if p in present]
        for child, parents in PARENTS.items()
        if child in present and any(p in present for p in parents)
    }


def fit_population(encoded: pd.DataFrame, features: list[Feature]) -> PopulationModel:
    """The Bayesian network of the module docstring on the encoded data."""
    names = [f.name for f in features]
    parents = restricted_parents(names)
    used = {p for ps in parents.values() for p in ps}
    bins = {name: cuts for name, cuts in BINS.items() if name in used}
    return fit_bayesian_network(encoded, features, parents, bins=bins,
                                max_discrete_values=MAX_INTEGER_VALUES)


def _classifier(width: int, hidden: Sequence[int], mean: np.ndarray,
                scale: np.ndarray) -> torch.nn.Sequential:
    normalise = torch.nn.Linear(width, width)
    with torch.no_grad():
        normalise.weight.copy_(torch.diag(torch.as_tensor(1.0 / scale, dtype=torch.float32)))
        normalise.bias.copy_(torch.as_tensor(-mean / scale, dtype=torch.float32))
    normalise.requires_grad_(False)
    layers: list[torch.nn.Module] = [normalise]
    previous = width
    for size in hidden:
        layers += [torch.nn.Linear(previous, int(size)), torch.nn.ReLU()]
        previous = int(size)
    layers.append(torch.nn.Linear(previous, len(OUTPUT_NAMES)))
    return torch.nn.Sequential(*layers)


def train_network(encoded: pd.DataFrame, features: list[Feature], labels: np.ndarray,
                  hidden: Sequence[int], seed: int, epochs: int) -> tuple[Network, float]:
    """Train the classifier (module docstring); returns the IR and the validation accuracy
    (on the 20 % of rows held out)."""
    columns = [c for f in features for c in f.column_names()]
    x = encoded[columns].to_numpy(dtype=np.float64, copy=True)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(x))
    cut = int(TRAIN_SHARE * len(x))
    train, valid = order[:cut], order[cut:]
    integer = np.array([f.kind == "integer" for f in features for _ in f.column_names()])
    mean = np.where(integer, x[train].mean(axis=0), 0.0)
    scale = np.where(integer, x[train].std(axis=0), 1.0)
    scale = np.where(scale > 0, scale, 1.0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        model = _classifier(x.shape[1], hidden, mean, scale)
        optimiser = torch.optim.Adam([p for p in model.parameters() if p.requires_grad],
                                     lr=LEARNING_RATE)
        inputs = torch.as_tensor(x, dtype=torch.float32)
        targets = torch.as_tensor(labels, dtype=torch.long)
        loss_function = torch.nn.CrossEntropyLoss()
        generator = torch.Generator().manual_seed(seed)
        train_index = torch.as_tensor(train)
        for _ in range(epochs):
            shuffled = train_index[torch.randperm(len(train_index), generator=generator)]
            for start in range(0, len(shuffled), BATCH):
                batch = shuffled[start:start + BATCH]
                optimiser.zero_grad()
                loss_function(model(inputs[batch]), targets[batch]).backward()
                optimiser.step()
        model = model.double().eval()
        with torch.no_grad():
            predicted = model(torch.as_tensor(x[valid])).argmax(dim=1).numpy()
    finally:
        torch.set_num_threads(threads)
    accuracy = float((predicted == labels[valid]).mean())
    network = from_torch(model, input_names=columns, output_names=list(OUTPUT_NAMES))
    return network_from_json(network_to_json(network)), accuracy


def _cache_stem(k: int, hidden: Sequence[int], seed: int, epochs: int, data: Path) -> str:
    digest = hashlib.sha256(data.read_bytes())
    digest.update(f"v{CONSTRUCTION_VERSION}/{k}/{tuple(hidden)}/{seed}/{epochs}".encode())
    sizes = "x".join(str(h) for h in hidden)
    return f"adult{k}-h{sizes}-s{seed}-e{epochs}-{digest.hexdigest()[:12]}"


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def build_instance(
    k: int, hidden: Sequence[int], seed: int, *, epochs: int = DEFAULT_EPOCHS,
    cache_dir: Path | None = CACHE_DIR, data: Path | None = None,
) -> AdultInstance:
    """The Adult-``k`` instance with a ReLU network of ``hidden`` sizes trained from ``seed``
    for ``epochs`` epochs (module docstring). With ``cache_dir`` the instance is read from (or
    written to) that directory; ``cache_dir=None`` always builds and writes nothing."""
    if not 1 <= k <= len(VARIABLES):
        raise ValueError(f"k must lie in 1..{len(VARIABLES)}, got {k}")
    hidden = tuple(int(h) for h in hidden)
    if not hidden or min(hidden) < 1:
        raise ValueError(f"hidden sizes must be positive, got {hidden}")
    if epochs < 1:
        raise ValueError(f"epochs must be positive, got {epochs}")
    path = data or census_path()
    if not path.is_file():
        raise AdultDataError(f"census data not found at {path}")
    variables = VARIABLES[:k]
    paths = None
    if cache_dir is not None:
        stem = _cache_stem(k, hidden, seed, epochs, path)
        paths = (cache_dir / f"{stem}.network.json", cache_dir / f"{stem}.population.json",
                 cache_dir / f"{stem}.meta.json")
        if all(p.is_file() for p in paths):
            meta = json.loads(paths[2].read_text(encoding="utf-8"))
            network = network_from_json(json.loads(paths[0].read_text(encoding="utf-8")))
            return _instance(k, hidden, seed, epochs, variables, network,
                             load_population(paths[1]), meta["validation_accuracy"], paths)
    frame = load_census(path)
    encoded, features = encode(frame, variables)
    population = fit_population(encoded, features)
    labels = (frame[TARGET] == POSITIVE_LABEL).to_numpy(dtype=np.int64)
    network, accuracy = train_network(encoded, features, labels, hidden, seed, epochs)
    if paths is not None:
        assert cache_dir is not None
        cache_dir.mkdir(parents=True, exist_ok=True)
        _write_atomically(paths[0], json.dumps(network_to_json(network)) + "\n")
        temporary = paths[1].with_suffix(f".{os.getpid()}.tmp")
        save_population(population, temporary).replace(paths[1])
        _write_atomically(paths[2], json.dumps({"validation_accuracy": accuracy}) + "\n")
    return _instance(k, hidden, seed, epochs, variables, network, population, accuracy, paths)


def _instance(k: int, hidden: tuple[int, ...], seed: int, epochs: int,
              variables: tuple[str, ...], network: Network, population: PopulationModel,
              accuracy: float, paths: tuple[Path, Path, Path] | None) -> AdultInstance:
    if list(population.columns) != list(network.input_names):
        raise AdultDataError("the cached population and network disagree on the columns")
    return AdultInstance(
        k=k, hidden=hidden, seed=seed, epochs=epochs, variables=variables,
        columns=tuple(population.columns), network=network, population=population,
        protected=PROTECTED, privileged=PRIVILEGED, favorable_class=FAVORABLE_CLASS,
        validation_accuracy=accuracy,
        network_path=paths[0] if paths else None, population_path=paths[1] if paths else None,
    )


# ---------------------------------------------------------------------------- references


def discrete_point_count(population: PopulationModel) -> int:
    """Number of points of the lattice :func:`enumerate_points` walks (the product of every
    node's support size, one-hot groups counting their categories)."""
    distribution = population.distribution
    if not isinstance(distribution, BayesianNetwork):
        raise ValueError("point counts need a Bayesian-network population")
    return math.prod(len(_node_support(node)) for node in distribution.nodes)


def _row_pmf(distribution: Any, values: np.ndarray) -> np.ndarray:
    """``P(X = v)`` for every node value ``v`` (category index for a categorical), each
    computed in :data:`ORACLE_DIGITS`-digit arithmetic and rounded once to float64."""
    with mpmath.workdps(ORACLE_DIGITS):
        if isinstance(distribution, Categorical | Discrete):
            raw = distribution.probabilities
            support = (range(len(raw)) if isinstance(distribution, Categorical)
                       else distribution.values)
            total = mpmath.fsum(mpmath.mpf(p) for p in raw)
            table = {float(v): mpmath.mpf(p) / total for v, p in zip(support, raw, strict=True)}
            return np.array([float(table.get(float(v), 0)) for v in values])
        if isinstance(distribution, PointMass):
            return (values == distribution.value).astype(np.float64)
        if isinstance(distribution, DiscretisedNormal):
            mean, sigma = mpmath.mpf(distribution.mean), mpmath.mpf(distribution.sigma)
            low, high = distribution.lower, distribution.upper
            if low is None or high is None:
                raise ValueError("exact enumeration needs bounded integer ranges")

            def cdf(t: float) -> Any:
                return mpmath.ncdf((mpmath.mpf(t) - mean) / sigma)

            normaliser = cdf(high + 0.5) - cdf(low - 0.5)
            result = []
            for v in values:
                inside = float(v).is_integer() and low <= v <= high
                result.append(float((cdf(v + 0.5) - cdf(v - 0.5)) / normaliser) if inside else 0.0)
            return np.array(result)
    raise ValueError(f"no exact point probability for a {type(distribution).__name__}")


def _node_support(node: Any) -> np.ndarray:
    values: set[float] = set()
    for row in node.cpt:
        distribution = row.distribution
        if isinstance(distribution, Categorical):
            values.update(float(j) for j in range(distribution.dimension))
        elif isinstance(distribution, Discrete):
            values.update(float(v) for v in distribution.values)
        elif isinstance(distribution, PointMass):
            values.add(float(distribution.value))
        elif isinstance(distribution, DiscretisedNormal):
            if distribution.lower is None or distribution.upper is None:
                raise ValueError(f"node {node.name!r}: unbounded integer range")
            values.update(float(v) for v in range(distribution.lower, distribution.upper + 1))
        else:
            raise ValueError(f"node {node.name!r}: cannot enumerate {distribution.kind}")
    return np.array(sorted(values))


def enumerate_points(population: PopulationModel) -> tuple[np.ndarray, np.ndarray]:
    """Every discrete point of a Bayesian-network population (``(n, d)`` in input-column
    order) with its probability (``(n,)``, each within a relative 1e-14 of the real value:
    factors are computed in 40-digit arithmetic and multiplied in float64)."""
    distribution = population.distribution
    if not isinstance(distribution, BayesianNetwork):
        raise ValueError("enumeration needs a Bayesian-network population")
    nodes = distribution.nodes
    supports = [_node_support(node) for node in nodes]
    total = math.prod(len(s) for s in supports)
    if total > MAX_ENUMERATED_POINTS:
        raise ValueError(f"{total} discrete points: too many to enumerate")
    grid = np.stack([g.reshape(-1) for g in np.meshgrid(*supports, indexing="ij")], axis=1)
    index = {node.name: u for u, node in enumerate(nodes)}
    probability = np.ones(len(grid))
    for u, node in enumerate(nodes):
        matched = np.zeros(len(grid), dtype=bool)
        factor = np.zeros(len(grid))
        for row in node.cpt:
            mask = ~matched
            for parent in row.condition:
                low, high = row.interval(parent)
                parent_values = grid[:, index[parent]]
                mask &= (parent_values >= low) & (parent_values <= high)
            if mask.any():
                values, inverse = np.unique(grid[mask, u], return_inverse=True)
                factor[mask] = _row_pmf(row.distribution, values)[inverse]
            matched |= mask
        if not matched.all():
            raise ValueError(f"node {node.name!r}: a point matches no CPT row")
        probability *= factor
    columns = []
    for u, node in enumerate(nodes):
        if node.categorical:
            columns.append(np.eye(node.width)[grid[:, u].astype(np.int64)])
        else:
            columns.append(grid[:, u:u + 1])
    local = np.concatenate(columns, axis=1)
    names = list(distribution.column_names())
    order = [names.index(c) for c in population.columns]
    keep = probability > 0
    return local[:, order][keep], probability[keep]


def _float_margin(network: Network, x: np.ndarray, favorable: int) -> tuple[np.ndarray,
                                                                           np.ndarray]:
    """``y_fav − max_other`` in float64 and a bound on its rounding error (20 × the
    worst-case error of the dot products, from the absolute-value network)."""
    h, magnitude = x.astype(np.float64), np.abs(x.astype(np.float64))
    depth_width = 1
    for layer in network.layers:
        h = h @ layer.weight.T + layer.bias
        magnitude = magnitude @ np.abs(layer.weight).T + np.abs(layer.bias)
        depth_width += layer.in_features + 2
        if layer.activation == "relu":
            h = np.maximum(h, 0.0)
        elif layer.activation != "none":
            raise ValueError(f"the oracle evaluates ReLU networks only, got {layer.activation}")
    others = np.delete(h, favorable, axis=1)
    margin = h[:, favorable] - others.max(axis=1)
    error = 20.0 * depth_width * np.finfo(np.float64).eps * magnitude.max(axis=1)
    return margin, error


def _exact_favorable(network: Network, point: np.ndarray, favorable: int) -> bool:
    """The class of one point in exact rational arithmetic (argmax, ties to the lowest
    index)."""
    h = [Fraction(float(v)) for v in point]
    for layer in network.layers:
        weight = [[Fraction(float(w)) for w in row] for row in layer.weight]
        bias = [Fraction(float(b)) for b in layer.bias]
        h = [sum((w * v for w, v in zip(row, h, strict=True)), b)
             for row, b in zip(weight, bias, strict=True)]
        if layer.activation == "relu":
            h = [max(v, Fraction(0)) for v in h]
    best = max(range(len(h)), key=lambda j: (h[j], -j))
    return best == favorable


def classify_favorable(network: Network, x: np.ndarray, favorable: int) -> np.ndarray:
    """Whether argmax (ties to the lowest index) is ``favorable`` at each row, exactly: rows
    whose float margin is within its rounding bound are re-evaluated in rational
    arithmetic."""
    margin, error = _float_margin(network, x, favorable)
    others = [j for j in range(network.output_size) if j != favorable]
    # a tie with a lower index goes to it; with higher indices to ``favorable``
    result = margin > 0 if any(j < favorable for j in others) else margin >= 0
    uncertain = np.flatnonzero(np.abs(margin) <= error)
    for row in uncertain:
        result[row] = _exact_favorable(network, x[row], favorable)
    return result


def _ratio(p_unprivileged: float, p_privileged: float) -> float:
    """The ratio; ``inf`` for ``x / 0`` and ``nan`` for the undefined ``0 / 0``."""
    if p_privileged > 0:
        return p_unprivileged / p_privileged
    return math.inf if p_unprivileged > 0 else math.nan


def exact_reference(instance: AdultInstance) -> ParityReference:
    """Exact enumeration: ``P[fav | unprivileged]``, ``P[fav | privileged]`` and their ratio,
    each within ``error`` (stated in the result) of the real value."""
    points, probability = enumerate_points(instance.population)
    favorable = classify_favorable(instance.network, points, instance.favorable_class)
    column = instance.columns.index(instance.protected)
    privileged = points[:, column] == instance.privileged
    joint = tuple(
        math.fsum(probability[f & g]) for g in (~privileged, privileged)
        for f in (favorable, ~favorable)
    )
    fav_u, not_u, fav_p, not_p = joint
    p_u, p_p = fav_u / (fav_u + not_u), fav_p / (fav_p + not_p)
    # each joint sum is within 1e-13 relative (factors 1e-16 each, float products, fsum);
    # the quotients add a few roundings: 1e-12 absolute covers probabilities in [0, 1]
    return ParityReference(
        method="exact", p_unprivileged=p_u, p_privileged=p_p, ratio=_ratio(p_u, p_p),
        points=len(points), error=1e-12, joint=joint,  # type: ignore[arg-type]
    )


def monte_carlo_reference(instance: AdultInstance, samples: int = 1_000_000,
                          seed: int = 12345, chunk: int = 200_000) -> ParityReference:
    """Monte Carlo estimates from ``samples`` draws of the population (the network evaluated in
    float64 with the same exact tie rule), with standard errors (delta method for the
    ratio)."""
    rng = np.random.default_rng(seed)
    column = instance.columns.index(instance.protected)
    counts = np.zeros(4, dtype=np.int64)  # fav∧unpriv, unpriv, fav∧priv, priv
    for start in range(0, samples, chunk):
        x = instance.population.sample(min(chunk, samples - start), rng)
        favorable = classify_favorable(instance.network, x, instance.favorable_class)
        privileged = x[:, column] == instance.privileged
        counts += [(favorable & ~privileged).sum(), (~privileged).sum(),
                   (favorable & privileged).sum(), privileged.sum()]
    p_u, p_p = counts[0] / counts[1], counts[2] / counts[3]
    se_u = math.sqrt(p_u * (1 - p_u) / counts[1])
    se_p = math.sqrt(p_p * (1 - p_p) / counts[3])
    ratio = _ratio(p_u, p_p)
    defined = p_u > 0 and p_p > 0
    ratio_se = ratio * math.sqrt((se_u / p_u) ** 2 + (se_p / p_p) ** 2) if defined else 0.0
    return ParityReference(
        method="monte carlo", p_unprivileged=float(p_u), p_privileged=float(p_p), ratio=ratio,
        p_unprivileged_se=se_u, p_privileged_se=se_p, ratio_se=ratio_se, samples=samples,
    )
