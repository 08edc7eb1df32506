"""``certgate population fit`` and ``population schema``: a table with raw strings, one-hot
columns, integers and floats becomes a valid population model that binds by name to a network
trained on the same columns; a Bayesian network fit reproduces a known conditional table
exactly; bad input is one line naming the column or option."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from small_training import train_classifier

import certgate
from certgate.population_data import FewValuedDensityWarning
from pipeline_steps.cli import main
from verifier.convert import save_network
from verifier.convert.torch_module import from_torch
from verifier.population import load_population
from verifier.population.bayesnet import BayesianNetwork


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def mixed_table(rows: int, seed: int = 0) -> pd.DataFrame:
    """Raw strings (city), an existing one-hot group (color=…), integers, binary, floats."""
    rng = np.random.default_rng(seed)
    colors = rng.integers(0, 3, size=rows)
    return pd.DataFrame({
        "age": rng.integers(18, 90, size=rows),
        "city": rng.choice(["Rome", "Berlin", "Paris"], size=rows),
        "income": rng.normal(50_000, 12_000, size=rows),
        "color=red": (colors == 0).astype(int),
        "color=green": (colors == 1).astype(int),
        "color=blue": (colors == 2).astype(int),
        "owns_home": rng.integers(0, 2, size=rows),
        "score": rng.uniform(0, 1, size=rows),
    })


def trained_network(frame: pd.DataFrame, path: Path) -> list[str]:
    """Train a small classifier on ``frame`` one-hot encoded by pandas (dummy columns last,
    so in another order than the fitted model's) and save it with its input names."""
    encoded = pd.get_dummies(frame, columns=["city"], prefix_sep="=", dtype=float)
    names = [str(c) for c in encoded.columns]
    x = torch.tensor(encoded.to_numpy(dtype=np.float64))
    x = (x - x.mean(0)) / x.std(0)
    y = torch.tensor((frame["score"] > 0.5).to_numpy(), dtype=torch.long)
    module = train_classifier(x, y, hidden=6, steps=60)
    save_network(from_torch(module, names, ["low", "high"]), path)
    return names


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("options", [
    [], ["--continuous", "normal"], ["--continuous", "gaussian_mixture", "--independent"],
    ["--continuous", "density_tree", "--independent"]])
def test_fit_mixed_table_binds_to_a_trained_network(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str,
        options: list[str]) -> None:
    frame = mixed_table(400)
    data = tmp_path / f"data{suffix}"
    frame.to_csv(data, index=False) if suffix == ".csv" else frame.to_parquet(data)
    network = tmp_path / "net.json"
    names = trained_network(frame, network)
    out = tmp_path / "population.json"
    code, report = run(capsys, "population", "fit", str(data), "--out", str(out),
                       *options, "--domain", "score=0:1",
                       "--domain", "age=18:", "--model", str(network))
    assert code == 0, report
    assert [column for f in report["features"] for column in f["columns"]] == [
        "age", "city=Berlin", "city=Paris", "city=Rome", "income", "color=red",
        "color=green", "color=blue", "owns_home", "score"]
    assert report["columns"] == names  # written in the network's input order
    kinds = {f["name"]: f["kind"] for f in report["features"]}
    assert kinds == {"age": "integer", "city": "categorical", "income": "continuous",
                     "color": "categorical", "owns_home": "binary", "score": "continuous"}
    city = next(f for f in report["features"] if f["name"] == "city")
    assert city["categories"] == ["Berlin", "Paris", "Rome"]
    assert report["binding"] == "matches network"
    assert report["total_mass"] == pytest.approx(1.0, abs=1e-9)
    code, validated = run(capsys, "population", "validate", str(out), "--model", str(network))
    assert code == 0 and validated["binding"] == "matches network"
    model = load_population(out)
    # the fitted city frequencies are the data's
    counts = frame["city"].value_counts(normalize=True)
    lo = np.full(model.dimension, -np.inf)
    hi = np.full(model.dimension, np.inf)
    berlin = list(model.columns).index("city=Berlin")
    lo[berlin] = 1.0
    assert model.prob_boxes(lo, hi)[0] == pytest.approx(counts["Berlin"], rel=1e-12)


def test_bayesian_network_reproduces_a_known_conditional_table(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # P(group): a 1/4, b 3/4; P(approved = 1 | a) = 1/5, P(approved = 1 | b) = 7/10 — exact
    # counts, so the fitted table must equal these fractions (up to float division).
    rows = ([("a", 1)] * 20 + [("a", 0)] * 80 + [("b", 1)] * 210 + [("b", 0)] * 90)
    data = tmp_path / "data.csv"
    pd.DataFrame(rows, columns=["group", "approved"]).to_csv(data, index=False)
    out = tmp_path / "bn.json"
    code, report = run(capsys, "population", "fit", str(data), "--out", str(out),
                       "--parents", "approved=group")
    assert code == 0, report
    model = load_population(out)
    assert isinstance(model.distribution, BayesianNetwork)
    node = next(n for n in model.distribution.nodes if n.name == "approved")
    table = {row.condition["group"]: dict(zip(row.distribution.values,
                                              row.distribution.probabilities, strict=True))
             for row in node.cpt}
    assert table == {(0.0, 0.0): {0.0: 80 / 100, 1.0: 20 / 100},
                     (1.0, 1.0): {0.0: 90 / 300, 1.0: 210 / 300}}
    columns = list(model.columns)
    assert columns == ["group=a", "group=b", "approved"]
    # joint P(group = b, approved = 1) = 3/4 · 7/10 through the model's own box mass
    assert model.prob_boxes([0, 1, 1], [0, 1, 1])[0] == pytest.approx(0.525, rel=1e-12)


def test_continuous_parent_with_bins(capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    x = np.concatenate([np.full(50, 0.25), np.full(50, 0.75)])
    y = np.concatenate([np.r_[np.ones(10), np.zeros(40)], np.r_[np.ones(45), np.zeros(5)]])
    data = tmp_path / "data.csv"
    pd.DataFrame({"x": x, "y": y.astype(int)}).to_csv(data, index=False)
    code, report = run(capsys, "population", "fit", str(data), "--out",
                       str(tmp_path / "bn.json"), "--parents", "y=x", "--bins", "x=0.5",
                       "--domain", "x=0:1")
    assert code == 0, report
    node = next(n for n in load_population(tmp_path / "bn.json").distribution.nodes
                if n.name == "y")
    assert [row.distribution.probabilities for row in node.cpt] == [[0.8, 0.2], [0.1, 0.9]]


@pytest.mark.parametrize(("table", "options", "message"), [
    ("city,x\nRome,1\n,2\nParis,3\n", [], "column 'city': missing values"),
    ("city,team,x\nRome,,1\n,b,2\nParis,a,3\n,a,4\n", [],
     "column 'city': missing values in 2 of 4 rows; column 'team': missing values in 1 of 4 "
     "rows (fill or drop them first)"),
    ("city,income,x\nRome,,1\n,5.5,2\nParis,7.5,\n,6.0,4\n", [],
     "column 'city': missing values in 2 of 4 rows; column 'income': missing values in 1 of 4 "
     "rows; column 'x': missing values in 1 of 4 rows (fill or drop them first)"),
    ("x,y\n1.5,a\n2.5,b\n", ["--domain", "y=0:1"], "not numeric columns"),
    ("x,y\n1.5,a\n2.5,b\n", ["--bins", "x=2"], "give parents too"),
    ("x,y\n1.5,a\n2.5,b\n", ["--parents", "y=z"], "unknown features ['z']"),
    ("x,y\n1.5,a\n2.5,b\n", ["--domain", "x=a:1"], "--domain x: 'a' is not a number"),
    ("x,y\n1.5,a\n2.5,b\n", ["--categorical", "g"], "--categorical 'g': expected KEY=VALUE"),
    ("x,y\n1.5,a\n2.5,b\n", ["--parents", "y=x", "--continuous", "density_tree"],
     "independent product only"),
    ("x,y\n1.5,a\n2.5,b\n", ["--continuous", "gaussian_mixture"], "--independent"),
    ("x,y\n1.5,a\n2.5,b\n", ["--protected", "z"], "protected feature 'z'"),
    ("x,y\n1.5,a\n2.5,b\n", ["--independent", "--parents", "y=x"], "drop one of the two"),
])
def test_bad_input_names_the_problem(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                     table: str, options: list[str], message: str) -> None:
    data = tmp_path / "data.csv"
    data.write_text(table)
    code, report = run(capsys, "population", "fit", str(data), "--out",
                       str(tmp_path / "p.json"), *options)
    assert code == 2 and message in report["error"]
    assert not (tmp_path / "p.json").exists()


def test_unknown_table_suffix(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "data.xlsx"
    data.write_text("x\n1\n")
    code, report = run(capsys, "population", "fit", str(data), "--out", str(tmp_path / "p.json"))
    assert code == 2 and "expected a .csv, .parquet or .pq file" in report["error"]


def test_schema_is_the_population_model_schema(capsys: pytest.CaptureFixture[str]) -> None:
    from verifier.population import PopulationModel

    code, schema = run(capsys, "population", "schema")
    assert code == 0 and schema == PopulationModel.model_json_schema()
    assert "bayesian_network" in json.dumps(schema)


def test_a_few_valued_column_with_no_exact_grid_is_fitted_with_a_warning(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Tenths lie on no exact binary-float grid, so the column is fitted as a density, whose
    atoms keep only the values holding 5 % of the rows: the fit says so (stderr, and
    ``warnings`` in ``--json``), naming the column; a 0.5 grid is coded and many-valued
    columns are continuous without a warning."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"tenths": rng.choice([0.1, 0.2, 0.3, 0.4], 400,
                                               p=[0.49, 0.49, 0.01, 0.01]),
                          "halves": rng.choice([0.5, 1.0, 1.5], 400),
                          "income": rng.lognormal(10.0, 0.5, 400)})
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "population.json"
    assert main(["population", "fit", str(data), "--out", str(out), "--independent",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    kinds = {feature["name"]: feature["kind"] for feature in report["features"]}
    assert kinds == {"tenths": "continuous", "halves": "integer", "income": "continuous"}
    assert len(report["warnings"]) == 1
    assert "'tenths' holds only 4 distinct values" in report["warnings"][0]
    assert main(["population", "fit", str(data), "--out", str(out), "--independent"]) == 0
    captured = capsys.readouterr()
    assert "certgate: warning: column 'tenths'" in captured.err
    assert "warning" not in captured.out


def test_the_python_api_warns_about_a_few_valued_column_with_no_exact_grid() -> None:
    """The same warning reaches :func:`certgate.fit_population`'s callers as a typed warning
    (one place: the CLI prints what the fit warns), and only for the tenths."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"tenths": rng.choice([0.1, 0.2, 0.3, 0.4], 400,
                                               p=[0.49, 0.49, 0.01, 0.01]),
                          "halves": rng.choice([0.5, 1.0, 1.5], 400),
                          "income": rng.lognormal(10.0, 0.5, 400)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        certgate.fit_population(frame, structure="independent")
    texts = [str(w.message) for w in caught if w.category is FewValuedDensityWarning]
    assert len(texts) == 1 and "'tenths' holds only 4 distinct values" in texts[0]
    with pytest.warns(FewValuedDensityWarning, match="scale the column to integers"):
        certgate.fit_population(frame[["tenths"]], structure="independent")


def test_a_few_valued_column_whose_values_all_keep_their_mass_gets_no_warning() -> None:
    """Every tenth holds at least 5 % of the rows: the histogram keeps each as an atom with
    its share of the rows, so nothing is spread and nothing is warned; a normal fit keeps no
    atom and still warns for every value."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"tenths": rng.choice([0.1, 0.2, 0.3, 0.4], 400),
                          "income": rng.lognormal(10.0, 0.5, 400)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = certgate.fit_population(frame, structure="independent")
    assert not [w for w in caught if w.category is FewValuedDensityWarning]
    column = model.columns.index("tenths")
    assert model.column_atoms()[column].tolist() == [0.1, 0.2, 0.3, 0.4]
    for value, share in frame.tenths.value_counts(normalize=True).items():
        lo, hi = model.support()
        lo, hi = lo.copy(), hi.copy()
        lo[column] = hi[column] = value
        low, high = model.prob_boxes_interval(lo[None, :], hi[None, :])
        assert low[0] <= share <= high[0] and high[0] - low[0] < 1e-9
    with pytest.warns(FewValuedDensityWarning, match="its values get no probability mass"):
        certgate.fit_population(frame, structure="independent", continuous="normal")


def test_a_model_without_input_names_and_a_wider_raw_table_asks_for_input_names(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A plain ``torch.onnx.export`` records no input names; fitted beside a raw table whose
    columns, one-hot encoded, outnumber its inputs (a constant ``country`` and a label it
    does not read), the fit says to name the inputs instead of failing on a column the
    model never reads (the constant) or on the column counts, and writes nothing; named, it
    fits only the network's columns."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], 200), "kids": rng.integers(0, 4, 200),
                          "income": rng.lognormal(10, 1, 200), "country": "US",
                          "label": rng.choice(["low", "mid", "high"], 200)})
    table = tmp_path / "raw.csv"
    frame.to_csv(table, index=False)
    model = tmp_path / "net.onnx"
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(module.eval(), (torch.zeros(2, 4),), str(model), dynamo=False)
    out = tmp_path / "population.json"

    code, answer = run(capsys, "population", "fit", str(table), "--out", str(out),
                       "--protected", "sex", "--model", str(model))
    assert code == 2 and "records no input names" in answer["error"]
    assert "--input-names" in answer["error"] and "'country'" not in answer["error"]
    assert not out.exists()

    code, answer = run(capsys, "population", "fit", str(table), "--out", str(out),
                       "--protected", "sex", "--model", str(model),
                       "--input-names", "sex=F,sex=M,kids,income")
    assert code == 0, answer
    assert list(load_population(out).columns) == ["sex=F", "sex=M", "kids", "income"]


def test_a_numeric_input_written_as_text_in_one_row_is_named(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """One `unknown` in a numeric column makes the table read it as text; a network reading
    that column as one number was fitted a one-hot group of every distinct value (thousands
    of columns) and refused with all their names. Now the fit names the column and the text,
    and writes nothing."""
    frame = mixed_table(300)
    model = tmp_path / "net.json"
    trained_network(frame, model)
    dirty = frame.astype({"income": object})
    dirty.loc[7, "income"] = "unknown"
    table = tmp_path / "dirty.csv"
    dirty.to_csv(table, index=False)
    out = tmp_path / "population.json"
    code, answer = run(capsys, "population", "fit", str(table), "--out", str(out),
                       "--model", str(model))
    assert code == 2 and not out.exists()
    assert "column 'income' holds text" in answer["error"] and "'unknown'" in answer["error"]
    assert len(answer["error"]) < 400


def test_the_fit_says_what_it_fits_before_it_starts(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    """A default fit of a 1M-row table takes 25 s with no other output: the human output
    names the table, its rows and its raw columns on stderr before the fit; ``--json``
    keeps both streams free of it."""
    data = tmp_path / "data.csv"
    mixed_table(300).to_csv(data, index=False)
    out = tmp_path / "population.json"
    capsys.readouterr()
    assert main(["population", "fit", str(data), "--out", str(out), "--independent"]) == 0
    captured = capsys.readouterr()
    assert f"{data}: fitting a population model of 300 rows, 8 columns..." in captured.err
    assert main(["population", "fit", str(data), "--out", str(out), "--independent",
                 "--json"]) == 0
    captured = capsys.readouterr()
    assert "fitting" not in captured.err and json.loads(captured.out)["file"] == str(out)
