"""The HTML report and its convergence plot (no registry)."""

from __future__ import annotations

import base64
import math
import re
from html.parser import HTMLParser

from pipeline_steps.report import (
    AuditSection,
    ReportData,
    convergence_figure,
    figure_png,
    history_series,
    render_report,
)
from verifier.audits import DemographicParitySettings
from verifier.certificate import Certificate

SETTINGS = DemographicParitySettings(kind="demographic_parity", protected="sex", privileged=1,
                                  favorable_class=1, gamma=0.8)


def sample_certificate() -> Certificate:
    history = [[0.1, [0.0, math.inf]], [0.5, [0.4, 2.0]], [1.0, [0.79, 1.3]]]
    return Certificate(
        audit="demographic_parity", verdict="satisfied",
        bounds={"value": (0.81, 1.2), "p_unprivileged": (0.4, 0.5),
                "p_privileged": (0.45, 0.52)},
        details={"history": history, "expression": "p_unprivileged / p_privileged",
                 "comparison": ">", "threshold": 0.8, "stopped_by": "decided"},
        cost={"elapsed_s": 1.25, "boxes": 900, "iterations": 9},
        algorithm="PV branch and bound",
    )


class Collector(HTMLParser):
    """Collects tags, image sources and table texts (and fails on nothing: the stdlib
    parser is lenient, so structure is checked explicitly)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.images: list[str] = []
        self.open_tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag not in ("img", "meta", "br"):
            self.open_tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs)["src"] or "")

    def handle_endtag(self, tag: str) -> None:
        assert self.open_tags and self.open_tags[-1] == tag, (tag, self.open_tags[-3:])
        self.open_tags.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_history_series_ends_with_the_certified_interval() -> None:
    times, lows, highs = history_series(sample_certificate())
    assert times == [0.1, 0.5, 1.0, 1.25]
    assert (lows[-1], highs[-1]) == (0.81, 1.2)
    assert highs[0] == math.inf


def test_convergence_plot_is_a_png() -> None:
    png = figure_png(convergence_figure("dp", SETTINGS.requirement, sample_certificate()))
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000


def test_report_is_self_contained_well_formed_and_escaped() -> None:
    certificate = sample_certificate()
    png = figure_png(convergence_figure("dp", SETTINGS.requirement, certificate))
    data = ReportData(
        model_uri="models:/credit<script>/1", model_name="credit<script>", model_version="1",
        run_id="abc123",
        audits=[AuditSection("demographic_parity", SETTINGS.model_dump(mode="json"),
                             SETTINGS.requirement, certificate, "proven_pass", png)],
        domain_checks=[{"check": "columns match", "ok": True, "detail": "6 columns"}],
        data_validation=[{"dataset": "population_samples", "expectation": "expect_x",
                          "column": "age", "success": True, "unexpected_count": 0}],
        gate_preview="passed: dp: proven ratio > 0.8",
    )
    html = render_report(data)
    parser = Collector()
    parser.feed(html)
    assert parser.open_tags == []
    assert "<script>" not in html and "credit&lt;script&gt;" in html
    assert 'class="verdicts"' in html
    (image,) = parser.images
    assert image.startswith("data:image/png;base64,")
    assert base64.b64decode(image.split(",", 1)[1]) == png
    text = " ".join(parser.text)
    assert "ratio ∈ [0.81, 1.2]" in text
    assert "proven pass" in text and "satisfied" in text
    assert "ratio > 0.8" in text
    assert "p_privileged [0.45, 0.52]" in text
    assert "columns match ok 6 columns" in text
    assert not re.search(r'(src|href)="https?:', html)
