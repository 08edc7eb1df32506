"""The causal-fairness and exact-probability audit kinds in the pipeline, against closed forms.

The network of most tests is class 1 iff ``x + 0.5 s > 0.75`` on ``[0, 1]²`` (uniform
population unless stated): the class depends on ``s`` exactly for ``x ∈ (0.25, 0.75]``, so
the biased share is 1/2. Exact probabilities of the WMI kinds are derived in each test. The
last test runs the audit and gate steps against a real MLflow server.
"""

from __future__ import annotations

import csv
import io
import json
import math
import uuid
from typing import Any

import mlflow
import numpy as np
import pytest

from configs.schema import GatePolicy, parse_config
from pipeline_steps.audit import (
    DETAIL_TABLE_ARTIFACT,
    audit_model,
    certify,
    certify_all,
    headline_metrics,
    version_result_tags,
)
from pipeline_steps.gate import check_certificate, decide, run_gate
from pipeline_steps.tables import detail_tables
from registry_hooks.certgate_model import log_model
from registry_hooks.connection import Registry, connect
from registry_hooks.tags import alias_version, version_tags
from tests.causal_nets import threshold_network
from verifier.audits.exact_probability import WMI_FLOAT_ALLOWANCE
from verifier.certificate import Certificate
from verifier.errors import CertgateInputError
from verifier.population import (
    Categorical,
    Factor,
    Feature,
    Normal,
    PopulationModel,
    Product,
    Uniform,
)

pytest_plugins = ["mlflow_server"]

NETWORK = threshold_network([1.0, 0.5], -0.75, ["x", "s"])
FAST = {"max_unstable": 4, "timeout_s": 20, "target_width": 0.01}


def unit_population(x_high: float = 1.0) -> PopulationModel:
    """``x ~ U[0, x_high]``, ``s ~ U[0, 1]``, both declared on ``[0, 1]``."""
    return PopulationModel(
        features=[Feature(name="x", kind="continuous", domain=(0, 1)),
                  Feature(name="s", kind="continuous", domain=(0, 1))],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Uniform(lower=0, upper=x_high)),
            Factor(columns=["s"], distribution=Uniform(lower=0, upper=1))]),
    )


def audits(*documents: dict[str, Any]) -> list[Any]:
    return parse_config({"model": {"uri": "m.onnx"}, "audits": list(documents)}).audits


def causal(name: str, threshold: float, **changes: Any) -> dict[str, Any]:
    return {"kind": "causal_fairness", "name": name, "protected": ["s"],
            "max_biased_share": threshold, **FAST, **changes}


def checked(settings: Any, certificate: Certificate) -> str:
    """The gate's status for this certificate, which must agree with its own verdict."""
    status = check_certificate(settings, certificate).status
    expected = {"satisfied": "proven_pass", "violated": "proven_fail", "unknown": "undecided"}
    assert status == expected[certificate.verdict]
    return status


# ------------------------------------------------------------------------------ causal


def test_causal_gate_sides_of_the_closed_form_share() -> None:
    loose, strict, weighted = audits(causal("loose", 0.6), causal("strict", 0.4),
                                     causal("weighted", 0.6, measure="population"))
    population = unit_population()
    for settings, status in ((loose, "proven_pass"), (strict, "proven_fail"),
                             (weighted, "proven_pass")):
        certificate = certify(settings, NETWORK, population)
        low, high = certificate.bounds["biased_share"]
        p_low, p_high = certificate.bounds["biased_share_population"]
        assert low <= 0.5 <= high and high - low <= 0.01
        assert p_low <= 0.5 <= p_high
        assert p_low == pytest.approx(low, abs=1e-6) and p_high == pytest.approx(high, abs=1e-6)
        assert certificate.details["causal_verdict"] == "biased"
        assert certificate.audit == "causal_fairness"
        assert checked(settings, certificate) == status
    decision = decide([loose, strict], {"loose": certify(loose, NETWORK, population),
                                        "strict": certify(strict, NETWORK, population)},
                      GatePolicy())
    assert decision.outcome == "failed"


def test_population_measure_is_what_the_gate_reads() -> None:
    """x ~ U[0, 0.25]: no population mass where the class depends on s (x > 0.25), while the
    uniform share of the unit square stays 1/2. At x = 0.25 the logit reaches exactly 0 (an
    exact tie, class 0): a float MILP cannot tell that border from a bias of 1e-17, so the
    partitions touching it stay unproven and the population share is certified to the audit's
    target width, not to zero."""
    uniform, weighted = audits(causal("uniform", 0.4),
                               causal("weighted", 0.4, measure="population"))
    skewed = unit_population(0.25)
    first, second = certify(uniform, NETWORK, skewed), certify(weighted, NETWORK, skewed)
    assert first.bounds["biased_share"][1] >= 0.5
    low, high = second.bounds["biased_share_population"]
    assert low == 0.0 and high <= FAST["target_width"]
    assert (checked(uniform, first), checked(weighted, second)) == ("proven_fail",
                                                                    "proven_pass")


def test_one_hot_groups_default_to_the_populations_categories() -> None:
    """class 1 iff x + 0.4 s − 0.5 − 2 g2 > 0 with g a category: g0 and g1 biased on
    x ∈ (0.1, 0.5], g2 fair. Uniform share 2/3 · 0.4; population share P(g ≠ g2) · 0.4."""
    network = threshold_network([1.0, 0.0, 0.0, -2.0, 0.4], -0.5, ["x", "g0", "g1", "g2", "s"])
    population = PopulationModel(
        features=[Feature(name="x", kind="continuous", domain=(0, 1)),
                  Feature(name="g", kind="categorical", columns=["g0", "g1", "g2"]),
                  Feature(name="s", kind="continuous", domain=(0, 1))],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Uniform(lower=0, upper=1)),
            Factor(columns=["g0", "g1", "g2"],
                   distribution=Categorical(probabilities=[0.2, 0.3, 0.5])),
            Factor(columns=["s"], distribution=Uniform(lower=0, upper=1))]),
    )
    settings = audits(causal("groups", 0.3))[0]
    certificate = certify(settings, network, population)
    low, high = certificate.bounds["biased_share"]
    p_low, p_high = certificate.bounds["biased_share_population"]
    assert low <= 0.8 / 3 <= high and high - low <= 0.01
    assert p_low <= 0.5 * 0.4 <= p_high and p_high - p_low <= 0.01
    assert checked(settings, certificate) == "proven_pass"


def test_regions_and_witnesses_as_csv_are_re_checked_by_the_network() -> None:
    settings = audits(causal("csv", 0.6))[0]
    certificate = certify(settings, NETWORK, unit_population())
    tables = detail_tables(certificate, NETWORK.input_names)
    witnesses = list(csv.DictReader(io.StringIO(tables["witnesses"])))
    assert len(witnesses) == len(certificate.details["witnesses"]) > 0
    for row in witnesses:
        pair = np.array([[float(row[f"{side}.{name}"]) for name in ("x", "s")]
                         for side in ("x", "x_other")])
        classes = NETWORK.classify(pair)
        assert classes.tolist() == [int(row["x.class"]), int(row["x_other.class"])]
        assert classes[0] != classes[1] and pair[0, 0] == pair[1, 0]
    regions = list(csv.DictReader(io.StringIO(tables["regions"])))
    assert len(regions) == len(certificate.details["regions"]) > 0
    everywhere = [row for row in regions if row["kind"] == "biased_everywhere"]
    assert everywhere
    for row in everywhere:
        assert 0.25 <= float(row["x.lower"]) <= float(row["x.upper"]) <= 0.75
        assert float(row["share"]) == pytest.approx(float(row["x.upper"]) - float(row["x.lower"]))
    assert detail_tables(Certificate(audit="a", verdict="unknown"), ["x"]) == {}


def test_a_population_domain_beyond_the_unit_cube_is_partitioned_as_declared() -> None:
    """x declared on [0, 2]: class 1 iff x + 0.5 s > 0.75 depends on s exactly for
    x in (0.25, 0.75], a quarter of the x range (the unit cube is no longer assumed)."""
    wide = PopulationModel(
        features=[Feature(name="x", kind="continuous", domain=(0, 2)),
                  Feature(name="s", kind="continuous", domain=(0, 1))],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Uniform(lower=0, upper=2)),
            Factor(columns=["s"], distribution=Uniform(lower=0, upper=1))]))
    certificate = certify(audits(causal("wide", 0.5))[0], NETWORK, wide)
    low, high = certificate.bounds["biased_share"]
    assert low <= 0.25 <= high and high - low <= 0.02


def test_causal_input_problems_name_the_field() -> None:
    settings = audits(causal("scaled", 0.5))[0]
    with pytest.raises(CertgateInputError, match=r"^audit 'scaled': .* 'x' is \[-inf, inf\]"):
        unbounded = PopulationModel(
            features=[Feature(name="x", kind="continuous"),
                      Feature(name="s", kind="continuous", domain=(0, 1))],
            distribution=Product(factors=[
                Factor(columns=["x"], distribution=Normal(mean=0.5, std=1.0)),
                Factor(columns=["s"], distribution=Uniform(lower=0, upper=1))]))
        certify(settings, NETWORK, unbounded)
    unknown = audits(causal("unknown", 0.5, protected=["sex"]))[0]
    with pytest.raises(CertgateInputError,
                       match=r"^audit 'unknown': protected feature 'sex' is not an input"):
        certify(unknown, NETWORK, unit_population())
    weighted = audits(causal("weighted", 0.5, measure="population"))[0]
    with pytest.raises(CertgateInputError, match="measure: population needs a population"):
        certify(weighted, NETWORK, None)


# ------------------------------------------------------------------------------ WMI


def probability_audit(kind: str, threshold: float, **fields: Any) -> Any:
    """The audit with a 5-s budget: box branching spends what the enumeration leaves of it
    on the proof, all of it for a threshold at the truth."""
    return audits({"kind": kind, "name": kind, "min_probability": threshold, "timeout_s": 5,
                   **fields})[0]


FIVE_SIXTHS = 5 / 6
MARGIN = WMI_FLOAT_ALLOWANCE
FLOAT_VERDICT = {"proven_pass": "satisfied", "undecided": "unknown", "proven_fail": "violated"}


def float_checked(settings: Any, certificate: Certificate, truth: float) -> str:
    """What the float interval says (``details.float_verdict``, the status the gate gave
    before it stopped reading an engineering margin as a proof); the float value is not
    proven, the certificate's interval is box branching's, which holds the closed form
    ``truth`` and is what the gate reads."""
    assert certificate.details["proven"] is False
    assert certificate.details["proven_by"] == "box branching (PV)"
    low, high = certificate.bounds["probability"]
    assert low <= truth <= high
    checked(settings, certificate)
    return {verdict: status for status, verdict in FLOAT_VERDICT.items()}[
        certificate.details["float_verdict"]]


@pytest.mark.parametrize(("threshold", "status", "stopped"), [
    (0.8, "proven_pass", False),
    (FIVE_SIXTHS - 1.5 * MARGIN, "proven_pass", False),
    (FIVE_SIXTHS, "undecided", False),
    (FIVE_SIXTHS + 0.5 * MARGIN, "undecided", False),
    (FIVE_SIXTHS + 1.5 * MARGIN, "proven_fail", False),
    (0.9, "proven_fail", True),
])
def test_monotonicity_gate_around_the_closed_form(threshold: float, status: str,
                                                  stopped: bool) -> None:
    """Decreasing in s: pairs (x, s, s′) uniform with s′ <= s; the positive class is lost
    on x ∈ (0.75 − s/2, 0.75 − s′/2], so P = 1 − E[(s − s′)/2 | s′ <= s] = 5/6. The float
    interval is judged as the margin says; the gate reads box branching's proof, which
    decides the thresholds 0.05 from the truth."""
    settings = probability_audit("monotonicity", threshold, feature="s", decreasing=True)
    certificate = certify(settings, NETWORK, unit_population())
    low, high = certificate.details["float_interval"]
    assert low <= FIVE_SIXTHS <= high
    assert certificate.details["stopped_early"] is stopped
    if stopped:
        assert low == 0.0 and high < threshold
    else:
        assert high - low == pytest.approx(2 * MARGIN)
        assert certificate.details["computed_probability"] == pytest.approx(FIVE_SIXTHS,
                                                                            abs=1e-12)
    assert float_checked(settings, certificate, FIVE_SIXTHS) == status
    if abs(threshold - FIVE_SIXTHS) > 0.05:
        assert checked(settings, certificate) == status


def test_monotone_feature_is_computed_up_to_the_allowance() -> None:
    settings = probability_audit("monotonicity", 1 - 2 * MARGIN, feature="x")
    certificate = certify(settings, NETWORK, unit_population())
    assert tuple(certificate.details["float_interval"]) == (1 - MARGIN, 1.0)
    assert float_checked(settings, certificate, 1.0) == "proven_pass"
    assert checked(settings, certificate) == "proven_pass"
    weighted = probability_audit("monotonicity", 0.99, feature="x", use_prior=True)
    certificate = certify(weighted, NETWORK, unit_population())
    assert (certificate.verdict, certificate.details["float_verdict"]) == ("satisfied",
                                                                          "satisfied")
    assert float_checked(weighted, certificate, 1.0) == "proven_pass"


@pytest.mark.parametrize(("noise", "exact"), [
    ({"noise_uniform": [0.0, 0.2]}, 0.9),
    ({"noise_triangular": [0.0, 0.0, 0.2]}, 1 - 0.2 / 3),
])
def test_noise_robustness_closed_form(noise: dict[str, Any], exact: float) -> None:
    """n >= 0 added to x flips class 0 to 1 on x ∈ (0.75 − s/2 − n, 0.75 − s/2], which lies
    inside [0, 1] for n <= 0.2: P = 1 − E[n] (E[n] = 0.1 uniform, 0.2/3 triangular)."""
    for threshold, status in ((exact - 0.01, "proven_pass"), (exact, "undecided"),
                              (exact + 0.01, "proven_fail")):
        settings = probability_audit("noise_robustness", threshold, features=["x"], **noise)
        certificate = certify(settings, NETWORK, unit_population())
        low, high = certificate.details["float_interval"]
        assert low <= exact <= high
        assert float_checked(settings, certificate, exact) == status
        if status != "undecided":
            assert checked(settings, certificate) == status


def test_local_robustness_closed_form() -> None:
    """Box x ∈ [0.5, 0.7], s ∈ [0.4, 0.6]: class 1 everywhere for s >= 0.5, on a share
    (0.7 − t)/0.2 with t = 0.75 − s/2 for s < 0.5, averaging 7/8; P(class 1) = 15/16."""
    box = {"center": [0.6, 0.5], "epsilon": 0.1}
    predicted = probability_audit("local_robustness", 0.9, **box)
    certificate = certify(predicted, NETWORK, unit_population())
    low, high = certificate.details["float_interval"]
    assert low <= 15 / 16 <= high and certificate.details["expected_class"] == 1
    assert float_checked(predicted, certificate, 15 / 16) == "proven_pass"
    assert checked(predicted, certificate) == "proven_pass"
    other = probability_audit("local_robustness", 0.05, expected_class=0, **box)
    certificate = certify(other, NETWORK, unit_population())
    low, high = certificate.details["float_interval"]
    assert low <= 1 / 16 <= high
    assert float_checked(other, certificate, 1 / 16) == "proven_pass"
    assert checked(other, certificate) == "proven_pass"
    strict = probability_audit("local_robustness", 0.07, expected_class=0, **box)
    certificate = certify(strict, NETWORK, unit_population())
    assert float_checked(strict, certificate, 1 / 16) == "proven_fail"
    assert checked(strict, certificate) == "proven_fail"


def test_wmi_input_problems_name_the_field() -> None:
    population = unit_population()
    with pytest.raises(CertgateInputError,
                       match=r"^audit 'monotonicity': feature 'age' is not an input"):
        certify(probability_audit("monotonicity", 0.9, feature="age"), NETWORK, population)
    with pytest.raises(CertgateInputError,
                       match=r"^audit 'monotonicity': this audit needs a population model"):
        certify(probability_audit("monotonicity", 0.9, feature="x"), NETWORK, None)
    with pytest.raises(CertgateInputError, match="features 'age' is not an input"):
        certify(probability_audit("noise_robustness", 0.9, features=["age"],
                                  noise_uniform=[0, 1]), NETWORK, population)
    with pytest.raises(CertgateInputError, match="center has 3 values, the network 2 inputs"):
        certify(probability_audit("local_robustness", 0.9, center=[0.1, 0.2, 0.3],
                                  epsilon=0.1), NETWORK, population)


# ------------------------------------------------------------------------------ logging


def test_metrics_and_tags_of_the_new_kinds_are_generic() -> None:
    config = parse_config({"model": {"uri": "m"}, "audits": [
        causal("fair_s", 0.6, measure="population"),
        {"kind": "monotonicity", "name": "mono", "feature": "x", "min_probability": 0.9}]})
    weighted, mono = config.audits
    certificates = certify_all(config, NETWORK, unit_population(), progress=True)
    causal_certificate = certificates["fair_s"]
    metrics = headline_metrics(weighted, causal_certificate)
    for quantity in ("biased_share", "biased_share_population"):
        low, high = causal_certificate.bounds[quantity]
        assert (metrics[f"fair_s.{quantity}_lower"], metrics[f"fair_s.{quantity}_upper"]) == (
            low, high)
    for key, value in causal_certificate.details["certified_shares"].items():
        assert metrics[f"fair_s.certified_shares.{key}"] == value
    tags = version_result_tags(weighted, causal_certificate)
    assert tags["certgate.fair_s.requirement"] == "biased_share_population < 0.6"
    assert float(tags["certgate.fair_s.biased_share_population_upper"]) == \
        causal_certificate.bounds["biased_share_population"][1]
    mono_tags = version_result_tags(mono, certificates["mono"])
    # monotone in x (truth 1): the float value is not proven, box branching's proof is
    assert mono_tags["certgate.mono.verdict"] == "satisfied"
    mono_low = float(mono_tags["certgate.mono.probability_lower"])
    assert mono_low == certificates["mono"].bounds["probability"][0] and 0.9 <= mono_low <= 1
    assert mono_tags["certgate.mono.requirement"] == "probability >= 0.9"
    assert headline_metrics(mono, certificates["mono"])["mono.proven_pass"] == 1.0


# ------------------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    return connect(mlflow_server.url)


def pipeline_config(registry: Registry, model_uri: str, audit_list: list[dict[str, Any]]):
    return parse_config({
        "tracking": {"tracking_uri": registry.tracking_uri,
                     "experiment": f"kinds_{uuid.uuid4().hex[:8]}"},
        "model": {"uri": model_uri},
        "validation": {"population_samples": 200},
        "audits": audit_list,
        "gate": {"mlflow_validation": True},
    })


def test_audit_and_gate_through_mlflow(registry: Registry) -> None:
    name = f"kinds_{uuid.uuid4().hex[:8]}"
    info = log_model(NETWORK.to_torch(), unit_population(),
                                     registered_model_name=name, serialization_format="pickle",
                                     alias="candidate", registry=registry)
    version = str(info.registered_model_version)
    monotone = {"kind": "monotonicity", "name": "mono", "feature": "s", "decreasing": True,
                "min_probability": 0.8}
    failing = pipeline_config(registry, f"models:/{name}@candidate", [
        causal("causal_uniform", 0.6), causal("causal_weighted", 0.4, measure="population"),
        monotone])
    outcome = audit_model(failing, registry=registry, progress=False)
    decision = run_gate(failing, registry=registry)
    assert [check.status for check in decision.checks] == ["proven_pass", "proven_fail",
                                                           "proven_pass"]
    assert decision.outcome == "failed" and decision.mlflow_validation.startswith("failed")
    tags = version_tags(registry, name, version)
    assert tags["certgate.gate"] == "failed"
    assert "proven to violate biased_share_population < 0.4" in tags["certgate.gate.reasons"]
    assert tags["certgate.causal_uniform.verdict"] == "satisfied"
    low, high = (float(tags[f"certgate.causal_uniform.biased_share_{side}"])
                 for side in ("lower", "upper"))
    assert low <= 0.5 <= high < 0.6
    assert float(tags["certgate.causal_weighted.biased_share_population_lower"]) >= 0.4
    mono_low = float(tags["certgate.mono.probability_lower"])
    assert 0.8 <= mono_low <= FIVE_SIXTHS  # box branching's proof, not the float value
    assert alias_version(registry, name, "champion") is None

    run_id = outcome.run_id
    metrics = registry.client.get_run(run_id).data.metrics
    assert metrics["causal_uniform.biased_share_upper"] == high
    assert math.isfinite(metrics["causal_uniform.biased_share_population_upper"])
    assert metrics["mono.probability_lower"] == mono_low
    regions = mlflow.artifacts.load_text(
        f"runs:/{run_id}/" + DETAIL_TABLE_ARTIFACT.format(name="causal_uniform",
                                                          table="regions"))
    assert regions == detail_tables(outcome.certificates["causal_uniform"],
                                    NETWORK.input_names)["regions"]
    html = mlflow.artifacts.load_text(f"runs:/{run_id}/report/report.html")
    assert "biased_share ∈" in html and "probability &gt;= 0.8" in html

    passing = pipeline_config(registry, f"models:/{name}@candidate",
                              [causal("causal_uniform", 0.6), monotone])
    audit_model(passing, registry=registry, progress=False)
    decision = run_gate(passing, registry=registry)
    assert decision.outcome == "passed" and decision.mlflow_validation == "passed"
    assert alias_version(registry, name, "champion") == version


def test_an_undecided_causal_audit_never_promotes(registry: Registry, tmp_path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Through the command line on a real server: a share interval straddling the threshold
    (the closed form is 0.5, ``max_biased_share`` 0.5) and a budget spent before any partition
    is analysed are undecided. Neither moves ``champion``; under ``undecided: fail`` the run
    exits 1 and a failed gate withdraws the alias an earlier proven pass gave this version;
    under ``warn`` the gate warns (exit 0) and still moves nothing."""
    from mlflow_server import run_cli, write_server_config

    name = f"undecided_{uuid.uuid4().hex[:8]}"
    info = log_model(NETWORK.to_torch(), unit_population(), registered_model_name=name,
                     serialization_format="pickle", alias="candidate", registry=registry)
    version = str(info.registered_model_version)
    uri = {"uri": f"models:/{name}@candidate"}
    straddling = causal("straddling", 0.5)
    spent = causal("spent", 0.6, timeout_s=1e-9)

    def run(audit: dict[str, Any], *verb: str, **sections: Any) -> tuple[int, dict[str, Any]]:
        config = write_server_config(tmp_path, registry.tracking_uri, uri, [audit], 200,
                                     **sections)
        code, out, _ = run_cli(capsys, *verb, "--config", str(config), "--json")
        return code, json.loads(out.strip().splitlines()[-1])

    code, summary = run(causal("passing", 0.6), "run", "--no-progress")
    assert (code, summary["gate"]["outcome"]) == (0, "passed")
    assert alias_version(registry, name, "champion") == version
    for audit in (straddling, spent):
        code, summary = run(audit, "run", "--no-progress")
        low, high = summary["gate"]["checks"][audit["name"]]["interval"]
        assert low <= 0.5 <= high and not high < audit["max_biased_share"]
        assert summary["gate"]["checks"][audit["name"]]["status"] == "undecided"
        assert (code, summary["gate"]["outcome"], summary["gate"]["exit_code"]) == (1, "failed", 1)
        assert summary["audit"]["audits"][audit["name"]]["verdict"] == "unknown"
        assert alias_version(registry, name, "champion") is None
        assert version_tags(registry, name, version)["certgate.gate"] == "failed"
        code, summary = run(audit, "gate", gate={"undecided": "warn"})
        assert (code, summary["outcome"], summary["promoted_alias"]) == (0, "warned", None)
        assert alias_version(registry, name, "champion") is None
    assert summary["checks"]["spent"]["interval"] == [0.0, 1.0]
