"""Problem construction: Libra specification/query formats, partitions and their weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.causal_nets import threshold_network
from verifier.causal import CausalInputError, build_problem, load_libra_spec, load_query_box
from verifier.causal.analysis import AnalysisSettings, choose_split, class_gaps, decision_gap
from verifier.causal.partition import initial_partition, split_candidates, uniform_share
from verifier.convert import load_network

LIBRA = Path("/work/shared/benchmarks/libra")


@pytest.mark.skipif(not LIBRA.is_dir(), reason="Libra benchmark folder not present")
def test_compas_query_fixes_a_one_hot_category() -> None:
    network = load_network(LIBRA / "compas/networks/no-bias1.json")
    spec = load_libra_spec(LIBRA / "compas/specs/race.json")
    query = load_query_box(LIBRA / "compas/queries/Lt25_no-bias.json")
    problem = build_problem(network, **spec, query=query)
    assert spec["protected_kind"] == "one_hot" and problem.cell_count == 6
    age = next(i for i, g in enumerate(problem.onehot_groups) if 3 in g)
    assert problem.query_allowed[age].tolist() == [False, True, False]
    assert problem.query_fraction() == pytest.approx(1 / 3)
    lower, upper = initial_partition(problem)
    assert lower[0, 3] == 1.0 and upper[0, 2] == 0.0 and upper[0, 4] == 0.0


def test_splits_tile_the_partition_exactly() -> None:
    network = threshold_network([1.0, 0.0, 0.0, 0.0, 1.0, 0.5], 0.0,
                                ["x", "g0", "g1", "g2", "y", "s"])
    problem = build_problem(network, ["s"], onehot_groups=[["g0", "g1", "g2"]],
                            query={"x": (0.2, 0.6)})
    lower, upper = initial_partition(problem)
    assert uniform_share(problem, lower, upper) == pytest.approx([1.0])
    child_lo, child_hi, valid = split_candidates(problem, lower, upper, 0.0)
    assert valid.all()
    for d in range(valid.shape[1]):
        shares = uniform_share(problem, child_lo[0, d], child_hi[0, d])
        assert shares.sum() == pytest.approx(1.0)
    group = child_hi[0, 2][:, 1:4]  # the one-hot candidate: {g0, g1} and {g2}
    assert group.tolist() == [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    assert child_lo[0, 2][1, 3] == 1.0
    narrow = split_candidates(problem, lower, upper, 0.5)[2]
    assert not narrow[0, 0] and narrow[0, 2]


def test_bad_specifications() -> None:
    network = threshold_network([1.0, 1.0, 1.0], 0.0, ["a", "b", "c"])
    with pytest.raises(CausalInputError, match="'d' is not an input"):
        build_problem(network, ["d"])
    with pytest.raises(CausalInputError, match="overlaps one-hot group 0"):
        build_problem(network, ["c"], onehot_groups=[["a", "b"], ["b", "a"]])
    with pytest.raises(CausalInputError, match="overlaps the protected feature"):
        build_problem(network, ["c"], onehot_groups=[["a", "c"]])
    with pytest.raises(CausalInputError, match="split value"):
        build_problem(network, ["c"], split_values=[1.5])
    with pytest.raises(CausalInputError, match="empty"):
        build_problem(network, ["c"], query={"a": (1.5, 2.0)})
    with pytest.raises(CausalInputError, match="zero volume"):
        build_problem(network, ["c"], query={"a": (0.3, 0.3)})
    assert np.isclose(build_problem(network, ["c"], query={"a": (0.0, 0.25)}).query_fraction(),
                      0.25)


def test_a_one_hot_feature_named_whole_gets_its_columns_in_the_error() -> None:
    network = threshold_network([1.0, 1.0, 1.0], 0.0, ["age", "sex=Female", "sex=Male"])
    with pytest.raises(CausalInputError,
                       match="'sex' is not an input of the network; its one-hot columns are "
                             "sex=Female,sex=Male: name them all"):
        build_problem(network, ["sex"])
    with pytest.raises(CausalInputError, match=r"'Age' is not an input of the network "
                                               r"\(did you mean 'age'\?\)"):
        build_problem(network, ["Age"])


def test_refinement_cut_by_the_deadline_keeps_its_finished_parts() -> None:
    # class 1 iff x + 0.5 s > 0.75: biased iff x in (0.25, 0.75]. A budget that ends inside
    # the refinement keeps every finished partition; the unfinished ones inside the witnessed
    # region count as covered, and the bounds still contain the true share 0.5.
    from verifier.causal import CausalSettings, certify_causal_fairness

    network = threshold_network([1.0, 0.5], -0.75, ["x", "s"])
    problem = build_problem(network, ["s"])
    full = certify_causal_fairness(problem, CausalSettings(timeout_s=20.0, target_width=0.01))
    counts = full.details["partition_counts"]
    # x = 0.75 itself is biased (z = 0 at s = 0 is class 0, a tie; s >= 0.5 gives class 1), so
    # the partitions touching it hold a witness at every depth: the refinement meets the
    # target with a few of them still being refined, never with an undecided one
    assert counts["unresolved"] == 0
    assert full.details["excluded_fraction"] == 0.0
    low, high = full.bounds["biased_share"]
    assert low <= 0.5 <= high and high - low <= 0.01
    from verifier.causal.certify import REFINING, _unfinished

    assert _unfinished(np.array([-1, 0, 3])).tolist() == [5, REFINING, REFINING]


def test_decision_gap_closed_form() -> None:
    # one cell pair decided for class 0 (gap 0 + 0): fair gap 0
    assert decision_gap(np.array([[[0.0, 1.0], [0.0, 2.0]]]),
                        np.array([[[0.5, 0.1], [0.2, 0.3]]])).tolist() == [0.0]
    # fair needs 1 + 2 or 3 + 0.5; bias needs p0:c1 + p1:c0 = 0.1 + 0.2
    gap = decision_gap(np.array([[[1.0, 3.0], [2.0, 0.5]]]),
                       np.array([[[0.5, 0.1], [0.2, 0.3]]]))
    assert gap == pytest.approx([0.3])
    lower_bounds = np.array([[-0.4, 0.4], [0.2, -0.2]])  # rows y0 - y1, y1 - y0 per box
    assert class_gaps(lower_bounds, 1, 2).tolist() == [[[0.4, 0.0]], [[0.0, 0.2]]]


def test_refinement_cuts_the_input_that_moves_the_border() -> None:
    # class 1 iff x + 0.5 s > 0.75; z is never read. Both edges are equally wide, so only the
    # decision-gap rule tells x (index 1) from z (index 0).
    network = threshold_network([0.0, 1.0, 0.5], -0.75, ["z", "x", "s"])
    problem = build_problem(network, ["s"])
    lower, upper = initial_partition(problem)
    probes = problem.probe_points()[None, :, :]
    children_lo, children_hi, ok = choose_split(problem, lower, upper, AnalysisSettings(),
                                                probes)
    assert ok.tolist() == [True]
    assert children_hi[0, 0].tolist()[:2] == [1.0, 0.5]
    assert children_lo[0, 1].tolist()[:2] == [0.0, 0.5]


def test_query_files_true_is_the_whole_space_and_unnamed_is_an_error(tmp_path: Path) -> None:
    network = threshold_network([1.0, 1.0, 1.0], 0.0, ["a", "b", "c"])
    whole = tmp_path / "true.json"
    whole.write_text('{"name": "A", "constraints": [], "box": {}}')
    assert load_query_box(whole) == {}
    problem = build_problem(network, ["c"], query=load_query_box(whole))
    assert problem.query_fraction() == 1.0
    nothing = tmp_path / "nothing.json"
    nothing.write_text("{}")
    with pytest.raises(CausalInputError, match="names no input bounds"):
        load_query_box(nothing)
    reversed_box = tmp_path / "reversed.json"
    reversed_box.write_text('{"box": {"a": {"lower": 0.7, "upper": 0.2}}}')
    with pytest.raises(CausalInputError, match="empty at 'a'"):
        load_query_box(reversed_box)
