"""Where the data for a population-fidelity check comes from, and how it becomes input rows.

Sources, first found wins (:func:`resolve_data`):

1. **given** — ``--data PATH`` on a verify verb, ``fidelity.data`` in a configuration, the
   ``data`` argument of :func:`certgate.audit` (a file, or a pandas DataFrame: the
   ``mlflow.models.evaluate`` data reaches the check this way, :func:`frame_rows`). A given
   table that cannot be read, or lacks the model's inputs, is an error (the user asked for
   it).
2. **fitted_from** — the table the population model records it was fitted from
   (:class:`verifier.population.model.DataSource`): a path (relative paths are tried against
   the working directory, then the population file's directory) or a ``file://`` URI. The
   file's sha256 must match the recorded one; a missing file or another hash is *said*,
   never an error: the check is then made from the next source, or not at all.
3. **mlflow dataset** — a file-backed dataset logged as an input of the model version's
   source run (:func:`registry_hooks.datasets.source_run_dataset`), supplied by the caller.

Rows are encoded as :mod:`certgate.population_data` encodes tables for fitting: a raw string
column ``C`` becomes the one-hot columns ``C=value``; a model input ``C=value`` whose value
the data never takes is all zeros; an input ``PREFIX_(dropped)`` (``NAME=(dropped)``), the
column the fit adds for dummies written with ``drop_first``, is 1 where the inputs
``PREFIX_…`` (``NAME=…``) are all 0. Only
the network's inputs are read; rows with a missing value in one of them are dropped,
counted, and named per column with the words pandas read as missing (``NA``, ``None``,
``null``: a category so spelled is said, with how to keep it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from verifier.audits.fidelity import DataRows, NoData
from verifier.errors import CertgateInputError, first_line
from verifier.file_digest import file_sha256

if TYPE_CHECKING:
    import pandas as pd

MlflowDataset = Callable[[], "DataRows | NoData"]


class DataError(CertgateInputError):
    """A data table that cannot serve as the model's inputs: the message names the file."""


def read_table(path: Path) -> pd.DataFrame:
    """A CSV (``.csv``) or Parquet (``.parquet``, ``.pq``) table; errors name the file. A
    column name given twice is an error naming it (pandas would read the second ``age`` as
    a column ``age.1`` the table does not have)."""
    import pandas as pd

    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
            header = [str(name) for name in frame.columns]
        else:
            frame = pd.read_csv(path)
            first_row = pd.read_csv(path, header=None, nrows=1, dtype=str,
                                    keep_default_na=False).iloc[0]
            header = [name for name in first_row if name != ""]
    except (ValueError, OSError, ImportError) as error:
        raise DataError(f"{path}: cannot read the table ({first_line(error)})") from error
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise DataError(f"{path}: column names given more than once: {', '.join(twice)} "
                        "(rename or drop the copies)")
    if suffix not in (".parquet", ".pq") and frame.isna().to_numpy().any():
        from certgate.population_data import MISSING_WORDS

        frame.attrs[MISSING_WORDS] = _missing_words(path, frame)
    return frame


def _missing_words(path: Path, frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per column, the non-empty texts of the cells pandas read as missing, with their
    counts: a category spelled ``NA`` (North America) is one of pandas' missing-value
    words, which the messages about missing values name."""
    import pandas as pd

    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    words: dict[str, dict[str, int]] = {}
    for column in frame.columns[frame.isna().any()]:
        cells = raw[column][frame[column].isna().to_numpy()]
        counts = cells[cells != ""].value_counts()
        if len(counts):
            words[str(column)] = {str(word): int(rows) for word, rows in counts.items()}
    return words


def encoded_rows(frame: pd.DataFrame, names: Sequence[str], where: str
                 ) -> tuple[np.ndarray, dict[str, Any]]:
    """The rows of ``frame`` as the inputs ``names`` (see the module docstring) and what was
    dropped: ``rows_dropped`` (rows with a missing value in a column read) and, when some
    were, ``missing_values`` (per such column, its count and the words pandas read as
    missing, :func:`certgate.population_data.missing_values_text`: a category spelled
    ``NA`` is named, not silently dropped); raises :class:`DataError` naming the missing
    columns."""
    from certgate.population_data import (
        DROPPED,
        dummies_hint,
        encode_strings,
        is_string_column,
        missing_values_text,
        with_dropped_columns,
    )
    from verifier.population.errors import PopulationError

    raw = {str(column) for column in frame.columns}
    wanted: list[str] = []
    for name in names:
        base = name.split("=", 1)[0]
        if name in raw:
            wanted.append(name)
        elif "=" in name and base in raw and is_string_column(frame[base]):
            wanted.append(base)
    wanted = list(dict.fromkeys(wanted))
    subset = frame[wanted].dropna()
    dropped: dict[str, Any] = {"rows_dropped": len(frame) - len(subset)}
    if dropped["rows_dropped"]:
        dropped["missing_values"] = [missing_values_text(frame, column) for column in wanted
                                     if frame[column].isna().any()]
    try:
        encoded, categories = encode_strings(subset)
    except PopulationError as error:
        after = (f" (after dropping {dropped['rows_dropped']} rows for a missing value: "
                 f"{'; '.join(dropped['missing_values'])})" if dropped["rows_dropped"] else "")
        raise DataError(f"{where}: {error}{after}") from error
    strings = set(categories)
    implied = [name for name in names if name not in encoded.columns
               and name.endswith((f"_{DROPPED}", f"={DROPPED}"))]
    listed = {name: [column for column in names if column in encoded.columns
                     and column.startswith(name.removesuffix(DROPPED))] for name in implied}
    encoded = with_dropped_columns(encoded, {name: [name, *columns]
                                             for name, columns in listed.items() if columns})
    missing = [name for name in names if name not in encoded.columns
               and not ("=" in name and name.split("=", 1)[0] in strings)]
    if missing:
        raise DataError(f"{where} lacks the model input column(s) {', '.join(missing)} "
                        f"(columns: {', '.join(sorted(raw))}){dummies_hint(missing, frame)}")
    columns = []
    for name in names:
        if name in encoded.columns:
            values = encoded[name]
            if is_string_column(values):
                raise DataError(f"{where}: column {name!r} holds text where the model reads a "
                                "number")
            columns.append(values.to_numpy(dtype=np.float64))
        else:
            columns.append(np.zeros(len(encoded)))
    return np.column_stack(columns) if columns else np.zeros((len(encoded), 0)), dropped


def dropped_text(source: dict[str, Any]) -> str:
    """``; N rows dropped: column 'C': missing values in …`` for a data source that dropped
    rows (:func:`pipeline_steps.fidelity_data.encoded_rows`), else empty."""
    if not source.get("rows_dropped"):
        return ""
    return (f"; {source['rows_dropped']} rows dropped: "
            + "; ".join(source.get("missing_values", [])))


def rows_from_file(path: Path, names: Sequence[str], origin: str, uri: str | None = None,
                   sha256: str | None = None) -> DataRows:
    """The rows of the table at ``path`` with their source record (``sha256``: already
    computed)."""
    frame = read_table(path)
    rows, dropped = encoded_rows(frame, names, f"{origin} {uri or path}")
    source = {"origin": origin, "uri": uri or str(path),
              "sha256": sha256 or file_sha256(path), "rows_read": len(frame),
              "rows_used": len(rows), **dropped}
    return DataRows(rows, source)


def given_rows(path: str | Path, names: Sequence[str], origin: str) -> DataRows:
    """Rows from a file the user named (``origin``: how, e.g. ``--data``); a missing file is
    an error."""
    file = Path(str(path).removeprefix("file://"))
    if not file.is_file():
        raise DataError(f"{origin} {path}: file not found")
    return rows_from_file(file, names, origin)


def fitted_from_rows(population: Any, names: Sequence[str],
                     population_path: Path | None) -> DataRows | NoData | None:
    """Rows of the table the population model records it was fitted from (``None`` when it
    records none); an unreachable file or another sha256 is a :class:`NoData` saying so."""
    source = getattr(population, "fitted_from", None)
    if source is None:
        return None
    origin = "population fitted_from"
    tried = {"origin": origin, "uri": source.uri, "sha256": source.sha256, "rows": source.rows}
    local = Path(source.uri.removeprefix("file://"))
    candidates = [local] if local.is_absolute() else [
        local, *([population_path.parent / local] if population_path is not None else [])]
    found = next((path for path in candidates if path.is_file()), None)
    if found is None:
        return NoData(f"the population was fitted from {source.uri}, which is not reachable "
                      f"from here (tried {', '.join(map(str, candidates))})", tried)
    digest = file_sha256(found)
    if digest != source.sha256:
        return NoData(f"the population was fitted from {source.uri}, but {found} has sha256 "
                      f"{digest[:12]}…, not the recorded {source.sha256[:12]}… (the file "
                      "changed since the fit)", {**tried, "found": str(found)})
    try:
        return rows_from_file(found, names, origin, source.uri, digest)
    except DataError as error:
        return NoData(str(error), tried)


def resolve_data(names: Sequence[str], population: Any, *, given: str | Path | None = None,
                 given_origin: str = "--data", population_path: Path | None = None,
                 mlflow_dataset: MlflowDataset | None = None) -> DataRows | NoData:
    """The data rows for the check, from the first source of the module docstring that
    yields them; otherwise :class:`NoData` with every source's reason."""
    if given is not None:
        return given_rows(given, names, given_origin)
    reasons: list[str] = []
    tried: list[dict[str, Any]] = []
    fitted = fitted_from_rows(population, names, population_path)
    if isinstance(fitted, DataRows):
        return fitted
    if isinstance(fitted, NoData):
        reasons.append(fitted.reason)
        tried.append(fitted.source)
    else:
        reasons.append("the population model records no data it was fitted from")
    if mlflow_dataset is not None:
        logged = mlflow_dataset()
        if isinstance(logged, DataRows):
            if reasons and isinstance(fitted, NoData):
                logged.source["not_used"] = reasons
            return logged
        reasons.append(logged.reason)
        tried.append(logged.source)
    else:
        reasons.append("no data was given and no MLflow dataset was looked up")
    return NoData("; ".join(reasons), {"tried": [item for item in tried if item]})


def table_rows(frame: pd.DataFrame, path: Path, names: Sequence[str],
               source: dict[str, Any]) -> DataRows | NoData:
    """Rows of a table read elsewhere (an MLflow dataset, ``path`` its local file); a table
    that lacks the model's inputs is a :class:`NoData` saying so."""
    where = f"{source.get('origin', 'data')} {source.get('uri', path)}"
    try:
        return frame_rows(frame, names, {**source, "sha256": file_sha256(path)}, where)
    except DataError as error:
        return NoData(str(error), source)


def frame_sha256(frame: pd.DataFrame) -> str:
    """A digest of a table held in memory: its column names and pandas' per-row hashes."""
    import pandas as pd

    digest = hashlib.sha256(",".join(map(str, frame.columns)).encode())
    digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return digest.hexdigest()


def frame_rows(frame: pd.DataFrame, names: Sequence[str], source: dict[str, Any],
               where: str) -> DataRows:
    """The rows of an in-memory table with their source record (``source`` plus the row
    counts); raises :class:`DataError` naming the missing columns (``where``: how the table
    is named in the message)."""
    rows, dropped = encoded_rows(frame, names, where)
    return DataRows(rows, {**source, "rows_read": len(frame), "rows_used": len(rows),
                           **dropped})
