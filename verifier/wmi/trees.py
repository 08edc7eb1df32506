"""Scikit-learn decision trees and random forests as piecewise-constant models.

A fitted ``DecisionTreeClassifier`` (or extra tree) splits ``x[f] <= t`` (left) / ``x[f] > t``
(right); each leaf outputs its class-probability vector; output ``k`` is the class
``classes_[k]``. A ``RandomForestClassifier`` (or ``ExtraTreesClassifier``) outputs the mean of
its trees' vectors (what ``predict_proba`` returns; ``predict`` is its argmax). Only the branches
whose region is non-empty (LP) are followed. Splits are taken in real arithmetic; scikit-learn
compares float32-rounded features, which differs only within one float32 rounding of a
threshold (a set of relative measure about 1e-7 per split).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier, ExtraTreeClassifier

from verifier.errors import CertgateInputError
from verifier.wmi.regions import Outputs, PiecewiseAffineModel, Region


class TreeModelError(CertgateInputError):
    """A tree model is not a fitted scikit-learn classifier this module can encode."""


def _tree_arrays(estimator: Any, classes: int) -> dict[str, np.ndarray]:
    tree = getattr(estimator, "tree_", None)
    if tree is None:
        raise TreeModelError(
            f"{type(estimator).__name__} is not a fitted DecisionTreeClassifier (no tree_)"
        )
    values = np.asarray(tree.value)[:, 0, :classes].astype(np.float64)
    totals = values.sum(axis=1, keepdims=True)
    return {
        "left": np.asarray(tree.children_left), "right": np.asarray(tree.children_right),
        "feature": np.asarray(tree.feature), "threshold": np.asarray(tree.threshold),
        "proba": values / np.where(totals > 0, totals, 1.0),
    }


class ForestModel(PiecewiseAffineModel):
    """A decision tree (one member) or a random forest (mean of the members' probabilities)."""

    def __init__(self, estimator: Any) -> None:
        if isinstance(estimator, RandomForestClassifier | ExtraTreesClassifier):
            members = list(getattr(estimator, "estimators_", []))
        elif isinstance(estimator, DecisionTreeClassifier | ExtraTreeClassifier):
            members = [estimator]
        else:
            raise TreeModelError(
                f"unsupported model type {type(estimator).__name__}: give a network, a "
                "DecisionTreeClassifier or a RandomForestClassifier"
            )
        classes = getattr(estimator, "n_classes_", None)
        if not members or classes is None or not isinstance(classes, int | np.integer):
            raise TreeModelError(
                f"{type(estimator).__name__}: only fitted single-output classifiers are supported"
            )
        self.output_size = int(classes)
        self.trees = [_tree_arrays(member, self.output_size) for member in members]
        self.input_size = int(getattr(estimator, "n_features_in_", 0))

    def predict_scores(self, x: np.ndarray) -> np.ndarray:
        """Mean leaf probability vectors at points ``(N, d)`` (the reference semantics)."""
        total = np.zeros((x.shape[0], self.output_size))
        for tree in self.trees:
            node = np.zeros(x.shape[0], dtype=np.int64)
            for _ in range(tree["left"].size):
                internal = tree["left"][node] >= 0
                if not internal.any():
                    break
                go_left = x[np.arange(x.shape[0]), np.maximum(tree["feature"][node], 0)] <= \
                    tree["threshold"][node]
                step = np.where(go_left, tree["left"][node], tree["right"][node])
                node = np.where(internal, step, node)
            total += tree["proba"][node]
        return total / len(self.trees)

    def pieces(self, region: Region, matrix: np.ndarray, offset: np.ndarray,
               z_lo: np.ndarray, z_hi: np.ndarray) -> Iterator[tuple[Region, Outputs]]:
        if matrix.shape[0] != self.input_size:
            raise TreeModelError(
                f"the tree model reads {self.input_size} features, the input has "
                f"{matrix.shape[0]}"
            )
        width = matrix.shape[1]
        for leaf_region, total in self._trees(region, 0, np.zeros(self.output_size), matrix,
                                              offset):
            scores = total / len(self.trees)
            yield leaf_region, (np.zeros((self.output_size, width)), scores)

    def _trees(self, region: Region, index: int, total: np.ndarray, matrix: np.ndarray,
               offset: np.ndarray) -> Iterator[tuple[Region, np.ndarray]]:
        if index == len(self.trees):
            yield region, total
            return
        tree = self.trees[index]
        stack = [(region, 0)]
        while stack:
            current, node = stack.pop()
            if tree["left"][node] < 0:
                yield from self._trees(current, index + 1, total + tree["proba"][node], matrix,
                                       offset)
                continue
            feature, threshold = tree["feature"][node], tree["threshold"][node]
            right, left = current.split(matrix[feature], float(offset[feature] - threshold))
            if right is not None:
                stack.append((right, int(tree["right"][node])))
            if left is not None:
                stack.append((left, int(tree["left"][node])))
