"""YAML read as YAML 1.2 says of keys: a key given twice in one mapping is an error.

PyYAML's ``safe_load`` keeps the last value of a repeated key, so a second ``gamma:`` pasted
below the first in an audit configuration, or a second ``postcondition:`` in a constraint,
would silently replace the first. :func:`load_yaml` refuses it with the key and its position
(a ``yaml.YAMLError`` whose ``problem_mark`` is the repeated key's).
"""

from __future__ import annotations

from typing import Any

import yaml


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice in this mapping",
                    key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """The document in ``text`` as ``yaml.safe_load`` reads it, except that a key given twice
    in one mapping raises ``yaml.YAMLError`` naming it (at its second position)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)
