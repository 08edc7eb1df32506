"""The README's parity flow on a user's CSV, as the population-fit tests run it: fit the
default population with ``certgate population fit``, verify parity with the data given, and
the data's own ratio in exact arithmetic (the oracle a certificate must not contradict)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pipeline_steps.cli import main


def fit_default_population(frame: pd.DataFrame, folder: Path, protected: str,
                           *extra: str) -> tuple[Path, Path]:
    """``frame`` written as ``folder/data.csv`` and ``certgate population fit`` run on it with
    its defaults (``extra``: further options) into ``folder/pop.json``; both paths."""
    data, population = folder / "data.csv", folder / "pop.json"
    frame.to_csv(data, index=False)
    assert main(["population", "fit", str(data), "--out", str(population),
                 "--protected", protected, *extra, "--json"]) == 0
    return data, population


def verify_parity(capsys: pytest.CaptureFixture[str], model: Path, names: Sequence[str],
                  population: Path, data: Path, protected: str, privileged: str,
                  gamma: float) -> dict[str, Any]:
    """``certgate verify demographic-parity --json`` (favourable class 1, precision 0.001,
    60 s) with the data given for the fidelity check; its payload, after checking the run
    ended with a verdict or an unknown, not an error."""
    capsys.readouterr()
    code = main(["verify", "demographic-parity", "--model", str(model), "--input-names",
                 ",".join(names), "--population", str(population), "--protected", protected,
                 "--privileged", privileged, "--favorable-class", "1", "--gamma", str(gamma),
                 "--precision", "0.001", "--timeout", "60", "--data", str(data), "--json"])
    payload: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code in (0, 1), payload
    return payload


def data_ratio(granted: pd.Series, unprivileged: pd.Series, privileged: pd.Series) -> Fraction:
    """The data's parity ratio P(granted | unprivileged) / P(granted | privileged), exactly."""
    return Fraction(int(granted[unprivileged].sum()), int(unprivileged.sum())) / \
        Fraction(int(granted[privileged].sum()), int(privileged.sum()))


def data_ratio_interval(granted: pd.Series, unprivileged: pd.Series, privileged: pd.Series,
                        z: float = 3.0) -> tuple[float, float]:
    """The data's parity ratio ``± z`` standard errors (delta method on the log ratio of the
    two groups' rates): the rows are a sample of the population a certificate is about, so a
    tight certificate may miss their exact ratio by sampling error; one that misses this
    interval contradicts the rows."""
    ratio = float(data_ratio(granted, unprivileged, privileged))
    rates = [(float(granted[group].mean()), int(group.sum()))
             for group in (unprivileged, privileged)]
    spread = math.sqrt(sum((1.0 - rate) / (count * rate) for rate, count in rates))
    return ratio * math.exp(-z * spread), ratio * math.exp(z * spread)
