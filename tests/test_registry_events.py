"""Webhook signatures, payload parsing, the dispatcher and the receiver (no MLflow server).

The signature oracle is MLflow's own signing function (``mlflow.webhooks.delivery``), which
the server uses for real deliveries; the end-to-end delivery from a real server is in
``test_pipeline_server.py``.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st
from mlflow.webhooks.delivery import _generate_hmac_signature

from registry_hooks.dispatch import Dispatcher
from registry_hooks.events import (
    ALIAS_CREATED,
    MODEL_VERSION_CREATED,
    EventError,
    RegistryEvent,
    parse_event,
    signature,
    verify_signature,
)
from registry_hooks.receiver import WebhookReceiver

SECRET = "s3cret-for-tests"


def alias_body(name: str = "credit", version: str = "2", alias: str = "candidate") -> bytes:
    payload = {"entity": "model_version_alias", "action": "created",
               "timestamp": "2026-01-01T00:00:00+00:00",
               "data": {"name": name, "alias": alias, "version": version}}
    return json.dumps(payload).encode()


def signed_headers(body: bytes, secret: str = SECRET, timestamp: float | None = None,
                   ) -> dict[str, str]:
    delivery = str(uuid.uuid4())
    stamp = str(int(time.time() if timestamp is None else timestamp))
    return {
        "Content-Type": "application/json",
        "X-MLflow-Delivery-Id": delivery,
        "X-MLflow-Timestamp": stamp,
        "X-MLflow-Signature": _generate_hmac_signature(secret, delivery, stamp, body.decode()),
    }


@given(st.text(min_size=1, max_size=30), st.uuids(), st.integers(0, 2**33),
       st.text(max_size=200))
def test_signature_equals_mlflows(secret: str, delivery: uuid.UUID, stamp: int,
                                  payload: str) -> None:
    expected = _generate_hmac_signature(secret, str(delivery), str(stamp), payload)
    assert signature(secret, str(delivery), str(stamp), payload.encode()) == expected


def test_verify_accepts_a_fresh_correct_signature() -> None:
    body = alias_body()
    headers = signed_headers(body)
    lowered = {key.lower(): value for key, value in headers.items()}
    assert verify_signature(SECRET, lowered, body) == headers["X-MLflow-Delivery-Id"]


@pytest.mark.parametrize(("tamper", "reason"), [
    (lambda b, h: (b.replace(b'"2"', b'"3"'), h), "signature mismatch"),
    (lambda b, h: (b, {**h, "X-MLflow-Signature": "v1,AAAA"}), "signature mismatch"),
    (lambda b, h: (b, {k: v for k, v in h.items() if k != "X-MLflow-Signature"}),
     "missing signature headers"),
    (lambda b, h: (b, {**h, "X-MLflow-Timestamp": "soon"}), "malformed timestamp"),
])
def test_verify_rejects_tampering(tamper, reason: str) -> None:
    body, headers = tamper(alias_body(), signed_headers(alias_body()))
    with pytest.raises(EventError, match=reason):
        verify_signature(SECRET, headers, body)


def test_verify_rejects_wrong_secret_and_stale_deliveries() -> None:
    body = alias_body()
    with pytest.raises(EventError, match="signature mismatch"):
        verify_signature(SECRET, signed_headers(body, secret="other"), body)
    stale = signed_headers(body, timestamp=time.time() - 3600)
    with pytest.raises(EventError, match="outside the accepted window"):
        verify_signature(SECRET, stale, body)


def test_parse_event_kinds() -> None:
    event = parse_event(alias_body(version="7"), "d1")
    assert event == RegistryEvent(ALIAS_CREATED, "credit", "7", "candidate", "d1")
    assert event.model_uri == "models:/credit/7"
    created = json.dumps({"entity": "model_version", "action": "created",
                          "data": {"name": "m", "version": 3, "run_id": None}}).encode()
    assert parse_event(created, "d2") == RegistryEvent(MODEL_VERSION_CREATED, "m", "3", None,
                                                       "d2")
    tag = json.dumps({"entity": "model_version_tag", "action": "set",
                      "data": {"name": "m", "version": "3", "key": "k"}}).encode()
    assert parse_event(tag, "d3") is None
    with pytest.raises(EventError, match="not JSON"):
        parse_event(b"{", "d4")
    with pytest.raises(EventError, match="without a model name"):
        parse_event(json.dumps({"entity": "model_version", "action": "created",
                                "data": {}}).encode(), "d5")


class Recorder:
    """A callback recording events; fails on demand. :meth:`due` stands for the registry's
    tags: a version whose callback returned is audited, so no longer due."""

    def __init__(self, failures: int = 0, audited: set[tuple[str, str]] | None = None) -> None:
        self.events: list[RegistryEvent] = []
        self.failures = failures
        self.audited = set(audited or ())

    def __call__(self, event: RegistryEvent) -> str:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("audit crashed")
        self.events.append(event)
        self.audited.add((event.name, event.version))
        return "passed"

    def due(self, name: str, version: str) -> bool:
        return (name, version) not in self.audited


def test_dispatcher_filters_and_deduplicates() -> None:
    recorder = Recorder(audited={("credit", "1")})
    dispatcher = Dispatcher(recorder, recorder.due, alias="candidate")
    event = RegistryEvent(ALIAS_CREATED, "credit", "2", "candidate", "d")
    assert dispatcher.offer(event) == "queued"
    assert dispatcher.offer(event) == "duplicate"
    assert dispatcher.offer(RegistryEvent(ALIAS_CREATED, "credit", "1", "candidate", "d")) \
        == "duplicate"
    assert dispatcher.offer(RegistryEvent(ALIAS_CREATED, "credit", "3", "champion", "d")) \
        == "ignored"
    assert dispatcher.offer(RegistryEvent(MODEL_VERSION_CREATED, "credit", "4", None, "d")) \
        == "ignored"
    assert recorder.events == [event] and dispatcher.outcomes == ["passed"]


def test_dispatcher_acts_only_on_the_configured_models() -> None:
    recorder = Recorder()
    dispatcher = Dispatcher(recorder, lambda n, v: True, alias="candidate",
                            model_names=["credit"])
    assert dispatcher.offer(RegistryEvent(ALIAS_CREATED, "loans", "1", "candidate", "d")) \
        == "ignored"
    event = RegistryEvent(ALIAS_CREATED, "credit", "1", "candidate", "d")
    assert dispatcher.offer(event) == "queued"
    assert recorder.events == [event]


def test_dispatcher_retries_a_version_whose_callback_failed(
        capsys: pytest.CaptureFixture[str]) -> None:
    recorder = Recorder(failures=1)
    dispatcher = Dispatcher(recorder, lambda n, v: True)
    event = RegistryEvent(MODEL_VERSION_CREATED, "credit", "5", None, "d")
    assert dispatcher.offer(event) == "queued"
    assert "models:/credit/5: audit crashed" in capsys.readouterr().err
    assert dispatcher.offer(event) == "queued"
    assert recorder.events == [event]
    assert [failed for failed, _ in dispatcher.failed] == [event]


@pytest.fixture
def receiver():
    recorder = Recorder()
    dispatcher = Dispatcher(recorder, recorder.due, alias="candidate", background=True)
    server = WebhookReceiver(dispatcher, SECRET, quiet=True).start()
    yield server, recorder
    server.stop()


def test_receiver_accepts_signed_events_once(receiver) -> None:
    server, recorder = receiver
    body = alias_body(version="9")
    first = requests.post(server.url, data=body, headers=signed_headers(body), timeout=5)
    again = requests.post(server.url, data=body, headers=signed_headers(body), timeout=5)
    assert (first.status_code, first.json()["status"]) == (202, "queued")
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    server.dispatcher.drain()
    assert [(e.name, e.version) for e in recorder.events] == [("credit", "9")]


def test_receiver_rejects_bad_signatures_and_changes_nothing(receiver) -> None:
    server, recorder = receiver
    body = alias_body(version="10")
    forged = signed_headers(body, secret="guess")
    response = requests.post(server.url, data=body, headers=forged, timeout=5)
    assert response.status_code == 401
    unsigned = requests.post(server.url, data=body, timeout=5)
    assert unsigned.status_code == 401
    server.dispatcher.drain()
    assert recorder.events == []
    assert server.rejected == 2
    assert requests.post(server.url.replace("/webhook", "/other"), data=body,
                         headers=signed_headers(body), timeout=5).status_code == 404
    assert requests.get(server.url.replace("/webhook", "/health"), timeout=5).json() == \
        {"status": "ok"}
