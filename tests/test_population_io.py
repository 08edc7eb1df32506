"""The population-model document: JSON round trips, schema checks, matching a network, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from pipeline_steps.cli import main
from verifier.convert import save_network
from verifier.network import Layer, Network
from verifier.population import (
    Categorical,
    Discrete,
    DiscretisedNormal,
    Factor,
    Normal,
    PointMass,
    PopulationError,
    PopulationMismatchError,
    Product,
    TruncatedNormal,
    Uniform,
    check_matches_network,
    load_population,
    population_from_json,
    save_population,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FAIRSQUARE_NETWORKS = (Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
                       / "fairsquare" / "networks.json")


def small_document() -> dict:
    return {
        "format": "certgate.population/v1",
        "features": [
            {"name": "age", "kind": "continuous", "domain": [0, None]},
            {"name": "colour", "kind": "categorical", "columns": ["red", "blue"]},
        ],
        "distribution": {"kind": "product", "factors": [
            {"columns": ["age"], "distribution": {"kind": "truncated_normal", "mean": 30,
                                                  "variance": 100, "lower": 0}},
            {"columns": ["red", "blue"], "distribution": {"kind": "categorical",
                                                          "probabilities": [0.25, 0.75]}},
        ]},
    }


def test_document_round_trip_through_a_file(tmp_path: Path) -> None:
    model = population_from_json(small_document())
    path = save_population(model, tmp_path / "population_model.json")
    again = load_population(path)
    assert again == model
    assert json.loads(path.read_text())["distribution"]["factors"][0]["distribution"] == {
        "kind": "truncated_normal", "mean": 30.0, "variance": 100.0, "lower": 0.0}
    assert again.columns == ("age", "red", "blue")
    assert again.column_kinds() == ["continuous", "categorical", "categorical"]
    assert again.onehot_groups() == [[1, 2]]


def test_the_data_a_population_was_fitted_from_round_trips(tmp_path: Path) -> None:
    document = small_document()
    document["fitted_from"] = {"uri": "s3://bucket/adult.csv", "sha256": "0f" * 32, "rows": 30162}
    model = population_from_json(document)
    again = load_population(save_population(model, tmp_path / "population_model.json"))
    assert again == model
    assert again.fitted_from is not None and again.fitted_from.rows == 30162
    assert "fitted from: s3://bucket/adult.csv (30162 rows" in again.describe()
    assert population_from_json(small_document()).fitted_from is None


def mutated(path: list, value) -> dict:
    document = small_document()
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


@pytest.mark.parametrize(
    ("document", "location", "message"),
    [
        (mutated(["distribution", "factors", 0, "distribution", "variance"], -1.0),
         "distribution.product.factors.0.distribution.truncated_normal", "positive"),
        (mutated(["features", 0, "kind"], "real"), "features.0.kind", "continuous"),
        (mutated(["features", 0, "colour"], 1), "features.0.colour", "Extra inputs"),
        (mutated(["distribution", "factors", 1, "columns"], ["red"]),
         "distribution.product.factors.1", "dimension 2"),
        (mutated(["features", 1, "columns"], ["red", "green"]), "",
         "distribution lacks \\['green'\\], distribution columns no feature has \\['blue'\\]"),
        (mutated(["features", 0, "domain"], [0, 10]), "", "leaves the domain"),
        (mutated(["features", 0, "kind"], "integer"), "", "not integer-valued"),
        (mutated(["column_order"], ["red", "age"]), "", "column_order must list"),
        (mutated(["fitted_from"], {"uri": "a.csv", "sha256": "xyz", "rows": 3}),
         "fitted_from.sha256", "should match pattern"),
        (mutated(["fitted_from"], {"uri": "a.csv", "sha256": "0" * 64, "rows": 0}),
         "fitted_from.rows", "greater than or equal to 1"),
    ],
)
def test_validation_errors_name_the_field(document: dict, location: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        population_from_json(document)
    locations = [".".join(str(part) for part in error["loc"]) for error in caught.value.errors()]
    assert any(loc.startswith(location) for loc in locations), locations


def test_schema_consistency_rules() -> None:
    continuous_with_atoms = {
        "format": "certgate.population/v1",
        "features": [{"name": "x", "kind": "continuous"}],
        "distribution": {"kind": "point", "value": 0.5},
    }
    with_atoms = population_from_json(continuous_with_atoms)
    assert not with_atoms.atomless_columns()[0]
    assert with_atoms.column_atoms()[0].tolist() == [0.5]
    split_group = {
        "format": "certgate.population/v1",
        "features": [{"name": "c", "kind": "categorical", "columns": ["a", "b"]}],
        "distribution": {"kind": "product", "factors": [
            {"columns": ["a"], "distribution": {"kind": "discrete", "values": [0, 1],
                                                "probabilities": [0.5, 0.5]}},
            {"columns": ["b"], "distribution": {"kind": "discrete", "values": [0, 1],
                                                "probabilities": [0.5, 0.5]}}]},
    }
    with pytest.raises(ValidationError, match="does not model them as one one-hot"):
        population_from_json(split_group)


def test_column_order_permutes_the_input_columns() -> None:
    document = small_document()
    document["column_order"] = ["red", "age", "blue"]
    model = population_from_json(document)
    assert model.columns == ("red", "age", "blue")
    assert model.onehot_groups() == [[0, 2]]
    samples = model.sample(2000, 0)
    assert (samples[:, 0] + samples[:, 2] == 1).all() and (samples[:, 1] >= 0).all()
    p = model.prob_boxes([1, 10, 0], [1, 30, 0])[0]
    reference = population_from_json(small_document()).prob_boxes([10, 1, 0], [30, 1, 0])[0]
    assert p == reference


def test_file_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": ')
    with pytest.raises(PopulationError, match="not valid JSON"):
        load_population(broken)
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"format": "other/v2"}))
    with pytest.raises(PopulationError, match="unsupported population model format"):
        load_population(foreign)
    infinite = tmp_path / "infinite.json"
    infinite.write_text(json.dumps(small_document()).replace("null", "Infinity"))
    with pytest.raises(PopulationError, match="Infinity is not valid JSON"):
        load_population(infinite)


def test_check_matches_network_names_count_and_order() -> None:
    model = population_from_json(small_document())
    check_matches_network(model, 3)
    check_matches_network(model, 3, ["age", "red", "blue"])
    with pytest.raises(PopulationMismatchError, match=r"3 columns .* network has 4 inputs"):
        check_matches_network(model, 4)
    with pytest.raises(PopulationMismatchError, match="different order: input 0 is 'age'"):
        check_matches_network(model, 3, ["red", "age", "blue"])
    with pytest.raises(PopulationMismatchError, match="missing from the model: \\['green'\\]"):
        check_matches_network(model, 3, ["age", "red", "green"])


marginals = st.one_of(
    st.builds(lambda m, s: Normal(mean=m, std=s), st.floats(-1e3, 1e3), st.floats(1e-2, 1e3)),
    st.builds(lambda m, v: Normal(mean=m, variance=v), st.floats(-1e3, 1e3), st.floats(1e-2, 1e3)),
    st.builds(lambda m, s, a, w: TruncatedNormal(mean=m, std=s, lower=a, upper=a + w),
              st.floats(-5, 5), st.floats(0.5, 3), st.floats(-3, 3), st.floats(0.5, 5)),
    st.builds(lambda a, w: Uniform(lower=a, upper=a + w), st.floats(-1e3, 1e3),
              st.floats(1e-3, 1e3)),
    st.builds(lambda m, s, a: DiscretisedNormal(mean=m, std=s, lower=a),
              st.floats(-5, 5), st.floats(0.5, 5), st.integers(-3, 3)),
    st.builds(lambda v: PointMass(value=v), st.floats(-1e6, 1e6)),
)


@st.composite
def products(draw: st.DrawFn) -> Product:
    factors = []
    count = draw(st.integers(1, 4))
    for index in range(count):
        if draw(st.booleans()):
            weights = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=2, max_size=4)))
            distribution = Categorical(probabilities=(weights / weights.sum()).tolist())
            columns = [f"f{index}_{j}" for j in range(weights.size)]
        elif draw(st.booleans()):
            values = sorted(set(draw(st.lists(st.integers(-5, 5), min_size=1, max_size=4))))
            weights = np.ones(len(values)) / len(values)
            distribution = Discrete(values=values, probabilities=weights.tolist())
            columns = [f"f{index}"]
        else:
            distribution = draw(marginals)
            columns = [f"f{index}"]
        factors.append(Factor(columns=columns, distribution=distribution))
    return Product(factors=factors)


@given(products(), st.integers(0, 2**32 - 1))
def test_random_products_round_trip_and_factorise(product: Product, seed: int) -> None:
    again = Product.from_json(json.loads(json.dumps(product.to_json(), allow_nan=False)))
    assert again == product
    rng = np.random.default_rng(seed)
    lo = rng.normal(0, 5, size=(16, product.dimension))
    hi = lo + rng.exponential(5, size=(16, product.dimension))
    lo[rng.random(lo.shape) < 0.2] = -np.inf
    hi[rng.random(hi.shape) < 0.2] = np.inf
    np.testing.assert_array_equal(again.prob_boxes(lo, hi), product.prob_boxes(lo, hi))
    expected = np.ones(16)
    start = 0
    for factor in product.factors:
        width = len(factor.columns)
        part = slice(start, start + width)
        expected *= factor.distribution.prob_boxes(lo[:, part], hi[:, part])
        start += width
    np.testing.assert_allclose(product.prob_boxes(lo, hi), expected, rtol=1e-14, atol=1e-300)


# ---------------------------------------------------------------------------------- CLI
def write(tmp_path: Path, document: dict, name: str = "model.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def test_cli_validate_describe_and_sample(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, small_document())
    assert main(["population", "validate", path]) == 0
    assert "valid (3 columns, product distribution, total mass 1" in capsys.readouterr().out
    assert main(["population", "validate", path, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["columns"] == ["age", "red", "blue"] and summary["total_mass"] == 1.0
    assert main(["population", "describe", path]) == 0
    assert "TruncatedNormal(mean=30, variance=100" in capsys.readouterr().out
    assert main(["population", "sample", path, "-n", "5", "--seed", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "age,red,blue" and len(lines) == 6
    rows = np.array([[float(v) for v in line.split(",")] for line in lines[1:]])
    assert (rows[:, 1] + rows[:, 2] == 1).all()
    out = tmp_path / "draws.npy"
    assert main(["population", "sample", path, "-n", "5", "--seed", "3", "--out", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out), rows)
    csv = tmp_path / "draws.csv"
    assert main(["population", "sample", path, "-n", "4", "--out", str(csv)]) == 0
    assert csv.read_text().splitlines()[0] == "age,red,blue"


def test_cli_errors_are_one_line_with_exit_code_2(tmp_path: Path, capsys) -> None:
    broken = write(tmp_path, mutated(["distribution", "factors", 0, "distribution", "mean"],
                                     "old"))
    assert main(["population", "validate", broken]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert "distribution.product.factors.0.distribution.truncated_normal.mean" in error
    assert main(["population", "validate", str(tmp_path / "missing.json")]) == 2
    assert "file not found" in capsys.readouterr().err
    path = write(tmp_path, small_document())
    assert main(["population", "sample", path, "-n", "2", "--out", "x.txt"]) == 2
    assert ".csv or .npy" in capsys.readouterr().err


@pytest.mark.skipif(not FAIRSQUARE_NETWORKS.is_file(), reason="shared/benchmarks not present")
def test_cli_validate_against_the_fairsquare_network(tmp_path: Path, capsys) -> None:
    fairsquare = str(EXAMPLES / "population_fairsquare_bayes_net_1.json")
    network = f"{FAIRSQUARE_NETWORKS}#NN_2_1"
    assert main(["population", "validate", fairsquare, "--model", network]) == 0
    assert "matches network" in capsys.readouterr().out
    reordered = json.loads(Path(fairsquare).read_text())
    reordered["column_order"] = ["sex", "age", "education_num", "capital_gain", "capital_loss",
                                 "hours_per_week"]
    assert main(["population", "validate", write(tmp_path, reordered), "--model", network]) == 2
    assert "different order: input 0 is 'sex'" in capsys.readouterr().err


def test_cli_validate_against_unnamed_networks(tmp_path: Path, capsys) -> None:
    unnamed = tmp_path / "unnamed.json"
    save_network(Network([Layer(np.ones((1, 3)), np.zeros(1))]), unnamed)
    assert main(["population", "validate", write(tmp_path, small_document()),
                 "--model", str(unnamed)]) == 0
    assert "column count matches (the network records no input names)" in \
        capsys.readouterr().out
    assert main(["population", "validate", write(tmp_path, small_document()),
                 "--model", str(unnamed), "--input-names", "age,red,blue"]) == 0
    assert "; matches network" in capsys.readouterr().out
    save_network(Network([Layer(np.ones((1, 2)), np.zeros(1))]), unnamed)
    assert main(["population", "validate", write(tmp_path, small_document()),
                 "--model", str(unnamed)]) == 2
    assert "3 columns (age, red, blue) but the network has 2 inputs" in capsys.readouterr().err
