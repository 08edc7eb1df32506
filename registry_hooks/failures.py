"""A model version's failed audit, recorded so that ``certgate hooks`` do not repeat it.

An audit that cannot run on a version's inputs (a model without input names, a population that
does not match it, an input the configuration names that the model lacks) fails the same way
at every attempt, and each attempt downloads the model again. The event handler of ``hooks``
records such a failure on the version as :data:`FAILURE_TAG`, a JSON object ``{"error",
"fingerprint", "config_hash", "at", "by"}``: the error's message, the fingerprint of what
failed (:func:`failure_fingerprint`: the configuration's audit fingerprint with the version's
source and run), when, and by whom (``host:pid:token``, :func:`recorder`). ``hooks`` leave a
version whose record matches its current fingerprint (:func:`recorded_failure`); a changed
configuration (another audit fingerprint) makes it due again, and so does removing the tag
or ``--retry-failed`` (records written before the watcher started are ignored). Only input
errors are recorded (:class:`~verifier.errors.CertgateInputError`, not a registry error nor an
unreachable Dask scheduler: a server blip or a scheduler restart is retried at the next
poll). A complete audit removes the tag (:func:`registry_hooks.tags.replace_result_tags`).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from mlflow.entities.model_registry import ModelVersion

from registry_hooks.connection import Registry
from registry_hooks.tags import FAILURE_TAG, MAX_TAG_VALUE, set_version_tags

ERROR_CHARS = 2000
"""The error's message is cut to this many characters in the tag (the tag holds 5,000)."""


def recorder() -> str:
    """A new recorder's name, ``host:pid:token`` (the token tells two watchers of one process
    apart), as a failure record's ``by`` gives it."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def failure_fingerprint(config_hash: str, version: ModelVersion) -> str:
    """A short hash of what an audit ran on: the configuration's audit fingerprint and the
    version's model (its source and run; a registered version's artifacts do not change)."""
    text = json.dumps([config_hash, version.source, version.run_id or ""])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Failure:
    """A recorded failed audit (module docstring)."""

    error: str
    fingerprint: str
    config_hash: str
    at: str
    by: str

    def to_tag(self) -> str:
        text = json.dumps({"error": self.error, "fingerprint": self.fingerprint,
                           "config_hash": self.config_hash, "at": self.at, "by": self.by})
        assert len(text) <= MAX_TAG_VALUE
        return text

    @classmethod
    def from_tag(cls, text: str) -> Failure | None:
        """The record a tag value holds, ``None`` when it is not one."""
        try:
            document = json.loads(text)
            return cls(*(str(document[key]) for key in
                         ("error", "fingerprint", "config_hash", "at", "by")))
        except (ValueError, TypeError, KeyError):
            return None


def recorded_failure(version: ModelVersion, config_hash: str, *,
                     retry_for: str | None = None) -> Failure | None:
    """The failure recorded on ``version`` for this configuration and model, or ``None``: no
    record, one of another fingerprint, or, with ``retry_for`` (a :func:`recorder`), a record
    written by another recorder (its own records stand, so a long-running ``--retry-failed``
    tries each version once)."""
    text = version.tags.get(FAILURE_TAG)
    failure = None if text is None else Failure.from_tag(text)
    if failure is None or failure.fingerprint != failure_fingerprint(config_hash, version):
        return None
    if retry_for is not None and failure.by != retry_for:
        return None
    return failure


def record_failure(registry: Registry, version: ModelVersion, config_hash: str,
                   error: BaseException, by: str) -> Failure:
    """Tag ``version`` with the failure of its audit under ``config_hash``, recorded ``by``
    (a :func:`recorder`)."""
    message = str(error).strip() or type(error).__name__
    if len(message) > ERROR_CHARS:
        message = message[: ERROR_CHARS - 1] + "…"
    failure = Failure(message, failure_fingerprint(config_hash, version), config_hash,
                      datetime.fromtimestamp(time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                      by)
    set_version_tags(registry, version.name, str(version.version),
                     {FAILURE_TAG: failure.to_tag()})
    return failure

