"""framework/runtime/preload.py: a module imported in the background is imported once, and the
main thread's own import of it waits for the background one instead of importing it again."""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

import pytest

from framework.runtime import preload


def test_background_import_is_the_one_the_main_thread_gets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "slow_mod_for_preload.py").write_text(
        "import threading\nimport time\nimport counter_for_preload as c\nc.n += 1\nc.by = threading.current_thread().name\ntime.sleep(0.5)\nready = True\n")
    (tmp_path / "counter_for_preload.py").write_text("n = 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    preload.start(["slow_mod_for_preload"])
    preload.start(["slow_mod_for_preload"])  # started once
    preload.settle()  # waits for the background import
    assert "slow_mod_for_preload" in sys.modules
    mod = importlib.import_module("slow_mod_for_preload")
    counter = sys.modules["counter_for_preload"]
    assert mod.ready and (counter.n, counter.by) == (1, "lake-preload-slow_mod_for_preload")
    assert not [t for t in threading.enumerate() if t.name == "lake-preload-slow_mod_for_preload" and t.is_alive()]


def test_a_failing_background_import_is_raised_by_the_main_threads_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_mod_for_preload.py").write_text("raise RuntimeError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    preload.start(["broken_mod_for_preload"])
    for t in threading.enumerate():
        if t.name == "lake-preload-broken_mod_for_preload":
            t.join(10)
    with pytest.raises(RuntimeError, match="broken on purpose"):
        importlib.import_module("broken_mod_for_preload")
