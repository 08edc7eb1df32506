"""One name per idea across kinds, compatibly: the old configuration keys (``sensitive``,
``sensitive_kind``, ``sensitive_values``, ``positive_class``, ``label``) and command-line
options (``--sensitive``, ``--sensitive-values``, ``--positive-class``, ``--label``,
``--output``, ``population fit --network``) still work, each with a
:class:`~verifier.errors.RenamedSettingWarning` naming the new name; giving both is an error;
and a configuration's fingerprint is the one the old names gave (the oracle: the value
certgate computed for this document before the rename), so no audited model version becomes
due again."""

from __future__ import annotations

import argparse
import copy
from typing import Any

import jsonschema
import pytest

from configs.schema import ConfigError, json_schema, parse_config
from pipeline_steps.cli import build_parser
from verifier.errors import RenamedSettingWarning

OLD = {"model": {"uri": "model.json", "population_uri": "population.json"},
       "audits": [
           {"kind": "causal_fairness", "name": "fair", "sensitive": ["a", "b"],
            "sensitive_kind": "one_hot", "sensitive_values": ["a", "b"],
            "max_biased_share": 0.1},
           {"kind": "monotonicity", "feature": "x", "positive_class": 0, "min_probability": 0.9},
           {"kind": "local_robustness", "center": [0.5, 0.5], "epsilon": 0.1, "label": 1,
            "min_probability": 0.9}]}
NEW = {**OLD, "audits": [
    {"kind": "causal_fairness", "name": "fair", "protected": ["a", "b"],
     "protected_kind": "one_hot", "protected_values": ["a", "b"], "max_biased_share": 0.1},
    {"kind": "monotonicity", "feature": "x", "favorable_class": 0, "min_probability": 0.9},
    {"kind": "local_robustness", "center": [0.5, 0.5], "epsilon": 0.1, "expected_class": 1,
     "min_probability": 0.9}]}
FINGERPRINT_BEFORE_THE_RENAME = "3791a636439c40b3"


def test_old_keys_still_work_and_warn_naming_the_new_key() -> None:
    with pytest.warns(RenamedSettingWarning) as caught:
        old = parse_config(OLD, "audit.yaml")
    messages = " ".join(str(item.message) for item in caught)
    for old_key, new_key in (("sensitive", "protected"), ("sensitive_kind", "protected_kind"),
                             ("sensitive_values", "protected_values"),
                             ("positive_class", "favorable_class"),
                             ("label", "expected_class")):
        assert f"{old_key!r} is now called {new_key!r}" in messages
    assert old == parse_config(NEW, "audit.yaml")


def test_the_fingerprint_does_not_change_with_the_names() -> None:
    with pytest.warns(RenamedSettingWarning):
        old = parse_config(OLD, "audit.yaml")
    assert old.audit_fingerprint() == FINGERPRINT_BEFORE_THE_RENAME
    assert parse_config(NEW, "audit.yaml").audit_fingerprint() == FINGERPRINT_BEFORE_THE_RENAME


def test_old_and_new_key_together_is_an_error_naming_both() -> None:
    both = {**NEW, "audits": [{**NEW["audits"][1], "positive_class": 0}]}
    with pytest.raises(ConfigError, match="'positive_class' is the old name of "
                                          "'favorable_class': give only 'favorable_class'"):
        parse_config(both, "audit.yaml")


RENAMED_KEYS = (("causal_fairness", "sensitive", "protected"),
                ("causal_fairness", "sensitive_kind", "protected_kind"),
                ("causal_fairness", "sensitive_values", "protected_values"),
                ("monotonicity", "positive_class", "favorable_class"),
                ("local_robustness", "label", "expected_class"))


def _schema_accepts(document: dict[str, Any]) -> bool:
    return jsonschema.Draft202012Validator(json_schema()).is_valid(document)


def test_the_json_schema_lists_old_keys_as_deprecated_aliases_as_validation_treats_them(
) -> None:
    """A JSON Schema validator (not pydantic) accepts the old keys alone, with the new key's
    value schema, in place of a required new key, and refuses both together, as parsing
    does; each old key is marked ``deprecated``."""
    by_kind = {d["properties"]["kind"]["const"]: d["properties"]
               for d in json_schema()["$defs"].values() if "kind" in d.get("properties", {})}
    for kind, old_key, new_key in RENAMED_KEYS:
        old = by_kind[kind][old_key]
        assert old.pop("deprecated") is True and new_key in old.pop("description")
        assert old == {k: v for k, v in by_kind[kind][new_key].items() if k != "description"}
    assert _schema_accepts(OLD) and _schema_accepts(NEW)
    for index, old_key, new_key, value, bad in (
            (0, "sensitive", "protected", ["a", "b"], []),
            (1, "positive_class", "favorable_class", 0, -1),
            (2, "label", "expected_class", 1, "one")):
        both = copy.deepcopy(NEW)
        both["audits"][index][old_key] = value
        assert not _schema_accepts(both), old_key
        with pytest.raises(ConfigError, match=f"{old_key!r} is the old name of {new_key!r}"):
            parse_config(both, "audit.yaml")
        wrong = copy.deepcopy(OLD)
        wrong["audits"][index][old_key] = bad
        assert not _schema_accepts(wrong), old_key
    neither = copy.deepcopy(NEW)
    del neither["audits"][0]["protected"]
    assert not _schema_accepts(neither)
    with pytest.raises(ConfigError, match="protected"):
        parse_config(neither, "audit.yaml")


def test_one_protected_input_may_be_named_alone() -> None:
    alone = {**NEW, "audits": [{"kind": "causal_fairness", "protected": "a",
                                "max_biased_share": 0.1}]}
    assert parse_config(alone, "audit.yaml").audits[0].protected == ["a"]


def _parsed(argv: list[str]) -> argparse.Namespace:
    return build_parser(argv).parse_args(argv)


@pytest.mark.parametrize(("verb", "old", "new", "value", "dest"), [
    (["verify", "causal-fairness", "--model", "m.json"], "--sensitive", "--protected", "s",
     "protected"),
    (["verify", "causal-fairness", "--model", "m.json", "--protected", "s"],
     "--sensitive-values", "--protected-values", "0,1", "protected_values"),
    (["verify", "monotonicity", "--model", "m.json", "--population", "p.json", "--feature",
      "x"], "--positive-class", "--favorable-class", "0", "favorable_class"),
    (["verify", "monotonicity", "--model", "m.json", "--population", "p.json", "--feature",
      "x"], "--output", "--output-index", "1", "output_index"),
    (["verify", "local-robustness", "--model", "m.json", "--population", "p.json",
      "--center", "0", "--epsilon", "1"], "--label", "--expected-class", "1", "expected_class"),
    (["population", "fit", "data.csv", "--out", "p.json"], "--network", "--model", "m.json",
     "model"),
])
def test_old_options_still_work_and_warn_naming_the_new_one(
        verb: list[str], old: str, new: str, value: str, dest: str) -> None:
    with pytest.warns(RenamedSettingWarning, match=f"option {old} is now called {new}"):
        before = _parsed([*verb, old, value])
    after = _parsed([*verb, new, value])
    assert getattr(before, dest) == getattr(after, dest) is not None
    assert vars(before) == vars(after)


def test_old_class_names_of_the_settings_warn_and_are_the_same_class() -> None:
    import configs.schema
    from verifier.audits import DemographicParitySettings

    with pytest.warns(DeprecationWarning, match="verifier.audits.DemographicParitySettings"):
        old = configs.schema.DemographicParityAudit
    assert old is DemographicParitySettings
    with pytest.raises(AttributeError, match="NoSuchAudit"):
        _ = configs.schema.NoSuchAudit
