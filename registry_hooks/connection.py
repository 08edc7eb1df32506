"""Connecting to an MLflow tracking server or local store, with a clear error when it is down.

MLflow's own HTTP client retries an unreachable server for minutes (7 retries, backoff factor
2: about 4 min) before failing with a long traceback. :func:`connect` probes a remote server's
``/health`` endpoint once, with a short connect timeout (a slow server that accepts the
connection gets MLflow's request timeout to answer), and raises
:class:`RegistryUnreachableError` naming the URI it tried; local stores (``sqlite:///…``,
``file:…``, plain paths) need no probe. A server that goes away after the probe is found out
by MLflow's retries, which :func:`connect` bounds to a few seconds unless the user set them
(:data:`HTTP_RETRY_DEFAULTS`). :func:`registry_errors` turns any ``MlflowException`` raised
inside it into a one-line :class:`RegistryError`, a :class:`RegistryUnreachableError` when
the server could not be reached.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

import mlflow
import requests
from mlflow import MlflowClient
from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_TIMEOUT
from mlflow.exceptions import MlflowException

from verifier.errors import CertgateInputError

HEALTH_TIMEOUT_S = 5.0
"""How long the ``/health`` probe waits for the TCP connection (not for the answer)."""
HTTP_RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}
"""MLflow's retry settings when the user has not set them: 2 retries, backing off 0 s then
2 s (plus up to 1 s jitter each), so a refused connection fails in about 3 s instead of MLflow's
default of about 4 min; transient 429/5xx answers get the same two retries. The request
timeout (``MLFLOW_HTTP_REQUEST_TIMEOUT``) is left alone, so slow servers still answer."""


class RegistryError(CertgateInputError):
    """The registry refused a request or does not hold what was asked for."""


class RegistryUnreachableError(RegistryError):
    """The tracking server could not be reached at the URI in the message."""


@dataclass(frozen=True)
class Registry:
    """A connected client and the URIs it talks to."""

    client: MlflowClient
    tracking_uri: str
    registry_uri: str


def is_remote(uri: str) -> bool:
    """True for ``http(s)://`` tracking URIs (a server to probe)."""
    return uri.startswith(("http://", "https://"))


def unreachable_message(uri: str, error: BaseException) -> str:
    """The one message for a server that cannot be reached."""
    return f"cannot reach the MLflow tracking server at {uri} ({type(error).__name__})"


def probe(uri: str, timeout_s: float = HEALTH_TIMEOUT_S,
          read_timeout_s: float | None = None) -> None:
    """Raise :class:`RegistryUnreachableError` unless ``uri``'s ``/health`` answers OK.

    ``timeout_s`` bounds the TCP connection; ``read_timeout_s`` the wait for the answer
    (``None``: MLflow's request timeout, ``MLFLOW_HTTP_REQUEST_TIMEOUT``, so a slow server
    that MLflow would wait for passes)."""
    url = uri.rstrip("/") + "/health"
    read = MLFLOW_HTTP_REQUEST_TIMEOUT.get() if read_timeout_s is None else read_timeout_s
    try:
        response = requests.get(url, timeout=(timeout_s, read))
    except requests.RequestException as error:
        raise RegistryUnreachableError(unreachable_message(uri, error)) from error
    if response.status_code != 200:
        raise RegistryUnreachableError(
            f"the MLflow tracking server at {uri} is not healthy: HTTP {response.status_code} "
            f"from {url}"
        )


def connect(tracking_uri: str | None = None, registry_uri: str | None = None) -> Registry:
    """Point MLflow at the given store (``None``: ``MLFLOW_TRACKING_URI`` or MLflow's default)
    and return a client, after checking that a remote server answers.

    The registry is ``registry_uri`` when given; otherwise the tracking store itself when
    ``tracking_uri`` is given, and ``MLFLOW_REGISTRY_URI`` (else the tracking store) only when
    both come from the environment. MLflow writes both variables whenever a store is set, so
    reading ``MLFLOW_REGISTRY_URI`` beside an explicit tracking URI would silently send
    registry calls to the store of an earlier connection in the same process. Likewise an
    active experiment (``mlflow.set_experiment`` exports ``MLFLOW_EXPERIMENT_ID``) is an id of
    the store it was set on: switching to another store forgets it, so runs and models go to
    that store's default experiment or the one set next, never to a foreign id."""
    tracking = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or mlflow.get_tracking_uri()
    if registry_uri is not None:
        registry = registry_uri
    elif tracking_uri is not None:
        registry = tracking_uri
    else:
        registry = os.environ.get("MLFLOW_REGISTRY_URI") or tracking
    for uri in {tracking, registry}:
        if is_remote(uri):
            probe(uri)
    bound_http_retries()
    if mlflow.get_tracking_uri() != tracking:
        _forget_active_experiment()
    mlflow.set_tracking_uri(tracking)
    mlflow.set_registry_uri(registry)
    return Registry(MlflowClient(tracking, registry), tracking, registry)


def bound_http_retries() -> None:
    """Set :data:`HTTP_RETRY_DEFAULTS` in the environment, where MLflow reads them on every
    request; a variable the user set (even empty) is kept."""
    for name, value in HTTP_RETRY_DEFAULTS.items():
        os.environ.setdefault(name, value)


def _forget_active_experiment() -> None:
    """Drop the active experiment of the previous store (MLflow 3.17 keeps it in the fluent
    module and in ``MLFLOW_EXPERIMENT_ID``; it has no public call to unset it)."""
    from mlflow.tracking import fluent

    os.environ.pop("MLFLOW_EXPERIMENT_ID", None)
    fluent._active_experiment_id = None


MISSING_CODES = frozenset({"RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"})
"""The error codes MLflow answers for a model, version or alias it does not hold."""


@contextmanager
def registry_errors(action: str, missing: str | None = None) -> Iterator[None]:
    """Re-raise MLflow exceptions in the block as :class:`RegistryError` ``"<action>: <msg>"``
    (``"<missing>: <msg>"`` when given and the registry says it holds no such thing,
    :data:`MISSING_CODES`; a server error or a timeout is not "not found"); one caused by a
    failed connection (MLflow chains the ``requests`` error) as
    :class:`RegistryUnreachableError` naming the server."""
    try:
        yield
    except MlflowException as error:
        cause = error.__cause__ or error.__context__
        if isinstance(cause, requests.ConnectionError) and cause.request is not None:
            parts = urlsplit(cause.request.url)
            server = f"{parts.scheme}://{parts.netloc}"
            raise RegistryUnreachableError(
                f"{action}: {unreachable_message(server, cause)}"
            ) from error
        message = str(error.message if hasattr(error, "message") else error).splitlines()
        first = message[0] if message else type(error).__name__
        said = missing if missing is not None and error.error_code in MISSING_CODES else action
        raise RegistryError(f"{said}: {first}") from error
