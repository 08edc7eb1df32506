"""Reading the text files users hand to certgate (configurations, population models,
constraint files, networks as JSON): UTF-8, and a file that is not is bad input naming the
file and the first byte that is not, not a decoding error from deep inside a reader."""

from __future__ import annotations

from pathlib import Path

from verifier.errors import CertgateInputError


def read_text(path: str | Path) -> str:
    """The UTF-8 text of ``path``. Raises :class:`CertgateInputError` naming the file and
    the offset of its first byte that is not UTF-8 (a file saved as Latin-1 or UTF-16)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        byte = error.object[error.start]
        raise CertgateInputError(
            f"{path}: not UTF-8 text (byte 0x{byte:02x} at offset {error.start}); save the "
            "file as UTF-8") from error
