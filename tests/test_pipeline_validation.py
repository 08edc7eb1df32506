"""Before the audit: the exact domain check and the great-expectations suite (no registry)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mlflow_server import demo_module

from pipeline_steps.validation import (
    DataValidationError,
    DomainError,
    exact_domain_check,
    expectation_specs,
    run_expectations,
    validate_audit_inputs,
)
from verifier.convert.torch_module import from_torch


@pytest.fixture(scope="module")
def population() -> Any:
    return demo_module("demo_credit").population_model()


def network(inputs: int = 6, names: list[str] | None = None):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(inputs, 4), torch.nn.ReLU(),
                                 torch.nn.Linear(4, 2))
    return from_torch(module, names)


def test_exact_check_passes_for_a_fitting_population(population) -> None:
    checks = exact_domain_check(network(6, list(population.columns)), population,
                                {"age": (18.0, 80.0), "income": (0.0, 200.0)})
    assert all(check.ok for check in checks)
    (one_hot,) = [check for check in checks if check.check.startswith("one-hot group")]
    assert one_hot.check == "one-hot group (housing_own, housing_rent)"
    mass = float(one_hot.detail.rsplit(">= ", 1)[1])
    assert 1.0 - 1e-9 <= mass <= 1.0


def test_networks_with_default_names_never_take_the_population_columns(population) -> None:
    with pytest.raises(DomainError, match="'age' in the population model and 'x0'"):
        exact_domain_check(network(6), population, None)
    checks = exact_domain_check(network(6, list(population.columns)), population, None)
    assert "age, income, debt_ratio, sex, housing_own, housing_rent" in checks[0].detail


def test_mismatches_are_domain_errors_naming_the_problem(population) -> None:
    with pytest.raises(DomainError, match=r"6 columns .* but the network has 5 inputs"):
        exact_domain_check(network(5), population, None)
    swapped = ["income", "age", "debt_ratio", "sex", "housing_own", "housing_rent"]
    with pytest.raises(DomainError, match="same columns in a different order"):
        exact_domain_check(network(6, swapped), population, None)
    names = list(population.columns)
    with pytest.raises(DomainError, match=r"support of 'age' is \[18, 80\], outside the "
                                          r"network's declared input domain \[20, 80\]"):
        exact_domain_check(network(6, names), population, {"age": (20.0, 80.0)})
    with pytest.raises(DomainError, match="unknown inputs: salary"):
        exact_domain_check(network(6, names), population, {"salary": (0.0, 1.0)})


class NotOneHot:
    """A population that declares two independent fair coins a one-hot group: the check
    must find the probability 1/2 on (0, 0) and (1, 1)."""

    columns = ("a", "b")
    dimension = 2

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(2), np.ones(2)

    def domain_box(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(2), np.ones(2)

    def onehot_groups(self) -> list[list[int]]:
        return [[0, 1]]

    def prob_boxes_interval(self, lo: np.ndarray, hi: np.ndarray
                            ) -> tuple[np.ndarray, np.ndarray]:
        per_column = np.stack([(lo <= 0) & (hi >= 0), (lo <= 1) & (hi >= 1)], axis=-1)
        mass = np.prod(per_column.sum(axis=-1) * 0.5, axis=1)
        return mass, mass


def test_a_group_that_is_not_one_hot_is_rejected() -> None:
    with pytest.raises(DomainError, match=r"one-hot group \(a, b\) puts probability 0.5 on "
                                          "vectors that are not one-hot"):
        exact_domain_check(network(2, ["a", "b"]), NotOneHot(), None)


def test_suite_follows_the_feature_schema(population) -> None:
    specs = {(spec.kind, spec.column): spec.kwargs
             for spec in expectation_specs(population, list(population.columns))}
    assert specs[("ExpectColumnValuesToBeBetween", "age")] == {
        "column": "age", "min_value": 18.0, "max_value": 80.0}
    assert specs[("ExpectColumnValuesToBeInSet", "sex")]["value_set"] == [0.0, 1.0]
    assert specs[("ExpectColumnValuesToBeInSet", "housing_own")]["value_set"] == [0.0, 1.0]
    assert specs[("ExpectMulticolumnSumToEqual", "housing_own+housing_rent")] == {
        "column_list": ["housing_own", "housing_rent"], "sum_total": 1}
    not_null = {column for kind, column in specs if kind == "ExpectColumnValuesToNotBeNull"}
    assert not_null == set(population.columns)


@settings(max_examples=6, deadline=None)
@given(st.sets(st.integers(0, 99), max_size=10), st.sets(st.integers(0, 99), max_size=10))
def test_great_expectations_counts_planted_violations(population, old: set[int],
                                                       two_homes: set[int]) -> None:
    frame = pd.DataFrame(population.sample(100, 1), columns=list(population.columns))
    frame.loc[sorted(old), "age"] = 95.0
    frame.loc[sorted(two_homes), ["housing_own", "housing_rent"]] = 1.0
    rows, described = run_expectations({"data": frame},
                                       expectation_specs(population, list(population.columns)))
    counts = {(row["expectation"], row["column"]): row for row in rows}
    age = counts[("expect_column_values_to_be_between", "age")]
    assert age["success"] == (not old) and age["unexpected_count"] == len(old)
    homes = counts[("expect_multicolumn_sum_to_equal", "housing_own+housing_rent")]
    assert homes["success"] == (not two_homes) and homes["unexpected_count"] == len(two_homes)
    assert described["data"]["success"] == (not old and not two_homes)


def test_validate_audit_inputs(population, tmp_path: Path) -> None:
    net = network(6, list(population.columns))
    report = validate_audit_inputs(net, population, None, samples=300, seed=2)
    assert report.data_results and all(row["success"] for row in report.data_results)
    assert {row["dataset"] for row in report.data_results} == {"population_samples"}
    data = tmp_path / "data.csv"
    frame = pd.DataFrame(population.sample(40, 3), columns=list(population.columns))
    frame.drop(columns=["debt_ratio"]).to_csv(data, index=False)
    with pytest.raises(DataValidationError, match=r"lacks the network input column.* debt_ratio"):
        validate_audit_inputs(net, population, None, samples=10, seed=2, audit_data=data)
    frame.loc[[4, 9], "sex"] = np.nan
    frame.to_csv(data, index=False)
    with pytest.raises(DataValidationError,
                       match=r"audit_data: expect_column_values_to_not_be_null\(sex\) failed "
                             r"on 2 of 40 rows"):
        validate_audit_inputs(net, population, None, samples=10, seed=2, audit_data=data)
