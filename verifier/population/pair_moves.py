"""A structure-search move that single-edge hill climbing lacks: two parents added to one
node at once.

Hill climbing (pgmpy's ``HillClimbSearch``) adds, removes or flips one edge at a time, so it
never finds a node that depends on two others only jointly: when ``c`` agrees with
``a XOR b``, each of ``a`` and ``b`` alone is independent of ``c`` and no single edge raises
the score, while the pair explains ``c``. pgmpy has no such move (its other searches, PC and
MMHC, start from pairwise or conditional independence tests, which the same pair passes), so
:func:`best_pair_move` scores every pair of new parents of every node with the search's own
score and :func:`verifier.population.structure.learn_structure` alternates the best such move
with hill climbing until none raises the score.

Cost: one local score per (node, pair) — at most ``PAIR_SCORES`` per round, nodes in column
order (a fit given ``--model`` keeps only the network's columns, so those are the ones
searched); a node past the budget is not searched for pairs that round.
"""

from __future__ import annotations

import itertools
from typing import Any

import networkx as nx

PAIR_SCORES = 20_000
"""The most local scores one round of :func:`best_pair_move` computes (~30 µs each on 4,000
rows): every pair of every node of a table of about 35 features."""
PAIR_ROUNDS = 4
"""The most pair moves one search makes."""
PAIR_EPSILON = 1e-4
"""The least score gain a pair move must bring (pgmpy's hill climbing's ``epsilon``)."""


def best_pair_move(dag: nx.DiGraph, score: Any, forbidden: set[tuple[int, int]],
                   max_indegree: int, budget: int = PAIR_SCORES
                   ) -> tuple[int, int, int] | None:
    """``(a, b, child)``: the two new parents ``a < b`` of ``child`` whose addition raises
    ``score`` (pgmpy's decomposable score: ``score.local_score(node, parents)``) the most,
    by more than ``PAIR_EPSILON``; ``None`` when no pair does. The move keeps ``dag``
    acyclic (neither parent descends from ``child``), allows no ``forbidden`` edge and keeps
    ``child`` within ``max_indegree`` parents. At most ``budget`` pairs are scored."""
    best: tuple[int, int, int] | None = None
    best_gain = PAIR_EPSILON
    spent = 0
    for child in sorted(dag.nodes()):
        parents = tuple(sorted(dag.predecessors(child)))
        if len(parents) + 2 > max_indegree:
            continue
        blocked = nx.descendants(dag, child) | set(parents) | {child}
        candidates = [node for node in sorted(dag.nodes())
                      if node not in blocked and (node, child) not in forbidden]
        pairs = list(itertools.combinations(candidates, 2))
        if spent + len(pairs) > budget:
            break
        spent += len(pairs)
        base = score.local_score(child, parents)
        for first, second in pairs:
            gain = score.local_score(child, (*parents, first, second)) - base
            if gain > best_gain:
                best, best_gain = (first, second, child), gain
    return best
