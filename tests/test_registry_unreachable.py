"""An unreachable tracking server fails in seconds with one clear line; a slow one still works.

Real sockets on 127.0.0.1: a closed port (nothing listens), and a small HTTP server that answers
``/health`` (after a delay, for the slow case) and is shut down to play a server that goes away
after :func:`connect` probed it. The time bounds are generous: MLflow's default retries take
about 4 minutes on a refused connection.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import mlflow
import pytest

from registry_hooks.connection import (
    HTTP_RETRY_DEFAULTS,
    RegistryUnreachableError,
    connect,
    probe,
    registry_errors,
)
from tests.mlflow_server import free_port

FAIL_FAST_S = 10.0


@pytest.fixture(autouse=True)
def _own_mlflow_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No retry, URI or experiment settings from outside; MLflow's URIs restored after."""
    for name in (*HTTP_RETRY_DEFAULTS, "MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI",
                 "MLFLOW_EXPERIMENT_ID"):
        monkeypatch.delenv(name, raising=False)
    tracking, registry = mlflow.get_tracking_uri(), mlflow.get_registry_uri()
    yield
    mlflow.set_tracking_uri(tracking)
    mlflow.set_registry_uri(registry)


@contextmanager
def health_server(delay_s: float = 0.0) -> Iterator[str]:
    """A server on 127.0.0.1 whose ``/health`` answers 200 after ``delay_s``."""

    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            time.sleep(delay_s)
            self.send_response(200 if self.path == "/health" else 404)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"OK")

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_closed_port_fails_fast_naming_the_server() -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(RegistryUnreachableError) as caught:
        connect(uri)
    assert time.monotonic() - started < FAIL_FAST_S
    assert str(caught.value) == (f"cannot reach the MLflow tracking server at {uri} "
                                 "(ConnectionError)")


def test_a_server_gone_after_connecting_fails_fast_naming_the_server() -> None:
    with health_server() as uri:
        registry = connect(uri)
    started = time.monotonic()
    with (pytest.raises(RegistryUnreachableError) as caught,
          registry_errors("listing registered models")):
        registry.client.search_registered_models()
    elapsed = time.monotonic() - started
    assert elapsed < FAIL_FAST_S
    assert str(caught.value) == ("listing registered models: cannot reach the MLflow tracking "
                                 f"server at {uri} (ConnectionError)")


def test_a_slow_server_passes_the_probe() -> None:
    """The connect timeout bounds the TCP connection only: an answer slower than it passes."""
    with health_server(delay_s=1.0) as uri:
        started = time.monotonic()
        probe(uri, timeout_s=0.5)
        assert time.monotonic() - started >= 1.0
        assert connect(uri).tracking_uri == uri


def test_retry_settings_the_user_made_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")
    with health_server() as uri:
        connect(uri)
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "5"
    assert os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] == \
        HTTP_RETRY_DEFAULTS["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"]
