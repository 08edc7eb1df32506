"""The SC-layer against brute force and the plain-Python reference (paper 004 Thm. 3.3, 3.4).

Oracles: for every row, satisfiability of the active postcondition and the set of achievable
top classes come from enumerating all strict orders of the m classes; the exact corrected
output comes from ``test_selfcorrect_reference.reference_layer``. Checked per row: safety,
forewarning (⊥ iff unsatisfiable), unchanged when already safe, transparency, value
preservation for distinct logits, and exact agreement with the reference; batch = row by row.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from test_selfcorrect_reference import (
    DNF,
    Precondition,
    active_dnfs,
    holds,
    orderings_satisfying,
    reference_choice,
    reference_layer,
    top_class,
)

from verifier.selfcorrect import (
    CombinationLimitError,
    SelfCorrectingLayer,
    SelfCorrectionInputError,
    parse_constraints,
)
from verifier.selfcorrect.layer import assign_by_rank

# --- random problems -----------------------------------------------------------------------


def _random_dnf(rng: np.random.Generator, m: int) -> DNF:
    disjuncts = []
    for _ in range(int(rng.integers(1, 4))):
        literals = []
        for _ in range(int(rng.integers(1, 4))):
            a, b = rng.choice(m, size=2, replace=False)
            literals.append((int(a), int(b)))
        disjuncts.append(tuple(literals))
    return tuple(disjuncts)


def _random_precondition(rng: np.random.Generator, m: int) -> tuple[dict, Precondition]:
    kind = rng.choice(["always", "predicted_in", "box", "box"])
    if kind == "always":
        return {"kind": "always"}, lambda x, y: True
    if kind == "predicted_in":
        classes = sorted(
            int(c) for c in rng.choice(m, size=int(rng.integers(1, m + 1)), replace=False)
        )
        return {"kind": "predicted_in", "classes": classes}, (lambda x, y: top_class(y) in classes)
    low, high = sorted(rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=2, replace=False).tolist())
    low_closed, high_closed = bool(rng.integers(2)), bool(rng.integers(2))

    def inside(x: np.ndarray, y: object) -> bool:
        above = x[0] >= low if low_closed else x[0] > low
        below = x[0] <= high if high_closed else x[0] < high
        return bool(above and below)

    spec = {
        "kind": "box",
        "lower": [low],
        "upper": [high],
        "lower_closed": low_closed,
        "upper_closed": high_closed,
    }
    return spec, inside


def random_problem(
    rng: np.random.Generator, m: int, max_constraints: int = 3
) -> tuple[SelfCorrectingLayer, list[tuple[Precondition, DNF]]]:
    """A random constraint set as a torch layer and as reference callables."""
    items, reference = [], []
    for index in range(int(rng.integers(1, max_constraints + 1))):
        spec, predicate = _random_precondition(rng, m)
        dnf = _random_dnf(rng, m)
        items.append(
            {
                "name": f"c{index}",
                "precondition": spec,
                "postcondition": [[list(lit) for lit in conj] for conj in dnf],
            }
        )
        reference.append((predicate, dnf))
    constraints = parse_constraints({"num_classes": m, "input_size": 1, "constraints": items})
    return SelfCorrectingLayer(constraints, m), reference


# --- the checks ----------------------------------------------------------------------------


def check_rows(
    layer: SelfCorrectingLayer,
    reference: list[tuple[Precondition, DNF]],
    x: np.ndarray,
    y: np.ndarray,
) -> tuple[int, int]:
    """All per-row guarantees and exact agreement; returns (#corrected, #bottom)."""
    corrected_t, bottom_t = layer(torch.from_numpy(x), torch.from_numpy(y))
    corrected, bottom = corrected_t.numpy(), bottom_t.numpy()
    twice = layer(torch.from_numpy(x), corrected_t)[0].numpy()
    m = y.shape[1]
    satisfying: dict[tuple[DNF, ...], list[tuple[int, ...]]] = {}
    n_corrected = 0
    for row in range(y.shape[0]):
        logits = y[row].tolist()
        dnfs = active_dnfs(reference, x[row], logits)
        key = tuple(dnfs)
        if key not in satisfying:
            satisfying[key] = orderings_satisfying(dnfs, m)
        models = satisfying[key]
        output = corrected[row].tolist()
        # forewarning: ⊥ exactly when no strict order satisfies the active postcondition
        assert bool(bottom[row]) == (not models), (row, logits, dnfs)
        if bottom[row]:
            assert output == logits
        else:
            # safety, strict
            assert all(holds(dnf, output) for dnf in dnfs), (row, logits, output, dnfs)
        if all(holds(dnf, logits) for dnf in dnfs):
            assert output == logits
        # transparency (Property 2.1): some model keeps the top class => it is kept
        top = top_class(logits)
        if any(top_class(list(values)) == top for values in models):
            assert top_class(output) == top, (row, logits, output, dnfs)
        if len(set(logits)) == m:
            assert sorted(output) == sorted(logits)
        expected, expected_bottom = reference_layer(reference, x[row], logits)
        assert expected_bottom == bool(bottom[row])
        assert output == expected, (row, logits, output, expected, dnfs)
        # idempotence: where the corrected output activates the same constraints (always, for
        # preconditions on the input alone), a second application changes nothing
        if active_dnfs(reference, x[row], output) == dnfs:
            assert twice[row].tolist() == output, (row, logits, output, dnfs)
        n_corrected += int(output != logits)
    return n_corrected, int(bottom.sum())


def _points(rng: np.random.Generator, count: int) -> np.ndarray:
    """x in [0, 1], half of them exactly on the box corners used by the random problems."""
    grid = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=count)
    uniform = rng.uniform(-0.1, 1.1, size=count)
    return np.where(rng.random(count) < 0.5, grid, uniform)[:, None]


@pytest.mark.parametrize(
    ("m", "seeds"), [(2, range(10)), (3, range(20)), (4, range(40)), (5, range(30)), (6, range(10))]
)
def test_all_permutations_of_distinct_logits(m: int, seeds: range) -> None:
    totals = np.zeros(2, dtype=int)
    for seed in seeds:
        rng = np.random.default_rng(1000 * m + seed)
        layer, reference = random_problem(rng, m)
        values = np.sort(rng.normal(size=m) * 10.0)
        y = np.array(list(itertools.permutations(values)), dtype=np.float64)
        x = _points(rng, y.shape[0])
        totals += check_rows(layer, reference, x, y)
    assert totals[0] > 0  # the sets do exercise corrections


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_batch_equals_row_by_row(seed: int) -> None:
    rng = np.random.default_rng(seed)
    layer, _ = random_problem(rng, 5, max_constraints=4)
    y = rng.normal(size=(120, 5))
    x = _points(rng, 120)
    batch_out, batch_bottom = layer(torch.from_numpy(x), torch.from_numpy(y))
    for row in range(120):
        out, bottom = layer(torch.from_numpy(x[row : row + 1]), torch.from_numpy(y[row : row + 1]))
        assert torch.equal(out[0], batch_out[row])
        assert bool(bottom[0]) == bool(batch_bottom[row])


@given(
    seed=st.integers(0, 2**32 - 1),
    m=st.integers(2, 5),
    rows=st.integers(1, 40),
    tie_range=st.integers(1, 6),
)
def test_random_sets_with_ties_match_brute_force(
    seed: int, m: int, rows: int, tie_range: int
) -> None:
    rng = np.random.default_rng(seed)
    layer, reference = random_problem(rng, m)
    y = rng.integers(0, tie_range, size=(rows, m)).astype(np.float64)  # many ties
    check_rows(layer, reference, _points(rng, rows), y)


def test_float32_logits_keep_the_guarantees() -> None:
    rng = np.random.default_rng(3)
    layer, reference = random_problem(rng, 4)
    y = rng.integers(-2, 3, size=(300, 4)).astype(np.float32)
    x = _points(rng, 300)
    corrected, bottom = layer(torch.from_numpy(x), torch.from_numpy(y))
    assert corrected.dtype == torch.float32
    for row in range(300):
        dnfs = active_dnfs(reference, x[row], y[row].tolist())
        if not bottom[row]:
            assert all(holds(dnf, corrected[row].tolist()) for dnf in dnfs)


# --- the paper's worked examples -----------------------------------------------------------

PHI2 = {
    "classes": ["COC", "WL", "WR", "SL", "SR"],
    "constraints": [
        {"name": "phi2", "postcondition": [["WL < COC"], ["WR < COC"], ["SL < COC"], ["SR < COC"]]}
    ],
}


def test_example_3_choice_and_correction() -> None:
    """Paper Example 3: y = [100, 900, 300, 140, 500], Q = y1<y0 ∨ y2<y0 ∨ y3<y0 ∨ y4<y0."""
    y = [100.0, 900.0, 300.0, 140.0, 500.0]
    dnf: DNF = (((1, 0),), ((2, 0),), ((3, 0),), ((4, 0),))
    # FindSatConstraint returns the second disjunct y2 < y0, as in the paper (class 1 is not a
    # root of the first disjunct's graph).
    assert reference_choice([dnf], y) == ((2, 0),)
    # Correct with the paper's π (π(0)=2, π(1)=0, π(2)=3, π(3)=4, π(4)=1) gives the paper's y'.
    paper_order = torch.tensor([[1, 4, 0, 2, 3]])
    paper_output = assign_by_rank(torch.tensor([y], dtype=torch.float64), paper_order)
    assert paper_output.tolist() == [[300.0, 900.0, 140.0, 100.0, 500.0]]
    # Alg. B.1 itself ranks 0 and 2 (v = 100) below class 3: the canonical output differs from
    # the paper's "possible result" but is equally safe and keeps class 1 on top.
    layer = SelfCorrectingLayer(parse_constraints(PHI2), 5)
    corrected, bottom = layer(torch.zeros(1, 1), torch.tensor([y], dtype=torch.float64))
    assert corrected.tolist() == [[140.0, 900.0, 100.0, 300.0, 500.0]]
    assert not bottom.any()
    assert corrected[0, 2] < corrected[0, 0] and int(corrected.argmax()) == 1


def test_figure_3_trace() -> None:
    """Paper Fig. 3: y = [2, 3, 1, 4, 5], edges 0→4, 1→3, 3→2 gives [3, 5, 1, 4, 2]."""
    data = {
        "num_classes": 5,
        "constraints": [{"name": "fig3", "postcondition": [["y4 < y0", "y3 < y1", "y2 < y3"]]}],
    }
    layer = SelfCorrectingLayer(parse_constraints(data), 5)
    corrected, _ = layer(torch.zeros(1, 1), torch.tensor([[2.0, 3.0, 1.0, 4.0, 5.0]]))
    assert corrected.tolist() == [[3.0, 5.0, 1.0, 4.0, 2.0]]


def test_example_2_accuracy_and_safety() -> None:
    """Paper Example 2: f(x) = [100, 900, 300, 140, 500] is accurate (class 1) but COC is
    minimal; the SC-Net output is safe and still predicts class 1."""
    layer = SelfCorrectingLayer(parse_constraints(PHI2), 5)
    corrected, _ = layer(torch.zeros(1, 1), torch.tensor([[100.0, 900.0, 300.0, 140.0, 500.0]]))
    assert int(corrected.argmax()) == 1
    assert float(corrected[0, 0]) > float(corrected[0].min())


def test_bottom_exactly_where_preconditions_conflict() -> None:
    """Paper §2.2: ⟨x ≤ 0.5, y0 < y1⟩, ⟨x ≥ 0.5, y1 < y0⟩ is unsatisfiable only at x = 0.5."""
    data = {
        "num_classes": 2,
        "constraints": [
            {
                "name": "low",
                "precondition": {"kind": "box", "lower": [None], "upper": [0.5]},
                "postcondition": [["y0 < y1"]],
            },
            {
                "name": "high",
                "precondition": {"kind": "box", "lower": [0.5], "upper": [None]},
                "postcondition": [["y1 < y0"]],
            },
        ],
    }
    layer = SelfCorrectingLayer(parse_constraints(data), 2)
    x = torch.tensor([[0.0], [0.5], [1.0], [math.nextafter(0.5, 0.0)]], dtype=torch.float64)
    y = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    corrected, bottom = layer(x, y)
    assert bottom.tolist() == [False, True, False, False]
    assert corrected.tolist() == [[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]


def test_equal_logits_are_pulled_apart_strictly() -> None:
    data = {"num_classes": 3, "constraints": [{"name": "c", "postcondition": [["y0 < y2"]]}]}
    layer = SelfCorrectingLayer(parse_constraints(data), 3)
    y = torch.tensor([[5.0, 5.0, 5.0]], dtype=torch.float64)
    corrected, bottom = layer(torch.zeros(1, 1), y)
    assert not bottom.any()
    # class 0 (the argmax by index) cannot stay on top; the tied roots 1, 2 are ranked by index
    below = math.nextafter(5.0, -math.inf)
    assert corrected.tolist() == [[math.nextafter(below, -math.inf), 5.0, below]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ties_at_the_lowest_float_stay_finite_and_strict(dtype: torch.dtype) -> None:
    # pulling three ties at the lowest finite float down would reach -inf twice: y0 = y1 = -inf
    # breaks y0 < y1; the tail is lifted back into the finite range instead
    data = {"num_classes": 3, "constraints": [{"name": "c", "postcondition": [["0 < 1", "1 < 2"]]}]}
    layer = SelfCorrectingLayer(parse_constraints(data), 3)
    lowest = torch.finfo(dtype).min
    y = torch.tensor([[lowest, lowest, lowest], [lowest, 0.0, lowest]], dtype=dtype)
    corrected, bottom = layer(torch.zeros(2, 1), y)
    assert not bottom.any()
    assert bool(torch.isfinite(corrected).all())
    assert layer.satisfied(torch.zeros(2, 1), corrected, y.argmax(dim=1)).all()
    up = math.nextafter(lowest, math.inf) if dtype == torch.float64 else None
    if up is not None:
        assert corrected.tolist() == [
            [lowest, up, math.nextafter(up, math.inf)],
            [lowest, up, 0.0],
        ]


# --- interface -----------------------------------------------------------------------------


def test_gradients_reach_the_logit_values() -> None:
    layer = SelfCorrectingLayer(parse_constraints(PHI2), 5)
    y = torch.tensor([[100.0, 900.0, 300.0, 140.0, 500.0]], requires_grad=True)
    corrected, _ = layer(torch.zeros(1, 1), y)
    weights = torch.arange(5, dtype=torch.float32)
    (corrected * weights).sum().backward()
    assert y.grad is not None
    assert sorted(y.grad[0].tolist()) == weights.tolist()


def test_several_active_properties_use_cached_tables() -> None:
    rng = np.random.default_rng(11)
    data = {
        "num_classes": 4,
        "constraints": [
            {
                "name": f"p{i}",
                "postcondition": [[list(lit) for lit in conj] for conj in _random_dnf(rng, 4)],
            }
            for i in range(3)
        ],
    }
    layer = SelfCorrectingLayer(parse_constraints(data), 4)
    y = torch.from_numpy(rng.normal(size=(50, 4)))
    first = layer(torch.zeros(50, 1), y)
    assert len(layer._table_cache) == 1
    second = layer(torch.zeros(50, 1), y)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


def test_no_constraint_and_empty_batch() -> None:
    layer = SelfCorrectingLayer(parse_constraints({"num_classes": 3, "constraints": []}), 3)
    y = torch.randn(4, 3)
    corrected, bottom = layer(torch.zeros(4, 2), y)
    assert torch.equal(corrected, y) and not bottom.any()
    corrected, bottom = layer(torch.zeros(0, 2), torch.zeros(0, 3))
    assert corrected.shape == (0, 3) and bottom.shape == (0,)


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        (torch.zeros(2, 1), torch.zeros(2, 4), r"logits must have shape \[batch, 5\]"),
        (torch.zeros(3, 1), torch.zeros(2, 5), "one row per logits row"),
        (torch.zeros(2, 1), torch.tensor([[0.0, 1, 2, 3, float("nan")]] * 2), "NaN or infinite"),
        (torch.full((2, 1), float("nan")), torch.zeros(2, 5), "x contains NaN"),
    ],
)
def test_bad_inputs_are_rejected(x: torch.Tensor, y: torch.Tensor, message: str) -> None:
    layer = SelfCorrectingLayer(parse_constraints(PHI2), 5)
    with pytest.raises(SelfCorrectionInputError, match=message):
        layer(x, y)


def test_input_width_is_checked() -> None:
    data = {
        "num_classes": 2,
        "constraints": [
            {
                "name": "b",
                "precondition": {"kind": "box", "lower": [0, 0], "upper": [1, 1]},
                "postcondition": [["y0 < y1"]],
            }
        ],
    }
    layer = SelfCorrectingLayer(parse_constraints(data), 2)
    with pytest.raises(SelfCorrectionInputError, match=r"3 features per row, .* read 2"):
        layer(torch.zeros(1, 3), torch.zeros(1, 2))


def test_combination_limit_is_an_error_not_a_silent_output() -> None:
    # 12 disjuncts, each cyclic: never satisfied, so every row needs the full search
    literals = [[f"y{i} < y{j}", f"y{j} < y{i}"] for i in range(4) for j in range(4) if i != j]
    data = {
        "num_classes": 4,
        "constraints": [{"name": f"p{k}", "postcondition": literals} for k in range(5)],
    }  # 12^5 > 65536
    layer = SelfCorrectingLayer(parse_constraints(data), 4)
    with pytest.raises(CombinationLimitError, match="p0, p1, p2, p3, p4 have 248832"):
        layer(torch.zeros(1, 1), torch.tensor([[3.0, 2.0, 1.0, 0.0]]))


def test_satisfied_and_active_constraints() -> None:
    data = {
        "num_classes": 2,
        "constraints": [
            {
                "name": "b",
                "precondition": {"kind": "box", "lower": [0], "upper": [1]},
                "postcondition": [["y0 < y1"]],
            }
        ],
    }
    layer = SelfCorrectingLayer(parse_constraints(data), 2)
    x = torch.tensor([[0.5], [2.0], [0.5]])
    y = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert layer.active_constraints(x, y)[:, 0].tolist() == [True, False, True]
    assert layer.satisfied(x, y).tolist() == [False, True, True]
    corrected, _ = layer(x, y)
    assert layer.satisfied(x, corrected).all()


def test_prediction_preconditions_read_the_uncorrected_logits() -> None:
    """``predicted_in`` tests the argmax of the logits handed in. Applied to its own output the
    layer re-evaluates it, so with mutually exclusive prediction-based constraints it is not
    idempotent (each application is correct for the prediction it was given)."""
    data = {
        "num_classes": 2,
        "constraints": [
            {
                "name": "if0",
                "precondition": {"kind": "predicted_in", "classes": [0]},
                "postcondition": [["y0 < y1"]],
            },
            {
                "name": "if1",
                "precondition": {"kind": "predicted_in", "classes": [1]},
                "postcondition": [["y1 < y0"]],
            },
        ],
    }
    layer = SelfCorrectingLayer(parse_constraints(data), 2)
    x = torch.zeros(1, 1)
    once, _ = layer(x, torch.tensor([[2.0, 1.0]]))
    twice, _ = layer(x, once)
    assert once.tolist() == [[1.0, 2.0]] and twice.tolist() == [[2.0, 1.0]]
    assert layer.satisfied(x, once, torch.tensor([0])).all()
    assert not layer.satisfied(x, once).all()


def _chain_problem(m: int, count: int) -> tuple[dict, list[tuple[Precondition, DNF]]]:
    """``count`` always-active constraints of two one-literal disjuncts each over ``m``
    classes: ``2**count`` disjunct combinations at once."""
    dnfs: list[DNF] = [
        (((i % m, (i + 1) % m),), (((i + 2) % m, (i + 3) % m),)) for i in range(count)
    ]
    data = {"num_classes": m, "constraints": [
        {"name": f"c{i}", "postcondition": [[list(lit) for lit in conj] for conj in dnf]}
        for i, dnf in enumerate(dnfs)]}
    return data, [(lambda x, y: True, dnf) for dnf in dnfs]


_BOUNDED_MEMORY_RUN = """
import json, resource, sys
limit = 1500 << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import torch
from verifier.selfcorrect import SelfCorrectingLayer, parse_constraints
data = json.loads(sys.argv[1])
m = data["num_classes"]
layer = SelfCorrectingLayer(parse_constraints(data), m)
corrected, bottom = layer(torch.zeros(1, 1), torch.arange(m, 0, -1, dtype=torch.float64)[None])
print(json.dumps({"corrected": corrected[0].tolist(), "bottom": bool(bottom[0])}))
"""


def test_many_combinations_of_many_classes_are_corrected_in_bounded_memory() -> None:
    """32,768 disjunct combinations of 20 classes active at once (half the combination
    limit): the longest paths of all of them at once took a 2.1 GB tensor (the limit, 4.2 GB),
    so a process with 1.5 GB of address space failed with an allocation error; the tables are
    now built a chunk at a time. The corrected row equals the plain-Python reference."""
    data, constraints = _chain_problem(20, 15)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", _BOUNDED_MEMORY_RUN, json.dumps(data)],
                          capture_output=True, text=True, cwd=root, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    y = [float(v) for v in range(20, 0, -1)]
    expected, bottom = reference_layer(constraints, np.zeros(1), y)
    assert got["bottom"] is bottom is False
    assert got["corrected"] == expected
    assert all(holds(dnf, got["corrected"]) for _, dnf in constraints)


def test_combination_tables_built_in_chunks_equal_one_batch() -> None:
    """The chunked build computes every combination's tables bit for bit as one batch would."""
    data, _ = _chain_problem(6, 9)
    layer = SelfCorrectingLayer(parse_constraints(data), 6)
    layer.table_chunk_elements = 1
    chunked = layer._tables(list(range(9)))
    layer._table_cache.clear()
    layer.table_chunk_elements = 1 << 40
    whole = layer._tables(list(range(9)))
    assert chunked[0].shape[0] == 512
    assert all(torch.equal(a, b) for a, b in zip(chunked, whole, strict=True))
