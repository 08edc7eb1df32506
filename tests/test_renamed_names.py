"""One name per idea across kinds: the old configuration keys (``sensitive``,
``sensitive_kind``, ``sensitive_values``, ``positive_class``, ``label``), command-line options
(``--sensitive``, ``--sensitive-values``, ``--positive-class``, ``--label``, ``--output``,
``population fit --network``) and settings class names are refused, each with an error that
names the new name; ``--help`` no longer shows the old options; and a configuration's
fingerprint is the one the old names gave (the oracle: the value certgate computed for this
document before the rename), so no audited model version becomes due again."""

from __future__ import annotations

import argparse
import copy
import re
from typing import Any

import jsonschema
import pytest

from configs.schema import ConfigError, json_schema, parse_config
from pipeline_steps.cli import UsageError, build_parser

NEW = {"model": {"uri": "model.json", "population_uri": "population.json"},
       "audits": [
           {"kind": "causal_fairness", "name": "fair", "protected": ["a", "b"],
            "protected_kind": "one_hot", "protected_values": ["a", "b"],
            "max_biased_share": 0.1},
           {"kind": "monotonicity", "feature": "x", "favorable_class": 0,
            "min_probability": 0.9},
           {"kind": "local_robustness", "center": [0.5, 0.5], "epsilon": 0.1,
            "expected_class": 1, "min_probability": 0.9}]}
FINGERPRINT_BEFORE_THE_RENAME = "3791a636439c40b3"
RENAMED_KEYS = ((0, "causal_fairness", "sensitive", "protected"),
                (0, "causal_fairness", "sensitive_kind", "protected_kind"),
                (0, "causal_fairness", "sensitive_values", "protected_values"),
                (1, "monotonicity", "positive_class", "favorable_class"),
                (2, "local_robustness", "label", "expected_class"))


def _with_old_key(index: int, old_key: str, new_key: str, *, keep_new: bool) -> dict[str, Any]:
    document = copy.deepcopy(NEW)
    audit = document["audits"][index]
    audit[old_key] = audit[new_key] if keep_new else audit.pop(new_key)
    return document


@pytest.mark.parametrize(("index", "kind", "old_key", "new_key"), RENAMED_KEYS)
@pytest.mark.parametrize("keep_new", [False, True])
def test_old_keys_are_refused_naming_the_new_key(index: int, kind: str, old_key: str,
                                                 new_key: str, keep_new: bool) -> None:
    document = _with_old_key(index, old_key, new_key, keep_new=keep_new)
    with pytest.raises(ConfigError, match=re.escape(
            f"{kind} setting {old_key!r} is now called {new_key!r}: rename it")):
        parse_config(document, "audit.yaml")


def test_the_fingerprint_does_not_change_with_the_names() -> None:
    assert parse_config(NEW, "audit.yaml").audit_fingerprint() == FINGERPRINT_BEFORE_THE_RENAME


def _schema_accepts(document: dict[str, Any]) -> bool:
    return jsonschema.Draft202012Validator(json_schema()).is_valid(document)


def test_the_json_schema_refuses_old_keys_as_validation_does_and_names_the_new_key() -> None:
    """A JSON Schema validator (not pydantic) accepts the new document and refuses every old
    key, alone or beside its new key, as parsing does; each old key is listed as
    ``deprecated`` with a description naming the new one (what an editor shows)."""
    by_kind = {d["properties"]["kind"]["const"]: d["properties"]
               for d in json_schema()["$defs"].values() if "kind" in d.get("properties", {})}
    assert _schema_accepts(NEW)
    for index, kind, old_key, new_key in RENAMED_KEYS:
        old = by_kind[kind][old_key]
        assert old["deprecated"] is True and old["not"] == {}
        assert f"{old_key!r} is now called {new_key!r}" in old["description"]
        for keep_new in (False, True):
            document = _with_old_key(index, old_key, new_key, keep_new=keep_new)
            assert not _schema_accepts(document), (old_key, keep_new)
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


OLD_OPTIONS = [
    (["verify", "causal-fairness", "--model", "m.json", "--protected", "s"], "--sensitive",
     "--protected", "s", "protected"),
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
]


@pytest.mark.parametrize(("verb", "old", "new", "value", "dest"), OLD_OPTIONS)
def test_old_options_are_refused_naming_the_new_one(
        verb: list[str], old: str, new: str, value: str, dest: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    for given in ([old, value], [old]):
        with pytest.raises(UsageError, match=re.escape(f"option {old} is now called {new}: "
                                                       "rename it")):
            _parsed([*verb, *given])
    new_args = [*verb, new, value] if dest != "protected" else verb
    assert str(getattr(_parsed(new_args), dest)) == value
    with pytest.raises(SystemExit):
        _parsed([*verb[:2], "--help"])
    assert re.search(re.escape(old) + r"(?![-\w])", capsys.readouterr().out) is None


def test_old_class_names_of_the_settings_are_refused_naming_the_class() -> None:
    import configs.schema

    with pytest.raises(AttributeError, match=re.escape(
            "configs.schema.DemographicParityAudit is now "
            "verifier.audits.DemographicParitySettings")):
        _ = configs.schema.DemographicParityAudit
    with pytest.raises(AttributeError, match="NoSuchAudit"):
        _ = configs.schema.NoSuchAudit
