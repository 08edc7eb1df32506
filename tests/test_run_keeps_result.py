"""A run keeps its result when what surrounds it fails, against a real ``mlflow server``.

- stdout's reader gone before the audit ends (``certgate run … | head -1``): MLflow writes
  its "View run" line to stdout when the audit run ends, and that write's broken pipe
  undid the whole audit (tags reset, no gate). The run now completes with its output
  silenced and exits with the gate's code.
- a ``--report-dir`` that cannot be written (a read-only file system, a full disk): the
  local copy of the HTML report failed after the audit run was logged, the audit was undone
  and the command ended with exit 3. The copy is now said not written and the run goes on.
- a population model shipped with a registered version that is not a valid population
  file is named as that version's artifact (the error named a deleted scratch directory,
  or nothing at all).
- a registry that fails a version's lookup (HTTP 500) is no longer reported as "not found".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Event, Thread

import pytest
import yaml
from mlflow_server import DEFAULT_AUDIT, run_cli, write_server_config
from test_pipeline_server import register

from pipeline_steps.cli.config_cmd import load_config
from registry_hooks.connection import Registry, RegistryError, connect
from registry_hooks.tags import (
    GATE_TAG,
    RUN_ID_TAG,
    STATUS_AUDITED,
    STATUS_TAG,
    alias_version,
)
from registry_hooks.uris import parse_model_uri, resolve_version
from verifier.certificate import Certificate

pytest_plugins = ["mlflow_server"]

ROOT = Path(__file__).resolve().parent.parent


def _registered(mlflow_server, credit_demo, prefix: str) -> tuple[Registry, str, str]:
    """The server's registry, and a new model ``PREFIX_<random>`` holding the credit demo's
    fair network and its population as version 1."""
    registry = connect(mlflow_server.url)
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    return registry, name, register(registry, credit_demo.fair, credit_demo.population, name)


def _config(tmp_path: Path, url: str, name: str, version: str) -> Path:
    return write_server_config(tmp_path, url, {"uri": f"models:/{name}/{version}"},
                               [dict(DEFAULT_AUDIT)], gate={"promote_alias": "champion"})


def test_a_run_whose_stdout_reader_is_gone_still_audits_and_gates(
        mlflow_server, credit_demo, tmp_path: Path) -> None:
    registry, name, version = _registered(mlflow_server, credit_demo, "reader")
    config = _config(tmp_path, mlflow_server.url, name, version)
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline_steps", "run", "--config", str(config),
         "--no-progress"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert process.stdout is not None
    process.stdout.close()  # the reader is gone before the run prints anything
    _, err = process.communicate(timeout=300)
    tags = registry.client.get_model_version(name, version).tags
    assert tags.get(STATUS_TAG) == STATUS_AUDITED, err.decode()[-2000:]
    assert tags.get(GATE_TAG) == "passed"
    assert alias_version(registry, name, "champion") == version
    assert process.returncode == 0, err.decode()[-2000:]


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_a_report_dir_that_cannot_be_written_costs_the_run_nothing(
        mlflow_server, credit_demo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        where: str) -> None:
    registry, name, version = _registered(mlflow_server, credit_demo, "report")
    config = _config(tmp_path, mlflow_server.url, name, version)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the report directory should be")
    report_dir = blocked if where == "a file" else blocked / "reports"
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress",
                             "--json", "--report-dir", str(report_dir))
    document = json.loads(out)
    assert code == 0, document
    assert document["gate"]["outcome"] == "passed"
    assert document["audit"]["local_report"] is None
    assert f"cannot write a local copy of the report in {report_dir}" in (
        document["audit"]["local_report_error"])
    assert "cannot write a local copy of the report" in err
    tags = registry.client.get_model_version(name, version).tags
    assert tags.get(STATUS_TAG) == STATUS_AUDITED and tags.get(GATE_TAG) == "passed"
    assert alias_version(registry, name, "champion") == version


def _shipped_population_file(mlflow_server, registry, name: str, version: str) -> Path:
    """The server-side file of a registered version's shipped population model."""
    source = registry.client.get_model_version(name, version).source
    model_id = source.removeprefix("models:/")
    found = list((mlflow_server.root / "artifacts").glob(
        f"*/models/{model_id}/artifacts/extra_files/population_model.json"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("content", [
    '{"format": "certgate.population/v1", "columns": 5}',
    '{"format": "certgate.population/v1", "columns": [',
])
def test_a_broken_shipped_population_names_the_version(
        mlflow_server, credit_demo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        content: str) -> None:
    registry, name, version = _registered(mlflow_server, credit_demo, "brokenpop")
    _shipped_population_file(mlflow_server, registry, name, version).write_text(content)
    config = _config(tmp_path, mlflow_server.url, name, version)
    code, out, _ = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    error = json.loads(out)["error"]
    assert code == 2
    assert error.startswith(f"the population model shipped with models:/{name}/{version} "
                            "(extra_files/population_model.json) cannot be read: "), error
    assert "certgate-audit-" not in error  # no scratch directory the user cannot open
    assert registry.client.get_model_version(name, version).tags.get(STATUS_TAG) is None


def test_a_lookup_the_server_fails_is_not_reported_as_not_found(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Failing(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            healthy = self.path == "/health"
            body = b"OK" if healthy else b'{"error_code": "INTERNAL_ERROR"}'
            self.send_response(200 if healthy else 500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    try:
        registry = connect(url)
        with pytest.raises(RegistryError) as caught:
            resolve_version(registry, parse_model_uri("models:/credit/3"))
    finally:
        server.shutdown()
    message = str(caught.value)
    assert "not found" not in message, message
    assert message.startswith(f"cannot read models:/credit/3 from the registry at {url}: ")


class _FailingProxy(BaseHTTPRequestHandler):
    """Forwards every request to the real server (``target``) except those whose method and
    path contain ``refused``, which get HTTP 500."""

    target = ""
    refused = ""

    def _forward(self) -> None:
        import requests

        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.refused in f"{self.command} {self.path}":
            answer, status, kind = b'{"error_code": "INTERNAL_ERROR"}', 500, "application/json"
        else:
            reply = requests.request(self.command, self.target + self.path, data=body,
                                     headers={key: value for key, value in self.headers.items()
                                              if key.lower() != "host"}, timeout=60)
            answer, status = reply.content, reply.status_code
            kind = reply.headers.get("Content-Type", "application/json")
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _forward

    def log_message(self, format: str, *args: object) -> None:
        return


def test_an_alias_move_the_server_refuses_says_the_gate_passed_and_how_to_finish(
        mlflow_server, credit_demo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    registry, name, version = _registered(mlflow_server, credit_demo, "alias500")
    handler = type("Refusing", (_FailingProxy,), {
        "target": mlflow_server.url, "refused": "POST /api/2.0/mlflow/registered-models/alias"})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    Thread(target=proxy.serve_forever, daemon=True).start()
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    try:
        config = _config(tmp_path, f"http://127.0.0.1:{proxy.server_address[1]}", name,
                         version)
        code, out, _ = run_cli(capsys, "run", "--config", str(config), "--no-progress",
                               "--json")
    finally:
        proxy.shutdown()
    error = json.loads(out)["error"]
    assert code == 2
    assert error.startswith(f"the gate passed models:/{name}/{version} (recorded: "
                            "certgate.gate=passed) but cannot set alias 'champion'"), error
    assert error.endswith(f"`certgate gate --config CONFIG --model-uri models:/{name}/"
                          f"{version}` moves the alias once the registry answers"), error
    registry = connect(mlflow_server.url)
    assert registry.client.get_model_version(name, version).tags.get(GATE_TAG) == "passed"
    assert alias_version(registry, name, "champion") is None
    direct = tmp_path / "direct.yaml"
    document = yaml.safe_load(config.read_text())
    document["tracking"]["tracking_uri"] = mlflow_server.url
    direct.write_text(yaml.safe_dump(document))
    code, out, _ = run_cli(capsys, "gate", "--config", str(direct), "--model-uri",
                           f"models:/{name}/{version}", "--json")
    assert code == 0, out
    assert alias_version(registry, name, "champion") == version


def _refusing_proxy(target: str, refused: str) -> ThreadingHTTPServer:
    handler = type("Refusing", (_FailingProxy,), {"target": target, "refused": refused})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    Thread(target=proxy.serve_forever, daemon=True).start()
    return proxy


def test_an_artifact_upload_the_server_refuses_keeps_the_audits_bounds(
        mlflow_server, credit_demo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit finished, its run's artifacts could not be uploaded (HTTP 500): exit 2,
    nothing promoted, and the certified bounds in the output and in a local certificate file
    (they were in neither, so the whole audit had to run again)."""
    registry, name, version = _registered(mlflow_server, credit_demo, "upload500")
    proxy = _refusing_proxy(mlflow_server.url, "/artifacts/certificates/")  # the upload
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    reports = tmp_path / "reports"
    try:
        config = _config(tmp_path, f"http://127.0.0.1:{proxy.server_address[1]}", name,
                         version)
        [settings] = load_config(config).audits
        requirement = settings.requirement
        code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress",
                                 "--report-dir", str(reports))
        assert code == 2, err
        kept = list(reports.glob("certificate-*.json"))
        assert len(kept) == 1, (out, err)
        certificate = Certificate.from_dict(json.loads(kept[0].read_text()))
        low, high = certificate.bounds[requirement.quantity]
        assert f"∈ [{low:.6g}, {high:.6g}]" in out, out
        assert f"{certificate.verdict}, certified" in out, out
        assert str(kept[0]) in out, out
        assert "not recorded" in err, err
        code, out, _ = run_cli(capsys, "run", "--config", str(config), "--no-progress",
                               "--json")
        audit_code, audit_out, _ = run_cli(capsys, "audit", "--config", str(config),
                                           "--no-progress", "--json")
    finally:
        proxy.shutdown()
    audited = json.loads(audit_out)  # `certgate audit`: the audit summary with the error
    assert audit_code == 2 and audited["exit_code"] == 2, audited
    kept_by_audit = Certificate.from_dict(json.loads(
        Path(audited["local_certificates"][settings.name]).read_text()))
    assert audited["audits"][settings.name][requirement.label] == list(
        kept_by_audit.bounds[requirement.quantity])
    document = json.loads(out)  # one object
    assert code == 2 and document["exit_code"] == 2, document
    assert document["error"].startswith("cannot log the audit run to "), document["error"]
    assert document["gate"] is None, document
    result = document["audit"]
    assert result["run_id"] is None and result["recording_error"] == document["error"]
    summary = result["audits"][settings.name]
    path = Path(result["local_certificates"][settings.name])
    assert path.is_file() and str(path) in document["error"]
    certificate = Certificate.from_dict(json.loads(path.read_text()))
    assert summary[requirement.label] == list(certificate.bounds[requirement.quantity])
    assert summary["verdict"] == certificate.verdict
    registry = connect(mlflow_server.url)
    tags = registry.client.get_model_version(name, version).tags
    assert tags.get(STATUS_TAG) is None and tags.get(GATE_TAG) is None, tags
    assert alias_version(registry, name, "champion") is None


class _HoldingProxy(_FailingProxy):
    """Forwards every request; the first whose method and path contain ``held`` waits until
    ``release`` is set (``reached`` says it arrived)."""

    held = ""
    reached: Event
    release: Event

    def _forward(self) -> None:
        if self.held in f"{self.command} {self.path}" and not self.release.is_set():
            self.reached.set()
            self.release.wait(timeout=240)
        super()._forward()

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _forward


def test_a_run_reuses_an_audit_recorded_while_it_downloaded_the_model(
        mlflow_server, credit_demo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run that found no audit to reuse, then downloaded the model while another process
    (a ``hooks watch``) recorded the version's audit, reuses that audit instead of auditing
    again (it looked only before the download and claimed the version after)."""
    registry, name, version = _registered(mlflow_server, credit_demo, "overlap")
    handler = type("Holding", (_HoldingProxy,), {
        "target": mlflow_server.url, "refused": "\x00nothing",
        "held": "GET /api/2.0/mlflow-artifacts/artifacts/", "reached": Event(),
        "release": Event()})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    Thread(target=proxy.serve_forever, daemon=True).start()
    config = _config(tmp_path, mlflow_server.url, name, version)
    through_proxy = tmp_path / "through_proxy.yaml"
    document = yaml.safe_load(config.read_text())
    document["tracking"]["tracking_uri"] = f"http://127.0.0.1:{proxy.server_address[1]}"
    through_proxy.write_text(yaml.safe_dump(document))
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "pipeline_steps", "run", "--config", str(through_proxy),
             "--no-progress"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert handler.reached.wait(timeout=240), "the run never downloaded the model"
        code, _, err = run_cli(capsys, "audit", "--config", str(config), "--no-progress")
        assert code == 0, err
        recorded = registry.client.get_model_version(name, version).tags[RUN_ID_TAG]
        handler.release.set()
        out, err = process.communicate(timeout=300)
    finally:
        handler.release.set()
        proxy.shutdown()
    assert process.returncode == 0, err[-2000:]
    assert f"already audited with this configuration in run {recorded}" in out, out
    tags = registry.client.get_model_version(name, version).tags
    assert tags[RUN_ID_TAG] == recorded and tags.get(GATE_TAG) == "passed"
    assert alias_version(registry, name, "champion") == version
    runs = registry.client.search_runs(
        [registry.client.get_experiment_by_name(document["tracking"]["experiment"])
         .experiment_id])
    assert [run.info.run_id for run in runs] == [recorded]
