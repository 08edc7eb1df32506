"""The dataset a model was trained on, as MLflow recorded it: a dataset input
(``mlflow.log_input``) of the run that logged the model version.

:func:`source_run_dataset` looks at the version's source run's dataset inputs (those logged
with context ``training`` first), keeps those whose source is a file MLflow can fetch
(a :class:`mlflow.data.filesystem_dataset_source.FileSystemDatasetSource`: a local path,
``mlflow-artifacts:/``, ``s3://``, …), downloads the first one and reads it as a table. The
file must still be the logged dataset: a pandas dataset's digest is recomputed from the file
(MLflow's own ``compute_pandas_digest``) and must equal the logged one. Anything else — no
source run, no dataset input, a source that is not a file, a file that changed — is a
:class:`~verifier.audits.fidelity.NoData` saying so, never an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifier.audits.fidelity import NoData

if TYPE_CHECKING:
    import pandas as pd
    from mlflow.entities.model_registry import ModelVersion

    from registry_hooks.connection import Registry

CONTEXT_TAG = "mlflow.data.context"


@dataclass(frozen=True)
class LoggedTable:
    """A dataset input read back: the table, the local file and the source record."""

    frame: pd.DataFrame
    path: Path
    source: dict[str, Any]


def _read(path: Path) -> pd.DataFrame:
    import pandas as pd

    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    return pd.read_csv(path)


def source_run_dataset(registry: Registry, version: ModelVersion | None,
                       workdir: Path) -> LoggedTable | NoData:
    """The training table logged with ``version``'s source run (see the module docstring)."""
    import mlflow
    from mlflow.data.digest_utils import compute_pandas_digest
    from mlflow.data.filesystem_dataset_source import FileSystemDatasetSource
    from mlflow.exceptions import MlflowException

    if version is None or not getattr(version, "run_id", None):
        return NoData("the model is not a registered version with a source run, so no "
                      "dataset logged with it was looked up")
    run_id = str(version.run_id)
    tried: dict[str, Any] = {"origin": "mlflow dataset", "run_id": run_id}
    try:
        inputs = list(registry.client.get_run(run_id).inputs.dataset_inputs or [])
    except MlflowException as error:
        return NoData(f"cannot read the source run {run_id}: {error.message}", tried)
    if not inputs:
        return NoData(f"the source run {run_id} logged no dataset (mlflow.log_input)", tried)
    ordered = sorted(inputs, key=lambda item: 0 if any(
        tag.key == CONTEXT_TAG and tag.value == "training" for tag in item.tags) else 1)
    reasons = []
    for item in ordered:
        dataset = item.dataset
        where = f"dataset {dataset.name!r} of run {run_id}"
        try:
            source = mlflow.data.get_source(item)
        except MlflowException as error:
            reasons.append(f"{where}: unknown source ({error.message})")
            continue
        if not isinstance(source, FileSystemDatasetSource):
            reasons.append(f"{where}: its source ({dataset.source_type}) is not a file")
            continue
        record = {**tried, "name": dataset.name, "uri": source.uri, "digest": dataset.digest}
        try:
            local = Path(source.load(dst_path=str(workdir / "dataset")))
            frame = _read(local)
        except (MlflowException, OSError, ValueError) as error:
            reasons.append(f"{where}: cannot read {source.uri} ({type(error).__name__})")
            continue
        digest = compute_pandas_digest(frame)
        if digest != dataset.digest:
            reasons.append(f"{where}: the file at {source.uri} is not the logged dataset "
                           f"(digest {digest}, logged {dataset.digest})")
            continue
        return LoggedTable(frame, local, record)
    return NoData("; ".join(reasons), tried)
