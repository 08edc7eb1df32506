"""A class given by name (``favorable_class: approved``) is refused naming the field and
saying that classes are given by their index among the model's outputs, in a configuration
and on the command line; an index written as text is still read."""

from __future__ import annotations

import pytest

from configs.schema import ConfigError, parse_config
from pipeline_steps.cli import main

PARITY = {"kind": "demographic_parity", "protected": "sex", "privileged": 1, "gamma": 0.8}
HINT = r"given by its index, got the name 'approved'.*0\.\.n-1.*classes_\.tolist\(\)\.index"


@pytest.mark.parametrize("audit", [
    {**PARITY, "favorable_class": "approved"},
    {"kind": "monotonicity", "feature": "x", "favorable_class": "approved",
     "min_probability": 0.9},
    {"kind": "local_robustness", "center": [0.0], "epsilon": 0.1,
     "expected_class": "approved", "min_probability": 0.9},
])
def test_a_class_name_in_a_configuration_is_refused_with_the_index_hint(
        audit: dict[str, object]) -> None:
    field = "expected_class" if "expected_class" in audit else "favorable_class"
    with pytest.raises(ConfigError, match=rf"{field}: a class is {HINT}"):
        parse_config({"model": {"uri": "m.onnx"}, "audits": [audit]})


def test_an_index_written_as_text_is_read() -> None:
    config = parse_config({"model": {"uri": "m.onnx"},
                           "audits": [{**PARITY, "favorable_class": "1"}]})
    assert config.audits[0].favorable_class == 1


def test_a_class_name_on_the_command_line_is_refused_with_the_index_hint(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "demographic-parity", "--model", "m.onnx", "--population", "p.json",
                 "--protected", "sex", "--privileged", "1", "--favorable-class", "approved",
                 "--gamma", "0.8"])
    err = capsys.readouterr().err
    assert code == 2
    assert "argument --favorable-class: a class is given by its index" in err
    assert "classes_.tolist().index('approved')" in err
