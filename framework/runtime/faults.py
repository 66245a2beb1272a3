"""Fault injection for crash and concurrency tests; unset in normal runs, both are no-ops.

`LAKE_FAILPOINT=<name>[:<n>]` kills the process (SIGKILL) the n-th time (default first) execution
reaches `failpoint(<name>)`; `<name>@<table>[:<n>]` counts one ODS table's hits only (tables
commit concurrently). `LAKE_PAUSE=<name>:<dir>` makes `pausepoint(<name>)` announce the
process (file `<dir>/<name>.<pid>`) and wait until `<dir>/go` exists (at most 10 minutes): a test
lets several processes reach a point, then releases them together. Every failpoint is a pause
point too: a test can hold a process there (to see what it holds, or to kill it from outside).

The failpoints: `after_dead_letter_commit` (a micro-batch's dead letter is written, no table
committed), `after_tombstone_commit` (an ODS table's tombstones are written, its commit is
not), `before_history_commit` / `after_history_commit` (its history table's, `history: true`), `before_table_commit` / `after_table_commit` (an ODS table's commit),
`before_offset_commit` (a micro-batch committed in the dead letter and every table, before Spark
records it), `after_quarantine_write` (rows a `drop` check rejected are written, the table's
commit is not), `before_bootstrap_commit`, `after_hidden_commit` (an aggregate's hidden-groups
table committed, the model's commit not), `before_model_commit` / `after_model_commit`,
`after_run_ingest` (`lake run`: ingested, nothing built), `after_replay_journal` /
`after_replay_ingest` (a dead-letter replay: its journal written; its micro-batch committed,
nothing marked), `after_rewrite_staged` /
`after_rewrite_swap` (an ODS table's rewrite in wider types: staged, half swapped). A kill inside a Hudi commit is done from
outside, by watching the table's timeline (tests/integration/test_ods_crash.py).

Inside a table's creation (framework/table/lake_table.py, local warehouses): `creating_<kind>`
kills the process as soon as Hudi has made the new table's `.hoodie/`, `created_<kind>` once its
`hoodie.properties` is written, before the first commit completes; `<kind>` is a table kind of
framework/table/kinds.py (ods, tombstones, dead_letter, model, hidden, quarantine, staged)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_hits: Counter[str] = Counter()
_hits_lock = threading.Lock()  # ODS tables commit from several threads


def failpoint(name: str, scope: str | None = None) -> None:
    """`scope` (e.g. the ODS table, `ods.items`) lets `LAKE_FAILPOINT=<name>@<scope>[:<n>]` count
    only that table's hits: ODS tables commit concurrently, so a count over all of them does not
    say which table the kill lands in."""
    pausepoint(name)
    spec = os.environ.get("LAKE_FAILPOINT")
    if not spec:
        return
    target, _, nth = spec.partition(":")
    if target != name and (scope is None or target != f"{name}@{scope}"):
        return
    with _hits_lock:
        _hits[target] += 1
        hit = _hits[target] == int(nth or 1)
    if hit:
        os.kill(os.getpid(), signal.SIGKILL)


def pausepoint(name: str) -> None:
    spec = os.environ.get("LAKE_PAUSE")
    if not spec:
        return
    target, _, where = spec.partition(":")
    if target != name or not where:
        return
    d = Path(where)
    (d / f"{name}.{os.getpid()}").touch()
    deadline = time.monotonic() + 600
    while not (d / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.1)


@contextmanager
def watch_creation(kind: str, table: Path | None, scope: str | None = None) -> Iterator[None]:
    """Around the first commit of a new table of `kind` at `table` (None: not on the local disk):
    `LAKE_FAILPOINT=creating_<kind>[:<n>]` / `created_<kind>[:<n>]` kill the process from a
    watching thread when `.hoodie/` / `.hoodie/hoodie.properties` appears; `...@<scope>` (the
    table's name, e.g. `creating_ods@ods.c`) counts that table's creation only."""
    spec = os.environ.get("LAKE_FAILPOINT")
    target, _, nth = (spec or "").partition(":")
    point, _, only = target.partition("@")
    if table is None or point not in (f"creating_{kind}", f"created_{kind}") or (only and only != scope):
        yield
        return
    with _hits_lock:
        _hits[target] += 1
        hit = _hits[target] == int(nth or 1)
    if not hit:
        yield
        return
    watched = table / ".hoodie" if point.startswith("creating_") else table / ".hoodie" / "hoodie.properties"
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if watched.exists():
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.001)

    threading.Thread(target=watch, daemon=True, name=f"failpoint-{target}").start()
    try:
        yield
    finally:
        done.set()
