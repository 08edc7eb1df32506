"""Constraint files that bound inputs by name (``lower: {dti: 300}``): the same constraint set,
bit for bit, as the positional file; each error names its field; ``selfcorrect wrap`` resolves
names against the model's own input names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from pipeline_steps.cli import main
from verifier.convert import save_network
from verifier.network import Layer, Network
from verifier.selfcorrect import (
    ConstraintError,
    SelfCorrectingNetwork,
    load_constraints,
    parse_constraints,
)
from verifier.selfcorrect.constraints import InputNamesUnknownError
from verifier.selfcorrect.export import load_torchscript

INPUTS = ["age", "income", "debt_ratio", "sex", "housing_own", "housing_rent"]
CLASSES = ["reject", "review", "accept"]
POST = [["reject < accept", "review < accept"]]


def _document(preconditions: list[dict[str, Any]], **header: Any) -> dict[str, Any]:
    return {"classes": CLASSES, **header, "constraints": [
        {"name": f"c{i}", "precondition": p, "postcondition": POST}
        for i, p in enumerate(preconditions)]}


NAMED = [
    {"kind": "box", "lower": {"income": 60.0}},
    {"kind": "box", "lower": {"debt_ratio": 0.7}, "lower_closed": {"debt_ratio": False},
     "upper": {"age": 30.0}},
    {"kind": "union", "boxes": [
        {"kind": "box", "lower": {"age": 65.0}, "upper": {"income": 20.0},
         "upper_closed": {"income": False}},
        {"kind": "box", "lower": [None, None, None, 1.0, None, None], "upper": {"sex": 1.0}}]},
    {"kind": "linear", "a": {"income": -0.01, "debt_ratio": 1.0}, "b": 0.1, "strict": True},
    {"kind": "all", "conditions": [
        {"kind": "linear", "a": [{"housing_own": 1.0, "housing_rent": 1.0}, [0, 0, 0, 1, 0, 0]],
         "b": [1.0, 0.5]},
        {"kind": "predicted_in", "classes": ["review"]}]},
]
"""Every place a name may stand: box sides and side flags, a union's boxes (one mixed with a
positional list), a linear row and a linear matrix's rows, inside an ``all``."""

_ = None
POSITIONAL = [
    {"kind": "box", "lower": [_, 60.0, _, _, _, _], "upper": [_] * 6},
    {"kind": "box", "lower": [_, _, 0.7, _, _, _], "upper": [30.0, _, _, _, _, _],
     "lower_closed": [True, True, False, True, True, True]},
    {"kind": "union", "boxes": [
        {"kind": "box", "lower": [65.0, _, _, _, _, _], "upper": [_, 20.0, _, _, _, _],
         "upper_closed": [True, False, True, True, True, True]},
        {"kind": "box", "lower": [_, _, _, 1.0, _, _], "upper": [_, _, _, 1.0, _, _]}]},
    {"kind": "linear", "a": [[0, -0.01, 1.0, 0, 0, 0]], "b": [0.1], "strict": True},
    {"kind": "all", "conditions": [
        {"kind": "linear", "a": [[0, 0, 0, 0, 1.0, 1.0], [0, 0, 0, 1, 0, 0]], "b": [1.0, 0.5]},
        {"kind": "predicted_in", "classes": ["review"]}]},
]


def _model() -> torch.nn.Module:
    torch.manual_seed(11)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        model[0].weight /= torch.tensor([40.0, 50.0, 0.5, 1.0, 1.0, 1.0])
    return model.double().eval()


def _adversarial_rows() -> torch.Tensor:
    """Rows on every bound of the constraints and one float64 step either side of it, on the
    linear rows' hyperplanes, and random rows around them."""
    rng = np.random.default_rng(7)
    base = rng.normal([40, 60, 0.6, 0.5, 0.5, 0.5], [20, 40, 0.4, 1, 1, 1], size=(64, 6))
    rows = [base]
    edges = {0: [30.0, 65.0], 1: [60.0, 20.0], 2: [0.7], 3: [1.0, 0.5], 4: [0.5], 5: [0.5]}
    for column, values in edges.items():
        for value in values:
            for point in (np.nextafter(value, -np.inf), value, np.nextafter(value, np.inf)):
                shifted = base[:16].copy()
                shifted[:, column] = point
                rows.append(shifted)
    on_plane = base[:16].copy()
    on_plane[:, 2] = 0.1 + 0.01 * on_plane[:, 1]  # income·(-0.01) + debt = 0.1, to rounding
    rows.append(on_plane)
    exact = base[:16].copy()
    exact[:, 1], exact[:, 2] = 0.0, 0.1  # exactly on the strict row's hyperplane
    rows.append(exact)
    return torch.from_numpy(np.concatenate(rows))


def test_a_named_file_is_the_positional_file_bit_for_bit() -> None:
    named = parse_constraints(_document(NAMED, inputs=INPUTS))
    from_model = parse_constraints(_document(NAMED), input_names=INPUTS)
    positional = parse_constraints(_document(POSITIONAL))
    assert named == positional and from_model == positional
    assert named.to_dict() == positional.to_dict()
    assert "inputs" not in named.to_dict()  # the normalised form stays positional
    assert parse_constraints(named.to_dict()) == positional
    model = _model()
    x = _adversarial_rows()
    with torch.no_grad():
        logits = model(x)
        results = [SelfCorrectingNetwork(model, constraints).forward_with_bottom(x)
                   for constraints in (named, from_model, positional)]
        active = SelfCorrectingNetwork(model, positional).layer.preconditions(x, logits.argmax(1))
    for outputs, bottom in results[:2]:
        assert torch.equal(outputs, results[2][0]) and torch.equal(bottom, results[2][1])
    assert active.any(dim=0).all()  # every constraint is active somewhere on these rows
    assert not torch.equal(results[2][0], logits)  # and the layer corrected some row


@pytest.mark.parametrize(("precondition", "message"), [
    ({"kind": "box", "lower": {"incme": 60.0}},
     r"box: Value error, lower: unknown input 'incme' \(did you mean 'income'\?\); inputs: age, "),
    ({"kind": "box", "lower": {"housing": 1.0}},
     r"lower: unknown input 'housing' \('housing' is one-hot encoded as housing_own, "
     r"housing_rent: name one of these\)"),
    ({"kind": "box", "lower": {"income": 1.0}, "upper_closed": {"Debt_ratio": False}},
     r"upper_closed: unknown input 'Debt_ratio' \(did you mean 'debt_ratio'\?\)"),
    ({"kind": "linear", "a": [[0, 0, 0, 0, 0, 1.0], {"agee": 1.0}], "b": [1.0, 2.0]},
     r"linear: Value error, a\.1: unknown input 'agee' \(did you mean 'age'\?\)"),
    ({"kind": "box", "lower": {"income": float("nan")}},
     r"lower\[1\] is NaN; use null for an unbounded side"),
    ({"kind": "box", "lower": {"income": 60.0}, "upper": {"income": 50.0}},
     r"side 1 is empty: lower=60.0, upper=50.0"),
    ({"kind": "box", "lower": {"income": 60.0}, "upper": [None] * 5},
     r"lower has 6 entries but upper has 5"),
])
def test_errors_name_the_field(precondition: dict[str, Any], message: str) -> None:
    with pytest.raises(ConstraintError, match=r"constraints\.0\.precondition\..*" + message):
        parse_constraints(_document([precondition], inputs=INPUTS), source="credit.yaml")


def test_names_without_known_input_names_say_how_to_add_them() -> None:
    document = _document([{"kind": "box", "lower": {"income": 60.0}}])
    with pytest.raises(InputNamesUnknownError,
                       match=r"constraints\.0\.precondition\.box: lower names inputs \(income\) "
                             r"but the input names are unknown: add a header 'inputs: \[name, "
                             r"\.\.\.\]' listing the model's inputs in order"):
        parse_constraints(document)
    placeholders = [f"x{i}" for i in range(6)]
    with pytest.raises(ConstraintError, match=r"lower: unknown input 'income' \(the model's "
                                              r"inputs are unnamed: add a header 'inputs: "):
        parse_constraints(document, input_names=placeholders)
    by_placeholder = _document([{"kind": "box", "lower": {"x1": 60.0}}])
    assert parse_constraints(by_placeholder, input_names=placeholders) == parse_constraints(
        _document(POSITIONAL[:1]))
    # a header names a model without names of its own (its size must still agree)
    assert parse_constraints(_document(NAMED[:1], inputs=INPUTS),
                             input_names=placeholders) == parse_constraints(
        _document(POSITIONAL[:1]))


def test_a_header_that_disagrees_with_the_model_is_refused() -> None:
    document = _document(NAMED[:1], inputs=INPUTS)
    swapped = [INPUTS[1], INPUTS[0], *INPUTS[2:]]
    with pytest.raises(ConstraintError, match=r"credit\.yaml: inputs\.0: the file names input 0 "
                                              r"'age', the model 'income'; list the model's "
                                              r"inputs in its order, or leave 'inputs' out"):
        parse_constraints(document, input_names=swapped, source="credit.yaml")
    with pytest.raises(ConstraintError, match=r"inputs: the file lists 6 inputs, the model has 7"):
        parse_constraints(document, input_names=[*INPUTS, "extra"])
    with pytest.raises(ConstraintError, match=r"inputs: the file lists 6 inputs, the model has 7"):
        parse_constraints(document, input_names=[f"x{i}" for i in range(7)])
    assert parse_constraints(document, input_names=INPUTS) == parse_constraints(
        _document(POSITIONAL[:1]))


@pytest.mark.parametrize(("header", "message"), [
    ({"inputs": ["age", "income", "age", "a", "b", "c"]}, r"inputs: duplicate names \['age'\]"),
    ({"inputs": INPUTS, "input_size": 5}, r"input_size=5 but inputs lists 6 names"),
])
def test_a_malformed_header_is_refused(header: dict[str, Any], message: str) -> None:
    with pytest.raises(ConstraintError, match=message):
        parse_constraints(_document(NAMED[:1], **header))


def test_a_name_bound_twice_is_refused(tmp_path: Path) -> None:
    text = ("classes: [reject, review, accept]\ninputs: [age, income, debt_ratio, sex, "
            "housing_own, housing_rent]\nconstraints:\n  - name: c\n    precondition:\n"
            "      kind: box\n      lower: {income: 60, income: 70}\n"
            "    postcondition: [[reject < accept]]\n")
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    with pytest.raises(ConstraintError, match=r"twice\.yaml: cannot parse: .*'income'"):
        load_constraints(path)
    as_json = tmp_path / "twice.json"
    as_json.write_text(
        '{"classes": ["reject", "review", "accept"], "inputs": ' + json.dumps(INPUTS)
        + ', "constraints": [{"name": "c", "precondition": {"kind": "box", "lower": '
        '{"income": 60, "income": 70}}, "postcondition": [["reject < accept"]]}]}')
    with pytest.raises(ConstraintError, match=r"twice\.json: cannot parse: key\(s\) 'income' "
                                              r"given twice in one object"):
        load_constraints(as_json)


def _named_network(tmp_path: Path) -> tuple[Network, Path]:
    rng = np.random.default_rng(5)
    network = Network([Layer(rng.normal(size=(8, 6)), rng.normal(size=8), "relu"),
                       Layer(rng.normal(size=(3, 8)), rng.normal(size=3), "none")],
                      list(INPUTS), list(CLASSES))
    path = tmp_path / "net.json"
    save_network(network, path)
    return network, path


def _wrapped_alike(tmp_path: Path, model_path: Path, named_document: dict[str, Any],
                   capsys: pytest.CaptureFixture[str]) -> Path:
    """Wrap ``model_path`` with ``named_document`` and with the positional constraints
    (``tmp_path/n`` and ``tmp_path/p``); both must succeed and write the same resolved
    constraint file. Returns the named document's path."""
    named, positional = tmp_path / "named.yaml", tmp_path / "positional.yaml"
    named.write_text(yaml.safe_dump(named_document, sort_keys=False))
    positional.write_text(yaml.safe_dump(_document(POSITIONAL), sort_keys=False))
    for constraints, out in ((named, "n"), (positional, "p")):
        assert main(["selfcorrect", "wrap", "--model", str(model_path), "--constraints",
                     str(constraints), "--out", str(tmp_path / out), "--json"]) == 0
    capsys.readouterr()
    assert (tmp_path / "n" / "constraints.yaml").read_text() == (
        tmp_path / "p" / "constraints.yaml").read_text()
    return named


def test_wrap_resolves_names_against_the_models_input_names(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, model_path = _named_network(tmp_path)
    named = _wrapped_alike(tmp_path, model_path, _document(NAMED), capsys)
    x = _adversarial_rows()
    with torch.no_grad():
        got, got_bottom = load_torchscript(tmp_path / "n" / "model.pt").forward_with_bottom(x)
        want, want_bottom = load_torchscript(tmp_path / "p" / "model.pt").forward_with_bottom(x)
    assert torch.equal(got, want) and torch.equal(got_bottom, want_bottom)
    # without the model, `describe` cannot resolve the names and says how to
    assert main(["selfcorrect", "describe", "--constraints", str(named)]) == 2
    assert "add a header 'inputs: [name, ...]'" in capsys.readouterr().err


def test_a_header_names_a_model_whose_inputs_are_one_tensors_elements(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model from plain ``torch.onnx.export`` records one input tensor, read as the
    positions ``input[0], input[1], …``: names that say only a position, as ``x0, x1, …`` do.
    A header names such a model's inputs (its size must still agree) and a name the file
    does not list says the inputs are unnamed; ``selfcorrect wrap`` takes the file."""
    elements = [f"input[{i}]" for i in range(6)]
    document = _document(NAMED[:1], inputs=INPUTS)
    assert parse_constraints(document, input_names=elements) == parse_constraints(
        _document(POSITIONAL[:1]))
    with pytest.raises(ConstraintError, match=r"inputs: the file lists 6 inputs, the model has 7"):
        parse_constraints(document, input_names=[f"input[{i}]" for i in range(7)])
    with pytest.raises(ConstraintError, match=r"lower: unknown input 'income' \(the model's "
                                              r"inputs are unnamed: add a header 'inputs: "):
        parse_constraints(_document(NAMED[:1]), input_names=elements)
    rng = np.random.default_rng(5)
    network = Network([Layer(rng.normal(size=(8, 6)), rng.normal(size=8), "relu"),
                       Layer(rng.normal(size=(3, 8)), rng.normal(size=3), "none")],
                      elements, list(CLASSES))
    model_path = tmp_path / "net.json"
    save_network(network, model_path)
    _wrapped_alike(tmp_path, model_path, _document(NAMED, inputs=INPUTS), capsys)
