"""YAML read as YAML 1.2 says: a key given twice is an error, and plain scalars resolve by
the 1.2 core schema.

PyYAML's ``safe_load`` keeps the last value of a repeated key, so a second ``gamma:`` pasted
below the first in an audit configuration, or a second ``postcondition:`` in a constraint,
would silently replace the first. :func:`load_yaml` refuses it with the key and its position
(a ``yaml.YAMLError`` whose ``problem_mark`` is the repeated key's).

PyYAML also resolves plain scalars by YAML 1.1, which reads a category code as another number
or as a boolean: ``010`` is the octal 8, ``1_0`` is 10, ``1:30`` the sexagesimal 90, ``yes``,
``no``, ``on``, ``off`` are booleans (``privileged: 010`` audited the group coded 8, the CLI's
``--privileged 010`` the group coded 10). :func:`load_yaml` resolves them by the YAML 1.2
core schema instead: booleans are only ``true``/``false`` (any case form the schema lists),
integers are decimal (``010`` is 10) or written ``0o…``/``0x…``, floats are decimal
(``1e-3`` included, as 1.2 reads it), ``.inf``/``.nan``; anything else, ``yes`` and
``1_0`` included, is a string, which the schemas reading it refuse by field where a number
is due, read as a boolean where one is due (pydantic's ``yes``/``on``), or read as the name
the user wrote. Nulls and dates are read as PyYAML reads them. :func:`dump_yaml` writes
documents that :func:`load_yaml` reads back as they were (PyYAML's dumper leaves ``1e3`` or
``0o10`` unquoted, which YAML 1.2 reads as numbers).
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

import yaml

_BOOL, _INT, _FLOAT = ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int",
                       "tag:yaml.org,2002:float")
_MERGE = "tag:yaml.org,2002:merge"
"""A merge key (``<<: *anchor``): the keys it brings are the anchor's, which the mapping's own
keys override (YAML's merge rule), so it is not a key given twice."""
_CORE_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_CORE_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_CORE_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                         r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 core-schema scalars, refusing a key given twice in
    one mapping (merge keys, ``<<: *anchor``, are read as PyYAML reads them)."""

    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, re.Pattern[str]]]]] = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag not in (_BOOL, _INT, _FLOAT)]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:
                continue
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice in this mapping",
                    key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_core_bool(self, node: yaml.ScalarNode) -> bool:
        """``true``/``false`` in the three spellings of the core schema."""
        return str(self.construct_scalar(node)).lower() == "true"

    def construct_core_int(self, node: yaml.ScalarNode) -> int:
        """A decimal integer (leading zeros kept decimal), or ``0o`` octal, ``0x`` hex."""
        text = str(self.construct_scalar(node))
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text, 10)

    def construct_core_float(self, node: yaml.ScalarNode) -> float:
        """A decimal float, or the core schema's infinities and NaN."""
        text = str(self.construct_scalar(node))
        if text.lower().lstrip("+-") == ".inf":
            return -math.inf if text.startswith("-") else math.inf
        if text.lower() == ".nan":
            return math.nan
        return float(text)


for _first in "tTfF":
    _UniqueKeyLoader.add_implicit_resolver(_BOOL, _CORE_BOOL, [_first])
_UniqueKeyLoader.add_implicit_resolver(_INT, _CORE_INT, list("-+0123456789"))
_UniqueKeyLoader.add_implicit_resolver(_FLOAT, _CORE_FLOAT, list("-+0123456789."))
_UniqueKeyLoader.add_constructor(_BOOL, _UniqueKeyLoader.construct_core_bool)
_UniqueKeyLoader.add_constructor(_INT, _UniqueKeyLoader.construct_core_int)
_UniqueKeyLoader.add_constructor(_FLOAT, _UniqueKeyLoader.construct_core_float)


_RESOLVER = _UniqueKeyLoader("")


class _CoreSchemaDumper(yaml.SafeDumper):
    """PyYAML's safe dumper quoting every string that :func:`load_yaml` would read as
    another type."""

    def represent_text(self, text: str) -> yaml.ScalarNode:
        """A string, single-quoted when the core schema would resolve it as a number,
        boolean or null."""
        plain = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
        style = None if plain == "tag:yaml.org,2002:str" else "'"
        return self.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_CoreSchemaDumper.add_representer(str, _CoreSchemaDumper.represent_text)


def dump_yaml(document: Any) -> str:
    """``document`` as YAML text (keys in their order, Unicode as is) that :func:`load_yaml`
    reads back equal to ``document``."""
    return yaml.dump(document, Dumper=_CoreSchemaDumper, sort_keys=False, allow_unicode=True)


def load_yaml(text: str) -> Any:
    """The document in ``text`` with plain scalars resolved by the YAML 1.2 core schema (see
    the module's docstring), a key given twice in one mapping raising ``yaml.YAMLError``
    naming it (at its second position)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)
