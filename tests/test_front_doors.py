"""Every audit kind through both front doors — ``certgate verify …`` and ``certgate run`` — on
the same model and population model: identical verdicts and identical certified intervals.

The model is class 1 iff ``x + 0.5 s > 0.75`` on ``[0, 1]²``. Demographic parity and causal
fairness read a binary ``s``; the exact-probability (WMI) kinds need a continuous population,
so there ``s`` is uniform. Every audit here ends by its own criterion (precision, target width
or complete enumeration), never by its clock, so both runs do the same work. The last case
sets ``min_probability`` within the WMI float allowance of a probability of exactly 1: both
doors must say ``unknown`` (the command line used to judge the raw float and said
``satisfied``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import mlflow
import pytest
import yaml

from pipeline_steps.cli import main
from tests.causal_nets import threshold_network
from verifier.certificate import Certificate
from verifier.convert import save_network
from verifier.population import (
    Discrete,
    Factor,
    Feature,
    PopulationModel,
    Product,
    Uniform,
    save_population,
)

CASES: list[tuple[str, str, dict[str, Any], list[str]]] = [
    ("binary", "demographic-parity",
     {"kind": "demographic_parity", "protected": "s", "privileged": 1, "favorable_class": 1,
      "gamma": 0.3, "timeout_s": 120, "precision": 0.01},
     ["--protected", "s", "--privileged", "1", "--favorable-class", "1", "--gamma", "0.3",
      "--timeout", "120", "--precision", "0.01"]),
    ("binary", "causal-fairness",
     {"kind": "causal_fairness", "protected": ["s"], "max_biased_share": 0.6,
      "max_unstable": 4, "timeout_s": 120, "target_width": 0.01},
     ["--protected", "s", "--max-biased-share", "0.6", "--max-unstable", "4", "--timeout",
      "120", "--target-width", "0.01"]),
    ("binary", "causal-fairness",
     {"kind": "causal_fairness", "protected": ["s"], "max_biased_share": 0.4,
      "measure": "population", "max_unstable": 4, "timeout_s": 120, "target_width": 0.01},
     ["--protected", "s", "--max-biased-share", "0.4", "--measure", "population",
      "--max-unstable", "4", "--timeout", "120", "--target-width", "0.01"]),
    ("uniform", "monotonicity",
     {"kind": "monotonicity", "feature": "x", "min_probability": 0.9},
     ["--feature", "x", "--min-probability", "0.9"]),
    ("uniform", "noise-robustness",
     {"kind": "noise_robustness", "features": ["x"], "noise_uniform": [0.0, 0.1],
      "min_probability": 0.99},
     ["--features", "x", "--noise-uniform", "0", "0.1", "--min-probability", "0.99"]),
    ("uniform", "local-robustness",
     {"kind": "local_robustness", "center": [0.5, 0.5], "epsilon": 0.2,
      "min_probability": 0.5},
     ["--center", "0.5,0.5", "--epsilon", "0.2", "--min-probability", "0.5"]),
    ("uniform", "monotonicity",
     {"kind": "monotonicity", "feature": "s", "min_probability": 0.9999995},
     ["--feature", "s", "--min-probability", "0.9999995"]),
]


def population(kind: str) -> PopulationModel:
    binary = kind == "binary"
    return PopulationModel(
        features=[Feature(name="x", kind="continuous", domain=(0, 1)),
                  Feature(name="s", kind="binary" if binary else "continuous", domain=(0, 1))],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Uniform(lower=0, upper=1)),
            Factor(columns=["s"], distribution=(
                Discrete(values=[0, 1], probabilities=[0.5, 0.5]) if binary
                else Uniform(lower=0, upper=1)))]))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("front_doors")
    save_network(threshold_network([1.0, 0.5], -0.75, ["x", "s"]), root / "model.json")
    for kind in ("binary", "uniform"):
        save_population(population(kind), root / f"{kind}.json")
    return {"root": root, "model": root / "model.json", "binary": root / "binary.json",
            "uniform": root / "uniform.json"}


def interval(payload: dict[str, Any], verb: str, settings: dict[str, Any]) -> list[float]:
    """The certified interval the command line printed for the quantity the gate reads."""
    if verb == "demographic-parity":
        return payload["ratio"]
    if verb == "causal-fairness":
        measure = settings.get("measure", "uniform")
        return payload["biased_fraction" if measure == "uniform"
                       else "biased_fraction_population"]
    return payload["probability_interval"]


@pytest.mark.parametrize(("population_kind", "verb", "settings", "options"), CASES)
def test_cli_and_pipeline_agree(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                population_kind: str, verb: str, settings: dict[str, Any],
                                options: list[str]) -> None:
    population_file = files[population_kind]
    config = files["root"] / f"{verb}-{population_kind}.yaml"
    config.write_text(yaml.safe_dump({
        "tracking": {"tracking_uri": f"sqlite:///{files['root'] / 'mlflow.db'}",
                     "experiment": "front-doors"},
        "model": {"uri": str(files["model"]), "population_uri": str(population_file)},
        "validation": {"population_samples": 200},
        "audits": [{"name": "checked", **settings}],
        "gate": {"promote_alias": None},
    }))
    capsys.readouterr()
    run_code = main(["run", "--config", str(config), "--no-progress", "--json"])
    captured = capsys.readouterr()
    assert run_code in (0, 1), captured.err
    pipeline = json.loads(captured.out.strip().splitlines()[-1])["audit"]["audits"]["checked"]
    label = next(key for key in pipeline if key not in ("verdict", "requirement", "elapsed_s"))

    cli_code = main(["verify", verb, "--model", str(files["model"]), "--population",
                     str(population_file), *options, "--json"])
    captured = capsys.readouterr()
    assert cli_code in (0, 1), captured.err
    cli = json.loads(captured.out.strip().splitlines()[-1])

    assert cli["verdict"] == pipeline["verdict"]
    assert interval(cli, verb, settings) == pipeline[label]
    assert cli_code == (0 if cli["verdict"] == "satisfied" else 1)
    if settings.get("min_probability") == 0.9999995:  # monotone in s everywhere: P = 1
        assert cli["verdict"] == "satisfied" and cli["probability"] == 1.0
        assert 0.9999995 < cli["probability_interval"][0] <= 1.0 == cli["probability_interval"][1]


VERB_OF_KIND = {"demographic_parity": "demographic-parity", "causal_fairness": "causal-fairness",
                "monotonicity": "monotonicity", "noise_robustness": "noise-robustness",
                "local_robustness": "local-robustness"}
DERIVED = {"causal_fairness": {"protected_kind", "onehot_groups", "split_values"}}
"""Fields a verb derives instead of taking as options: the protected kind from how many names
``--protected`` lists, one-hot groups from the population model, the split from the singular
``--split-value``."""


def test_every_settings_field_is_an_option_of_the_same_name() -> None:
    from pipeline_steps.cli import build_parser
    from pipeline_steps.cli.settings_options import NOT_OPTIONS, option_for
    from verifier.audits import KINDS, SETTINGS_TYPES

    verify = build_parser()._subparsers._group_actions[0].choices["verify"]
    verbs = verify._subparsers._group_actions[0].choices
    assert set(VERB_OF_KIND) == set(KINDS)
    for settings_type in SETTINGS_TYPES:
        kind = settings_type.model_fields["kind"].annotation.__args__[0]
        options = {option for action in verbs[VERB_OF_KIND[kind]]._actions
                   for option in action.option_strings}
        fields = set(settings_type.model_fields) - NOT_OPTIONS - DERIVED.get(kind, set())
        missing = {field for field in fields if option_for(field) not in options}
        assert not missing, (kind, missing)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_audit_step_names_a_local_model_file_by_its_bytes(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``certgate run`` on a local model file: every certificate it logs names the model file
    and the population file by the sha256 ``hashlib`` gives of their bytes; a model file
    rewritten while it is read is refused (exit 2) and nothing is certified."""
    import verifier.convert

    model = tmp_path / "model.json"
    model.write_bytes(files["model"].read_bytes())
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = tmp_path / "audit.yaml"
    config.write_text(yaml.safe_dump({
        "tracking": {"tracking_uri": tracking, "experiment": "provenance"},
        "model": {"uri": str(model), "population_uri": str(files["uniform"])},
        "validation": {"population_samples": 200},
        "audits": [{"name": "checked", **CASES[3][2]}],
        "gate": {"promote_alias": None},
    }))
    capsys.readouterr()
    code = main(["run", "--config", str(config), "--no-progress", "--json"])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    run_id = json.loads(captured.out.strip().splitlines()[-1])["audit"]["run_id"]
    mlflow.set_tracking_uri(tracking)
    provenance = Certificate.from_dict(mlflow.artifacts.load_dict(
        f"runs:/{run_id}/certificates/checked.json")).provenance
    assert provenance["model_uri"] == str(model)
    assert provenance["model_sha256"] == _sha256(model)
    assert provenance["population_sha256"] == _sha256(files["uniform"])
    assert provenance["model_name"] is None and provenance["model_version"] is None

    read = verifier.convert.load_network

    def read_then_rewrite(path: Any) -> Any:
        network = read(path)
        model.write_bytes(model.read_bytes() + b"\n")
        return network

    monkeypatch.setattr(verifier.convert, "load_network", read_then_rewrite)
    code = main(["run", "--config", str(config), "--no-progress", "--force"])
    assert code == 2
    assert f"{model} changed while it was read" in capsys.readouterr().err
