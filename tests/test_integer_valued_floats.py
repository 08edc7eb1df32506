"""A float column holding only integers (a count written as ``3.0``, an integer column with a
missing value filled, a table saved with ``astype(float)``) is fitted as the integer column
holding the same values is: its values keep their mass whatever their number. Oracle: the
data's own frequencies, which the integer fit's atoms reproduce exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tests.parity_on_data import data_ratio, fit_default_population, verify_parity
from tests.test_binding import export_onnx
from verifier.population.fitting import infer_features


def visits_table(rows: int = 3000, seed: int = 3) -> pd.DataFrame:
    """female (0/1) and visits: a zero-inflated count with 41 values (more than the fit's
    ``max_discrete_values``), zero for 60 % of the men and 40 % of the women."""
    rng = np.random.default_rng(seed)
    female = (rng.random(rows) < 0.45).astype(int)
    visits = np.where(rng.random(rows) < 0.6 - 0.2 * female, 0, rng.integers(1, 41, rows))
    return pd.DataFrame({"female": female, "visits": visits})


def test_a_float_column_of_integers_is_read_as_the_integer_column() -> None:
    frame = visits_table()
    as_float = frame.astype({"visits": np.float64})
    assert as_float["visits"].nunique() > 20
    kinds = [(f.name, f.kind, f.step, f.offset) for f in infer_features(as_float)]
    assert kinds == [(f.name, f.kind, f.step, f.offset) for f in infer_features(frame)]
    assert kinds[1] == ("visits", "integer", None, None)
    halves = pd.DataFrame({"score": np.arange(30) * 0.5})
    assert infer_features(halves)[0].kind == "continuous"       # not integers: unchanged
    huge = pd.DataFrame({"x": np.arange(30) * 2.0**60})
    assert infer_features(huge)[0].kind == "continuous"         # beyond exact integers


@pytest.mark.parametrize("dtype", ["int", "float"])
def test_parity_of_a_count_written_as_floats_holds_the_datas_ratio(
        dtype: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = visits_table()
    if dtype == "float":
        frame = frame.astype({"visits": np.float64})            # written as 0.0, 1.0, …
    data, population = fit_default_population(frame, tmp_path, "female")
    model = torch.nn.Sequential(torch.nn.Linear(2, 1))
    with torch.no_grad():                                      # class 1 iff visits >= 1
        model[0].weight[:] = torch.tensor([[0.0, 2.0]])
        model[0].bias[:] = torch.tensor([-1.0])
    path = export_onnx(model.eval(), 2, tmp_path / "net.onnx")
    payload = verify_parity(capsys, path, ["female", "visits"], population, data, "female",
                            "1", 0.8)
    # the population's atoms at every count are the data's frequencies per group, so its
    # exact ratio is the data's own
    exact = data_ratio(frame["visits"] >= 1, frame["female"] == 0, frame["female"] == 1)
    low, high = payload["ratio"]
    assert low <= exact <= high, (float(exact), payload["ratio"])
    assert payload["population_fidelity"]["status"] == "consistent"
    assert payload["verdict"] == ("satisfied" if exact > 0.8 else "violated")
