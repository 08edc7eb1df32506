"""The population-fidelity check (:mod:`verifier.audits.fidelity`) against closed forms.

Data with a known dependence (``proxy`` a noisy copy of ``sex``, a model reading only
``proxy``; :mod:`fidelity_cases`): the independent product fitted to it proves parity
(ratio 1) while the data's interval, which must cover the closed-form ratio, contradicts it,
and the gate fails (or warns under ``population_contradicted: warn``); a Bayesian network with
the edge ``sex -> proxy`` proves the violation and the data agrees. The data's interval covers
the truth at its stated level on 200 seeded samples, the allowance being an exact binomial
quantile. Clopper–Pearson is checked against beta quantiles, the interval arithmetic against
every corner.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fidelity_cases import (
    COLUMNS,
    PARITY,
    proxy_frame,
    proxy_model,
    true_difference,
    true_ratio,
)
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import beta, binom

from certgate.population_data import fit_population
from configs.schema import ConfigError, GatePolicy, parse_config
from pipeline_steps.fidelity_data import DataError, fitted_from_rows, given_rows
from pipeline_steps.fidelity_report import fidelity_html
from pipeline_steps.fidelity_step import fidelity_line, fidelity_summary
from pipeline_steps.gate import decide
from verifier.audits import (
    CausalFairnessSettings,
    DemographicParitySettings,
    fidelity_check,
    run_audit,
)
from verifier.audits.fidelity import (
    DataRows,
    FidelityOptions,
    NoData,
    absolute_difference_interval,
    clopper_pearson,
    population_assumptions,
    ratio_interval,
)
from verifier.certificate import Certificate
from verifier.convert.torch_module import from_torch
from verifier.errors import CertgateInputError
from verifier.population import population_from_json

AGREEMENT = 0.9
SETTINGS = DemographicParitySettings(**PARITY)


@pytest.fixture(scope="module")
def network():
    return from_torch(proxy_model(), COLUMNS)


@pytest.fixture(scope="module")
def frame():
    return proxy_frame(3000, AGREEMENT, seed=7)


def rows_of(frame) -> DataRows:
    return DataRows(frame[COLUMNS].to_numpy(dtype=np.float64), {"origin": "test"})


def test_independent_population_is_proven_fair_and_contradicted(network, frame) -> None:
    population = fit_population(frame, structure="independent")
    assert population.distribution.kind == "product"
    certificate = run_audit(SETTINGS, network, population)
    assert certificate.verdict == "satisfied"
    low, high = certificate.bounds["value"]
    assert low <= 1.0 <= high  # the product's ratio is exactly 1
    record = fidelity_check(SETTINGS, certificate, network, population, rows_of(frame))
    assert record["status"] == "contradicted"
    empirical = record["empirical"]["interval"]
    assert empirical[0] <= true_ratio(AGREEMENT) <= empirical[1]
    assert empirical[1] < low
    assert record["certified"] == [low, high]
    assumptions = record["assumptions"]
    assert assumptions["structure"] == "independent"
    assert assumptions["protected_dependents"] == []
    proxy = next(entry for entry in record["fit_statistics"]["group_mean_difference"]
                 if entry["column"] == "proxy")
    data_low, data_high = proxy["data"]["interval"]
    assert data_low <= 1.0 - 2.0 * AGREEMENT <= data_high  # E[proxy|0] − E[proxy|1] = −0.8
    assert proxy["disjoint"]  # the product's difference is 0
    share = record["fit_statistics"]["protected_share"]
    assert not share["disjoint"] and share["population"] == pytest.approx(
        float(np.mean(frame["sex"] == 1)))

    certificate.population_fidelity = record
    failed = decide([SETTINGS], {SETTINGS.name: certificate}, GatePolicy())
    assert failed.outcome == "failed" and failed.checks[0].status == "contradicted"
    assert "contradicted by the data" in failed.reasons_by_group()["failing"][0]
    warned = decide([SETTINGS], {SETTINGS.name: certificate},
                    GatePolicy(population_contradicted="warn"))
    assert warned.outcome == "warned" and warned.checks[0].status == "contradicted_warn"
    assert warned.reasons_by_group()["warning"] and not warned.reasons_by_group()["passing"]


def test_dependent_population_proves_the_violation_and_agrees(network, frame) -> None:
    population = fit_population(frame, parents={"proxy": ["sex"]})
    certificate = run_audit(SETTINGS, network, population)
    assert certificate.verdict == "violated"
    record = fidelity_check(SETTINGS, certificate, network, population, rows_of(frame))
    assert record["status"] == "consistent"
    assert record["assumptions"]["edges"] == [["sex", "proxy"]]
    assert record["assumptions"]["protected_dependents"] == ["proxy"]
    certificate.population_fidelity = record
    assert decide([SETTINGS], {SETTINGS.name: certificate}, GatePolicy()).outcome == "failed"
    assert decide([SETTINGS], {SETTINGS.name: certificate},
                  GatePolicy()).checks[0].status == "proven_fail"


def test_undecided_under_a_contradicted_population_follows_both_policies() -> None:
    certificate = Certificate(audit="demographic_parity", verdict="unknown",
                              bounds={"value": (0.7, 0.9)},
                              population_fidelity={"status": "contradicted", "reason": "r"})
    both_warn = GatePolicy(undecided="warn", population_contradicted="warn")
    assert decide([SETTINGS], {SETTINGS.name: certificate}, both_warn).outcome == "warned"
    undecided_fails = GatePolicy(undecided="fail", population_contradicted="warn")
    assert decide([SETTINGS], {SETTINGS.name: certificate}, undecided_fails).outcome == \
        "failed"
    contradiction_fails = GatePolicy(undecided="warn", population_contradicted="fail")
    decision = decide([SETTINGS], {SETTINGS.name: certificate}, contradiction_fails)
    assert decision.outcome == "failed" and decision.checks[0].status == "contradicted"


COVERAGE_SAMPLES = 200
COVERAGE_ROWS = 400
COVERAGE_FAILURE = 1e-3


@pytest.mark.parametrize("form", ["ratio", "difference"])
def test_interval_covers_the_truth_at_its_level(network, form: str) -> None:
    """On 200 seeded samples the interval covers the closed-form value at least as often as a
    Binomial(200, level) count exceeds its 0.1 % quantile (exact, scipy.stats.binom)."""
    agreement, level = 0.7, 0.9
    settings = DemographicParitySettings(**{**PARITY, "form": form,
                                         "gamma": 0.8 if form == "ratio" else 0.2})
    truth = true_ratio(agreement) if form == "ratio" else true_difference(agreement)
    population = fit_population(proxy_frame(2000, agreement, seed=1),
                                parents={"proxy": ["sex"]})
    certificate = Certificate(audit="demographic_parity", verdict="unknown",
                              bounds={"value": (truth, truth)})
    options = FidelityOptions(level=level, population_samples=200)
    covered = 0
    for seed in range(COVERAGE_SAMPLES):
        sample = rows_of(proxy_frame(COVERAGE_ROWS, agreement, seed=1000 + seed))
        record = fidelity_check(settings, certificate, network, population, sample, options)
        low, high = record["empirical"]["interval"]
        covered += low <= truth <= high
    assert covered >= binom.ppf(COVERAGE_FAILURE, COVERAGE_SAMPLES, level)


def test_the_true_rates_and_ratio_are_consistent_at_the_level(network) -> None:
    """Certified at the closed-form rates and ratio, the check (which also reads each rate)
    says *consistent* on 200 seeded samples at least as often as a Binomial(200, level)
    count exceeds its 0.1 % quantile: the rates' intervals hold together at the level, so
    reading them adds no false alarm beyond it."""
    agreement, level = 0.7, 0.9
    truth = true_ratio(agreement)
    population = fit_population(proxy_frame(2000, agreement, seed=1),
                                parents={"proxy": ["sex"]})
    certificate = Certificate(audit="demographic_parity", verdict="unknown", bounds={
        "value": (truth, truth), "p_unprivileged": (1 - agreement, 1 - agreement),
        "p_privileged": (agreement, agreement)})
    options = FidelityOptions(level=level, population_samples=200)
    consistent = 0
    for seed in range(COVERAGE_SAMPLES):
        sample = rows_of(proxy_frame(COVERAGE_ROWS, agreement, seed=1000 + seed))
        record = fidelity_check(SETTINGS, certificate, network, population, sample, options)
        assert record["empirical"]["p_privileged"]["certified"] == [agreement, agreement]
        consistent += record["status"] == "consistent"
    assert consistent >= binom.ppf(COVERAGE_FAILURE, COVERAGE_SAMPLES, level)


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
       st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_clopper_pearson_is_the_beta_quantile_interval(case: tuple[int, int],
                                                       level: float) -> None:
    successes, trials = case
    alpha = 1.0 - level
    low, high = clopper_pearson(successes, trials, level)
    expected_low = 0.0 if successes == 0 else beta.ppf(alpha / 2, successes,
                                                       trials - successes + 1)
    expected_high = 1.0 if successes == trials else beta.ppf(1 - alpha / 2, successes + 1,
                                                             trials - successes)
    assert low == pytest.approx(expected_low, rel=1e-9, abs=1e-12)
    assert high == pytest.approx(expected_high, rel=1e-9, abs=1e-12)


rate = st.floats(0.0, 1.0)


@given(rate, rate, rate, rate)
def test_interval_arithmetic_encloses_every_corner(a: float, b: float, c: float,
                                                   d: float) -> None:
    unprivileged, privileged = (min(a, b), max(a, b)), (min(c, d), max(c, d))
    ratio_low, ratio_high = ratio_interval(unprivileged, privileged)
    difference_low, difference_high = absolute_difference_interval(unprivileged, privileged)
    grid_u = np.linspace(*unprivileged, 7)
    grid_p = np.linspace(*privileged, 7)
    for u in grid_u:
        for p in grid_p:
            assert difference_low <= abs(u - p) <= difference_high
            if p > 0:
                assert ratio_low <= u / p <= ratio_high


def test_no_counterpart_and_no_data_are_said(network, frame) -> None:
    population = fit_population(frame, structure="independent")
    certificate = Certificate(audit="x", verdict="unknown", bounds={"value": (0.0, 1.0)})
    causal = CausalFairnessSettings(kind="causal_fairness", name="c", protected=["sex"],
                                    max_biased_share=0.1)
    for premise in (population, fit_population(frame, protected="sex")):
        record = fidelity_check(causal, certificate, network, premise, rows_of(frame))
        assert record["status"] == "unchecked" and "not a frequency" in record["reason"]
        assert record["assumptions"] == population_assumptions(premise)
    missing = fidelity_check(SETTINGS, certificate, network, population,
                             NoData("nothing at hand"))
    assert missing == {"status": "unchecked", "reason": "no check possible: nothing at hand",
                       "assumptions": population_assumptions(population, "sex")}


def test_fitted_from_is_used_only_while_its_hash_matches(frame, tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    document = {**fit_population(frame, structure="independent").to_json(),
                "fitted_from": {"uri": "data.csv", "sha256": digest, "rows": len(frame)}}
    population = population_from_json(json.loads(json.dumps(document)))
    rows = fitted_from_rows(population, COLUMNS, tmp_path / "population.json")
    assert isinstance(rows, DataRows)
    assert rows.source["sha256"] == digest and rows.rows.shape == (len(frame), 3)
    assert population_assumptions(population)["fitted_from"] == {
        "uri": "data.csv", "sha256": digest, "rows": len(frame)}
    assert fitted_from_rows(population, COLUMNS, None).reason.startswith(
        "the population was fitted from data.csv, which is not reachable")
    path.write_text(path.read_text().replace("\n1,", "\n0,", 1))
    changed = fitted_from_rows(population, COLUMNS, tmp_path / "population.json")
    assert isinstance(changed, NoData) and "changed since the fit" in changed.reason


def test_raw_string_columns_are_encoded_as_for_fitting(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    path.write_text("age,sex,extra\n30,Male,x\n40,Female,y\n,Female,z\n")
    rows = given_rows(path, ["age", "sex=Female", "sex=Male", "sex=Other"], "--data")
    assert rows.rows.tolist() == [[30.0, 0.0, 1.0, 0.0], [40.0, 1.0, 0.0, 0.0]]
    assert rows.source["rows_dropped"] == 1
    with pytest.raises(DataError, match="lacks the model input column"):
        given_rows(path, ["age", "income"], "--data")
    with pytest.raises(DataError, match="file not found"):
        given_rows(tmp_path / "none.csv", ["age"], "--data")


def test_the_gate_policy_and_fidelity_section_are_validated() -> None:
    base = {"model": {"uri": "model.onnx"}, "audits": [PARITY]}
    with pytest.raises(ConfigError, match=r"gate\.population_contradicted"):
        parse_config({**base, "gate": {"population_contradicted": "ignore"}})
    with pytest.raises(ConfigError, match=r"fidelity\.level"):
        parse_config({**base, "fidelity": {"level": 1.5}})
    with pytest.raises(ConfigError, match=r"fidelity\.dat"):
        parse_config({**base, "fidelity": {"dat": "x.csv"}})
    config = parse_config({**base, "fidelity": {"data": "x.csv"}})
    assert config.gate.population_contradicted == "fail"
    assert config.audit_fingerprint() != parse_config(base).audit_fingerprint()


def test_the_population_unchecked_policy_is_validated_and_not_fingerprinted() -> None:
    base = {"model": {"uri": "model.onnx"}, "audits": [PARITY]}
    with pytest.raises(ConfigError, match=r"gate\.population_unchecked"):
        parse_config({**base, "gate": {"population_unchecked": "ignore"}})
    assert parse_config(base).gate.population_unchecked == "pass"
    failing = parse_config({**base, "gate": {"population_unchecked": "fail"}})
    assert failing.audit_fingerprint() == parse_config(base).audit_fingerprint()


def test_an_unchecked_population_leaves_other_verdicts_to_their_own_policies() -> None:
    unchecked = {"status": "unchecked", "reason": "no check possible: the table changed"}
    undecided = Certificate(audit="demographic_parity", verdict="unknown",
                            bounds={"value": (0.7, 0.9)}, population_fidelity=unchecked)
    fail = GatePolicy(undecided="warn", population_unchecked="fail")
    decision = decide([SETTINGS], {SETTINGS.name: undecided}, fail)
    assert decision.outcome == "warned" and decision.checks[0].status == "undecided"
    violated = Certificate(audit="demographic_parity", verdict="violated",
                           bounds={"value": (0.5, 0.6)}, population_fidelity=unchecked)
    decision = decide([SETTINGS], {SETTINGS.name: violated}, fail)
    assert decision.outcome == "failed" and decision.checks[0].status == "proven_fail"


def test_assumptions_name_features_and_dependents() -> None:
    frame = pd.DataFrame({"age": [20, 30, 40, 50, 60, 25], "sex": ["F", "M", "F", "M", "M", "F"],
                          "score": [0.1, 0.5, 0.2, 0.9, 0.4, 0.3]})
    product = population_assumptions(fit_population(frame, structure="independent"), "sex=M")
    assert product["factors"] == [["age"], ["sex"], ["score"]]
    assert product["summary"] == "independent features"
    assert product["protected_dependents"] == ["sex=F"]
    network = population_assumptions(fit_population(
        frame, parents={"score": ["sex"], "age": []}), "sex=M")
    assert network["edges"] == [["sex", "score"]]
    assert set(network["protected_dependents"]) == {"sex=F", "score"}


def test_python_api_checks_the_data_it_is_given(frame, tmp_path: Path) -> None:
    import certgate

    path = tmp_path / "train.csv"
    frame.to_csv(path, index=False)
    population = fit_population(frame, structure="independent")
    (certificate,) = certgate.audit(proxy_model(), population, [PARITY], input_names=COLUMNS,
                                    data=path)
    assert certificate.verdict == "satisfied"
    assert certificate.population_fidelity["status"] == "contradicted"
    assert certificate.population_fidelity["data"]["origin"] == "data"
    (bare,) = certgate.audit(proxy_model(), population, [PARITY], input_names=COLUMNS)
    assert bare.population_fidelity["status"] == "unchecked"
    with pytest.raises(CertgateInputError, match="fidelity_level"):
        certgate.audit(proxy_model(), population, [PARITY], input_names=COLUMNS,
                       fidelity_level=1.0)


def test_qualified_rows_and_undecided_classes(network, frame) -> None:
    """A ``qualified`` condition restricts both groups to the rows it holds on; a row at an
    exact tie (logit 10·0.5 − 5 = 0) has a class, the README's (class 1 iff the logit > 0),
    decided in exact arithmetic: it counts as unfavourable, for sure."""
    population = fit_population(frame, parents={"proxy": ["sex"]})
    certificate = Certificate(audit="d", verdict="unknown", bounds={"value": (0.0, 1.0)})
    qualified = DemographicParitySettings(**{**PARITY, "qualified": "x.income >= 0.5"})
    record = fidelity_check(qualified, certificate, network, population, rows_of(frame))
    rich = frame[frame["income"] >= 0.5]
    assert record["empirical"]["p_privileged"]["rows"] == int((rich["sex"] == 1).sum())
    assert record["empirical"]["p_unprivileged"]["rows"] == int((rich["sex"] == 0).sum())
    tied = frame.head(50).assign(proxy=0.5)
    record = fidelity_check(SETTINGS, certificate, network, population, rows_of(
        pd.concat([tied, frame])))
    group = record["empirical"]["p_unprivileged"]
    tied_unprivileged = int((tied["sex"] == 0).sum())
    assert tied_unprivileged > 0
    assert group["rows"] == int((frame["sex"] == 0).sum()) + tied_unprivileged
    assert group["undecided"] == 0
    decided = frame["sex"] == 0
    favourable = int((frame.loc[decided, "proxy"] == 1).sum())
    assert group["favourable"] == favourable
    sided = 1 - (1 - 0.95) / 2
    assert group["interval"] == list(clopper_pearson(favourable, group["rows"], sided))


def test_rows_are_classified_in_chunks_with_the_same_result(
        network, frame, monkeypatch: pytest.MonkeyPatch) -> None:
    import verifier.audits.fidelity as fidelity

    population = fit_population(frame, parents={"proxy": ["sex"]})
    certificate = Certificate(audit="d", verdict="unknown", bounds={"value": (0.0, 1.0)})
    whole = fidelity_check(SETTINGS, certificate, network, population, rows_of(frame))
    monkeypatch.setattr(fidelity, "CHUNK_ROWS", 7)
    chunked = fidelity_check(SETTINGS, certificate, network, population, rows_of(frame))
    assert chunked["empirical"] == whole["empirical"]


def threshold_network():
    """Class 1 iff ``x0 > 0.5`` (logit ``10·x0 − 5``); ``x1`` is not read."""
    import torch

    layer = torch.nn.Linear(2, 1)
    with torch.no_grad():
        layer.weight[:] = torch.tensor([[10.0, 0.0]])
        layer.bias[:] = torch.tensor([-5.0])
    return from_torch(torch.nn.Sequential(layer).double(), ["x0", "x1"])


def uniform_rows(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x0": rng.random(rows), "x1": rng.random(rows)})


NOISE = {"kind": "noise_robustness", "features": ["x0"], "noise_uniform": (-0.1, 0.1),
         "min_probability": 0.9}
NOISE_TRUTH = 1.0 - 0.1 / 2
"""``x0 ~ U(0, 1)``, class 1 iff ``x0 > 0.5``, noise ``U(−a, a)`` on ``x0``: the class is kept
with probability ``1 − a/2`` exactly (it flips iff ``x0`` lies within ``|n|`` of 0.5 on the
side ``n`` crosses)."""


def test_noise_robustness_against_its_closed_form() -> None:
    from verifier.audits import NoiseRobustnessSettings

    network = threshold_network()
    frame = uniform_rows(4000, 5)
    population = fit_population(frame, structure="independent")
    settings = NoiseRobustnessSettings(**NOISE)
    truth = NOISE_TRUTH
    rows = DataRows(frame.to_numpy(), {"origin": "test"})
    wrong = Certificate(audit="n", verdict="satisfied", bounds={"probability": (0.99, 1.0)})
    record = fidelity_check(settings, wrong, network, population, rows)
    low, high = record["empirical"]["interval"]
    assert low <= truth <= high and high < 0.99
    assert record["status"] == "contradicted" and record["empirical"]["rows"] == 4000
    right = Certificate(audit="n", verdict="satisfied", bounds={"probability": (0.94, 0.96)})
    assert fidelity_check(settings, right, network, population, rows)["status"] == "consistent"


def test_noise_interval_covers_the_truth_at_its_level() -> None:
    from verifier.audits import NoiseRobustnessSettings

    assert_covers(NoiseRobustnessSettings(**NOISE), threshold_network(), NOISE_TRUTH, 2000)


def assert_covers(settings, network, truth: float, first_seed: int, level: float = 0.9) -> None:
    """On ``COVERAGE_SAMPLES`` seeded uniform samples the probability interval covers
    ``truth`` at least as often as a Binomial(samples, level) count exceeds its 0.1 %
    quantile (exact, scipy.stats.binom)."""
    population = fit_population(uniform_rows(100, 0), structure="independent")
    certificate = Certificate(audit="p", verdict="unknown", bounds={"probability": (truth, truth)})
    covered = 0
    for seed in range(COVERAGE_SAMPLES):
        rows = DataRows(uniform_rows(COVERAGE_ROWS, first_seed + seed).to_numpy(), {})
        record = fidelity_check(settings, certificate, network, population, rows,
                                FidelityOptions(level=level, seed=seed))
        low, high = record["empirical"]["interval"]
        covered += low <= truth <= high
    assert covered >= binom.ppf(COVERAGE_FAILURE, COVERAGE_SAMPLES, level)


def test_the_report_renders_every_kind_of_record(network, frame) -> None:
    from pipeline_steps.fidelity_report import fidelity_html
    from verifier.audits import NoiseRobustnessSettings

    population = fit_population(frame, structure="independent")
    parity = Certificate(audit="d", verdict="satisfied", bounds={"value": (0.99, 1.01)})
    parity.population_fidelity = fidelity_check(SETTINGS, parity, network, population,
                                                rows_of(frame))
    page = fidelity_html(parity)
    assert "contradicted" in page and "Fit statistics" in page and "p_privileged" in page
    noise = Certificate(audit="n", verdict="satisfied", bounds={"probability": (0.9, 1.0)})
    noise.population_fidelity = fidelity_check(
        NoiseRobustnessSettings(**NOISE), noise, threshold_network(),
        fit_population(uniform_rows(200, 1), structure="independent"),
        DataRows(uniform_rows(200, 1).to_numpy(), {}))
    assert "Clopper-Pearson on the rows whose class is kept" in fidelity_html(noise)
    bare = Certificate(audit="d", verdict="satisfied", bounds={"value": (0.99, 1.01)},
                       population_fidelity=fidelity_check(SETTINGS, parity, network,
                                                          population, NoData("none here")))
    assert "unchecked" in fidelity_html(bare) and "none here" in fidelity_html(bare)
    assert fidelity_html(Certificate(audit="d", verdict="unknown")) == ""


def bump_network():
    """Class 1 iff ``0.25 < x0 < 0.75`` (logit ``x0 − 0.25 − relu(2·x0 − 1)``, with
    ``relu(x0) = x0`` on ``[0, 1]``); ``x1`` is not read."""
    import torch

    hidden = torch.nn.Linear(2, 2)
    out = torch.nn.Linear(2, 1)
    with torch.no_grad():
        hidden.weight[:] = torch.tensor([[1.0, 0.0], [2.0, 0.0]])
        hidden.bias[:] = torch.tensor([0.0, -1.0])
        out.weight[:] = torch.tensor([[1.0, -1.0]])
        out.bias[:] = torch.tensor([-0.25])
    return from_torch(torch.nn.Sequential(hidden, torch.nn.ReLU(), out).double(), ["x0", "x1"])


MONOTONE = {"kind": "monotonicity", "feature": "x0", "use_prior": True, "min_probability": 0.5}
MONOTONE_TRUTH = 0.75
"""``x0, x0′`` independent ``U(0, 1)`` given ``x0 <= x0′``: the class 1 of the bump is lost iff
``x0 ∈ (0.25, 0.75)`` and ``x0′ >= 0.75``, probability ``0.5 · 0.25 / 0.5 = 0.25``."""


def test_monotonicity_against_its_closed_form() -> None:
    from verifier.audits import MonotonicitySettings

    network = bump_network()
    frame = uniform_rows(8000, 11)
    population = fit_population(frame, structure="independent")
    settings = MonotonicitySettings(**MONOTONE)
    rows = DataRows(frame.to_numpy(), {"origin": "test"})
    wrong = Certificate(audit="m", verdict="satisfied", bounds={"probability": (0.9, 1.0)})
    record = fidelity_check(settings, wrong, network, population, rows)
    low, high = record["empirical"]["interval"]
    assert low <= MONOTONE_TRUTH <= high < 0.9
    assert record["status"] == "contradicted" and record["empirical"]["rows"] == 8000
    assert 1800 <= record["empirical"]["pairs"] <= 2200  # 4000 pairs, about half ordered
    right = Certificate(audit="m", verdict="satisfied", bounds={"probability": (0.74, 0.76)})
    assert fidelity_check(settings, right, network, population, rows)["status"] == "consistent"
    uniform = MonotonicitySettings(**{**MONOTONE, "use_prior": False})
    record = fidelity_check(uniform, wrong, network, population, rows)
    assert record["status"] == "unchecked" and "uniform on the support box" in record["reason"]


def test_monotonicity_interval_covers_the_truth_at_its_level() -> None:
    from verifier.audits import MonotonicitySettings

    assert_covers(MonotonicitySettings(**MONOTONE), bump_network(), MONOTONE_TRUTH, 5000)


def test_rows_dropped_for_a_missing_value_word_name_the_column_word_and_count(
        tmp_path: Path) -> None:
    path = tmp_path / "regions.csv"
    path.write_text("age,region\n30,EU\n35,AS\n40,NA\n50,NA\n,EU\n60,null\n")
    rows = given_rows(path, ["age", "region=AS", "region=EU", "region=NA"], "--data")
    assert rows.rows.tolist() == [[30.0, 0.0, 1.0, 0.0], [35.0, 1.0, 0.0, 0.0]]
    assert rows.source["rows_dropped"] == 4
    age, region = rows.source["missing_values"]
    assert age == "column 'age': missing values in 1 of 6 rows"
    assert region.startswith("column 'region': missing values in 3 of 6 rows, read from the "
                             "text 'NA' in 2, 'null' in 1")
    assert "rename it in the data" in region
    certificate = Certificate(audit="demographic_parity", verdict="satisfied",
                              bounds={"value": (0.9, 1.0)}, population_fidelity={
                                  "status": "consistent", "reason": "r",
                                  "assumptions": {"summary": "independent features"},
                                  "data": rows.source})
    line = fidelity_line(certificate)
    assert line is not None and "4 rows dropped" in line and "'NA' in 2" in line
    assert "&#x27;NA&#x27; in 2" in fidelity_html(certificate)
    assert fidelity_summary(certificate)["data"]["missing_values"] == [age, region]


def test_a_category_left_alone_by_dropped_words_says_what_was_dropped(tmp_path: Path) -> None:
    path = tmp_path / "two_regions.csv"
    path.write_text("age,region\n30,EU\n40,NA\n50,NA\n")
    with pytest.raises(DataError, match=r"got \['EU'\] \(after dropping 2 rows for a missing "
                                        r"value: column 'region': missing values in 2 of 3 "
                                        r"rows, read from the text 'NA' in 2"):
        given_rows(path, ["age", "region=EU", "region=NA"], "--data")

