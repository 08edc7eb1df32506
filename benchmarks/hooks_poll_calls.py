"""Server calls of one ``certgate hooks watch`` poll, before/after the deleted-run check.

Registers a model with ``--versions`` versions on a running tracking server, each tagged as
audited under one configuration with its own audit run, deletes ``--deleted`` of those runs,
and counts the HTTP requests MLflow's client sends during one poll of the checkout given by
``--root`` (the dispatcher's callback only records the versions it is offered: nothing is
audited): without an alias (every version) and with ``--alias`` (the version the alias points
to, whose run is deleted). Run against a server of your own::

    mlflow server --backend-store-uri sqlite:////tmp/polls.db --port 5077 --workers 1 &
    python benchmarks/hooks_poll_calls.py --tracking-uri http://127.0.0.1:5077 --root OLD
    python benchmarks/hooks_poll_calls.py --tracking-uri http://127.0.0.1:5077 --root .
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--root", type=Path, default=Path("."),
                        help="the certgate checkout whose watcher polls")
    parser.add_argument("--versions", type=int, nargs="+", default=[10, 100, 300])
    parser.add_argument("--deleted", type=int, default=1)
    args = parser.parse_args()
    sys.path.insert(0, str(args.root.resolve()))

    from mlflow.utils import rest_utils

    from registry_hooks.connection import connect
    from registry_hooks.dispatch import Dispatcher, registry_due_check
    from registry_hooks.watcher import poll_once

    calls: list[str] = []
    original = rest_utils.http_request

    def counted(host_creds, endpoint, method, *positional, **options):
        calls.append(f"{method} {endpoint}")
        return original(host_creds, endpoint, method, *positional, **options)

    rest_utils.http_request = counted
    registry = connect(args.tracking_uri)
    client = registry.client
    experiment = client.create_experiment(f"polls_{uuid.uuid4().hex[:8]}")
    for count in args.versions:
        name = f"polls_{uuid.uuid4().hex[:8]}"
        client.create_registered_model(name)
        runs = []
        for _ in range(count):
            version = client.create_model_version(name, "s3://bucket/model").version
            run_id = client.create_run(experiment).info.run_id
            runs.append(run_id)
            for key, value in {"certgate.audit.status": "audited",
                               "certgate.audit.run_id": run_id,
                               "certgate.audit.config_hash": "h"}.items():
                client.set_model_version_tag(name, version, key, value)
        for run_id in runs[-args.deleted:]:
            client.delete_run(run_id)
        client.set_registered_model_alias(name, "candidate", str(count))
        for alias in (None, "candidate"):
            offered: list[str] = []

            def record(event, offered=offered) -> str:
                offered.append(event.version)
                return "passed"

            dispatcher = Dispatcher(record, registry_due_check(registry, "h"), alias=alias)
            calls.clear()
            started, cpu = time.perf_counter(), time.process_time()
            poll_once(registry, dispatcher, [name], "h")
            print(json.dumps({"root": str(args.root), "versions": count, "alias": alias,
                              "deleted_runs": args.deleted, "calls": len(calls),
                              "offered": len(offered),
                              "wall_s": round(time.perf_counter() - started, 3),
                              "cpu_s": round(time.process_time() - cpu, 3),
                              "endpoints": sorted(set(calls))}), flush=True)


if __name__ == "__main__":
    main()
