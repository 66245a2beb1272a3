"""Python modules a command will need, imported in a background thread while its driver JVM starts.

Great Expectations takes about 5 s to import (its expectation catalogue pulls in scipy, pandas and
pyspark.ml); a command that runs quality checks paid it after Spark was up, on top of the JVM's
own start (~5 s cold). Started first, the import runs while the main thread waits on the JVM's
gateway (a process start and a socket wait, which release the GIL), so the two overlap.

Python's module locks make the main thread's later `import great_expectations` wait for the
background import to finish: a module is never imported twice. Two threads importing parts of the
same packages at once can still meet inside a circular import and one see the other's module
half-initialised, so the session waits for the preload (`settle`) once the JVM is up, before any
of lake's own code runs on: the import overlaps only the JVM's start, where the main thread imports
nothing. An import that fails in the background is left for the main thread's own import to
raise, where the command handles it."""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Iterable

QUALITY = "great_expectations"

_started: set[str] = set()
_threads: list[threading.Thread] = []
_lock = threading.Lock()


def start(modules: Iterable[str]) -> None:
    """Import `modules` in a daemon thread each, unless already imported or started."""
    with _lock:
        todo = [m for m in modules if m not in _started and m not in sys.modules]
        _started.update(todo)
    for name in todo:
        t = threading.Thread(target=_load, args=(name,), name=f"lake-preload-{name}", daemon=True)
        t.start()
        with _lock:
            _threads.append(t)


def settle() -> None:
    """Wait for the imports started so far (see the module docstring)."""
    with _lock:
        running, _threads[:] = list(_threads), []
    for t in running:
        t.join()


def _load(name: str) -> None:
    # A failure is left for the main thread's own import to raise, where the command handles it.
    with contextlib.suppress(Exception):
        importlib.import_module(name)
