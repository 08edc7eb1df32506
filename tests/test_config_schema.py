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


def test_yaml_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(MINIMAL))
    assert load_config(path) == CertgateConfig.model_validate(MINIMAL)


def test_fingerprint_follows_the_audit_settings_only() -> None:
    base = parse_config(MINIMAL).audit_fingerprint()
    assert parse_config(with_change(["gate", "undecided"], "warn")).audit_fingerprint() == base
    assert parse_config(with_change(["model", "uri"], "models:/y/1")).audit_fingerprint() == base
    assert parse_config(with_change(["audits", 0, "gamma"], 0.7)).audit_fingerprint() != base
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
