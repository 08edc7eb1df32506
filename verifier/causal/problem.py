"""What a causal-fairness question is: the network, the sensitive feature, the non-sensitive
layout (continuous inputs and one-hot groups) and the query region.

Every input is assumed to range over ``[0, 1]`` (min-max scaled, as in the Libra benchmarks);
one-hot groups take unit vectors. The sensitive feature is either a one-hot group (its values are
the unit vectors) or one continuous input whose range ``[0, 1]`` is covered by *cells*
(intervals, e.g. Libra's value classes ``[0, p)`` and ``[p, 1]``). Cells only steer the bound
computations; the fairness question always ranges over the whole sensitive domain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from verifier.errors import CertgateInputError
from verifier.network import Network


class CausalInputError(CertgateInputError):
    """A causal-fairness specification or query that cannot be used as given."""


@dataclass(frozen=True)
class FairnessProblem:
    """A network and the layout of its inputs for a causal-fairness certification.

    ``sensitive``: input indices of the sensitive feature. ``sensitive_cells``: ``(V, 2, k)``
    lower/upper values of the sensitive inputs for each cell (one-hot: a unit vector with
    lower = upper; continuous: an interval). ``continuous``: indices of the continuous
    non-sensitive inputs. ``onehot_groups``: index tuples of the non-sensitive one-hot groups.
    ``query_lower``/``query_upper``: the query box over all inputs (sensitive entries unused);
    ``query_allowed``: per one-hot group, a boolean mask of the categories the query admits.
    """

    network: Network
    sensitive: tuple[int, ...]
    sensitive_kind: str
    sensitive_cells: np.ndarray
    continuous: tuple[int, ...]
    onehot_groups: tuple[tuple[int, ...], ...]
    query_lower: np.ndarray
    query_upper: np.ndarray
    query_allowed: tuple[np.ndarray, ...]

    @property
    def inputs(self) -> int:
        return self.network.input_size

    @property
    def cell_count(self) -> int:
        return int(self.sensitive_cells.shape[0])

    def query_fraction(self) -> float:
        """The query's share of the whole non-sensitive space under the uniform measure."""
        share = 1.0
        for index in self.continuous:
            share *= self.query_upper[index] - self.query_lower[index]
        for allowed in self.query_allowed:
            share *= allowed.sum() / allowed.size
        return float(share)

    def probe_points(self) -> np.ndarray:
        """``(P, k)`` concrete sensitive values: the unit vectors (one-hot) or every cell
        endpoint (continuous). Two probes proven to give different classes on a whole
        partition make every point of it biased."""
        if self.sensitive_kind == "one_hot":
            return self.sensitive_cells[:, 0, :].copy()
        ends = np.unique(self.sensitive_cells[:, :, 0].ravel())
        return ends.reshape(-1, 1)


def build_problem(
    network: Network,
    sensitive: list[str],
    *,
    sensitive_kind: str = "continuous",
    split_values: list[float] | None = None,
    onehot_groups: list[list[str]] | None = None,
    query: dict[str, tuple[float, float]] | None = None,
) -> FairnessProblem:
    """Validate names and build a :class:`FairnessProblem`.

    Raises :class:`CausalInputError` when a name is not an input of the network, one-hot
    groups overlap each other or the sensitive feature, a split value is outside ``(0, 1)``, or
    the query box is empty.
    """
    names = list(network.input_names)
    position = {name: index for index, name in enumerate(names)}

    def index_of(name: str, role: str) -> int:
        if name not in position:
            raise CausalInputError(
                f"{role} {name!r} is not an input of the network (inputs: {', '.join(names)})"
            )
        return position[name]

    if not sensitive:
        raise CausalInputError("the sensitive feature names no input")
    sensitive_idx = tuple(index_of(name, "sensitive feature") for name in sensitive)
    if len(set(sensitive_idx)) != len(sensitive_idx):
        raise CausalInputError(f"sensitive feature lists an input twice: {sensitive}")
    cells = _sensitive_cells(sensitive_kind, len(sensitive_idx), split_values)
    groups: list[tuple[int, ...]] = []
    seen: dict[int, str] = {i: "the sensitive feature" for i in sensitive_idx}
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
    lower, upper, allowed = _query_box(names, position, sensitive_idx, groups, query or {})
    return FairnessProblem(
        network=network.lowered(),
        sensitive=sensitive_idx,
        sensitive_kind=sensitive_kind,
        sensitive_cells=cells,
        continuous=continuous,
        onehot_groups=tuple(groups),
        query_lower=lower,
        query_upper=upper,
        query_allowed=tuple(allowed),
    )


def _sensitive_cells(kind: str, width: int, split_values: list[float] | None) -> np.ndarray:
    if kind == "one_hot":
        if width < 2:
            raise CausalInputError("a one-hot sensitive feature needs at least two inputs")
        eye = np.eye(width)
        return np.stack([eye, eye], axis=1)
    if kind != "continuous":
        raise CausalInputError(f"sensitive kind must be 'continuous' or 'one_hot', got {kind!r}")
    if width != 1:
        raise CausalInputError("a continuous sensitive feature is exactly one input")
    splits = sorted(split_values if split_values else [0.5])
    for value in splits:
        if not 0.0 < value < 1.0:
            raise CausalInputError(f"sensitive split value {value} must lie in (0, 1)")
    edges = np.array([0.0, *splits, 1.0])
    return np.stack([edges[:-1], edges[1:]], axis=1).reshape(-1, 2, 1)


def _query_box(
    names: list[str],
    position: dict[str, int],
    sensitive: tuple[int, ...],
    groups: list[tuple[int, ...]],
    query: dict[str, tuple[float, float]],
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    lower = np.zeros(len(names))
    upper = np.ones(len(names))
    for name, (low, high) in query.items():
        if name not in position:
            raise CausalInputError(f"query input {name!r} is not an input of the network")
        index = position[name]
        if index in sensitive:
            continue
        lower[index] = max(0.0, float(low))
        upper[index] = min(1.0, float(high))
        if lower[index] > upper[index]:
            raise CausalInputError(
                f"the query box is empty: {name} in [{low}, {high}] does not meet [0, 1]"
            )
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
        if i not in sensitive and not any(i in g for g in groups) and upper[i] <= lower[i]
    ]
    if continuous_empty:
        raise CausalInputError(
            f"the query box has zero volume on {', '.join(continuous_empty)}"
        )
    return lower, upper, allowed


def load_libra_spec(path: str | Path) -> dict[str, Any]:
    """Read a specification in the Libra benchmark format (``sensitive``, ``one_hot_groups``)."""
    data = _read_json(path, "specification")
    sensitive = data.get("sensitive")
    if not isinstance(sensitive, dict) or "inputs" not in sensitive or "kind" not in sensitive:
        raise CausalInputError(f"{path}: 'sensitive' needs 'kind' and 'inputs'")
    split = sensitive.get("split_value")
    return {
        "sensitive": list(sensitive["inputs"]),
        "sensitive_kind": sensitive["kind"],
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
                low = np.nextafter(0.0, 1.0)
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
        data = json.loads(file_path.read_text())
    except json.JSONDecodeError as error:
        raise CausalInputError(f"{what} file {file_path} is not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise CausalInputError(f"{what} file {file_path} must hold a JSON object")
    return data
