"""CSV tables of a certificate's regions and witnesses (causal fairness), logged beside the
certificate by the audit step."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from verifier.certificate import Certificate


def _csv(rows: list[dict[str, Any]], base: list[str]) -> str:
    fields = list(base)
    for row in rows:
        fields.extend(key for key in row if key not in fields)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _witness_columns(witness: dict[str, Any], input_names: Sequence[str],
                     first: str, second: str) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for prefix, key in ((first, "x"), (second, "x_other")):
        row.update({f"{prefix}.{name}": value
                    for name, value in zip(input_names, witness[key], strict=True)})
    row[f"{first}.class"], row[f"{second}.class"] = witness["classes"]
    return row


def detail_tables(certificate: Certificate, input_names: Sequence[str]) -> dict[str, str]:
    """CSV versions of the certificate's ``details["regions"]`` and ``details["witnesses"]``
    (causal fairness) by table name; empty for certificates without them.

    ``regions``: rank, kind, share, ``<input>.lower``/``<input>.upper`` of the box,
    ``<group>.allowed`` categories, and the region's witness pair (``witness.<input>``,
    ``witness_other.<input>``, their classes) when it has one. ``witnesses``: index,
    ``x.<input>``, ``x_other.<input>``, ``x.class``, ``x_other.class``.
    """
    tables: dict[str, str] = {}
    regions = certificate.details.get("regions")
    if isinstance(regions, list):
        rows = []
        for rank, region in enumerate(regions, start=1):
            row: dict[str, Any] = {"rank": rank, "kind": region["kind"], "share": region["share"]}
            for name, (low, high) in region.get("box", {}).items():
                row[f"{name}.lower"], row[f"{name}.upper"] = low, high
            for group, allowed in region.get("categories", {}).items():
                row[f"{group}.allowed"] = "|".join(allowed)
            if "witness" in region:
                row.update(_witness_columns(region["witness"], input_names, "witness",
                                            "witness_other"))
            rows.append(row)
        tables["regions"] = _csv(rows, ["rank", "kind", "share"])
    witnesses = certificate.details.get("witnesses")
    if isinstance(witnesses, list):
        rows = [{"index": index, **_witness_columns(witness, input_names, "x", "x_other")}
                for index, witness in enumerate(witnesses, start=1)]
        tables["witnesses"] = _csv(rows, ["index"])
    return tables
