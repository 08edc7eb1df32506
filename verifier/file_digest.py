"""What names the bytes of an input file: its sha256, and a read that is refused when the
file changes while it is read (so a certificate's digest is the digest of what it certified)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from verifier.errors import CertgateInputError

Read = TypeVar("Read")


def file_sha256(path: Path) -> str:
    """The sha256 of the file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_unchanged(path: Path, what: str, read: Callable[[], Read]) -> tuple[Read, str]:
    """``read()`` (which reads the file ``path``) and the sha256 of the bytes it read. The
    digest is taken before and after the read; when they differ the file changed while it was
    read, no digest names what was read, and a :class:`CertgateInputError` says so, naming
    the file as ``what``."""
    value, digest, _ = read_unchanged_with(path, (), what, read)
    return value, digest


def read_unchanged_with(path: Path, companions: Sequence[Path], what: str,
                        read: Callable[[], Read]) -> tuple[Read, str, dict[str, str]]:
    """:func:`read_unchanged` of a file whose content continues in ``companions`` (an ONNX
    model's external weights, ``model.onnx.data``): also the sha256 of each companion, by its
    path relative to ``path``'s directory, taken and checked the same way, so a certificate's
    digests name every byte the model was read from."""
    def digests() -> tuple[str, dict[str, str]]:
        return file_sha256(path), {os.path.relpath(other, path.parent): file_sha256(other)
                                   for other in companions}

    before = digests()
    value = read()
    if digests() != before:
        raise CertgateInputError(f"{what} changed while it was read; run again once it is "
                                 "written")
    return value, *before
