"""Connecting to an MLflow tracking server or local store, with a clear error when it is down.

MLflow's own HTTP client retries an unreachable server for minutes before failing with a long
traceback. :func:`connect` probes a remote server's ``/health`` endpoint once, with a short
timeout, and raises :class:`RegistryUnreachableError` naming the URI it tried; local stores
(``sqlite:///…``, ``file:…``, plain paths) need no probe. :func:`registry_errors` turns any
``MlflowException`` raised inside it into a one-line :class:`RegistryError`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import mlflow
import requests
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from verifier.errors import CertgateInputError

HEALTH_TIMEOUT_S = 5.0


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


def probe(uri: str, timeout_s: float = HEALTH_TIMEOUT_S) -> None:
    """Raise :class:`RegistryUnreachableError` unless ``uri``'s ``/health`` answers OK."""
    url = uri.rstrip("/") + "/health"
    try:
        response = requests.get(url, timeout=timeout_s)
    except requests.RequestException as error:
        reason = type(error).__name__
        raise RegistryUnreachableError(
            f"cannot reach the MLflow tracking server at {uri} ({reason})"
        ) from error
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
    if mlflow.get_tracking_uri() != tracking:
        _forget_active_experiment()
    mlflow.set_tracking_uri(tracking)
    mlflow.set_registry_uri(registry)
    return Registry(MlflowClient(tracking, registry), tracking, registry)


def _forget_active_experiment() -> None:
    """Drop the active experiment of the previous store (MLflow 3.17 keeps it in the fluent
    module and in ``MLFLOW_EXPERIMENT_ID``; it has no public call to unset it)."""
    from mlflow.tracking import fluent

    os.environ.pop("MLFLOW_EXPERIMENT_ID", None)
    fluent._active_experiment_id = None


@contextmanager
def registry_errors(action: str) -> Iterator[None]:
    """Re-raise MLflow exceptions in the block as :class:`RegistryError` ``"<action>: <msg>"``."""
    try:
        yield
    except MlflowException as error:
        message = str(error.message if hasattr(error, "message") else error).splitlines()
        first = message[0] if message else type(error).__name__
        raise RegistryError(f"{action}: {first}") from error
