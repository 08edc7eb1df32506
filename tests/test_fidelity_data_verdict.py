"""A proven parity verdict that the model's own value on the data's rows is on the other side
of γ from, within the rows' sampling error, is *consistent* (the rows do not refute the
population) and its record and the gate's reason say so. On a 20,000-row table the default
fit proved the ratio above 0.545, [0.546, 0.562], where the model's ratio on the rows is
0.538 (interval [0.469, 0.616]); the gate promoted it and named only the overlap.

Here: 200 rows per group, the model grants iff ``x = 1``, which 100 privileged and 88
unprivileged rows hold (the rows' ratio 0.88, counted here). The independent fit makes ``x``
independent of ``g``, so the population's ratio is exactly 1 (closed form: the same
P(x = 1) in both groups)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
import torch

from configs.schema import GatePolicy
from pipeline_steps.cli import main
from pipeline_steps.gate import decide
from tests.parity_on_data import data_ratio, verify_parity
from verifier.audits import DemographicParitySettings
from verifier.certificate import Certificate
from verifier.convert import save_network
from verifier.convert.torch_module import from_torch


def independent_fit(tmp_path: Path) -> tuple[Path, Path, Path, Fraction]:
    """The table, its independent population, the network and the rows' own ratio."""
    x = [1] * 100 + [0] * 100 + [1] * 88 + [0] * 112
    frame = pd.DataFrame({"g": [0] * 200 + [1] * 200, "x": x})
    data, population = tmp_path / "data.csv", tmp_path / "pop.json"
    frame.to_csv(data, index=False)
    assert main(["population", "fit", str(data), "--out", str(population), "--independent",
                 "--json"]) == 0
    layer = torch.nn.Linear(2, 1)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[0.0, 2.0]]))
        layer.bias.fill_(-1.0)
    network = tmp_path / "net.json"
    save_network(from_torch(torch.nn.Sequential(layer), ["g", "x"], ["logit"]), network)
    granted = frame["x"] == 1
    return data, population, network, data_ratio(granted, frame["g"] == 1, frame["g"] == 0)


def test_a_proof_the_rows_estimate_disagrees_with_is_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, population, network, rows_ratio = independent_fit(tmp_path)
    assert rows_ratio == Fraction(22, 25)
    payload = verify_parity(capsys, network, ["g", "x"], population, data, "g", "0", 0.9)
    low, high = payload["ratio"]
    assert payload["verdict"] == "satisfied" and 0.9 < low <= 1.0 <= high
    fidelity = payload["population_fidelity"]
    assert fidelity["status"] == "consistent", fidelity["reason"]
    assert fidelity["empirical"][0] < 0.9 < fidelity["empirical"][1]
    assert fidelity["data_verdict"] == {"estimate": "violated", "interval": "unknown"}
    assert "0.88, is on the other side of gamma 0.9 from the proven verdict 'satisfied'" \
        in fidelity["reason"]
    certificate = Certificate(audit="demographic_parity", verdict="satisfied",
                              bounds={"value": (low, high)}, details={"threshold": 0.9},
                              population_fidelity=fidelity)
    audit = DemographicParitySettings(kind="demographic_parity", name="dp", protected="g",
                                      privileged=0, favorable_class=1, gamma=0.9)
    decision = decide([audit], {"dp": certificate}, GatePolicy(undecided="fail"))
    assert decision.outcome == "passed"
    assert "on the other side of gamma 0.9" in decision.checks[0].reason


def test_a_proof_the_rows_estimate_agrees_with_adds_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, population, network, _ = independent_fit(tmp_path)
    payload = verify_parity(capsys, network, ["g", "x"], population, data, "g", "0", 0.8)
    fidelity = payload["population_fidelity"]
    assert payload["verdict"] == "satisfied" and fidelity["status"] == "consistent"
    assert fidelity["data_verdict"] == {"estimate": "satisfied", "interval": "unknown"}
    assert "other side of gamma" not in fidelity["reason"]
