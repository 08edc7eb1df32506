"""The models a WMI property reads: a network, or a fitted scikit-learn
``DecisionTreeClassifier`` / ``RandomForestClassifier``, wrapped as a
:class:`~verifier.wmi.regions.PiecewiseAffineModel` (:func:`as_model`); the input columns it
reads (:func:`read_columns`), the number of its inputs (:func:`input_size`) and its class at a
point (:func:`checked_class`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from verifier.causal.witness import certified_classes
from verifier.network import Network, head_error
from verifier.wmi.encode import WMIInputError
from verifier.wmi.regions import NetworkModel, PiecewiseAffineModel
from verifier.wmi.trees import ForestModel


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
    return set(range(input_size(model)))


def input_size(*models: PiecewiseAffineModel) -> int:
    """The number of inputs every model reads; :class:`WMIInputError` if they differ."""
    sizes = {model.network.input_size if isinstance(model, NetworkModel) else model.input_size
             for model in models}
    if len(sizes) != 1:
        raise WMIInputError(f"the models read different numbers of inputs: {sorted(sizes)}")
    return sizes.pop()


def _predicted_class(model: PiecewiseAffineModel, point: np.ndarray) -> int:
    """The class the model predicts at ``point``: a network's in real arithmetic
    (:func:`~verifier.causal.witness.certified_classes`, the tie rule; a float evaluation
    can put a tie or a near-tie on either side), a forest's argmax of its scores. Raises
    :class:`WMIInputError` when a folded network cannot decide it."""
    if isinstance(model, NetworkModel):
        chosen = int(certified_classes(model.network, point[None])[0])
        if chosen < 0:
            raise WMIInputError(
                "the class at the centre is a tie, or within rounding of one, that the "
                "network's folded coefficients cannot decide; give the expected class")
        return chosen
    if isinstance(model, ForestModel):
        return int(np.argmax(model.predict_scores(point[None])[0]))
    raise WMIInputError("give the expected class explicitly for this model type")


def checked_class(model: Any, bound_method: str, center: Any,
                  expected_class: int | None) -> int:
    """The class local robustness checks: ``expected_class``, or when it is None the class
    of ``model`` (wrapped by :func:`as_model`) at ``center``."""
    if expected_class is not None:
        return int(expected_class)
    point = np.asarray(center, dtype=np.float64).reshape(-1)
    return _predicted_class(as_model(model, bound_method), point)
