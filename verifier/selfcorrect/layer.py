"""The self-correcting layer (SC-layer) of paper 004, Alg. 3.1–3.3 and App. B.

``SelfCorrectingLayer(constraints, num_classes)(x, logits) -> (corrected, bottom)``.

Conventions (DESIGN D8), fixed where the paper leaves a choice open:

* **Active postcondition.** The DNF of the active properties is the Cartesian product of their
  DNFs in constraint-list order (the last active property varies fastest), each disjunct being
  the union of the chosen conjunctions.
* **Already safe.** If every active postcondition holds with strict ``<`` the logits are returned
  unchanged (Alg. 3.1, line 6).
* **Prioritize.** A *stable* partition: disjuncts whose order graph has the top class as a root
  first, in enumeration order, then the others in enumeration order (Property 3.1). The first
  acyclic (satisfiable) one is used (Alg. 3.2).
* **Correct.** Classes are ranked by the key ``(−v, depth, −y, index)``: ``v_j`` is the smallest
  logit among ``j`` and its ancestors, ``depth_j`` the longest path into ``j`` (App. B.1); the
  ``k``-th largest logit value is given to the class of rank ``k`` (Alg. 3.3).
* **Ties.** The top class is ``argmax`` with ties to the lowest index; equal logits are ranked by
  index. If the logits to be corrected contain equal values, the lower-ranked copies are lowered by
  the fewest float steps (``nextafter``) that make the output strictly ordered, so the strict
  guarantee holds with ties too. With pairwise distinct logits the output is a permutation of the
  input values.
* **⊥.** If no disjunct is satisfiable at ``x`` the row's ``bottom`` flag is set and its logits are
  returned unchanged: never a silent output.

Guarantees (paper Thm. 3.3, 3.4), for every row: if the active postcondition is satisfiable,
``corrected`` satisfies every active postcondition with strict ``<`` (safety); ``bottom`` is set
iff it is unsatisfiable (forewarning); if some output satisfying it has the original top class,
``corrected`` keeps that top class (transparency); an already safe row is returned unchanged.

Precomputed once per constraint set: the order graph of every disjunct, its cycle flag, roots,
ancestor matrix and depths. Disjunct combinations of several simultaneously active properties
are built on first use and cached. The batch is processed with tensor operations; the only
Python loop runs over the distinct combinations of active properties present in the batch.
"""

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from verifier.numerics.scripted import down_scripted, up_scripted
from verifier.selfcorrect.constraints import (
    ConstraintError,
    ConstraintSet,
    SafeOrderingConstraint,
    precondition_input_size,
)
from verifier.selfcorrect.graphs import adjacency_from_literals, graph_tables
from verifier.selfcorrect.preconditions import (
    PreconditionEvaluator,
    SelfCorrectionInputError,
    active_sets_everywhere,
)

MAX_COMBINATIONS = 65536
"""Most disjunct combinations one set of simultaneously active properties may produce."""
MAX_CACHED_TABLES = 4096
"""The cache of combination tables is emptied when it reaches this many entries."""
TABLE_CHUNK_ELEMENTS = 1 << 22
"""Most entries (``combinations · m² · max(m, k)``) the tables of one chunk of disjunct
combinations may hold while they are built (32 MiB of float64 longest paths)."""


class CombinationLimitError(SelfCorrectionInputError):
    """Too many simultaneously active properties with several disjuncts each."""


def as_constraint_set(
    constraints: ConstraintSet | Sequence[SafeOrderingConstraint],
    num_classes: int,
    input_size: int | None = None,
) -> ConstraintSet:
    """A :class:`ConstraintSet` checked against ``num_classes`` (and ``input_size`` if given).

    Raises:
        ConstraintError: class count or input size disagree, or the constraints are invalid.
    """
    if isinstance(constraints, ConstraintSet):
        if constraints.num_classes != num_classes:
            raise ConstraintError(
                f"the constraints are over {constraints.num_classes} classes but the layer has "
                f"{num_classes}"
            )
        if input_size is not None and constraints.input_size not in (None, input_size):
            raise ConstraintError(
                f"the constraints read {constraints.input_size} inputs but the model has "
                f"{input_size}"
            )
        if input_size is not None and constraints.input_size is None:
            return ConstraintSet(
                constraints.constraints, num_classes, constraints.class_names, input_size
            )
        return constraints
    items = tuple(constraints)
    widths = {precondition_input_size(item.precondition) for item in items} - {None}
    if input_size is not None:
        widths.add(input_size)
    if len(widths) > 1:
        raise ConstraintError(f"the preconditions read different input sizes {sorted(widths)}")
    width = widths.pop() if widths else None
    names = tuple(f"y{i}" for i in range(num_classes))
    return ConstraintSet(items, num_classes, names, width)


def first_satisfiable(cyclic: Tensor, roots: Tensor, top: Tensor) -> Tensor:
    """Per row, the index of the disjunct FindSatConstraint returns (Alg. 3.2, Property 3.1).

    Args:
        cyclic: ``[n]`` bool, not all True.
        roots: ``[n, m]`` bool.
        top: ``[rows]`` int64 top classes.

    Returns:
        ``[rows]`` int64: the first acyclic disjunct among those where ``top`` is a root, else the
        first acyclic disjunct.
    """
    count = cyclic.shape[0]
    index = torch.arange(count, device=cyclic.device)
    is_root = roots.index_select(1, top).t()
    key = torch.where(is_root, index.unsqueeze(0), index.unsqueeze(0) + count)
    key = key.masked_fill(cyclic.unsqueeze(0), 2 * count)
    return key.argmin(dim=1)


def stable_topological_order(logits: Tensor, ancestors: Tensor, depth: Tensor) -> Tensor:
    """Classes sorted by the key ``(−v, depth, −y, index)`` (paper Alg. B.1 plus tie-breaks).

    For an acyclic graph, every class comes after all its ancestors (App. B.1), and if the top
    class is a root it comes first (Lemma 1).

    Args:
        logits: ``[rows, m]``.
        ancestors: ``[rows, m, m]`` bool, ``ancestors[r, i, j]`` iff ``i = j`` or ``i → … → j``.
        depth: ``[rows, m]`` float64.

    Returns:
        ``[rows, m]`` int64: ``order[r, k]`` is the class of rank ``k`` (0 = top).
    """
    y = logits.detach()
    spread = y.unsqueeze(2).expand(ancestors.shape)
    smallest_ancestor = spread.masked_fill(~ancestors, float("inf")).amin(dim=1)
    order = torch.sort(-y, dim=1, stable=True).indices
    by_depth = torch.sort(depth.gather(1, order), dim=1, stable=True).indices
    order = order.gather(1, by_depth)
    by_value = torch.sort(-smallest_ancestor.gather(1, order), dim=1, stable=True).indices
    return order.gather(1, by_value)


def strictly_decreasing(values: Tensor) -> Tensor:
    """``values`` (finite rows sorted in descending order) with equal neighbours pulled apart.

    Each entry becomes ``min(entry, nextafter(previous entry, −∞))``: entries that are already
    strictly below their predecessor are unchanged, so rows without ties are returned as they are.
    Ties at the bottom of the float range would be pulled to ``−∞`` (and two ``−∞`` are not
    ordered): where that happens the tail is lifted back, the last entry to its own value and
    each one above to at least ``nextafter(next entry, +∞)``, so every output is finite and the
    row strictly decreasing.
    """
    if values.shape[1] < 2 or not bool(values[:, 1:].ge(values[:, :-1]).any()):
        return values
    columns = [values[:, 0]]
    for k in range(1, values.shape[1]):
        below = down_scripted(columns[k - 1].detach())
        columns.append(torch.minimum(values[:, k], below))
    last = values.shape[1] - 1
    if bool(torch.isinf(columns[last]).any()):
        columns[last] = torch.where(torch.isinf(columns[last]), values[:, last], columns[last])
        for k in range(last - 1, -1, -1):
            above = up_scripted(columns[k + 1].detach())
            columns[k] = torch.maximum(columns[k], above)
    return torch.stack(columns, dim=1)


def assign_by_rank(logits: Tensor, order: Tensor) -> Tensor:
    """Alg. 3.3 lines 3–4: the ``k``-th largest logit value goes to class ``order[:, k]``.

    ``order[r]`` must be a permutation of the classes. Values equal after sorting are pulled
    apart by :func:`strictly_decreasing`, so the output is strictly ordered by rank. Gradients
    flow to the logit values.
    """
    values = strictly_decreasing(torch.sort(logits, dim=1, descending=True, stable=True).values)
    return torch.zeros_like(logits).scatter(1, order, values)


def correct_logits(logits: Tensor, ancestors: Tensor, depth: Tensor) -> Tensor:
    """Alg. 3.3: rank the classes by :func:`stable_topological_order`, then
    :func:`assign_by_rank`. The ranking itself is piecewise constant in the logits."""
    return assign_by_rank(logits, stable_topological_order(logits, ancestors, depth))


class SelfCorrectingLayer(torch.nn.Module):
    """``forward(x, logits) -> (corrected_logits, bottom)``; see the module docstring.

    Args:
        constraints: a :class:`ConstraintSet` or a sequence of constraints.
        num_classes: width of the logits.
        input_size: width of ``x`` (checked against the constraints; inferred if omitted).

    ``x`` is ``[batch, ...]`` (flattened to ``[batch, input_size]``), ``logits`` ``[batch, m]``.
    ``corrected`` has the logits' dtype; ``bottom`` is ``[batch]`` bool.

    Raises (from ``forward``):
        SelfCorrectionInputError: wrong shapes, NaN in ``x``, non-finite logits.
        CombinationLimitError: more than ``MAX_COMBINATIONS`` disjunct combinations active at once.
    """

    _table_cache: dict[str, list[Tensor]]
    constraint_names: list[str]
    disjunct_offsets: list[int]
    disjunct_counts: list[int]

    def __init__(
        self,
        constraints: ConstraintSet | Sequence[SafeOrderingConstraint],
        num_classes: int,
        input_size: int | None = None,
    ) -> None:
        super().__init__()
        constraint_set = as_constraint_set(constraints, num_classes, input_size)
        self.constraint_set = constraint_set
        self.num_classes = num_classes
        self.input_size = -1 if constraint_set.input_size is None else constraint_set.input_size
        self.num_constraints = len(constraint_set)
        self.constraint_names = constraint_set.names
        self.preconditions = PreconditionEvaluator(
            constraint_set.constraints, num_classes, constraint_set.input_size
        )
        smaller: list[int] = []
        larger: list[int] = []
        literal_disjunct: list[int] = []
        disjunct_constraint: list[int] = []
        adjacency: list[Tensor] = []
        self.disjunct_offsets = []
        self.disjunct_counts = []
        for c_index, constraint in enumerate(constraint_set.constraints):
            self.disjunct_offsets.append(len(disjunct_constraint))
            self.disjunct_counts.append(len(constraint.postcondition))
            for conjunction in constraint.postcondition:
                for a, b in conjunction:
                    smaller.append(a)
                    larger.append(b)
                    literal_disjunct.append(len(disjunct_constraint))
                disjunct_constraint.append(c_index)
                adjacency.append(adjacency_from_literals(list(conjunction), num_classes))
        stacked = (
            torch.stack(adjacency)
            if adjacency
            else torch.zeros(0, num_classes, num_classes, dtype=torch.bool)
        )
        cyclic, roots, ancestors, depth = graph_tables(stacked)
        self.register_buffer("literal_smaller", torch.tensor(smaller, dtype=torch.long), False)
        self.register_buffer("literal_larger", torch.tensor(larger, dtype=torch.long), False)
        self.register_buffer(
            "literal_disjunct", torch.tensor(literal_disjunct, dtype=torch.long), False
        )
        self.register_buffer(
            "disjunct_constraint", torch.tensor(disjunct_constraint, dtype=torch.long), False
        )
        self.register_buffer("disjunct_adjacency", stacked, False)
        self.register_buffer("disjunct_cyclic", cyclic, False)
        self.register_buffer("disjunct_roots", roots, False)
        self.register_buffer("disjunct_ancestors", ancestors, False)
        self.register_buffer("disjunct_depth", depth, False)
        self._table_cache = {}
        self.max_combinations = MAX_COMBINATIONS
        self.max_cached_tables = MAX_CACHED_TABLES
        self.table_chunk_elements = TABLE_CHUNK_ELEMENTS

    def extra_repr(self) -> str:
        return f"num_classes={self.num_classes}, constraints={self.num_constraints}"

    def describe(self) -> str:
        """The constraint set in readable form."""
        return self.constraint_set.describe()

    def unsatisfiable_everywhere(self) -> list[str]:
        """The names of the constraints that give ⊥ at every input, else ``[]``. For each
        class ``c`` the network may predict, the input space is cut into pieces on each of
        which some constraints are active by their preconditions' form together
        (:func:`~verifier.selfcorrect.preconditions.active_sets_everywhere`: boxes of several
        constraints covering the space together count); each piece's constraints must admit
        no strict order of the classes together. When that holds for every piece and every
        class, every input gets ⊥, and the constraints named are those of every piece. ``[]``
        as soon as one piece has a satisfiable (or unsearched: more than ``max_combinations``
        disjunct combinations, which raise :class:`CombinationLimitError` at run time) set,
        or the pieces are too many to list."""
        preconditions = [constraint.precondition for constraint in self.constraint_set.constraints]
        unsatisfiable: dict[frozenset[int], bool] = {}

        def gives_bottom(active: frozenset[int]) -> bool:
            if active not in unsatisfiable:
                indices = sorted(active)
                unsatisfiable[active] = bool(indices) and math.prod(
                    self.disjunct_counts[index] for index in indices
                ) <= self.max_combinations and bool(self._tables(indices)[0].all())
            return unsatisfiable[active]

        involved: set[int] = set()
        for predicted in range(self.num_classes):
            for active in active_sets_everywhere(preconditions, predicted, gives_bottom):
                if active is None or not gives_bottom(active):
                    return []
                involved.update(active)
        return [self.constraint_names[index] for index in sorted(involved)]

    def require_satisfiable_somewhere(self) -> None:
        """Raises :class:`ConstraintError` naming the constraints when they give ⊥ at every
        input (:meth:`unsatisfiable_everywhere`): a wrapped model would answer ⊥ always."""
        unsatisfiable = self.unsatisfiable_everywhere()
        if unsatisfiable:
            raise ConstraintError(
                "the constraints " + ", ".join(repr(name) for name in unsatisfiable)
                + " give ⊥ at every input: whatever the input and the class the network "
                "predicts, those of them active there by their preconditions' form admit no "
                "order of the classes together, so every output would be bottom (⊥); drop or "
                "condition one of them"
            )

    def forward(self, x: Tensor, logits: Tensor) -> tuple[Tensor, Tensor]:
        batch = self._check_inputs(x, logits)
        bottom = torch.zeros(batch, dtype=torch.bool, device=logits.device)
        if batch == 0:
            return logits, bottom
        predicted = logits.argmax(dim=1)
        active = self.preconditions(x.reshape(batch, -1), predicted)
        safe = (~active | self._postconditions_hold(logits)).all(dim=1)
        need = (~safe).nonzero().flatten()
        if need.numel() == 0:
            return logits, bottom
        corrected = logits.clone()
        groups, membership = torch.unique(
            active.index_select(0, need).to(torch.uint8), dim=0, return_inverse=True
        )
        for group in range(groups.shape[0]):
            rows = need[membership == group]
            properties: list[int] = groups[group].nonzero().flatten().tolist()
            cyclic, roots, ancestors, depth = self._tables(properties)
            if bool(cyclic.all()):
                bottom.index_fill_(0, rows, True)
                continue
            chosen = first_satisfiable(cyclic, roots, predicted.index_select(0, rows))
            fixed = correct_logits(
                logits.index_select(0, rows),
                ancestors.index_select(0, chosen),
                depth.index_select(0, chosen),
            )
            corrected = corrected.index_copy(0, rows, fixed)
        return corrected, bottom

    @torch.jit.export
    def satisfied(self, x: Tensor, logits: Tensor, predicted: Tensor | None = None) -> Tensor:
        """``[batch]`` bool: every active postcondition holds on ``logits`` with strict ``<``.

        ``predicted`` (``[batch]`` int64) is the class that ``predicted_in`` preconditions test;
        it defaults to the argmax of ``logits``. To check corrected logits against the
        constraints that were active for the original prediction, pass the original argmax.
        """
        batch = self._check_inputs(x, logits)
        if batch == 0:
            return torch.ones(0, dtype=torch.bool, device=logits.device)
        active = self.active_constraints(x, logits, predicted)
        return (~active | self._postconditions_hold(logits)).all(dim=1)

    @torch.jit.export
    def active_constraints(
        self, x: Tensor, logits: Tensor, predicted: Tensor | None = None
    ) -> Tensor:
        """``[batch, constraints]`` bool: which preconditions hold (``predicted`` as in
        :meth:`satisfied`)."""
        batch = self._check_inputs(x, logits)
        if batch == 0:
            return torch.zeros(0, self.num_constraints, dtype=torch.bool, device=logits.device)
        top = logits.argmax(dim=1) if predicted is None else predicted
        return self.preconditions(x.reshape(batch, -1), top)

    def _check_inputs(self, x: Tensor, logits: Tensor) -> int:
        if logits.dim() != 2 or logits.shape[1] != self.num_classes:
            raise SelfCorrectionInputError(
                "logits must have shape [batch, "
                + str(self.num_classes)
                + "], got "
                + str(list(logits.shape))
            )
        batch = logits.shape[0]
        if x.dim() == 0 or x.shape[0] != batch:
            raise SelfCorrectionInputError(
                "x must have one row per logits row ("
                + str(batch)
                + "), got shape "
                + str(list(x.shape))
            )
        if batch == 0:
            return batch
        width = x.reshape(batch, -1).shape[1]
        if self.input_size >= 0 and width != self.input_size:
            raise SelfCorrectionInputError(
                "x has "
                + str(width)
                + " features per row, the constraints read "
                + str(self.input_size)
            )
        if not bool(torch.isfinite(logits).all()):
            bad: list[int] = (~torch.isfinite(logits).all(dim=1)).nonzero().flatten().tolist()
            raise SelfCorrectionInputError(
                "logits contain NaN or infinite values in rows " + str(bad[:10])
            )
        if bool(torch.isnan(x).any()):
            raise SelfCorrectionInputError("x contains NaN")
        return batch

    def _postconditions_hold(self, logits: Tensor) -> Tensor:
        """``[batch, constraints]`` bool: some disjunct of each postcondition holds strictly."""
        batch = logits.shape[0]
        literal_true = logits.index_select(1, self.literal_smaller) < logits.index_select(
            1, self.literal_larger
        )
        failed = torch.zeros(
            batch, self.disjunct_cyclic.shape[0], dtype=torch.float64, device=logits.device
        )
        failed.index_add_(1, self.literal_disjunct, (~literal_true).to(torch.float64))
        held = torch.zeros(batch, self.num_constraints, dtype=torch.float64, device=logits.device)
        held.index_add_(1, self.disjunct_constraint, failed.eq(0.0).to(torch.float64))
        return held.gt(0.0)

    def _tables(self, properties: list[int]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Cycle flags, roots, ancestors, depths of every disjunct of the active postcondition,
        in enumeration order."""
        if len(properties) == 1:
            start = self.disjunct_offsets[properties[0]]
            count = self.disjunct_counts[properties[0]]
            return (
                self.disjunct_cyclic.narrow(0, start, count),
                self.disjunct_roots.narrow(0, start, count),
                self.disjunct_ancestors.narrow(0, start, count),
                self.disjunct_depth.narrow(0, start, count),
            )
        key = ",".join([str(p) for p in properties])
        device = self.disjunct_adjacency.device
        if key in self._table_cache:
            cached = self._table_cache[key]
            return (
                cached[0].to(device),
                cached[1].to(device),
                cached[2].to(device),
                cached[3].to(device),
            )
        total = 1
        for p in properties:
            total *= self.disjunct_counts[p]
        if total > self.max_combinations:
            names = [self.constraint_names[p] for p in properties]
            raise CombinationLimitError(
                "the simultaneously active constraints "
                + ", ".join(names)
                + " have "
                + str(total)
                + " disjunct combinations, more than the limit of "
                + str(self.max_combinations)
            )
        cyclic, roots, ancestors, depth = self._combination_tables(
            self._combinations(properties, device)
        )
        if len(self._table_cache) >= self.max_cached_tables:
            self._table_cache.clear()
        self._table_cache[key] = [cyclic, roots, ancestors, depth]
        return cyclic, roots, ancestors, depth

    def _combination_tables(self, combinations: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """:func:`graph_tables` of the union graph of every combination (``[n, k]`` global
        disjunct indices), built a chunk of combinations at a time: the longest paths of a
        chunk take ``chunk·m³`` floats and its stacked graphs ``chunk·k·m²`` flags, so
        ``table_chunk_elements`` (:data:`TABLE_CHUNK_ELEMENTS`) bounds the peak memory
        whatever ``n`` (65,536 combinations of 20 classes at once needed a 4.2 GB tensor).
        Each graph's tables depend on that graph alone, so the result is the one batch's,
        bit for bit."""
        size = self.num_classes
        count = combinations.shape[0]
        width = combinations.shape[1]
        chunk = max(1, self.table_chunk_elements // (size * size * max(size, width)))
        parts: list[list[Tensor]] = [[], [], [], []]
        for start in range(0, count, chunk):
            rows = combinations.narrow(0, start, min(chunk, count - start))
            adjacency = (
                self.disjunct_adjacency.index_select(0, rows.flatten())
                .reshape(rows.shape[0], width, size, size)
                .any(dim=1)
            )
            tables = graph_tables(adjacency)
            for index in range(4):
                parts[index].append(tables[index])
        return (
            torch.cat(parts[0]),
            torch.cat(parts[1]),
            torch.cat(parts[2]),
            torch.cat(parts[3]),
        )

    def _combinations(self, properties: list[int], device: torch.device) -> Tensor:
        """``[n, len(properties)]`` global disjunct indices of every combination, in
        ``itertools.product`` order (first property slowest, last fastest)."""
        start = self.disjunct_offsets[properties[0]]
        stop = start + self.disjunct_counts[properties[0]]
        combinations = torch.arange(start, stop, device=device).unsqueeze(1)
        for p in properties[1:]:
            choices = torch.arange(
                self.disjunct_offsets[p],
                self.disjunct_offsets[p] + self.disjunct_counts[p],
                device=device,
            )
            combinations = torch.cat(
                [
                    combinations.repeat_interleave(choices.shape[0], dim=0),
                    choices.repeat(combinations.shape[0]).unsqueeze(1),
                ],
                dim=1,
            )
        return combinations
