"""``certgate hooks`` against a real ``mlflow server`` (127.0.0.1, sqlite): a prompt stop that
loses nothing, and failed audits that are not repeated at every poll.

* On SIGINT/SIGTERM ``hooks serve`` joined the poll thread and the receiver's audit in flight,
  so it exited only once that audit's certification, gate and tags were done (a CI run waited
  more than 120 s). It now stops taking events at once, hands the version in flight back (no
  status, no lease, ``certgate.audit.interrupted`` saying why) and exits within seconds; the
  next ``hooks watch --once`` audits the version. ``hooks watch`` does the same on SIGTERM
  (it died with its lease live until expiry).
* A version whose audit cannot run on its inputs (a model without input names) was downloaded
  and audited again at every poll. The failure is now recorded on the version with the
  fingerprint of model and configuration; later polls skip it (``failed_before``) without
  downloading it, until the configuration changes, the tag is removed or ``--retry-failed``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from mlflow_server import free_port, write_server_config
from test_binding_server import population_file, register_unnamed
from test_hooks_lease import watch_json
from test_pipeline_server import monte_carlo_ratio, register, runs_in, write_config

from registry_hooks.connection import Registry, connect
from registry_hooks.failures import Failure
from registry_hooks.lease import LEASE_TAG, lease_of
from registry_hooks.tags import (
    FAILURE_TAG,
    INTERRUPTED_TAG,
    STATUS_RUNNING,
    STATUS_TAG,
    model_version,
    version_tags,
)

pytest_plugins = ["mlflow_server"]
ROOT = Path(__file__).resolve().parent.parent
STOP_BOUND_S = 15.0
"""How soon a stopped ``hooks`` process must exit while an audit is in its engine (the stop
itself takes a few registry calls; the bound leaves room for a loaded machine)."""
AUDIT_S = 20
"""The audit's ``timeout_s``: at a threshold equal to the model's ratio it runs this long, so
a stop finds it in the engine."""


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    return connect(mlflow_server.url)


def slow_config(registry: Registry, credit_demo, tmp_path: Path, name: str) -> Path:
    """A configuration whose audit stays in its engine for :data:`AUDIT_S` seconds: the
    threshold is the model's own ratio (dense Monte Carlo), which no interval leaves soon."""
    ratio, _ = monte_carlo_ratio(credit_demo.fair, credit_demo.population)
    return write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                        audit={"gamma": round(ratio, 4), "timeout_s": AUDIT_S})


def start_hooks(*argv: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline_steps", "hooks", *argv], cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for_claim(registry: Registry, name: str, version: str,
                   process: subprocess.Popen) -> None:
    """Until ``process`` holds the version's lease, then two seconds more (past the claim's
    one-second read-back, into the engine)."""
    deadline = time.monotonic() + 300
    while True:
        tags = version_tags(registry, name, version)
        lease = lease_of(tags)
        if (tags.get(STATUS_TAG) == STATUS_RUNNING and lease is not None
                and lease.owner.split(":")[1] == str(process.pid)):
            break
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.2)
    time.sleep(2.0)


def stop_within_bound(process: subprocess.Popen, signum: int) -> tuple[float, str, str]:
    """Send ``signum``; the seconds until the process exited, and its output."""
    sent = time.monotonic()
    process.send_signal(signum)
    try:
        out, err = process.communicate(timeout=STOP_BOUND_S)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"still running {STOP_BOUND_S} s after the signal:\n{err}")
    return time.monotonic() - sent, out, err


def assert_handed_back(registry: Registry, name: str, version: str, reason: str,
                       err: str) -> None:
    tags = version_tags(registry, name, version)
    assert STATUS_TAG not in tags and LEASE_TAG not in tags, tags
    assert tags[INTERRUPTED_TAG].startswith(f"stopped by {reason} at "), tags
    assert "before its results were written" in tags[INTERRUPTED_TAG]
    assert f"handed back models:/{name}/{version}" in err, err


def test_hooks_serve_stops_promptly_and_hands_the_audit_in_flight_back(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"stop_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    config = slow_config(registry, credit_demo, tmp_path, name)
    server = start_hooks("serve", "--config", str(config), "--port", str(free_port()),
                         "--secret", uuid.uuid4().hex, "--poll-interval", "1")
    try:
        wait_for_claim(registry, name, version, server)
    finally:
        elapsed, _, err = stop_within_bound(server, signal.SIGINT)
    assert server.returncode == 0, err
    assert elapsed < STOP_BOUND_S
    assert "SIGINT: stopping (a second signal exits at once)" in err
    assert_handed_back(registry, name, version, "SIGINT", err)
    assert runs_in(registry, config) == 0
    print(f"hooks serve stopped {elapsed:.2f} s after SIGINT", file=sys.stderr)

    _, summary, err = watch_json(capsys, config)
    assert summary["handled"] == 1 and summary["errors"] == 0, err
    tags = version_tags(registry, name, version)
    assert tags[STATUS_TAG] == "audited" and "certgate.gate" in tags
    assert INTERRUPTED_TAG not in tags and LEASE_TAG not in tags
    assert runs_in(registry, config) == 1


def test_hooks_watch_stops_on_sigterm_and_hands_the_audit_back(
        registry: Registry, credit_demo, tmp_path: Path) -> None:
    """Kubernetes stops a pod with SIGTERM: ``hooks watch`` died at once with its lease live
    (the version waited for the lease's expiry, its budget plus 10 minutes)."""
    name = f"term_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    config = slow_config(registry, credit_demo, tmp_path, name)
    watcher = start_hooks("watch", "--config", str(config), "--interval", "1", "--json")
    try:
        wait_for_claim(registry, name, version, watcher)
    finally:
        elapsed, out, err = stop_within_bound(watcher, signal.SIGTERM)
    assert elapsed < STOP_BOUND_S
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["interrupted"] == 1 and summary["handled"] == 0, (
        f"stdout:\n{out}\nstderr:\n{err}")
    assert_handed_back(registry, name, version, "SIGTERM", err)
    assert runs_in(registry, config) == 0
    print(f"hooks watch stopped {elapsed:.2f} s after SIGTERM", file=sys.stderr)


SIGNALS_SCRIPT = """
import os, signal, time
from pipeline_steps.cli.stop_signals import stop_on_signals
from registry_hooks.stopping import StopGuard

guard = StopGuard()
with stop_on_signals(guard, audits_here=True), guard.claiming():
    os.kill(os.getpid(), signal.SIGTERM)
    print("the claim is still being written", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)
print("not reached", flush=True)
"""


def test_a_signal_waits_for_a_write_and_a_second_one_exits_at_once() -> None:
    """The first signal does not cut a claim or commit being written in the audit's thread;
    a second one ends the process at once (128 + the signal's number)."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SIGNALS_SCRIPT], cwd=ROOT, text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 128 + signal.SIGTERM, done
    assert done.stdout == "the claim is still being written\n"
    assert "SIGTERM: stopping (a second signal exits at once)" in done.stderr
    assert "SIGTERM again: exiting now" in done.stderr
    assert time.monotonic() - started < 60


def artifact_reads(server_log: Path, model_id: str) -> int:
    """How many times the server served an artifact of logged model ``model_id`` (its access
    log)."""
    return sum(1 for line in server_log.read_text(errors="replace").splitlines()
               if '"GET /api/2.0/mlflow-artifacts/artifacts/' in line and model_id in line)


def test_a_failed_audit_is_recorded_and_skipped_until_the_config_changes_or_a_retry(
        registry: Registry, mlflow_server, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"failing_{uuid.uuid4().hex[:8]}"
    version = register_unnamed(registry, credit_demo.fair, name)
    model_id = model_version(registry, name, version).source.split("/")[-1]
    population = population_file(credit_demo.population, tmp_path, None)
    model = {"uri": f"models:/{name}@candidate", "population_uri": str(population)}
    config = write_server_config(tmp_path, registry.tracking_uri, model)

    code, summary, err = watch_json(capsys, config)
    assert code == 2 and summary["errors"] == 1 and summary["failed_before"] == 0, err
    assert "records no input names" in err
    failure = Failure.from_tag(version_tags(registry, name, version)[FAILURE_TAG])
    assert failure is not None and "records no input names" in failure.error
    reads = artifact_reads(mlflow_server.log, model_id)
    assert reads > 0

    # later polls skip it without downloading the model
    for _ in range(2):
        code, summary, err = watch_json(capsys, config)
        assert code == 0 and summary["failed_before"] == 1 and summary["errors"] == 0, err
        assert f"skipped: models:/{name}/{version} failed before" in err
        assert "records no input names" in err and f"remove its tag {FAILURE_TAG}" in err
    assert ("0 error(s), 0 skipped (audited elsewhere), 1 skipped (failed before), "
            "0 failed poll(s)") in err
    time.sleep(1.0)  # the server's access log is written as it serves
    assert artifact_reads(mlflow_server.log, model_id) == reads

    # asked to retry: audited again (and fails again, recorded by this watcher)
    code, summary, err = watch_json(capsys, config, "--retry-failed")
    assert code == 2 and summary["errors"] == 1 and summary["failed_before"] == 0, err
    again = Failure.from_tag(version_tags(registry, name, version)[FAILURE_TAG])
    assert again is not None and again.by != failure.by
    assert again.fingerprint == failure.fingerprint

    # the tag removed: due again
    registry.client.delete_model_version_tag(name, version, FAILURE_TAG)
    code, summary, err = watch_json(capsys, config)
    assert code == 2 and summary["errors"] == 1, err

    # the configuration fixed (input names given): another fingerprint, audited and passed
    fixed = write_server_config(tmp_path, registry.tracking_uri,
                                {**model, "input_names": list(credit_demo.population.columns)})
    code, summary, err = watch_json(capsys, fixed)
    assert code == 0 and summary["passed"] == 1 and summary["failed_before"] == 0, err
    tags = version_tags(registry, name, version)
    assert tags[STATUS_TAG] == "audited" and FAILURE_TAG not in tags


def test_an_unreachable_dask_scheduler_is_not_recorded_as_the_versions_failure(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A scheduler that cannot be reached now may be up at the next poll: the audit fails
    (exit 2, the address named) but the version carries no failure record, so the next poll
    audits it again."""
    import dask

    name = f"nosched_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name)
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                          executor=f"dask=tcp://127.0.0.1:{free_port()}")
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        for _ in range(2):
            code, summary, err = watch_json(capsys, config)
            assert code == 2 and summary["errors"] == 1 and summary["failed_before"] == 0, err
            assert "cannot reach the Dask scheduler" in err
            assert FAILURE_TAG not in version_tags(registry, name, version)
