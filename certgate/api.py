"""The Python API behind ``import certgate``: the same audits as ``certgate run`` for a
notebook or a training script, without a configuration file or an MLflow run.

Everything heavy (torch, MLflow, scipy) is imported inside the functions, so ``import
certgate`` is cheap. The mathematics is :func:`verifier.audits.run_audit`, the binding of the
population model to the network's inputs by name is :func:`verifier.audits.binding.bind`, and
models are read as ``certgate run`` reads them (:func:`registry_hooks.certgate_model.load_model`),
so the certificates are the ones the command line produces for the same inputs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifier.errors import CertgateInputError

if TYPE_CHECKING:
    import pandas as pd

    from verifier.certificate import Certificate
    from verifier.network import Network
    from verifier.population import PopulationModel

def load_population(path: str | Path) -> PopulationModel:
    """The population model in the JSON file ``path``, validated (schema and distributions;
    :func:`verifier.population.load_population`)."""
    from verifier.population import load_population as read

    return read(path)


def audit_settings(audits: Any) -> list[Any]:
    """``audits`` as a list of validated audit settings: one or several configuration dicts
    (``{"kind": "demographic_parity", …}``, exactly as in a configuration's ``audits``) or
    settings objects of :mod:`verifier.audits`. Names must be distinct; an invalid dict is a
    :class:`CertgateInputError` naming ``audits[i]`` and the field."""
    from pydantic import TypeAdapter, ValidationError

    from configs.schema import AuditSettings, describe_validation_error

    items = [audits] if isinstance(audits, Mapping) or hasattr(audits, "kind") else list(audits)
    if not items:
        raise CertgateInputError("audits: give at least one audit")
    adapter = TypeAdapter(AuditSettings)
    settings = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            settings.append(item)
            continue
        try:
            settings.append(adapter.validate_python(dict(item)))
        except ValidationError as error:
            raise CertgateInputError(
                f"audits[{index}]: {describe_validation_error(error)}") from error
    names = [item.name for item in settings]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise CertgateInputError(f"audits: names {repeated} repeat; give each audit a 'name'")
    return settings


def _network(model: Any, input_names: Sequence[str] | None, tracking_uri: str | None,
             workdir: Path) -> tuple[Network, Any]:
    """The model as the IR, and the loaded registry model (for its shipped population) when
    it came from MLflow."""
    from verifier.network import Network

    if isinstance(model, Network):
        return model, None
    if isinstance(model, str | Path):
        from registry_hooks.certgate_model import load_model_source

        loaded = load_model_source(str(model), tracking_uri, workdir, input_names=input_names)
        return loaded.network, loaded
    import torch

    if isinstance(model, torch.nn.Module):
        from verifier.convert.torch_module import from_torch, needs_export

        shape = (len(input_names),) if input_names and needs_export(model) else None
        return from_torch(model, input_names, input_shape=shape), None
    raise CertgateInputError(
        f"model: expected a torch module, a verifier Network, a model file path or a "
        f"models:/ URI, got {type(model).__name__}")


def audit(model: Any, population: Any, audits: Any, *,
          input_names: Sequence[str] | None = None, tracking_uri: str | None = None,
          budget: float | None = None, data: str | Path | pd.DataFrame | None = None,
          data_origin: str = "data", fidelity_level: float = 0.95) -> list[Certificate]:
    """Certify ``model`` under ``population`` for every audit in ``audits``; one
    :class:`~verifier.certificate.Certificate` per audit, in order.

    ``model``: a ``torch.nn.Module`` (a ``Sequential`` of supported layers, or anything
    :func:`verifier.convert.torch_module.from_torch` converts), a verifier ``Network``, a model
    file (``.onnx``, ``.pt``/``.ts``, ``.nnet``, ``.json``, a local MLflow model directory) or an
    MLflow URI (``models:/NAME@ALIAS``, ``models:/NAME/VERSION``, ``runs:/…``;
    ``tracking_uri`` selects the server or store, default MLflow's own). ``population``: a
    ``PopulationModel``, a path to its JSON file, or ``None`` for an MLflow model that ships
    one. ``audits``: see :func:`audit_settings`. ``input_names`` names the model's inputs
    when it records none (the population model is bound to them by name, never by
    position); for a module
    converted through ``torch.export`` (not a plain ``Sequential``) it also gives the input
    width. ``budget`` (seconds)
    tightens every audit's own time limit; an audit that runs out of time says ``unknown``
    with the bounds reached. Every certificate's ``population_fidelity`` records whether data
    contradicts the population model (:mod:`verifier.audits.fidelity`, at
    ``fidelity_level``): ``data`` (a CSV or Parquet file, or a pandas DataFrame; the record
    names it ``data_origin``), else the table the population
    records it was fitted from, else a file-backed dataset logged with a registered model's
    source run; without any it says no check was possible. Bad input raises
    :class:`CertgateInputError` naming the field."""
    from verifier.audits import fidelity_check, run_audit
    from verifier.audits.binding import bind
    from verifier.audits.fidelity import FidelityOptions, attach

    settings = audit_settings(audits)
    try:
        options = FidelityOptions(level=fidelity_level)
    except ValueError as error:
        raise CertgateInputError(f"fidelity_level: {error}") from error
    population_path = Path(population) if isinstance(population, str | Path) else None
    with tempfile.TemporaryDirectory(prefix="certgate-api-") as scratch:
        network, loaded = _network(model, input_names, tracking_uri, Path(scratch))
        if population is None:
            if loaded is None or loaded.flavor == "file":
                raise CertgateInputError("population: give a population model (a "
                                         "PopulationModel or its JSON file); only an MLflow "
                                         "model can ship its own")
            from registry_hooks.certgate_model import fetch_population

            population = fetch_population(loaded, None, Path(scratch)).model
        elif isinstance(population, str | Path):
            population = load_population(population)
        where = loaded.uri if loaded is not None else "model"
        network, population = bind(network, population,
                                   None if input_names is None else list(input_names), where)
        rows = _data_rows(network, population, data, data_origin, population_path, loaded,
                          tracking_uri, Path(scratch))
        certificates = [run_audit(item, network, population, budget) for item in settings]
        for item, certificate in zip(settings, certificates, strict=True):
            attach(certificate, fidelity_check(item, certificate, network, population, rows,
                                               options))
        return certificates


def _data_rows(network: Network, population: Any, data: str | Path | pd.DataFrame | None,
               data_origin: str, population_path: Path | None, loaded: Any,
               tracking_uri: str | None, workdir: Path) -> Any:
    """The data for the fidelity check (:func:`pipeline_steps.fidelity_data.resolve_data`),
    looking up the MLflow dataset of a registered model's source run last; a DataFrame is
    given rows (:func:`pipeline_steps.fidelity_data.frame_rows`)."""
    from pipeline_steps.fidelity_data import frame_rows, frame_sha256, resolve_data, table_rows
    from verifier.audits.fidelity import NoData

    names = list(network.input_names)
    if data is not None and not isinstance(data, str | Path):
        source = {"origin": data_origin, "uri": "DataFrame", "sha256": frame_sha256(data)}
        return frame_rows(data, names, source, data_origin)

    def logged() -> Any:
        from registry_hooks.connection import connect
        from registry_hooks.datasets import source_run_dataset

        table = source_run_dataset(connect(tracking_uri, None), loaded.model_version, workdir)
        if isinstance(table, NoData):
            return table
        return table_rows(table.frame, table.path, names, table.source)

    registered = loaded is not None and loaded.model_version is not None
    return resolve_data(names, population, given=data, given_origin=data_origin,
                        population_path=population_path,
                        mlflow_dataset=logged if registered else None)


def fit_population(frame: Any, **options: Any) -> PopulationModel:
    """A population model fitted to the pandas DataFrame ``frame``; the options and the
    column handling are those of ``certgate population fit``
    (:func:`certgate.population_data.fit_population`), and so are the warnings about what
    the population does not hold of the table
    (:class:`certgate.population_data.PopulationFitWarning`: a few-valued column on no exact
    grid, a near-functional dependence lost)."""
    from certgate.population_data import fit_population as fit

    return fit(frame, **options)

