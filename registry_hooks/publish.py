"""Log a model together with its population model, so the two travel as one model version.

The population model goes into the model's ``extra_files`` (``extra_files/
population_model.json`` inside the model directory) and its path, the input and output names,
and optionally the declared input domain into the model's metadata (readable without
downloading the weights). Requirements are given explicitly: MLflow's inference would spawn
a subprocess costing ~10 s per model.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import mlflow
import numpy as np
from mlflow.models.model import ModelInfo

from registry_hooks.connection import Registry, registry_errors
from registry_hooks.loading import (
    METADATA_INPUT_DOMAIN,
    METADATA_INPUT_NAMES,
    METADATA_OUTPUT_NAMES,
    METADATA_POPULATION,
    POPULATION_FILE,
)
from registry_hooks.tags import move_alias
from verifier.errors import CertgateInputError

EXAMPLE_ROWS = 5


def pinned_requirements(flavor: Literal["pytorch", "onnx"]) -> list[str]:
    """``pip_requirements`` for a logged model: the installed versions, local labels dropped."""
    requirements = [f"mlflow=={mlflow.__version__}"]
    if flavor == "pytorch":
        import torch

        requirements.append(f"torch=={torch.__version__.split('+')[0]}")
    else:
        import onnx

        requirements.append(f"onnx=={onnx.__version__}")
        try:
            import onnxruntime
        except ImportError:
            return requirements
        requirements.append(f"onnxruntime=={onnxruntime.__version__}")
    return requirements


def _population_json(population: Any, directory: Path) -> tuple[Path, Any]:
    """Write (or copy) the population model to ``directory/population_model.json``; return the
    path and the loaded model."""
    from verifier.population import load_population, save_population

    target = directory / POPULATION_FILE
    if isinstance(population, str | Path):
        source = Path(population)
        if not source.is_file():
            raise CertgateInputError(f"population model file not found: {source}")
        model = load_population(source)
    else:
        model = population
    save_population(model, target)
    return target, model


def log_model_with_population(
    model: Any,
    population: Any,
    *,
    registered_model_name: str | None = None,
    name: str = "model",
    serialization_format: Literal["pt2", "pickle"] = "pt2",
    input_example: np.ndarray | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    input_domain: Mapping[str, tuple[float | None, float | None]] | None = None,
    alias: str | None = None,
    registry: Registry | None = None,
    tags: Mapping[str, str] | None = None,
) -> ModelInfo:
    """Log ``model`` (a ``torch.nn.Module`` or an ``onnx.ModelProto``) with ``population`` (a
    population model or the path of its JSON) and optionally register it and set ``alias``.

    ``input_names`` default to the population model's columns; ``input_example`` (required by
    the ``pt2`` format) defaults to rows sampled from the population model (seed 0). Logs into
    the active run if there is one. Returns MLflow's ``ModelInfo``.
    """
    import onnx
    import torch

    if alias is not None and (registered_model_name is None or registry is None):
        raise CertgateInputError("setting an alias needs registered_model_name and a registry")
    with tempfile.TemporaryDirectory(prefix="certgate-log-") as scratch:
        population_path, population_model = _population_json(population, Path(scratch))
        names = list(input_names) if input_names is not None else list(population_model.columns)
        metadata: dict[str, Any] = {METADATA_POPULATION: f"extra_files/{POPULATION_FILE}"}
        metadata[METADATA_INPUT_NAMES] = names
        if output_names is not None:
            metadata[METADATA_OUTPUT_NAMES] = list(output_names)
        if input_domain is not None:
            metadata[METADATA_INPUT_DOMAIN] = {k: list(v) for k, v in input_domain.items()}
        if input_example is None:
            input_example = population_model.sample(EXAMPLE_ROWS, 0)
        common: dict[str, Any] = {
            "name": name,
            "input_example": np.asarray(input_example, dtype=np.float32),
            "extra_files": [str(population_path)],
            "metadata": metadata,
            "registered_model_name": registered_model_name,
        }
        with registry_errors(f"cannot log model {registered_model_name or name}"):
            if isinstance(model, torch.nn.Module):
                info = mlflow.pytorch.log_model(
                    model.eval(), serialization_format=serialization_format,
                    pip_requirements=pinned_requirements("pytorch"), **common,
                )
            elif isinstance(model, onnx.ModelProto):
                info = mlflow.onnx.log_model(
                    model, pip_requirements=pinned_requirements("onnx"), **common
                )
            else:
                raise CertgateInputError(
                    f"cannot log a {type(model).__name__}: expected a torch.nn.Module or an "
                    "onnx.ModelProto"
                )
    version = info.registered_model_version
    if registered_model_name is not None and version is not None and registry is not None:
        if tags:
            with registry_errors(f"cannot tag {registered_model_name} version {version}"):
                for key, value in tags.items():
                    registry.client.set_model_version_tag(registered_model_name, str(version),
                                                          key, value)
        if alias is not None:
            move_alias(registry, registered_model_name, alias, str(version))
    return info


VARIANT_ARTIFACT_NAME = "model"


def variant_signature(input_names: Sequence[str] | None, input_size: int,
                      output_columns: Sequence[str]) -> Any:
    """The self-correcting variant's signature: named double columns in (MLflow then binds a
    posted DataFrame's columns by name, in any order) when ``input_names`` are given, a float64
    tensor of ``input_size`` columns for a source without names; the corrected logits, the ⊥
    flag and the class out."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema, TensorSpec

    from registry_hooks import selfcorrect_pyfunc

    if input_names is None:
        inputs = Schema([TensorSpec(np.dtype(np.float64), (-1, input_size))])
    else:
        inputs = Schema([ColSpec("double", name) for name in input_names])
    outputs = Schema([*(ColSpec("double", column) for column in output_columns),
                      ColSpec("boolean", selfcorrect_pyfunc.BOTTOM_COLUMN),
                      ColSpec("long", selfcorrect_pyfunc.PREDICTED_COLUMN)])
    return ModelSignature(inputs=inputs, outputs=outputs)


def log_self_correcting_variant(
    name: str, artifacts: Mapping[str, str], *, input_names: Sequence[str],
    named_inputs: Sequence[str] | None, output_columns: Sequence[str], input_example: Any,
    metadata: Mapping[str, Any], tags: Mapping[str, str], requirements: Sequence[str],
) -> str:
    """Log the self-correcting variant (pyfunc model code
    :mod:`registry_hooks.selfcorrect_pyfunc` with ``artifacts``) and register it as a new
    version of ``name`` carrying ``tags`` from its creation; returns the version.
    ``named_inputs`` (``None`` for a source without input names) shape the signature
    (:func:`variant_signature`); ``requirements`` come on top of MLflow's and torch's pins."""
    from registry_hooks import selfcorrect_pyfunc

    with registry_errors(f"cannot register the self-correcting variant as {name}"):
        info = mlflow.pyfunc.log_model(
            name=VARIANT_ARTIFACT_NAME,
            python_model=selfcorrect_pyfunc.__file__,
            artifacts=dict(artifacts),
            model_config={"input_names": list(input_names),
                          "output_columns": list(output_columns)},
            signature=variant_signature(named_inputs, len(input_names), output_columns),
            input_example=input_example,
            pip_requirements=[*pinned_requirements("pytorch"), *requirements],
            metadata=dict(metadata),
        )
        registered = mlflow.register_model(info.model_uri, name, tags=dict(tags))
    return str(registered.version)
