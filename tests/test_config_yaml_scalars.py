"""Plain YAML scalars in configurations and constraint files mean what the user wrote.

PyYAML resolves plain scalars by YAML 1.1: ``privileged: 010`` (a department code as the CSV
writes it, which pandas and ``--privileged 010`` read as 10) was the octal 8, so the audit
certified the group coded 8 and the gate passed where the group coded 10 is proven to violate
the requirement; ``yes``/``no`` were the booleans 1/0. Configurations are now read by the YAML
1.2 core schema (:mod:`verifier.yaml_documents`).

Oracle: the population is independent marginals with dyadic masses and the network's class is
``score > 2`` (logits ``(2, score)``, a tie at ``score = 2`` is class 0); the parity ratio of
each department is enumerated in ``Fraction``.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import certgate
from configs.schema import ConfigError, load_config
from verifier.errors import CertgateInputError
from verifier.network import Layer, Network
from verifier.population import PopulationModel
from verifier.yaml_documents import dump_yaml, load_yaml

DEPARTMENTS = {8: Fraction(1, 2), 10: Fraction(1, 4), 12: Fraction(1, 4)}
SCORES = {8: [Fraction(1, 2), Fraction(1, 4), Fraction(1, 8), Fraction(1, 16), Fraction(1, 16)],
          10: [Fraction(1, 16), Fraction(1, 16), Fraction(1, 8), Fraction(1, 4), Fraction(1, 2)],
          12: [Fraction(1, 8), Fraction(1, 8), Fraction(1, 4), Fraction(1, 4), Fraction(1, 4)]}


def _population() -> PopulationModel:
    """``dept`` ∈ {8, 10, 12} and ``score`` ∈ {0..4} given ``dept``: a Bayesian network."""
    rows = [{"condition": {"dept": [code, code]},
             "distribution": {"kind": "discrete", "values": [0.0, 1.0, 2.0, 3.0, 4.0],
                              "probabilities": [float(p) for p in SCORES[code]]}}
            for code in DEPARTMENTS]
    return PopulationModel.from_json({
        "format": "certgate.population/v1",
        "features": [{"name": "dept", "kind": "integer", "domain": [8.0, 12.0]},
                     {"name": "score", "kind": "integer", "domain": [0.0, 4.0]}],
        "distribution": {"kind": "bayesian_network", "nodes": [
            {"name": "dept", "parents": [], "columns": ["dept"], "cpt": [{"condition": {},
             "distribution": {"kind": "discrete", "values": [float(c) for c in DEPARTMENTS],
                              "probabilities": [float(p) for p in DEPARTMENTS.values()]}}]},
            {"name": "score", "parents": ["dept"], "columns": ["score"], "cpt": rows}]}})


def _network() -> Network:
    return Network([Layer(np.array([[0.0, 0.0], [0.0, 1.0]]), np.array([2.0, 0.0]), "none")],
                   input_names=["dept", "score"])


def _exact_ratio(privileged: int) -> Fraction:
    """P[score > 2 | dept ≠ privileged] / P[score > 2 | dept = privileged], in ``Fraction``."""
    def favourable(code: int) -> Fraction:
        return sum(SCORES[code][3:], Fraction(0))
    others = [code for code in DEPARTMENTS if code != privileged]
    mass = sum(DEPARTMENTS[code] for code in others)
    unprivileged = sum(DEPARTMENTS[code] * favourable(code) for code in others) / mass
    return unprivileged / favourable(privileged)


def _audit_config(tmp_path: Path, audit: str) -> Path:
    """A configuration of one audit of ``net.json`` on ``dept``: ``audit`` is its YAML lines
    after ``protected: dept``, each indented by four spaces."""
    path = tmp_path / "audit.yaml"
    path.write_text("model: {uri: net.json}\naudits:\n"
                    f"  - protected: dept\n{audit}")
    return path


def _config(tmp_path: Path, privileged: str) -> Path:
    return _audit_config(tmp_path, "    kind: demographic_parity\n"
                                   f"    privileged: {privileged}\n"
                                   "    favorable_class: 1\n    gamma: 0.5\n")


@pytest.mark.parametrize("written, code", [("010", 10), ("008", 8), ("012", 12), ("10", 10),
                                           ("10.0", 10), ("0o12", 10), ("0xA", 10)])
def test_a_zero_padded_code_audits_the_group_it_names(tmp_path: Path, written: str,
                                                      code: int) -> None:
    """``privileged: 010`` is department 10 (YAML 1.1 read it as 8, audited department 8,
    ratio > 1, and the gate passed where department 10's ratio 0.4 < 0.5 is violated)."""
    [settings] = load_config(_config(tmp_path, written)).audits
    assert settings.privileged == code
    [certificate] = certgate.audit(_network(), _population(), [settings])
    low, high = certificate.bounds["value"]
    truth = _exact_ratio(code)
    assert Fraction(low) <= truth <= Fraction(high)
    assert certificate.verdict == ("satisfied" if truth > Fraction(1, 2) else "violated")


@pytest.mark.parametrize("written, value", [("yes", 1), ("on", 1), ("no", 0), ("off", 0)])
def test_a_yes_or_no_privileged_value_is_refused_naming_the_binary_value(
        tmp_path: Path, written: str, value: int) -> None:
    """``privileged: yes`` was the boolean true, read as the value 1 of whatever the column
    holds; a word is now refused naming the field and the binary column's value."""
    with pytest.raises(ConfigError, match=rf"audits\[0\]: privileged is .* '{written}' names a "
                                          rf"category: .*yes/no column is binary.*privileged: "
                                          rf"{value}\)"):
        load_config(_config(tmp_path, written))


def test_scalars_resolve_by_the_yaml_1_2_core_schema() -> None:
    document = load_yaml("[010, 008, 1_0, 1:30, 0o10, 0x1f, yes, no, on, off, true, FALSE, "
                         "1e-3, 8e-1, .5, -.inf, ~, null, 0b11]")
    assert document[:6] == [10, 8, "1_0", "1:30", 8, 31]
    assert document[6:12] == ["yes", "no", "on", "off", True, False]
    assert document[12:16] == [0.001, 0.8, 0.5, float("-inf")]
    assert document[16:] == [None, None, "0b11"]


def _dept_network() -> Network:
    """Logits ``(2, score + 1.5·(dept − 10))``: class 1 iff ``score + 1.5·(dept − 10) > 2``."""
    return Network([Layer(np.array([[0.0, 0.0], [1.5, 1.0]]), np.array([2.0, -15.0]), "none")],
                   input_names=["dept", "score"])


def _exact_biased_share(first: int, second: int) -> Fraction:
    """The share of scores 0..4 whose class differs between departments ``first`` and
    ``second`` (Fraction; a logit equal to 2 is class 0)."""
    def favourable(code: int, score: int) -> bool:
        return score + Fraction(3, 2) * (code - 10) > 2
    return Fraction(sum(favourable(first, score) != favourable(second, score)
                        for score in range(5)), 5)


def _causal_config(tmp_path: Path, values: str) -> Path:
    return _audit_config(tmp_path, "    kind: causal_fairness\n"
                                   f"    protected_values: {values}\n"
                                   "    max_biased_share: 0.5\n    timeout_s: 30\n")


def test_zero_padded_protected_values_compare_the_groups_they_name(tmp_path: Path) -> None:
    """``protected_values: [010, 012]`` compares departments 10 and 12 (share 3/5, violated
    at 0.5); YAML 1.1 read departments 8 and 10 (share 2/5, satisfied)."""
    [settings] = load_config(_causal_config(tmp_path, "[010, 012]")).audits
    assert settings.protected_values == [10, 12]
    [certificate] = certgate.audit(_dept_network(), _population(), [settings])
    low, high = certificate.bounds["biased_share"]
    truth = _exact_biased_share(10, 12)
    assert truth == Fraction(3, 5) and Fraction(low) <= truth <= Fraction(high)
    assert certificate.verdict == "violated"


def test_words_as_protected_values_of_one_input_are_refused_naming_the_field(
        tmp_path: Path) -> None:
    """``protected_values: [no, yes]`` of a one-column protected input (YAML 1.1's 0 and 1)
    is refused before the audit, naming the field, instead of failing in the engine with
    "protected value 'no' is not a number"."""
    [settings] = load_config(_causal_config(tmp_path, "[no, yes]")).audits
    with pytest.raises(CertgateInputError, match=r"protected_values: 'no' is not a number, and "
                                                 r"'dept' is one input"):
        certgate.audit(_dept_network(), _population(), [settings])


@pytest.mark.parametrize("field, line", [
    ("min_probability", "  - {kind: monotonicity, feature: score, min_probability: false}"),
    ("gamma", "  - {kind: demographic_parity, protected: dept, privileged: 10, "
              "favorable_class: 1, gamma: true}"),
    ("favorable_class", "  - {kind: demographic_parity, protected: dept, privileged: 10, "
                        "favorable_class: true, gamma: 0.5}"),
    ("max_biased_share", "  - {kind: causal_fairness, protected: dept, max_biased_share: true}"),
])
def test_a_boolean_threshold_is_refused_naming_the_field(tmp_path: Path, field: str,
                                                         line: str) -> None:
    """``min_probability: false`` was the threshold 0, so the gate passed whatever the
    certified probability (``probability >= 0``); ``gamma: true`` was γ = 1."""
    path = tmp_path / "audit.yaml"
    path.write_text(f"model: {{uri: net.json}}\naudits:\n{line}\n")
    with pytest.raises(ConfigError, match=rf"audits\[0\]: {field} is a number, got the boolean"):
        load_config(path)


def test_a_boolean_privileged_value_is_the_binary_columns_value(tmp_path: Path) -> None:
    """``privileged: true`` names a True/False column's value 1, as documented."""
    [settings] = load_config(_config(tmp_path, "true")).audits
    assert settings.privileged == 1.0


def test_written_documents_read_back_as_they_were() -> None:
    """PyYAML's dumper writes the text ``1e3`` or ``0o10`` unquoted (YAML 1.1 reads it as
    text), which the 1.2 core schema reads as a number: a class or input named so would come
    back as another value from the files ``wrap``, the deploy step and the demo write."""
    document = {"classes": ["1e3", "0o10", "yes", "010", "1_0", "x", ".5", "null", "True"],
                "numbers": [1e-05, 10, float("inf"), True, None], "name: x": {"c": "d"}}
    text = dump_yaml(document)
    assert "'1e3'" in text and "'0o10'" in text
    assert load_yaml(text) == document


def test_audits_sharing_settings_through_a_merge_key_load(tmp_path: Path) -> None:
    """``<<: *anchor`` (two audits sharing their settings) failed with "could not determine a
    constructor for the tag 'tag:yaml.org,2002:merge'": the duplicate-key check constructed
    the merge key as a value. The mapping's own keys override the anchor's; a key given twice
    is still refused."""
    path = tmp_path / "anchors.yaml"
    path.write_text("model: {uri: net.json}\naudits:\n"
                    "  - &dp {kind: demographic_parity, name: dp10, protected: dept, "
                    "privileged: 010, favorable_class: 1, gamma: 0.5}\n"
                    "  - <<: *dp\n    name: dp12\n    privileged: 012\n")
    audits = load_config(path).audits
    assert [(audit.name, audit.privileged, audit.gamma) for audit in audits] == [
        ("dp10", 10, 0.5), ("dp12", 12, 0.5)]
    path.write_text(path.read_text() + "    name: again\n")
    with pytest.raises(ConfigError, match="key 'name' is given twice"):
        load_config(path)
