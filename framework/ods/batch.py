"""One ODS micro-batch: parse Debezium envelopes, route by source table, upsert every Hudi table.

Input is a DataFrame of messages with columns `value` (the message text), `loc` (where it came
from: `file:line` or `topic/partition/offset`), `arrival` (a sortable text of arrival order) and
`origin` (file or topic, for the dead letter). A pipeline of steps, each its own module:

1. parse.py: parse every envelope once and classify each message (ok / tombstone / dead with a
   reason); discover.py: tables `auto_create` adds, keys from Kafka message keys; one small
   aggregation (parse.summarize) tells which tables, schema versions and columns the batch has;
2. prepare.py, per table (`ods.commit_threads` tables at once): column types (columns.py),
   decoding, the ordering sequence, truncates, the bootstrap hand-off, and what goes to the dead
   letter;
3. the dead-letter ratio over every cause, before anything commits;
4. commit.py: the dead letter first (every bad message of the batch, parsing and each table's),
   then every table's gate, then the tables, `ods.commit_threads` at a time: tombstones
   (tombstones.py), then the upsert with Hudi deletes.

Exactly once: each table's commit records the stream id and batch id. A replayed batch (after a
crash) skips the tables that already committed it, so a rerun leaves the same tables as one run.
The dead letter is written before the first table commits: a table the rerun skips is not
prepared again, so dead letters written after it would be lost with a crash in between.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime, timezone
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from framework.errors import IngestFailed, LakeError, QualityGateError
from framework.ods import rewrite
from framework.ods.commit import DEAD_LETTER_KEY, gate_table, write_dead_letter, write_tables
from framework.ods.context import BatchContext, TableState
from framework.ods.discover import auto_create, resolve_keys
from framework.ods.parse import classify, envelopes, summarize
from framework.ods.prepare import Prepared, prepare
from framework.project.config import Project
from framework.project.types import normalize
from framework.quality.ods_gate import BatchBlocked
from framework.runtime.faults import failpoint
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.table import hudi, hudi_layout
from models.commit_meta import OdsCommit
from models.config import OdsTable
from models.reconcile import ReconcileSettings
from models.records import BatchResult

META_COLUMNS = ["_op", "_event_ts", "_seq", "_ingested_at", "_deleted", "_source"]
__all__ = ["DEAD_LETTER_KEY", "META_COLUMNS", "OdsBatchWriter", "resolve_source_path"]


class OdsBatchWriter:
    """Writes micro-batches of CDC messages into the project's ODS tables."""

    def __init__(self, spark: SparkSession, project: Project, stream_id: str, only: set[str] | None = None, run_id: str | None = None,
                 replay_guard: bool = False) -> None:
        from framework.runtime.history import new_run_id

        self.run_id = run_id or new_run_id()  # labels quality results and quarantined events
        self.spark = spark
        self.project = project
        self.layout = Layout(project.warehouse)
        self.stream_id = stream_id
        self.only = only
        self.ctx = BatchContext(spark, project, self.layout, stream_id, self.run_id, replay_guard)
        self.tables = {t.source: t for t in project.ods_tables if only is None or t.table_name in only}
        self.all_sources = {t.source for t in project.ods_tables}
        self.signals = (project.config.reconcile or ReconcileSettings()).signal_sources()
        self.state: dict[str, TableState] = {}

    def _state(self, t: OdsTable) -> TableState:
        st = self.state.setdefault(t.table_name, TableState())
        if st.loaded:
            return st
        table = self.ctx.table(t)
        rewrite.recover(self.spark, self.layout, t.qualified_name)  # a rewrite a crash interrupted
        table.settle()  # a creation a crash interrupted: no data, removed
        if table.committed():
            schema = table.schema(self.spark)
            st.columns = {
                f.name: normalize(f.dataType.simpleString())
                for f in schema.fields
                if f.name not in hudi.HOODIE_META_COLUMNS and f.name not in META_COLUMNS and f.name != "_hoodie_is_deleted"
                and not (t.partition_by and f.name == t.partition_by.derived_name)
            }
            recorded: str | None = None
            state = OdsCommit()
            for c in table.commits():
                recorded = c.lake.get(hudi_layout.META_KEY, recorded)
                mark = OdsCommit.from_meta(c.lake)
                state = state.then(mark)
                if mark.stream is not None:  # the last batch is the last commit's that has one
                    st.last_stream, st.last_batch = mark.stream, mark.batch if mark.batch is not None else -1
            st.watermark, st.high_water, st.migrated = state.bootstrap_watermark, state.high_water, state.tombstones
            if state.key:
                st.key = state.key
            _check_layout(t, recorded)
        st.loaded = True
        return st

    def process(self, msgs: DataFrame, batch_id: int) -> BatchResult:
        started = datetime.now(timezone.utc)
        env = envelopes(msgs, set(self.all_sources), self.signals).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            if self.project.config.ods.auto_create.enabled and self.only is None:
                auto_create(self.project, env, self.tables, self.all_sources)
            resolve_keys(env, self.tables, self._state)
            parsed = classify(env, self.tables.values(), self.all_sources)
            return self._process(parsed, batch_id, started)
        finally:
            env.unpersist()

    def _process(self, parsed: DataFrame, batch_id: int, started: datetime) -> BatchResult:
        """Prepare every table (decode, sequence, truncate), check the dead-letter ratio, then
        commit table by table: a batch that fails the ratio commits nothing."""
        result = BatchResult(batch_id=batch_id, started_at=started)
        by_table: dict[str, list[Any]] = {}
        parse_dead: dict[str, int] = {}  # source table -> its events dead-lettered while parsing
        for r in summarize(parsed, self.project.config.ods.unavailable_value_placeholder):
            result.events += r["n"]
            if r["status"] == "tombstone":
                result.tombstones += r["n"]
            elif r["status"] == "control":  # Debezium's schema changes, heartbeats, transaction markers
                result.control += r["n"]
            elif r["status"] == "dead":
                result.dead_letter += r["n"]
                result.dead_reasons[r["reason"]] = result.dead_reasons.get(r["reason"], 0) + r["n"]
                parse_dead[r["tbl"]] = parse_dead.get(r["tbl"], 0) + r["n"]
            elif r["tbl"] in self.tables:
                by_table.setdefault(r["tbl"], []).append(r)
        cache: list[DataFrame] = []
        blocked: list[QualityGateError] = []
        try:
            prepared = self._prepare_all(parsed, sorted(by_table.items()), batch_id, started, cache)
            self._check_dead_letter_ratio(batch_id, result, prepared, parse_dead)
            for p in prepared:  # the batch's dead letters: parsing, plus each table's own
                result.dead_letter += p.result.dead_letter
                for reason, n in p.dead_reasons.items():
                    result.dead_reasons[reason] = result.dead_reasons.get(reason, 0) + n
            if result.dead_letter:
                # Before any table commits: a rerun skips the tables that have the batch, and
                # with them the dead letters only their preparation finds. Keyed by location, and
                # skipped when it has the batch already, so writing it first changes nothing else.
                write_dead_letter(self.ctx, parsed, [d for p in prepared for d in p.dead], batch_id)
                failpoint("after_dead_letter_commit")
            gated = [(p, self._state(p.table), rows) for p in prepared
                     if (rows := gate_table(self.ctx, p, cache, blocked)) is not None]
            try:
                write_tables(self.ctx, gated, batch_id)
            finally:
                for p in prepared:
                    result.tables[p.table.table_name] = p.result
        finally:
            for df in cache:
                df.unpersist()
        result.finished_at = datetime.now(timezone.utc)
        if blocked:
            # Raised after the dead letter and the other tables committed: the micro-batch fails,
            # the streaming checkpoint stays before it, and the next run replays it (committed
            # tables and the dead letter recognise the replay by their ods_batch metadata).
            raise BatchBlocked(batch_id, blocked, result)
        return result

    def _prepare_all(self, parsed: DataFrame, work: list[tuple[str, list[Any]]], batch_id: int, started: datetime,
                     cache: list[DataFrame]) -> list[Prepared]:
        """Prepare the batch's tables, up to `ods.commit_threads` at once, in `work`'s order. A
        table's preparation is a few small Spark jobs (decode, persist, counts) whose driver-side
        planning and task tails leave the cores idle; another table's jobs fill them. Each
        preparation reads the batch and its own table only; table states are loaded first, here
        (the writer's dict is not shared between threads). Every preparation finishes before the
        first failure is raised: nothing commits after a failed preparation."""
        states = [self._state(self.tables[s]) for s, _ in work]

        def one(i: int) -> Prepared:
            s, rows = work[i]
            return prepare(self.ctx, parsed, self.tables[s], rows, states[i], batch_id, started, cache)

        threads = self.ctx.threads(len(work))
        if threads == 1:
            return [one(i) for i in range(len(work))]
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lake-ods-prepare") as pool:
            futures = [pool.submit(one, i) for i in range(len(work))]
            wait(futures)
        return [f.result() for f in futures]

    def _check_dead_letter_ratio(self, batch_id: int, result: BatchResult, prepared: list[Prepared], parse_dead: dict[str, int]) -> None:
        """`ods.max_dead_letter_ratio`, over every dead letter (parsing, decoding, schema changes),
        for the batch and for each table; raised before any table commits."""
        ratio = self.project.config.ods.max_dead_letter_ratio
        if ratio is None:
            return
        reasons = dict(result.dead_reasons)
        for p in prepared:
            for reason, n in p.dead_reasons.items():
                reasons[reason] = reasons.get(reason, 0) + n
        counted = result.events - result.tombstones - result.control
        dead = result.dead_letter + sum(p.result.dead_letter for p in prepared)
        over = [(f"micro-batch {batch_id}", dead, counted)] if counted and dead / counted > ratio else []
        for p in prepared:
            n = p.result.dead_letter + parse_dead.get(p.table.source, 0)
            total = p.result.events + parse_dead.get(p.table.source, 0)
            if total and n / total > ratio:
                over.append((f"{p.table.qualified_name} in micro-batch {batch_id}", n, total))
        if over:
            what, n, total = over[0]
            listed = ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items()))
            raise IngestFailed(
                f"{what}: {n} of {total} events are bad ({n / total:.1%} > max_dead_letter_ratio {ratio:.1%}); "
                f"nothing was committed. Reasons: {listed}",
                fix="fix the input (see the reasons), or raise ods.max_dead_letter_ratio in lake.yaml, then rerun",
            )


def _check_layout(t: OdsTable, recorded: str | None) -> None:
    """An existing table can take the YAML's index and buckets (framework/table/hudi_layout.py)."""
    problem = hudi_layout.change_problem(recorded, t)
    if problem is not None:
        raise LakeError(f"layers/ods: {t.qualified_name}: {problem}",
                        fix=f"put `index:`/`buckets:` back, or write the table anew with them: lake ingest --rebuild {t.qualified_name}")


def resolve_source_path(project: Project, path: str) -> Location:
    return Location.parse(path, project.root)
