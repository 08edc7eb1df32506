"""Witnesses are proof objects: their classes are decided in real arithmetic, not in float.

A witness of bias is two points that differ only in protected inputs and get two different
classes under the class rule of :mod:`verifier.causal.classes` (argmax, ties to the lowest
index; a tie is a class). Float evaluation can disagree with the real-arithmetic value when
two outputs are within rounding of each other, so a witness is kept only when both classes
are *certified*.
"""

from __future__ import annotations

import numpy as np

from verifier.causal.classes import exact_class, proven_from_lower
from verifier.exact_arith import exact_outputs
from verifier.network import Network
from verifier.numerics import add_down
from verifier.point_enclosure import enclose_outputs


def certified_classes(network: Network, points: np.ndarray) -> np.ndarray:
    """The class of each point in real arithmetic (argmax, ties to the lowest index), or −1
    where the IR cannot decide it.

    First a sound enclosure of the outputs at every point, vectorised over the batch
    (:func:`~verifier.point_enclosure.enclose_outputs`: float64 with Higham's per-layer
    rounding bound, about 10⁻¹⁴ relative where the box bounds' margin is 10⁻⁹, so that it
    still decides witnesses through 32 layers); a point it leaves undecided (an exact tie, or
    outputs within the enclosure's width of each other) is evaluated exactly in rational
    arithmetic, which is the model's real value. A folded IR is a rounded stand-in for the
    model: its points are bounded by :func:`~verifier.bounds.compute_bounds` (whose margins
    cover folded coefficients), and one they leave undecided stays −1.
    """
    points = np.atleast_2d(np.asarray(points, dtype=np.float64))
    classes = network.output_size
    if network.folded:
        from verifier.bounds import compute_bounds, pairwise_difference_spec  # folded networks only

        result = compute_bounds(network, points, points, pairwise_difference_spec(classes), "ibp")
        return proven_from_lower(result.lower, classes)
    lower, upper = enclose_outputs(network, points)
    first, second = np.nonzero(~np.eye(classes, dtype=bool))  # the pairwise spec's row order
    certified = proven_from_lower(add_down(lower[:, first], -upper[:, second]), classes)
    for row in np.flatnonzero(certified < 0):
        certified[row] = exact_class(exact_outputs(network, points[row]))
    return certified


def confirmed_pairs(
    network: Network, x_a: np.ndarray, x_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which candidate witness pairs are genuine (both classes certified and different), with
    the certified classes of ``x_a`` and ``x_b`` (−1 where not certified)."""
    x_a = np.atleast_2d(x_a)
    classes = certified_classes(network, np.vstack([x_a, np.atleast_2d(x_b)]))
    class_a, class_b = classes[: x_a.shape[0]], classes[x_a.shape[0] :]
    return (class_a >= 0) & (class_b >= 0) & (class_a != class_b), class_a, class_b
