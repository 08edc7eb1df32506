"""A node that depends on two others only jointly: ``c`` agrees with ``a XOR b``. Each of
``a`` and ``b`` alone is independent of ``c`` (and, given the protected attribute, so is
each pair), so single-edge hill climbing adds no edge that holds the dependence and the
fitted population had ``c`` independent of ``(a, b)``; the default fit's pair move
(:mod:`verifier.population.pair_moves`) adds both parents at once.

Oracle: the generator's closed form. ``P(c = a XOR b | a, b)`` is the agreement rate in every
cell of ``(a, b)`` (and of the protected attribute); the fitted population's conditional
(exact, from its box probabilities) must lie within ``TOLERANCE_SE`` binomial standard
errors of it, for the cell's row count in the table. The same fit without the pair move must
miss it by more than that bound: the test shows the move is what keeps the dependence."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import verifier.population.structure as structure
from certgate.population_data import fit_population
from verifier.population.model import PopulationModel
from verifier.population.pair_moves import best_pair_move

TOLERANCE_SE = 5.0


def xor_table(rows: int, agreement: dict[str, float], seed: int) -> pd.DataFrame:
    """Binary ``a, b`` fair coins, ``c = a XOR b`` with probability ``agreement[sex]``
    (``sex`` a fair coin over the keys), and an independent noise column ``d``."""
    rng = np.random.default_rng(seed)
    sexes = np.array(sorted(agreement))
    sex = sexes[rng.integers(0, len(sexes), rows)]
    a, b, d = (rng.integers(0, 2, rows) for _ in range(3))
    keep = rng.random(rows) < np.vectorize(agreement.get)(sex)
    c = np.where(keep, a ^ b, 1 - (a ^ b))
    return pd.DataFrame({"sex": sex, "a": a, "b": b, "c": c, "d": d})


def point_probability(model: PopulationModel, values: dict[str, float]) -> float:
    """The population's probability that every named column equals its value (the others
    anywhere in the domain)."""
    low, high = model.domain_box()
    low, high = low.copy(), high.copy()
    for column, value in values.items():
        index = model.columns.index(column)
        low[index] = high[index] = value
    return float(model.prob_boxes(low[None, :], high[None, :])[0])


def agreement_in_cells(model: PopulationModel, frame: pd.DataFrame, sex: str | None
                       ) -> list[tuple[float, int]]:
    """For each cell ``(a, b)`` (within ``sex=...`` when given): the population's
    ``P(c = a XOR b | cell)`` and the cell's row count in ``frame``."""
    found = []
    for a, b in itertools.product((0, 1), repeat=2):
        cell = {"a": a, "b": b, **({f"sex={sex}": 1} if sex else {})}
        joint = point_probability(model, {**cell, "c": a ^ b})
        rows = int(((frame.a == a) & (frame.b == b) & ((frame.sex == sex) if sex else True)).sum())
        found.append((joint / point_probability(model, cell), rows))
    return found


def misses(model: PopulationModel, frame: pd.DataFrame, agreement: dict[str, float],
           by_sex: bool) -> list[float]:
    """Every cell's distance from the true agreement in standard errors of the cell's rows
    (cells within each sex when ``by_sex``, else over both: then the agreement is one rate)."""
    groups = list(agreement.items()) if by_sex else [(None, *set(agreement.values()))]
    distances = []
    for sex, rate in groups:
        for fitted, rows in agreement_in_cells(model, frame, sex):
            distances.append(abs(fitted - rate) / np.sqrt(rate * (1 - rate) / rows))
    return distances


@pytest.mark.parametrize(("agreement", "protected"), [
    ({"F": 0.8, "M": 0.8}, None),
    ({"F": 0.75, "M": 0.45}, "sex"),
])
def test_a_joint_dependence_no_single_edge_shows_is_fitted(
        agreement: dict[str, float], protected: str | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    frame = xor_table(6000, agreement, seed=31)
    by_sex = protected is not None
    fitted = misses(fit_population(frame, protected=protected), frame, agreement, by_sex)
    assert max(fitted) <= TOLERANCE_SE, fitted
    monkeypatch.setattr(structure, "PAIR_ROUNDS", 0)
    single_edge = misses(fit_population(frame, protected=protected), frame, agreement, by_sex)
    assert max(single_edge) > TOLERANCE_SE, single_edge


def test_the_pair_search_keeps_to_its_budget_of_scores() -> None:
    """On the XOR table's codes (nodes ``a, b, c, d`` = 0..3, no edges) the best move makes
    ``c``'s agreement with ``a XOR b`` explained: two of the three as parents of the third.
    A budget below the first node's 3 pairs scores none of them; the first node's 3 pairs
    alone find its move; the whole search needs 4 nodes × 3 pairs."""
    frame = xor_table(6000, {"F": 0.8, "M": 0.8}, seed=31)[["a", "b", "c", "d"]]
    table = pd.DataFrame({index: pd.Categorical(frame[name]) for index, name
                          in enumerate(frame.columns)})
    score = structure._counting_bic(table, {index: frame[name].to_numpy()
                                            for index, name in enumerate(frame.columns)})
    empty = nx.DiGraph()
    empty.add_nodes_from(range(4))
    assert best_pair_move(empty, score, set(), 3, budget=2) is None
    assert best_pair_move(empty, score, set(), 3, budget=3) == (1, 2, 0)
    assert best_pair_move(empty, score, set(), 3, budget=12) in {(1, 2, 0), (0, 2, 1),
                                                                  (0, 1, 2)}
    assert best_pair_move(empty, score, {(1, 0)}, 3, budget=12) in {(0, 2, 1), (0, 1, 2)}
