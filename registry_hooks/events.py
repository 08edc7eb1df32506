"""Registry events: MLflow webhook signatures and payloads.

MLflow (3.x, SQL-backed servers) POSTs a JSON body ``{"entity", "action", "timestamp",
"data"}`` with headers ``X-MLflow-Delivery-Id``, ``X-MLflow-Timestamp`` (Unix seconds) and
``X-MLflow-Signature`` = ``"v1," + base64(HMAC-SHA256(secret, "<id>.<timestamp>.<body>"))``.
:func:`verify_signature` checks that signature in constant time and rejects timestamps
further than ``tolerance_s`` from now (replayed deliveries).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any

SIGNATURE_HEADER = "X-MLflow-Signature"
TIMESTAMP_HEADER = "X-MLflow-Timestamp"
DELIVERY_ID_HEADER = "X-MLflow-Delivery-Id"
SIGNATURE_VERSION = "v1"
DEFAULT_TOLERANCE_S = 300.0

MODEL_VERSION_CREATED = "model_version.created"
ALIAS_CREATED = "model_version_alias.created"


class EventError(ValueError):
    """A delivery that is not a well-formed, correctly signed MLflow registry event."""


@dataclass(frozen=True)
class RegistryEvent:
    """One registry event about a model version."""

    kind: str
    name: str
    version: str
    alias: str | None
    delivery_id: str

    @property
    def model_uri(self) -> str:
        return f"models:/{self.name}/{self.version}"


def signature(secret: str, delivery_id: str, timestamp: str, body: bytes) -> str:
    """The ``X-MLflow-Signature`` value MLflow sends for this delivery."""
    content = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret.encode("utf-8"), content, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def verify_signature(secret: str, headers: dict[str, str], body: bytes, *,
                     now: float | None = None,
                     tolerance_s: float = DEFAULT_TOLERANCE_S) -> str:
    """Check a delivery's HMAC signature and freshness; return its delivery id.

    ``headers`` keys are matched case-insensitively. Raises :class:`EventError` saying which
    check failed (missing header, stale timestamp, wrong signature).
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    delivery_id = lowered.get(DELIVERY_ID_HEADER.lower())
    timestamp = lowered.get(TIMESTAMP_HEADER.lower())
    received = lowered.get(SIGNATURE_HEADER.lower())
    if not delivery_id or not timestamp or not received:
        raise EventError("missing signature headers")
    try:
        sent_at = float(timestamp)
    except ValueError as error:
        raise EventError("malformed timestamp header") from error
    current = time.time() if now is None else now
    if abs(current - sent_at) > tolerance_s:
        raise EventError("timestamp outside the accepted window")
    expected = signature(secret, delivery_id, timestamp, body)
    if not hmac.compare_digest(expected.encode(), received.strip().encode()):
        raise EventError("signature mismatch")
    return delivery_id


def parse_event(body: bytes, delivery_id: str) -> RegistryEvent | None:
    """The model-version event in a delivery body, or ``None`` for other entities (registered
    models, prompts, tag changes, test pings). Raises :class:`EventError` on malformed JSON."""
    try:
        payload: Any = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise EventError("body is not JSON") from error
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), dict):
        raise EventError("body lacks an event 'data' object")
    kind = f"{payload.get('entity')}.{payload.get('action')}"
    if kind not in (MODEL_VERSION_CREATED, ALIAS_CREATED):
        return None
    data = payload["data"]
    name, version = data.get("name"), data.get("version")
    if not isinstance(name, str) or version is None:
        raise EventError(f"{kind} event without a model name and version")
    alias = data.get("alias") if kind == ALIAS_CREATED else None
    return RegistryEvent(kind, name, str(version), alias, delivery_id)
