"""Learning a Bayesian network's structure from data, within what
:class:`verifier.population.bayesnet.BayesianNetwork` tables can hold.

Every feature is coded into a few *cells* — the cells it has as a parent in the fitted
network (:func:`verifier.population.fitting.fit_bayesian_network`):

* a categorical feature: one cell per category; a binary or integer feature with at most
  ``MAX_PARENT_CELLS`` distinct values: one cell per value (no cut points);
* any other numeric feature: ``PARENT_BINS`` equal-mass cells, cut at its quartiles (repeated
  cut points merged: a column with 92 % zeros gets the cells ``<= 0`` and ``> 0``); integer
  cut points are floored, so a cell is ``[c_i + 1, c_{i+1}]``.

The search scores edges on these quartile cells; the fitted network then cuts a numeric parent
finer in its tails (:func:`parent_cuts`): its outer quartiles are halved towards the ends,
``1/8`` and ``7/8``, then ``1/16`` and ``15/16``, while each tail cell holds
``TAIL_CELL_ROWS`` rows, up to ``MAX_PARENT_CELLS`` cells, when it is the only parent cut
into cells of each of its children (:func:`_few_cut_siblings`). Within a cell a child is
independent of its parent's value, and a favourable rule often sits in the joint tail of two
numeric columns: with quartile cells, a rule ``x1 > 0.8 and x2 > 0.8`` on two columns
correlated 0.8 had a rate of 0.126 on the fitted population where 19,000 rows give 0.138
(5 standard errors), and a parity ratio 0.414 where the data's is 0.318; with the tail cells,
0.135 and 0.378. Coding the search's cells that finely instead raised the penalty of every
numeric child's parents: on Adult the edge ``education-num → hours-per-week`` was lost, and
the rule ``education-num >= 13 and hours-per-week >= 45`` fell from a ratio of 0.528 to 0.448
(octiles: 0.359; the data: 0.505). Where a numeric child depends on such a parent so strongly
that the parent's spread inside 8 cells widens the child's (:func:`fine_cells`), the fit cuts
the parent into up to ``MAX_FINE_CELLS`` equal-mass cells instead: with
``tenure = 0.9·age + noise`` (r ≈ 0.97) a model reading ``tenure − 0.9·age`` saw a parity
ratio of 0.75 on the tail cells where the generator's is 0.655.

A categorical feature with more than ``MAX_PARENT_CELLS`` categories is a parent only of
features cut into cells (their tables grow with it, but a table of per-value children would
grow by its categories times theirs); it may be a child of any feature. Forbidding it as a
parent everywhere left its dependence with a continuous column to the column's four cells: on
a table whose incomes are set by one of 12 occupations, a small group's favourable rate was
0.39 where its rows give 0.24.

An edge from a cut feature to one read per value (``income → job``) is forbidden: the two
directions score alike on the coded table, but the fitted network keeps a child per parent
cell, so ``income → job`` keeps which job goes with which income only per income quartile,
while ``job → income`` fits each job's incomes whole. On a table whose incomes depend on the
job, a learned ``income → job`` made a small group's favourable rate 0.49 where its rows give
0.29.

The structure is searched by pgmpy's hill climbing (``pgmpy.causal_discovery.HillClimbSearch``)
with pgmpy's BIC score of the coded table (its formula, ``LL − ½ log(N) · q · (r − 1)``, with
the state counts taken by ``numpy.bincount`` over the integer codes instead of a pandas
group-by: the same numbers, ~50 times faster), at most ``MAX_PARENTS`` learned parents per
node. Between climbs, :func:`verifier.population.pair_moves.best_pair_move` adds two
parents to one node at once when their joint raises the score though neither alone does
(``c`` agreeing with ``a XOR b``: no single edge shows it), and the climb resumes from there,
at most ``PAIR_ROUNDS`` times. With
a ``protected`` feature (the audit's protected attribute) the search keeps it a root and
*requires* the edge protected → feature for every other feature, so that each feature's
distribution is fitted per protected group: the dependence through which a model that never
reads the protected attribute can still discriminate is never cut. The protected parent
comes on top of the learned ones, so a node has at most ``MAX_PARENTS + 1`` parents; a node
read per value has at most ``MAX_PARENT_CELLS ** (MAX_PARENTS + 1)`` table rows, a node cut
into cells more when a parent is a category of more than ``MAX_PARENT_CELLS`` values (the
BIC penalty grows with the rows, so such a parent is taken only where the data supports it).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from verifier.population.errors import PopulationError
from verifier.population.fitting import bin_shares
from verifier.population.pair_moves import PAIR_ROUNDS, best_pair_move
from verifier.population.schema import Feature

MAX_PARENTS = 3
PARENT_BINS = 4
MAX_PARENT_CELLS = 8
TAIL_CELL_ROWS = 30
FINE_CUT_PARENTS = 1
MAX_FINE_CELLS = 32
FINE_CELL_ROWS = 80
FINE_SPREAD_EXCESS = 0.02


@dataclass(frozen=True)
class LearnedStructure:
    """A learned structure: each node's parents (topologically valid, protected first), the
    cut points of the numeric parents that need them, and the edges parent → child."""

    parents: dict[str, list[str]]
    bins: dict[str, list[float]]
    edges: list[tuple[str, str]]
    protected: str | None

    def edge_text(self) -> str:
        """The edges as ``a -> b, …`` (``none`` without edges)."""
        return ", ".join(f"{a} -> {b}" for a, b in self.edges) or "none"


def _codes(frame: pd.DataFrame, feature: Feature) -> tuple[np.ndarray, list[float] | None, int]:
    """The cell index of every row, the cut points (None when each value is a cell) and the
    number of cells (module docstring)."""
    if feature.kind == "categorical":
        values = frame[feature.column_names()].to_numpy(dtype=np.float64)
        return np.argmax(values, axis=1), None, len(feature.column_names())
    values = frame[feature.name].to_numpy(dtype=np.float64)
    distinct = np.unique(values)
    if feature.kind != "continuous" and distinct.size <= MAX_PARENT_CELLS:
        return np.searchsorted(distinct, values), None, int(distinct.size)
    cuts = _cuts_at(values, feature, np.arange(1, PARENT_BINS) / PARENT_BINS)
    return np.searchsorted(cuts, values, side="left"), cuts, len(cuts) + 1


def _cuts_at(values: np.ndarray, feature: Feature, shares: np.ndarray) -> list[float]:
    """The cut points of a numeric feature's cells at the ``shares`` quantiles of its
    ``values``: floored for an integer feature, repeats and cuts at the largest value merged
    (at least one cut)."""
    distinct = np.unique(values)
    cuts = np.quantile(values, shares)
    if feature.kind != "continuous":
        cuts = np.floor(cuts)
    cuts = np.unique(cuts[cuts < distinct[-1]])
    return (cuts if cuts.size else distinct[-2:-1]).tolist()


def tail_shares(rows: int) -> np.ndarray:
    """The shares at which :func:`parent_cuts` cuts a numeric parent of ``rows`` rows (0 and 1
    left out): the quartiles, and ``s``, ``1 − s`` for ``s = 1/8, 1/16, …`` while ``s · rows``
    holds ``TAIL_CELL_ROWS`` rows and the cells number at most ``MAX_PARENT_CELLS``: a
    histogram's bin ends (:func:`verifier.population.fitting.bin_shares`) for these counts."""
    return bin_shares(PARENT_BINS, rows, TAIL_CELL_ROWS, MAX_PARENT_CELLS)[1:-1]


def parent_cuts(frame: pd.DataFrame, feature: Feature) -> list[float]:
    """The cut points of a numeric parent in the fitted network: its quartiles with the outer
    quartiles halved towards the ends (:func:`tail_shares`; module docstring)."""
    values = frame[feature.name].to_numpy(dtype=np.float64)
    return _cuts_at(values, feature, tail_shares(values.size))


def _counting_bic(table: pd.DataFrame, coded: dict[int, np.ndarray]) -> Any:
    """pgmpy's ``BIC`` score on ``table`` whose log-likelihood counts with numpy."""
    from pgmpy.structure_score import BIC

    class CountingBIC(BIC):
        def _log_likelihood(self, variable: int, parents: tuple[int, ...]
                            ) -> tuple[float, int, int]:
            index = np.zeros(len(coded[variable]), dtype=np.int64)
            states = 1
            for parent in parents:
                width = int(coded[parent].max()) + 1
                index = index * width + coded[parent]
                states *= width
            width = int(coded[variable].max()) + 1
            counts = np.bincount(index * width + coded[variable],
                                 minlength=states * width).reshape(states, width)
            totals = counts.sum(axis=1, keepdims=True)
            positive = counts > 0
            ratios = np.divide(counts, totals, out=np.ones(counts.shape), where=positive)
            likelihood = float((counts[positive] * np.log(ratios[positive])).sum())
            parent_states = int(np.prod([len(self.state_names[p]) for p in parents]))
            return likelihood, parent_states, len(self.state_names[variable])

    return CountingBIC(table)


def _climb(search: Any, table: pd.DataFrame) -> Any:
    """The DAG ``search`` (a configured ``HillClimbSearch``) climbs to on ``table``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The score holds the whole table; the search reads only the variables from what
        # it is given, whose per-cell input check costs seconds on 30k rows.
        search.fit(table.iloc[:2])
    return search.causal_graph_


def _coarsens(parent: str, child: str, bins: dict[str, list[float]], cells: dict[str, int]
              ) -> bool:
    """Whether the edge ``parent → child`` would hold their dependence only through the
    parent's cut points while the reverse edge holds it whole: the parent is cut
    (``bins``) and the child is read per value (no cut points) and may be a parent. Both
    directions score alike on the coded table, but the fitted network keeps a child per
    parent *cell*: ``job → income`` fits the income of every job, ``income → job`` only the
    jobs of four income quartiles (within a quartile, which job an income goes with is lost)."""
    return parent in bins and child not in bins and cells[child] <= MAX_PARENT_CELLS


def learn_structure(frame: pd.DataFrame, features: list[Feature],
                    protected: str | None = None) -> LearnedStructure:
    """The structure of the module docstring, learned from ``frame``'s rows. ``protected``
    names a feature or one of its columns (``sex=Male`` stands for the one-hot feature
    ``sex``). Raises :class:`PopulationError` naming a protected feature that is not in
    ``features``."""
    from pgmpy.causal_discovery import ExpertKnowledge, HillClimbSearch

    names = [feature.name for feature in features]
    owner = next((f.name for f in features if protected in f.column_names()), protected)
    protected = protected if protected in names else owner
    if protected is not None and protected not in names:
        raise PopulationError(f"protected feature {protected!r} is not a feature of the data "
                              f"(features: {names})")
    coded: dict[str, np.ndarray] = {}
    bins: dict[str, list[float]] = {}
    cells: dict[str, int] = {}
    for feature in features:
        codes, cuts, count = _codes(frame, feature)
        coded[feature.name] = codes
        cells[feature.name] = count
        if cuts is not None:
            bins[feature.name] = cuts
    # The search sees features by their index: pgmpy picks among equally scored moves in
    # set order, which for names follows Python's hash seed (a feature and its exact copy:
    # one CSV gave four different networks in six runs) and for small integers does not.
    node = {name: index for index, name in enumerate(names)}
    table = pd.DataFrame({node[name]: pd.Categorical(codes) for name, codes in coded.items()})
    by_node = {node[name]: np.unique(codes, return_inverse=True)[1]
               for name, codes in coded.items()}
    forbidden = [(node[a], node[b]) for a in names for b in names
                 if a != b and ((cells[a] > MAX_PARENT_CELLS and a != protected and b not in bins)
                                or b == protected
                                or _coarsens(a, b, bins, cells))]
    required = [(node[protected], node[b]) for b in names
                if protected is not None and b != protected]
    if len(names) > 1:
        score = _counting_bic(table, by_node)
        max_indegree = MAX_PARENTS + (protected is not None)

        def search_of(start: Any) -> Any:
            return HillClimbSearch(
                scoring_method=score, start_dag=start, max_indegree=max_indegree,
                expert_knowledge=ExpertKnowledge(forbidden_edges=forbidden or None,
                                                 required_edges=required or None),
                return_type="dag", show_progress=False)

        dag = _climb(search_of(None), table)
        for _ in range(PAIR_ROUNDS):
            pair = best_pair_move(dag, score, set(forbidden), max_indegree)
            if pair is None:
                break
            first, second, child = pair
            dag.add_edges_from([(first, child), (second, child)])
            dag = _climb(search_of(dag), table)
        edges = {(names[a], names[b]) for a, b in dag.edges()}
    else:
        edges = set()
    parents = {
        name: sorted((a for a, b in edges if b == name), key=lambda p: (p != protected, p))
        for name in names
    }
    parents = {name: found for name, found in parents.items() if found}
    ordered = [(a, b) for b in names for a in parents.get(b, [])]
    used = {p for found in parents.values() for p in found}
    cut = {f.name: _fitted_cuts(frame, f, parents, bins) for f in features
           if f.name in bins and f.name in used}
    return LearnedStructure(parents, cut, ordered, protected)


def _few_cut_siblings(parent: str, parents: dict[str, list[str]], bins: dict[str, list[float]]
                      ) -> bool:
    """Whether every child of ``parent`` has at most ``FINE_CUT_PARENTS`` parents cut into
    cells (``parent`` alone): only then does the fit cut ``parent`` finer
    (:func:`parent_cuts`). Variable elimination's tables over a node and its parents grow with
    the cells of every cut axis: on a 41-column table of correlated columns (20,000 rows),
    finer cells on every cut parent made the fit's validation alone run for minutes instead
    of 10 s, and with up to two cut parents a child, a fit with the protected attribute as
    every node's parent took more than 70 CPU s instead of 14; on Adult's 7 columns, PV spent
    1.8 times the CPU per box on such a fit."""
    return all(sum(p in bins for p in found) <= FINE_CUT_PARENTS
               for found in parents.values() if parent in found)


def _fitted_cuts(frame: pd.DataFrame, feature: Feature, parents: dict[str, list[str]],
                 bins: dict[str, list[float]]) -> list[float]:
    """The cut points of numeric parent ``feature`` in the fitted network: the search's
    quartiles when a child has another cut parent (:func:`_few_cut_siblings`), else the
    tail cells of :func:`parent_cuts`, or :func:`fine_cells` equal-mass cells when a
    numeric child needs more."""
    if not _few_cut_siblings(feature.name, parents, bins):
        return bins[feature.name]
    values = frame[feature.name].to_numpy(dtype=np.float64)
    children = [frame[child].to_numpy(dtype=np.float64) for child, found in parents.items()
                if feature.name in found and child in bins]
    cells = fine_cells(values, children)
    if cells <= MAX_PARENT_CELLS:
        return parent_cuts(frame, feature)
    return _cuts_at(values, feature, np.arange(1, cells) / cells)


def fine_cells(parent: np.ndarray, children: list[np.ndarray]) -> int:
    """How many equal-mass cells of a numeric ``parent``'s values keep its numeric
    ``children`` (their values on the same rows) close to their spread at the parent's
    value: the fewest of ``MAX_PARENT_CELLS · 2^j`` cells (at most ``MAX_FINE_CELLS``, each
    of at least ``FINE_CELL_ROWS`` rows) whose every child's pooled within-cell variance is
    at most ``1 + FINE_SPREAD_EXCESS`` times its variance within the finest such cells.

    Within a cell the fitted child is independent of the parent's value, so the parent's own
    spread inside the cell is added to the child's: with ``tenure = 0.9·age + N(0, 2.5)`` on
    ``age ~ U(22, 65)`` (r ≈ 0.97), 8 cells widen tenure's spread at a given age by 12 %
    (a model reading ``tenure − 0.9·age`` saw a parity ratio 0.06–0.12 off), 32 cells by
    1 %. ``MAX_PARENT_CELLS`` (no finer cells) when the rows allow no more or no child
    needs them."""
    finest = MAX_PARENT_CELLS
    while 2 * finest <= MAX_FINE_CELLS and parent.size >= 2 * finest * FINE_CELL_ROWS:
        finest *= 2
    if finest == MAX_PARENT_CELLS or not children:
        return MAX_PARENT_CELLS
    order = np.argsort(parent, kind="stable")
    ranks = np.empty(parent.size, dtype=np.int64)
    ranks[order] = np.arange(parent.size)

    def within(child: np.ndarray, cells: int) -> float:
        codes = ranks * cells // parent.size
        counts = np.bincount(codes, minlength=cells)
        sums = np.bincount(codes, weights=child, minlength=cells)
        squares = np.bincount(codes, weights=child * child, minlength=cells)
        return float((squares - sums * sums / np.maximum(counts, 1)).sum() / parent.size)

    cells = MAX_PARENT_CELLS
    while cells < finest and any(within(child, cells) > (1 + FINE_SPREAD_EXCESS)
                                 * within(child, finest) for child in children):
        cells *= 2
    return cells
