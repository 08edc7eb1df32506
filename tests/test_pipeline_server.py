"""The pipeline end to end against a real ``mlflow server``, through the ``certgate`` CLI.

register → audit → gate: a proven pass promotes (alias moved, tags, artifacts readable);
a proven violation and an undecided audit leave every alias where it was; a second audit
of the same version reuses the recorded run; bad input (a population model that does not
fit, great-expectations failures, a missing model, an unreachable server) is one line on
stderr, exit code 2, and nothing is written. A webhook delivered by the server itself
triggers the audit; a forged one is rejected.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pytest
import requests
import torch
import yaml
from mlflow_server import DEFAULT_AUDIT, run_cli, write_server_config

from configs.schema import load_config
from pipeline_steps.cli.pipeline_cmd import _dispatcher
from registry_hooks.certgate_model import log_model
from registry_hooks.connection import Registry, connect
from registry_hooks.receiver import WebhookReceiver
from registry_hooks.tags import (
    STATUS_AUDITED,
    STATUS_TAG,
    alias_version,
    set_version_tags,
    version_tags,
)
from verifier.certificate import Certificate

pytest_plugins = ["mlflow_server"]


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    return connect(mlflow_server.url)


def register(registry: Registry, model: torch.nn.Module, population: Any, name: str,
             alias: str | None = "candidate") -> str:
    info = log_model(model, population, registered_model_name=name,
                                     serialization_format="pickle", alias=alias,
                                     registry=registry)
    return str(info.registered_model_version)


def write_config(tmp_path: Path, tracking_uri: str, model_uri: str, *,
                 audit: dict[str, Any] | None = None, **sections: Any) -> Path:
    return write_server_config(tmp_path, tracking_uri, {"uri": model_uri},
                               [{**DEFAULT_AUDIT, **(audit or {})}], **sections)


def last_json(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])


def runs_in(registry: Registry, config: Path) -> int:
    experiment = registry.client.get_experiment_by_name(
        load_config(config).tracking.experiment)
    if experiment is None:
        return 0
    return len(registry.client.search_runs([experiment.experiment_id]))


def monte_carlo_ratio(model: torch.nn.Module, population: Any, n: int = 200_000
                      ) -> tuple[float, float]:
    """Dense Monte Carlo estimate of P[fav | sex=0] / P[fav | sex=1] and its standard error
    (delta method)."""
    x = population.sample(n, np.random.default_rng(11))
    with torch.no_grad():
        favourable = model(torch.as_tensor(x, dtype=torch.float32)).argmax(1).numpy() == 1
    group = x[:, 3] == 1
    p0, p1 = favourable[~group].mean(), favourable[group].mean()
    n0, n1 = (~group).sum(), group.sum()
    ratio = p0 / p1
    se = ratio * np.sqrt((1 - p0) / (n0 * p0) + (1 - p1) / (n1 * p1))
    return float(ratio), float(se)


def test_proven_pass_is_promoted_with_tags_and_artifacts(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"pass_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name)
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                          gate={"mlflow_validation": True})
    code, out, _ = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json",
                           "--report-dir", str(tmp_path / "reports"))
    assert code == 0, out
    summary = last_json(out)
    assert summary["gate"]["outcome"] == "passed"
    assert summary["gate"]["mlflow_validation"] == "passed"
    audit = summary["audit"]["audits"]["demographic_parity"]
    assert audit["verdict"] == "satisfied"
    low, high = audit["ratio"]
    assert 0.8 < low <= high
    ratio, se = monte_carlo_ratio(credit_demo.fair, credit_demo.population)
    assert low - 4 * se <= ratio <= high + 4 * se

    assert alias_version(registry, name, "champion") == version
    assert alias_version(registry, name, "candidate") == version
    tags = version_tags(registry, name, version)
    assert tags["certgate.gate"] == "passed"
    assert tags["certgate.demographic_parity.verdict"] == "satisfied"
    assert float(tags["certgate.demographic_parity.ratio_lower"]) == low
    assert tags["certgate.audit.status"] == "audited"
    run_id = tags["certgate.audit.run_id"]

    certificate = Certificate.from_dict(mlflow.artifacts.load_dict(
        f"runs:/{run_id}/certificates/demographic_parity.json"))
    assert certificate.verdict == "satisfied" and certificate.bounds["value"] == (low, high)
    html = mlflow.artifacts.load_text(f"runs:/{run_id}/report/report.html")
    assert '<table class="verdicts">' in html and "data:image/png;base64," in html
    assert not any(marker in html for marker in ('src="http', 'href="http', "<script",
                                                 "<link"))
    validation = mlflow.artifacts.load_dict(f"runs:/{run_id}/validation/results.json")
    assert validation["data_validation"] and all(r["success"]
                                                 for r in validation["data_validation"])
    assert any("one-hot group" in check["check"] for check in validation["domain_checks"])
    png = registry.client.list_artifacts(run_id, "report")
    assert "report/demographic_parity_convergence.png" in {item.path for item in png}
    history = registry.client.get_metric_history(run_id,
                                                 "demographic_parity.anytime.ratio_lower")
    assert len(history) > 1 and [m.step for m in history] == sorted(m.step for m in history)
    assert registry.client.get_run(run_id).data.metrics["demographic_parity.proven_pass"] == 1.0
    assert len(list((tmp_path / "reports").glob("report-*.html"))) == 1


def test_proven_violation_and_undecided_leave_aliases_alone(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"hold_{uuid.uuid4().hex[:8]}"
    champion = register(registry, credit_demo.fair, credit_demo.population, name, "champion")
    biased = register(registry, credit_demo.biased, credit_demo.population, name)
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate")
    code, out, _ = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code == 1
    summary = last_json(out)
    assert summary["audit"]["audits"]["demographic_parity"]["verdict"] == "violated"
    assert summary["gate"]["checks"]["demographic_parity"]["status"] == "proven_fail"
    tags = version_tags(registry, name, biased)
    assert tags["certgate.gate"] == "failed"
    assert "proven to violate ratio > 0.8" in tags["certgate.gate.reasons"]
    assert (alias_version(registry, name, "champion"), alias_version(registry, name,
            "candidate")) == (champion, biased)

    undecided = register(registry, credit_demo.fair, credit_demo.population, name)
    strict = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                          audit={"gamma": 0.999, "timeout_s": 0.5})
    code, out, _ = run_cli(capsys, "run", "--config", str(strict), "--no-progress", "--json")
    assert code == 1
    assert last_json(out)["audit"]["audits"]["demographic_parity"]["verdict"] == "unknown"
    assert version_tags(registry, name, undecided)["certgate.gate"] == "failed"
    lenient = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                           audit={"gamma": 0.999, "timeout_s": 0.5},
                           gate={"undecided": "warn"})
    code, out, _ = run_cli(capsys, "gate", "--config", str(lenient))
    assert code == 0 and "gate: warned" in out
    assert version_tags(registry, name, undecided)["certgate.gate"] == "warned"
    assert (alias_version(registry, name, "champion"), alias_version(registry, name,
            "candidate")) == (champion, undecided)


def test_auditing_twice_reuses_the_recorded_run_unless_forced(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"twice_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.biased, credit_demo.population, name)
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}/{version}")
    code, out, _ = run_cli(capsys, "audit", "--config", str(config), "--no-progress", "--json")
    assert code == 0
    first = last_json(out)
    tags_before = version_tags(registry, name, version)
    code, out, err = run_cli(capsys, "audit", "--config", str(config), "--no-progress",
                             "--json")
    again = last_json(out)
    assert code == 0 and again["reused"] and again["run_id"] == first["run_id"]
    assert "already audited with this configuration" in err  # --json: human text on stderr
    assert runs_in(registry, config) == 1
    assert version_tags(registry, name, version) == tags_before
    code, out, _ = run_cli(capsys, "gate", "--config", str(config), "--json")
    assert code == 1 and last_json(out)["outcome"] == "failed"
    code, out, _ = run_cli(capsys, "audit", "--config", str(config), "--no-progress",
                           "--json", "--force")
    assert code == 0 and last_json(out)["run_id"] != first["run_id"]
    assert runs_in(registry, config) == 2


def test_a_deleted_audit_run_is_no_record(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A deleted audit run (its artifacts go with the next ``mlflow gc``) is no record: the
    gate refuses it, saying so, and ``run`` audits the version again. The gate read the
    deleted run's certificates and promoted on them; once the run was collected, every
    ``run`` and ``gate`` of the version stopped at "run not found" and no audit could be
    recorded without ``--force``."""
    name = f"deleted_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name)
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}/{version}")
    code, out, _ = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code == 0, out
    first = last_json(out)["audit"]["run_id"]
    registry.client.delete_run(first)
    registry.client.delete_registered_model_alias(name, "champion")

    code, out, err = run_cli(capsys, "gate", "--config", str(config), "--json")
    assert code == 2 and f"the audit run {first} of models:/{name}/{version} was deleted" \
        in one_line_error(err)
    assert "error" in json.loads(out) and alias_version(registry, name, "champion") is None

    code, out, _ = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    summary = last_json(out)
    assert code == 0 and not summary["audit"]["reused"], out
    second = summary["audit"]["run_id"]
    assert second != first and version_tags(registry, name, version)[
        "certgate.audit.run_id"] == second
    low, high = summary["audit"]["audits"]["demographic_parity"]["ratio"]
    certificate = Certificate.from_dict(mlflow.artifacts.load_dict(
        f"runs:/{second}/certificates/demographic_parity.json"))
    assert certificate.bounds["value"] == (low, high) and low > 0.8
    assert alias_version(registry, name, "champion") == version

    set_version_tags(registry, name, version, {"certgate.audit.run_id": "0" * 32})
    code, out, err = run_cli(capsys, "gate", "--config", str(config), "--json")
    assert code == 2 and "was deleted" in one_line_error(err)
    code, out, _ = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code == 0 and not last_json(out)["audit"]["reused"], out


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("certgate: error: ")
    return lines[0]


def test_bad_input_is_one_line_and_writes_nothing(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], unreachable_tracking_uri: str) -> None:
    name = f"bad_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name)
    uri = f"models:/{name}/{version}"
    from verifier.population import dumps_population

    renamed = tmp_path / "renamed.json"
    renamed.write_text(dumps_population(credit_demo.population).replace('"income"', '"salary"'))
    wrong_population = write_config(tmp_path, registry.tracking_uri, uri)
    document = yaml.safe_load(wrong_population.read_text())
    document["model"]["population_uri"] = str(renamed)
    wrong_population.write_text(yaml.safe_dump(document))
    code, _, err = run_cli(capsys, "run", "--config", str(wrong_population), "--no-progress")
    assert code == 2
    assert ("population model's columns (age, salary, debt_ratio, sex, housing_own, "
            "housing_rent) are not the model's inputs") in one_line_error(err)
    assert runs_in(registry, wrong_population) == 0

    data = tmp_path / "applicants.csv"
    rows = credit_demo.population.sample(50, 5)
    rows[[3, 17, 30], 0] = 150.0
    rows[8, 3] = 2.0
    header = ",".join(credit_demo.population.columns)
    np.savetxt(data, rows, delimiter=",", header=header, comments="")
    bad_data = write_config(tmp_path, registry.tracking_uri, uri,
                            validation={"population_samples": 200, "audit_data": str(data)})
    code, _, err = run_cli(capsys, "audit", "--config", str(bad_data), "--no-progress")
    assert code == 2
    message = one_line_error(err)
    assert "audit_data: expect_column_values_to_be_between(age) failed on 3 of 50 rows" \
        in message
    assert "expect_column_values_to_be_in_set(sex) failed on 1 of 50 rows" in message
    assert runs_in(registry, bad_data) == 0

    missing = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@nonexistent")
    code, _, err = run_cli(capsys, "run", "--config", str(missing))
    assert code == 2 and f"models:/{name}@nonexistent not found" in one_line_error(err)
    down = write_config(tmp_path, unreachable_tracking_uri, uri)
    code, _, err = run_cli(capsys, "run", "--config", str(down))
    assert code == 2 and unreachable_tracking_uri in one_line_error(err)
    deploying = write_config(tmp_path, registry.tracking_uri, uri, deploy={
        "constraints": str(tmp_path / "constraints.yaml"), "registered_model": "safe"})
    code, _, err = run_cli(capsys, "run", "--config", str(deploying))
    assert code == 2 and "constraints file not found" in one_line_error(err)
    assert runs_in(registry, deploying) == 0
    code, _, err = run_cli(capsys, "gate", "--config", str(missing.with_name("absent.yaml")))
    assert code == 2 and "config file not found" in one_line_error(err)

    typo = write_config(tmp_path, registry.tracking_uri, uri, audit={"protected": "gender"})
    code, _, err = run_cli(capsys, "run", "--config", str(typo))
    message = one_line_error(err)
    assert code == 2 and "audit 'demographic_parity': 'gender' is not an input" in message
    assert "sex" in message and runs_in(registry, typo) == 0

    assert version_tags(registry, name, version) == {}
    assert alias_version(registry, name, "champion") is None


def test_an_audit_failing_midway_puts_the_status_tag_back(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"midway_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.fair, credit_demo.population, name)
    uri = f"models:/{name}/{version}"
    set_version_tags(registry, name, version, {STATUS_TAG: STATUS_AUDITED})
    no_mass = write_config(tmp_path, registry.tracking_uri, uri, audit={"privileged": 7})
    code, _, err = run_cli(capsys, "audit", "--config", str(no_mass), "--no-progress")
    assert code == 2 and "probability 0" in one_line_error(err)
    assert version_tags(registry, name, version) == {STATUS_TAG: STATUS_AUDITED}
    assert runs_in(registry, no_mass) == 0


def wait_for(condition, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError("condition not reached in time")


def test_webhook_from_the_server_triggers_the_audit(
        registry: Registry, credit_demo, tmp_path: Path) -> None:
    name = f"hooked_{uuid.uuid4().hex[:8]}"
    secret = uuid.uuid4().hex
    config = load_config(write_config(tmp_path, registry.tracking_uri,
                                      f"models:/{name}@candidate"))
    dispatcher = _dispatcher(config, registry, "candidate", background=True)
    receiver = WebhookReceiver(dispatcher, secret, quiet=True).start()
    webhook = registry.client.create_webhook(
        name=name, url=receiver.url, events=["model_version_alias.created"], secret=secret)
    try:
        assert registry.client.test_webhook(webhook.webhook_id).response_status == 200
        other = f"other_{uuid.uuid4().hex[:8]}"
        other_version = register(registry, credit_demo.fair, credit_demo.population, other)
        version = register(registry, credit_demo.fair, credit_demo.population, name)
        wait_for(lambda: dispatcher.handled or dispatcher.failed)
        assert not dispatcher.failed, dispatcher.failed
        assert [(e.name, e.version, e.alias) for e in dispatcher.handled] == \
            [(name, version, "candidate")]
        assert "certgate.audit.status" not in version_tags(registry, other, other_version)
        tags = version_tags(registry, name, version)
        assert tags["certgate.gate"] == "passed"
        assert alias_version(registry, name, "champion") == version

        body = json.dumps({"entity": "model_version_alias", "action": "created",
                           "data": {"name": name, "alias": "candidate",
                                    "version": "99"}}).encode()
        forged = requests.post(receiver.url, data=body, timeout=5, headers={
            "X-MLflow-Delivery-Id": "x", "X-MLflow-Timestamp": str(int(time.time())),
            "X-MLflow-Signature": "v1,Zm9yZ2Vk"})
        assert forged.status_code == 401
        registry.client.set_registered_model_alias(name, "candidate", version)
        time.sleep(2.0)
        dispatcher.drain()
        assert len(dispatcher.handled) == 1
        assert version_tags(registry, name, version) == tags
    finally:
        registry.client.delete_webhook(webhook.webhook_id)
        receiver.stop()


def test_hooks_watch_once_audits_each_new_version_once(
        registry: Registry, credit_demo, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"watch_{uuid.uuid4().hex[:8]}"
    version = register(registry, credit_demo.biased, credit_demo.population, name, alias=None)
    config = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate")
    code, out, _ = run_cli(capsys, "hooks", "watch", "--config", str(config), "--once")
    assert code == 1, out
    assert f"event model_version.created: models:/{name}/{version}" in out
    assert "1 version(s) handled: 0 passed, 0 warned, 1 failed the gate; 0 error(s)" in out
    assert version_tags(registry, name, version)["certgate.gate"] == "failed"
    code, out, _ = run_cli(capsys, "hooks", "watch", "--config", str(config), "--once")
    assert code == 0 and "0 version(s) handled" in out
    assert runs_in(registry, config) == 1

    # Another configuration (a changed audit setting): the version is due again under it, as
    # with --alias and as the dispatcher judges it; the poll listed only versions never
    # audited, so a tightened configuration never reached an audited version.
    changed = write_config(tmp_path, registry.tracking_uri, f"models:/{name}@candidate",
                           audit={"timeout_s": 59})
    code, out, _ = run_cli(capsys, "hooks", "watch", "--config", str(changed), "--once")
    assert code == 1 and "1 version(s) handled: 0 passed, 0 warned, 1 failed the gate" in out, out
    assert runs_in(registry, changed) == 1
    assert version_tags(registry, name, version)["certgate.audit.config_hash"] == \
        load_config(changed).audit_fingerprint()
    code, out, _ = run_cli(capsys, "hooks", "watch", "--config", str(changed), "--once")
    assert code == 0 and "0 version(s) handled" in out
