"""The population-fidelity part of an audit's HTML report section: what the population model
assumes, whether the data contradicts it (both intervals), and the fit statistics behind it
(:mod:`verifier.audits.fidelity`)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from pipeline_steps.fidelity_data import dropped_text
from verifier.certificate import Certificate

STATUS_COLOURS = {"consistent": "#1a7f37", "contradicted": "#cf222e", "unchecked": "#9a6700"}


def _number(value: Any) -> str:
    number = float(value)
    return f"{number:.4g}" if math.isfinite(number) else ("∞" if number > 0 else "−∞")


def _interval(bounds: Sequence[Any] | None) -> str:
    return "—" if bounds is None else f"[{_number(bounds[0])}, {_number(bounds[1])}]"


def _rows(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row)
                   + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def fidelity_html(certificate: Certificate) -> str:
    """The section's HTML (empty when no check was attempted)."""
    record = certificate.population_fidelity
    if not record:
        return ""
    status = record["status"]
    colour = STATUS_COLOURS.get(status, "#57606a")
    assumptions = record["assumptions"]
    parts = [
        '<div class="fidelity">'
        f'<h3>Population fidelity <span class="badge" style="background:{colour}">'
        f"{html.escape(status)}</span></h3>",
        f"<p>{html.escape(record['reason'])}</p>",
        f"<p>Population model assumes: {html.escape(assumptions['summary'])}"
        + (f"; columns it lets depend on the protected attribute: "
           f"{html.escape(', '.join(assumptions['protected_dependents']) or 'none')}"
           if "protected_dependents" in assumptions else "") + "</p>",
    ]
    source = record.get("data", {})
    if "uri" in source:
        parts.append(f"<p>Data: {html.escape(str(source.get('origin', '')))} "
                     f"{html.escape(str(source['uri']))}"
                     + (f", {source['rows_used']} rows used" if "rows_used" in source else "")
                     + html.escape(dropped_text(source))
                     + (f", sha256 {html.escape(str(source['sha256'])[:16])}…"
                        if "sha256" in source else "") + "</p>")
    empirical = record.get("empirical")
    if empirical:
        rows = [[f"{record['quantity']} (level {record['level']:g})",
                 _interval(empirical["interval"]), _number(empirical["estimate"]),
                 _interval(record["certified"])]]
        for name in ("p_unprivileged", "p_privileged"):
            group = empirical.get(name)
            if group is not None:
                rows.append([f"{name} ({group['condition']}; {group['rows']} rows)",
                             _interval(group["interval"]), _number(group["estimate"]),
                             _interval(group.get("certified"))])
        parts.append(_rows(["quantity", "data interval", "data estimate", "certified"], rows))
        parts.append(f"<p>Method: {html.escape(record['method'])}</p>")
        if "fit_statistics" in record:
            parts.append(_fit_table(record["fit_statistics"]))
    parts.append("</div>")
    return "".join(parts)


def _fit_table(stats: dict[str, Any]) -> str:
    share = stats["protected_share"]
    rows = [[f"P({share['condition']})", _interval(share["data"]["interval"]),
             _number(share["population"]), "yes" if share["disjoint"] else "no"]]
    for entry in stats["group_mean_difference"]:
        data, model = entry["data"], entry["population"]
        rows.append([f"mean {entry['column']}: unprivileged − privileged",
                     _interval(data["interval"] if data else None),
                     _interval(model["interval"] if model else None),
                     "yes" if entry["disjoint"] else "no"])
    return ("<h4>Fit statistics the audit relies on</h4>"
            + _rows(["statistic", "data", f"population ({stats['population_samples']} draws)",
                     "disjoint"], rows)
            + f"<p>{stats['rows_outside_support']} data rows lie outside the population's "
            "support box.</p>")
