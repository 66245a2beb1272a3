"""The file source: files read line by line (a big file is split across tasks), line numbers and
arrival order as the whole-file reader gave them, old files not skipped, over-long lines
dead-lettered."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from framework.table import hudi
from tests.helpers import LakeProject, envelope

USERS = "tables:\n  - {source: shop.users, key: [id]}\n"
DAY = 24 * 3600


def _put(lp: LakeProject, name: str, content: bytes, mtime: int) -> Path:
    path = lp.root / "cdc" / name
    path.write_bytes(content)
    os.utime(path, (mtime, mtime))
    return path


def whole_file_numbering(files: list[tuple[str, bytes, int]], batch_id: int) -> list[tuple[str, str, str]]:
    """(loc, arrival, value) of every message, numbered as the file source numbered them when it
    read each file whole: files by (mtime, path), lines of `content.split("\\n")` counted from 1
    blank ones included, CRs removed by Spark's `regexp_replace(value, "\\r$", "")` (Java's `$`
    also matches before a final line terminator, so "\\r\\r" loses both), blank lines skipped."""
    out = []
    ranked = sorted(files, key=lambda f: (f[2], f[0]))
    for idx, (name, content, _) in enumerate(ranked):
        for i, line in enumerate(content.decode().split("\n")):
            value = re.sub(r"\r(?=[\r\u0085\u2028\u2029]?\Z)", "", line)
            if value.strip(" ") == "":
                continue
            arrival = f"{batch_id:012d}{idx:06d}{i + 1:09d}"
            out.append((f"cdc/{name}:{i + 1}", arrival, value))
    return out


def test_file_older_than_the_newest_ingested_file_is_ingested(tmp_path: Path, spark: Any) -> None:
    """Spark's file source skips a new file more than `maxFileAge` (7 days by default) older than
    the newest file it has seen: a restored archive file would be dropped without a word."""
    lp = LakeProject(tmp_path, USERS)
    now = 1_700_000_000
    _put(lp, "new.json", (json.dumps(envelope("c", "shop.users", None, {"id": 1}, pos=10)) + "\n").encode(), now)
    lp.ingest(spark)
    _put(lp, "restored.json", (json.dumps(envelope("c", "shop.users", None, {"id": 2}, pos=5)) + "\n").encode(), now - 30 * DAY)
    s = lp.ingest(spark)
    assert s.events == 1
    assert lp.rows(spark, "users", ["id"]) == [{"id": 1}, {"id": 2}]


def test_locs_and_arrival_are_the_whole_file_numbering(tmp_path: Path, spark: Any) -> None:
    """Blank lines count, CRLF ends and a CR inside a line are as before (only LF ends a line)."""
    lp = LakeProject(tmp_path, USERS)
    ok = [json.dumps(envelope("c", "shop.users", None, {"id": i}, pos=i)) for i in range(1, 5)]
    a = "\r\n".join([ok[0], "", "{oops", "   ", ok[1], "{cr\rinside}", "\r", ok[2], ""]).encode()
    b = "\n".join(["", "", '{"no": "op"}', ok[3], "{trailing", ""]).encode() + b"{no newline at end"
    # b is older than a though its name sorts later: files are numbered by (mtime, name).
    files = [("a.json", a, 1_700_000_100), ("b.json", b, 1_700_000_000)]
    for name, content, mtime in files:
        _put(lp, name, content, mtime)
    s = lp.ingest(spark)
    assert [b.batch_id for b in s.batches] == [0]
    dead = hudi.read(spark, lp.layout.dead_letter).select("loc", "_seq", "raw").collect()
    rows = lp.raw(spark, "users").select("_source", "_seq").collect()
    got = sorted([(r.loc, r._seq, r.raw) for r in dead] + [(r._source, r._seq[-27:], None) for r in rows])
    expected = sorted((loc, arrival, None if value in ok else value) for loc, arrival, value in whole_file_numbering(files, 0))
    assert got == expected


def test_big_file_split_across_tasks_keeps_line_numbers_and_order(tmp_path: Path, spark: Any) -> None:
    """A file bigger than a split is read by several tasks; every line keeps its number, and of
    events at the same source position the later line wins, across split boundaries too."""
    lp = LakeProject(tmp_path, USERS)
    lines = []
    for n in range(1, 100_001):
        if n % 997 == 0:
            lines.append("")  # blank lines still count
            continue
        # Same position for all: arrival (the line) decides which event of a key is the latest.
        lines.append(json.dumps({"op": "c", "after": {"id": n // 100, "n": n}, "source": {"db": "shop", "table": "users", "ts_ms": 1}}, separators=(",", ":")))
    content = ("\n".join(lines) + "\n").encode()
    path = _put(lp, "big.json", content, 1_700_000_000)
    last: dict[int, int] = {}
    for i, line in enumerate(content.decode().split("\n")):
        if line:
            last[json.loads(line)["after"]["id"]] = i + 1
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(512 * 1024))
    try:
        splits = spark.read.text(str(path)).rdd.getNumPartitions()
        s = lp.ingest(spark)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert splits >= 10, splits  # the test reads the file in many splits
    assert s.events == len([x for x in lines if x])
    rows = lp.raw(spark, "users").select("id", "n", "_source", "_seq").collect()
    got = {r.id: (r.n, r._source, r._seq[-9:]) for r in rows}
    assert got == {k: (n, f"cdc/big.json:{n}", f"{n:09d}") for k, n in last.items()}


def test_line_longer_than_max_line_bytes_goes_to_the_dead_letter(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, USERS, lake_extra="ods:\n  source: {kind: files, path: cdc, max_line_bytes: 2000}\n")
    long = json.dumps(envelope("c", "shop.users", None, {"id": 2, "blob": "x" * 5000}, pos=2))
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1}, pos=1), long, envelope("c", "shop.users", None, {"id": 3}, pos=3)], name="f.json")
    s = lp.ingest(spark)
    assert s.dead_letter == 1
    assert lp.rows(spark, "users", ["id"]) == [{"id": 1}, {"id": 3}]
    (d,) = lp.dead_letters(spark)
    assert d["loc"] == "cdc/f.json:2"
    too_long = f"line too long ({len(long.encode())} bytes > ods.source.max_line_bytes 2000)"
    assert d["raw"].startswith(f"lake: {too_long}; it begins: ")
    assert d["reason"] == too_long
    assert long[:100] in d["raw"] and len(d["raw"]) < 1200
