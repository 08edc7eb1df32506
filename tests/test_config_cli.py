"""``certgate config schema`` and ``certgate config check``: output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from configs.schema import json_schema
from pipeline_steps.cli import main

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def test_schema_prints_the_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == json_schema()


def test_check_accepts_the_demo_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", str(CONFIGS / "demo.yaml")]) == 0
    assert "valid (1 audit(s): demographic_parity" in capsys.readouterr().out


def test_check_rejects_a_typo_with_one_line_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (CONFIGS / "demo.yaml").read_text().replace("favorable_class:", "favourable_class:")
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    assert main(["config", "check", str(path)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("certgate: error: ")
    assert "audits[0].favourable_class: unknown key" in lines[0]
    assert "audits[0].favorable_class: required key missing" in lines[0]
    assert captured.out == ""


def test_check_reads_the_deploy_constraints_as_run_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`config check` refuses a deploy constraints file that `certgate run` refuses before any
    audit (it said "valid" for a file naming a class the file does not list)."""
    constraints = tmp_path / "constraints.yaml"
    constraints.write_text((CONFIGS / "demo_constraints.yaml").read_text()
                           .replace('"low < high"', '"low < hihg"'))
    config = tmp_path / "demo.yaml"
    config.write_text((CONFIGS / "demo.yaml").read_text().replace(
        "${CERTGATE_DEMO_CONSTRAINTS:-configs/demo_constraints.yaml}", str(constraints)))
    capsys.readouterr()
    assert main(["config", "check", str(config), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error.startswith(f"deploy.constraints: {constraints}") and "'hihg'" in error


def _demo_config_with(tmp_path: Path, constraints_text: str, model_lines: str = "") -> Path:
    constraints = tmp_path / "constraints.yaml"
    constraints.write_text(constraints_text)
    text = (CONFIGS / "demo.yaml").read_text().replace(
        "${CERTGATE_DEMO_CONSTRAINTS:-configs/demo_constraints.yaml}", str(constraints))
    config = tmp_path / "demo.yaml"
    population = "  population_uri: null"
    config.write_text(text.replace(population, model_lines + population))
    return config


def test_check_resolves_the_constraints_input_names_before_any_audit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A name the file's `inputs:` header (or `model.input_names`) does not list is refused
    by `config check` (and so by `certgate run` before the audit); a file naming the model's
    own inputs without either is left to the deploy step, which has the model."""
    demo = (CONFIGS / "demo_constraints.yaml").read_text()
    config = _demo_config_with(tmp_path, demo.replace("{hpw: 45.0", "{hpww: 45.0"))
    capsys.readouterr()
    assert main(["config", "check", str(config), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error.startswith("deploy.constraints: ")
    assert "lower: unknown input 'hpww' (did you mean 'hpw'?)" in error

    headerless = demo.replace("inputs: [female, hpw, yexp, hw]\n", "")
    names = "  input_names: [female, hpw, yexp, hw]\n"
    config = _demo_config_with(tmp_path, headerless.replace("{hpw: 45.0", "{hpww: 45.0"), names)
    assert main(["config", "check", str(config), "--json"]) == 2
    assert "unknown input 'hpww'" in json.loads(capsys.readouterr().out)["error"]
    assert main(["config", "check", str(_demo_config_with(tmp_path, headerless, names))]) == 0
    assert main(["config", "check", str(_demo_config_with(tmp_path, headerless))]) == 0
    assert "valid (1 audit(s)" in capsys.readouterr().out


def test_check_refuses_deploy_constraints_that_give_bottom_at_every_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A deploy file whose constraints give ⊥ at every input — `hpw <= 30` in one constraint,
    `hpw >= 30` in another, both `high < low`, beside `low < high` always — is refused by
    `config check`, and so by `certgate run` before the audit (it was refused only by the
    deploy step, after the gate had moved `champion`); the open-sided near miss is valid."""
    def constraints(closed: bool) -> str:
        return ("classes: [low, high]\ninputs: [female, hpw, yexp, hw]\nconstraints:\n"
                "  - {name: short_hours, precondition: {kind: box, upper: {hpw: 30},"
                f" upper_closed: {str(closed).lower()}}}, postcondition: [['high < low']]}}\n"
                "  - {name: long_hours, precondition: {kind: box, lower: {hpw: 30},"
                f" lower_closed: {str(closed).lower()}}}, postcondition: [['high < low']]}}\n"
                "  - {name: always_high, precondition: {kind: always},"
                " postcondition: [['low < high']]}\n")

    capsys.readouterr()
    assert main(["config", "check", str(_demo_config_with(tmp_path, constraints(True))),
                 "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error.startswith("deploy.constraints: the constraints 'short_hours', 'long_hours', "
                            "'always_high' give ⊥ at every input")
    assert main(["config", "check", str(_demo_config_with(tmp_path, constraints(False)))]) == 0
