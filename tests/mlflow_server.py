"""Integration fixtures (pytest plugin; load with ``pytest_plugins = ["mlflow_server"]``).

:func:`credit_demo` trains the demo's two credit-scoring classifiers (biased and fair) once
per session, from ``examples/demo_credit.py``.

A real ``mlflow server``:

The session-scoped :func:`mlflow_server` fixture starts the server once per test session on
127.0.0.1 with a sqlite backend and an artifact root in a temporary directory: one worker, no
job runner, telemetry off, webhooks allowed to reach loopback receivers (``http``, private
IPs, a fixed Fernet key, no webhook cache so a new webhook applies at once). It waits for
``/health``, and stops the server's process group at the end of the session.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import requests

STARTUP_TIMEOUT_S = 180.0
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@dataclass(frozen=True)
class MlflowServer:
    """A running server: its URL and the directory holding its store and log."""

    url: str
    root: Path

    @property
    def log(self) -> Path:
        return self.root / "server.log"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def unreachable_tracking_uri() -> str:
    """An http URI on 127.0.0.1 where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


def server_environment() -> dict[str, str]:
    """The server's environment (see the module docstring)."""
    from cryptography.fernet import Fernet

    return {
        **os.environ,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "MLFLOW_WEBHOOK_ALLOWED_SCHEMES": "http,https",
        "MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS": "true",
        "MLFLOW_WEBHOOK_SECRET_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "MLFLOW_WEBHOOK_CACHE_TTL": "0",
    }


def wait_until_healthy(url: str, process: subprocess.Popen, log: Path) -> None:
    """Poll ``/health`` until it answers OK; fail with the log's tail if the server dies."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"mlflow server exited with {process.returncode}:\n{tail}")
        try:
            if requests.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"mlflow server at {url} not healthy after {STARTUP_TIMEOUT_S} s")


def start_server(root: Path, port: int) -> subprocess.Popen:
    """``mlflow server`` on 127.0.0.1:``port`` with its sqlite store, artifacts and log
    (appended) in ``root`` — the same store when started again — once it is healthy (its
    process group is killed when it does not become so)."""
    log = root / "server.log"
    with log.open("ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server",
             "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
             "--artifacts-destination", str(root / "artifacts"),
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            env=server_environment(), stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        wait_until_healthy(f"http://127.0.0.1:{port}", process, log)
    except BaseException:
        kill_server(process)
        raise
    return process


def kill_server(process: subprocess.Popen) -> None:
    """Kill a server's process group (SIGKILL) and reap it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = start_server(root, port)
    try:
        yield MlflowServer(url, root)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def demo_module(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` (the examples directory is not a package)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class CreditDemo:
    """The demo's population model and its two trained classifiers."""

    module: ModuleType
    population: Any
    biased: Any
    fair: Any


@pytest.fixture(scope="session")
def credit_demo() -> CreditDemo:
    module = demo_module("demo_credit")
    return CreditDemo(module, module.population_model(), module.train_classifier(biased=True),
                      module.train_classifier(biased=False))


DEFAULT_AUDIT = {"kind": "demographic_parity", "protected": "sex", "privileged": 1,
                 "favorable_class": 1, "gamma": 0.8, "timeout_s": 60}


def write_server_config(tmp_path: Path, tracking_uri: str, model: dict[str, Any],
                        audits: list[dict[str, Any]] | None = None, samples: int = 500,
                        **sections: Any) -> Path:
    """A certgate YAML config in ``tmp_path`` for ``model`` on the server at ``tracking_uri``
    (a fresh experiment), with ``audits`` (default: demographic parity of sex at 0.8)."""
    import uuid

    import yaml

    document: dict[str, Any] = {
        "tracking": {"tracking_uri": tracking_uri, "experiment": f"exp_{uuid.uuid4().hex[:8]}"},
        "model": model,
        "validation": {"population_samples": samples},
        "audits": audits if audits is not None else [dict(DEFAULT_AUDIT)],
        **sections,
    }
    path = tmp_path / f"config_{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the ``certgate`` CLI in-process; its exit code and what it printed (earlier output
    dropped)."""
    from pipeline_steps.cli import main

    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
