"""The audit report: one self-contained HTML page per audit run, and its convergence plots.

The page needs no network access to view: styles are inline and plots are embedded as
base64 PNGs. It shows, for the audited model version, every audit's verdict, its certified
interval against the gate requirement, the probabilities behind it, the settings and cost,
the bound-convergence plot, the population-fidelity check (the population's assumptions and
whether the data contradicts them), the data-validation results and the software versions.
"""

from __future__ import annotations

import base64
import html
import io
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from matplotlib.figure import Figure

from configs.schema import Requirement
from pipeline_steps.fidelity_report import fidelity_html
from pipeline_steps.gate import CHECK_GROUPS
from verifier.audits import KINDS
from verifier.audits.requirement import exact_text
from verifier.certificate import Certificate

UPPER_COLOUR = "#0969da"
LOWER_COLOUR = "#8250df"
VERDICT_COLOURS = {"satisfied": "#1a7f37", "violated": "#cf222e", "unknown": "#9a6700"}
CHECK_TEXT = {
    "proven_pass": "proven pass",
    "proven_fail": "proven fail",
    "undecided": "undecided",
    "missing": "missing",
    "inconsistent": "inconsistent",
    "contradicted": "population contradicted by the data",
    "contradicted_warn": "population contradicted by the data (warning)",
    "unchecked": "population not checked against data",
    "unchecked_warn": "population not checked against data (warning)",
}


@dataclass
class AuditSection:
    """One audit on the page: its settings, requirement, certificate, gate check and plot."""

    name: str
    settings: dict[str, Any]
    requirement: Requirement
    certificate: Certificate
    check: str
    figure_png: bytes | None = None


@dataclass
class ReportData:
    """Everything the page shows."""

    model_uri: str
    model_name: str | None
    model_version: str | None
    run_id: str | None
    audits: list[AuditSection]
    domain_checks: list[dict[str, Any]] = field(default_factory=list)
    data_validation: list[dict[str, Any]] = field(default_factory=list)
    gate_preview: str | None = None
    created_at: float = field(default_factory=time.time)


def history_series(certificate: Certificate, quantity: str = "value",
                   observed: Sequence[Any] | None = None
                   ) -> tuple[list[float], list[float], list[float]]:
    """``(elapsed_s, lower, upper)`` of the anytime bounds in ``details["history"]`` (else
    ``observed``, anytime bounds of ``quantity`` seen while the audit ran; none: only the
    final point), ending with the certified final interval of ``bounds[quantity]``."""
    times: list[float] = []
    lows: list[float] = []
    highs: list[float] = []
    for entry in certificate.details.get("history") or observed or []:
        elapsed, (low, high) = entry
        times.append(float(elapsed))
        lows.append(float(low))
        highs.append(float(high))
    final_low, final_high = certificate.bounds[quantity]
    end = float(certificate.cost.get("elapsed_s", times[-1] if times else 0.0))
    if not times or (lows[-1], highs[-1]) != (final_low, final_high) or times[-1] < end:
        times.append(max(end, times[-1] if times else 0.0))
        lows.append(final_low)
        highs.append(final_high)
    return times, lows, highs


def convergence_figure(name: str, requirement: Requirement, certificate: Certificate,
                       observed: Sequence[Any] | None = None) -> Figure:
    """The certified interval of the audited quantity over time, with the gate threshold.

    Every chart draws something: each anytime report is a marker (so a run with a single
    report still shows it), the final certified interval is a vertical bar at the end time,
    and an unbounded side is drawn to the edge of the plot with an arrow and labelled (an
    undecided audit with no finite bound shows its whole interval shaded). The time axis
    starts at 0. ``observed``: anytime bounds the certificate does not record
    (:func:`history_series`)."""
    times, lows, highs = history_series(certificate, requirement.quantity, observed)
    figure = Figure(figsize=(6.4, 3.6), dpi=100)
    axes = figure.add_subplot()
    bottom, top = _focus(lows[-1], highs[-1], requirement.threshold)
    finite_low = [value if math.isfinite(value) else math.nan for value in lows]
    finite_high = [value if math.isfinite(value) else math.nan for value in highs]
    axes.step(times, finite_high, where="post", color=UPPER_COLOUR, marker="o", markersize=4,
              label="upper bound")
    axes.step(times, finite_low, where="post", color=LOWER_COLOUR, marker="o", markersize=4,
              label="lower bound")
    axes.fill_between(times, finite_low, finite_high, step="post", color=UPPER_COLOUR,
                      alpha=0.12)
    _final_interval(axes, times[-1], lows[-1], highs[-1], bottom, top)
    axes.axhline(requirement.threshold, color="#cf222e", linestyle="--",
                 label=f"threshold ({requirement.describe()})")
    axes.set_ylim(bottom, top)
    axes.set_xlim(0.0, max(times[-1], 1e-3) * 1.08)
    axes.set_xlabel("elapsed time [s]")
    axes.set_ylabel(f"certified {requirement.label}")
    axes.set_title(f"{name}: {certificate.verdict}")
    axes.legend(loc="best", fontsize="small")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    return figure


def _final_interval(axes: Any, end: float, low: float, high: float, bottom: float,
                    top: float) -> None:
    """The final certified interval as a vertical bar at ``end``; an infinite side reaches
    the plot's edge with an arrow, and an interval with no finite end shades the plot."""
    shown_low = low if math.isfinite(low) else bottom
    shown_high = high if math.isfinite(high) else top
    if not math.isfinite(low) and not math.isfinite(high):
        axes.axhspan(bottom, top, color=UPPER_COLOUR, alpha=0.12, hatch="//",
                     label="final interval (−∞, ∞): no finite bound yet")
    axes.vlines(end, shown_low, shown_high, color=UPPER_COLOUR, linewidth=3,
                label="final certified interval")
    axes.plot([end], [shown_high], color=UPPER_COLOUR,
              marker="o" if math.isfinite(high) else "^", markersize=7)
    axes.plot([end], [shown_low], color=LOWER_COLOUR,
              marker="o" if math.isfinite(low) else "v", markersize=7)
    for value, edge, text in ((high, top, "upper bound +∞"), (low, bottom, "lower bound −∞")):
        if not math.isfinite(value):
            axes.annotate(text, (end, edge), textcoords="offset points",
                          xytext=(-6, -12 if edge == top else 4), ha="right", fontsize="small")


def _focus(low: float, high: float, threshold: float) -> tuple[float, float]:
    """A y-range showing the final interval and the threshold (early, much wider bounds run
    off the plot instead of flattening it)."""
    ends = [value for value in (low, high, threshold) if math.isfinite(value)]
    bottom, top = min(ends), max(ends)
    span = max(top - bottom, 1e-3 * max(1.0, abs(top)))
    return bottom - 0.6 * span, top + 0.6 * span


def figure_png(figure: Figure) -> bytes:
    """PNG bytes of a figure."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _number(value: float) -> str:
    return f"{value:.6g}" if math.isfinite(value) else ("∞" if value > 0 else "−∞")


def _interval(bounds: Sequence[float]) -> str:
    return f"[{_number(bounds[0])}, {_number(bounds[1])}]"


def _beside_threshold(requirement: Requirement, bounds: Sequence[float]) -> str:
    """``bounds`` of the requirement's quantity, each finite end written until it differs
    from the threshold (:meth:`Requirement.bound_text`): a lower bound 1e-12 above γ = 0.8
    is not shown as 0.8."""
    ends = [requirement.bound_text(end) if math.isfinite(end) else _number(end)
            for end in bounds]
    return f"[{ends[0]}, {ends[1]}]"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return html.escape(_number(value))
    return html.escape(str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], css: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _verdict_badge(verdict: str) -> str:
    colour = VERDICT_COLOURS.get(verdict, "#57606a")
    return f'<span class="badge" style="background:{colour}">{html.escape(verdict)}</span>'


def _summary(data: ReportData) -> str:
    rows = []
    for section in data.audits:
        interval = section.certificate.bounds[section.requirement.quantity]
        rows.append([
            html.escape(section.name),
            _verdict_badge(section.certificate.verdict),
            html.escape(f"{section.requirement.label} ∈ "
                        f"{_beside_threshold(section.requirement, interval)}"),
            html.escape(section.requirement.describe()),
            html.escape(CHECK_TEXT.get(section.check, section.check)),
        ])
    return _table(["audit", "verdict", "certified interval", "requirement", "gate check"],
                  rows, "verdicts")


def work_done(kind: str, certificate: Certificate) -> str:
    """What the audit's engine did, in its kind's unit of work (the kind's ``work_done``,
    :mod:`verifier.audits.kind`); empty when the certificate does not record it or the
    section names no registered kind."""
    module = KINDS.get(kind)
    return module.work_done(certificate) if module is not None else ""


def _audit_section(section: AuditSection) -> str:
    certificate = section.certificate
    requirement = section.requirement
    probability_rows = [
        [html.escape(name), html.escape(_beside_threshold(requirement, bounds)
                                        if name == requirement.quantity else _interval(bounds))]
        for name, bounds in certificate.bounds.items()
    ]
    settings_rows = [[html.escape(k), _cell(v)] for k, v in section.settings.items()]
    detail_keys = ("expression", "comparison", "threshold", "stopped_by", "proven",
                   "computed_probability", "float_interval", "float_verdict")
    detail_rows = [[html.escape(k), html.escape(exact_text(certificate.details[k]))
                    if k == "threshold" and isinstance(certificate.details[k], float)
                    else _cell(certificate.details[k])]
                   for k in detail_keys if k in certificate.details]
    cost_rows = [[html.escape(k), _cell(v)] for k, v in certificate.cost.items()]
    work = work_done(str(section.settings.get("kind", "")), certificate)
    plot = ""
    if section.figure_png is not None:
        encoded = base64.b64encode(section.figure_png).decode("ascii")
        plot = (f'<img class="plot" alt="bound convergence of {html.escape(section.name)}" '
                f'src="data:image/png;base64,{encoded}">')
    return (
        f'<section class="audit" id="audit-{html.escape(section.name)}">'
        f"<h2>{html.escape(section.name)} {_verdict_badge(certificate.verdict)}</h2>"
        f"<p>{html.escape(certificate.algorithm)}</p>"
        + (f'<p class="work">Work done: {html.escape(work)}</p>' if work else "")
        + f"{plot}"
        + fidelity_html(certificate)
        + "<h3>Certified bounds</h3>" + _table(["quantity", "interval"], probability_rows)
        + "<h3>Specification</h3>" + _table(["field", "value"], detail_rows)
        + "<h3>Settings</h3>" + _table(["setting", "value"], settings_rows)
        + "<h3>Cost</h3>" + _table(["measure", "value"], cost_rows)
        + "</section>"
    )


def _validation_section(data: ReportData) -> str:
    domain_rows = [
        [html.escape(check["check"]), "ok" if check["ok"] else "FAILED",
         html.escape(str(check.get("detail", "")))]
        for check in data.domain_checks
    ]
    gx_rows = [
        [html.escape(item["dataset"]), html.escape(item["expectation"]),
         html.escape(str(item.get("column") or "")), "ok" if item["success"] else "FAILED",
         html.escape(str(item.get("unexpected_count", "")))]
        for item in data.data_validation
    ]
    return (
        '<section id="validation"><h2>Data validation</h2>'
        "<h3>Exact domain check</h3>"
        + _table(["check", "result", "detail"], domain_rows)
        + "<h3>great-expectations</h3>"
        + _table(["dataset", "expectation", "column", "result", "unexpected rows"], gx_rows)
        + "</section>"
    )


def _versions_section(data: ReportData) -> str:
    versions: dict[str, str] = {}
    for section in data.audits:
        versions.update(section.certificate.versions)
    rows = [[html.escape(k), html.escape(v)] for k, v in sorted(versions.items())]
    return '<section id="versions"><h2>Software</h2>' + _table(["package", "version"], rows) \
        + "</section>"


def _gate_lines(data: ReportData) -> str:
    """The gate's outcome (the first word of ``gate_preview``,
    :meth:`pipeline_steps.gate.GateDecision.summary`), then one line per group of
    :data:`pipeline_steps.gate.CHECK_GROUPS` that has checks."""
    if data.gate_preview is None:
        return ""
    outcome = data.gate_preview.split(":", 1)[0]
    lines = [f"Gate (from these certificates): <b>{html.escape(outcome)}</b>"]
    for group, statuses in CHECK_GROUPS:
        members = [f"{section.name} ({CHECK_TEXT.get(section.check, section.check)})"
                   for section in data.audits if section.check in statuses]
        if members:
            lines.append(f'<span class="gate-{group}">{group}: '
                         f"{html.escape(', '.join(members))}</span>")
    return '<p id="gate">' + "<br>".join(lines) + "</p>"


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1f2328}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem}h3{font-size:1rem;color:#57606a}
table{border-collapse:collapse;margin:.5rem 0}
th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left;font-size:.9rem}
th{background:#f6f8fa}
.badge{color:#fff;border-radius:1rem;padding:.1rem .6rem;font-size:.85rem}
.plot{max-width:100%;border:1px solid #d0d7de}
.meta{color:#57606a}
"""


def render_report(data: ReportData) -> str:
    """The complete HTML page (UTF-8 text, no external resources)."""
    model = data.model_uri
    if data.model_name is not None:
        model = f"{data.model_name} version {data.model_version} ({data.model_uri})"
    created = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(data.created_at))
    gate = _gate_lines(data)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>certgate audit: {html.escape(model)}</title><style>{STYLE}</style></head><body>"
        f"<h1>certgate audit report</h1>"
        f'<p class="meta">Model: {html.escape(model)}<br>Audit run: '
        f"{html.escape(data.run_id or '-')}<br>Created: {created}</p>"
        f"{gate}"
        "<h2>Verdicts</h2>" + _summary(data)
        + "".join(_audit_section(section) for section in data.audits)
        + _validation_section(data)
        + _versions_section(data)
        + "</body></html>"
    )
