"""Small seams of the audits: a ratio that may be undefined says so, certificates name the
split rule that ran, and audit names cannot collide with certgate's own tags."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from configs.schema import RESERVED_AUDIT_NAMES, ConfigError, parse_config
from pipeline_steps.cli import main
from pipeline_steps.gate import decide
from registry_hooks.tags import RESERVED_AUDIT_NAMES as TAG_RESERVED
from registry_hooks.tags import result_tag_audit
from verifier.audits import DemographicParitySettings, demographic_parity_audit
from verifier.audits.binding import anonymous_inputs
from verifier.convert import save_network
from verifier.network import Layer, Network
from verifier.population import load_population
from verifier.pv import PVSettings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CREDIT = EXAMPLES / "population_credit.json"


def constant_network(columns: list[str], favoured: int) -> Network:
    """A network whose logits ignore the input: class ``favoured`` always wins."""
    bias = np.zeros(2)
    bias[favoured] = 1.0
    return Network([Layer(np.zeros((2, len(columns))), bias)], columns, ["deny", "grant"])


def test_a_model_that_never_predicts_the_favourable_class_may_have_an_undefined_ratio(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    population = load_population(CREDIT)
    network = constant_network(list(population.columns), favoured=0)
    certificate = demographic_parity_audit(network, population, protected="owns_home",
                                           privileged=1, favorable_class=1, gamma=0.8,
                                           timeout_s=10)
    low, high = certificate.bounds["p_privileged"]
    assert low == 0.0 and high < 1e-6
    assert certificate.verdict == "unknown"
    assert "the ratio may be undefined" in certificate.details["undefined"]
    settings = DemographicParitySettings(kind="demographic_parity", protected="owns_home",
                                      privileged=1, favorable_class=1, gamma=0.8)
    decision = decide([settings], {settings.name: certificate}, parse_config(
        {"model": {"uri": "m.onnx"}, "audits": [settings.model_dump()]}).gate)
    assert decision.outcome == "failed"
    assert "the ratio may be undefined" in decision.reasons[0] and "straddles" not in \
        decision.reasons[0]

    path = tmp_path / "never.json"
    save_network(network, path)
    argv = ["verify", "demographic-parity", "--model", str(path), "--population", str(CREDIT),
            "--protected", "owns_home", "--privileged", "1", "--favorable-class", "1",
            "--gamma", "0.8", "--timeout", "10"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "ratio: the ratio may be undefined" in out and "inf" not in out
    assert main([*argv, "--json"]) == 1
    assert "undefined" in json.loads(capsys.readouterr().out)["undefined"]


def test_a_model_that_predicts_the_favourable_class_has_a_defined_ratio() -> None:
    population = load_population(CREDIT)
    network = constant_network(list(population.columns), favoured=1)
    certificate = demographic_parity_audit(network, population, protected="owns_home",
                                           privileged=1, favorable_class=1, gamma=0.8,
                                           timeout_s=10)
    assert "undefined" not in certificate.details
    assert certificate.verdict == "satisfied"
    assert certificate.bounds["value"][0] <= 1.0 <= certificate.bounds["value"][1]


@pytest.mark.parametrize("split", ["smear", "babsb-longest-edge", "longest-edge"])
def test_certificates_name_the_split_rule_that_ran(split: str) -> None:
    population = load_population(CREDIT)
    network = constant_network(list(population.columns), favoured=1)
    certificate = demographic_parity_audit(
        network, population, protected="owns_home", privileged=1, favorable_class=1,
        gamma=0.8, settings=PVSettings(timeout_s=10, split=split))
    assert f"{split} splitting" in certificate.algorithm
    assert certificate.settings["split"] == split


def test_audit_names_cannot_take_certgate_tag_segments() -> None:
    assert RESERVED_AUDIT_NAMES == TAG_RESERVED
    for reserved in sorted(RESERVED_AUDIT_NAMES):
        with pytest.raises(ConfigError, match=f"cannot be named '{reserved}'"):
            parse_config({"model": {"uri": "m.onnx"}, "audits": [
                {"kind": "demographic_parity", "name": reserved, "protected": "sex",
                 "privileged": 1, "favorable_class": 1, "gamma": 0.8}]})
    assert result_tag_audit("certgate.parity.verdict") == "parity"
    assert result_tag_audit("certgate.gate.reasons") is None
    assert result_tag_audit("certgate.audit.run_id") is None
    assert result_tag_audit("certgate.gate") is None
    assert result_tag_audit("mlflow.parity.verdict") is None


def test_self_correcting_signature_names_columns_and_classes() -> None:
    from pipeline_steps.deploy import variant_output_columns
    from registry_hooks.certgate_model import variant_signature

    def _signature(network: Network, columns: list[str]):
        names = None if anonymous_inputs(network) else list(network.input_names)
        return variant_signature(names, network.input_size, columns)

    layer = Layer(np.ones((2, 3)), np.zeros(2))
    named = Network([layer], ["age", "income", "sex"], ["deny", "grant"])
    assert variant_output_columns(named, 2) == ["logit_deny", "logit_grant"]
    assert variant_output_columns(named, 3) == ["logit_deny", "logit_grant", "logit_abstain"]
    signature = _signature(named, variant_output_columns(named, 2))
    assert signature.inputs.input_names() == ["age", "income", "sex"]
    assert signature.outputs.input_names()[:2] == ["logit_deny", "logit_grant"]
    unnamed = Network([layer], [], [])
    assert variant_output_columns(unnamed, 2) == ["logit_0", "logit_1"]
    # a single logit names no class: its classes are 0 and 1 (class 1 iff the logit > 0)
    for output in ("y0", "income_over_50k"):
        single = Network([Layer(np.ones((1, 3)), np.zeros(1))], ["age", "income", "sex"],
                         [output])
        assert variant_output_columns(single, 2) == ["logit_0", "logit_1"]
        assert variant_output_columns(single, 3) == ["logit_0", "logit_1", "logit_2"]
    assert not _signature(unnamed, ["logit_0", "logit_1"]).inputs.has_input_names()


def test_an_onnx_output_tensor_names_no_classes(tmp_path: Path) -> None:
    """``torch.onnx.export(..., output_names=["logits"])`` of a two-class model is read as
    outputs ``logits[0]``, ``logits[1]``: positions of one tensor, not class names, so the
    self-correcting variant's columns are the class indices README promises (they were
    ``logit_logits[0]``, ``logit_logits[1]``)."""
    import torch

    from pipeline_steps.deploy import variant_output_columns
    from verifier.convert import load_network

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    path = tmp_path / "net.onnx"
    torch.onnx.export(model.eval(), torch.zeros(1, 3), str(path), input_names=["input"],
                      output_names=["logits"], dynamo=False)
    network = load_network(path)
    assert list(network.output_names) == ["logits[0]", "logits[1]"]
    assert variant_output_columns(network, 2) == ["logit_0", "logit_1"]
    assert variant_output_columns(network, 3) == ["logit_0", "logit_1", "logit_2"]
    named = Network([Layer(np.ones((2, 3)), np.zeros(2))], ["a", "b", "c"],
                    ["grant[0]", "deny[1]"])
    assert variant_output_columns(named, 2) == ["logit_grant[0]", "logit_deny[1]"]
