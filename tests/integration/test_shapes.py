"""Shapes that grow, in a driver of bounded memory: a first load and a rebuild into 300
partitions, a wide table (300+ columns), long strings and large binary values.

Each runs `lake` in its own process with a small driver heap (LAKE_DRIVER_MEMORY), as a user's job
would meet them on day one: the bulk insert of a first load once kept a Parquet writer open for
every partition a task met and ran a 4 GB driver out of memory at 1,284 partitions. Here 300
partitions go through a 512 MB driver (Spark's smallest: it refuses less), where that code died
(checked, as it did with 600 and 1,100 partitions in 512 MB and 2,100 in 1 GB), and so does a
rebuild of the table; 2,100 partitions passed in a 1 GB driver by hand (CHANGELOG). Each partition
costs a local Hudi write about five forked `chmod`s (docs/limits.md), so more are too slow here."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import LakeProject, envelope

pytestmark = pytest.mark.slow

HEAP = "512m"


def lake(root: Path, *args: str, heap: str = HEAP) -> str:
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), *args], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "200", "LAKE_DRIVER_MEMORY": heap}, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Internal error" not in out and "Traceback" not in out, f"lake {' '.join(args)}: exit {r.returncode}\n{out}"
    return r.stdout


def test_first_load_and_rebuild_into_300_partitions(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, """\
        tables:
          - source: shop.events
            key: [id]
            partition_by: {column: created, granularity: day}
            columns: {id: bigint, created: date, note: string}
        """)
    start, days = date(2020, 1, 1), 300
    rows = {i: ((start + timedelta(days=i % days)).isoformat(), f"n{i}") for i in range(3 * days)}
    lp.write_cdc([envelope("c", "shop.events", None, {"id": i, "created": c, "note": n}, pos=i + 1) for i, (c, n) in rows.items()])
    lake(tmp_path, "ingest", "--once")
    table = str(lp.layout.table("ods.events"))

    def check() -> None:
        df = spark.read.format("hudi").load(table)
        got = {r["id"]: (r["created"].isoformat(), r["note"]) for r in df.select("id", "created", "note").collect()}
        assert got == rows
        assert df.select("dt").distinct().count() == days
    check()
    lake(tmp_path, "ingest", "--rebuild", "ods.events")
    check()


def test_wide_table_with_long_values(tmp_path: Path, spark: Any) -> None:
    """320 columns, 1 MiB strings and 2 MiB binary values (4 MB messages), through a first load and
    an upsert, in a 2 GB driver. A micro-batch of them needs about 1 GB (it failed now and then
    in 1 GB, always in 512 MB, with the message tests/integration/test_jvm_death.py checks): Parquet
    buffers a whole row group in memory and copies it when it closes the file."""
    width = 320
    cols = {f"c{i:03d}": "string" for i in range(width)}
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.wide, key: [id]}\n")
    big_text = "ü" * (1 << 19) + "x" * (1 << 19)
    blob = os.urandom(2 << 20)

    def row(i: int, salt: str) -> dict[str, Any]:
        return {"id": i, **{c: f"{salt}{i}{c}" for c in cols}, "big": big_text if i % 2 == 0 else salt, "blob": base64.b64encode(blob).decode()}

    fields = [{"type": "int64", "optional": False, "field": "id"}] + [{"type": "string", "optional": True, "field": c} for c in cols]
    fields += [{"type": "string", "optional": True, "field": "big"}, {"type": "bytes", "optional": True, "field": "blob"}]

    def event(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, pos: int) -> dict[str, Any]:
        image = {"type": "struct", "optional": True, "fields": fields}
        schema = {"type": "struct", "fields": [{**image, "field": "before"}, {**image, "field": "after"}, {"type": "string", "field": "op"}]}
        return {"schema": schema, "payload": envelope(op, "shop.wide", before, after, pos=pos)}

    first = {i: row(i, "a") for i in range(12)}
    lp.write_cdc([event("c", None, r, i + 1) for i, r in first.items()])
    lake(tmp_path, "ingest", "--once", heap="2g")
    second = {i: row(i, "b") for i in range(0, 12, 3)}
    lp.write_cdc([event("u", first[i], r, 100 + i) for i, r in second.items()])
    lake(tmp_path, "ingest", "--once", heap="2g")
    want = {**first, **second}
    df = spark.read.format("hudi").load(str(lp.layout.table("ods.wide")))
    assert len([c for c in df.columns if not c.startswith("_")]) == width + 3
    got = {r["id"]: r.asDict() for r in df.select("id", "c000", "c319", "big", "blob").collect()}
    assert sorted(got) == sorted(want)
    for i, w in want.items():
        g = got[i]
        assert (g["c000"], g["c319"], g["big"]) == (w["c000"], w["c319"], w["big"]), i
        assert bytes(g["blob"]) == blob, i
