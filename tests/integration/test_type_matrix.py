"""Every type a Debezium connector emits, across the boundaries where types are read back.

A first ingest writes the table; every later `lake` process knows the table's types only from what
Hudi stored (Avro: no 8- or 16-bit integers, so SMALLINT comes back as INT). So each step here is a
new process: a first `lake ingest --once` (a bulk insert into COW, a delta commit into MOR), a second
one with a widened column (and an inline compaction of the merge-on-read table), `lake run
--continuous` building a model incrementally, `lake sql`, and `lake ingest --rebuild`. After each, an outside reader (this session's
Spark, reading the Hudi paths without lake) and the lake process itself must see exactly the
oracle's rows (tests/type_matrix.py), and nothing may be dead-lettered.

In the suite the first ingest, `lake sql` and the rebuild run on the worker's warm engine (a fresh
session each: what the table holds is read from Hudi, nothing is remembered from the command
before); the second ingest (`lake run --once`) and `lake run --continuous` run in processes of
their own, which must read the types back from the tables earlier commands wrote (the SMALLINT of
issue 40 was dead-lettered there)."""

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

from tests.helpers import LakeProject
from tests.type_matrix import CASES, WIDENED, TypedSource, comparable, select_sql

pytestmark = pytest.mark.slow

TABLES = ("types_cow", "types_mor")
ODS = """tables:
  - {source: src.types_cow, key: [id]}
  - {source: src.types_mor, key: [id], type: mor, compact_every: 2}
"""


def _model() -> dict[str, str]:
    cols = ", ".join(["id", WIDENED[0], *(f"`{c.column}`" for c in CASES)])
    return {"dwd/types_copy.sql": f"select {cols} from ods.types_cow", "dwd/types_copy.yaml": "key: [id]\n"}


def lake(root: Path, *args: str, new_process: bool = False) -> str:
    """`lake` in a subprocess (on the worker's engine, a fresh session); `new_process`: its own driver."""
    env = {**os.environ, "COLUMNS": "200", **({"LAKE_ENGINE": "off"} if new_process else {})}
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), *args], capture_output=True, text=True,
                       env=env, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Internal error" not in out and "Traceback" not in out, f"lake {' '.join(args)}: exit {r.returncode}\n{out}"
    return r.stdout


def _outside(spark: Any, path: str) -> list[dict[str, Any]]:
    """The live rows as a Spark session without lake reads them from the table's path."""
    view = f"outside_{abs(hash(path))}"
    spark.read.format("hudi").load(path).createOrReplaceTempView(view)
    return sorted((comparable(r.asDict()) for r in spark.sql(select_sql(view)).collect()), key=lambda r: r["id"])


def _assert_rows(got: list[dict[str, Any]], want: list[dict[str, Any]], where: str) -> None:
    assert [r["id"] for r in got] == [r["id"] for r in want], where
    for g, w in zip(got, want, strict=True):
        diff = {k: (g.get(k), v) for k, v in w.items() if g.get(k) != v}
        assert not diff, f"{where}, row {w['id']}: (read, expected) {diff}"


def _check(spark: Any, lp: LakeProject, sources: dict[str, TypedSource], where: str) -> None:
    dead = [(d["source_table"], d["reason"]) for d in lp.dead_letters(spark)]
    assert not dead, f"{where}: dead letters {dead}"
    for name, src in sources.items():
        _assert_rows(_outside(spark, str(lp.layout.table(f"ods.{name}"))), src.expected(), f"{where}: ods.{name}, outside reader")


def _batch(lp: LakeProject, sources: dict[str, TypedSource], step: Any) -> None:
    lp.write_cdc([e for src in sources.values() for e in step(src)])


def _continuous_until(root: Path, done: Any, timeout: float = 600) -> None:
    """`lake run --continuous` in its own process until `done()`, then SIGTERM: it must stop cleanly."""
    proc = subprocess.Popen([sys.executable, "-m", "framework.cli", "--project", str(root), "run", "--continuous", "--trigger", "2s"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "200"})
    try:
        deadline = time.monotonic() + timeout
        while not done():
            assert proc.poll() is None, f"lake run --continuous exited {proc.returncode}: {proc.stdout.read() if proc.stdout else ''}"
            assert time.monotonic() < deadline, "lake run --continuous did not ingest the batch in time"
            time.sleep(3)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "Internal error" not in out and "Traceback" not in out, out


def test_every_connector_type_across_processes(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, ODS).add_models(_model())
    sources = {name: TypedSource("src", name) for name in TABLES}

    # 1. The first load: a bulk insert (COW) and a first delta commit (MOR), every value set and NULLs.
    _batch(lp, sources, lambda s: [s.put(rid, rid - 1) for rid in (1, 2, 3, 4)])
    lake(tmp_path, "ingest", "--once")
    _check(spark, lp, sources, "first ingest")

    # 2. A new process: types come back from the table (SMALLINT as INT); updates, an insert, a
    # delete, and the source widening `w` SMALLINT -> INT.
    def second(s: TypedSource) -> list[dict[str, Any]]:
        s.widen()
        return [s.put(1, 1), s.put(5, 2), s.delete(2), s.put(3, 0)]

    _batch(lp, sources, second)
    lake(tmp_path, "run", "--once", new_process=True)  # ingest, then the model's first build
    _check(spark, lp, sources, "second ingest, new process")
    _assert_rows(_outside(spark, str(lp.layout.table("dwd.types_copy"))), sources["types_cow"].expected(), "model, full build")

    # 3. `lake run --continuous` (ingest and an incremental build each cycle), stopped once it has
    # the batch; the widening INT -> BIGINT arrives with it.
    def third(s: TypedSource) -> list[dict[str, Any]]:
        s.widen()
        return [s.put(6, 1), s.put(4, 2), s.put(3, 3), s.delete(5)]

    _batch(lp, sources, third)

    def ingested() -> bool:
        try:
            return all([r["id"] for r in _outside(spark, str(lp.layout.table(t)))] == [1, 3, 4, 6]
                       for t in ("ods.types_mor", "dwd.types_copy"))
        except Exception:  # noqa: BLE001 - not written yet
            return False

    _continuous_until(tmp_path, ingested)
    _check(spark, lp, sources, "lake run --continuous")
    _assert_rows(_outside(spark, str(lp.layout.table("dwd.types_copy"))), sources["types_cow"].expected(), "model, incremental")

    # The merge-on-read table compacted inline (every 2 delta commits): values unchanged above,
    # read from base files written by the compaction and from the log files written after it.
    timeline = Path(str(lp.layout.table("ods.types_mor"))) / ".hoodie" / "timeline"
    assert any(f.name.endswith(".commit") for f in timeline.iterdir()), sorted(f.name for f in timeline.iterdir())

    # 4. lake's own reader, in a new process: both tables and the model in one query.
    query = " UNION ALL ".join(f"SELECT '{t}' AS t, * FROM ({select_sql(t)})" for t in ("ods.types_cow", "ods.types_mor", "dwd.types_copy"))
    got = json.loads(lake(tmp_path, "sql", "--format", "json", "--limit", "1000", query))
    for t, want in (("ods.types_cow", sources["types_cow"]), ("ods.types_mor", sources["types_mor"]), ("dwd.types_copy", sources["types_cow"])):
        rows = sorted((comparable({k: v for k, v in r.items() if k != "t"}) for r in got if r["t"] == t), key=lambda r: r["id"])
        _assert_rows(rows, want.expected(), f"lake sql {t}")

    # 5. The table written anew from the CDC the source still holds.
    lake(tmp_path, "ingest", "--rebuild", "ods.types_cow")
    _check(spark, lp, sources, "after lake ingest --rebuild")
