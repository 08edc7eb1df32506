"""MLflow registry integration: URIs, loading, logging, audit runs, tags, aliases, registry
events. The only package that imports MLflow.

This package talks to MLflow and to :mod:`verifier`; it never imports :mod:`pipeline_steps`.
Registry events (webhooks, polling) are handed to a callback that the caller supplies.
"""

from registry_hooks.certgate_model import (
    LoadedModel,
    PopulationArtifact,
    fetch_population,
    load_model,
    load_population_model,
    log_model,
    log_model_with_population,
    save_model,
)
from registry_hooks.connection import (
    Registry,
    RegistryError,
    RegistryUnreachableError,
    connect,
)
from registry_hooks.dispatch import Dispatcher, registry_due_check
from registry_hooks.events import RegistryEvent, verify_signature
from registry_hooks.receiver import WebhookReceiver
from registry_hooks.tags import move_alias, set_version_tags, versions_awaiting_audit
from registry_hooks.watcher import poll_once, watch

__all__ = [
    "Dispatcher",
    "LoadedModel",
    "PopulationArtifact",
    "Registry",
    "RegistryError",
    "RegistryEvent",
    "RegistryUnreachableError",
    "WebhookReceiver",
    "connect",
    "fetch_population",
    "load_model",
    "load_population_model",
    "log_model",
    "log_model_with_population",
    "move_alias",
    "poll_once",
    "registry_due_check",
    "save_model",
    "set_version_tags",
    "verify_signature",
    "versions_awaiting_audit",
    "watch",
]
