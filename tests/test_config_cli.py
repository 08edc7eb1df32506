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
