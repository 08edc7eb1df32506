"""`certgate run` on the embedded local store (sqlite, no server), as a user's first pipeline
runs it: a plain ``mlflow.pytorch.log_model`` model, a default-fit population, audit, gate and
deploy. A local store answers an alias's version as an integer where a server answers a
string, and the gate compared it with the version's string: a failed gate left ``champion``
on the version it had just proven to violate (only the deploy alias, found through string
tags, was withdrawn). Oracle: the rule README states (a failed gate removes the promotion
alias from the failed version and the deploy alias from its variant), read back from the
store, and the data's exact ratio on the side of γ each verdict takes."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml

from pipeline_steps.cli import main
from registry_hooks.connection import connect
from tests.parity_on_data import data_ratio, fit_default_population
from tests.test_thin_density_cells import CUT, jobs_table, threshold_network
from verifier.population import load_population

NAME = "jobs_classifier"


def _config(folder: Path, uri: str, names: list[str], population: Path, gamma: float) -> Path:
    constraints = folder / "constraints.yaml"
    income = names.index("income")
    constraints.write_text(yaml.safe_dump({
        "classes": ["deny", "grant"], "input_size": len(names),
        "constraints": [{"name": "high_income_granted",
                         "precondition": {"kind": "box",
                                          "lower": [60.0 if i == income else None
                                                    for i in range(len(names))],
                                          "upper": [None] * len(names)},
                         "postcondition": [["deny < grant"]]}]}))
    path = folder / f"audit-{gamma}.yaml"
    path.write_text(yaml.safe_dump({
        "tracking": {"tracking_uri": uri, "experiment": "jobs-audits"},
        "model": {"uri": f"models:/{NAME}@candidate", "population_uri": str(population),
                  "input_names": names},
        "audits": [{"kind": "demographic_parity", "name": "dp", "protected": "group",
                    "privileged": 0, "favorable_class": 1, "gamma": gamma, "timeout_s": 60,
                    "precision": 0.01}],
        "gate": {"undecided": "fail", "promote_alias": "champion"},
        "deploy": {"constraints": str(constraints), "alias": "safe", "on_bottom": "mark"},
    }))
    return path


def _run(capsys: pytest.CaptureFixture[str], config: Path) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["run", "--config", str(config), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_failed_gate_withdraws_champion_in_a_local_store(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = jobs_table(200)
    _, population = fit_default_population(frame, tmp_path, "group")
    names = list(load_population(population).columns)
    network = threshold_network(names)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    registry = connect(uri)
    encoded = pd.get_dummies(frame, columns=["job"], prefix_sep="=")[names]
    example = encoded.to_numpy(dtype=np.float32)[:5]
    with mlflow.start_run():
        info = mlflow.pytorch.log_model(network, name="model", input_example=example,
                                        registered_model_name=NAME)
    version = str(info.registered_model_version)
    registry.client.set_registered_model_alias(NAME, "candidate", version)
    group = frame["group"] == 1
    exact = data_ratio(frame["income"] > frame["job"].map(CUT), group, ~group)
    assert 0.30 < exact < 0.45

    code, passed = _run(capsys, _config(tmp_path, uri, names, population, 0.30))
    assert code == 0 and passed["gate"]["outcome"] == "passed", passed
    aliases = registry.client.get_registered_model(NAME).aliases
    assert str(aliases["champion"]) == version and str(aliases["safe"]) != version

    code, failed = _run(capsys, _config(tmp_path, uri, names, population, 0.45))
    assert code == 1 and failed["gate"]["checks"]["dp"]["status"] == "proven_fail", failed
    aliases = registry.client.get_registered_model(NAME).aliases
    assert "champion" not in aliases and "safe" not in aliases, aliases
    assert str(aliases["candidate"]) == version
    withdrawn = failed["gate"]["withdrawn_aliases"]
    assert any(text.startswith("'champion' removed") for text in withdrawn), withdrawn
    assert any(text.startswith("'safe' removed") for text in withdrawn), withdrawn
    tags = registry.client.get_model_version(NAME, version).tags
    assert tags["certgate.gate.withdrawn_aliases"] == "; ".join(withdrawn)

    # The pass again: the aliases come back, and the version's tags no longer say that its
    # latest gate removed them (the failed gate's tag stayed beside certgate.gate=passed).
    code, again = _run(capsys, _config(tmp_path, uri, names, population, 0.30))
    assert code == 0 and again["gate"]["withdrawn_aliases"] == [], again
    aliases = registry.client.get_registered_model(NAME).aliases
    assert str(aliases["champion"]) == version and "safe" in aliases, aliases
    tags = registry.client.get_model_version(NAME, version).tags
    assert tags["certgate.gate"] == "passed"
    assert "certgate.gate.withdrawn_aliases" not in tags, tags
