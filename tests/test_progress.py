"""Progress bars count each kind's own unit of work: PV boxes, causal-fairness partitions
(counted from the engine's chunks as they finish), seconds of a WMI audit's budget. The
partition counter is checked against the engine's own certificate (its analysed partitions
and the shares of its final ledger), and it must not change the certificate."""

from __future__ import annotations

import itertools
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from configs.schema import parse_config
from pipeline_steps.audit import certify_observed, history_metrics
from pipeline_steps.progress import (
    BoxProgress,
    ChunkCounter,
    PartitionProgress,
    TimeProgress,
    audit_progress,
)
from pipeline_steps.report import history_series, work_done
from tests.test_pipeline_audit_kinds import (
    NETWORK,
    audits,
    causal,
    probability_audit,
    unit_population,
)
from tests.test_pipeline_report import sample_certificate
from verifier.audits import run_audit
from verifier.audits.causal_fairness import engine_settings
from verifier.causal import build_problem, certify_causal_fairness
from verifier.pv import PVProgress


def test_each_kind_counts_its_own_unit() -> None:
    parity, fairness = audits(
        {"kind": "demographic_parity", "protected": "s", "privileged": 1,
         "favorable_class": 1, "gamma": 0.8}, causal("fair", 0.6))
    monotonicity = probability_audit("monotonicity", 0.9, feature="x", timeout_s=40)
    bars = [audit_progress(settings, enabled=True)
            for settings in (parity, fairness, monotonicity)]
    for bar in bars:
        bar.close()
    assert [type(bar) for bar in bars] == [BoxProgress, PartitionProgress, TimeProgress]
    assert [bar.bar.unit for bar in bars] == [" boxes", " partitions", " s"]
    assert bars[2].bar.total == 40
    assert bars[0].callback is not None and bars[1].callback is None
    assert isinstance(bars[1].engine_options()["executor"], ChunkCounter)
    off = audit_progress(fairness, enabled=False)
    off.close()
    assert isinstance(off.engine_options()["executor"], ChunkCounter), \
        "the observed bounds do not depend on whether the bar is shown"


def test_partition_counts_agree_with_the_certificate() -> None:
    settings = audits(causal("fair", 0.6, target_width=0.02))[0]
    population = unit_population()
    plain = run_audit(settings, NETWORK, population)
    bar = PartitionProgress("fair", enabled=True)
    counted = run_audit(settings, NETWORK, population, None, None, **bar.engine_options())
    bar.close()
    assert counted.bounds == plain.bounds and counted.verdict == plain.verdict
    assert bar.analysed == counted.cost["analysed_partitions"] > 0
    assert bar.fair_share == pytest.approx(counted.details["fair_fraction"], abs=1e-12)
    assert bar.biased_share == pytest.approx(counted.details["biased_everywhere_fraction"],
                                             abs=1e-12)
    assert 0.0 < bar.fair_share + bar.biased_share <= 1.0 + 1e-12
    shown = bar.interval()
    assert shown == pytest.approx(counted.bounds["biased_share"], abs=1e-12)
    observed = bar.observed()
    assert observed[-1][1] == shown and len(observed) == len(bar.history) > 1
    for (_, (low, high)), (_, (next_low, next_high)) in itertools.pairwise(observed):
        assert low <= next_low <= next_high <= high, "each interval inside the one before"
    for _, (low, high) in observed:
        assert low <= 0.5 <= high, "the closed form: biased iff 0.25 < x <= 0.75"
    assert bar.bar.n == bar.analysed
    text = work_done("causal_fairness", counted)
    assert text.startswith("decided ") and "certified fair" in text
    assert f"{bar.analysed:,.0f} partitions analysed in " in text
    assert "proven fair" in text and "share of the query" in text


def test_the_partition_bar_ends_on_the_certificates_numbers() -> None:
    """After the engine returns, the bar shows the certificate's certified shares (not the
    counted ones, which lack the engine's rounding margin), and later chunks change nothing."""
    settings = audits(causal("fair", 0.6, target_width=0.02))[0]
    bar = PartitionProgress("fair", enabled=True)
    certificate = run_audit(settings, NETWORK, unit_population(), None, None,
                            **bar.engine_options())
    before = bar.describe()
    bar.finish(certificate)
    shares = certificate.details["certified_shares"]
    assert bar.describe() == (
        f"certified fair {100 * shares['fair']:.2f} %, biased "
        f"{100 * shares['biased_everywhere']:.2f} %, contains bias "
        f"{100 * shares['contains_bias']:.2f} %, undecided {100 * shares['undecided']:.2f} %")
    assert before.startswith("certified fair ")
    assert bar.bar.postfix == bar.describe()
    assert bar.shares[-1][1:] == (shares["fair"], shares["biased_everywhere"])
    counted = bar.analysed
    run_audit(settings, NETWORK, unit_population(), None, None, **bar.engine_options())
    assert bar.analysed == counted and bar.shares[-1][1:] == (shares["fair"],
                                                              shares["biased_everywhere"])
    bar.close()


def test_chunks_are_counted_from_a_process_pool() -> None:
    """Chunks finishing in other processes are counted in this one (done callbacks)."""
    settings = audits(causal("fair", 0.6))[0]
    problem = build_problem(NETWORK, ["s"], domain=None)
    bar = PartitionProgress("fair", enabled=False)
    with ChunkCounter(ProcessPoolExecutor(max_workers=1), bar.chunk_done) as executor:
        certificate = certify_causal_fairness(problem, engine_settings(settings), executor)
    assert bar.analysed == certificate.cost["analysed_partitions"] > 0
    assert bar.fair_share == pytest.approx(certificate.details["fair_fraction"], abs=1e-12)


def test_a_time_bar_advances_with_the_clock_and_stops_at_the_budget() -> None:
    bar = TimeProgress("mono", enabled=True, budget_s=1.0)
    time.sleep(1.5)
    bar.close()
    assert bar.bar.n == pytest.approx(1.0)
    unlimited = TimeProgress("mono", enabled=True, budget_s=None)
    time.sleep(0.6)
    unlimited.close()
    assert unlimited.bar.n >= 0.6


def test_pv_bar_counts_boxes_from_the_anytime_reports() -> None:
    bar = BoxProgress("parity", "ratio", enabled=True)
    for boxes, open_boxes in ((10, 4), (25, 7), (25, 0)):
        bar.report(PVProgress(probabilities={}, value=(0.5, 0.9), verdict="unknown",
                              boxes=boxes, open_boxes=open_boxes, elapsed_s=0.1))
    bar.close()
    assert bar.boxes == bar.bar.n == 25
    certificate = sample_certificate()
    assert work_done("demographic_parity", certificate) == \
        "900 boxes bounded in 9 iterations (1.25 s); stopped by: decided"


def test_the_audit_step_keeps_the_observed_causal_bounds() -> None:
    """The chart and the step metrics of a causal audit under the uniform measure get the
    bounds its bar observed; the certificate stays the engine's (no history written)."""
    config = parse_config({"model": {"uri": "m.onnx"}, "audits": [
        causal("uniform", 0.6), causal("weighted", 0.6, measure="population"),
        {"kind": "monotonicity", "name": "mono", "feature": "x", "min_probability": 0.9}]})
    certificates, observed = certify_observed(config, NETWORK, unit_population(), False)
    assert set(observed) == {"uniform"}
    certificate = certificates["uniform"]
    assert "history" not in certificate.details
    assert certificate.bounds == run_audit(config.audits[0], NETWORK, unit_population()).bounds
    anytime = observed["uniform"]
    times, lows, highs = history_series(certificate, "biased_share", anytime)
    assert times == sorted(times) and len(times) >= len(anytime) > 1
    assert (lows[-1], highs[-1]) == certificate.bounds["biased_share"]
    metrics = history_metrics(config.audits[0], certificate, anytime)
    assert [metric.step for metric in metrics] == [step for step in range(len(anytime))
                                                   for _ in ("lower", "upper")]
    assert history_metrics(config.audits[0], certificate) == []
