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
