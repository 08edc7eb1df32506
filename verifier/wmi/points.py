"""Queries with nothing to integrate: a prior term (or a pair of terms a property compares)
that fixes every coordinate, so each placed model reads one point.

Such a query has ``dimension`` 0 and no roots (:func:`verifier.wmi.engine.point_query`,
its placements made by :func:`point_placement`); its mass is its
coefficient and its violating mass the coefficient or nothing, as the violation condition
decides at the points. The condition is the one the region enumeration evaluates
(:mod:`verifier.wmi.encode`), read on constant outputs: a network's outputs in exact rational
arithmetic (:func:`verifier.exact_arith.exact_outputs` of the placed classifier or logits
view, the same IR whose affine pieces the enumeration integrates, so ties are decided as the
class rule says), a tree's or forest's leaf scores (as its regions are encoded). Every
point is decided: nothing is left undecided or approximated.
"""

from __future__ import annotations

import numpy as np

from verifier.exact_arith import exact_outputs
from verifier.wmi.encode import Placement, WMIInputError
from verifier.wmi.regions import NetworkModel, Outputs, PiecewiseAffineModel
from verifier.wmi.trees import ForestModel

Mass = tuple[float, float]


def point_placement(model: PiecewiseAffineModel, point: np.ndarray) -> Placement:
    """``model`` read at the fixed input ``point`` (a placement on zero coordinates)."""
    point = np.asarray(point, dtype=np.float64)
    return Placement(model, np.zeros((point.size, 0)), point)


class PointOutputs:
    """Exact constant outputs of placed models at their points, each (model, point)
    evaluated once (a monotonicity pair's first point recurs with every larger value)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[int, bytes], Outputs] = {}

    def __call__(self, placement: Placement) -> Outputs:
        if placement.matrix.shape[1] != 0:
            raise WMIInputError("a point query's placements read no integration coordinate")
        key = (id(placement.model), placement.offset.tobytes())
        if key not in self._cache:
            self._cache[key] = _outputs(placement.model, placement.offset)
        return self._cache[key]

    def violating(self, placements: list[Placement], violation: object) -> Mass:
        """``(1, 1)`` where ``violation`` holds at the placements' points, else ``(0, 0)``:
        on constant outputs every row of a cell is decided, so the condition returns a cell
        (with no rows left) exactly when it holds."""
        cells = violation([self(placement) for placement in placements])  # type: ignore[operator]
        return (1.0, 1.0) if cells else (0.0, 0.0)


def _outputs(model: PiecewiseAffineModel, point: np.ndarray) -> Outputs:
    if isinstance(model, NetworkModel):
        values = np.array(exact_outputs(model.network, point.tolist()), dtype=object)
    elif isinstance(model, ForestModel):
        values = model.predict_scores(point[None, :])[0]
    else:
        raise WMIInputError(f"cannot read a {type(model).__name__} at a point")
    # one coordinate whose coefficients are all zero: every row of a cell is decided by its
    # constant alone (a cell's rows keep their shape, which zero columns cannot)
    return np.zeros((values.shape[0], 1)), values

