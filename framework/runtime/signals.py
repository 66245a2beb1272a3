"""SIGINT and SIGTERM as a request to stop, for the commands that run until told to (`lake ingest
--continuous`, `lake run --continuous`, `lake schedule`): one place that installs the handlers and
puts the previous ones back."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def on_stop_signals(handle: Callable[[signal.Signals], None]) -> Iterator[None]:
    """While in the block, SIGINT and SIGTERM call `handle` (with the signal) instead of ending
    the process; the previous handlers are back afterwards. Only the main thread can handle
    signals: in another thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        handle(signal.Signals(signum))

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def stopping(stop: threading.Event) -> Callable[[signal.Signals], None]:
    """The usual handler: set `stop` (the work in flight finishes, then the loop ends)."""
    return lambda _sig: stop.set()
