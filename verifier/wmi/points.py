"""Queries with nothing to integrate: a prior term (or a pair of terms a property compares)
that fixes every coordinate, so each placed model reads one point.

Such a query has ``dimension`` 0 and no roots (:func:`verifier.wmi.engine.point_query`,
its placements made by :func:`point_placement`); its mass is its
coefficient and its violating mass the coefficient or nothing, as the violation condition
decides at the points. The condition is the one the region enumeration evaluates
(:mod:`verifier.wmi.encode`), read on constant outputs: a network's outputs in exact rational
arithmetic (:func:`verifier.exact_arith.exact_outputs` of the placed classifier or logits
view, so ties are decided as the class rule says), a tree's or forest's leaf scores (as its
regions are encoded). A folded network's IR is a rounded stand-in for the model: its points
are read by their certified classes, and one it cannot decide keeps its whole mass as
possibly violating (the interval widens); nothing is approximated.
"""

from __future__ import annotations

import numpy as np

from verifier.causal.witness import certified_classes
from verifier.exact_arith import exact_outputs
from verifier.wmi.encode import Decrease, Placement, WMIInputError
from verifier.wmi.regions import NetworkModel, Outputs, PiecewiseAffineModel
from verifier.wmi.trees import ForestModel

Mass = tuple[float, float]


def point_placement(model: PiecewiseAffineModel, point: np.ndarray) -> Placement:
    """``model`` read at the fixed input ``point`` (a placement on zero coordinates)."""
    point = np.asarray(point, dtype=np.float64)
    return Placement(model, np.zeros((point.size, 0)), point)


class PointOutputs:
    """Constant outputs of placed models at their points, each (model, point, reading)
    evaluated once (a monotonicity pair's first point recurs with every larger value)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[int, bytes, bool], Outputs | None] = {}

    def __call__(self, placement: Placement, values: bool) -> Outputs | None:
        """The outputs at the placement's point (:func:`_outputs`)."""
        if placement.matrix.shape[1] != 0:
            raise WMIInputError("a point query's placements read no integration coordinate")
        key = (id(placement.model), placement.offset.tobytes(), values)
        if key not in self._cache:
            self._cache[key] = _outputs(placement.model, placement.offset, values)
        return self._cache[key]

    def violating(self, placements: list[Placement], violation: object) -> Mass:
        """``(1, 1)`` where ``violation`` holds at the placements' points, ``(0, 0)`` where it
        does not, ``(0, 1)`` where a folded network leaves it undecided: on constant outputs
        every row of a cell is decided, so the condition returns a cell (with no rows left)
        exactly when it holds."""
        values = isinstance(violation, Decrease)
        outputs = [self(placement, values) for placement in placements]
        if any(output is None for output in outputs):
            return 0.0, 1.0
        cells = violation(outputs)  # type: ignore[operator]
        return (1.0, 1.0) if cells else (0.0, 0.0)


def _outputs(model: PiecewiseAffineModel, point: np.ndarray, values: bool) -> Outputs | None:
    """A network's outputs in exact rational arithmetic; a folded network's (a rounded
    stand-in for the model, :attr:`~verifier.network.Network.folded`) only as its certified
    class (:func:`~verifier.causal.witness.certified_classes`), written as the unit vector of
    that class, which every class condition reads as that class, and None (undecided) where
    the class is not certified or a condition reads ``values``; a tree's or forest's leaf
    scores (as its regions are encoded)."""
    if isinstance(model, NetworkModel) and not model.network.folded:
        outputs = np.array(exact_outputs(model.network, point.tolist()), dtype=object)
    elif isinstance(model, NetworkModel):
        chosen = -1 if values else int(certified_classes(model.network, point[None, :])[0])
        if chosen < 0:
            return None
        outputs = np.eye(model.output_size)[chosen]
    elif isinstance(model, ForestModel):
        outputs = model.predict_scores(point[None, :])[0]
    else:
        raise WMIInputError(f"cannot read a {type(model).__name__} at a point")
    # one coordinate whose coefficients are all zero: every row of a cell is decided by its
    # constant alone (a cell's rows keep their shape, which zero columns cannot)
    return np.zeros((outputs.shape[0], 1)), outputs
