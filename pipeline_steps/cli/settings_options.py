"""One name means one thing: command-line options are the audit settings' fields.

An audit verb's option for settings field ``f`` is ``--f`` with dashes (``favorable_class`` →
``--favorable-class``), except where :data:`OPTION_FOR_FIELD` says otherwise (``timeout_s`` is
``--timeout``, in seconds, everywhere). A renamed option's old spelling is a hidden option
(:class:`RenamedOption`) that refuses it, naming the new one.
:func:`settings_from_args` builds the settings object of :mod:`verifier.audits` from the parsed
options, so pydantic validates a command line exactly as it validates a configuration;
:func:`option_for` is what the tests use to check that every field has its option.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from verifier.errors import CertgateInputError

OPTION_FOR_FIELD = {"timeout_s": "--timeout"}
NOT_OPTIONS = frozenset({"kind", "name"})


class RenamedOption(argparse.Action):
    """An old option spelling, hidden from ``--help``: giving it (with or without a value) is
    a usage error naming the new option, ``parser.add_argument(OLD, action=RenamedOption,
    new=NEW)``. The command line's twin of a settings model's ``RENAMED``."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs="?",
                         default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        raise argparse.ArgumentError(None, f"option {option_string} is now called {self.new}: "
                                           "rename it")


def class_index(text: str) -> int:
    """An option's class, by index: a name is refused saying so
    (:func:`verifier.audits.requirement.class_name_message`)."""
    from verifier.audits.requirement import class_name_message, is_class_name

    if is_class_name(text):
        raise argparse.ArgumentTypeError(class_name_message(text))
    return int(text)


def option_for(field: str) -> str:
    """The command-line option of settings field ``field``."""
    return OPTION_FOR_FIELD.get(field, "--" + field.replace("_", "-"))


def destination(field: str) -> str:
    """The ``argparse`` destination of :func:`option_for` ``(field)``."""
    return option_for(field).removeprefix("--").replace("-", "_")


def settings_from_args(settings_type: type, args: argparse.Namespace,
                       columns: list[str] | None = None, **values: Any) -> Any:
    """``settings_type(kind=…, …)`` (the kind its ``kind`` field declares) from every field's
    option that was given (``None`` leaves the field's default), with ``values`` (fields the
    verb derives itself) on top; ``columns``: the bound inputs' names, for errors that name
    an input as it is spelled (the validation context ``{"columns": columns}``)."""
    from pydantic import ValidationError

    from verifier.audits.kind import settings_kind

    kind = settings_kind(settings_type)
    given: dict[str, Any] = {}
    for field in settings_type.model_fields:
        if field in NOT_OPTIONS or field in values:
            continue
        value = getattr(args, destination(field), None)
        if value is not None:
            given[field] = value
    try:
        return settings_type.model_validate({"kind": kind, **given, **values},
                                            context={"columns": columns})
    except ValidationError as error:
        problems = []
        for item in error.errors():
            field = str(item["loc"][0]) if item["loc"] else ""
            where = option_for(field) if field in settings_type.model_fields else kind
            problems.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
        raise CertgateInputError("; ".join(problems)) from error
