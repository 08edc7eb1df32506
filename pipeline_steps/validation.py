"""Before any audit: is it meaningful? An exact domain check, then data validation.

**Exact domain check** (numpy, no sampling; DESIGN D11). The population model must fit the
network's inputs (count and names), its support must lie inside its features' declared
domains and inside the input domain declared with the network (model metadata
``certgate.input_domain``, when recorded), and each of its one-hot
groups must put all of its mass on one-hot vectors: the certified lower bounds of
``P(column j = 1, the others = 0)`` summed over the group's columns reach 1. Any failure
raises :class:`DomainError` naming the column.

**great-expectations** (DESIGN D11). An expectation suite generated from the population
model's schema — every input column present and never null, values inside the support,
integer columns within their value set when it is small, one-hot groups summing to 1 — is run
on ``population_samples`` rows drawn from the population model (seeded) and on the optional
audit dataset (a CSV with one column per network input). Failures raise
:class:`DataValidationError` naming the dataset, the expectation, the column and how many
rows failed. Samples are a smoke test of the sampler and the schema; the soundness argument
is the exact check.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from verifier.errors import CertgateInputError
from verifier.network import Network
from verifier.numerics import grid_values

ONE_HOT_TOLERANCE = 1e-9
SMALL_VALUE_SET = 64


class DomainError(CertgateInputError):
    """The population model does not fit the network's declared inputs."""


class DataValidationError(CertgateInputError):
    """A great-expectations check failed on the audit data or on population samples."""


@dataclass(frozen=True)
class CheckResult:
    """One passed check of the exact domain check."""

    check: str
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True)
class ExpectationSpec:
    """One expectation, independent of great-expectations' classes: ``kind`` is the GX class
    name and ``kwargs`` its arguments."""

    kind: str
    kwargs: dict[str, Any]

    @property
    def column(self) -> str | None:
        if "column" in self.kwargs:
            return str(self.kwargs["column"])
        if "column_list" in self.kwargs:
            return "+".join(self.kwargs["column_list"])
        return None


@dataclass
class ValidationReport:
    """What the checks established (all passed, or an error was raised)."""

    domain_checks: list[CheckResult]
    data_results: list[dict[str, Any]] = field(default_factory=list)
    described: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "domain_checks": [check.to_dict() for check in self.domain_checks],
            "data_validation": self.data_results,
            "great_expectations": self.described,
        }


def _interval(low: float, high: float) -> str:
    return f"[{low:g}, {high:g}]"


def input_names(network: Network, population: Any) -> list[str]:
    """The names of the audited inputs: the network's (bound before: see
    :mod:`verifier.audits.binding`). Raises :class:`DomainError` unless the population model's
    columns are these names in this order."""
    from verifier.population import check_matches_network

    try:
        check_matches_network(population, network.input_size, list(network.input_names))
    except CertgateInputError as error:
        raise DomainError(f"population model does not fit the network: {error}") from error
    return list(network.input_names)


def exact_domain_check(network: Network, population: Any,
                       declared_domain: dict[str, tuple[float, float]] | None) -> list[CheckResult]:
    """Run the exact checks of the module docstring; raise :class:`DomainError` on failure."""
    names = input_names(network, population)
    results = [CheckResult("columns match the network inputs", True,
                           f"{len(names)} columns: {', '.join(names)}")]
    lower, upper = (np.asarray(side, dtype=np.float64) for side in population.support())
    schema_low, schema_high = population.domain_box()
    outside = np.flatnonzero((lower < schema_low) | (upper > schema_high))
    if outside.size:
        column = int(outside[0])
        raise DomainError(
            f"population support of {names[column]!r} is "
            f"{_interval(lower[column], upper[column])}, outside its feature domain "
            f"{_interval(schema_low[column], schema_high[column])}"
        )
    results.append(CheckResult("support inside the feature domains", True,
                               f"{len(names)} columns checked"))
    step, offset = _column_codes(population, len(names))
    low_values, high_values = grid_values(lower, step, offset), grid_values(upper, step, offset)
    if declared_domain is None:
        results.append(CheckResult("support inside the model's declared input domain", True,
                                   "no input domain recorded with the model; nothing to compare"))
    else:
        unknown = sorted(set(declared_domain) - set(names))
        if unknown:
            raise DomainError(f"the model's declared input domain names unknown inputs: "
                              f"{', '.join(unknown)}")
        for name, (low, high) in declared_domain.items():
            column = names.index(name)
            if low_values[column] < low or high_values[column] > high:
                raise DomainError(
                    f"population support of {name!r} is "
                    f"{_interval(low_values[column], high_values[column])}, outside the "
                    "network's declared "
                    f"input domain {_interval(low, high)}"
                )
        results.append(CheckResult("support inside the model's declared input domain", True,
                                   f"{len(declared_domain)} declared inputs checked"))
    for group in population.onehot_groups():
        results.append(_check_one_hot(population, names, tuple(int(c) for c in group), lower,
                                      upper))
    return results


def _column_codes(population: Any, width: int) -> tuple[np.ndarray, np.ndarray]:
    """``(step, offset)`` per column: a coded column's value is ``offset + step·k``
    (:meth:`~verifier.population.schema.FeatureSchema.column_codes`); 1 and 0 for a
    population without a feature schema."""
    schema = getattr(population, "feature_schema", None)
    if schema is None:
        return np.ones(width), np.zeros(width)
    return schema.column_codes()


def _check_one_hot(population: Any, names: list[str], group: tuple[int, ...],
                   lower: np.ndarray, upper: np.ndarray) -> CheckResult:
    label = ", ".join(names[c] for c in group)
    if any(lower[c] < 0.0 or upper[c] > 1.0 for c in group):
        raise DomainError(f"one-hot group ({label}) has support outside [0, 1]")
    boxes_lo = np.tile(lower, (len(group), 1))
    boxes_hi = np.tile(upper, (len(group), 1))
    for row, hot in enumerate(group):
        boxes_lo[row, list(group)] = 0.0
        boxes_hi[row, list(group)] = 0.0
        boxes_lo[row, hot] = boxes_hi[row, hot] = 1.0
    certified_lower, _ = population.prob_boxes_interval(boxes_lo, boxes_hi)
    total = float(np.sum(certified_lower))
    if total < 1.0 - ONE_HOT_TOLERANCE:
        raise DomainError(
            f"one-hot group ({label}) puts probability {1.0 - total:.3g} on vectors that are "
            "not one-hot"
        )
    return CheckResult(f"one-hot group ({label})", True,
                       f"certified mass on one-hot vectors >= {total:.12f}")


def expectation_specs(population: Any, names: list[str]) -> list[ExpectationSpec]:
    """The expectation suite generated from the population model's feature schema: columns
    present and never null; continuous and integer columns within their declared domain (an
    integer column with fewer than ``SMALL_VALUE_SET`` values: within that value set), in the
    data's units (a coded column's ``offset + step·k``); binary
    and one-hot columns in {0, 1}; each one-hot group summing to 1."""
    code_low, code_high = population.domain_box()
    step, offset = _column_codes(population, len(names))
    low, high = grid_values(code_low, step, offset), grid_values(code_high, step, offset)
    kinds = population.column_kinds()
    specs = [ExpectationSpec("ExpectTableColumnsToMatchSet",
                             {"column_set": list(names), "exact_match": False})]
    for column, name in enumerate(names):
        specs.append(ExpectationSpec("ExpectColumnValuesToNotBeNull", {"column": name}))
        lo, hi, kind = float(low[column]), float(high[column]), kinds[column]
        finite = math.isfinite(lo) and math.isfinite(hi)
        if kind in ("binary", "categorical") or (
                kind == "integer" and finite
                and code_high[column] - code_low[column] < SMALL_VALUE_SET):
            codes = np.arange(math.ceil(code_low[column]), math.floor(code_high[column]) + 1)
            values = grid_values(codes[:, None], step[column:column + 1],
                               offset[column:column + 1])[:, 0].tolist()
            specs.append(ExpectationSpec("ExpectColumnValuesToBeInSet",
                                         {"column": name, "value_set": values}))
        elif math.isfinite(lo) or math.isfinite(hi):
            specs.append(ExpectationSpec("ExpectColumnValuesToBeBetween", {
                "column": name,
                "min_value": lo if math.isfinite(lo) else None,
                "max_value": hi if math.isfinite(hi) else None,
            }))
    for group in population.onehot_groups():
        specs.append(ExpectationSpec("ExpectMulticolumnSumToEqual", {
            "column_list": [names[int(c)] for c in group], "sum_total": 1,
        }))
    return specs


def run_expectations(frames: dict[str, pd.DataFrame],
                     specs: list[ExpectationSpec]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Validate each named frame against the suite with great-expectations (ephemeral
    context); return one result row per (dataset, expectation) and GX's own descriptions."""

    import great_expectations  # noqa: F401  (imported first: it sets its loggers' levels)

    with _quiet_loggers(*GX_LOGGERS):
        return _validate_frames(frames, specs)


GX_LOGGERS = ("great_expectations", "great_expectations.data_context.types.base")


@contextmanager
def _quiet_loggers(*names: str) -> Iterator[None]:
    """Raise these loggers to WARNING for the block (GX logs routine INFO lines)."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _validate_frames(frames: dict[str, pd.DataFrame],
                     specs: list[ExpectationSpec]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False,
                                                         metric_calculations=False)
    source = context.data_sources.add_pandas(name="certgate")
    rows: list[dict[str, Any]] = []
    described: dict[str, Any] = {}
    for dataset, frame in frames.items():
        suite = gx.ExpectationSuite(name=f"certgate_{dataset}")
        for spec in specs:
            suite.add_expectation(getattr(gxe, spec.kind)(**spec.kwargs))
        batch = (source.add_dataframe_asset(name=dataset)
                 .add_batch_definition_whole_dataframe("all_rows")
                 .get_batch(batch_parameters={"dataframe": frame}))
        result = batch.validate(suite, result_format="SUMMARY")
        described[dataset] = result.describe_dict()
        for item in result.results:
            config = item.expectation_config
            spec = ExpectationSpec(config.type, dict(config.kwargs))
            rows.append({
                "dataset": dataset,
                "expectation": config.type,
                "column": spec.column,
                "success": bool(item.success),
                "unexpected_count": item.result.get("unexpected_count"),
                "element_count": item.result.get("element_count", len(frame)),
                "examples": _jsonable(item.result.get("partial_unexpected_list", [])[:5]),
            })
    return rows, described


def _jsonable(values: list[Any]) -> list[Any]:
    return [value.item() if isinstance(value, np.generic) else value for value in values]


def _failure_message(rows: list[dict[str, Any]]) -> str:
    parts = []
    for row in rows:
        if row["success"]:
            continue
        where = f"({row['column']})" if row["column"] else ""
        count = row["unexpected_count"]
        amount = (f" on {count} of {row['element_count']} rows" if count is not None else "")
        examples = f", e.g. {row['examples'][:3]}" if row["examples"] else ""
        parts.append(f"{row['dataset']}: {row['expectation']}{where} failed{amount}{examples}")
    return "great-expectations validation failed: " + "; ".join(parts)


def read_audit_data(path: Path, names: list[str]) -> pd.DataFrame:
    """The audit dataset's input columns; raises naming any missing column."""
    if not path.is_file():
        raise DataValidationError(f"audit dataset not found: {path}")
    frame = pd.read_csv(path)
    missing = [name for name in names if name not in frame.columns]
    if missing:
        raise DataValidationError(
            f"audit dataset {path} lacks the network input column(s) {', '.join(missing)}"
        )
    return frame


def validate_audit_inputs(network: Network, population: Any,
                          declared_domain: dict[str, tuple[float, float]] | None, *,
                          samples: int, seed: int,
                          audit_data: Path | None = None) -> ValidationReport:
    """The exact domain check, then great-expectations on population samples and the audit
    dataset; returns the report or raises :class:`DomainError`/:class:`DataValidationError`."""
    domain_checks = exact_domain_check(network, population, declared_domain)
    names = input_names(network, population)
    drawn = population.sample(samples, np.random.default_rng(seed))
    frames = {"population_samples": pd.DataFrame(drawn, columns=names)}
    if audit_data is not None:
        frames["audit_data"] = read_audit_data(Path(audit_data), names)
    rows, described = run_expectations(frames, expectation_specs(population, names))
    if not all(row["success"] for row in rows):
        raise DataValidationError(_failure_message(rows))
    return ValidationReport(domain_checks, rows, described)
