"""Signal handlers installed for a block and put back after it."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

Handler = Callable[[int, FrameType | None], None]


@contextmanager
def handling(signals: tuple[signal.Signals, ...], handler: Handler) -> Iterator[None]:
    """Within the block ``handler`` answers each of ``signals`` (it may install others
    itself); after the block, however it ends, every one of them has the handler it had
    before. Call from the main thread only, as :func:`signal.signal` requires."""
    previous = {number: signal.getsignal(number) for number in signals}
    for number in signals:
        signal.signal(number, handler)
    try:
        yield
    finally:
        for number, before in previous.items():
            signal.signal(number, before)
