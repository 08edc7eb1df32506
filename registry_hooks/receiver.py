"""A small HTTP server receiving MLflow registry webhooks (stdlib ``http.server``).

Every POST must carry a valid MLflow HMAC signature (:func:`registry_hooks.events.
verify_signature`); otherwise it is answered ``401`` and nothing else happens. A signed
model-version event goes to the :class:`~registry_hooks.dispatch.Dispatcher`, which runs the
callback on its worker thread, so the answer (``202`` queued, ``200`` ignored or duplicate)
comes back before MLflow's delivery timeout; while the process stops it is answered ``503``
(delivered again later).

With a certificate (``certfile``, and ``keyfile`` unless the key is in the same PEM file) it
speaks HTTPS (stdlib ``ssl``): MLflow's server only delivers to ``https://`` URLs unless
``MLFLOW_WEBHOOK_ALLOWED_SCHEMES`` allows ``http``. The TLS handshake runs on each
connection's own thread, so a slow or plain-HTTP client cannot stall the server.
"""

from __future__ import annotations

import json
import socket
import ssl
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from registry_hooks.dispatch import Dispatcher
from registry_hooks.events import (
    DEFAULT_TOLERANCE_S,
    EventError,
    parse_event,
    verify_signature,
)

MAX_BODY_BYTES = 1 << 20
HANDSHAKE_TIMEOUT_S = 10.0


def tls_context(certfile: str | Path, keyfile: str | Path | None = None) -> ssl.SSLContext:
    """A server-side TLS context (TLS 1.2 or newer) for the PEM certificate chain ``certfile``
    and its private key (``keyfile``, or inside ``certfile``). Raises :class:`ValueError`
    naming the file when it cannot be read or the key does not match."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(certfile), None if keyfile is None else str(keyfile))
    except FileNotFoundError as error:
        raise ValueError(f"TLS file not found: {error.filename}") from error
    except (ssl.SSLError, OSError) as error:
        files = str(certfile) if keyfile is None else f"{certfile} / {keyfile}"
        raise ValueError(f"{files}: not a usable PEM certificate and private key "
                         f"({error})") from error
    return context


class _TLSServer(ThreadingHTTPServer):
    """A threading HTTP server that wraps each accepted connection in TLS on its own
    thread."""

    def __init__(self, address: tuple[str, int], handler: Any,
                 context: ssl.SSLContext) -> None:
        super().__init__(address, handler)
        self.context = context

    def finish_request(self, request: Any, client_address: Any) -> None:
        assert isinstance(request, socket.socket)
        request.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            wrapped = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return  # not TLS, or the client gave up: nothing to answer
        wrapped.settimeout(None)
        try:
            super().finish_request(wrapped, client_address)
        finally:
            wrapped.close()


class WebhookReceiver:
    """Serves ``POST <path>`` on ``host:port`` (port 0 picks a free one; see :attr:`url`),
    over HTTPS when given a ``certfile`` (see the module docstring)."""

    def __init__(self, dispatcher: Dispatcher, secret: str, *, host: str = "127.0.0.1",
                 port: int = 0, path: str = "/webhook",
                 tolerance_s: float = DEFAULT_TOLERANCE_S, quiet: bool = False,
                 certfile: str | Path | None = None,
                 keyfile: str | Path | None = None) -> None:
        if not secret:
            raise ValueError("a webhook secret is required")
        self.dispatcher = dispatcher
        self.path = path
        self.rejected = 0
        if keyfile is not None and certfile is None:
            raise ValueError("a TLS key file needs its certificate file")
        context = tls_context(certfile, keyfile) if certfile is not None else None
        self.scheme = "https" if context is not None else "http"
        handler = _handler_class(self, secret, tolerance_s, quiet)
        self._server: ThreadingHTTPServer = (
            _TLSServer((host, port), handler, context) if context is not None
            else ThreadingHTTPServer((host, port), handler))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{self.scheme}://{host}:{port}{self.path}"

    def start(self) -> WebhookReceiver:
        """Serve on a background thread."""
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="certgate-webhooks", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted."""
        self._server.serve_forever()

    def stop(self) -> None:
        """Stop serving, close the socket and let queued events finish."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self.dispatcher.close()


def _handler_class(receiver: WebhookReceiver, secret: str, tolerance_s: float,
                   quiet: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "certgate-webhooks"

        def log_message(self, format: str, *args: object) -> None:
            if not quiet:
                sys.stderr.write(f"certgate hooks: {format % args}\n")

        def _answer(self, status: HTTPStatus, payload: dict[str, str]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._answer(HTTPStatus.OK, {"status": "ok"})
            else:
                self._answer(HTTPStatus.NOT_FOUND, {"error": "not found"})

        def do_POST(self) -> None:
            if self.path != receiver.path:
                self._answer(HTTPStatus.NOT_FOUND, {"error": "not found"})
                return
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self._answer(HTTPStatus.LENGTH_REQUIRED, {"error": "Content-Length required"})
                return
            if not 0 <= length <= MAX_BODY_BYTES:
                self._answer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": "body too large"})
                return
            body = self.rfile.read(length)
            try:
                delivery_id = verify_signature(secret, dict(self.headers.items()), body,
                                               tolerance_s=tolerance_s)
            except EventError as error:
                receiver.rejected += 1
                self._answer(HTTPStatus.UNAUTHORIZED, {"error": str(error)})
                return
            try:
                event = parse_event(body, delivery_id)
            except EventError as error:
                self._answer(HTTPStatus.BAD_REQUEST, {"error": str(error)})
                return
            if event is None:
                self._answer(HTTPStatus.OK, {"status": "ignored"})
                return
            try:
                outcome = receiver.dispatcher.offer(event)
            except Exception as error:  # the registry could not be read: let MLflow retry
                self._answer(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(error)})
                return
            if outcome == "stopping":  # MLflow delivers it again, to the next receiver
                self._answer(HTTPStatus.SERVICE_UNAVAILABLE, {"error": "stopping"})
                return
            status = HTTPStatus.ACCEPTED if outcome == "queued" else HTTPStatus.OK
            self._answer(status, {"status": outcome, "model": event.model_uri})

    return Handler
