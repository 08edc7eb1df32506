"""Order graphs of conjunctions of order literals, and what the SC-layer needs from them.

Paper 004 App. B: the order graph of a conjunction ``q`` has an edge ``i → j`` for every literal
``y_j < y_i`` (from the larger to the smaller class); as an adjacency matrix ``M[i, j] = 1``.
``q`` is satisfiable iff its graph is acyclic. All functions are batched over a leading axis of
graphs and written in TorchScript-compatible torch, so the layer can call them at run time for
disjunct combinations it has not met before.
"""

import torch
from torch import Tensor


def adjacency_from_literals(literals: list[tuple[int, int]], num_classes: int) -> Tensor:
    """``[m, m]`` bool adjacency of one conjunction: ``M[b, a] = True`` for each ``y_a < y_b``."""
    adjacency = torch.zeros(num_classes, num_classes, dtype=torch.bool)
    for smaller, larger in literals:
        adjacency[larger, smaller] = True
    return adjacency


def longest_paths(adjacency: Tensor) -> Tensor:
    """All-pairs longest paths by max-plus squaring (paper App. B.1, Eq. 9).

    ``P¹[i, j]`` is 1 for an edge, 0 on the diagonal without a self-loop, −∞ otherwise; squaring
    ``⌈log₂ m⌉`` times gives ``P``. On an acyclic graph ``P[i, j]`` is the length of the longest
    path ``i → j`` (0 for ``i = j``, −∞ if ``j`` is unreachable from ``i``). On a cyclic graph
    ``P[i, i] > 0`` for every vertex on a cycle (paper App. B.2), which is all it is used for.

    Args:
        adjacency: ``[..., m, m]`` bool.

    Returns:
        ``[..., m, m]`` float64, entries in ``{−∞} ∪ [0, 2^⌈log₂ m⌉·m]`` (never NaN).
    """
    size = adjacency.shape[-1]
    eye = torch.eye(size, dtype=torch.bool, device=adjacency.device)
    neg_inf = torch.full(
        adjacency.shape, float("-inf"), dtype=torch.float64, device=adjacency.device
    )
    paths = torch.where(
        adjacency, torch.ones_like(neg_inf), torch.where(eye, torch.zeros_like(neg_inf), neg_inf)
    )
    reach = 1  # paths of up to `reach` edges are accounted for; 2^⌈log₂ m⌉ >= m at the end
    while reach < size:
        reach *= 2
        # (P ⊗ P)[i, j] = max_k P[i, k] + P[k, j]; −∞ + finite = −∞, and +∞ never occurs.
        paths = (paths.unsqueeze(-1) + paths.unsqueeze(-3)).amax(dim=-2)
    return paths


def graph_tables(adjacency: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Everything the layer needs from a batch of order graphs, computed once.

    Args:
        adjacency: ``[n, m, m]`` bool.

    Returns:
        ``cyclic`` ``[n]`` bool (unsatisfiable conjunction); ``roots`` ``[n, m]`` bool (in-degree
        0); ``ancestors`` ``[n, m, m]`` bool, ``ancestors[g, i, j]`` iff ``i = j`` or a path
        ``i → j`` exists; ``depth`` ``[n, m]`` float64, the longest path into each vertex.
        ``ancestors`` and ``depth`` are meaningful for acyclic graphs only.
    """
    paths = longest_paths(adjacency)
    cyclic = torch.diagonal(paths, dim1=-2, dim2=-1).gt(0.0).any(dim=-1)
    roots = ~adjacency.any(dim=-2)
    ancestors = paths.ge(0.0)
    depth = paths.amax(dim=-2)
    return cyclic, roots, ancestors, depth
