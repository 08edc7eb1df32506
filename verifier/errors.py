"""Errors the CLI prints as one line, exit code 2: bad input to the verifier, and an executor
lost during a run that cannot report a partial result."""

from __future__ import annotations

import difflib
from collections.abc import Sequence


class CertgateInputError(ValueError):
    """Input that certgate cannot work with: the message names what is wrong and where."""


class ExecutorUnreachableError(CertgateInputError):
    """The executor named cannot be reached (a Dask scheduler's address refused or unresolved):
    bad input now, but possibly not at the next attempt, so it is never recorded as a model
    version's lasting failure."""


class ExecutorLostError(RuntimeError):
    """The executor cancelled a task it was given, so it can run no more (a Dask client that
    lost its scheduler), and the computation needs every task's result."""


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message (its type name when the message is empty), for
    one-line reports of errors raised by third-party readers."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


ONE_HOT_SEPARATORS = ("=", "_")
"""How one-hot columns join a raw column's name and its value: certgate's fit writes
``sex=Male``, ``pandas.get_dummies`` ``sex_Male``."""


def one_hot_columns(name: str, known: Sequence[str]) -> list[str]:
    """The columns of ``known`` that one-hot encode the raw column ``name``
    (``NAME=VALUE`` or ``NAME_VALUE``, :data:`ONE_HOT_SEPARATORS`), in their order."""
    return [candidate for candidate in known
            if candidate.startswith(tuple(name + sep for sep in ONE_HOT_SEPARATORS))]


def one_hot_column(name: str, value: str, known: Sequence[str]) -> str | None:
    """The column of ``known`` that one-hot encodes value ``value`` of the raw column ``name``
    as it is spelled there (``sex=Male`` or ``sex_Male``; the value's case may differ when no
    column has it exactly), ``None`` when there is none or several."""
    encoded = one_hot_columns(name, known)
    for same in (str.__eq__, lambda a, b: a.lower() == b.lower()):
        found = [column for column in encoded if same(column[len(name) + 1:], value)]
        if found:
            return found[0] if len(found) == 1 else None
    return None


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """`` (did you mean 'X'?)`` when ``known`` holds a name ``name`` is a likely misspelling
    of (the same up to case, else the closest by :func:`difflib.get_close_matches`), else
    ``""``: for errors about a name that is not there. When ``name`` is the raw column whose
    one-hot columns ``known`` holds (``sex`` for ``sex=Female``, ``sex=Male``, or pandas'
    ``sex_Female``), the hint names those columns instead."""
    encoded = one_hot_columns(name, known)
    if len(encoded) >= 2:
        return f" ({name!r} is one-hot encoded as {', '.join(encoded)}: name one of these)"
    same_case = [candidate for candidate in known if candidate.lower() == name.lower()]
    close = same_case or difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
