"""Reading and writing population-model documents (``certgate.population/v1`` JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from verifier.population.errors import PopulationError
from verifier.population.model import FORMAT, PopulationModel
from verifier.text_files import read_text

POPULATION_FILENAME = "population_model.json"


def population_from_json(data: dict[str, Any]) -> PopulationModel:
    """Validate a parsed document. A missing or foreign ``format`` is a
    :class:`PopulationError`; anything else invalid is a pydantic ValidationError whose
    location names the field (e.g. ``distribution.product.factors.0.distribution``)."""
    if not isinstance(data, dict):
        raise PopulationError(f"a population model is a JSON object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise PopulationError(
            f"unsupported population model format {data.get('format')!r}; expected {FORMAT!r}"
        )
    return PopulationModel.from_json(data)


def _reject_constant(name: str) -> float:
    raise PopulationError(f"{name} is not valid JSON; write unbounded sides as null")


def load_population(path: str | Path) -> PopulationModel:
    """Load and validate a population model from a JSON file."""
    path = Path(path)
    text = read_text(path)
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise PopulationError(
            f"{path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from error
    try:
        return population_from_json(data)
    except PopulationError as error:
        raise PopulationError(f"{path}: {error}") from error


def dumps_population(model: PopulationModel) -> str:
    """The document as indented JSON text (no NaN/Infinity: unbounded sides are null)."""
    return json.dumps(model.to_json(), indent=2, allow_nan=False) + "\n"


def save_population(model: PopulationModel, path: str | Path) -> Path:
    """Write the model as JSON; returns the path written."""
    path = Path(path)
    path.write_text(dumps_population(model))
    return path

