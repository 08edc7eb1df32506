"""A small protected group (120 of 4,000 rows) in a learned network where a node has a second
parent: the group's cells of that parent held fewer than ``min_rows`` rows, and such cells were
fitted on every row of the table, the majority's. A model granting on ``band + education >= 8``
has a ratio of 0.6068 in the data, and the default fit's population gave 0.9636 (Monte Carlo),
so parity was proven where the data says otherwise. Oracle: the data's exact ratio (fractions),
which a network of few-valued nodes fitted on each cell's own rows reproduces exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from certgate.population_data import fit_population
from tests.parity_on_data import data_ratio, fit_default_population, verify_parity
from tests.test_binding import export_onnx


def minority_table(rows: int = 4000, minority: int = 120, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    group = np.zeros(rows, dtype=int)
    group[:minority] = 1
    education = rng.integers(0, 8, rows)
    band = np.clip(education + rng.integers(-2, 3, rows) - 3 * group, 0, 9)
    return pd.DataFrame({"minority": group, "education": education, "band": band,
                         "age": rng.integers(18, 70, rows)})


def test_a_small_groups_sparse_cells_keep_its_own_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = minority_table()
    learned = fit_population(frame, protected="minority").description or ""
    assert "education -> band" in learned       # the second parent that thins the cells
    data, population = fit_default_population(frame, tmp_path, "minority")
    names = list(frame.columns)
    model = torch.nn.Sequential(torch.nn.Linear(len(names), 1))
    with torch.no_grad():                       # class 1 iff band + education >= 8
        model[0].weight.zero_()
        model[0].weight[0, names.index("band")] = 1.0
        model[0].weight[0, names.index("education")] = 1.0
        model[0].bias[:] = torch.tensor([-7.5])
    path = export_onnx(model.eval(), len(names), tmp_path / "net.onnx")
    payload = verify_parity(capsys, path, names, population, data, "minority", "0", 0.8)
    group = frame["minority"] == 1
    exact = data_ratio(frame["band"] + frame["education"] >= 8, group, ~group)
    low, high = payload["ratio"]
    assert low <= exact <= high, (float(exact), payload["ratio"])
    assert exact < 0.8 and payload["verdict"] == "violated"
