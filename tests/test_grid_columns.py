"""Float columns on a grid (value = offset + step·k): fitted as integer codes, bound through the
exact affine input map, shown in the data's units. Oracles: the data's own frequencies, and
exact enumeration in rationals of the network at the real points offset + step·k."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from small_training import train_classifier

import certgate
from pipeline_steps.cli import main
from tests.test_binding import export_onnx
from tests.test_causal_ties import _oracle_class
from verifier.audits import run_audit
from verifier.audits.binding import bind, coded_network
from verifier.audits.causal_fairness import CausalFairnessSettings
from verifier.audits.demographic_parity import demographic_parity_audit
from verifier.audits.local_robustness import LocalRobustnessSettings
from verifier.bounds import compute_bounds
from verifier.network import Layer, Network
from verifier.population import PopulationModel, load_population, population_from_json
from verifier.population.errors import PopulationError
from verifier.population.fitting import grid_code, infer_features
from verifier.pv import PVSettings
from verifier.spec import Names, atoms_of, evaluate_event, parse_event

ROOT = Path(__file__).resolve().parent.parent
RATINGS = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]


def grid_table(rows: int = 600, seed: int = 0) -> pd.DataFrame:
    """sex (0/1), score on the 0.5 grid, pair ∈ {0.5, 2.5}, hours (integers)."""
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, rows)
    score = rng.choice(RATINGS, rows, p=[0.1, 0.2, 0.3, 0.2, 0.1, 0.1])
    pair = np.where(rng.random(rows) < 0.3 + 0.3 * sex, 2.5, 0.5)
    hours = rng.integers(20, 60, rows)
    return pd.DataFrame({"sex": sex, "score": score, "pair": pair, "hours": hours})


# ------------------------------------------------------------------ the rule


@pytest.mark.parametrize(("values", "code"), [
    (RATINGS, (0.5, 0.0)),
    ([0.5, 2.5], (2.0, 0.5)),
    ([0.1, 0.2], (0.1, 0.0)),
    ([1.0, 3.0, 7.0], (1.0, 0.0)),    # integers are read as an integer column reads them
    ([1.5, 3.5, 7.5], (2.0, 1.5)),
    ([-0.75, 0.25], (1.0, -0.75)),
    ([2.5], (1.0, 2.5)),
    ([0.1, 0.2, 0.3], None),          # 0.3 is not 3 × 0.1 in binary: no exact small grid
    ([0.0, 1e-9, 1.0], None),         # a grid of ~2^30 steps
])
def test_grid_code_is_the_coarsest_exact_grid(values: list[float],
                                              code: tuple[float, float] | None) -> None:
    assert grid_code(np.array(values)) == code


@given(st.integers(-40, 40), st.integers(1, 99), st.integers(-8, 3),
       st.lists(st.integers(0, 60), min_size=2, max_size=12, unique=True))
@settings(max_examples=200, deadline=None)
def test_every_value_is_offset_plus_step_k_exactly(start: int, numerator: int, exponent: int,
                                                   ks: list[int]) -> None:
    step = Fraction(numerator) * Fraction(2) ** exponent
    values = np.array(sorted(float(Fraction(start, 4) + step * k) for k in ks))
    code = grid_code(values)
    assert code is not None
    found_step, offset = code
    for value in values:
        k = (Fraction(value) - Fraction(offset)) / Fraction(found_step)
        assert k.denominator == 1 and abs(k) <= 2**31
    if all(float(value).is_integer() for value in values):
        assert code == (1.0, 0.0)
    else:
        assert Fraction(found_step) % step == 0   # at least as coarse as the generating grid


def test_the_fit_reads_few_valued_grids_as_integers_and_keeps_the_rest() -> None:
    frame = grid_table()
    frame["income"] = np.random.default_rng(1).normal(3e4, 5e3, len(frame))
    frame["tenths"] = np.random.default_rng(2).choice([0.1, 0.2, 0.3], len(frame))
    frame["flag"] = frame["sex"].astype(np.float64)
    kinds = {f.name: (f.kind, f.step, f.offset) for f in infer_features(frame)}
    assert kinds == {"sex": ("binary", None, None), "score": ("integer", 0.5, None),
                     "pair": ("integer", 2.0, 0.5), "hours": ("integer", None, None),
                     "income": ("continuous", None, None),
                     "tenths": ("continuous", None, None), "flag": ("binary", None, None)}
    many = pd.DataFrame({"score": np.arange(30) * 0.5})
    assert infer_features(many)[0].kind == "continuous"                 # > max_discrete_values
    assert infer_features(many, max_discrete_values=30)[0].step == 0.5


# ------------------------------------------------------------------ the fit


@pytest.mark.parametrize("structure", ["independent", "learned"])
def test_the_atoms_carry_the_datas_frequencies(structure: str) -> None:
    frame = grid_table()
    model = certgate.fit_population(frame, structure=structure,
                                    protected="sex" if structure == "learned" else None)
    lower, upper = model.support()
    for name in ("score", "pair"):
        index = model.columns.index(name)
        values = model.values_of(np.arange(int(lower[index]), int(upper[index]) + 1)[:, None]
                                 * np.eye(model.dimension)[index])[:, index]
        masses = {}
        for code, value in zip(range(int(lower[index]), int(upper[index]) + 1), values,
                               strict=True):
            lo, hi = lower.copy(), upper.copy()
            lo[index] = hi[index] = code
            masses[float(value)] = float(model.prob_boxes(lo, hi)[0])
        frequencies = frame[name].value_counts(normalize=True).to_dict()
        assert set(frequencies) <= set(masses)
        for value, mass in masses.items():
            assert mass == pytest.approx(frequencies.get(value, 0.0), abs=1e-12), (name, value)


def test_sampling_and_describe_speak_the_datas_units() -> None:
    frame = grid_table()
    model = certgate.fit_population(frame, protected="sex")
    drawn = model.sample(4000, np.random.default_rng(3))
    for name in ("score", "pair"):
        column = drawn[:, model.columns.index(name)]
        assert set(np.unique(column).tolist()) <= set(frame[name].tolist())
    codes = model.sample_codes(4000, np.random.default_rng(3))
    assert np.array_equal(model.values_of(codes), drawn)
    assert np.array_equal(model.codes_of(drawn), codes)
    assert (codes == np.rint(codes)).all()
    text = model.describe()
    assert "score takes the values 0.5, 1, 1.5, 2, 2.5, 3" in text
    assert "pair: integer, values 0.5 + 2·k in [0.5, 2.5]" in text


def test_a_given_domain_is_in_the_datas_units() -> None:
    model = certgate.fit_population(grid_table(), structure="independent",
                                    domains={"score": (0.0, 5.0)})
    feature = model.features[model.columns.index("score")]
    assert feature.domain == (0, 10)


# ------------------------------------------------------------------ the schema


def _single(feature: dict, values: list[int], probabilities: list[float]) -> dict:
    return {"format": "certgate.population/v1", "features": [feature],
            "distribution": {"kind": "product", "factors": [
                {"columns": [feature["name"]], "distribution": {
                    "kind": "discrete", "values": values, "probabilities": probabilities}}]}}


@pytest.mark.parametrize(("feature", "message"), [
    ({"name": "r", "kind": "integer", "step": 0.0}, "feature 'r': step must be"),
    ({"name": "r", "kind": "integer", "step": -0.5}, "feature 'r': step must be"),
    ({"name": "r", "kind": "continuous", "step": 0.5}, "feature 'r': only an integer feature"),
    ({"name": "r", "kind": "binary", "offset": 1.0}, "feature 'r': only an integer feature"),
])
def test_bad_codes_are_refused_naming_the_feature(feature: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        population_from_json(_single(feature, [0, 1], [0.5, 0.5]))


def test_data_off_the_grid_is_an_error_naming_the_feature() -> None:
    model = population_from_json(_single({"name": "r", "kind": "integer", "step": 0.5,
                                          "offset": 0.25}, [0, 1], [0.5, 0.5]))
    assert model.codes_of(np.array([[0.25], [0.75]])).tolist() == [[0.0], [1.0]]
    with pytest.raises(PopulationError, match=r"feature 'r': the data holds the value 0\.5"):
        model.codes_of(np.array([[0.25], [0.5]]), "the data")


def test_old_files_load_and_mean_what_they_meant() -> None:
    for path in sorted((ROOT / "examples").glob("population_*.json")):
        document = json.loads(path.read_text())
        model = population_from_json(document)
        assert model.to_json() == PopulationModel.model_validate(document).to_json()
        assert not model.feature_schema.coded
        assert all("step" not in f and "offset" not in f for f in model.to_json()["features"])
        assert np.array_equal(model.sample(50, 0), model.sample_codes(50, 0))
        network = Network([Layer(np.ones((2, model.dimension)), np.zeros(2))],
                          list(model.columns), ["a", "b"])
        assert coded_network(network, model) is network


# ------------------------------------------------------------------ the bound network


def _grid_population(step: float, offset: float) -> PopulationModel:
    return population_from_json({
        "format": "certgate.population/v1",
        "features": [{"name": "sex", "kind": "binary"},
                     {"name": "score", "kind": "integer", "domain": [0, 5], "step": step,
                      **({"offset": offset} if offset else {})},
                     {"name": "level", "kind": "integer", "domain": [0, 2]}],
        "distribution": {"kind": "product", "factors": [
            {"columns": ["sex"], "distribution": {
                "kind": "discrete", "values": [0, 1], "probabilities": [0.375, 0.625]}},
            {"columns": ["score"], "distribution": {
                "kind": "discrete", "values": [0, 1, 2, 3, 4, 5],
                "probabilities": [0.0625, 0.125, 0.25, 0.25, 0.1875, 0.125]}},
            {"columns": ["level"], "distribution": {
                "kind": "discrete", "values": [0, 1, 2],
                "probabilities": [0.25, 0.5, 0.25]}}]}})


def _network(seed: int) -> Network:
    rng = np.random.default_rng(seed)
    return Network([Layer(rng.normal(size=(6, 3)), rng.normal(size=6), "relu"),
                    Layer(rng.normal(size=(2, 6)), rng.normal(size=2))],
                   ["sex", "score", "level"], ["no", "yes"])


def _points(population: PopulationModel) -> list[tuple[tuple[int, ...], Fraction]]:
    """Every code point with its exact probability (the discrete tables in rationals)."""
    tables = []
    for factor in population.distribution.factors:
        table = factor.distribution
        weights = [Fraction(p) for p in table.probabilities]
        tables.append([(int(v), w / sum(weights)) for v, w in zip(table.values, weights,
                                                                  strict=True)])
    return [(tuple(v for v, _ in combo), Fraction(1) * np.prod([w for _, w in combo]))
            for combo in itertools.product(*tables)]


def _real_point(population: PopulationModel, codes: tuple[int, ...]) -> tuple[Fraction, ...]:
    step, offset = population.feature_schema.column_codes()
    return tuple(Fraction(float(o)) + Fraction(float(s)) * k
                 for s, o, k in zip(step, offset, codes, strict=True))


@pytest.mark.parametrize(("step", "offset", "folded"), [(0.5, 0.0, False), (0.7, 0.3, True)])
def test_demographic_parity_equals_enumeration_at_the_real_points(
        step: float, offset: float, folded: bool) -> None:
    population = _grid_population(step, offset)
    original = _network(0)            # both groups get the favourable class at some points
    network, bound = bind(original, population, None, "test")
    assert network.folded is folded
    favourable = {0: Fraction(0), 1: Fraction(0)}
    group = {0: Fraction(0), 1: Fraction(0)}
    for codes, weight in _points(population):
        group[codes[0]] += weight
        if _oracle_class(original, _real_point(population, codes)) == 1:
            favourable[codes[0]] += weight
    ratio = (favourable[0] / group[0]) / (favourable[1] / group[1])
    for gamma, verdict in ((float(ratio) - 1e-6, "satisfied"), (float(ratio) + 1e-6, "violated")):
        certificate = demographic_parity_audit(
            network, bound, protected="sex", privileged=1.0, favorable_class=1, gamma=gamma,
            settings=PVSettings(timeout_s=60.0))
        low, high = certificate.bounds["value"]
        assert Fraction(low) <= ratio <= Fraction(high)
        assert certificate.verdict == verdict, (low, high, float(ratio))


@pytest.mark.parametrize(("step", "offset"), [(0.5, 0.0), (0.7, 0.3), (2.0, 0.5)])
def test_causal_fairness_equals_enumeration_at_the_real_points(step: float,
                                                              offset: float) -> None:
    population = _grid_population(step, offset)
    biased_total = 0
    for seed in range(4):
        original = _network(seed)
        network, bound = bind(original, population, None, "test")
        biased = 0
        others = list(itertools.product(range(6), range(3)))
        for score, level in others:
            classes = {_oracle_class(original, _real_point(population, (sex, score, level)))
                       for sex in (0, 1)}
            biased += len(classes) > 1
        settings_ = CausalFairnessSettings(kind="causal_fairness", protected=["sex"],
                                           max_biased_share=0.5, timeout_s=30)
        certificate = run_audit(settings_, network, bound)
        low, high = certificate.bounds["biased_share"]
        assert low <= biased / len(others) <= high
        assert high - low <= 2 ** -40
        biased_total += biased
    assert biased_total > 0           # the oracle is not trivially fair


@pytest.mark.parametrize(("step", "offset"), [(0.5, 0.0), (2.0, 0.5)])
def test_causal_witnesses_and_regions_are_in_the_datas_units(step: float,
                                                              offset: float) -> None:
    population = _grid_population(step, offset)
    grid = {float(offset + step * k) for k in range(6)}
    seen = 0
    for seed in range(4):
        original = _network(seed)
        network, bound = bind(original, population, None, "test")
        certificate = run_audit(CausalFairnessSettings(
            kind="causal_fairness", protected=["sex"], max_biased_share=0.5, timeout_s=30),
            network, bound)
        for record in certificate.details["witnesses"]:
            classes = [_oracle_class(original, tuple(record[key]))
                       for key in ("x", "x_other")]
            assert classes == record["classes"]
            assert record["x"][1] in grid and record["x_other"][1] in grid
            seen += 1
        for region in certificate.details["regions"]:
            low, high = region["box"]["score"]
            assert offset <= low <= high <= offset + 5 * step
    assert seen > 0


@given(st.floats(0.01, 10.0), st.floats(-5.0, 5.0), st.integers(0, 2**16))
@settings(max_examples=60, deadline=None)
def test_the_folded_input_map_keeps_bounds_sound(step: float, offset: float, seed: int) -> None:
    population = _grid_population(step, offset)
    original = _network(seed)
    network, _ = bind(original, population, None, "test")
    rng = np.random.default_rng(seed)
    for _ in range(3):
        low = rng.integers(0, 6, 3).astype(np.float64)
        high = np.minimum(low + rng.integers(0, 3, 3), 5.0)
        for method in ("ibp", "crown"):
            result = compute_bounds(network, low[None, :], high[None, :], None, method)
            for codes in itertools.product(*(range(int(a), int(b) + 1)
                                             for a, b in zip(low, high, strict=True))):
                h = list(_real_point(population, codes))
                for layer in original.layers:
                    h = [sum((Fraction(float(w)) * v for w, v in zip(row, h, strict=True)),
                             Fraction(float(b))) for row, b in zip(layer.weight, layer.bias,
                                                                   strict=True)]
                    if layer.activation == "relu":
                        h = [max(v, Fraction(0)) for v in h]
                for k, value in enumerate(h):
                    assert Fraction(result.lower[0, k]) <= value <= Fraction(result.upper[0, k])


# ------------------------------------------------------------------ the user's flow


def test_csv_to_verify_demographic_parity(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    frame = grid_table(800, seed=7)
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "pop.json"
    assert main(["population", "fit", str(data), "--out", str(out), "--protected", "sex",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    coded = {f["name"]: (f["step"], f["offset"]) for f in report["features"] if "step" in f}
    assert coded == {"score": (0.5, 0.0), "pair": (2.0, 0.5)}
    assert main(["population", "sample", str(out), "-n", "300", "--seed", "1", "--json"]) == 0
    sampled = json.loads(capsys.readouterr().out)
    for name in ("score", "pair", "hours"):
        column = [row[sampled["columns"].index(name)] for row in sampled["samples"]]
        assert set(column) <= set(frame[name].tolist()), name
    assert main(["population", "describe", str(out)]) == 0
    assert "pair takes the values 0.5, 2.5 (codes k = 0, 1; value = 0.5 + 2·k)" in \
        capsys.readouterr().out

    inputs = torch.tensor(frame.to_numpy(np.float32))
    inputs[:, 3] /= 60.0
    labels = torch.tensor(((frame.score + frame.pair + 0.5 * frame.sex) > 2.6).astype(int)
                          .to_numpy())
    model = train_classifier(inputs, labels)
    with torch.no_grad():
        model[0].weight[:, 3] /= 60.0            # the model reads raw hours
    path = export_onnx(model.eval(), 4, tmp_path / "net.onnx")
    code = main(["verify", "demographic-parity", "--model", str(path), "--input-names",
                 "sex,score,pair,hours", "--population", str(out), "--protected", "sex",
                 "--privileged", "1", "--favorable-class", "1", "--gamma", "0.5",
                 "--timeout", "60", "--precision", "0.02", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code in (0, 1), payload
    fidelity = payload["population_fidelity"]
    assert fidelity["status"] == "consistent", fidelity
    assert fidelity["data"]["rows_used"] == 800

    population = load_population(out)
    with torch.no_grad():
        drawn = population.sample(200_000, np.random.default_rng(5))
        granted = model(torch.as_tensor(drawn, dtype=torch.float32)).argmax(1).numpy() == 1
    privileged = drawn[:, 0] == 1
    for name, members in (("p_privileged", privileged), ("p_unprivileged", ~privileged)):
        hits = granted[members]
        error = hits.std() / np.sqrt(hits.size)
        low, high = payload["probabilities"][name]
        assert low - 5 * error <= hits.mean() <= high + 5 * error


def test_bins_of_a_coded_parent_are_given_in_the_datas_units() -> None:
    model = certgate.fit_population(grid_table(), parents={"hours": ["score"]},
                                    bins={"score": [1.75]})
    [node] = [n for n in model.distribution.nodes if n.name == "hours"]
    assert [row.condition["score"] for row in node.cpt] == [(None, 3.0), (4.0, None)]


def test_validation_compares_values_with_values() -> None:
    from pipeline_steps.validation import DomainError, exact_domain_check, expectation_specs

    population = _grid_population(0.5, 0.0)
    network = _network(0)
    assert exact_domain_check(network, population, {"score": (0.0, 2.5)})
    with pytest.raises(DomainError, match=r"support of 'score' is \[0, 2\.5\]"):
        exact_domain_check(network, population, {"score": (0.0, 2.0)})
    [score] = [spec for spec in expectation_specs(population, list(population.columns))
               if spec.kind == "ExpectColumnValuesToBeInSet" and spec.column == "score"]
    assert score.kwargs["value_set"] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]


@pytest.mark.parametrize(("step", "offset", "qualified"), [
    (0.5, 0.0, "x.score >= 1"), (0.5, 0.0, "x.score + x.level > 1.75"),
    (2.0, 0.5, "x.score <= 4.5 and x.level >= 1"), (0.75, 0.25, "x.score >= 1"),
    (0.7, 0.3, "x.score >= 1"),     # 0.3 − 1 is no float: a bound on the code, k >= 1
])
def test_qualified_events_in_the_datas_units_equal_enumeration(step: float, offset: float,
                                                               qualified: str) -> None:
    """``qualified`` reads values; PV reads codes: the event is written in codes exactly and
    the certified ratio encloses the enumeration's (the event evaluated at the real values)."""
    population = _grid_population(step, offset)
    original = _network(0)
    network, bound = bind(original, population, None, "test")
    names = Names.of(list(population.columns), ["no", "yes"])
    event = parse_event(qualified, names)
    favourable = {0: Fraction(0), 1: Fraction(0)}
    group = {0: Fraction(0), 1: Fraction(0)}
    for codes, weight in _points(population):
        point = _real_point(population, codes)
        holds = [sum((Fraction(c) * v for c, v in zip(atom.input_coeffs, point, strict=True)),
                     Fraction(atom.constant)) for atom in atoms_of(event)]
        truth = {atom: np.array([value > 0 if atom.strict else value >= 0])
                 for atom, value in zip(atoms_of(event), holds, strict=True)}
        if not evaluate_event(event, truth)[0]:
            continue
        group[codes[0]] += weight
        if _oracle_class(original, point) == 1:
            favourable[codes[0]] += weight
    assert favourable[0] > 0 and favourable[1] > 0
    ratio = (favourable[0] / group[0]) / (favourable[1] / group[1])
    sides = [(float(ratio) - 1e-6, "satisfied"), (float(ratio) + 1e-6, "violated")]
    for gamma, verdict in [(g, v) for g, v in sides if g <= 1.0]:   # the ratio form's γ ≤ 1
        certificate = demographic_parity_audit(
            network, bound, protected="sex", privileged=1.0, favorable_class=1, gamma=gamma,
            qualified=qualified, settings=PVSettings(timeout_s=60.0))
        low, high = certificate.bounds["value"]
        assert Fraction(low) <= ratio <= Fraction(high)
        assert certificate.verdict == verdict, (low, high, float(ratio))


def test_values_of_a_grid_with_a_long_step_are_the_datas_values_exactly() -> None:
    """A fitted grid's values are floats, but ``offset + step * k`` in float arithmetic rounds
    twice: here it misses 17294714.930960625 (k = 86) by an ulp. Samples, the expectation
    suite's value set and the domain check must give the data's values themselves."""
    from pipeline_steps.validation import exact_domain_check, expectation_specs

    data = [-1430655444.7305512, -418267528.21925026, 17294714.930960625]
    frame = pd.DataFrame({"sex": [0, 1] * 30, "amount": data * 20})
    model = certgate.fit_population(frame, structure="independent")
    feature = model.features[model.columns.index("amount")]
    assert feature.code() == (11771952.517573267, data[0])
    step, offset = feature.code()
    assert offset + step * 86 != data[2]           # the double rounding this test is about
    codes = model.codes_of(frame.to_numpy(dtype=np.float64))
    assert np.array_equal(model.values_of(codes), frame.to_numpy(dtype=np.float64))
    drawn = model.sample(500, np.random.default_rng(0))[:, model.columns.index("amount")]
    assert set(drawn.tolist()) == set(data)
    [amount] = [spec for spec in expectation_specs(model, list(model.columns))
                if spec.column == "amount"
                and spec.kind in ("ExpectColumnValuesToBeInSet", "ExpectColumnValuesToBeBetween")]
    assert (amount.kwargs["min_value"], amount.kwargs["max_value"]) == (data[0], data[2])
    network = Network([Layer(np.ones((2, 2)), np.zeros(2))], ["sex", "amount"], ["no", "yes"])
    assert exact_domain_check(network, model, {"amount": (data[0], data[2])})


def test_off_grid_data_for_a_json_network_names_the_feature_and_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = grid_table(300, seed=2)
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "pop.json"
    assert main(["population", "fit", str(data), "--out", str(out), "--protected", "sex"]) == 0
    rng = np.random.default_rng(0)
    net = tmp_path / "net.json"
    net.write_text(json.dumps({"inputs": list(frame.columns), "outputs": ["no", "yes"], "layers": [
        {"weight": rng.normal(size=(5, 4)).tolist(), "bias": rng.normal(size=5).tolist(),
         "activation": "relu"},
        {"weight": rng.normal(size=(2, 5)).tolist(), "bias": [0.0, 0.0],
         "activation": "none"}]}))
    frame.loc[3, "score"] = 1.3
    off = tmp_path / "off_grid.csv"
    frame.to_csv(off, index=False)
    capsys.readouterr()
    code = main(["verify", "demographic-parity", "--model", str(net), "--population", str(out),
                 "--protected", "sex", "--privileged", "1", "--favorable-class", "1",
                 "--gamma", "0.5", "--timeout", "20", "--data", str(off), "--json"])
    captured = capsys.readouterr()
    assert code == 2
    assert json.loads(captured.out)["exit_code"] == 2
    assert "feature 'score': the data (" in captured.err and "off_grid.csv) holds the value 1.3" \
        in captured.err and "0.5·k" in captured.err


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 2**53 - 1), st.integers(-1080, 960), st.integers(-2**53, 2**53),
       st.integers(-1080, 960), st.lists(st.integers(-2**40, 2**40), min_size=1, max_size=6))
def test_grid_values_are_the_nearest_floats(step_mantissa: int, step_exponent: int,
                                            offset_mantissa: int, offset_exponent: int,
                                            codes: list[int]) -> None:
    """``grid_values`` against rationals: the float nearest to ``offset + step·k``."""
    from verifier.numerics import grid_values

    step = float(Fraction(step_mantissa) * Fraction(2) ** step_exponent)
    offset = float(Fraction(offset_mantissa) * Fraction(2) ** offset_exponent)
    if not (0.0 < step < float("inf")) or not abs(offset) < float("inf"):
        return
    got = grid_values(np.array(codes, dtype=np.float64)[:, None], np.array([step]),
                      np.array([offset]))[:, 0]
    for code, value in zip(codes, got.tolist(), strict=True):
        real = Fraction(offset) + Fraction(step) * code
        try:
            nearest = float(real)
        except OverflowError:
            nearest = float("inf") if real > 0 else float("-inf")
        assert value == nearest, (step, offset, code)


def _tie_network(outputs: int) -> Network:
    """``score + 0.5·level − 0.5·sex − 1`` as one logit, or as ``yes − no`` of two: exactly 0
    at many lattice points of the 0.5-step score (a tie: class 0 by the README's rule, the
    logit not > 0, and argmax's lowest index)."""
    weight, bias = np.array([[-0.5, 1.0, 0.5]]), np.array([-1.0])
    if outputs == 2:
        weight, bias = np.vstack([np.zeros((1, 3)), weight]), np.array([0.0, -1.0])
    return Network([Layer(weight, bias)], ["sex", "score", "level"],
                   ["logit"] if outputs == 1 else ["no", "yes"])


@pytest.mark.parametrize("outputs", [1, 2])
def test_exact_ties_on_a_coded_grid_go_to_the_models_class(outputs: int) -> None:
    """Ties at lattice points of a 0.5-step score column: demographic parity's ratio, causal
    fairness's biased share and a WMI probability equal exact enumeration of the class at
    the real points (ties to class 0) in every engine."""
    population = _grid_population(0.5, 0.0)
    original = _tie_network(outputs)
    network, bound = bind(original, population, None, "test")
    points = [(codes, weight, _oracle_class(original, _real_point(population, codes)))
              for codes, weight in _points(population)]
    reals = [_real_point(population, codes) for codes, _, _ in points]
    assert sum(score + level / 2 - sex / 2 - 1 == 0 for sex, score, level in reals) >= 6
    group = {s: sum(w for c, w, _ in points if c[0] == s) for s in (0, 1)}
    favourable = {s: sum(w for c, w, k in points if c[0] == s and k == 1) for s in (0, 1)}
    ratio = (favourable[1] / group[1]) / (favourable[0] / group[0])
    certificate = demographic_parity_audit(
        network, bound, protected="sex", privileged=0.0, favorable_class=1,
        gamma=float(ratio) - 1e-6, settings=PVSettings(timeout_s=60.0))
    low, high = certificate.bounds["value"]
    assert Fraction(low) <= ratio <= Fraction(high) and certificate.verdict == "satisfied"
    others = list(itertools.product(range(6), range(3)))
    biased = sum(len({_oracle_class(original, _real_point(population, (sex, score, level)))
                      for sex in (0, 1)}) > 1 for score, level in others)
    causal = run_audit(CausalFairnessSettings(kind="causal_fairness", protected=["sex"],
                                              max_biased_share=0.5, timeout_s=30),
                       network, bound)
    low, high = causal.bounds["biased_share"]
    assert low <= Fraction(biased, len(others)) <= high and high - low <= 2 ** -40
    share = sum(w for _, w, k in points if k == 1)
    robust = run_audit(LocalRobustnessSettings(
        kind="local_robustness", center=[0.5, 1.25, 1.0], epsilon=1.25, expected_class=1,
        min_probability=float(share) - 1e-6, timeout_s=30), network, bound)
    low, high = robust.bounds["probability"]
    assert Fraction(low) <= share <= Fraction(high) and robust.verdict == "satisfied"
