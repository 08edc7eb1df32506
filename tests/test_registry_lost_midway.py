"""A tracking server that goes away while an audit runs: ``certgate run`` ends with exit code
2 and the audit's own failure (its first call after the certification: the check that its
claim still holds before its run is logged), saying that the version's status
tag was left ``running`` and that ``hooks`` audit it again once its lease expires. The tag
could not be reset either, and that second failure was the only message ("cannot reset tag
certgate.audit.status …"), hiding what went wrong. A real ``mlflow server`` on 127.0.0.1
(sqlite), started for this test alone and stopped (its process group) once the version's
claim has settled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow_server import (
    DEFAULT_AUDIT,
    free_port,
    kill_server,
    run_cli,
    start_server,
    write_server_config,
)
from test_pipeline_server import monte_carlo_ratio, register

from pipeline_steps.audit import _restore_status as restore_status
from registry_hooks.claims import SETTLE_S, ClaimLostError, claim_version
from registry_hooks.connection import connect
from registry_hooks.lease import LEASE_TAG
from registry_hooks.stopping import StopGuard
from registry_hooks.tags import STATUS_RUNNING, STATUS_TAG

pytest_plugins = ["mlflow_server"]


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    port = free_port()
    process = start_server(tmp_path, port)
    try:
        yield f"http://127.0.0.1:{port}", process
    finally:
        kill_server(process)


def test_a_server_lost_mid_audit_reports_the_audits_failure(
        own_server: tuple[str, subprocess.Popen], credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    url, process = own_server
    registry = connect(url)
    name = f"lost_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name)
    ratio, _ = monte_carlo_ratio(credit_demo.fair, credit_demo.population)
    config = write_server_config(tmp_path, url, {"uri": f"models:/{name}/{version}"},
                                 [{**DEFAULT_AUDIT, "gamma": min(ratio, 1.0),
                                   "timeout_s": 6}])
    stop = threading.Event()

    def kill_when_running() -> None:
        """Stop the server once the audit runs: its claim settled (SETTLE_S after the status
        tag reads ``running``)."""
        watcher = connect(url)
        while not stop.wait(0.1):
            tags = watcher.client.get_model_version(name, version).tags
            if tags.get(STATUS_TAG) == STATUS_RUNNING:
                stop.wait(SETTLE_S + 1.0)
                os.killpg(process.pid, signal.SIGKILL)
                return

    killer = threading.Thread(target=kill_when_running, daemon=True)
    killer.start()
    try:
        code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress",
                                 "--json")
    finally:
        stop.set()
        killer.join()
    assert process.poll() is not None, "the server was not stopped during the audit"
    error = json.loads(out)["error"]
    assert code == 2 and error.startswith(
        "cannot check that this audit's claim still holds: cannot read "
        f"models:/{name}/{version}: cannot reach the MLflow tracking server at {url}"), error
    assert "the audit finished but is not recorded in the registry" in error
    assert f"the tag {STATUS_TAG} of models:/{name}/{version} could not be reset" in error
    assert f"`certgate hooks` audit it again once its lease ({LEASE_TAG}) expires" in error
    assert f"certgate: error: {error}" in err


def test_a_lost_claim_the_server_cannot_undo_stays_a_lost_claim(
        own_server: tuple[str, subprocess.Popen], credit_demo) -> None:
    """An audit that lost its claim to another audit, and then its server: the error that
    says the tag could not be reset was a plain ``RegistryError``, so ``hooks`` counted an
    audit error instead of a version audited elsewhere (``skipped``)."""
    url, process = own_server
    registry = connect(url)
    name = f"lostclaim_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name)
    claim = claim_version(registry, name, version, 60.0, settle_s=0.0)
    kill_server(process)
    lost = ClaimLostError(f"models:/{name}/{version} was claimed by another audit")
    with pytest.raises(ClaimLostError) as raised:
        restore_status(registry, claim, lost, None, StopGuard())
    message = str(raised.value)
    assert message.startswith(f"{lost}; the tag {STATUS_TAG} of models:/{name}/{version} "
                              "could not be reset"), message
    assert raised.value.__cause__ is lost
