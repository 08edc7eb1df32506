"""Input coordinates of a constraint file given by name (``lower: {dti: 300}``).

The schema's validators call :func:`by_position` with the input names in the pydantic
validation context (``context[INPUT_NAMES]``, set by
:func:`verifier.selfcorrect.constraints.constraint_set_from_dict` from the file's ``inputs:``
header or the model's input names); a precondition written by name leaves validation in the
same positional form as one written with lists, so nothing after validation sees names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import PydanticCustomError

from verifier.errors import did_you_mean

INPUT_NAMES = "input_names"
"""Context key: the input names in order, or ``None`` when unknown."""
PLACEHOLDER = "placeholder"
"""Context key: True when the names say only a position: a reader's defaults ``x0, x1, …`` or
one input tensor's elements ``input[0], input[1], …``
(:func:`verifier.network.positional_names`)."""
NAMES_UNKNOWN = "input_names_unknown"
"""Error type of a name given where no input names are known."""


def by_position(values: Mapping[Any, Any], field: str, context: Any, fill: Any) -> list[Any]:
    """``values`` (input name → value) as a list in input order, ``fill`` where unnamed.

    Raises:
        PydanticCustomError: ``input_names_unknown`` when the context holds no input names.
        ValueError: a key that is not an input name (with a did-you-mean), naming ``field``.
    """
    names = context.get(INPUT_NAMES) if isinstance(context, Mapping) else None
    if names is None:
        raise PydanticCustomError(
            NAMES_UNKNOWN,
            "{field} names inputs ({keys}) but the input names are unknown: add a header "
            "'inputs: [name, ...]' listing the model's inputs in order to the constraint file",
            {"field": field, "keys": ", ".join(str(key) for key in values)},
        )
    index = {name: position for position, name in enumerate(names)}
    positional = [fill] * len(names)
    for key, value in values.items():
        if not isinstance(key, str) or key not in index:
            hint = (" (the model's inputs are unnamed: add a header 'inputs: [name, ...]')"
                    if context.get(PLACEHOLDER) else did_you_mean(str(key), names))
            shown = ", ".join(names) if len(names) <= 12 else f"{', '.join(names[:12])}, …"
            raise ValueError(f"{field}: unknown input {key!r}{hint}; inputs: {shown}")
        positional[index[key]] = value
    return positional
