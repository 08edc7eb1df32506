"""What a causal-fairness question is: the network, the protected feature, the non-protected
layout (continuous, integer and one-hot inputs), the input domain and the query region.

Every input ranges over its *domain* ``[min, max]`` (a model file's declared box, a population's
support, or the Libra benchmarks' min-max scaled ``[0, 1]``, the default); one-hot groups take
unit vectors. *Integer* inputs (integer-coded features) range over the integers of their
domain: partitions are cut between integers and shares count integer points.

The protected feature is a one-hot group (its values are the unit vectors), one integer input
(its values are the integers of its domain) or one continuous input whose domain is covered by
*cells* (intervals, e.g. Libra's value classes ``[0, p)`` and ``[p, 1]``). Cells only steer the
bound computations; the fairness question ranges over every value of the protected domain,
or, with ``protected_values``, only over the values given (e.g. FairQuant's minimum versus
maximum), each then a point cell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from verifier.errors import CertgateInputError, did_you_mean
from verifier.network import Network
from verifier.numerics import SMALLEST_SUBNORMAL
from verifier.text_files import read_text


class CausalInputError(CertgateInputError):
    """A causal-fairness specification or query that cannot be used as given."""


@dataclass(frozen=True)
class FairnessProblem:
    """A network and the layout of its inputs for a causal-fairness certification.

    ``protected``: input indices of the protected feature. ``protected_cells``: ``(V, 2, k)``
    lower/upper values of the protected inputs for each cell (one-hot: a unit vector with
    lower = upper; continuous: an interval). ``continuous``: indices of the continuous
    non-protected inputs. ``onehot_groups``: index tuples of the non-protected one-hot groups.
    ``query_lower``/``query_upper``: the query box over all inputs (protected entries unused);
    ``query_allowed``: per one-hot group, a boolean mask of the categories the query admits.
    ``protected_query``: ``(2, k)`` the query's range of each protected input (its domain
    where the query names none). It conditions the population measure only: whether a point
    is biased compares every protected value, whatever the query says of them.
    ``domain_lower``/``domain_upper``: every input's domain; ``integer``: ``(n,)`` which inputs
    take only integer values (their query bounds are integers).
    """

    network: Network
    protected: tuple[int, ...]
    protected_kind: str
    protected_cells: np.ndarray
    continuous: tuple[int, ...]
    onehot_groups: tuple[tuple[int, ...], ...]
    query_lower: np.ndarray
    query_upper: np.ndarray
    query_allowed: tuple[np.ndarray, ...]
    domain_lower: np.ndarray
    domain_upper: np.ndarray
    integer: np.ndarray
    protected_query: np.ndarray

    @property
    def inputs(self) -> int:
        return self.network.input_size

    @property
    def cell_count(self) -> int:
        return int(self.protected_cells.shape[0])

    @property
    def point_cells(self) -> bool:
        """Whether every protected cell is one value (one-hot, integer or chosen values)."""
        return bool(np.all(self.protected_cells[:, 0] == self.protected_cells[:, 1]))

    def query_fraction(self) -> float:
        """The query's share of the whole non-protected domain under the uniform measure
        (integer inputs: share of their integer points)."""
        share = 1.0
        for index in self.continuous:
            span = self.domain_upper[index] - self.domain_lower[index]
            if self.integer[index]:
                share *= (self.query_upper[index] - self.query_lower[index] + 1) / (span + 1)
            elif span > 0:
                share *= (self.query_upper[index] - self.query_lower[index]) / span
        for allowed in self.query_allowed:
            share *= allowed.sum() / allowed.size
        return float(share)

    def probe_points(self) -> np.ndarray:
        """``(P, k)`` concrete protected values: the unit vectors (one-hot) or every cell
        endpoint (continuous). Two probes proven to give different classes on a whole
        partition make every point of it biased."""
        if self.protected_kind == "one_hot":
            return self.protected_cells[:, 0, :].copy()
        ends = np.unique(self.protected_cells[:, :, 0].ravel())
        return ends.reshape(-1, 1)


def build_problem(
    network: Network,
    protected: list[str],
    *,
    protected_kind: str = "continuous",
    split_values: list[float] | None = None,
    onehot_groups: list[list[str]] | None = None,
    query: dict[str, tuple[float, float]] | None = None,
    domain: dict[str, tuple[float, float]] | tuple[np.ndarray, np.ndarray] | None = None,
    integer_inputs: str | list[str] | None = None,
    protected_values: list[float] | list[str] | None = None,
) -> FairnessProblem:
    """Validate names and build a :class:`FairnessProblem`.

    The network is used as a classifier (:meth:`Network.as_classifier`: a classifier head is
    dropped, one output is a logit, class 1 iff > 0). ``domain``: every input's ``[min, max]``, as
    ``{name: (min, max)}`` (unnamed inputs keep ``[0, 1]``) or as two arrays over all inputs;
    default ``[0, 1]`` everywhere. ``integer_inputs``: ``"all"`` (every input outside one-hot
    groups) or the names of the integer-coded inputs. ``protected_values``: compare only these
    values of the protected feature (numbers for an integer or continuous input, input names for a
    one-hot group; at least two); default every value of its domain. ``split_values`` (continuous
    protected input only) cut its domain into cells.

    Raises :class:`CausalInputError` when a name is not an input of the network, one-hot
    groups overlap each other or the protected feature, a split or protected value is outside
    the domain, a domain is empty or an integer domain holds no integer, or the query box is
    empty.
    """
    names = list(network.input_names)
    position = {name: index for index, name in enumerate(names)}

    def index_of(name: str, role: str) -> int:
        if name not in position:
            onehot = [column for column in names if column.startswith(f"{name}=")]
            hint = (f"; its one-hot columns are {','.join(onehot)}: name them all, comma-"
                    "separated" if onehot else did_you_mean(name, names))
            raise CausalInputError(
                f"{role} {name!r} is not an input of the network{hint} (inputs: "
                f"{', '.join(names)})"
            )
        return position[name]

    if not protected:
        raise CausalInputError("the protected feature names no input")
    protected_idx = tuple(index_of(name, "protected feature") for name in protected)
    if len(set(protected_idx)) != len(protected_idx):
        raise CausalInputError(f"protected feature lists an input twice: {protected}")
    groups: list[tuple[int, ...]] = []
    seen: dict[int, str] = {i: "the protected feature" for i in protected_idx}
    for number, group in enumerate(onehot_groups or []):
        if len(group) < 2:
            raise CausalInputError(f"one-hot group {number} {group} needs at least two inputs")
        indices = tuple(index_of(name, f"one-hot group {number} input") for name in group)
        for index in indices:
            if index in seen:
                raise CausalInputError(
                    f"one-hot group {number} overlaps {seen[index]} at input {names[index]!r}"
                )
            seen[index] = f"one-hot group {number}"
        groups.append(indices)
    continuous = tuple(i for i in range(len(names)) if i not in seen)
    in_groups = {i for group in groups for i in group}
    if protected_kind == "one_hot":
        in_groups |= set(protected_idx)
    integer = _integer_mask(names, position, integer_inputs, in_groups)
    dom_lo, dom_hi = _domain(names, position, domain, integer, in_groups)
    cells = _protected_cells(protected_kind, protected_idx, names, split_values,
                             protected_values, dom_lo, dom_hi, integer)
    lower, upper, allowed = _query_box(names, position, protected_idx, groups, query or {},
                                       dom_lo, dom_hi, integer)
    wanted = np.stack([dom_lo, dom_hi])
    for name, (low, high) in (query or {}).items():
        if position[name] in protected_idx:
            wanted[:, position[name]] = _query_interval(name, position[name], low, high,
                                                        dom_lo, dom_hi, integer)
    return FairnessProblem(
        network=network.as_classifier().lowered(),
        protected=protected_idx,
        protected_kind=protected_kind,
        protected_cells=cells,
        continuous=continuous,
        onehot_groups=tuple(groups),
        query_lower=lower,
        query_upper=upper,
        query_allowed=tuple(allowed),
        domain_lower=dom_lo,
        domain_upper=dom_hi,
        integer=integer,
        protected_query=wanted[:, list(protected_idx)],
    )


def _integer_mask(names: list[str], position: dict[str, int], integer_inputs: str | list[str]
                  | None, in_groups: set[int]) -> np.ndarray:
    mask = np.zeros(len(names), dtype=bool)
    if integer_inputs is None:
        return mask
    if isinstance(integer_inputs, str):
        if integer_inputs != "all":
            raise CausalInputError(
                f"integer inputs must be 'all' or a list of input names, got {integer_inputs!r}"
            )
        mask[:] = True
    else:
        for name in integer_inputs:
            if name not in position:
                raise CausalInputError(f"integer input {name!r} is not an input of the network")
            mask[position[name]] = True
    mask[list(in_groups)] = False
    return mask


def _domain(names: list[str], position: dict[str, int],
            domain: dict[str, tuple[float, float]] | tuple[np.ndarray, np.ndarray] | None,
            integer: np.ndarray, in_groups: set[int]) -> tuple[np.ndarray, np.ndarray]:
    lower, upper = np.zeros(len(names)), np.ones(len(names))
    if isinstance(domain, dict):
        for name, (low, high) in domain.items():
            if name not in position:
                raise CausalInputError(f"domain input {name!r} is not an input of the network")
            lower[position[name]], upper[position[name]] = float(low), float(high)
    elif domain is not None:
        given_lo = np.asarray(domain[0], dtype=float).reshape(-1)
        given_hi = np.asarray(domain[1], dtype=float).reshape(-1)
        if given_lo.shape != (len(names),) or given_hi.shape != (len(names),):
            raise CausalInputError(
                f"the domain has {given_lo.size} minima and {given_hi.size} maxima for a network "
                f"with {len(names)} inputs"
            )
        lower, upper = given_lo.copy(), given_hi.copy()
    for index in range(len(names)):
        low, high = lower[index], upper[index]
        if not (np.isfinite(low) and np.isfinite(high)) or low > high:
            raise CausalInputError(
                f"the domain of input {names[index]!r} is [{low}, {high}]; it must be a finite, "
                "non-empty interval"
            )
        if index in in_groups and (low > 0.0 or high < 1.0):
            raise CausalInputError(
                f"one-hot input {names[index]!r} has domain [{low}, {high}]; it must contain "
                "0 and 1"
            )
    lower[list(in_groups)], upper[list(in_groups)] = 0.0, 1.0
    lower[integer], upper[integer] = np.ceil(lower[integer]), np.floor(upper[integer])
    empty = np.flatnonzero(integer & (lower > upper))
    if empty.size:
        raise CausalInputError(f"the domain of integer input {names[empty[0]]!r} holds no integer")
    return lower, upper


def _protected_cells(kind: str, protected: tuple[int, ...], names: list[str],
                     split_values: list[float] | None,
                     values: list[float] | list[str] | None, dom_lo: np.ndarray,
                     dom_hi: np.ndarray, integer: np.ndarray) -> np.ndarray:
    width = len(protected)
    if kind == "one_hot":
        if width < 2:
            raise CausalInputError("a one-hot protected feature needs at least two inputs")
        eye = np.eye(width)
        chosen = list(range(width))
        if values is not None:
            members = {names[i]: k for k, i in enumerate(protected)}
            unknown = [str(v) for v in values if str(v) not in members]
            if unknown:
                raise CausalInputError(
                    f"protected value {unknown[0]!r} is not an input of the one-hot protected "
                    f"feature ({', '.join(members)})"
                )
            chosen = sorted({members[str(v)] for v in values})
            _need_two([names[protected[k]] for k in chosen])
        return np.stack([eye[chosen], eye[chosen]], axis=1)
    if kind != "continuous":
        raise CausalInputError(f"protected kind must be 'continuous' or 'one_hot', got {kind!r}")
    if width != 1:
        raise CausalInputError("a continuous protected feature is exactly one input")
    index = protected[0]
    low, high = dom_lo[index], dom_hi[index]
    if values is not None:
        points = sorted({_number(v) for v in values})
        for point in points:
            if not low <= point <= high or (integer[index] and point != np.floor(point)):
                kind_text = "an integer in " if integer[index] else ""
                raise CausalInputError(
                    f"protected value {point} of {names[index]!r} is not {kind_text}its domain "
                    f"[{low}, {high}]"
                )
        _need_two(points)
        return np.repeat(np.array(points, dtype=float).reshape(-1, 1, 1), 2, axis=1)
    if integer[index]:
        if split_values:
            raise CausalInputError(
                f"split values cut a continuous protected input; {names[index]!r} is integer and "
                "compared at each of its values"
            )
        points = np.arange(low, high + 1.0)
        _need_two(points.tolist())
        return np.repeat(points.reshape(-1, 1, 1), 2, axis=1)
    if not low < high:
        raise CausalInputError(f"the protected input {names[index]!r} has a one-point domain")
    splits = sorted(split_values) if split_values else [0.5 * (low + high)]
    for value in splits:
        if not low < value < high:
            raise CausalInputError(
                f"protected split value {value} must lie in ({low}, {high})"
            )
    edges = np.array([low, *splits, high])
    return np.stack([edges[:-1], edges[1:]], axis=1).reshape(-1, 2, 1)


def _number(value: float | str) -> float:
    try:
        return float(value)
    except ValueError as error:
        raise CausalInputError(f"protected value {value!r} is not a number") from error


def _need_two(values: list) -> None:
    if len(values) < 2:
        raise CausalInputError(
            f"the protected values must name at least two different values, got {values}"
        )


def _query_box(
    names: list[str],
    position: dict[str, int],
    protected: tuple[int, ...],
    groups: list[tuple[int, ...]],
    query: dict[str, tuple[float, float]],
    dom_lo: np.ndarray,
    dom_hi: np.ndarray,
    integer: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    lower = dom_lo.copy()
    upper = dom_hi.copy()
    for name, (low, high) in query.items():
        if name not in position:
            raise CausalInputError(f"query input {name!r} is not an input of the network")
        index = position[name]
        if index in protected:
            continue
        lower[index], upper[index] = _query_interval(name, index, low, high, dom_lo, dom_hi,
                                                     integer)
    allowed = []
    for group in groups:
        forced = [i for i in group if lower[i] > 0.0]
        mask = np.array([upper[i] >= 1.0 for i in group]) if not forced else np.array(
            [i in forced for i in group]
        )
        if len(forced) > 1 or not mask.any():
            members = ", ".join(names[i] for i in group)
            raise CausalInputError(f"the query box is empty on the one-hot group {members}")
        allowed.append(mask)
    continuous_empty = [
        names[i] for i in range(len(names))
        if i not in protected and not any(i in g for g in groups) and not integer[i]
        and upper[i] <= lower[i] and dom_hi[i] > dom_lo[i]
    ]
    if continuous_empty:
        raise CausalInputError(
            f"the query box has zero volume on {', '.join(continuous_empty)}"
        )
    return lower, upper, allowed


def _query_interval(name: str, index: int, low: float, high: float, dom_lo: np.ndarray,
                    dom_hi: np.ndarray, integer: np.ndarray) -> tuple[float, float]:
    """The query's ``[low, high]`` on input ``index`` within its domain (an integer input's
    integers in it); raises :class:`CausalInputError` when they do not meet."""
    lower, upper = max(dom_lo[index], float(low)), min(dom_hi[index], float(high))
    if integer[index]:
        lower, upper = float(np.ceil(lower)), float(np.floor(upper))
    if lower > upper:
        raise CausalInputError(
            f"the query box is empty: {name} in [{low}, {high}] does not meet its domain "
            f"[{dom_lo[index]}, {dom_hi[index]}]" + (" at an integer" if integer[index] else "")
        )
    return lower, upper


def load_libra_spec(path: str | Path) -> dict[str, Any]:
    """Read a specification in the Libra benchmark format (``sensitive``, ``one_hot_groups``:
    that format's own keys) as :func:`build_problem`'s keyword arguments (``protected``,
    ``protected_kind``, ``split_values``, ``onehot_groups``)."""
    data = _read_json(path, "specification")
    protected = data.get("sensitive")
    if not isinstance(protected, dict) or "inputs" not in protected or "kind" not in protected:
        raise CausalInputError(f"{path}: 'sensitive' needs 'kind' and 'inputs'")
    split = protected.get("split_value")
    return {
        "protected": list(protected["inputs"]),
        "protected_kind": protected["kind"],
        "split_values": [float(split)] if split is not None else None,
        "onehot_groups": [list(g) for g in data.get("one_hot_groups", [])],
    }


def load_query_box(path: str | Path) -> dict[str, tuple[float, float]]:
    """Read a query box: Libra's format (``box`` of ``{lower, upper}``) or ``{name: [lo, hi]}``.

    A strict lower bound of 0 on a one-hot input (``x > 0``) forces that input to 1. An
    explicit empty ``box`` (Libra's query ``TRUE``) is the whole input space.
    """
    data = _read_json(path, "query")
    box = data.get("box", data)
    if isinstance(box, dict) and not box and "box" in data:
        return {}
    if not isinstance(box, dict) or not box:
        raise CausalInputError(f"{path}: the query names no input bounds")
    result: dict[str, tuple[float, float]] = {}
    for name, bounds in box.items():
        if isinstance(bounds, dict):
            low, high = float(bounds.get("lower", 0.0)), float(bounds.get("upper", 1.0))
            if bounds.get("lower_strict") and low == 0.0 and high == 1.0:
                low = SMALLEST_SUBNORMAL
        elif isinstance(bounds, list | tuple) and len(bounds) == 2:
            low, high = float(bounds[0]), float(bounds[1])
        else:
            raise CausalInputError(
                f"{path}: bounds of {name!r} must be {{lower, upper}} or [lo, hi]"
            )
        if low > high:
            raise CausalInputError(f"{path}: the query box is empty at {name!r}: [{low}, {high}]")
        result[str(name)] = (low, high)
    return result


def _read_json(path: str | Path, what: str) -> dict[str, Any]:
    file_path = Path(path)
    if not file_path.is_file():
        raise CausalInputError(f"{what} file not found: {file_path}")
    try:
        data = json.loads(read_text(file_path))
    except json.JSONDecodeError as error:
        raise CausalInputError(f"{what} file {file_path} is not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise CausalInputError(f"{what} file {file_path} must hold a JSON object")
    return data
