"""Files users get wrong, through the ``certgate`` CLI: each is one clear error (exit 2, one
JSON object naming the file and what is wrong), never an internal error (exit 3) and never a
silently different table.

- a configuration, population model or constraint file saved as Latin-1 (not UTF-8);
- a CSV whose header names a column twice (pandas read the second ``age`` as ``age.1``, a
  column the table does not have, and the fit wrote it into the population model);
- a CSV with a header and no rows, or with one row (the fit stopped in scikit-learn);
- an output path the file system refuses (under a regular file, in a read-only directory);
- a directory given as the configuration (it was "not found").
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline_steps.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def _table(rows: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"age": rng.integers(18, 80, rows),
                         "income": rng.normal(50.0, 10.0, rows).round(2),
                         "sex": rng.choice(["F", "M"], rows)})


@pytest.mark.parametrize("verb", [["config", "check"], ["population", "describe"],
                                  ["selfcorrect", "describe", "--constraints"]])
def test_a_file_that_is_not_utf8_is_named(capsys, tmp_path: Path, verb: list[str]) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: 'caf\u00e9'\n".encode("latin-1"))
    code, document = _run(capsys, *verb, str(path))
    assert code == 2, document
    assert document["error"] == (f"{path}: not UTF-8 text (byte 0xe9 at offset 10); save the "
                                 "file as UTF-8")


def test_a_column_named_twice_is_refused_not_renamed(capsys, tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    text = _table().to_csv(index=False)
    data.write_text(text.replace("age,income,sex", "age,income,age", 1))
    out = tmp_path / "population.json"
    code, document = _run(capsys, "population", "fit", str(data), "--out", str(out))
    assert code == 2, document
    assert document["error"] == (f"{data}: column names given more than once: age (rename or "
                                 "drop the copies)")
    assert not out.exists()


@pytest.mark.parametrize("rows", [0, 1])
def test_a_table_too_short_to_fit_says_so(capsys, tmp_path: Path, rows: int) -> None:
    data = tmp_path / "data.csv"
    _table()[["age", "income"]].head(rows).to_csv(data, index=False)
    code, document = _run(capsys, "population", "fit", str(data), "--out",
                          str(tmp_path / "population.json"))
    assert code == 2, document
    plural = "" if rows == 1 else "s"
    assert document["error"] == (f"the table has {rows} row{plural}; a population model is "
                                 "fitted on at least 2")


def test_two_rows_still_fit(capsys, tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    _table()[["age", "income"]].head(2).to_csv(data, index=False)
    code, document = _run(capsys, "population", "fit", str(data), "--out",
                          str(tmp_path / "population.json"))
    assert code == 0, document
    assert document["rows"] == 2 and document["columns"] == ["age", "income"]


def test_an_output_the_file_system_refuses_is_named(capsys, tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    _table().to_csv(data, index=False)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a directory")
    target = blocker / "population.json"
    code, document = _run(capsys, "population", "fit", str(data), "--out", str(target))
    assert code == 2, document
    assert document["error"] == f"cannot write {target}: Not a directory"
    population = tmp_path / "population.json"
    assert _run(capsys, "population", "fit", str(data), "--out", str(population))[0] == 0
    sample = blocker / "rows.csv"
    code, document = _run(capsys, "population", "sample", str(population), "-n", "5",
                          "--out", str(sample))
    assert code == 2, document
    assert document["error"] == f"{sample}: Not a directory"


def test_a_directory_given_as_the_configuration_is_said_to_be_one(capsys,
                                                                 tmp_path: Path) -> None:
    code, document = _run(capsys, "config", "check", str(tmp_path))
    assert code == 2, document
    assert document["error"] == f"{tmp_path} is a directory; give the configuration's YAML file"


def test_a_category_spelled_as_a_missing_value_word_is_named(capsys, tmp_path: Path) -> None:
    """pandas reads the text ``NA`` (North America), ``None``, ``null`` … as missing; the fit
    said "missing values in 20 of 60 rows (fill or drop them first)" of a table without an
    empty cell. It now names the word and its count; a truly empty cell adds no word."""
    data = tmp_path / "data.csv"
    table = _table()
    table["continent"] = np.where(np.arange(60) % 3 == 0, "NA", "EU")
    table.loc[5, "sex"] = ""
    table.to_csv(data, index=False)
    out = tmp_path / "population.json"
    code, document = _run(capsys, "population", "fit", str(data), "--out", str(out))
    assert code == 2, document
    assert "column 'sex': missing values in 1 of 60 rows; " in document["error"]
    assert ("column 'continent': missing values in 20 of 60 rows, read from the text 'NA' in "
            "20 (pandas reads NA, N/A, NULL, None, nan and the like as missing: if it names a "
            "category, rename it in the data") in document["error"]
    assert not out.exists()
