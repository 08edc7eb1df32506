"""``certgate config check`` runs the WMI audits' pre-flight (the checks ``certgate run`` makes
before any audit starts) on what the configuration names locally, refuses what WMI cannot
run with one line naming the audit and the column, and says what it could not check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.causal_nets import threshold_network
from tests.mlflow_server import run_cli
from verifier.convert import save_network
from verifier.population import (
    Categorical,
    Discrete,
    Factor,
    Feature,
    Normal,
    PopulationModel,
    Product,
    Uniform,
    save_population,
)

MONOTONE = {"kind": "monotonicity", "name": "monotone_x", "feature": "x",
            "min_probability": 0.9}
NOISY = {"kind": "noise_robustness", "name": "noisy", "features": ["x"],
         "noise_uniform": [-0.1, 0.1], "min_probability": 0.9}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A network over (x, s); populations with x normal (unbounded) or uniform, s binary."""
    save_network(threshold_network([1.0, 0.5], -0.75, ["x", "s"]), tmp_path / "model.json")
    binary = Factor(columns=["s"], distribution=Discrete(values=[0, 1], probabilities=[0.4, 0.6]))
    features = [Feature(name="x", kind="continuous"), Feature(name="s", kind="binary")]
    save_population(PopulationModel(features=features, distribution=Product(factors=[
        Factor(columns=["x"], distribution=Normal(mean=0.5, std=1.0)), binary])),
        tmp_path / "normal.json")
    save_population(PopulationModel(features=[
        Feature(name="x", kind="continuous", domain=(0, 1)), features[1]],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Uniform(lower=0, upper=1)), binary])),
        tmp_path / "uniform.json")
    return {"root": tmp_path, "model": tmp_path / "model.json",
            "normal": tmp_path / "normal.json", "uniform": tmp_path / "uniform.json"}


def config(root: Path, model: str, population: str | None, *audits: dict[str, Any],
           input_names: list[str] | None = None) -> str:
    document = {"model": {"uri": model, "population_uri": population,
                          "input_names": input_names},
                "audits": list(audits)}
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def check(capsys: pytest.CaptureFixture[str], path: str) -> tuple[int, str, str]:
    return run_cli(capsys, "config", "check", path)


def test_unbounded_support_with_use_prior_false_is_refused(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = config(files["root"], str(files["model"]), str(files["normal"]), MONOTONE)
    code, out, err = check(capsys, path)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "audit 'monotone_x'" in line and "'x'" in line and "bounded support" in line


def test_the_same_audit_weighted_by_the_population_can_run(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = config(files["root"], str(files["model"]), str(files["normal"]),
                  {**MONOTONE, "use_prior": True}, NOISY)
    code, out, _ = check(capsys, path)
    assert code == 0
    assert "can run: monotone_x, noisy (checked on model" in out
    code, out, _ = run_cli(capsys, "config", "check", "--json", path)
    document = json.loads(out)
    assert document["preflight"]["checked"] == ["monotone_x", "noisy"]
    assert document["preflight"]["unchecked"] == []


def test_noise_on_a_binary_column_is_refused_naming_it(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = config(files["root"], str(files["model"]), str(files["uniform"]),
                  {**NOISY, "features": ["s"]})
    code, _, err = check(capsys, path)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "audit 'noisy'" in line and "'s'" in line and "discrete" in line


def test_a_registry_model_with_a_local_population_is_checked_on_the_population(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    refused = config(files["root"], "models:/loan@candidate", str(files["normal"]), MONOTONE,
                     input_names=["x", "s"])
    code, _, err = check(capsys, refused)
    assert code == 2 and "bounded support" in err and "'x'" in err
    # input names bind the population by name: given in the other order, still checked
    fine = config(files["root"], "models:/loan@candidate", str(files["uniform"]), MONOTONE,
                  NOISY, input_names=["s", "x"])
    code, out, _ = check(capsys, fine)
    assert code == 0
    assert "can run: monotone_x, noisy (checked on population" in out
    assert "model-side checks run then" in out
    typo = config(files["root"], "models:/loan@candidate", str(files["uniform"]),
                  {**MONOTONE, "feature": "z"})
    code, _, err = check(capsys, typo)
    assert code == 2 and "'z' is not a column" in err


def test_a_population_in_the_registry_is_reported_as_not_checked(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = config(files["root"], "models:/loan@candidate", None, MONOTONE, NOISY)
    code, out, _ = check(capsys, path)
    assert code == 0
    assert "not checked: monotone_x, noisy: the population ships with " \
           "models:/loan@candidate" in out
    code, out, _ = run_cli(capsys, "config", "check", "--json", path)
    preflight = json.loads(out)["preflight"]
    assert preflight["checked"] == [] and preflight["unchecked"] == ["monotone_x", "noisy"]
    assert "registry" in preflight["reason"]


def test_a_registry_model_on_a_store_that_is_not_here_is_listed_as_not_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's configuration names its registry model on a local store that does not exist
    here: nothing is created or fetched, and the audit is listed as not checked, with why."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'absent.db'}")
    demo = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"
    code, out, _ = run_cli(capsys, "config", "check", "--json", str(demo))
    assert code == 0
    preflight = json.loads(out)["preflight"]
    assert preflight["checked"] == [] and preflight["unchecked"] == ["demographic_parity"]
    assert "does not exist here" in preflight["reason"]
    assert not (tmp_path / "absent.db").exists()


def test_a_prior_with_too_many_discrete_combinations_is_branched_not_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Five integer columns of 8 values each: 8⁵ = 32768 combinations > 20000 terms. A
    network audit then runs by box branching (a certified interval), so the configuration is
    valid; a model WMI cannot branch (a scikit-learn forest) is still refused, each column
    counted from its table, with or without a declared domain (a finite table is never
    called unbounded)."""
    from sklearn.ensemble import RandomForestClassifier

    from verifier.wmi import WMIInputError, check_wmi_property

    names = [f"k{j}" for j in range(5)]
    factors = [Factor(columns=[name], distribution=Discrete(values=list(range(8)),
                                                            probabilities=[0.125] * 8))
               for name in names]
    population = PopulationModel(
        features=[*(Feature(name=name, kind="integer", domain=(0, 7) if j % 2 else None)
                    for j, name in enumerate(names)),
                  Feature(name="x", kind="continuous", domain=(0, 1))],
        distribution=Product(factors=[
            *factors, Factor(columns=["x"], distribution=Uniform(lower=0, upper=1))]))
    save_population(population, tmp_path / "wide.json")
    path = config(tmp_path, "models:/loan@candidate", str(tmp_path / "wide.json"), MONOTONE)
    code, _, err = check(capsys, path)
    assert code == 0, err
    network = threshold_network([1.0, 0.5, 0.25, 0.125, 0.0625, 1.0], -4.0,
                                [*names, "x"])  # reads every column: none is summed out
    plan = check_wmi_property("monotonicity", network, population, feature=5)
    assert plan.method == "branching" and not plan.exact
    forest = RandomForestClassifier(n_estimators=2, max_depth=3, random_state=0).fit(
        [[j % 8, (j // 8) % 8, j % 3, j % 5, j % 7, (j % 10) / 10] for j in range(64)],
        [j % 2 for j in range(64)])
    with pytest.raises(WMIInputError) as refused:
        check_wmi_property("monotonicity", forest, population, feature=5)
    line = str(refused.value)
    assert "more than 20000 product terms" in line
    assert "'k0' 8 × 'k1' 8 × 'k2' 8" in line
    assert "unbounded" not in line


def test_a_branched_audit_is_refused_as_its_run_refuses_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A prior too large to enumerate sends a network's audit to box branching; the pre-flight
    still refuses what branching refuses (it passed them: `config check` said "can run" and
    `certgate run` failed in the audit), and a favourable class the network lacks: noise
    uniform on an integer column, monotonicity in a one-hot column, class 2 of a two-class
    network. Each error is one line naming the audit and the column or field."""
    names = [f"k{j}" for j in range(5)]
    factors = [Factor(columns=[name], distribution=Discrete(values=list(range(8)),
                                                            probabilities=[0.125] * 8))
               for name in names]
    population = PopulationModel(
        features=[*(Feature(name=name, kind="integer", domain=(0, 7)) for name in names),
                  Feature(name="x", kind="continuous", domain=(0, 1)),
                  Feature(name="c", kind="categorical", columns=["c=a", "c=b"],
                          categories=["a", "b"])],
        distribution=Product(factors=[
            *factors, Factor(columns=["x"], distribution=Uniform(lower=0, upper=1)),
            Factor(columns=["c=a", "c=b"],
                   distribution=Categorical(probabilities=[0.5, 0.5]))]))
    save_population(population, tmp_path / "wide.json")
    inputs = [*names, "x", "c=a", "c=b"]
    save_network(threshold_network([1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5, 0.0], -4.0, inputs),
                 tmp_path / "wide_model.json")
    refused = [
        ({**NOISY, "features": ["k1"]}, "audit 'noisy'", "'k1'", "discrete"),
        ({**MONOTONE, "feature": "c=a", "use_prior": True}, "audit 'monotone_x'", "'c=a'",
         "one-hot group"),
        ({**MONOTONE, "use_prior": True, "favorable_class": 2}, "audit 'monotone_x'",
         "favorable_class 2", "the model has 2 classes (0..1)"),
        ({"kind": "demographic_parity", "name": "parity", "protected": "k0", "privileged": 1,
          "favorable_class": 2, "gamma": 0.8}, "audit 'parity'", "favorable_class 2",
         "the model has 2 classes (0..1)"),
    ]
    for audit, *said in refused:
        path = config(tmp_path, str(tmp_path / "wide_model.json"), str(tmp_path / "wide.json"),
                      audit)
        code, _, err = check(capsys, path)
        assert code == 2, (audit, err)
        (line,) = err.strip().splitlines()
        assert all(part in line for part in said), line
    path = config(tmp_path, str(tmp_path / "wide_model.json"), str(tmp_path / "wide.json"),
                  {**NOISY, "features": ["x"]}, {**MONOTONE, "use_prior": True})
    code, _, err = check(capsys, path)
    assert code == 0, err
