"""Columns a user table carries that are no model input: a customer id, a signup date. Fitted
without ``--model``, a date column of 250 distinct strings became 250 one-hot columns and an
id an integer histogram, silently (the learned network even linked them); an amount saved
as text (``$10,006.98``, a tenth of the rows duplicated, so no identifier) became 3,900
one-hot columns. A string id, a date column or numbers written as text are now refused
naming the column and the fix; an integer id is warned about. Oracle: the
table itself (its distinct values per row)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from certgate.population_data import PopulationFitWarning, fit_population
from verifier.population.errors import PopulationError


def user_table(rows: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"sex": rng.choice(["F", "M"], rows),
                         "month": rng.choice(["Jan", "Feb", "Mar"], rows),
                         "income": rng.lognormal(10, 0.5, rows)})


@pytest.mark.parametrize(("column", "values", "says"), [
    ("signup", pd.date_range("2020-01-01", periods=600, freq="h").strftime("%Y-%m-%d"),
     "holds dates or times (25 distinct, e.g. '2020-01-01')"),
    ("code", [f"C{i:05d}" for i in range(600)],
     "holds a different value in every row (600, e.g. 'C00000'), like an identifier"),
    ("balance", [f"${1000 + 37 * (i % 300):,}.50" for i in range(600)],
     "holds numbers written as text (300 distinct, e.g. '$1,000.50')"),
    ("share", [f"{i % 40}%" for i in range(600)],
     "holds numbers written as text (40 distinct, e.g. '0%')"),
])
def test_a_string_identifier_or_date_column_is_refused_naming_it(
        column: str, values: object, says: str) -> None:
    frame = user_table()
    frame[column] = values
    with pytest.raises(PopulationError, match=rf"column '{column}' .*--model NET") as error:
        fit_population(frame)
    assert says in str(error.value)


def test_every_column_at_fault_is_named_in_one_error() -> None:
    """Missing values, a date column and an identifier are said at once, not one per run."""
    frame = user_table()
    frame["signup"] = pd.date_range("2020-01-01", periods=600, freq="h").strftime("%Y-%m-%d")
    frame["code"] = [f"C{i:05d}" for i in range(600)]
    frame.loc[3, "income"] = np.nan
    with pytest.raises(PopulationError) as error:
        fit_population(frame)
    said = str(error.value)
    assert "column 'income': missing values in 1 of 600 rows (fill or drop them first)" in said
    assert "column 'signup' holds dates or times" in said
    assert "column 'code' holds a different value in every row" in said


def test_an_integer_identifier_is_warned_about_and_categories_are_not() -> None:
    frame = user_table()
    frame["customer_id"] = np.arange(100_000, 100_600)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PopulationFitWarning)
        model = fit_population(frame)
    said = [str(w.message) for w in caught if issubclass(w.category, PopulationFitWarning)]
    assert len(said) == 1 and "column 'customer_id' holds a different integer" in said[0]
    assert frame["customer_id"].nunique() == len(frame)
    assert {f.name: f.kind for f in model.features}["month"] == "categorical"
