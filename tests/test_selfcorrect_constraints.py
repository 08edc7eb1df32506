"""Safe-ordering constraint files: schema, resolution, errors, benchmark formats, preconditions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from hypothesis import given
from hypothesis import strategies as st

from verifier.errors import CertgateInputError
from verifier.selfcorrect import (
    ConstraintError,
    SelfCorrectingLayer,
    load_constraints,
    parse_constraints,
)
from verifier.selfcorrect.schema import BoxPrecondition, PredictedInPrecondition

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
BENCHMARKS = ROOT.parent / "shared" / "benchmarks"
ACAS_PROPERTIES = BENCHMARKS / "acasxu" / "properties.json"
COLLISION_PROPERTIES = BENCHMARKS / "collision" / "properties.json"

needs_benchmarks = pytest.mark.skipif(
    not ACAS_PROPERTIES.exists(), reason="the shared benchmark data is not present"
)


def test_toy_example_resolves_names_and_round_trips(tmp_path: Path) -> None:
    constraints = load_constraints(EXAMPLES / "constraints_toy.yaml")
    assert constraints.num_classes == 3 and constraints.input_size == 2
    assert constraints.class_names == ("low", "medium", "high")
    by_name = {c.name: c for c in constraints.constraints}
    assert by_name["far_left_is_low"].postcondition == (((1, 0), (2, 0)),)
    assert by_name["band_predicted_low"].postcondition == (((2, 1),),)
    assert by_name["high_then_medium"].precondition == PredictedInPrecondition(
        kind="predicted_in", classes=[2]
    )
    text = constraints.describe()
    assert "far_left_is_low:" in text and "x in (-inf, -1) × R" in text
    assert "then (high < low) or (high < medium) or (low < medium)" in text
    path = tmp_path / "normalised.yaml"
    path.write_text(yaml.safe_dump(constraints.to_dict(), sort_keys=False))
    assert load_constraints(path) == constraints
    json_path = tmp_path / "normalised.json"
    json_path.write_text(json.dumps(constraints.to_dict()))
    assert load_constraints(json_path) == constraints


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        ("y1 < y0", (1, 0)),
        ("b > a", (0, 1)),
        ("2<0", (2, 0)),
        ([2, "a"], (2, 0)),
        (["y2", 1], (2, 1)),
    ],
)
def test_literal_forms(literal: object, expected: tuple[int, int]) -> None:
    data = {
        "classes": ["a", "b", "c"],
        "constraints": [{"name": "c", "postcondition": [[literal]]}],
    }
    assert parse_constraints(data).constraints[0].postcondition == ((expected,),)


def _with(constraint: dict, **header: object) -> dict:
    return {"classes": ["a", "b", "c"], **header, "constraints": [{"name": "c", **constraint}]}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            _with({"postcondition": [["a < z"]]}),
            r"constraints\.0\.postcondition\.0\.0: unknown "
            r"class 'z'; classes are a, b, c",
        ),
        (_with({"postcondition": [[[0, 3]]]}), "class index 3 is out of range for 3 classes"),
        (
            _with({"postcondition": [[]]}),
            r"constraints\.0\.postcondition\.0: List should have at "
            "least 1 item",
        ),
        (_with({"postcondition": []}), r"constraints\.0\.postcondition: List should have at least"),
        (_with({"postcondition": [["a < a"]]}), "compares a class with itself"),
        (_with({"postcondition": [["a <= b"]]}), "is not of the form 'a < b'"),
        (
            _with({"postcondition": [["a < b"]], "weight": 2}),
            r"constraints\.0\.weight: Extra "
            "inputs are not permitted",
        ),
        (
            _with({"postcondition": [["a < b"]], "precondition": {"kind": "ball"}}),
            r"constraints\.0\.precondition: Input tag 'ball' found",
        ),
        (
            _with(
                {
                    "postcondition": [["a < b"]],
                    "precondition": {"kind": "box", "lower": [1.0], "upper": [0.0]},
                }
            ),
            r"precondition\.box: Value error, side 0 is empty: lower=1\.0, upper=0\.0",
        ),
        (
            _with(
                {
                    "postcondition": [["a < b"]],
                    "precondition": {
                        "kind": "box",
                        "lower": [0.0],
                        "upper": [0.0],
                        "upper_closed": False,
                    },
                }
            ),
            "empty: .* with an open end",
        ),
        (
            _with(
                {
                    "postcondition": [["a < b"]],
                    "precondition": {"kind": "box", "lower": [0.0, 1.0], "upper": [1.0]},
                }
            ),
            "lower has 2 entries but upper has 1",
        ),
        (
            _with(
                {
                    "postcondition": [["a < b"]],
                    "precondition": {"kind": "linear", "a": [[1.0, 2.0]], "b": [1.0, 2.0]},
                }
            ),
            "a has 1 rows but b has 2 entries",
        ),
        (
            _with(
                {
                    "postcondition": [["a < b"]],
                    "precondition": {"kind": "predicted_in", "classes": ["q"]},
                }
            ),
            r"precondition\.classes\.0: unknown class 'q'",
        ),
        (
            _with(
                {
                    "postcondition": [["a < b"]],
                    "precondition": {"kind": "box", "lower": [0.0], "upper": [1.0]},
                },
                input_size=2,
            ),
            r"preconditions read different input sizes \[1, 2\]",
        ),
        (_with({"postcondition": [["a < b"]]}, num_classes=4), "num_classes=4 but classes lists 3"),
        (
            {"constraints": [{"name": "c", "postcondition": [["y0 < y1"]]}]},
            "the class count is unknown",
        ),
        ({"classes": ["a", "a"], "constraints": []}, r"classes: duplicate names \['a'\]"),
        (
            {
                "classes": ["a", "b"],
                "constraints": [
                    {"name": "c", "postcondition": [["a < b"]]},
                    {"name": "c", "postcondition": [["b < a"]]},
                ],
            },
            r"duplicate constraint names \['c'\]",
        ),
    ],
)
def test_errors_name_the_field(data: dict, message: str) -> None:
    with pytest.raises(ConstraintError, match=message):
        parse_constraints(data)


def test_errors_are_input_errors_and_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("classes: [a, b]\nconstraints:\n  - name: c\n    postcondition: [[a < q]]\n")
    with pytest.raises(CertgateInputError, match=r"bad\.yaml: constraints\.0"):
        load_constraints(path)
    broken = tmp_path / "broken.yaml"
    broken.write_text("classes: [a, b\n")
    with pytest.raises(ConstraintError, match=r"broken\.yaml: cannot parse"):
        load_constraints(broken)
    text_file = tmp_path / "x.txt"
    text_file.write_text("constraints: []\n")
    with pytest.raises(ConstraintError, match=r"expected a \.json, \.yaml or \.yml file"):
        load_constraints(text_file)


def test_class_count_from_the_model_is_checked() -> None:
    data = {"classes": ["a", "b", "c"], "constraints": []}
    with pytest.raises(ConstraintError, match="declares 3 classes but the model has 4"):
        parse_constraints(data, num_classes=4)
    no_header = {"constraints": [{"name": "c", "postcondition": [["y0 < y4"]]}]}
    assert parse_constraints(no_header, num_classes=5).class_names == tuple(
        f"y{i}" for i in range(5)
    )
    with pytest.raises(ConstraintError, match="class index 4 is out of range for 3 classes"):
        parse_constraints(no_header, num_classes=3)


@needs_benchmarks
def test_acasxu_properties_load_per_network() -> None:
    data = json.loads(ACAS_PROPERTIES.read_text())
    per_network = data["scnet_safe_ordering_constraints"]["constraints_per_network"]
    for network, names in per_network.items():
        constraints = parse_constraints(data, network=network)
        assert constraints.names == names
        assert constraints.num_classes == 5 and constraints.input_size == 5
        assert constraints.class_names == ("COC", "WL", "WR", "SL", "SR")
    n29 = parse_constraints(data, network="N_2,9")
    by_name = {c.name: c for c in n29.constraints}
    assert by_name["φ8"].postcondition == (
        ((0, 1), (2, 1), (3, 1), (4, 1)),
        ((1, 0), (2, 0), (3, 0), (4, 0)),
    )
    phi2 = by_name["φ2"].precondition
    assert isinstance(phi2, BoxPrecondition)
    assert phi2.lower == [0.6, None, None, 0.45, None]
    with pytest.raises(ConstraintError, match="assigned per network; choose one of N_1,1"):
        parse_constraints(data)
    with pytest.raises(ConstraintError, match="unknown network 'N_9,9'"):
        parse_constraints(data, network="N_9,9")


@needs_benchmarks
def test_acasxu_example_file_matches_the_benchmark_encoding() -> None:
    example = load_constraints(EXAMPLES / "constraints_acasxu_n2_9.yaml")
    benchmark = load_constraints(ACAS_PROPERTIES, network="N_2,9")
    assert [c.name for c in example.constraints] == ["phi2", "phi3", "phi4", "phi8"]
    for mine, theirs in zip(example.constraints, benchmark.constraints, strict=True):
        assert mine.postcondition == theirs.postcondition
        assert mine.precondition == theirs.precondition


def test_bare_neutral_constraints() -> None:
    data = {
        "constraints": [
            {
                "name": "n",
                "input_box_normalised": {"lower": [0.0, None], "upper": [1.0, 2.0]},
                "postcondition_dnf": [[[0, 1]], [[2, 1], [0, 2]]],
            }
        ]
    }
    constraints = parse_constraints(data, num_classes=3)
    assert constraints.constraints[0].postcondition == (((0, 1),), ((2, 1), (0, 2)))
    assert constraints.input_size == 2
    with pytest.raises(ConstraintError, match="missing key 'input_box_normalised'"):
        parse_constraints({"constraints": [{"name": "n", "postcondition_dnf": [[[0, 1]]]}]}, 3)


@needs_benchmarks
def test_collision_properties_load() -> None:
    constraints = load_constraints(COLLISION_PROPERTIES)
    raw = json.loads(COLLISION_PROPERTIES.read_text())["properties"]
    assert len(constraints) == 500 and constraints.num_classes == 2
    assert constraints.input_size == 6
    for constraint, item in zip(constraints.constraints, raw, strict=True):
        assert constraint.postcondition == ((tuple(item["order"]),),)
        assert isinstance(constraint.precondition, BoxPrecondition)
        assert constraint.precondition.lower == item["lower"]


# --- precondition evaluation against a numpy oracle ----------------------------------------

GRID = [-1.0, -0.5, 0.0, 0.5, 1.0]
bounds = st.one_of(st.none(), st.sampled_from(GRID))


@st.composite
def boxes(draw: st.DrawFn, width: int) -> dict:
    lower, upper, lower_closed, upper_closed = [], [], [], []
    for _ in range(width):
        low, high = draw(bounds), draw(bounds)
        if low is not None and high is not None and low > high:
            low, high = high, low
        closed_low, closed_high = draw(st.booleans()), draw(st.booleans())
        if low is not None and low == high:
            closed_low = closed_high = True
        lower.append(low)
        upper.append(high)
        lower_closed.append(closed_low)
        upper_closed.append(closed_high)
    return {
        "kind": "box",
        "lower": lower,
        "upper": upper,
        "lower_closed": lower_closed,
        "upper_closed": upper_closed,
    }


def _in_box(box: dict, x: np.ndarray) -> np.ndarray:
    inside = np.ones(x.shape[0], dtype=bool)
    for i, (low, high) in enumerate(zip(box["lower"], box["upper"], strict=True)):
        if low is not None:
            inside &= x[:, i] >= low if box["lower_closed"][i] else x[:, i] > low
        if high is not None:
            inside &= x[:, i] <= high if box["upper_closed"][i] else x[:, i] < high
    return inside


@given(
    first=boxes(2),
    second=boxes(2),
    third=boxes(2),
    row=st.tuples(st.sampled_from([-1.0, 0.0, 2.0]), st.sampled_from([-1.0, 0.0, 1.0])),
    strict=st.booleans(),
    classes=st.sets(st.integers(0, 2), min_size=1),
    seed=st.integers(0, 1000),
)
def test_preconditions_match_a_numpy_oracle(
    first: dict,
    second: dict,
    third: dict,
    row: tuple[float, float],
    strict: bool,
    classes: set[int],
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    x = np.vstack([rng.choice([*GRID, 0.25, -0.75], size=(60, 2)), rng.normal(size=(20, 2))])
    y = rng.normal(size=(80, 3))
    union = {"kind": "union", "boxes": [second, third]}
    linear = {"kind": "linear", "a": [list(row)], "b": [0.5], "strict": strict}
    predicted = {"kind": "predicted_in", "classes": sorted(classes)}
    both = {"kind": "all", "conditions": [union, predicted]}
    kinds = [first, union, linear, predicted, both, {"kind": "always"}]
    data = {
        "num_classes": 3,
        "constraints": [
            {"name": f"c{i}", "precondition": kind, "postcondition": [["y0 < y1"]]}
            for i, kind in enumerate(kinds)
        ],
    }
    layer = SelfCorrectingLayer(parse_constraints(data), 3)
    active = layer.active_constraints(torch.from_numpy(x), torch.from_numpy(y)).numpy()
    value = x @ np.array(row)
    top = np.argmax(y, axis=1)
    in_union = _in_box(second, x) | _in_box(third, x)
    is_predicted = np.isin(top, sorted(classes))
    expected = np.stack(
        [
            _in_box(first, x),
            in_union,
            value < 0.5 if strict else value <= 0.5,
            is_predicted,
            in_union & is_predicted,
            np.ones(80, dtype=bool),
        ],
        axis=1,
    )
    assert np.array_equal(active, expected)


def test_a_constraint_that_can_never_hold_warns_at_load_time() -> None:
    import warnings as _warnings

    from verifier.selfcorrect.constraints import UnsatisfiableConstraintWarning
    from verifier.selfcorrect.loaders import parse_constraints

    document = {"classes": ["a", "b", "c"], "constraints": [
        {"name": "cycle", "postcondition": [[["a", "b"], ["b", "a"]]]},
        {"name": "fine", "postcondition": [[["a", "b"]]]},
    ]}
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        parse_constraints(document)
    messages = [str(w.message) for w in caught
                if issubclass(w.category, UnsatisfiableConstraintWarning)]
    assert len(messages) == 1 and "'cycle' can never hold" in messages[0]


def test_a_key_given_twice_in_a_constraint_file_is_refused(tmp_path: Path) -> None:
    """A second ``postcondition:`` in one constraint replaced the first silently (PyYAML kept
    the last value), so the variant enforced one rule where the file wrote two."""
    path = tmp_path / "twice.yaml"
    path.write_text("classes: [deny, grant]\nconstraints:\n  - name: r\n"
                    "    precondition: {kind: box, lower: [1.0], upper: [null]}\n"
                    "    postcondition: [[deny < grant]]\n"
                    "    postcondition: [[grant < deny]]\n")
    with pytest.raises(CertgateInputError, match=r"(?s)twice.yaml: cannot parse: key "
                                                 r"'postcondition' is given twice.*line 6"):
        load_constraints(path)


@pytest.mark.parametrize("postcondition, precondition, field", [
    ("[[[false, true]]]", "{kind: always}", r"constraints\.0\.postcondition\.0\.0\.0"),
    ("[[yes < no]]", "{kind: predicted_in, classes: [false]}",
     r"constraints\.0\.precondition\.predicted_in\.classes\.0"),
])
def test_a_boolean_class_is_refused_and_unquoted_yes_or_no_name_their_classes(
        tmp_path: Path, postcondition: str, precondition: str, field: str) -> None:
    """YAML 1.1 read unquoted ``no``/``yes`` as booleans and pydantic read ``False``/``True``
    as the indices 0/1: with classes ``["yes", "no"]`` the pair ``[no, yes]`` (meant ``y_no <
    y_yes``) became ``(0, 1)``, ``y_yes < y_no``, the opposite order, without a word. The
    file is now read by the YAML 1.2 core schema: ``no`` and ``yes`` are the class names the
    user wrote, and a boolean (``true``/``false``) is refused by field."""
    path = tmp_path / "yes_no.yaml"
    path.write_text('classes: ["yes", "no"]\nconstraints:\n  - name: r\n'
                    f"    precondition: {precondition}\n    postcondition: {postcondition}\n")
    with pytest.raises(ConstraintError, match=rf"yes_no.yaml: invalid constraints: {field}: "
                                              r"Value error, a class is a name or an index, "
                                              r"got the boolean (True|False)"):
        load_constraints(path)
    unquoted = path.read_text().replace("[false, true]", "[no, yes]").replace("[false]", "[no]")
    path.write_text(unquoted)
    constraints = load_constraints(path)
    expected = (((1, 0),),) if "no, yes" in unquoted else (((0, 1),),)
    assert constraints.constraints[0].postcondition == expected
