"""``certgate verify demographic-parity`` with the population-fidelity check: the data comes
from ``--data`` or the population's ``fitted_from``; a contradicted population exits 1 unless
``--population-contradicted warn``; ``--json`` carries the check in its one object."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from fidelity_cases import COLUMNS, proxy_frame, proxy_model
from mlflow_server import run_cli

from certgate.population_data import fit_population
from verifier.population import population_from_json, save_population


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fidelity-cli")
    frame = proxy_frame(2000, 0.9, seed=3)
    data = root / "train.csv"
    frame.to_csv(data, index=False)
    example = (torch.zeros(1, 3, dtype=torch.float64),)
    torch.export.save(torch.export.export(proxy_model(), example), root / "model.pt2")
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    fitted = {**fit_population(frame, structure="independent").to_json(),
              "fitted_from": {"uri": "train.csv", "sha256": digest, "rows": len(frame)}}
    save_population(population_from_json(fitted), root / "fitted.json")
    save_population(fit_population(frame, structure="independent"), root / "bare.json")
    return {"root": root, "data": data, "model": root / "model.pt2",
            "fitted": root / "fitted.json", "bare": root / "bare.json"}


def verify(capsys: pytest.CaptureFixture[str], files: dict[str, Path], population: str,
           *extra: str) -> tuple[int, dict, str]:
    code, out, err = run_cli(
        capsys, "verify", "demographic-parity", "--model", str(files["model"]),
        "--input-names", ",".join(COLUMNS), "--population", str(files[population]),
        "--protected", "sex", "--privileged", "1", "--favorable-class", "1",
        "--gamma", "0.8", "--timeout", "30", "--json", *extra)
    return code, json.loads(out), err


def test_fitted_from_contradicts_and_fails(capsys, files) -> None:
    code, document, _ = verify(capsys, files, "fitted")
    assert document["verdict"] == "satisfied"
    fidelity = document["population_fidelity"]
    assert fidelity["status"] == "contradicted"
    assert fidelity["data"]["origin"] == "population fitted_from"
    assert fidelity["empirical"][1] < fidelity["certified"][0]
    assert fidelity["assumptions"]["summary"] == "independent features"
    assert code == 1


def test_warn_keeps_the_verdicts_code(capsys, files) -> None:
    code, document, _ = verify(capsys, files, "fitted", "--population-contradicted", "warn")
    assert document["population_fidelity"]["status"] == "contradicted"
    assert code == 0


def test_data_flag_and_no_data(capsys, files) -> None:
    code, document, _ = verify(capsys, files, "bare", "--data", str(files["data"]))
    assert document["population_fidelity"]["data"]["origin"] == "--data"
    assert document["population_fidelity"]["status"] == "contradicted" and code == 1
    code, document, _ = verify(capsys, files, "bare")
    assert document["population_fidelity"]["status"] == "unchecked"
    assert "records no data it was fitted from" in document["population_fidelity"]["reason"]
    assert code == 0


def test_human_output_names_the_check(capsys, files) -> None:
    code, out, _ = run_cli(
        capsys, "verify", "demographic-parity", "--model", str(files["model"]),
        "--input-names", ",".join(COLUMNS), "--population", str(files["fitted"]),
        "--protected", "sex", "--privileged", "1", "--favorable-class", "1",
        "--gamma", "0.8", "--timeout", "30")
    assert code == 1
    assert "population fidelity: contradicted" in out
    assert "population: independent features" in out


def test_missing_data_file_is_an_input_error(capsys, files) -> None:
    code, out, _ = run_cli(
        capsys, "verify", "demographic-parity", "--model", str(files["model"]),
        "--input-names", ",".join(COLUMNS), "--population", str(files["bare"]),
        "--protected", "sex", "--privileged", "1", "--favorable-class", "1",
        "--gamma", "0.8", "--data", str(files["root"] / "none.csv"), "--json")
    assert code == 2
    assert json.loads(out)["error"].startswith("--data")


def test_the_check_is_announced_on_stderr_before_it_runs(capsys, files) -> None:
    """On a large table the check classifies every row after the audit's budget (about half
    a minute per million rows): the human output names it on stderr, with the table and row
    count, before the result; ``--no-progress`` and ``--json`` keep stderr free of it."""
    arguments = ("verify", "demographic-parity", "--model", str(files["model"]),
                 "--input-names", ",".join(COLUMNS), "--population", str(files["fitted"]),
                 "--protected", "sex", "--privileged", "1", "--favorable-class", "1",
                 "--gamma", "0.8", "--timeout", "30")
    code, out, err = run_cli(capsys, *arguments)
    assert code == 1 and "population fidelity: contradicted" in out
    assert ("demographic_parity: population fidelity: classifying 2,000 data rows of "
            "train.csv...") in err
    for quiet in ("--no-progress", "--json"):
        code, out, err = run_cli(capsys, *arguments, quiet)
        assert code == 1
        assert "classifying" not in err and "classifying" not in out
