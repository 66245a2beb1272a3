"""The ODS job: one Spark Structured Streaming query for all tables, `foreachBatch` routing.

Sources are pluggable (:class:`Source`): each turns a micro-batch into messages with `value`,
`loc`, `arrival` and `origin` columns for :class:`~framework.ods.batch.OdsBatchWriter`.
The streaming checkpoint keeps source offsets; the stream id stored beside it is written into
every ODS commit so a replayed batch is recognised (exactly once, see batch.py).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from datetime import datetime, timezone
from typing import Any, Protocol

from pyspark import StorageLevel
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.errors import EnvironmentProblem, IngestFailed, LakeError
from framework.ods.batch import OdsBatchWriter, resolve_source_path
from framework.project.config import Project
from framework.quality.ods_gate import BatchBlocked
from framework.runtime import jvm, lock, rebuilds
from framework.runtime.faults import failpoint
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.runtime.signals import on_stop_signals, stopping
from framework.runtime.storage import storage_for
from models.config import FileSourceConfig
from models.records import BatchResult, IngestSummary


class Source(Protocol):
    def check(self) -> None: ...

    def stream(self, spark: SparkSession) -> DataFrame: ...

    def messages(self, spark: SparkSession, batch: DataFrame, batch_id: int) -> DataFrame: ...

    def release(self) -> None:
        """Free what `messages` cached for the micro-batch (called after it was processed)."""


def _norm(path: str) -> str:
    return "/" + path.split(":", 1)[1].lstrip("/") if path.startswith("file:") else path


# The `value` of a line longer than `max_line_bytes` becomes "lake: line too long (<n> bytes >
# ...); it begins: <first KiB>": not JSON, so the line is dead-lettered instead of parsed.
OVERSIZE = "lake: line too long"
OVERSIZE_KEEP = 1024


class FileSource:
    """A directory of CDC files, one message per line, files in mtime order.

    Spark's line-based `text` source reads the files, so a big file is split across tasks instead
    of becoming one row. Line numbers are those of the whole file (blank lines count): within
    one split the scan yields lines in file order, which `monotonically_increasing_id` (taken
    right after the scan, before anything can reorder rows) preserves, and the splits of a file
    are ordered by their start offset (`_metadata.file_block_start`).
    """

    def __init__(self, project: Project, cfg: FileSourceConfig) -> None:
        self.cfg = cfg
        self.path = resolve_source_path(project, cfg.path)
        self.root = project.root
        self._cached: DataFrame | None = None

    def check(self) -> None:
        if not self.path.is_local:
            if not storage_for(self.path).is_dir(self.path):
                raise EnvironmentProblem(
                    f"the CDC location {self.path} does not exist or is not a folder",
                    fix="put Debezium JSON files under it, or set ods.source.path in lake.yaml",
                )
            return
        local = self.path.local
        if not local.exists():
            raise EnvironmentProblem(
                f"the CDC directory {local} does not exist",
                fix="create it and put Debezium JSON files in it, or set ods.source.path in lake.yaml",
            )
        if not local.is_dir() or not os.access(local, os.R_OK | os.X_OK):
            raise EnvironmentProblem(
                f"the CDC path {local} is not a readable directory",
                fix=f"check its permissions (chmod +rx {local}) or point ods.source.path at a directory",
            )

    def stream(self, spark: SparkSession) -> DataFrame:
        # lineSep "\n": only LF ends a line, as when files were split on "\n" (Spark's default also
        # splits on a lone CR, which would renumber the lines of such a file).
        reader = (
            spark.readStream.format("text")
            .option("lineSep", "\n")
            .option("maxFileAge", self.cfg.max_file_age)
            .option("pathGlobFilter", self.cfg.glob)
        )
        if self.cfg.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", self.cfg.max_files_per_trigger)
        return reader.load(str(self.path)).select(
            F.col("value"),
            F.col("_metadata.file_path").alias("file"),
            F.col("_metadata.file_modification_time").alias("mtime"),
            F.col("_metadata.file_block_start").alias("block"),
        )

    def messages(self, spark: SparkSession, batch: DataFrame, batch_id: int) -> DataFrame:
        """Number the lines; arrival order is (batch, file by mtime then name, line)."""
        size = F.octet_length(F.col("value"))
        limit = self.cfg.max_line_bytes
        value = F.when(
            size > limit,
            F.concat(F.lit(f"{OVERSIZE} ("), size.cast("string"),
                     F.lit(f" bytes > ods.source.max_line_bytes {limit}); it begins: "), F.substring(F.col("value"), 1, OVERSIZE_KEEP)),
        ).otherwise(F.col("value"))
        # The id first, on the scan's own rows: it is the position of a line within its task.
        scanned = batch.select(
            F.monotonically_increasing_id().alias("mono"),
            value.alias("value"),
            F.col("file"),
            F.col("mtime"),
            F.col("block"),
        ).persist(StorageLevel.MEMORY_AND_DISK)
        self._cached = scanned
        splits = scanned.groupBy("file", "mtime", "block").agg(F.count(F.lit(1)).alias("n"), F.min("mono").alias("first")).collect()
        # File names are turned into paths relative to the project here, once per split, not per line.
        fn = {r["file"]: re.sub(r"^file:/+", "/", r["file"]) for r in splits}
        ranked = sorted({(r["mtime"], fn[r["file"]]) for r in splits})
        index = {name: i for i, (_, name) in enumerate(ranked)}
        root = "^" + re.escape(str(self.root)) + "/"
        # Per split: its file's index, and what turns a row's id into its line number (lines
        # of the file's earlier splits, minus the split's first id, plus one).
        offsets: list[tuple[str, int, str, int, int]] = []
        done: dict[str, int] = {}
        for r in sorted(splits, key=lambda r: (fn[r["file"]], r["block"])):
            name = fn[r["file"]]
            before = done.get(name, 0)
            offsets.append((r["file"], r["block"], re.sub(root, "", name), index[name], before - r["first"] + 1))
            done[name] = before + r["n"]
        numbering = spark.createDataFrame(offsets, "file string, block bigint, rel string, file_idx int, base bigint")
        # A regular expression only for the lines that hold a CR (same result, far fewer matches).
        text = F.when(F.col("value").contains("\r"), F.regexp_replace("value", "\r$", "")).otherwise(F.col("value"))
        lines = scanned.join(F.broadcast(numbering), ["file", "block"]).select(
            F.col("rel"),
            F.col("file_idx"),
            (F.col("mono") + F.col("base")).alias("ln"),
            text.alias("value"),
        ).where(F.trim("value") != "")
        return lines.select(
            F.col("value"),
            F.concat(F.col("rel"), F.lit(":"), F.col("ln").cast("string")).alias("loc"),
            F.concat(
                F.lpad(F.lit(str(batch_id)), 12, "0"),
                F.lpad(F.col("file_idx").cast("string"), 6, "0"),
                F.lpad(F.col("ln").cast("string"), 9, "0"),
            ).alias("arrival"),
            F.col("rel").alias("origin"),
        )

    def release(self) -> None:
        if self._cached is not None:
            self._cached.unpersist()
            self._cached = None


def make_source(project: Project) -> Source:
    src = project.config.ods.source
    if isinstance(src, FileSourceConfig):
        return FileSource(project, src)
    from framework.ods.kafka import KafkaSource

    return KafkaSource(project, src)


STREAM_CHECKPOINT = "stream"  # Spark's checkpoint, beside lake_stream_id


def stream_id(checkpoint: Location) -> str:
    """The id of a streaming checkpoint: kept while Spark's checkpoint has a batch, new when not.

    Spark numbers micro-batches from 0 again when `<checkpoint>/stream/offsets` holds no batch
    file (a new checkpoint, or one deleted without `lake_stream_id` beside it). Under the old id
    those batches would look like replays of committed ones and be skipped (`already_committed`).
    Spark writes `offsets/<n>` before it runs batch n, so a crash during batch 0 keeps the id and
    its replay is recognised.
    """
    fs = storage_for(checkpoint)
    f = checkpoint / "lake_stream_id"
    offsets = checkpoint / STREAM_CHECKPOINT / "offsets"
    started = any(p.name.isdigit() for p in fs.children(offsets))  # not .crc/.tmp
    if not started or not fs.exists(f):
        fs.write_text(f, uuid.uuid4().hex)
    return fs.read_text(f).strip()


def checkpoint_name(tables: list[str] | None) -> str:
    if not tables:
        return "ods"
    return "ods-" + hashlib.sha1(",".join(sorted(tables)).encode()).hexdigest()[:10]


def run_ingest(
    spark: SparkSession,
    project: Project,
    *,
    continuous: bool = False,
    tables: list[str] | None = None,
    trigger_seconds: int | None = None,
    on_batch: Callable[[BatchResult], None] | None = None,
    stop_event: threading.Event | None = None,
    run_id: str | None = None,
    checkpoint: str | None = None,
) -> IngestSummary:
    """Ingest everything not yet ingested (`continuous=False`), or keep going until stopped.
    `run_id` (the run record's) labels quality results and quarantined events; `checkpoint`: the
    streaming checkpoint's name instead of the one of `tables` (a rebuild's replay: its own).

    Raises:
        BatchBlocked: an error check blocked a table; its `summary` holds the run so far.
    """
    layout = Layout(project.warehouse)
    source = make_source(project)
    source.check()
    only = set(t.removeprefix("ods.") for t in tables) if tables else None
    if only:
        unknown = only - {t.table_name for t in project.ods_tables}
        if unknown:
            project.ods_table(sorted(unknown)[0])  # raises with "did you mean"
    if checkpoint is None:
        rebuilds.unfinished(layout, [t.qualified_name for t in project.ods_tables if only is None or t.table_name in only])
    ckpt = layout.checkpoint(checkpoint or checkpoint_name(sorted(only) if only else None))
    sid = stream_id(ckpt)
    writer = OdsBatchWriter(spark, project, sid, only, run_id=run_id)
    summary = IngestSummary(run_id=run_id or uuid.uuid4().hex[:12], started_at=datetime.now(timezone.utc))
    failure: list[BaseException] = []
    handle = _batch_handler(spark, source, writer, summary, failure, on_batch)
    writer_stream = source.stream(spark).writeStream.foreachBatch(handle).option("checkpointLocation", str(ckpt / STREAM_CHECKPOINT))
    if continuous:
        secs = trigger_seconds or project.config.ods.trigger_seconds
        writer_stream = writer_stream.trigger(processingTime=f"{secs} seconds")
    else:
        writer_stream = writer_stream.trigger(availableNow=True)
    query = writer_stream.queryName(f"lake_ods_{sid[:8]}").start()
    exc = _await(query, stop_event or threading.Event(), continuous)
    summary.finished_at = datetime.now(timezone.utc)
    if failure or exc is not None:
        raise _failed(summary, failure[0] if failure else None, exc)
    summary.status = "ok"
    return summary


def _failed(summary: IngestSummary, err: BaseException | None, exc: BaseException | None) -> LakeError:
    """The error a failed ingest raises: a micro-batch's own (`err`) or the streaming query's
    (`exc`), said as what happened when the driver JVM died (framework/runtime/jvm.py)."""
    summary.status, summary.error = "failed", str(err if err is not None else exc)
    if isinstance(err, BatchBlocked):
        err.summary = summary
    if isinstance(err, LakeError):
        return err
    cause = err if err is not None else exc
    assert cause is not None
    died = jvm.explain(cause)
    if died is not None:
        died.__cause__ = cause
        return died
    if err is not None:
        out = IngestFailed(f"ingest failed in a micro-batch: {err}",
                           fix="rerun with --debug for the stack trace; committed tables are consistent and the batch is retried on the next run")
    else:
        out = IngestFailed(f"the streaming query failed: {str(exc).splitlines()[0]}", fix="see warehouse/_lake/logs/spark.log; rerun with --debug")
    out.__cause__ = cause
    return out


def _batch_handler(spark: SparkSession, source: Source, writer: OdsBatchWriter, summary: IngestSummary,
                   failure: list[BaseException], on_batch: Callable[[BatchResult], None] | None) -> Callable[[DataFrame, int], None]:
    """The `foreachBatch` function: one micro-batch through the writer, its result into
    `summary`; an error goes to `failure` (surfaced after the query stops) and fails the batch."""

    def handle(batch: DataFrame, batch_id: int) -> None:
        try:
            msgs = source.messages(spark, batch, batch_id)
            result = writer.process(msgs, batch_id)
            lock.assert_held(f"the streaming checkpoint commit of micro-batch {batch_id}")  # Spark records the batch after
            failpoint("before_offset_commit")  # every table and the dead letter committed; Spark records the batch after
        except BaseException as e:
            if isinstance(e, BatchBlocked):
                summary.batches.append(e.result)  # the tables that committed are in the record
            failure.append(e)
            raise
        finally:
            source.release()
        summary.batches.append(result)
        if on_batch:
            on_batch(result)

    return handle


def _await(query: Any, stop: threading.Event, continuous: bool) -> Any:
    """Wait for the query to end (available-now) or to be stopped (continuous: SIGINT/SIGTERM set
    `stop`; the micro-batch in flight finishes first); the query's exception, if any."""
    with on_stop_signals(stopping(stop)) if continuous else nullcontext():
        while query.isActive:
            if stop.is_set():
                # Finish the micro-batch in flight, then stop.
                while query.status.get("isTriggerActive") and query.isActive:
                    time.sleep(0.2)
                query.stop()
                break
            try:
                query.awaitTermination(1)
            except StreamingQueryException:
                break  # reported by the caller from its failures or query.exception()
        return query.exception()
