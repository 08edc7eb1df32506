"""``certgate hooks`` against a real ``mlflow server`` (127.0.0.1, sqlite): audit leases, deleted
audit runs and what a watch reports.

* A version left ``running`` by a crashed audit was skipped by ``hooks`` until someone removed
  the tag. The running tag now carries a lease (owner, start, expiry = budget + grace): an
  expired one is taken over and said so, a live one is never doubled (``hooks`` leave it,
  ``certgate run`` refuses it unless ``--force``), and a bare ``running`` of a certgate
  without leases is left with the command that resumes it.
* Two watchers started together on one version audit it once (both audited it before).
* A claim whose write lands after another claim's settle window wins too (tags have no
  compare-and-set), and both audited and recorded: a claim is now checked again before its
  results are recorded, and one that lost its lease, or whose version another audit recorded
  meanwhile, discards its results (its run deleted) and says so; the version keeps one record.
* A deleted or garbage-collected audit run makes its version due again for ``hooks watch``
  (it read tags only), with and without ``--alias``, and in a long-running watch too.
* ``hooks watch --json`` counted a failed gate as handled and exited 0; it now reports
  ``passed``, ``warned``, ``gate_failed``, ``errors``, ``skipped`` and ``poll_errors`` and
  exits as ``certgate gate`` does (1 for a failed gate, 2 for an error).
* A long-running watch outlives a server restart (its first failed poll ended it).
* ``hooks`` deploy a passed version when the configuration asks for it, as ``certgate run``.
* ``hooks serve --poll-interval`` retries an abandoned audit without a new event.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from mlflow_server import free_port, kill_server, run_cli, start_server
from test_deploy_registry import CREDIT_CONSTRAINTS
from test_pipeline_server import monte_carlo_ratio, register, runs_in, write_config

from configs.schema import load_config
from pipeline_steps.audit import audit_model
from pipeline_steps.cli.pipeline_cmd import _dispatcher, _event_callback
from registry_hooks.claims import (
    AuditInProgressError,
    Claim,
    ClaimLostError,
    abandon_claim,
    claim_version,
    lost_to,
    plan_claim,
    write_claim,
)
from registry_hooks.connection import Registry, connect
from registry_hooks.events import MODEL_VERSION_CREATED, RegistryEvent
from registry_hooks.lease import LEASE_TAG, Lease, lease_of, new_lease
from registry_hooks.stopping import StopGuard
from registry_hooks.tags import (
    RUN_ID_TAG,
    STATUS_AUDITED,
    STATUS_RUNNING,
    STATUS_TAG,
    alias_version,
    set_version_tags,
    version_tags,
)
from registry_hooks.watcher import WatchResult, poll_once, watch
from verifier.stop_request import stop_requested

pytest_plugins = ["mlflow_server"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    return connect(mlflow_server.url)


def watch_json(capsys: pytest.CaptureFixture[str], config: Path,
               *options: str) -> tuple[int, dict, str]:
    """Exit code, the JSON object, and stderr (where ``--json`` sends the human lines)."""
    code, out, err = run_cli(capsys, "hooks", "watch", "--config", str(config), "--once",
                             "--json", *options)
    return code, json.loads(out), err


def test_an_abandoned_audit_is_taken_over_a_live_one_never_doubled(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"lease_{uuid.uuid4().hex[:8]}"
    crashed, live, legacy = (register(registry, credit_demo.fair, credit_demo.population, name,
                                      alias=None) for _ in range(3))
    now = time.time()
    dead = Lease("elsewhere:4242:deadbeef", float(int(now - 4000)), float(int(now - 100)))
    held = Lease("elsewhere:4343:cafecafe", float(int(now)), float(int(now + 3600)))
    set_version_tags(registry, name, crashed, {STATUS_TAG: STATUS_RUNNING,
                                               LEASE_TAG: dead.to_tag()})
    set_version_tags(registry, name, live, {STATUS_TAG: STATUS_RUNNING,
                                            LEASE_TAG: held.to_tag()})
    set_version_tags(registry, name, legacy, {STATUS_TAG: STATUS_RUNNING})
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate")

    code, summary, err = watch_json(capsys, config)
    assert code == 0 and summary["handled"] == summary["passed"] == 1, err
    assert f"event model_version.created: models:/{name}/{crashed}" in err
    assert f"took over an abandoned audit (by {dead.owner} since" in err
    tags = version_tags(registry, name, crashed)
    assert tags[STATUS_TAG] == "audited" and LEASE_TAG not in tags
    assert version_tags(registry, name, live)[LEASE_TAG] == held.to_tag()
    assert (f"models:/{name}/{legacy} has certgate.audit.status=running without a lease"
            in err)
    assert f"certgate run --config CONFIG --model-uri models:/{name}/{legacy}" in err
    assert runs_in(registry, config) == 1

    code, _, err = run_cli(capsys, "run", "--config", str(config), "--model-uri",
                           f"models:/{name}/{live}", "--no-progress")
    assert code == 2 and f"models:/{name}/{live} is being audited by {held.owner}" in err
    code, _, err = run_cli(capsys, "gate", "--config", str(config), "--model-uri",
                           f"models:/{name}/{live}")
    assert code == 2 and f"models:/{name}/{live} is being audited by {held.owner}" in err
    assert version_tags(registry, name, live)[LEASE_TAG] == held.to_tag()
    assert runs_in(registry, config) == 1
    code, out, _ = run_cli(capsys, "run", "--config", str(config), "--model-uri",
                           f"models:/{name}/{live}", "--no-progress", "--force", "--json")
    assert code == 0 and "took over an abandoned audit" not in out
    assert f"audited although another audit held a live lease (by {held.owner}" in out

    code, out, _ = run_cli(capsys, "run", "--config", str(config), "--model-uri",
                           f"models:/{name}/{legacy}", "--no-progress")
    assert code == 0 and "took over a 'running' tag without a lease" in out
    assert version_tags(registry, name, legacy)[STATUS_TAG] == "audited"


def test_a_claim_is_won_once_and_a_failed_audit_gives_it_back(
        registry: Registry, credit_demo) -> None:
    name = f"claims_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    start = threading.Barrier(2)
    results: list[object] = []

    def claim() -> None:
        start.wait()
        try:
            results.append(claim_version(registry, name, version, 60.0))
        except AuditInProgressError as error:
            results.append(error)

    threads = [threading.Thread(target=claim) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2, results  # each claim won or was told the other won
    winners = [result for result in results if not isinstance(result, Exception)]
    assert len(winners) == 1, results
    assert lease_of(version_tags(registry, name, version)) == winners[0].lease

    # an audit that fails after taking over an abandoned claim leaves the version due again
    other = f"claims_{uuid.uuid4().hex[:8]}"
    failing = register(registry, credit_demo.fair, credit_demo.population, other, alias=None)
    dead = new_lease(1.0, now=time.time() - 4000)
    set_version_tags(registry, other, failing, {STATUS_TAG: STATUS_RUNNING,
                                                LEASE_TAG: dead.to_tag()})
    taken = claim_version(registry, other, failing, 60.0)
    assert taken.taken_over == dead and not taken.forced
    abandon_claim(registry, taken)
    assert version_tags(registry, other, failing) == {}


def test_claims_written_at_the_same_instant_end_won_or_in_progress_never_an_error(
        registry: Registry, credit_demo) -> None:
    """Two claims that write the same new tag key at once can collide in MLflow's SQL store
    (the second insert fails on the tag's unique key: an HTTP 400 to its client). Seen as a
    watcher's audit error; the read-back now decides, as for claims that do not collide:
    one wins, the other is told the version is being audited."""
    name = f"collide_{uuid.uuid4().hex[:8]}"
    versions = [register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
                for _ in range(8)]
    outcomes: dict[str, list[object]] = {version: [] for version in versions}

    def claim(version: str, start: threading.Barrier) -> None:
        start.wait()
        try:
            outcomes[version].append(claim_version(registry, name, version, 60.0,
                                                   settle_s=0.3))
        except Exception as error:  # the test lists what each claim ended with
            outcomes[version].append(error)

    for version in versions:
        start = threading.Barrier(2)
        threads = [threading.Thread(target=claim, args=(version, start)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for version, ended in outcomes.items():
        errors = [result for result in ended if isinstance(result, Exception)]
        assert all(isinstance(error, AuditInProgressError) for error in errors), ended
        winners = [result for result in ended if not isinstance(result, Exception)]
        assert len(winners) == 1, ended
        tags = version_tags(registry, name, version)
        assert lease_of(tags) == winners[0].lease and tags[STATUS_TAG] == STATUS_RUNNING


def test_two_watchers_started_together_audit_a_version_once(
        registry: Registry, credit_demo, tmp_path: Path) -> None:
    name = f"twins_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate")
    command = [sys.executable, "-m", "pipeline_steps", "hooks", "watch", "--config",
               str(config), "--once", "--json"]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    processes = [subprocess.Popen(command, cwd=ROOT, env=environment, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(2)]
    answers = [process.communicate(timeout=600) for process in processes]
    summaries = [json.loads(out.strip().splitlines()[-1]) for out, _ in answers]
    assert [process.returncode for process in processes] == [0, 0], answers
    assert sum(summary["handled"] for summary in summaries) == 1, summaries
    assert runs_in(registry, config) == 1
    tags = version_tags(registry, name, version)
    assert tags[STATUS_TAG] == "audited" and LEASE_TAG not in tags, tags


class LateClaimant(StopGuard):
    """The guard of an audit that lets another claimant's write land at one point of it: as
    its claim is won (``holding``, after its settle window: the audit certifies next) or as
    its run opens (``logged``); ``late()`` does the other claimant's work there."""

    def __init__(self, at: str, late: Callable[[], object]) -> None:
        super().__init__()
        self.at = at
        self.late = late
        self.result: object = None

    def holding(self, claim: Claim) -> None:
        super().holding(claim)
        if self.at == "holding":
            self.result = self.late()

    def logged(self, run_id: str) -> None:
        super().logged(run_id)
        if self.at == "logged":
            self.result = self.late()


def test_a_claim_written_after_the_others_settle_window_wins_too_and_is_caught(
        registry: Registry, credit_demo) -> None:
    """The race of two claims, in order: B reads the version free, A claims it (write,
    settle, read back: won), then B's write lands and B reads its own lease back: won too."""
    name = f"late_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    read_free = plan_claim(registry, name, version)
    first = claim_version(registry, name, version, 60.0, settle_s=0.2)
    second = write_claim(registry, read_free, 60.0, settle_s=0.2)
    assert first.lease != second.lease
    assert lost_to(registry, second) is None
    assert lost_to(registry, first) == f"was claimed {second.lease.describe()} while this audit ran"
    abandon_claim(registry, first)
    tags = version_tags(registry, name, version)
    assert tags[STATUS_TAG] == STATUS_RUNNING and lease_of(tags) == second.lease
    abandon_claim(registry, second)
    assert version_tags(registry, name, version) == {}


def test_an_audit_whose_claim_was_taken_while_it_ran_records_nothing(
        registry: Registry, credit_demo, tmp_path: Path) -> None:
    """B read the version free before A claimed it; B's write lands while A certifies
    (``holding``: A's first check, before any run is logged) or as A's run opens
    (``logged``: the check before the version's tags, which deletes A's run). A records
    nothing and names B; the version is B's, untouched."""
    name = f"taken_{uuid.uuid4().hex[:8]}"
    versions = [register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
                for _ in range(2)]
    config_path = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate")
    config = load_config(config_path)
    for version, at in zip(versions, ("holding", "logged"), strict=True):
        read_free = plan_claim(registry, name, version)
        guard = LateClaimant(at, lambda plan=read_free: write_claim(registry, plan, 60.0,
                                                                    settle_s=0.2))
        with pytest.raises(ClaimLostError) as lost:
            audit_model(config, model_uri=f"models:/{name}/{version}", progress=False,
                        registry=registry, guard=guard)
        late = guard.result
        assert isinstance(late, Claim)
        message = str(lost.value)
        assert f"models:/{name}/{version} was claimed {late.lease.describe()} while this audit " \
            "ran; this audit (" in message
        assert "lost its claim and discarded its results (" in message
        assert ("nothing written on the version): the version is left to the audit that "
                "claimed or recorded it") in message
        if at == "holding":
            assert "no run was logged" in message
        else:
            assert "its run " in message and " was deleted" in message
        tags = version_tags(registry, name, version)
        assert tags == {STATUS_TAG: STATUS_RUNNING, LEASE_TAG: late.lease.to_tag()}
        assert runs_in(registry, config_path) == 0


def test_a_hooks_audit_that_lost_its_claim_is_skipped_saying_so(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The event callback of ``hooks``: a lost claim is ``skipped`` (not an error, so the
    watch exits as the gate would), and stdout says what became of its audit."""
    name = f"hooked_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    config = load_config(write_config(tmp_path, registry.tracking_uri,
                                      f"models:/{name}@candidate"))
    read_free = plan_claim(registry, name, version)
    guard = LateClaimant("logged", lambda: write_claim(registry, read_free, 60.0,
                                                       settle_s=0.2))
    handle = _event_callback(config, registry, guard, set(), False)
    capsys.readouterr()
    outcome = handle(RegistryEvent(MODEL_VERSION_CREATED, name, version, None, "test"))
    late = guard.result
    assert isinstance(late, Claim)
    out = capsys.readouterr().out
    assert outcome == "skipped", out
    assert (f"skipped: models:/{name}/{version} was claimed {late.lease.describe()} while this "
            "audit ran; this audit (") in out
    assert " was deleted; nothing written on the version)" in out
    guard.finished()
    assert version_tags(registry, name, version) == {STATUS_TAG: STATUS_RUNNING,
                                                      LEASE_TAG: late.lease.to_tag()}


def test_an_audit_whose_claim_was_taken_stops_its_engine(
        registry: Registry, credit_demo, tmp_path: Path) -> None:
    """At a threshold the engine cannot decide within its 120 s (the Monte Carlo ratio), an
    audit whose claim B takes as it starts certifying stops within seconds of the watch's
    next read, and no stop request outlives it."""
    name = f"stopped_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    ratio, _ = monte_carlo_ratio(credit_demo.fair, credit_demo.population)
    config_path = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                               audit={"gamma": min(ratio, 1.0), "timeout_s": 120})
    read_free = plan_claim(registry, name, version)
    taken: list[float] = []

    def late() -> Claim:
        claim = write_claim(registry, read_free, 120.0, settle_s=0.2)
        taken.append(time.monotonic())
        return claim

    guard = LateClaimant("holding", late)
    with pytest.raises(ClaimLostError, match="no run was logged"):
        audit_model(load_config(config_path), model_uri=f"models:/{name}/{version}",
                    progress=False, registry=registry, guard=guard, watch_s=0.5)
    assert time.monotonic() - taken[0] < 30.0
    assert not stop_requested()
    assert runs_in(registry, config_path) == 0


def test_two_audits_of_a_version_overlapping_record_one(
        registry: Registry, credit_demo, tmp_path: Path) -> None:
    """Two complete audits whose claims overlap: B claims the version (``--force``, the way a
    late write lands whatever B read) while A certifies, and records; A, which had won its
    claim first, then records nothing. And a claim that won after another audit had recorded
    the version (its read before that audit's claim, its write after its tags) records
    nothing and puts the version back as that audit left it."""
    name = f"overlap_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    config_path = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate")
    config = load_config(config_path)
    uri = f"models:/{name}/{version}"
    guard = LateClaimant("holding", lambda: audit_model(config, model_uri=uri, force=True,
                                                        progress=False, registry=registry))
    with pytest.raises(ClaimLostError) as lost:
        audit_model(config, model_uri=uri, progress=False, registry=registry, guard=guard)
    recorded = version_tags(registry, name, version)
    assert "had its lease removed by another process while this audit ran" in str(lost.value)
    assert recorded[STATUS_TAG] == STATUS_AUDITED and LEASE_TAG not in recorded
    assert recorded[RUN_ID_TAG] == guard.result.run_id
    assert runs_in(registry, config_path) == 1

    other = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    read_free = plan_claim(registry, name, other)
    first = audit_model(config, model_uri=f"models:/{name}/{other}", progress=False,
                        registry=registry)
    before = version_tags(registry, name, other)
    late = write_claim(registry, read_free, 60.0, settle_s=0.2)
    assert lost_to(registry, late) == (f"was recorded by another audit (run {first.run_id}) "
                                      "while this one ran")
    abandon_claim(registry, late)
    assert version_tags(registry, name, other) == before
    assert runs_in(registry, config_path) == 2


def test_a_deleted_audit_run_makes_the_version_due_for_the_watcher(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"gone_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name)
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate")
    code, summary, _ = watch_json(capsys, config)
    assert code == 0 and summary["handled"] == 1
    first = version_tags(registry, name, version)[RUN_ID_TAG]
    code, summary, _ = watch_json(capsys, config)
    assert code == 0 and summary["handled"] == 0

    registry.client.delete_run(first)
    code, summary, err = watch_json(capsys, config)
    assert code == 0 and summary["handled"] == summary["passed"] == 1, err
    second = version_tags(registry, name, version)[RUN_ID_TAG]
    assert second != first

    registry.client.delete_run(second)
    code, summary, _ = watch_json(capsys, config, "--alias", "candidate")
    assert code == 0 and summary["handled"] == 1
    third = version_tags(registry, name, version)[RUN_ID_TAG]
    assert third != second

    # garbage-collected: the recorded id names no run at all
    set_version_tags(registry, name, version, {RUN_ID_TAG: "0" * 32})
    code, summary, _ = watch_json(capsys, config)
    assert code == 0 and summary["handled"] == 1
    fourth = version_tags(registry, name, version)[RUN_ID_TAG]

    # one long-running watch: a version it handled is due again once its run is deleted
    dispatcher = _dispatcher(load_config(config), registry, None, background=False)
    fingerprint = load_config(config).audit_fingerprint()
    assert poll_once(registry, dispatcher, [name], fingerprint) == []
    registry.client.delete_run(fourth)
    assert [event.version for event in poll_once(registry, dispatcher, [name],
                                                 fingerprint)] == [version]
    assert poll_once(registry, dispatcher, [name], fingerprint) == []
    assert dispatcher.outcomes == ["passed"]


def test_watch_json_counts_a_failed_gate_apart_and_exits_as_the_gate(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"counts_{uuid.uuid4().hex[:8]}"
    register(registry, credit_demo.biased, credit_demo.population, name, alias=None)
    register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate")
    code, summary, err = watch_json(capsys, config)
    assert code == 1 and summary == {"handled": 2, "passed": 1, "warned": 0,
                                     "gate_failed": 1, "skipped": 0, "failed_before": 0,
                                     "errors": 0, "interrupted": 0, "poll_errors": 0,
                                     "exit_code": 1}, err
    assert ("certgate hooks: 2 version(s) handled: 1 passed, 0 warned, 1 failed the gate; "
            "0 error(s), 0 skipped (audited elsewhere), 0 skipped (failed before), "
            "0 failed poll(s)") in err
    code, summary, _ = watch_json(capsys, config)
    assert code == 0 and summary["handled"] == 0 and summary["exit_code"] == 0

    broken = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                          audit={"protected": "gender"})
    code, summary, err = watch_json(capsys, broken)
    assert code == 2 and summary["errors"] == 2 and summary["handled"] == 0, err
    assert "'gender' is not an input" in err


def test_a_long_running_watch_outlives_a_server_restart(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The first poll that could not reach the server ended the watch (exit 2), so a watcher
    left running stopped for good at the server's first restart. It now says the poll failed,
    retries at the next one and audits what was registered meanwhile."""
    shared = registry
    port = free_port()
    process = start_server(tmp_path, port)
    try:
        registry = connect(f"http://127.0.0.1:{port}")
        name = f"outage_{uuid.uuid4().hex[:8]}"
        first = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
        config = load_config(write_config(tmp_path, registry.tracking_uri,
                                          f"models:/{name}@candidate"))
        dispatcher = _dispatcher(config, registry, None, background=False)
        stop = threading.Event()
        result = WatchResult()
        watcher = threading.Thread(target=watch, args=(registry, dispatcher, 1.0, [name]),
                                   kwargs={"stop": stop, "result": result,
                                           "config_hash": config.audit_fingerprint()},
                                   daemon=True)
        watcher.start()
        deadline = time.monotonic() + 300
        while [event.version for event in dispatcher.handled] != [first]:
            assert time.monotonic() < deadline and watcher.is_alive()
            time.sleep(0.5)
        kill_server(process)
        while not result.poll_errors:
            assert time.monotonic() < deadline and watcher.is_alive()
            time.sleep(0.5)
        process = start_server(tmp_path, port)
        second = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
        while [event.version for event in dispatcher.handled] != [first, second]:
            assert time.monotonic() < deadline and watcher.is_alive(), result.poll_errors
            time.sleep(0.5)
        stop.set()
        watcher.join(timeout=60)
        assert dispatcher.outcomes == ["passed", "passed"] and not dispatcher.failed
        assert "cannot reach the MLflow tracking server" in str(result.poll_errors[0])
        assert "certgate: poll failed, retrying in 1 s" in capsys.readouterr().err
    finally:
        kill_server(process)
        connect(shared.tracking_uri)  # the module's server again for MLflow's fluent calls


def test_a_watch_deploys_a_passed_version_as_certgate_run_does(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``hooks`` ran audit and gate only: a configuration's ``deploy`` section was ignored, so
    ``champion`` moved while ``safe`` kept serving an older version's variant."""
    constraints = tmp_path / "credit.yaml"
    constraints.write_text(yaml.safe_dump(CREDIT_CONSTRAINTS))
    name = f"deploys_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    target = f"{name}-safe"
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                          deploy={"constraints": str(constraints), "registered_model": target,
                                  "alias": "safe"})
    code, summary, err = watch_json(capsys, config)
    assert code == 0 and summary["passed"] == 1, err
    assert f"deploy: self-correcting variant of models:/{name}/{version} registered as " \
        f"models:/{target}/1" in err
    assert alias_version(registry, target, "safe") == "1"
    assert version_tags(registry, target, "1")["certgate.source_version"] == version

    broken = tmp_path / "missing.yaml"
    missing = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                           deploy={"constraints": str(broken), "registered_model": target})
    code, _, err = run_cli(capsys, "hooks", "watch", "--config", str(missing), "--once")
    assert code == 2 and "constraints file not found" in err


def test_hooks_serve_with_a_poll_interval_takes_over_an_abandoned_audit(
        registry: Registry, credit_demo, tmp_path: Path) -> None:
    """A webhook receiver acts on events only: an audit that crashed (its lease expired) was
    never retried without a new event. ``--poll-interval`` adds the watcher's polls."""
    name = f"served_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name, alias=None)
    dead = new_lease(1.0, now=time.time() - 4000)
    set_version_tags(registry, name, version, {STATUS_TAG: STATUS_RUNNING,
                                               LEASE_TAG: dead.to_tag()})
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate")
    server = subprocess.Popen(
        [sys.executable, "-m", "pipeline_steps", "hooks", "serve", "--config", str(config),
         "--port", str(free_port()), "--secret", uuid.uuid4().hex, "--poll-interval", "1"],
        cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while version_tags(registry, name, version).get(STATUS_TAG) != "audited":
            assert time.monotonic() < deadline and server.poll() is None, server.stderr
            time.sleep(0.5)
    finally:
        server.send_signal(signal.SIGINT)
        out, _ = server.communicate(timeout=120)
    assert f"took over an abandoned audit (by {dead.owner}" in out
    assert version_tags(registry, name, version)["certgate.gate"] == "passed"
    assert runs_in(registry, config) == 1
