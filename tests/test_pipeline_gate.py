"""The gate's decision rule (no registry): only proven passes pass; undecided follows the
policy; the MLflow mirror never passes what the gate does not."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from configs.schema import GatePolicy
from pipeline_steps.cli.exit_codes import exit_for
from pipeline_steps.gate import check_certificate, decide, mirror_in_mlflow
from verifier.audits import DemographicParitySettings
from verifier.certificate import Certificate


def audit(name: str = "dp", gamma: float = 0.8, form: str = "ratio") -> DemographicParitySettings:
    return DemographicParitySettings(kind="demographic_parity", name=name, protected="sex",
                                  privileged=1, favorable_class=1, gamma=gamma, form=form)


def certificate(low: float, high: float, verdict: str, threshold: float | None = 0.8
                ) -> Certificate:
    details = {} if threshold is None else {"threshold": threshold}
    return Certificate(audit="demographic_parity", verdict=verdict,
                       bounds={"value": (low, high)}, details=details)


FAIL = GatePolicy(undecided="fail")
WARN = GatePolicy(undecided="warn")


def test_each_status() -> None:
    assert check_certificate(audit(), certificate(0.81, 1.2, "satisfied")).status == \
        "proven_pass"
    assert check_certificate(audit(), certificate(0.1, 0.8, "violated")).status == \
        "proven_fail"
    assert check_certificate(audit(), certificate(0.7, 0.9, "unknown")).status == "undecided"
    assert check_certificate(audit(), None).status == "missing"
    inconsistent = check_certificate(audit(), certificate(0.7, 0.9, "satisfied"))
    assert inconsistent.status == "inconsistent"
    assert "contradicts" in inconsistent.reason
    other_threshold = check_certificate(audit(gamma=0.9), certificate(0.81, 1.2, "satisfied"))
    assert other_threshold.status == "undecided"


def test_difference_form_reads_the_upper_bound() -> None:
    settings = audit(gamma=0.1, form="difference")
    assert check_certificate(settings, certificate(0.0, 0.05, "satisfied", 0.1)).status == \
        "proven_pass"
    assert check_certificate(settings, certificate(0.1, 0.3, "violated", 0.1)).status == \
        "proven_fail"
    assert check_certificate(settings, certificate(0.05, 0.1, "unknown", 0.1)).status == \
        "undecided"


def test_decision_combines_audits_and_policy() -> None:
    audits = [audit("a"), audit("b")]
    passing = certificate(0.9, 1.0, "satisfied")
    undecided = certificate(0.7, 0.9, "unknown")
    failing = certificate(0.1, 0.5, "violated")
    assert decide(audits, {"a": passing, "b": passing}, FAIL).outcome == "passed"
    assert decide(audits, {"a": passing, "b": undecided}, FAIL).outcome == "failed"
    warned = decide(audits, {"a": passing, "b": undecided}, WARN)
    assert warned.outcome == "warned" and exit_for(warned.outcome) == 0
    assert decide(audits, {"a": failing, "b": undecided}, WARN).outcome == "failed"
    missing = decide(audits, {"a": passing}, WARN)
    assert missing.outcome == "failed" and exit_for(missing.outcome) == 1
    assert missing.reasons[1] == "b: no certificate"


intervals = st.tuples(st.floats(0, 3, allow_nan=False), st.floats(0, 3, allow_nan=False)).map(
    sorted)


@given(intervals, st.floats(0.05, 1.0), st.sampled_from(["fail", "warn"]))
def test_only_a_proven_pass_passes(interval: list[float], gamma: float, policy: str) -> None:
    low, high = interval
    verdict = "satisfied" if low > gamma else "violated" if high <= gamma else "unknown"
    decision = decide([audit(gamma=gamma)], {"dp": certificate(low, high, verdict, gamma)},
                      GatePolicy(undecided=policy))
    assert (decision.outcome == "passed") == (low > gamma)
    if high <= gamma:
        assert decision.outcome == "failed"
    assert decision.checks[0].interval == (low, high)


@pytest.mark.parametrize(("low", "high", "verdict", "expected"), [
    (0.85, 1.1, "satisfied", "passed"),
    (0.8, 1.1, "unknown", "failed"),
    (0.1, 0.5, "violated", "failed"),
])
def test_mlflow_mirror_agrees_with_the_gate(low: float, high: float, verdict: str,
                                            expected: str) -> None:
    decision = decide([audit()], {"dp": certificate(low, high, verdict)}, FAIL)
    assert decision.outcome == expected
    mirrored = mirror_in_mlflow(decision)
    assert mirrored.split(":")[0] == expected
    if expected == "failed":
        assert "dp.proven_pass" in mirrored


def test_infinite_bounds_are_undecided_not_errors() -> None:
    check = check_certificate(audit(), certificate(0.0, math.inf, "unknown"))
    assert check.status == "undecided"
    assert "inf" in check.reason


def test_reasons_are_grouped_failing_first(capsys: pytest.CaptureFixture[str]) -> None:
    """A passing check is never shown among the reasons of a failure: the command line,
    ``--json`` and the tag text group the reasons as failing, warning (a population the data
    contradicts, under ``population_contradicted: warn``), undecided, passing; an empty group
    is not shown."""
    from configs.schema import CertgateConfig
    from pipeline_steps.cli.pipeline_cmd import gate_summary, print_gate

    audits = [audit("a"), audit("b"), audit("c"), audit("d")]
    decision = decide(audits, {"a": certificate(0.9, 1.0, "satisfied"),
                               "b": certificate(0.1, 0.5, "violated"),
                               "c": certificate(0.7, 0.9, "unknown")}, FAIL)
    groups = decision.reasons_by_group()
    assert list(groups) == ["failing", "warning", "undecided", "passing"]
    assert groups["warning"] == []
    assert [reason.split(":")[0] for reason in groups["failing"]] == ["b", "d"]
    assert [reason.split(":")[0] for reason in groups["undecided"]] == ["c"]
    assert [reason.split(":")[0] for reason in groups["passing"]] == ["a"]
    assert decision.reasons_text() == " | ".join([
        f"failing: {groups['failing'][0]}; d: no certificate",
        f"undecided: {groups['undecided'][0]}", f"passing: {groups['passing'][0]}"])
    assert decision.summary() == f"failed: {decision.reasons_text()}"
    assert gate_summary(decision)["reasons"] == groups

    config = CertgateConfig.model_validate({"model": {"uri": "m.json"}, "audits": [
        item.model_dump() for item in audits]})
    print_gate(decision, config)
    assert capsys.readouterr().out.splitlines() == [
        "gate: failed", "  failing:", f"    {groups['failing'][0]}", "    d: no certificate",
        "  undecided:", f"    {groups['undecided'][0]}",
        "  passing:", f"    {groups['passing'][0]}"]


def test_a_passed_gate_lists_only_passing_checks() -> None:
    decision = decide([audit("a")], {"a": certificate(0.9, 1.0, "satisfied")}, FAIL)
    assert decision.reasons_by_group()["failing"] == []
    assert decision.reasons_text().startswith("passing: a: proven ratio > 0.8")


def test_a_bound_beside_the_threshold_and_the_threshold_are_written_apart() -> None:
    """A pass proven by a lower bound 1.2e-12 above γ read "proven ratio > 0.8 (ratio ∈
    [0.8, 0.9])", and a threshold of 0.7916666666666553 was recorded (the requirement tag) as
    "ratio > 0.791667": the texts named a bound equal to the threshold and a threshold that
    is not the one applied. Each end is now written until it differs from the threshold, and
    the threshold exactly (the shortest text that reads back as the same float)."""
    passed = check_certificate(audit("a"), certificate(0.8000000000012, 0.9, "satisfied"))
    assert passed.reason == "a: proven ratio > 0.8 (ratio ∈ [0.800000000001, 0.9])"
    open_ = check_certificate(audit("a"), certificate(0.7999999999988, 0.8000000000012,
                                                      "unknown"))
    assert open_.reason == ("a: undecided, ratio ∈ [0.799999999999, 0.800000000001] "
                            "straddles 0.8")
    exact = audit("a", gamma=0.7916666666666553)
    assert exact.requirement.describe() == "ratio > 0.7916666666666553"
    assert float(exact.requirement.describe().split()[-1]) == exact.gamma
    assert audit("a", gamma=1.0).requirement.describe() == "ratio > 1"
    at = check_certificate(audit("a"), certificate(0.8, 0.9, "unknown"))
    assert at.reason == "a: undecided, ratio ∈ [0.8, 0.9] straddles 0.8"
