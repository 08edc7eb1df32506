"""The audit configuration: validation errors name the field, ${ENV} expansion, JSON Schema."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from configs.schema import (
    CertgateConfig,
    ConfigError,
    Requirement,
    expand_environment,
    json_schema,
    load_config,
    parse_config,
)

CONFIGS = Path(__file__).resolve().parent.parent / "configs"

MINIMAL: dict[str, Any] = {
    "model": {"uri": "models:/credit@candidate"},
    "audits": [{
        "kind": "demographic_parity", "protected": "sex", "privileged": 1,
        "favorable_class": 1, "gamma": 0.8,
    }],
}


def with_change(path: list[str | int], value: Any) -> dict[str, Any]:
    document = copy.deepcopy(MINIMAL)
    target: Any = document
    for key in path[:-1]:
        target = target.setdefault(key, {}) if isinstance(key, str) else target[key]
    target[path[-1]] = value
    return document


def error_of(document: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(document, "c.yaml")
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", ["demo.yaml", "template.yaml"])
def test_shipped_configs_are_valid(name: str) -> None:
    config = load_config(CONFIGS / name)
    assert config.audits[0].kind == "demographic_parity"
    assert config.gate.promote_alias == "champion"


def test_defaults_of_a_minimal_config() -> None:
    config = parse_config(MINIMAL)
    assert config.gate.undecided == "fail"
    assert config.executor == "local"
    assert config.model.population_uri is None
    audit = config.audits[0]
    assert (audit.name, audit.form, audit.timeout_s) == ("demographic_parity", "ratio", 60.0)
    assert audit.requirement.describe() == "ratio > 0.8"


@pytest.mark.parametrize(("path", "field"), [
    (["audits", 0, "gamm"], "audits[0].gamm: unknown key"),
    (["gate", "undecidd"], "gate.undecidd: unknown key"),
    (["modle"], "modle: unknown key"),
    (["model", "population"], "model.population: unknown key"),
    (["tracking", "uri"], "tracking.uri: unknown key"),
    (["deploy"], "deploy: Input should be"),
])
def test_unknown_keys_are_errors_naming_the_field(path: list[str | int], field: str) -> None:
    message = error_of(with_change(path, "x"))
    assert message.startswith("c.yaml: ")
    assert field in message


def test_missing_key_and_bad_values_name_the_field() -> None:
    document = copy.deepcopy(MINIMAL)
    del document["audits"][0]["protected"]
    assert "audits[0].protected: required key missing" in error_of(document)
    assert "audits[0]: gamma must lie in (0, 1]" in error_of(
        with_change(["audits", 0, "gamma"], 1.5))
    message = error_of(with_change(["audits", 0, "form"], "ratios"))
    assert "audits[0].form" in message
    assert "gate.undecided" in error_of(with_change(["gate", "undecided"], "maybe"))
    assert "audits[0].timeout_s" in error_of(with_change(["audits", 0, "timeout_s"], -1))
    assert "executor: unknown executor 'ray'" in error_of(with_change(["executor"], "ray"))


def test_unknown_or_missing_audit_kind() -> None:
    message = error_of(with_change(["audits", 0, "kind"], "demographic_parit"))
    assert "audits[0].kind: unknown audit kind 'demographic_parit'" in message
    document = copy.deepcopy(MINIMAL)
    del document["audits"][0]["kind"]
    assert "audits[0].kind: required key missing" in error_of(document)


def test_audit_names_must_be_distinct_and_audits_present() -> None:
    document = copy.deepcopy(MINIMAL)
    document["audits"].append(copy.deepcopy(document["audits"][0]))
    assert "two audits are named 'demographic_parity'" in error_of(document)
    assert "audits" in error_of(with_change(["audits"], []))


def test_difference_form_threshold_semantics() -> None:
    document = with_change(["audits", 0, "form"], "difference")
    document["audits"][0]["gamma"] = 0.1
    requirement = parse_config(document).audits[0].requirement
    assert requirement.describe() == "difference < 0.1"
    assert requirement.proven_pass(0.0, 0.0999)
    assert not requirement.proven_pass(0.05, 0.1)
    assert requirement.proven_fail(0.1, 0.3)
    document["audits"][0]["gamma"] = 1.0
    assert "audits[0]: gamma must lie in (0, 1) for the difference form" in error_of(document)


def test_ratio_requirement_only_passes_when_proven() -> None:
    requirement = parse_config(MINIMAL).audits[0].requirement
    assert requirement.proven_pass(0.81, 2.0)
    assert not requirement.proven_pass(0.8, 2.0)
    assert not requirement.proven_fail(0.5, 0.81)
    assert requirement.proven_fail(0.1, 0.8)


def test_environment_expansion(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CERTGATE_TEST_URI", "models:/x/3")
    monkeypatch.delenv("CERTGATE_UNSET", raising=False)
    document = with_change(["model", "uri"], "${CERTGATE_TEST_URI}")
    document["tracking"] = {"tracking_uri": "${CERTGATE_UNSET:-sqlite:///m.db}",
                            "experiment": "cost $${literal}"}
    config = parse_config(document)
    assert config.model.uri == "models:/x/3"
    assert config.tracking.tracking_uri == "sqlite:///m.db"
    assert config.tracking.experiment == "cost ${literal}"
    message = error_of(with_change(["model", "population_uri"], "${CERTGATE_UNSET}"))
    assert "model.population_uri: environment variable CERTGATE_UNSET is not set" in message


def test_environment_values_are_validated_after_expansion(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CERTGATE_TEST_GAMMA", "0.9")
    config = parse_config(with_change(["audits", 0, "gamma"], "${CERTGATE_TEST_GAMMA}"))
    assert config.audits[0].gamma == 0.9
    monkeypatch.setenv("CERTGATE_TEST_GAMMA", "high")
    assert "audits[0].gamma" in error_of(
        with_change(["audits", 0, "gamma"], "${CERTGATE_TEST_GAMMA}"))


names = st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True)
texts = st.text(alphabet=st.characters(blacklist_characters="$", blacklist_categories=["Cs"]),
                max_size=20)


@given(st.lists(st.tuples(names, texts, texts), min_size=1, max_size=4))
def test_expansion_substitutes_exactly(parts: list[tuple[str, str, str]]) -> None:
    env = {name: value for name, value, _ in parts}
    template = "".join(f"{prefix}${{{name}}}" for name, _, prefix in parts)
    expected = "".join(f"{prefix}{env[name]}" for name, _, prefix in parts)
    assert expand_environment({"k": [template]}, env) == {"k": [expected]}


@given(texts)
def test_text_without_references_is_unchanged(text: str) -> None:
    assert expand_environment(text, {}) == text


def test_yaml_errors_and_missing_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("model:\n  uri: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken.yaml: line \d+, column \d+: invalid YAML"):
        load_config(broken)
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.yaml")
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n")
    with pytest.raises(ConfigError, match="expected a mapping at the top level"):
        load_config(listed)


@pytest.mark.parametrize(("text", "key", "line"), [
    ("model: {uri: a.onnx}\naudits:\n  - kind: demographic_parity\n    protected: sex\n"
     "    privileged: 1\n    favorable_class: 1\n    gamma: 0.8\n    gamma: 0.5\n",
     "gamma", 8),
    ("model: {uri: a.onnx}\nmodel: {uri: b.onnx}\naudits: []\n", "model", 2),
    ("model: {uri: a.onnx, uri: b.onnx}\naudits: []\n", "uri", 1),
])
def test_a_key_given_twice_is_refused_naming_it(tmp_path: Path, text: str, key: str,
                                                 line: int) -> None:
    """YAML forbids a key given twice in one mapping; PyYAML kept the last value, so a second
    ``gamma`` silently set the threshold the gate reads (0.5 where the file also says 0.8)."""
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"twice.yaml: line {line}, column \d+: invalid YAML: "
                                          rf"key '{key}' is given twice"):
        load_config(path)


def test_yaml_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(MINIMAL))
    assert load_config(path) == CertgateConfig.model_validate(MINIMAL)


def test_fingerprint_follows_the_audit_settings_only() -> None:
    base = parse_config(MINIMAL).audit_fingerprint()
    assert parse_config(with_change(["gate", "undecided"], "warn")).audit_fingerprint() == base
    assert parse_config(with_change(["model", "uri"], "models:/y/1")).audit_fingerprint() == base
    assert parse_config(with_change(["audits", 0, "gamma"], 0.7)).audit_fingerprint() != base
    assert parse_config(with_change(["model", "input_names"], ["a", "b"])).audit_fingerprint() \
        != base
    assert parse_config(
        with_change(["validation", "seed"], 3)).audit_fingerprint() != base


def test_json_schema_forbids_extra_keys_everywhere() -> None:
    schema = json_schema()
    objects = [schema, *schema["$defs"].values()]
    for definition in objects:
        if definition.get("type") == "object":
            assert definition.get("additionalProperties") is False, definition.get("title")
    audits = schema["properties"]["audits"]["items"]
    assert audits["discriminator"]["propertyName"] == "kind"
    assert "demographic_parity" in audits["discriminator"]["mapping"]


# ------------------------------------------------------------------------------ more kinds

KIND_EXAMPLES: dict[str, dict[str, Any]] = {
    "causal_fairness": {"kind": "causal_fairness", "protected": ["sex"],
                        "max_biased_share": 0.05},
    "monotonicity": {"kind": "monotonicity", "feature": "income", "min_probability": 0.99},
    "noise_robustness": {"kind": "noise_robustness", "features": ["income"],
                         "noise_uniform": [-0.1, 0.1], "min_probability": 0.95},
    "local_robustness": {"kind": "local_robustness", "center": [0.5, 0.5], "epsilon": 0.1,
                         "min_probability": 0.9},
}


def with_audit(audit: dict[str, Any], **changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(MINIMAL)
    document["audits"] = [{**copy.deepcopy(audit), **changes}]
    return document


def uncommented_template() -> str:
    """The template with its commented audit examples enabled (the block of ``  # `` lines
    after the 'More audit kinds' marker)."""
    lines = (CONFIGS / "template.yaml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "More audit kinds" in line) + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("  # "))
    enabled = [f"  {line[4:]}" for line in lines[start:end]]
    return "\n".join([*lines[:start], *enabled, *lines[end:]])


def test_template_examples_of_every_kind_are_valid(tmp_path: Path) -> None:
    path = tmp_path / "enabled.yaml"
    path.write_text(uncommented_template())
    config = load_config(path)
    assert [audit.kind for audit in config.audits] == ["demographic_parity", *KIND_EXAMPLES]
    assert [audit.requirement.describe() for audit in config.audits[1:]] == [
        "biased_share < 0.05", "probability >= 0.99", "probability >= 0.95",
        "probability >= 0.9",
    ]


def test_defaults_and_requirements_of_the_new_kinds() -> None:
    audits = [parse_config(with_audit(example)).audits[0] for example in KIND_EXAMPLES.values()]
    causal, mono, noise, local = audits
    assert (causal.name, causal.protected_kind, causal.measure, causal.lower_edge,
            causal.max_unstable, causal.timeout_s) == (
        "causal_fairness", "continuous", "uniform", 0.0, 8, 60.0)
    assert causal.requirement == Requirement(quantity="biased_share", label="biased_share",
                                             comparison="<", threshold=0.05)
    population = parse_config(with_audit(KIND_EXAMPLES["causal_fairness"],
                                         measure="population")).audits[0]
    assert population.requirement.quantity == population.requirement.label == \
        "biased_share_population"
    assert (mono.name, mono.decreasing, mono.favorable_class, mono.use_prior) == (
        "monotonicity", False, 1, False)
    assert noise.noise_triangular is None and local.expected_class is None
    for audit in (mono, noise, local):
        assert (audit.requirement.quantity, audit.requirement.comparison) == (
            "probability", ">=")
    one_hot = parse_config(with_audit(KIND_EXAMPLES["causal_fairness"], protected=["a", "b"],
                                      protected_kind="one_hot",
                                      onehot_groups=[["c", "d"]],
                                      query={"e": [0.2, 0.4]})).audits[0]
    assert one_hot.query == {"e": (0.2, 0.4)}


@pytest.mark.parametrize(("kind", "changes", "expected"), [
    ("causal_fairness", {"max_biased_shar": 0.1}, "audits[0].max_biased_shar: unknown key"),
    ("causal_fairness", {"max_biased_share": 0.0},
     "audits[0]: max_biased_share must lie in (0, 1]"),
    ("causal_fairness", {"max_biased_share": 1.5},
     "audits[0]: max_biased_share must lie in (0, 1]"),
    ("causal_fairness", {"measure": "weighted"}, "audits[0].measure: Input should be"),
    ("causal_fairness", {"protected_kind": "onehot"}, "audits[0].protected_kind"),
    ("causal_fairness", {"protected": []}, "audits[0].protected"),
    ("causal_fairness", {"protected": ["a", "b"]},
     "audits[0]: a continuous protected feature is exactly one input"),
    ("causal_fairness", {"protected": ["a", "a"], "protected_kind": "one_hot"},
     "audits[0]: protected lists an input twice"),
    ("causal_fairness", {"protected_kind": "one_hot"},
     "audits[0]: a one_hot protected feature needs at least two inputs: list the group's "
     "columns, or give the categorical feature's name ('sex') without protected_kind"),
    ("causal_fairness", {"protected": ["a", "b"], "protected_kind": "one_hot",
                         "split_values": [0.5]},
     "audits[0]: split_values only apply to a continuous protected input"),
    ("causal_fairness", {"domain": {"age": [5, 1]}},
     "audits[0].domain: the domain interval of 'age' is empty: [5.0, 1.0]"),
    ("causal_fairness", {"onehot_groups": [["c", "d"], ["e"]]},
     "audits[0].onehot_groups[1]: List should have at least 2 items"),
    ("causal_fairness", {"query": {"age": [0.8, 0.2]}},
     "audits[0].query: the query interval of 'age' is empty: [0.8, 0.2]"),
    ("causal_fairness", {"query": {"age": [0.2]}}, "audits[0].query.age"),
    ("causal_fairness", {"lower_edge": -0.1}, "audits[0].lower_edge"),
    ("causal_fairness", {"max_unstable": -1}, "audits[0].max_unstable"),
    ("causal_fairness", {"timeout_s": 0}, "audits[0].timeout_s"),
    ("causal_fairness", {"target_width": float("nan")}, "audits[0].target_width"),
    ("monotonicity", {"featur": "age"}, "audits[0].featur: unknown key"),
    ("monotonicity", {"min_probability": 1.0},
     "audits[0].min_probability: min_probability must lie in [0, 1)"),
    ("monotonicity", {"min_probability": -0.1},
     "audits[0].min_probability: min_probability must lie in [0, 1)"),
    ("monotonicity", {"favorable_class": -1}, "audits[0].favorable_class"),
    ("monotonicity", {"name": "9lives"}, "audits[0].name"),
    ("noise_robustness", {"noise_triangular": [-0.1, 0.0, 0.1]},
     "audits[0]: give exactly one of noise_uniform"),
    ("noise_robustness", {"noise_uniform": None},
     "audits[0]: give exactly one of noise_uniform"),
    ("noise_robustness", {"features": ["income", "age"]},
     "audits[0]: noise_uniform/noise_triangular describe the noise on one feature"),
    ("noise_robustness", {"noise_uniform": [0.1, -0.1]},
     "audits[0]: noise_uniform needs low < high"),
    ("noise_robustness", {"noise_uniform": None, "noise_triangular": [0.0, 0.2, 0.1]},
     "audits[0]: noise_triangular needs low <= mode <= high"),
    ("noise_robustness", {"noise_uniform": [0.1]}, "audits[0].noise_uniform"),
    ("local_robustness", {"epsilon": 0.0}, "audits[0].epsilon"),
    ("local_robustness", {"center": []}, "audits[0].center"),
    ("local_robustness", {"center": [0.5, float("inf")]}, "audits[0].center[1]"),
    ("local_robustness", {"expected_class": -1}, "audits[0].expected_class"),
    ("local_robustness", {"min_probabilty": 0.9}, "audits[0].min_probabilty: unknown key"),
])
def test_new_kinds_reject_bad_values_naming_the_field(kind: str, changes: dict[str, Any],
                                                       expected: str) -> None:
    assert expected in error_of(with_audit(KIND_EXAMPLES[kind], **changes))


def test_missing_threshold_and_known_kinds_are_named() -> None:
    document = with_audit(KIND_EXAMPLES["monotonicity"])
    del document["audits"][0]["min_probability"]
    assert "audits[0].min_probability: required key missing" in error_of(document)
    message = error_of(with_change(["audits", 0, "kind"], "monotonic"))
    assert ("known: causal_fairness, demographic_parity, local_robustness, monotonicity, "
            "noise_robustness") in message


@pytest.mark.parametrize(("comparison", "passing", "failing", "undecided"), [
    (">", [(0.51, 0.9)], [(0.1, 0.5), (0.5, 0.5)], [(0.5, 0.9), (0.4, 0.6)]),
    (">=", [(0.5, 0.9), (0.5, 0.5)], [(0.1, 0.49)], [(0.49, 0.5), (0.4, 0.6)]),
    ("<", [(0.1, 0.49)], [(0.5, 0.9), (0.5, 0.5)], [(0.1, 0.5), (0.4, 0.6)]),
    ("<=", [(0.1, 0.5), (0.5, 0.5)], [(0.51, 0.9)], [(0.5, 0.51), (0.4, 0.6)]),
])
def test_requirement_comparisons_pass_and_fail_only_when_proven(
        comparison: str, passing: list[tuple[float, float]],
        failing: list[tuple[float, float]], undecided: list[tuple[float, float]]) -> None:
    requirement = Requirement(quantity="q", label="q", comparison=comparison, threshold=0.5)
    for interval in passing:
        assert requirement.proven_pass(*interval) and not requirement.proven_fail(*interval)
    for interval in failing:
        assert requirement.proven_fail(*interval) and not requirement.proven_pass(*interval)
    for interval in undecided:
        assert not requirement.proven_pass(*interval)
        assert not requirement.proven_fail(*interval)
    assert requirement.greater_is_better == comparison.startswith(">")
    assert requirement.describe() == f"q {comparison} 0.5"


@given(st.sampled_from([">", ">=", "<", "<="]),
       st.floats(-2, 2), st.floats(-2, 2), st.floats(-2, 2))
def test_requirement_verdicts_agree_with_every_point_of_the_interval(
        comparison: str, a: float, b: float, threshold: float) -> None:
    """A proven pass means every point passes, a proven fail that none does (checked at the
    ends and the middle, which decide a monotone comparison)."""
    low, high = min(a, b), max(a, b)
    requirement = Requirement(quantity="q", label="q", comparison=comparison,
                              threshold=threshold)
    holds = {">": float.__gt__, ">=": float.__ge__, "<": float.__lt__, "<=": float.__le__}
    points = [low, (low + high) / 2, high]
    if requirement.proven_pass(low, high):
        assert all(holds[comparison](p, threshold) for p in points)
    if requirement.proven_fail(low, high):
        assert not any(holds[comparison](p, threshold) for p in points)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_privileged_value_that_is_no_number_names_the_field(tmp_path: Path,
                                                              value: str) -> None:
    """``privileged: .nan`` passed validation and stopped the audit with "box corners must not
    be NaN", naming neither the field nor the value."""
    path = tmp_path / "nan.yaml"
    path.write_text("model: {uri: a.onnx}\naudits:\n  - {kind: demographic_parity, protected: "
                    f"sex, privileged: {value}, favorable_class: 1, gamma: 0.8}}\n")
    with pytest.raises(ConfigError, match=r"audits\[0\]\.privileged: Input should be a finite"):
        load_config(path)
