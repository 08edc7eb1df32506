"""The fidelity check reads each group's rate, not only the ratio. A 1,000-row group makes the
data's ratio interval wide ([0.213, 0.458] on the table below), so a population that keeps
the 19,000-row majority's favourable rate at 0.126 where its rows give 0.138 (5 standard
errors; two numeric columns held only through the quartile cells of one, the rule in their
joint tail) proved parity satisfied at γ 0.40, [0.411, 0.438], and was called *consistent*:
the data's ratio is 0.318. The majority's rate interval at the check's level, [0.1325,
0.1437], is disjoint from the certified [0.1238, 0.1276]; the check now says
*contradicted*, at the same level (both rates' intervals hold together with probability at
least ``level``). Oracle: the data's rows, counted here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.numeric_dependence import synthetic
from pipeline_steps.cli import main
from tests.parity_on_data import verify_parity
from tests.test_numeric_parent_cells import CASES, tail_rule_network
from verifier.audits.fidelity import clopper_pearson
from verifier.convert import save_network
from verifier.convert.torch_module import from_torch
from verifier.population import load_population


def fitted(tmp_path: Path, *options: str) -> tuple[Path, Path, list[str]]:
    rows, share, rho, integer, seed = CASES["continuous, 19,000-row majority"]
    frame, _ = synthetic(rows, share, rho, integer, groupwise=False, seed=seed)
    data, population = tmp_path / "data.csv", tmp_path / "pop.json"
    frame.to_csv(data, index=False)
    if options == ("quartile cells",):
        cuts = np.quantile(frame["x2"], [0.25, 0.5, 0.75])
        options = ("--parents", "x2=g", "--parents", "x1=x2",
                   "--bins", "x2=" + ",".join(repr(float(c)) for c in cuts))
    assert main(["population", "fit", str(data), "--out", str(population), *options,
                 "--json"]) == 0
    names = list(load_population(population).columns)
    network = tmp_path / "net.json"
    save_network(from_torch(tail_rule_network(names, 0.8), names, ["logit"]), network)
    return data, population, names


def test_a_rate_the_data_pins_contradicts_a_population_the_ratio_cannot(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, population, names = fitted(tmp_path, "quartile cells")
    network = tmp_path / "net.json"
    payload = verify_parity(capsys, network, names, population, data, "g", "0", 0.40)
    frame = pd.read_csv(data)
    granted = (frame["x1"] > 0.8) & (frame["x2"] > 0.8)
    majority = frame["g"] == 0
    rows = clopper_pearson(int(granted[majority].sum()), int(majority.sum()), 0.975)
    low, high = payload["probabilities"]["p_privileged"]
    assert high < rows[0] or rows[1] < low, (rows, (low, high))   # the rows refute the rate
    fidelity = payload["population_fidelity"]
    ratio_rows = fidelity["empirical"]
    assert ratio_rows[0] <= payload["ratio"][1] and payload["ratio"][0] <= ratio_rows[1]
    assert payload["verdict"] == "satisfied"
    assert fidelity["status"] == "contradicted", fidelity["reason"]
    assert "P(favourable | x.g == 0.0)" in fidelity["reason"]


def test_the_default_fit_of_the_same_table_is_consistent(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, population, names = fitted(tmp_path)
    payload = verify_parity(capsys, tmp_path / "net.json", names, population, data, "g", "0",
                            0.30)
    assert payload["population_fidelity"]["status"] == "consistent", \
        payload["population_fidelity"]["reason"]

