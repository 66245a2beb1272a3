"""ODS ingest throughput: `run_ingest` over N Debezium events vs a plain JSON -> Parquet job and
vs the job a user writes by hand (seed 004's pattern), measured in the same run.

    .venv/bin/python benchmarks/ods_ingest.py [--events N] [--tables 3] [--files 20] [--grow ROWS] [--out BENCHMARKS.md]

The default (200k events, no --grow) runs in ~3-5 minutes on a quiet 2-core machine; the figures
of issue 19 used `--events 1000000` (and `--grow 100000` for goal 1, which adds two base loads).

Steps (one Python process, one SparkSession, everything under one temporary directory):

1. generate N bare Debezium MySQL envelopes (75% c, 20% u, 5% d; updates and deletes pick live
   keys) over the tables into `cdc/` as JSON lines (not measured, timed separately);
2. warm up the JVM with a tiny ingest and a tiny JSON -> Parquet write in a second project;
3. A: wall time of `run_ingest(spark, project)` (= `lake ingest --once` without process and JVM
   start-up); then the live rows of each ODS table are checked against the generator's state;
4. B (the ceiling): `spark.read.json` of the same files, select op + row image, write Parquet
   partitioned by table;
5. C (the peer): seed 004's hand-written job over the same files (`naive_job`): Structured
   Streaming, `foreachBatch`, `from_json` per table on its known schema, a filter per table,
   `_hoodie_is_deleted` for op=d, a Hudi upsert with precombine `ts_ms`, lake's table type,
   index and CDC log options (`naive_options`); its live rows are checked too;
6. with --grow ROWS: --grow-events new events as a second micro-batch into tables built from
   ROWS and 10x ROWS events (goal 1: the time should not follow the table);
7. print the figures and, with --out, replace this benchmark's section of BENCHMARKS.md.

Where A's time goes is measured by wrapping the writer's steps (monkeypatched here, the engine
is not modified) and by Spark's event log (each Spark job is attributed to the step it ran in).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._common import (  # noqa: E402 - after the sys.path set-up above
    CpuMark,
    Phases,
    jvm_peak_rss,
    machine_info,
    read_event_log,
    write_markdown,
)

SECTION = "## ODS ingest (benchmarks/ods_ingest.py)"

# --------------------------------------------------------------------------- tables
FIRST = ["Ana", "Ben", "Chen", "Dana", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Julia", "Kofi", "Lena", "Mateo", "Nina", "Omar", "Priya"]
LAST = ["Smith", "Garcia", "Wang", "Muller", "Rossi", "Kowalski", "Novak", "Silva", "Tanaka", "Okafor", "Ivanova", "Dubois"]
COUNTRIES = ["US", "DE", "FR", "CN", "BR", "IN", "JP", "PL", "NG", "ES"]
SEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"]
STATUSES = ["NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"]
CURRENCIES = ["USD", "EUR", "CNY", "GBP"]
CATEGORIES = ["books", "garden", "kitchen", "toys", "sports", "tools", "music"]
NOUNS = ["lamp", "chair", "kettle", "drill", "ball", "guitar", "novel", "hose", "puzzle", "pan"]
ADJS = ["red", "compact", "deluxe", "classic", "smart", "eco", "mini", "pro"]


@dataclass(frozen=True)
class TableDef:
    db: str
    name: str
    weight: float
    columns: dict[str, str]  # declared types of the columns that need one (decimal, timestamps)
    partition_column: str | None = None

    @property
    def source(self) -> str:
        return f"{self.db}.{self.name}"


ALL_TABLES = [
    TableDef("shop", "orders", 0.5, {"amount": "decimal(12,2)", "created_at": "timestamp", "updated_at": "timestamp"}, "created_at"),
    TableDef("shop", "customers", 0.25, {"credit_limit": "decimal(12,2)", "created_at": "timestamp", "updated_at": "timestamp"}),
    TableDef("shop", "products", 0.25, {"price": "decimal(10,2)", "created_at": "timestamp", "updated_at": "timestamp"}),
]

# The union of all image columns, typed, for the plain Spark job (B).
B_IMAGE_COLUMNS = [
    ("id", "bigint"), ("customer_id", "bigint"), ("status", "string"), ("quantity", "int"),
    ("amount", "decimal(12,2)"), ("currency", "string"), ("name", "string"), ("email", "string"),
    ("country", "string"), ("segment", "string"), ("credit_limit", "decimal(12,2)"), ("sku", "string"),
    ("category", "string"), ("price", "decimal(10,2)"), ("stock", "int"),
    ("created_at", "string"), ("updated_at", "string"),
]


# --------------------------------------------------------------------------- generator
@dataclass
class TableState:
    next_id: int = 1
    images: dict[int, str] = field(default_factory=dict)  # live key -> JSON text of its row
    keys: list[int] = field(default_factory=list)  # live keys, for O(1) random choice
    pos_of: dict[int, int] = field(default_factory=dict)  # key -> index in `keys`
    inserted: int = 0
    ops: dict[str, int] = field(default_factory=lambda: {"c": 0, "u": 0, "d": 0})

    def add(self, k: int, image: str) -> None:
        self.images[k] = image
        self.pos_of[k] = len(self.keys)
        self.keys.append(k)

    def remove(self, k: int) -> None:
        i = self.pos_of.pop(k)
        last = self.keys.pop()
        if last != k:
            self.keys[i] = last
            self.pos_of[last] = i
        del self.images[k]


class Generator:
    """Random CDC traffic over the tables; knows the final live rows of every table."""

    def __init__(self, tables: list[TableDef], seed: int) -> None:
        self.tables = tables
        self.rng = random.Random(seed)
        self.state = {t.name: TableState() for t in tables}
        self.names = [t.name for t in tables]
        self.weights = [t.weight for t in tables]
        self.pos = 4  # binlog position of the last event written

    def _insert_row(self, table: str, k: int, ts: str) -> dict[str, Any]:
        rng = self.rng
        if table == "orders":
            customers = self.state.get("customers")
            top = customers.next_id - 1 if customers and customers.next_id > 1 else 1000
            return {
                "id": k, "customer_id": rng.randint(1, top), "status": "NEW", "quantity": rng.randint(1, 9),
                "amount": rng.randint(100, 500_000) / 100, "currency": rng.choice(CURRENCIES),
                "created_at": ts, "updated_at": ts,
            }
        if table == "customers":
            first, last = rng.choice(FIRST), rng.choice(LAST)
            return {
                "id": k, "name": f"{first} {last}", "email": f"{first}.{last}{k}@example.com".lower(),
                "country": rng.choice(COUNTRIES), "segment": rng.choice(SEGMENTS),
                "credit_limit": rng.randint(0, 10_000_000) / 100, "created_at": ts, "updated_at": ts,
            }
        return {
            "id": k, "sku": f"SKU-{k:08d}", "name": f"{rng.choice(ADJS)} {rng.choice(NOUNS)}",
            "category": rng.choice(CATEGORIES), "price": rng.randint(99, 99_999) / 100,
            "stock": rng.randint(0, 500), "created_at": ts, "updated_at": ts,
        }

    def _mutate(self, table: str, row: dict[str, Any], ts: str) -> None:
        rng = self.rng
        if table == "orders":
            row["status"] = rng.choice(STATUSES[1:])
            if rng.random() < 0.3:
                row["quantity"] = rng.randint(1, 9)
                row["amount"] = rng.randint(100, 500_000) / 100
        elif table == "customers":
            if rng.random() < 0.5:
                row["segment"] = rng.choice(SEGMENTS)
            else:
                row["credit_limit"] = rng.randint(0, 10_000_000) / 100
        else:
            row["stock"] = rng.randint(0, 500)
            if rng.random() < 0.3:
                row["price"] = rng.randint(99, 99_999) / 100
        row["updated_at"] = ts

    def write(self, n: int, cdc: Path, files: int, start_ms: int = 1_704_067_200_000, span_ms: int = 365 * 86_400_000,
              first_file: int = 0) -> int:
        """Write `n` envelopes over `files` files in `cdc` (numbered from `first_file`); returns the bytes written."""
        rng = self.rng
        dumps = json.dumps
        files = max(1, min(files, n))
        db = self.tables[0].db
        pos = self.pos
        written = 0
        tops = [round(n * (i + 1) / files) for i in range(files)]
        fi = 0
        out: list[str] = []
        for i in range(n):
            ts_ms = start_ms + (i * span_ms) // n
            ts = datetime.fromtimestamp(ts_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            pos += rng.randint(150, 900)
            table = rng.choices(self.names, self.weights)[0]
            st = self.state[table]
            r = rng.random()
            op = "c" if r < 0.75 or not st.keys else ("u" if r < 0.95 else "d")
            if op == "c":
                k = st.next_id
                st.next_id += 1
                st.inserted += 1
                after = dumps(self._insert_row(table, k, ts))
                st.add(k, after)
                before = "null"
            else:
                k = st.keys[rng.randrange(len(st.keys))]
                before = st.images[k]
                if op == "u":
                    row = json.loads(before)
                    self._mutate(table, row, ts)
                    after = dumps(row)
                    st.images[k] = after
                else:
                    after = "null"
                    st.remove(k)
            st.ops[op] += 1
            source = dumps({
                "version": "2.5.0.Final", "connector": "mysql", "name": "bench", "ts_ms": ts_ms,
                "snapshot": "false", "db": db, "table": table, "file": "mysql-bin.000001", "pos": pos, "row": 0,
            })
            out.append(f'{{"before": {before}, "after": {after}, "source": {source}, "op": "{op}", "ts_ms": {ts_ms + 5}}}')
            if i + 1 == tops[fi]:
                written += self._flush(cdc, first_file + fi, out)
                out = []
                fi += 1
        self.pos = pos
        return written

    @staticmethod
    def _flush(cdc: Path, index: int, lines: list[str]) -> int:
        path = cdc / f"{index:05d}.json"
        text = "\n".join(lines) + "\n"
        path.write_text(text)
        t = 1_700_000_000 + index * 10  # mtimes increase with the file number: arrival = write order
        os.utime(path, (t, t))
        return len(text)

    def expected(self) -> dict[str, tuple[int, int]]:
        """Per table: (live rows, distinct keys ever inserted)."""
        return {name: (len(st.keys), st.inserted) for name, st in self.state.items()}

    def op_counts(self) -> dict[str, int]:
        total = {"c": 0, "u": 0, "d": 0}
        for st in self.state.values():
            for k, v in st.ops.items():
                total[k] += v
        return total


def make_project(root: Path, tables: list[TableDef], name: str = "bench") -> None:
    (root / "layers" / "ods").mkdir(parents=True, exist_ok=True)
    (root / "cdc").mkdir(exist_ok=True)
    (root / "lake.yaml").write_text(f'name: {name}\nwarehouse: warehouse\nspark: {{master: "local[2]"}}\n')
    lines = ["tables:"]
    for t in tables:
        cols = ", ".join(f'{k}: "{v}"' for k, v in t.columns.items())
        lines.append(f"  - source: {t.source}")
        lines.append("    key: [id]")
        lines.append(f"    columns: {{{cols}}}")
        if t.partition_column:
            lines.append(f"    partition_by: {{column: {t.partition_column}, granularity: month}}")
    (root / "layers" / "ods" / "bench.yaml").write_text("\n".join(lines) + "\n")



def instrument(spark: Any, phases: Phases) -> None:
    """Wrap the ODS writer's steps with timers (in this process only; no engine file changes).

    Each step also becomes the Spark job description of the jobs it submits (Hudi replaces it
    with its own inside the write), so the event log names lake's own jobs."""
    from framework.ods import batch as batch_mod
    from framework.ods import ingest as ingest_mod
    from framework.table import hudi

    sc = spark.sparkContext

    def wrap(owner: Any, attr: str, label: Callable[..., str]) -> None:
        original = getattr(owner, attr)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            name = label(*args, **kwargs)
            previous = sc.getLocalProperty("spark.job.description")
            sc.setLocalProperty("spark.job.description", f"bench step: {name}")
            try:
                with phases.phase(name):
                    return original(*args, **kwargs)
            finally:
                sc.setLocalProperty("spark.job.description", previous)

        setattr(owner, attr, wrapper)

    from framework.ods import commit as commit_mod
    from framework.ods import prepare as prepare_mod

    W = batch_mod.OdsBatchWriter
    wrap(ingest_mod.FileSource, "messages", lambda *a, **k: "split files into lines (messages)")
    wrap(W, "process", lambda *a, **k: "parse + classify (envelopes, auto_create, keys)")
    wrap(batch_mod, "summarize", lambda *a, **k: "parse (first action on the batch's cache) + batch summary (collect)")
    wrap(W, "_state", lambda self, t: f"{t.table_name}: table state (timeline)")
    wrap(prepare_mod, "resolve_columns", lambda parsed, t, *a: f"{t.table_name}: resolve column types")
    wrap(batch_mod, "prepare", lambda ctx, parsed, t, *a: f"{t.table_name}: decode + persist + counts")
    wrap(commit_mod, "write_table", lambda ctx, p, *a: f"{p.table.table_name}: tombstones + commit")
    wrap(batch_mod, "write_dead_letter", lambda *a, **k: "dead letter (isEmpty check / write)")
    def hudi_label(df: Any, path: Any, *a: Any) -> str:
        name = str(path).rstrip("/").rsplit("/", 1)[-1]
        if "/tombstones/" in str(path):  # _lake/tombstones/ods_<table>
            return f"{name.removeprefix('ods_')}: tombstone table upsert"
        return f"{name}: Hudi upsert (+CDC log, commit)"

    wrap(hudi, "write", hudi_label)


# --------------------------------------------------------------------------- the two jobs
def ingest(spark: Any, root: Path) -> Any:
    from framework.ods.ingest import run_ingest
    from framework.project.config import load_project

    return run_ingest(spark, load_project(root))


def plain_json_to_parquet(spark: Any, cdc: Path, out: Path) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    image = T.StructType([T.StructField(n, T._parse_datatype_string(t)) for n, t in B_IMAGE_COLUMNS])
    source = T.StructType([
        T.StructField("db", T.StringType()), T.StructField("table", T.StringType()),
        T.StructField("file", T.StringType()), T.StructField("pos", T.LongType()),
        T.StructField("row", T.IntegerType()), T.StructField("ts_ms", T.LongType()),
    ])
    schema = T.StructType([
        T.StructField("before", image), T.StructField("after", image), T.StructField("source", source),
        T.StructField("op", T.StringType()), T.StructField("ts_ms", T.LongType()),
    ])
    df = spark.read.schema(schema).json(str(cdc))
    img = F.when(F.col("op") == "d", F.col("before")).otherwise(F.col("after"))
    cols = [
        (img[n].cast("timestamp") if n in ("created_at", "updated_at") else img[n]).alias(n)
        for n, _ in B_IMAGE_COLUMNS
    ]
    out_df = df.select(
        F.col("op"), F.col("source.table").alias("table"), F.col("source.pos").alias("pos"),
        F.col("ts_ms"), *cols,
    )
    out_df.write.mode("overwrite").partitionBy("table").parquet(str(out))


# The naive job's known schema of each table's row image (what a user declares in code).
C_SCHEMAS = {
    "orders": "id bigint, customer_id bigint, status string, quantity int, amount decimal(12,2), currency string, "
              "created_at timestamp, updated_at timestamp",
    "customers": "id bigint, name string, email string, country string, segment string, credit_limit decimal(12,2), "
                 "created_at timestamp, updated_at timestamp",
    "products": "id bigint, sku string, name string, category string, price decimal(10,2), stock int, "
                "created_at timestamp, updated_at timestamp",
}


def naive_options(t: TableDef) -> dict[str, str]:
    """The Hudi options of the hand-written job: seed 004's (record key, precombine field, upsert,
    the table's partition) plus what makes its tables the same as lake's by default, so that the
    comparison measures lake's own work and not a cheaper Hudi set-up: copy-on-write, the SIMPLE
    index (GLOBAL_SIMPLE with partition moves for the partitioned table), the CDC log with before
    and after images, no metadata table, no bloom filters, shuffle parallelism 2 (local[2])."""
    part = "year_month" if t.partition_column else ""
    opts = {
        "hoodie.table.name": t.name,
        "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts_ms",
        "hoodie.datasource.write.partitionpath.field": part,
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen."
        + ("SimpleKeyGenerator" if part else "NonpartitionedKeyGenerator"),
        "hoodie.index.type": "GLOBAL_SIMPLE" if part else "SIMPLE",
        "hoodie.simple.index.update.partition.path": "true",
        "hoodie.table.cdc.enabled": "true",
        "hoodie.table.cdc.supplemental.logging.mode": "DATA_BEFORE_AFTER",
        "hoodie.metadata.enable": "false",
        "hoodie.embed.timeline.server": "false",
        "hoodie.parquet.bloom.filter.enabled": "false",
        "hoodie.upsert.shuffle.parallelism": "2",
        "hoodie.insert.shuffle.parallelism": "2",
    }
    # Table type and index follow lake's defaults for the same table, whatever they are today.
    from framework.table import hudi

    lake = hudi.write_options(name=t.name, key=["id"], ordering="_seq", partition=part or None)
    opts.update({k: v for k, v in lake.items() if k == "hoodie.datasource.write.table.type"
                 or k.startswith(("hoodie.index.", "hoodie.bucket.", "hoodie.simple.index.", "hoodie.compact."))})
    return opts


def naive_job(spark: Any, tables: list[TableDef], cdc: Path, out: Path) -> None:
    """C: the job a user writes by hand, seed 004's pattern (Debezium2Hudi): one Structured
    Streaming query over the CDC files (available-now), `foreachBatch`, per table a filter on
    `source.table`, `from_json` of the row image with the table's known schema, `_hoodie_is_deleted`
    for op=d, and a Hudi upsert with precombine field `ts_ms`. No ordering by source position, no
    resurrection guard, no dead letter, no schema evolution."""
    from pyspark.sql import functions as F

    envelope = "before string, after string, op string, ts_ms bigint, source struct<db:string,table:string>"

    def handle(batch: Any, batch_id: int) -> None:
        env = batch.select(F.from_json("value", envelope).alias("e")).select("e.*")
        for t in tables:
            mine = env.where((F.col("source.db") == t.db) & (F.col("source.table") == t.name))
            if mine.isEmpty():  # as the seed does
                continue
            image = F.when(F.col("op") == "d", F.col("before")).otherwise(F.col("after"))
            rows = mine.select(F.from_json(image, C_SCHEMAS[t.name]).alias("r"), "ts_ms", "op").select(
                "r.*", "ts_ms", (F.col("op") == "d").alias("_hoodie_is_deleted"))
            if t.partition_column:
                rows = rows.withColumn("year_month", F.date_format(t.partition_column, "yyyy-MM"))
            rows.write.format("hudi").options(**naive_options(t)).mode("append").save(str(out / t.name))

    q = (spark.readStream.format("text").load(str(cdc)).writeStream.foreachBatch(handle)
         .option("checkpointLocation", str(out / "_checkpoint")).trigger(availableNow=True).start())
    q.awaitTermination()


def live_rows(spark: Any, path: Path) -> int:
    return int(spark.read.format("hudi").load(str(path)).count())


def grow(spark: Any, tables: list[TableDef], tmp: Path, args: Any, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Goal 1 in the steady state, side by side: per table size (built from `--grow` and 10x
    `--grow` events), lake and the hand-written job C each build their own tables from the same
    base events (timed, reported apart), then each count of `--grow-events` new events is one
    more micro-batch, taken by lake, then by C (each timed; both checked against the generator).
    Entries are ordered by event count, then size: the first two are the growth of goal 1."""
    out: list[dict[str, Any]] = []
    counts = [int(x) for x in str(args.grow_events).split(",")]
    for size in (args.grow, args.grow * 10):
        root = tmp / f"grow-{size}"
        make_project(root, tables, f"grow{size}")
        gen = Generator(tables, args.seed + 7)
        gen.write(size, root / "cdc", args.files)
        t0 = time.perf_counter()
        ingest(spark, root)
        base_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        naive_job(spark, tables, root / "cdc", root / "naive")
        base_c = time.perf_counter() - t0
        say(f"grow: base of {size:,} events: lake {base_s:.1f} s, C {base_c:.1f} s")
        day = 86_400_000
        for i, events in enumerate(counts):
            rows = sum(live for live, _ in gen.expected().values())
            gen.write(events, root / "cdc", 1, start_ms=1_704_067_200_000 + (366 + i) * day, span_ms=day, first_file=args.files + i)
            spark.catalog.clearCache()
            t0, cpu0 = time.perf_counter(), CpuMark.now()
            run = ingest(spark, root)
            secs = time.perf_counter() - t0
            others = CpuMark.now().cores_since(cpu0)[1]
            t0 = time.perf_counter()
            naive_job(spark, tables, root / "cdc", root / "naive")
            c_secs = time.perf_counter() - t0
            say(f"grow: {events:,} events into {rows:,} live rows: lake {secs:.1f} s, C {c_secs:.1f} s (C/lake {c_secs / secs:.2f}); "
                f"status {run.status}, {sum(b.events for b in run.batches):,} events; other processes {others:.2f} cores")
            for name, (live, _total) in gen.expected().items():
                for who, path in (("lake", root / "warehouse" / "ods" / name), ("C", root / "naive" / name)):
                    got = live_rows(spark, path)
                    if got != live:
                        raise SystemExit(f"FAILED: grow {size}: {who}'s {name} has {got} live rows, expected {live}")
            out.append({"events": events, "rows": rows, "seconds": secs, "c_seconds": c_secs, "base_seconds": base_s,
                        "base_c_seconds": base_c, "others": others, "order": (i, size)})
        shutil.rmtree(root, ignore_errors=True)
    out.sort(key=lambda x: x.pop("order"))
    return out


# --------------------------------------------------------------------------- report
def fmt_s(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _ratio(c: float | None, a: float) -> str:
    return "-" if c is None else f"{c / a:.2f}"


def markdown_section(r: dict[str, Any]) -> str:
    m = r["machine"]
    a, b, c = r["a_seconds"], r["b_seconds"], r["c_seconds"]
    n = r["events"]
    lines = [
        SECTION,
        "",
        f"- Date: {r['date']}",
        "- Machine: " + "; ".join(f"{k} {v}" for k, v in m.items()),
        f"- Command: `{r['command']}`",
        f"- Input: {n:,} bare Debezium MySQL envelopes ({r['ops']['c']:,} c / {r['ops']['u']:,} u / {r['ops']['d']:,} d) "
        f"over {r['tables']} tables, {r['files']} files, {r['bytes'] / 1024**2:,.0f} MiB of JSON lines; "
        f"generated in {r['gen_seconds']:.1f} s (not measured). Empty warehouse, one micro-batch (`--once`).",
        f"- Check: live rows in the ODS tables {r['ods_live']:,} = generator's {r['expected_live']:,}; "
        f"rows {r['ods_total']:,} (deletes are Hudi deletes; {r['expected_total']:,} keys ever inserted); dead letters {r['dead_letter']}.",
        "",
        "| job | events | seconds | events/s | cores used | CPU seconds | cores used by other processes |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| A: lake `run_ingest` (ODS upsert into Hudi) | {n:,} | {fmt_s(a)} | {n / a:,.0f} | {r['a_cpu'][0]:.2f} | {r['a_cpu'][0] * a:,.0f} | {r['a_cpu'][1]:.2f} |",
        f"| B: plain Spark `read.json` -> `write.partitionBy(\"table\").parquet` | {n:,} | {fmt_s(b)} | {n / b:,.0f} | {r['b_cpu'][0]:.2f} | {r['b_cpu'][0] * b:,.0f} | {r['b_cpu'][1]:.2f} |",
        f"| C: the hand-written seed-004 job (`foreachBatch`, `from_json` per table, Hudi upsert on `ts_ms`) | {n:,} | {fmt_s(c)} | {n / c:,.0f} | {r['c_cpu'][0]:.2f} | {r['c_cpu'][0] * c:,.0f} | {r['c_cpu'][1]:.2f} |",
        "",
        f"**A/B = {b / a:.2f}** (events/s of lake over the plain write; goal >= 0.4). "
        f"**A/C = {c / a:.2f}** (events/s of lake over the hand-written job; goal >= 1.2).",
        "",
        "C is seed 004's job (Debezium2Hudi) in PySpark: one Structured Streaming query over the same files "
        "(`trigger(availableNow=True)`), `foreachBatch`, per table a filter on `source.db`/`source.table`, an `isEmpty` "
        "check, `from_json` of the row image (`before` for op=d) with the table's known schema, `_hoodie_is_deleted` = "
        "(op = 'd'), and a Hudi upsert with record key `id` and precombine field `ts_ms`. Its Hudi options are those "
        "that make its tables the same as lake's default ODS tables, so the comparison is of the work around the "
        "write: lake's table type and index (today copy-on-write, SIMPLE; GLOBAL_SIMPLE with partition moves for the "
        "month-partitioned `orders`), the CDC log with before and after images, no metadata table, no bloom "
        "filters, shuffle parallelism 2. It does not order by source position, keeps no tombstones (a late "
        "event resurrects a deleted key), has no dead letter and no schema evolution; it writes the same "
        "live rows here because the generator's `ts_ms` grows with every event.",
        "",
        (f"Before A, C ran once over the same events, not measured ({r['c_cold']:.1f} s), so that both measured jobs run "
         "with the JVM's JIT warm: whichever job runs first in a fresh JVM pays for compiling the JSON parsing and Hudi "
         "write paths both use (before this warm-up A ran first and carried that cost alone)." if r.get("c_cold") else ""),
        "",
        "Cores are averages over the job from /proc (this process tree vs the rest of the machine); "
        "more than ~0.2 cores used by other processes means the job shared the CPUs with someone else's work.",
        "",
        f"**Ratio B/A (events/s of B over events/s of A) = {r['ratio']:.1f}**: lake is {r['ratio']:.1f}x slower than a plain JSON -> Parquet write, "
        "which does no upsert, no ordering, no dedupe and no CDC log. "
        f"In CPU seconds (less sensitive to other jobs than wall time) the ratio is {r['a_cpu'][0] * a / max(r['b_cpu'][0] * b, 1e-9):.1f}.",
        "",
    ]
    if r.get("jvm_peak_a") or r.get("jvm_peak_b"):
        lines.append(
            f"Peak RSS of the driver JVM (VmHWM): {r['jvm_peak_a'] or 0:,.0f} MiB after A, {r['jvm_peak_b'] or 0:,.0f} MiB after B "
            f"(warm-up included); the Python generator peaked at {r['py_peak']:,.0f} MiB."
        )
        lines.append("")
    if r.get("growth"):
        g = r["growth"]
        lines += [
            "Steady state, side by side (goal 1): new events as one more micro-batch into tables 10x apart, "
            "taken by lake (A) and by the hand-written job C (each built its own tables from the same base events first: "
            "the base columns), one count after another:", "",
            "| new events | live rows before | A: lake s | C: hand-written s | **C/A** | base: lake s | base: C s | other processes (cores) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [f"| {x['events']:,} | {x['rows']:,} | {x['seconds']:,.1f} | {fmt_s(x.get('c_seconds'))} | "
                  f"**{_ratio(x.get('c_seconds'), x['seconds'])}** | {x['base_seconds']:,.1f} | {fmt_s(x.get('base_c_seconds'))} | "
                  f"{fmt_s(x.get('others'), 2)} |" for x in g]
        lines += ["", f"**Growth ratio {g[1]['seconds'] / g[0]['seconds']:.2f}x** for {g[1]['rows'] / g[0]['rows']:.1f}x the rows "
                  f"({g[0]['events']:,} events; goal <= 1.3x). C/A >= 1.2 is goal 1's steady state.", ""]
    if r.get("note"):
        lines += [r["note"], ""]
    lines += ["Where A's time goes (wall seconds per step; steps are the writer's methods, timed in the script). Tables "
              "are prepared and committed `ods.commit_threads` (default 4) at a time, so the steps of different tables "
              "overlap and a step's exclusive time can come out negative: read a table's steps together, not as shares.", ""]
    lines += ["| step | seconds | share of A |", "|---|---:|---:|"]
    for name, secs in r["steps"]:
        lines.append(f"| {name} | {secs:,.1f} | {secs / a:.0%} |")
    lines.append("")
    if r["top_stages"]:
        lines += ["Longest Spark stages of A (from the event log):", ""]
        lines += ["| stage | Hudi job description | step | tasks | seconds |", "|---|---|---|---:|---:|"]
        for s in r["top_stages"]:
            desc = s["desc"].replace("|", "/")[:70]
            lines.append(f"| {s['name']} | {desc} | {s['step']} | {s['tasks']} | {s['seconds']:,.1f} |")
        lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000, help="events of the measured run (default: ~5 minutes in all)")
    ap.add_argument("--grow", type=int, default=0, metavar="ROWS",
                    help="also ingest --grow-events events into tables of ROWS and 10x ROWS rows (goal 1: growth of a micro-batch)")
    ap.add_argument("--grow-events", default="1000,10000", help="new events per steady-state micro-batch, comma-separated (default 1000,10000)")
    ap.add_argument("--tables", type=int, default=3, choices=[1, 2, 3], help="how many of the 3 tables (orders, customers, products)")
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup-events", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=None, help="replace this benchmark's section of this Markdown file")
    ap.add_argument("--note", default=None, help="a line added to the Markdown section")
    ap.add_argument("--results", type=Path, default=None, help="also save the figures as JSON here (benchmarks/goals.py reads them)")
    args = ap.parse_args(argv)
    n = args.events
    tables = ALL_TABLES[: args.tables]
    command = "python benchmarks/ods_ingest.py " + " ".join(sys.argv[1:] if argv is None else argv)
    t_start = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:7.1f}s] {msg}", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="lake-bench-"))
    spark = None
    try:
        main_root, tiny_root, event_log = tmp / "bench", tmp / "warmup", tmp / "eventlog"
        event_log.mkdir()
        for root, count, seed in ((tiny_root, args.warmup_events, args.seed + 1000), (main_root, n, args.seed)):
            make_project(root, tables, "bench" if root == main_root else "warmup")
            gen = Generator(tables, seed)
            g0 = time.perf_counter()
            nbytes = gen.write(count, root / "cdc", args.files)
            gen_seconds = time.perf_counter() - g0
        # `gen` is now the main project's generator
        ops, expected = gen.op_counts(), gen.expected()
        import resource

        py_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        say(f"generated {n:,} events ({ops}) in {args.files} files, {nbytes / 1024**2:,.0f} MiB, in {gen_seconds:.1f} s "
            f"({n / gen_seconds:,.0f} events/s; not measured)")
        for name, (live, total) in expected.items():
            say(f"  expected shop.{name}: {live:,} live rows, {total:,} keys inserted")

        from framework.project.config import load_project
        from framework.table.session import spark_session

        project = load_project(main_root)
        t0 = time.perf_counter()
        spark = spark_session(project, {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": event_log.as_uri(),
            "spark.eventLog.compress": "false",
        })
        say(f"SparkSession up in {time.perf_counter() - t0:.1f} s (master {project.config.spark.master})")

        phases = Phases()
        instrument(spark, phases)

        t0 = time.perf_counter()
        with phases.phase("warm-up"):
            summary = ingest(spark, tiny_root)
            plain_json_to_parquet(spark, tiny_root / "cdc", tmp / "warmup-parquet")
        say(f"warm-up ({args.warmup_events} events, ingest + JSON->Parquet) in {time.perf_counter() - t0:.1f} s, "
            f"status {summary.status}")
        # The JIT warm-up of a large run: whichever job runs first in a fresh JVM pays for compiling
        # the JSON parsing and Hudi write paths both jobs use (a first parse of the batch took 2x its
        # later runs). C runs once over the measured events first, not measured, so A and C both
        # run warm.
        t0 = time.perf_counter()
        with phases.phase("warm-up"):
            naive_job(spark, tables, main_root / "cdc", tmp / "naive-warmup")
        c_cold = time.perf_counter() - t0
        shutil.rmtree(tmp / "naive-warmup", ignore_errors=True)
        say(f"JIT warm-up: C once over the measured events in {c_cold:.1f} s (not measured)")
        # Steps of the measured run only.
        for table in (phases.incl, phases.excl, phases.calls):
            table.clear()
        phases.order.clear()

        # ---- A
        say(f"A: run_ingest over {n:,} events ...")
        t0, cpu0 = time.perf_counter(), CpuMark.now()
        with phases.phase("A: run_ingest"):
            run = ingest(spark, main_root)
        a_seconds = time.perf_counter() - t0
        a_cpu = CpuMark.now().cores_since(cpu0)
        say(f"A used {a_cpu[0]:.2f} cores on average; other processes on the machine used {a_cpu[1]:.2f}")
        jvm_peak_a = jvm_peak_rss()
        say(f"A: {a_seconds:.1f} s, {n / a_seconds:,.0f} events/s, status {run.status}, {len(run.batches)} micro-batch(es)")
        dead = 0
        for b in run.batches:
            dead += b.dead_letter
            say(f"  batch {b.batch_id}: events {b.events:,}, dead letter {b.dead_letter}, tombstones {b.tombstones}")
            for tname, tr in b.tables.items():
                say(f"    {tname}: {tr.status} upserts {tr.upserts:,} deletes {tr.deletes:,} dead {tr.dead_letter}")

        # ---- sanity check
        t0 = time.perf_counter()
        with phases.phase("check: count ODS tables"):
            ods_live = ods_total = 0
            mismatch = []
            for name, (live, total) in expected.items():
                df = spark.read.format("hudi").load(str(main_root / "warehouse" / "ods" / name))
                got_total = df.count()
                got_live = df.where("NOT _deleted").count()
                ods_live += got_live
                ods_total += got_total
                # Deletes are Hudi deletes (the deleted keys are in the tombstone table): every row is live.
                flag = "" if got_live == got_total == live else "   <-- MISMATCH"
                say(f"  ods.{name}: live {got_live:,}, rows {got_total:,} (expected {live:,}; {total:,} keys ever inserted){flag}")
                if flag:
                    mismatch.append(name)
        say(f"check took {time.perf_counter() - t0:.1f} s (not measured)")
        if mismatch or dead:
            raise SystemExit(f"FAILED sanity check: tables {mismatch or 'ok'}, dead letters {dead}")
        spark.catalog.clearCache()

        # ---- B
        say(f"B: plain read.json -> partitionBy(table).parquet over {n:,} events ...")
        out_dir = tmp / "plain-parquet"
        t0, cpu0 = time.perf_counter(), CpuMark.now()
        with phases.phase("B: json->parquet"):
            plain_json_to_parquet(spark, main_root / "cdc", out_dir)
        b_seconds = time.perf_counter() - t0
        b_cpu = CpuMark.now().cores_since(cpu0)
        say(f"B used {b_cpu[0]:.2f} cores on average; other processes on the machine used {b_cpu[1]:.2f}")
        jvm_peak_b = jvm_peak_rss()
        written = spark.read.parquet(str(out_dir)).count()
        say(f"B: {b_seconds:.1f} s, {n / b_seconds:,.0f} events/s ({written:,} rows written)")
        if written != n:
            raise SystemExit(f"FAILED: B wrote {written} rows, expected {n}")

        # ---- C
        say(f"C: the hand-written seed-004 job (foreachBatch, from_json per table, Hudi upsert on ts_ms) over {n:,} events ...")
        c_dir = tmp / "naive"
        t0, cpu0 = time.perf_counter(), CpuMark.now()
        with phases.phase("C: naive job"):
            naive_job(spark, tables, main_root / "cdc", c_dir)
        c_seconds = time.perf_counter() - t0
        c_cpu = CpuMark.now().cores_since(cpu0)
        say(f"C: {c_seconds:.1f} s, {n / c_seconds:,.0f} events/s; used {c_cpu[0]:.2f} cores, others {c_cpu[1]:.2f}")
        for name, (live, _total) in expected.items():
            got = live_rows(spark, c_dir / name)
            say(f"  naive {name}: live {got:,} (expected {live:,}){'' if got == live else '   <-- differs'}")

        a_excl, a_order = dict(phases.excl), list(phases.order)  # A's steps, before the growth runs add theirs
        growth = grow(spark, tables, tmp, args, say) if args.grow else None

        info = machine_info()
        spark.stop()
        spark = None

        # ---- where A's time went
        a_name = "A: run_ingest"
        not_steps = {a_name, "check: count ODS tables", "B: json->parquet", "C: naive job"}
        steps = [(name, a_excl[name]) for name in a_order if name not in not_steps]
        steps.append(("streaming query: start, file listing, offsets/commit log (rest of run_ingest)", a_excl[a_name]))
        steps.sort(key=lambda p: -p[1])
        jobs, stages = read_event_log(event_log)
        job_by_id = {j.job_id: j for j in jobs}
        a_iv = [iv for iv in phases.intervals if iv[3] == a_name][-1]
        a_stages = [s for s in stages if a_iv[0] * 1000 <= s.submitted <= a_iv[1] * 1000]
        top: list[dict[str, Any]] = []
        for s in sorted(a_stages, key=lambda s: s.submitted - s.completed)[:10]:
            j = job_by_id.get(s.job)
            desc = " ".join((j.description if j else "").split())
            desc = "" if desc.startswith("bench step: ") else desc  # lake's own job: the step says it
            top.append({
                "name": "(Python action)" if s.name.startswith("call at ") else s.name, "desc": desc, "tasks": s.tasks,
                "seconds": (s.completed - s.submitted) / 1000, "step": phases.step_of(s.submitted / 1000),
            })
        job_secs: dict[str, float] = defaultdict(float)
        for j in jobs:
            if a_iv[0] * 1000 <= j.submitted <= a_iv[1] * 1000 and j.completed:
                job_secs[phases.step_of(j.submitted / 1000)] += (j.completed - j.submitted) / 1000
        print()
        print(f"{'job':<52} {'events':>10} {'seconds':>9} {'events/s':>10}")
        print(f"{'A: lake run_ingest (ODS upsert into Hudi)':<52} {n:>10,} {a_seconds:>9.1f} {n / a_seconds:>10,.0f}")
        print(f"{'B: plain read.json -> partitionBy parquet':<52} {n:>10,} {b_seconds:>9.1f} {n / b_seconds:>10,.0f}")
        print(f"{'C: hand-written seed-004 job':<52} {n:>10,} {c_seconds:>9.1f} {n / c_seconds:>10,.0f}")
        print(f"A/B events/s = {b_seconds / a_seconds:.2f} (goal >= 0.4), A/C events/s = {c_seconds / a_seconds:.2f} (goal >= 1.2)")
        if growth:
            for g in growth:
                print(f"growth: {g['events']:,} events into {g['rows']:,} rows: lake {g['seconds']:.1f} s, C {g['c_seconds']:.1f} s")
        ratio = a_seconds / b_seconds
        print(f"CPU seconds: A {a_cpu[0] * a_seconds:,.0f} ({a_cpu[0]:.2f} cores, others {a_cpu[1]:.2f}), "
              f"B {b_cpu[0] * b_seconds:,.0f} ({b_cpu[0]:.2f} cores, others {b_cpu[1]:.2f})")
        print(f"\nB/A = {ratio:.1f}: lake is {ratio:.1f}x slower than a plain JSON->Parquet write, which does no upsert,"
              " no ordering, no dedupe and no CDC log.")
        if jvm_peak_a:
            print(f"peak RSS of the driver JVM (VmHWM): {jvm_peak_a:,.0f} MiB after A, {jvm_peak_b or 0:,.0f} MiB after B; "
                  f"Python generator {py_peak:,.0f} MiB")
        print("\nA by step (wall s, exclusive of nested steps; Spark job time submitted from the step):")
        for name, secs in steps:
            print(f"  {secs:8.1f}  {secs / a_seconds:5.0%}  jobs {job_secs.get(name, 0.0):8.1f}  {name}")
        print("\nlongest Spark stages of A:")
        for row in top:
            desc = f"  [{row['desc'][:80]}]" if row["desc"] else ""
            print(f"  {row['seconds']:8.1f}s  tasks {row['tasks']:4d}  {row['name']}{desc}  <- {row['step']}")

        result = {
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "machine": info, "command": command,
            "events": n, "tables": len(tables), "files": args.files, "bytes": nbytes, "ops": ops,
            "gen_seconds": gen_seconds, "a_seconds": a_seconds, "b_seconds": b_seconds, "ratio": ratio,
            "ods_live": ods_live, "ods_total": ods_total, "dead_letter": dead,
            "expected_live": sum(v[0] for v in expected.values()), "expected_total": sum(v[1] for v in expected.values()),
            "jvm_peak_a": jvm_peak_a, "jvm_peak_b": jvm_peak_b, "py_peak": py_peak,
            "steps": steps, "top_stages": top, "note": args.note, "a_cpu": a_cpu, "b_cpu": b_cpu,
            "c_seconds": c_seconds, "c_cpu": c_cpu, "growth": growth, "c_cold": c_cold,
        }
        if args.out:
            write_markdown(args.out, markdown_section(result))
            say(f"wrote the section to {args.out}")
        if args.results:
            args.results.write_text(json.dumps(result, indent=1, default=str))
        say("done")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
