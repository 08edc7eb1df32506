"""How a causal certificate names a region of the query and a witness of bias (shared by the
partitioning certifier and the exact enumeration of finite queries)."""

from __future__ import annotations

import numpy as np

from verifier.causal.problem import FairnessProblem


def names_box(problem: FairnessProblem, lower: np.ndarray, upper: np.ndarray) -> dict:
    """A partition by input names: each continuous (or integer) input's interval and each
    one-hot group's allowed categories."""
    names = problem.network.input_names
    box = {names[i]: [float(lower[i]), float(upper[i])] for i in problem.continuous}
    categories = {
        ",".join(names[i] for i in group): [names[i] for i in group if upper[i] > 0.5]
        for group in problem.onehot_groups
    }
    return {"box": box, "categories": categories}


def witness_record(a: np.ndarray, b: np.ndarray, classes: tuple[int, int]) -> dict:
    """A witness pair and its two certified classes."""
    return {"x": a.tolist(), "x_other": b.tolist(), "classes": [int(classes[0]), int(classes[1])]}
