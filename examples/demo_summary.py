"""Print the demo registry's final state: every version of ``credit_scoring`` with its
certified verdict, ratio interval, gate decision and aliases."""

from __future__ import annotations

import sys

from registry_hooks.connection import connect

MODEL_NAME = "credit_scoring"
AUDIT = "demographic_parity"


def main() -> int:
    registry = connect()
    model = registry.client.get_registered_model(MODEL_NAME)
    aliases: dict[str, list[str]] = {}
    for alias, version in model.aliases.items():
        aliases.setdefault(str(version), []).append(alias)
    versions = registry.client.search_model_versions(f"name='{MODEL_NAME}'")
    print(f"registry: {registry.tracking_uri}")
    for version in sorted(versions, key=lambda v: int(v.version)):
        tags = version.tags
        interval = (f"[{float(tags[f'certgate.{AUDIT}.ratio_lower']):.4f}, "
                    f"{float(tags[f'certgate.{AUDIT}.ratio_upper']):.4f}]"
                    if f"certgate.{AUDIT}.ratio_lower" in tags else "-")
        print(f"  version {version.version} ({tags.get('variant', '?')}): "
              f"{tags.get(f'certgate.{AUDIT}.verdict', 'not audited')}, certified ratio "
              f"{interval}, gate {tags.get('certgate.gate', '-')}, aliases "
              f"{', '.join(sorted(aliases.get(str(version.version), []))) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
