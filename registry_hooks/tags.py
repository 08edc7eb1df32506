"""certgate's state in the registry: model-version tags and aliases.

Tag schema (all values are strings):

* ``certgate.audit.status``: ``running`` while an audit writes, ``audited`` once its run is
  complete; absent means the version awaits an audit. Event handlers use it for idempotency.
* ``certgate.audit.lease`` beside ``running``: who audits, since when, until when
  (:mod:`registry_hooks.lease`); a ``running`` version whose lease expired is due again.
* ``certgate.audit.run_id``, ``certgate.audit.config_hash``: the audit run and the hash of the
  configuration it used (a changed configuration makes the version due again).
* ``certgate.audit.failure``: an audit that could not run on the version's inputs, which
  ``hooks`` do not repeat (:mod:`registry_hooks.failures`); ``certgate.audit.interrupted``: an
  audit stopped before its results were written, its claim handed back
  (:mod:`registry_hooks.stopping`). A complete audit removes both.
* ``certgate.<audit>.<field>``: per-audit results, e.g. ``certgate.demographic_parity.verdict``,
  ``certgate.demographic_parity.ratio_lower``.
* ``certgate.gate`` (``passed``/``failed``/``warned``) and ``certgate.gate.reasons``;
  ``certgate.gate.withdrawn_aliases`` when a failed gate removed aliases (which, from where).
* on a self-correcting variant: ``certgate.variant``, ``certgate.source_model``,
  ``certgate.source_version`` and the ``certgate.selfcorrect.*`` tags of the deploy step.

Aliases move only through :func:`move_alias`, which the gate calls on a proven pass, and are
removed only through :func:`remove_alias`, which the gate calls when the version they point
at (or the source of the variant they point at) fails its gate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException

from registry_hooks.connection import Registry, registry_errors
from registry_hooks.lease import lease_state

PREFIX = "certgate."
STATUS_TAG = "certgate.audit.status"
RUN_ID_TAG = "certgate.audit.run_id"
CONFIG_HASH_TAG = "certgate.audit.config_hash"
GATE_TAG = "certgate.gate"
GATE_REASONS_TAG = "certgate.gate.reasons"
WITHDRAWN_ALIASES_TAG = "certgate.gate.withdrawn_aliases"
FAILURE_TAG = "certgate.audit.failure"
INTERRUPTED_TAG = "certgate.audit.interrupted"
STATUS_RUNNING = "running"
STATUS_AUDITED = "audited"
MAX_TAG_VALUE = 5000


def audit_tag(audit: str, field: str) -> str:
    """``certgate.<audit>.<field>``."""
    return f"{PREFIX}{audit}.{field}"


def format_value(value: float | str) -> str:
    """Tag text for a number (17 significant digits: the float round-trips) or a string."""
    if isinstance(value, str):
        return value
    return repr(float(value))


def set_version_tags(registry: Registry, name: str, version: str,
                     tags: Mapping[str, float | str]) -> None:
    """Write every tag on model version ``name``/``version`` (values truncated to MLflow's
    limit with a trailing ``…``)."""
    with registry_errors(f"cannot tag models:/{name}/{version}"):
        for key, value in tags.items():
            text = format_value(value)
            if len(text) > MAX_TAG_VALUE:
                text = text[: MAX_TAG_VALUE - 1] + "…"
            registry.client.set_model_version_tag(name, version, key, text)


RESERVED_AUDIT_NAMES = frozenset({"audit", "gate", "variant", "selfcorrect", "source_model",
                                  "source_version"})
"""Second segments of ``certgate.*`` tags that are not audit results (no audit may be named so)."""


def result_tag_audit(key: str) -> str | None:
    """The audit a ``certgate.<audit>.<field>`` result tag belongs to; ``None`` for any other
    tag."""
    if not key.startswith(PREFIX):
        return None
    audit, dot, field = key[len(PREFIX):].partition(".")
    if not dot or not field or audit in RESERVED_AUDIT_NAMES:
        return None
    return audit


def replace_result_tags(registry: Registry, name: str, version: str,
                        tags: Mapping[str, float | str]) -> None:
    """Write ``tags`` and delete every other audit-result tag of the version, so the version's
    ``certgate.<audit>.*`` tags are exactly those of the audit that just ran (no stale verdict
    of an audit the configuration no longer lists can remain), and the records of earlier
    attempts that failed or were interrupted (:data:`FAILURE_TAG`, :data:`INTERRUPTED_TAG`)."""
    current = version_tags(registry, name, version)
    stale = [key for key in current if key not in tags and (
        result_tag_audit(key) is not None or key in (FAILURE_TAG, INTERRUPTED_TAG))]
    with registry_errors(f"cannot remove stale tags of models:/{name}/{version}"):
        for key in stale:
            registry.client.delete_model_version_tag(name, version, key)
    set_version_tags(registry, name, version, tags)


def remove_result_tags_except(registry: Registry, name: str, version: str,
                              audits: Iterable[str]) -> list[str]:
    """Delete the result tags of every audit not in ``audits``; returns the deleted keys."""
    keep = set(audits)
    current = version_tags(registry, name, version)
    stale = [key for key in current
             if (audit := result_tag_audit(key)) is not None and audit not in keep]
    with registry_errors(f"cannot remove stale tags of models:/{name}/{version}"):
        for key in stale:
            registry.client.delete_model_version_tag(name, version, key)
    return stale


def restore_version_tag(registry: Registry, name: str, version: str, key: str,
                        previous: str | None) -> None:
    """Set tag ``key`` back to ``previous``, or delete it when it had no value."""
    with registry_errors(f"cannot reset tag {key} of models:/{name}/{version}"):
        if previous is None:
            registry.client.delete_model_version_tag(name, version, key)
        else:
            registry.client.set_model_version_tag(name, version, key, previous)


def model_version(registry: Registry, name: str, version: str) -> ModelVersion:
    """The registry's record of ``models:/name/version``: its tags, source and run."""
    with registry_errors(f"cannot read models:/{name}/{version}"):
        return registry.client.get_model_version(name, version)


def version_tags(registry: Registry, name: str, version: str) -> dict[str, str]:
    """The current tags of a model version."""
    return dict(model_version(registry, name, version).tags)


def move_alias(registry: Registry, name: str, alias: str, version: str) -> None:
    """Point ``models:/name@alias`` at ``version``."""
    with registry_errors(f"cannot set alias {alias!r} of {name}"):
        registry.client.set_registered_model_alias(name, alias, version)


def alias_version(registry: Registry, name: str, alias: str) -> str | None:
    """The version ``models:/name@alias`` points to, as a string (a local store answers an
    integer where a server answers a string; versions are compared as strings everywhere),
    or ``None`` when the alias is unset (or no model ``name`` is registered)."""
    with registry_errors(f"cannot read registered model {name}"):
        try:
            aliases = registry.client.get_registered_model(name).aliases
        except MlflowException as error:
            if error.error_code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise
    version = aliases.get(alias)
    return None if version is None else str(version)


VARIANT_TAG = "certgate.variant"
VARIANT_SELF_CORRECTING = "self-correcting"
SOURCE_MODEL_TAG = "certgate.source_model"
SOURCE_VERSION_TAG = "certgate.source_version"


def is_due(tags: Mapping[str, str], config_hash: str | None = None,
           now: float | None = None) -> bool:
    """Whether a version with these tags awaits an audit: none is complete or running (a
    ``running`` audit whose lease expired at ``now`` was abandoned: due), or the completed one
    used a different configuration than ``config_hash``. Self-correcting variants registered
    by the deploy step are never due (they are wrappers, not networks). A recorded run that was
    deleted is not seen here (tags only): :func:`audited_under` names the versions to check."""
    if tags.get(VARIANT_TAG) == VARIANT_SELF_CORRECTING:
        return False
    status = tags.get(STATUS_TAG)
    if status is None:
        return True
    if status == STATUS_RUNNING:
        return lease_state(tags, now) == "abandoned"
    return config_hash is not None and tags.get(CONFIG_HASH_TAG) != config_hash


def audited_under(tags: Mapping[str, str], config_hash: str | None) -> str | None:
    """The run id of a complete audit these tags record under ``config_hash`` (``None``: any
    configuration), else ``None``: the versions whose run must still exist to be done."""
    if tags.get(VARIANT_TAG) == VARIANT_SELF_CORRECTING or tags.get(STATUS_TAG) != STATUS_AUDITED:
        return None
    if config_hash is not None and tags.get(CONFIG_HASH_TAG) != config_hash:
        return None
    return tags.get(RUN_ID_TAG)


def unleased_running(tags: Mapping[str, str]) -> bool:
    """A ``running`` tag without a readable lease (written before leases): no handler can tell
    whether its audit still runs."""
    return tags.get(STATUS_TAG) == STATUS_RUNNING and lease_state(tags) == "unleased"


def model_versions(registry: Registry, names: Iterable[str] | None = None
                   ) -> list[ModelVersion]:
    """Every version of the registered models ``names`` (``None``: of every model), oldest
    first."""
    filters = [f"name='{name}'" for name in names] if names is not None else [""]
    found: list[ModelVersion] = []
    with registry_errors("cannot search model versions"):
        for filter_string in filters:
            page_token = None
            while True:
                page = registry.client.search_model_versions(
                    filter_string or None, max_results=200, page_token=page_token
                )
                found.extend(page)
                page_token = page.token
                if not page_token:
                    break
    return sorted(found, key=lambda v: (v.name, int(v.version)))


def versions_awaiting_audit(registry: Registry, names: Iterable[str] | None = None,
                            config_hash: str | None = None) -> list[ModelVersion]:
    """Model versions (of ``names``, or of every registered model) that :func:`is_due`, oldest
    first."""
    return [version for version in model_versions(registry, names)
            if is_due(version.tags, config_hash)]


def versions_tagged(registry: Registry, name: str, tags: Mapping[str, str]) -> list[str]:
    """The versions of registered model ``name`` (none when it does not exist) carrying every
    tag of ``tags`` with its value, oldest first."""
    return [str(version.version) for version in model_versions(registry, [name])
            if all(version.tags.get(key) == value for key, value in tags.items())]


def remove_alias(registry: Registry, name: str, alias: str) -> None:
    """Unset ``models:/name@alias`` (it then points at no version)."""
    with registry_errors(f"cannot remove alias {alias!r} of {name}"):
        registry.client.delete_registered_model_alias(name, alias)
