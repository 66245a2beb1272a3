"""Dead letters survive a SIGKILL at every failpoint of an ODS micro-batch and of a dead-letter
replay; a second replay is refused while one runs; purge keeps pending events unless asked.

One project for the whole module (test time is a budget): each crash case appends its own CDC
file (its own keys), so each case checks its own events. The oracle is the `World` below, written
from the events the test emits: which lines are bad and why, and the rows the source holds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from framework.cli.main import main
from framework.table import hudi
from tests.helpers import LakeProject, envelope

TABLES = """
tables:
  - {source: shop.people, key: [id], columns: {age: int}}
  - {source: shop.pets, key: [id], columns: {weight: int}}
"""
# The fix a replay needs for shop.toys: declare it (its events were dead-lettered as undeclared).
FIXED = TABLES + "  - {source: shop.toys, key: [id], columns: {n: int}}\n"
# The failpoints of a micro-batch, in the order it reaches them (people commits before pets), one
# per state a kill can leave that a rerun must complete: the dead letter only
# (`after_tombstone_commit:1` and `before_table_commit:1` leave the same, plus tombstones a rerun
# tolerates); the dead letter and ods.people (the case: before the fix, people's bad event
# was lost; `before_table_commit:2` leaves the same). After the last table's commit
# (`after_table_commit:2`, `before_offset_commit`) the rerun writes nothing, and the dead letter was
# written first: those states are the end state of the second case. Each kill is a CLI process
# (~25 s of JVM start), so they are not repeated here.
FAILPOINTS = ["after_dead_letter_commit", "after_table_commit:1"]


class World:
    """What the source holds and which messages are bad (the oracle)."""

    def __init__(self) -> None:
        self.people: dict[int, int] = {}
        self.pets: dict[int, int] = {}
        self.toys_good: dict[int, int] = {}  # toys rows a replay (after the fix) puts in ods.toys
        self.bad: dict[str, str] = {}  # loc -> a word of the reason; pending until a replay takes it
        self.pos = 0

    def _env(self, op: str, table: str, before: dict | None, after: dict | None) -> str:
        self.pos += 10
        return json.dumps(envelope(op, table, before, after, pos=self.pos))

    def file_lines(self, lp: LakeProject, base: int) -> list[str]:
        """The lines of the next CDC file (keys base+1..base+3); records what is bad in it."""
        name = f"cdc/{lp._n + 1:04d}.json"
        lines = [
            self._env("c", "shop.people", None, {"id": base + 1, "age": "abc"}),  # 1: bad (age)
            self._env("c", "shop.people", None, {"id": base + 2, "age": 30}),
            self._env("c", "shop.people", None, {"id": base + 3, "age": 5}),
            self._env("d", "shop.people", {"id": base + 3, "age": 5}, None),
            self._env("c", "shop.pets", None, {"id": base + 1, "weight": "heavy"}),  # 5: bad (weight)
            self._env("c", "shop.pets", None, {"id": base + 2, "weight": 4}),
            "{not json",  # 7: bad (parse)
            self._env("c", "shop.toys", None, {"id": base + 1, "n": 3}),  # 8: undeclared; good after the fix
            self._env("c", "shop.toys", None, {"id": base + 2, "n": "x"}),  # 9: undeclared; bad (n) after the fix
        ]
        self.people[base + 2] = 30
        self.pets[base + 2] = 4
        self.toys_good[base + 1] = 3
        self.bad.update({f"{name}:1": "age", f"{name}:5": "weight", f"{name}:7": "json", f"{name}:8": "toys", f"{name}:9": "toys"})
        return lines


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[LakeProject, World]:
    return LakeProject(tmp_path_factory.mktemp("dl-crash"), TABLES), World()


def _lake(root: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "framework.cli", "--project", str(root), *args],
                            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _dead_letter(spark: Any, lp: LakeProject) -> dict[str, dict[str, Any]]:
    df = hudi.read(spark, lp.layout.dead_letter)
    cols = ["loc", "reason", "source_table"] + [c for c in ("replayed_at",) if c in df.columns]
    return {r["loc"]: r.asDict() for r in df.select(*cols).collect()}


def _rows(spark: Any, lp: LakeProject, table: str, col: str) -> dict[int, int]:
    return {r["id"]: r[col] for r in lp.raw(spark, table).select("id", col).collect()}


def _check_reason(loc: str, word: str, reason: str | None) -> None:
    r = (reason or "").lower()
    expected = {"age": "column age", "weight": "column weight", "json": "json", "toys": "shop.toys"}[word]
    assert expected in r, (loc, reason)


@pytest.mark.slow
@pytest.mark.parametrize("failpoint", FAILPOINTS)
def test_kill_at_each_failpoint_keeps_the_dead_letter(world: tuple[LakeProject, World], spark: Any, failpoint: str) -> None:
    """Issue 27 item 1: `{id: 7, age: "abc"}` with `columns: {age: int}`, killed between a table's
    commit and the dead letter, then rerun: the bad events are in the dead letter, exactly once."""
    lp, w = world
    base = 100 * (FAILPOINTS.index(failpoint) + 1)
    path = lp.write_cdc(w.file_lines(lp, base))
    proc = _lake(lp.root, "ingest", "--once", env={"LAKE_FAILPOINT": failpoint})
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, out
    lp.ingest(spark)  # the rerun (in this process: no second JVM to start)
    dl = _dead_letter(spark, lp)
    mine = {loc: r for loc, r in dl.items() if loc.startswith(f"cdc/{path.name}:")}
    expected = {loc: word for loc, word in w.bad.items() if loc.startswith(f"cdc/{path.name}:")}
    assert sorted(mine) == sorted(expected), (failpoint, dl)
    for loc, word in expected.items():
        _check_reason(loc, word, mine[loc]["reason"])
    # Nothing lost, nothing extra: the tables hold exactly the good rows of every file so far.
    assert _rows(spark, lp, "people", "age") == w.people
    assert _rows(spark, lp, "pets", "weight") == w.pets


@pytest.mark.slow
def test_replay_killed_after_a_table_commit_then_resumed_and_locked(world: tuple[LakeProject, World], spark: Any,
                                                                    tmp_path: Path) -> None:
    """A replay killed after it committed ods.toys keeps ods.toys' again-bad events pending (the
    `dead-letter replay` half of item 1); while it runs, a second replay is refused and names it
    (item 10); purge deletes replayed events only, unless --include-pending (item 9)."""
    lp, w = world
    lp.write_cdc(w.file_lines(lp, 900))
    lp.ingest(spark)
    (lp.root / "layers" / "ods" / "tables.yaml").write_text(FIXED)
    journal = lp.layout.lake.local / "dead_letter_replay.json"

    # Held once its journal is written (holding no table lock yet), then killed after ods.toys committed.
    proc = _lake(lp.root, "dead-letter", "replay", env={"LAKE_PAUSE": f"after_replay_journal:{tmp_path}",
                                                        "LAKE_FAILPOINT": "after_table_commit:1"})
    try:
        deadline = time.monotonic() + 240
        while not list(tmp_path.glob("after_replay_journal.*")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0] if proc.poll() is not None else "timeout"
            time.sleep(0.3)
        held = journal.read_text()
        second = CliRunner().invoke(main, ["--project", str(lp.root), "dead-letter", "replay", "--lock-timeout", "0"],
                                    env={"COLUMNS": "300"})
        assert second.exit_code == 1, second.output  # before the fix: it resumed the first one's journal and ran it
        flat = " ".join(second.output.split())
        assert "waits for another `lake dead-letter replay` or `purge`" in flat, flat
        assert f"dead-letter-replay is locked by pid {proc.pid}" in flat and f"kill {proc.pid}" in flat, flat
        assert journal.read_text() == held  # the running replay's journal is untouched
        (tmp_path / "go").touch()
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, out  # the failpoint: ods.toys committed, nothing marked
    assert journal.exists()

    resumed = CliRunner().invoke(main, ["--project", str(lp.root), "dead-letter", "replay", "--json"])
    assert resumed.exit_code == 0, resumed.output
    assert f"lock dead-letter-replay was left by pid {proc.pid}" in " ".join(resumed.stderr.split())  # taken over, said
    done = json.loads(resumed.stdout)
    pending = {loc for loc, word in w.bad.items() if not (word == "toys" and loc.endswith(":8"))}
    assert done[0]["resumed"] and done[0]["selected"] == len(w.bad), done
    assert done[0]["replayed"] == len(w.bad) - len(pending) and done[0]["failed_again"] == len(pending), done
    assert _rows(spark, lp, "toys", "n") == w.toys_good
    dl = _dead_letter(spark, lp)
    assert sorted(dl) == sorted(w.bad)
    assert sorted(loc for loc, r in dl.items() if r["replayed_at"] is None) == sorted(pending)
    for loc in pending:  # the again-bad toys events carry their new reason
        if w.bad[loc] == "toys":
            assert "column n" in dl[loc]["reason"], dl[loc]

    # Purge: the dry run counts both kinds; --yes takes the replayed ones only.
    cli = ["--project", str(lp.root), "dead-letter", "purge"]
    dry = CliRunner().invoke(main, cli, env={"COLUMNS": "300"})
    replayed = len(w.bad) - len(pending)
    assert dry.exit_code == 1 and f"{replayed} replayed and {len(pending)} pending events match" in dry.output, dry.output
    gone = CliRunner().invoke(main, [*cli, "--yes"], env={"COLUMNS": "300"})
    assert gone.exit_code == 0 and f"purged {replayed} events from the dead letter ({replayed} replayed, 0 pending)" in gone.output, gone.output
    assert sorted(_dead_letter(spark, lp)) == sorted(pending)
    toys = CliRunner().invoke(main, [*cli, "--table", "ods.toys", "--include-pending", "--yes"], env={"COLUMNS": "300"})
    toys_pending = [loc for loc in pending if w.bad[loc] == "toys"]
    assert toys.exit_code == 0 and f"(0 replayed, {len(toys_pending)} pending)" in toys.output, toys.output
    assert sorted(_dead_letter(spark, lp)) == sorted(set(pending) - set(toys_pending))
