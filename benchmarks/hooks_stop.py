"""How soon ``certgate hooks serve`` exits after SIGINT while an audit is in its engine.

Registers the demo's fair credit classifier on a running tracking server, writes a
configuration whose demographic-parity threshold is the model's own ratio (dense Monte Carlo,
so the audit runs its whole ``--timeout`` in the engine), starts ``hooks serve
--poll-interval 1`` of the checkout given by ``--root``, waits until its lease is on the
version and two seconds more, sends SIGINT and reports the seconds until the process exited
and the version's status tag then. Run against a server of your own::

    mlflow server --backend-store-uri sqlite:////tmp/stop.db --port 5078 --workers 1 &
    python benchmarks/hooks_stop.py --tracking-uri http://127.0.0.1:5078 --root OLD
    python benchmarks/hooks_stop.py --tracking-uri http://127.0.0.1:5078 --root .
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import torch
import yaml


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--root", type=Path, default=Path("."),
                        help="the certgate checkout whose hooks serve is stopped")
    parser.add_argument("--timeout", type=float, default=20.0, help="the audit's timeout_s")
    args = parser.parse_args()
    root = args.root.resolve()
    sys.path.insert(0, str(root))

    from registry_hooks import log_model
    from registry_hooks.connection import connect

    spec = importlib.util.spec_from_file_location("demo_credit",
                                                  root / "examples" / "demo_credit.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    population, model = demo.population_model(), demo.train_classifier(biased=False)
    x = population.sample(200_000, np.random.default_rng(11))
    with torch.no_grad():
        favourable = model(torch.as_tensor(x, dtype=torch.float32)).argmax(1).numpy() == 1
    group = x[:, 3] == 1
    ratio = float(favourable[~group].mean() / favourable[group].mean())

    registry = connect(args.tracking_uri)
    name = f"stop_{uuid.uuid4().hex[:8]}"
    version = str(log_model(model, population, registered_model_name=name,
                            serialization_format="pickle",
                            registry=registry).registered_model_version)
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "config.yaml"
        config.write_text(yaml.safe_dump({
            "tracking": {"tracking_uri": args.tracking_uri,
                         "experiment": f"exp_{uuid.uuid4().hex[:8]}"},
            "model": {"uri": f"models:/{name}@candidate"},
            "validation": {"population_samples": 500},
            "audits": [{"kind": "demographic_parity", "protected": "sex", "privileged": 1,
                        "favorable_class": 1, "gamma": round(ratio, 4),
                        "timeout_s": args.timeout}],
        }))
        server = subprocess.Popen(
            [sys.executable, "-m", "pipeline_steps", "hooks", "serve", "--config", str(config),
             "--port", str(free_port()), "--secret", uuid.uuid4().hex, "--poll-interval", "1"],
            cwd=root, env={**os.environ, "OMP_NUM_THREADS": "1"}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        tags: dict[str, str] = {}
        while tags.get("certgate.audit.status") != "running":
            assert server.poll() is None, server.communicate()
            time.sleep(0.2)
            tags = dict(registry.client.get_model_version(name, version).tags)
        time.sleep(2.0)
        sent = time.monotonic()
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=600)
        exited = time.monotonic() - sent
    tags = dict(registry.client.get_model_version(name, version).tags)
    print(json.dumps({"root": str(args.root), "timeout_s": args.timeout,
                      "exit_after_sigint_s": round(exited, 2),
                      "status_after": tags.get("certgate.audit.status"),
                      "interrupted_tag": "certgate.audit.interrupted" in tags,
                      "load": os.getloadavg()[0],
                      "stderr_tail": err.strip().splitlines()[-1:]}), flush=True)


if __name__ == "__main__":
    main()
