"""Load safe-ordering constraints from YAML/JSON files, including the benchmark formats.

Three layouts are recognised:

* certgate's schema (:mod:`verifier.selfcorrect.schema`), YAML or JSON;
* the neutral ordering format of ``benchmarks/acasxu/properties.json``: either the whole file
  (``scnet_safe_ordering_constraints`` with ``constraints_per_network``; class names from
  ``outputs``, input size from ``inputs``) or a bare ``{"constraints": [{"name",
  "input_box_normalised": {"lower", "upper"}, "postcondition_dnf"}]}``. ``null`` is an unbounded
  side, boxes are closed, a literal ``[a, b]`` means ``y_a < y_b``;
* the collision format of ``benchmarks/collision/properties.json``: ``{"properties": [{"id",
  "lower", "upper", "order": [a, b]}]}``, one closed box and the literal ``y_a < y_b`` each. It
  describes a binary classifier, so the class count defaults to 2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from verifier.selfcorrect.constraints import (
    ConstraintError,
    ConstraintSet,
    constraint_set_from_dict,
)
from verifier.text_files import read_text
from verifier.yaml_documents import load_yaml

COLLISION_CLASS_COUNT = 2


def read_structured_file(path: str | Path) -> Any:
    """Parse a ``.json``, ``.yaml`` or ``.yml`` file.

    Raises:
        FileNotFoundError: no such file.
        ConstraintError: unknown extension, a syntax error (with the position) or a key
            given twice in one mapping.
    """
    file = Path(path)
    text = read_text(file)
    suffix = file.suffix.lower()
    try:
        if suffix == ".json":
            return json.loads(text, object_pairs_hook=_unique_keys)
        if suffix in (".yaml", ".yml"):
            return load_yaml(text)
    except (ValueError, yaml.YAMLError) as error:  # json.JSONDecodeError is a ValueError
        raise ConstraintError(f"{file}: cannot parse: {error}") from error
    raise ConstraintError(f"{file}: expected a .json, .yaml or .yml file, got {suffix!r}")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; a key given twice is an error (as in YAML, see
    :func:`verifier.yaml_documents.load_yaml`): ``{"dti": 300, "dti": 400}`` bounds one input
    twice, and ``json`` would keep the last silently."""
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"key(s) {', '.join(map(repr, repeated))} given twice in one object")
    return dict(pairs)


def load_constraints(
    path: str | Path,
    num_classes: int | None = None,
    network: str | None = None,
    input_names: Sequence[str] | None = None,
) -> ConstraintSet:
    """Load a constraint file in any recognised layout.

    Args:
        path: ``.yaml``/``.yml``/``.json`` file.
        num_classes: the classifier's class count (checked against the file).
        network: for files that assign constraints per network (ACAS Xu), the network whose
            constraints to take, e.g. ``"N_2,9"``.
        input_names: the model's input names, for fields given by input name in certgate's
            schema (checked against the file's ``inputs:`` header).

    Raises:
        ConstraintError: malformed file; the message names the file and the field.
    """
    data = read_structured_file(path)
    return parse_constraints(data, num_classes, network, source=str(path),
                             input_names=input_names)


def parse_constraints(
    data: Any,
    num_classes: int | None = None,
    network: str | None = None,
    source: str = "constraints",
    input_names: Sequence[str] | None = None,
) -> ConstraintSet:
    """Like :func:`load_constraints` for already-parsed data."""
    if not isinstance(data, Mapping):
        raise ConstraintError(
            f"{source}: expected a mapping at the top level, got {type(data).__name__}"
        )
    if "scnet_safe_ordering_constraints" in data:
        return _from_acasxu_file(data, num_classes, network, source)
    items = data.get("constraints")
    if isinstance(items, list) and items and _is_neutral_item(items[0]):
        return _from_neutral(data, num_classes, network, source, class_names=None, input_size=None)
    properties = data.get("properties")
    if (
        isinstance(properties, list)
        and properties
        and isinstance(properties[0], Mapping)
        and ("order" in properties[0])
    ):
        return _from_collision(properties, num_classes, network, source)
    if network is not None:
        raise ConstraintError(f"{source}: this file does not assign constraints per network")
    return constraint_set_from_dict(data, num_classes, source, input_names)


def _is_neutral_item(item: Any) -> bool:
    return isinstance(item, Mapping) and "postcondition_dnf" in item


def _require(item: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in item:
        raise ConstraintError(f"{where}: missing key {key!r}")
    return item[key]


def _from_acasxu_file(
    data: Mapping[str, Any], num_classes: int | None, network: str | None, source: str
) -> ConstraintSet:
    section = data["scnet_safe_ordering_constraints"]
    if not isinstance(section, Mapping):
        raise ConstraintError(f"{source}: scnet_safe_ordering_constraints must be a mapping")
    outputs = data.get("outputs")
    class_names = (
        [str(_require(out, "name", f"{source}: outputs")) for out in outputs]
        if isinstance(outputs, list)
        else None
    )
    inputs = data.get("inputs")
    input_size = len(inputs) if isinstance(inputs, list) else None
    where = f"{source}: scnet_safe_ordering_constraints"
    return _from_neutral(section, num_classes, network, where, class_names, input_size)


def _select_for_network(
    section: Mapping[str, Any],
    items: Sequence[Mapping[str, Any]],
    network: str | None,
    source: str,
) -> list[Mapping[str, Any]]:
    per_network = section.get("constraints_per_network")
    by_name = {str(_require(item, "name", f"{source}: constraints")): item for item in items}
    if per_network is None:
        if network is None:
            return list(items)
        if not any("networks" in item for item in items):
            raise ConstraintError(f"{source}: this file does not assign constraints per network")
        return [item for item in items if network in item.get("networks", [])]
    if network is None:
        raise ConstraintError(
            f"{source}: the constraints are assigned per network; choose one of "
            f"{', '.join(per_network)}"
        )
    if network not in per_network:
        raise ConstraintError(
            f"{source}: unknown network {network!r}; choose one of {', '.join(per_network)}"
        )
    selected = []
    for name in per_network[network]:
        if name not in by_name:
            raise ConstraintError(
                f"{source}: constraints_per_network.{network} names {name!r}, which is not "
                "among the constraints"
            )
        selected.append(by_name[name])
    return selected


def _from_neutral(
    section: Mapping[str, Any],
    num_classes: int | None,
    network: str | None,
    source: str,
    class_names: list[str] | None,
    input_size: int | None,
) -> ConstraintSet:
    items = section.get("constraints")
    if not isinstance(items, list):
        raise ConstraintError(f"{source}: 'constraints' must be a list")
    selected = _select_for_network(section, items, network, source)
    constraints = []
    for index, item in enumerate(selected):
        where = f"{source}: constraints.{index}"
        box = _require(item, "input_box_normalised", where)
        entry: dict[str, Any] = {
            "name": str(_require(item, "name", where)),
            "precondition": {
                "kind": "box",
                "lower": _require(box, "lower", f"{where}.input_box_normalised"),
                "upper": _require(box, "upper", f"{where}.input_box_normalised"),
            },
            "postcondition": _require(item, "postcondition_dnf", where),
        }
        if item.get("meaning"):
            entry["description"] = str(item["meaning"])
        constraints.append(entry)
    document: dict[str, Any] = {"constraints": constraints}
    if class_names is not None:
        document["classes"] = class_names
    if input_size is not None:
        document["input_size"] = input_size
    return constraint_set_from_dict(document, num_classes, source)


def _from_collision(
    properties: list[Any], num_classes: int | None, network: str | None, source: str
) -> ConstraintSet:
    if network is not None:
        raise ConstraintError(f"{source}: this file does not assign constraints per network")
    constraints = []
    for index, item in enumerate(properties):
        where = f"{source}: properties.{index}"
        if not isinstance(item, Mapping):
            raise ConstraintError(f"{where}: expected a mapping")
        constraints.append(
            {
                "name": f"property_{item.get('id', index)}",
                "precondition": {
                    "kind": "box",
                    "lower": _require(item, "lower", where),
                    "upper": _require(item, "upper", where),
                },
                "postcondition": [[_require(item, "order", where)]],
            }
        )
    count = COLLISION_CLASS_COUNT if num_classes is None else num_classes
    document = {"num_classes": count, "constraints": constraints}
    return constraint_set_from_dict(document, None, source)
