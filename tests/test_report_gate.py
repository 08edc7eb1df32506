"""The report's gate lines: the outcome, then failing, undecided and passing checks on
separate lines (a passing check never appears on the failing line)."""

from __future__ import annotations

import re

from pipeline_steps.report import AuditSection, ReportData, render_report
from tests.test_pipeline_report import SETTINGS, sample_certificate


def section(name: str, check: str) -> AuditSection:
    return AuditSection(name=name, settings={}, requirement=SETTINGS.requirement,
                        certificate=sample_certificate(), check=check)


def gate_lines(page: str) -> dict[str, str]:
    return dict(re.findall(r'<span class="gate-(\w+)">\w+: ([^<]*)</span>', page))


def test_failing_undecided_and_passing_are_separate_lines() -> None:
    data = ReportData(model_uri="m.json", model_name=None, model_version=None, run_id=None,
                      audits=[section("a", "proven_fail"), section("b", "proven_pass"),
                              section("c", "undecided"), section("d", "missing")],
                      gate_preview="failed: a: proven fail; b: proven pass; c: …; d: …")
    page = render_report(data)
    assert "Gate (from these certificates): <b>failed</b>" in page
    assert gate_lines(page) == {"failing": "a (proven fail), d (missing)",
                                "undecided": "c (undecided)", "passing": "b (proven pass)"}


def test_all_passing_has_no_failing_line() -> None:
    data = ReportData(model_uri="m.json", model_name=None, model_version=None, run_id=None,
                      audits=[section("a", "proven_pass")], gate_preview="passed: a: …")
    assert gate_lines(render_report(data)) == {"passing": "a (proven pass)"}


def test_a_bound_just_above_its_threshold_is_not_shown_as_the_threshold() -> None:
    certificate = sample_certificate()
    low = 0.8 + 1e-12
    certificate.bounds["value"] = (low, 1.2)
    certificate.details["threshold"] = 0.7916666666666553
    data = ReportData(model_uri="m.json", model_name=None, model_version=None, run_id=None,
                      audits=[AuditSection(name="a", settings={},
                                           requirement=SETTINGS.requirement,
                                           certificate=certificate, check="proven_pass")])
    page = render_report(data)
    assert "[0.8," not in page
    shown = re.findall(r"ratio ∈ \[([0-9.]+), 1\.2\]", page)
    assert shown and float(shown[0]) > 0.8 and shown[0] != "0.8"
    cells = re.findall(r"<td>value</td><td>\[([0-9.]+), 1\.2\]</td>", page)
    assert cells and float(cells[0]) > 0.8
    assert "<td>0.7916666666666553</td>" in page
