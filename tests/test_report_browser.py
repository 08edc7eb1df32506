"""The HTML audit report rendered by a real browser (headless Chromium).

The page is written to a file and opened by Debian's ``chromium``: its DOM must hold the
verdict table (verdict, certified interval, gate check), and its screenshot must show the
embedded convergence plot, recognised by the plot's own line colours, which nothing else on
the page uses (a page without the plot, rendered the same way, is the negative control).
Without Chromium the test skips and says so: ``scripts/install_chromium.sh`` installs it.
"""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from pipeline_steps.report import (
    AuditSection,
    ReportData,
    convergence_figure,
    figure_png,
    render_report,
)
from tests.test_pipeline_report import sample_certificate
from verifier.audits import DemographicParitySettings

CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--run-all-compositor-stages-before-draw",
)
BROWSER_TIMEOUT_S = 60
WINDOW = (1200, 1600)
PLOT_LINE_COLOURS = {"upper bound": (0x09, 0x69, 0xDA), "lower bound": (0x82, 0x50, 0xDF)}
SETTINGS = DemographicParitySettings(kind="demographic_parity", protected="sex", privileged=1,
                                  favorable_class=1, gamma=0.8)


def chromium_path() -> str:
    """The Chromium executable, or a skip that names why the page was not rendered."""
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("chromium is not installed: the report was not rendered in a browser "
                    "(run scripts/install_chromium.sh)")
    return path


def run_chromium(page: Path, profile: Path, *args: str) -> str:
    """Open ``page`` in headless Chromium with a fresh profile; its standard output."""
    command = [chromium_path(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
               f"--window-size={WINDOW[0]},{WINDOW[1]}", *args, page.as_uri()]
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=BROWSER_TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def report_page(directory: Path, with_plot: bool) -> Path:
    """A real report of one demographic-parity audit, written to ``directory/report.html``."""
    certificate = sample_certificate()
    png = figure_png(convergence_figure("demographic_parity", SETTINGS.requirement, certificate))
    data = ReportData(
        model_uri="models:/credit/1", model_name="credit", model_version="1", run_id="abc123",
        audits=[AuditSection("demographic_parity", SETTINGS.model_dump(mode="json"),
                             SETTINGS.requirement, certificate, "proven_pass",
                             png if with_plot else None)],
        gate_preview="passed: demographic_parity: proven ratio > 0.8",
    )
    directory.mkdir()
    page = directory / "report.html"
    page.write_text(render_report(data), encoding="utf-8")
    return page


class VerdictRows(HTMLParser):
    """The cell texts of each row of the ``verdicts`` table in a DOM dump."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.in_table = False
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and ("class", "verdicts") in attrs:
            self.in_table = True
        elif self.in_table and tag == "tr":
            self.rows.append([])
        elif self.in_table and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.in_table = False
        elif self.in_table and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def colour_pixels(screenshot: Path, colour: tuple[int, int, int]) -> int:
    """How many pixels of the screenshot have exactly ``colour`` (8-bit RGB)."""
    pixels = np.rint(imread(screenshot)[..., :3] * 255).astype(np.int16)
    return int(np.all(pixels == np.array(colour, dtype=np.int16), axis=-1).sum())


def test_browser_dom_holds_the_verdict_table(tmp_path: Path) -> None:
    page = report_page(tmp_path / "page", with_plot=True)
    dom = run_chromium(page, tmp_path / "profile", "--dump-dom")
    parser = VerdictRows()
    parser.feed(dom)
    assert parser.rows == [
        ["audit", "verdict", "certified interval", "requirement", "gate check"],
        ["demographic_parity", "satisfied", "ratio ∈ [0.81, 1.2]", "ratio > 0.8", "proven pass"],
    ]
    assert 'alt="bound convergence of demographic_parity"' in dom
    assert "src=\"data:image/png;base64," in dom


def test_browser_draws_the_embedded_convergence_plot(tmp_path: Path) -> None:
    shots = {}
    for with_plot in (True, False):
        name = "with_plot" if with_plot else "without_plot"
        page = report_page(tmp_path / name, with_plot)
        shots[name] = tmp_path / f"{name}.png"
        run_chromium(page, tmp_path / f"profile_{name}", f"--screenshot={shots[name]}")
    image = imread(shots["with_plot"])
    assert image.shape[:2] == (WINDOW[1], WINDOW[0])
    assert np.unique(image.reshape(-1, image.shape[-1]), axis=0).shape[0] > 50
    for line, colour in PLOT_LINE_COLOURS.items():
        assert colour_pixels(shots["with_plot"], colour) > 100, line
        assert colour_pixels(shots["without_plot"], colour) == 0, line


class WorkLines(HTMLParser):
    """The text of each ``<p class="work">`` in a DOM dump, by the audit section it is in."""

    def __init__(self) -> None:
        super().__init__()
        self.section: str | None = None
        self.lines: dict[str, str] = {}
        self.text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "section" and (found.get("id") or "").startswith("audit-"):
            self.section = str(found["id"]).removeprefix("audit-")
        elif tag == "p" and found.get("class") == "work":
            self.text = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "p" and self.text is not None and self.section is not None:
            self.lines[self.section] = "".join(self.text)
            self.text = None

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)


def test_browser_shows_each_kinds_work_in_its_own_unit(tmp_path: Path) -> None:
    """A PV, a causal-fairness and a WMI audit: each section says what its engine did in its
    own unit (boxes, partitions and the share of the query they decided, regions), and
    carries its convergence plot."""
    from tests.test_pipeline_audit_kinds import (
        NETWORK,
        audits,
        causal,
        probability_audit,
        unit_population,
    )
    from verifier.audits import run_audit

    fairness = audits(causal("fair", 0.6))[0]
    monotonicity = probability_audit("monotonicity", 0.9, feature="x")
    runs = [(SETTINGS, sample_certificate())] + [
        (settings, run_audit(settings, NETWORK, unit_population()))
        for settings in (fairness, monotonicity)]
    sections = [AuditSection(settings.name, settings.model_dump(mode="json"),
                             settings.requirement, certificate, "undecided",
                             figure_png(convergence_figure(settings.name, settings.requirement,
                                                           certificate)))
                for settings, certificate in runs]
    data = ReportData(model_uri="models:/credit/1", model_name="credit", model_version="1",
                      run_id="abc123", audits=sections)
    (tmp_path / "page").mkdir()
    page = tmp_path / "page" / "report.html"
    page.write_text(render_report(data), encoding="utf-8")
    dom = run_chromium(page, tmp_path / "profile", "--dump-dom")
    parser = WorkLines()
    parser.feed(dom)
    causal_certificate = runs[1][1]
    assert parser.lines["demographic_parity"] == \
        "Work done: 900 boxes bounded in 9 iterations (1.25 s); stopped by: decided"
    assert parser.lines["fair"].startswith("Work done: decided ")
    assert "certified fair" in parser.lines["fair"]
    assert (f"{causal_certificate.cost['analysed_partitions']:,.0f} partitions analysed"
            in parser.lines["fair"])
    assert "share of the query: proven fair" in parser.lines["fair"]
    assert parser.lines["monotonicity"].startswith("Work done: ")
    assert "1 region enumerated, 1 integral, " in parser.lines["monotonicity"]
    for name in ("demographic_parity", "fair", "monotonicity"):
        assert f'alt="bound convergence of {name}"' in dom


def one_audit_pages() -> dict[str, ReportData]:
    """One report page per audit kind, each with its chart: PV with its anytime history, a
    causal audit with the bounds the audit step observed, and an exact-probability audit
    (monotonicity) whose chart has only its final interval."""
    from configs.schema import parse_config
    from pipeline_steps.audit import certify_observed
    from tests.test_pipeline_audit_kinds import NETWORK, causal, unit_population

    config = parse_config({"model": {"uri": "m.onnx"}, "audits": [
        causal("fair", 0.6),
        {"kind": "monotonicity", "name": "mono", "feature": "x", "min_probability": 0.9}]})
    certificates, observed = certify_observed(config, NETWORK, unit_population(), False)
    runs = [(SETTINGS, sample_certificate(), None)] + [
        (settings, certificates[settings.name], observed.get(settings.name))
        for settings in config.audits]
    pages = {}
    for settings, certificate, anytime in runs:
        png = figure_png(convergence_figure(settings.name, settings.requirement, certificate,
                                            anytime))
        section = AuditSection(settings.name, settings.model_dump(mode="json"),
                               settings.requirement, certificate, "undecided", png)
        pages[settings.kind] = ReportData(model_uri="m.onnx", model_name=None,
                                          model_version=None, run_id="abc123",
                                          audits=[section])
    return pages


def test_browser_draws_every_kinds_chart(tmp_path: Path) -> None:
    """Each kind's chart, rendered in the browser, shows drawn bounds: each bound colour
    appears more than twice as often as the legend alone gives it (about 50 pixels each, see
    ``tests/test_report_charts.py``). The exact-probability chart is the least: its certified
    interval is [1 − 1e-6, 1], drawn as the final markers (151 and 120 pixels when written)."""
    pages = one_audit_pages()
    assert set(pages) == {"demographic_parity", "causal_fairness", "monotonicity"}
    for kind, data in pages.items():
        (tmp_path / kind).mkdir()
        page = tmp_path / kind / "report.html"
        page.write_text(render_report(data), encoding="utf-8")
        shot = tmp_path / f"{kind}.png"
        run_chromium(page, tmp_path / f"profile_{kind}", f"--screenshot={shot}")
        for line, colour in PLOT_LINE_COLOURS.items():
            assert colour_pixels(shot, colour) > 100, (kind, line)
