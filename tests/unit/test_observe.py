"""Metrics (Prometheus' own parser reads what lake serves), OpenLineage events (validated against
the specification's JSON schemas, sent to a real HTTP server and to one that is down), missed
schedule runs (catchup:), `result:` selectors, `lake retry`'s plan and `lake --version`. No Spark."""

from __future__ import annotations

import json
import textwrap
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from framework.cli.main import main
from framework.commands.retry import plan_retry
from framework.observe.lineage_events import LineageEmitter, run_uuid
from framework.observe.metrics import Metrics
from framework.observe.redact import Redactor
from framework.ops.catchup import missed, plan
from framework.project.config import load_project
from framework.runtime import history
from framework.runtime.paths import Layout
from framework.transform.runner import selection
from models.config import ScheduleConfig
from models.ops import LineageConfig
from models.records import (
    BatchResult,
    CheckOutcome,
    Freshness,
    IngestSummary,
    ModelResult,
    RunRecord,
    SourceFreshness,
    TableBatchResult,
)
from tests.http_collector import collecting, dead_url
from tests.openlineage_schema import problems

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for fam in text_string_to_metric_families(text) for s in fam.samples}


def _cycle() -> RunRecord:
    rec = history.new_run("run", ["run"])
    batch = BatchResult(batch_id=0, started_at=T0, finished_at=T0 + timedelta(seconds=4), events=7, dead_letter=3, tables={
        "ods.orders": TableBatchResult(table="ods.orders", events=5, upserts=4, deletes=1, dead_letter=1, status="ok",
                                       event_ts_min=T0 - timedelta(seconds=60), event_ts_max=T0 - timedelta(seconds=6)),
        "ods.users": TableBatchResult(table="ods.users", events=2, upserts=0, status="blocked",
                                      checks=[CheckOutcome(name="not_null(id)", severity="error", success=False, failing=1, total=2)])})
    rec.ingest = IngestSummary(run_id=rec.run_id, started_at=T0, status="ok", batches=[batch])
    rec.models = [ModelResult(model="dws.sales", strategy="aggregate", mode="incremental", reason="", rows_written=3, seconds=2.5,
                              checks=[CheckOutcome(name="positive(total)", severity="warn", success=False)])]
    rec.freshness = {"dws.sales": Freshness(events=5, oldest_event_lag_s=70.0, newest_event_lag_s=16.0)}
    rec.sources = {"ods.orders": SourceFreshness(table="ods.orders", status="warn", measured_from="source.ts_ms", age_s=1900.0,
                                                 checked_at=T0)}
    rec.checkpoint_lag = {"dws.sales": {"ods.orders": 0, "ods.users": 2}}
    rec.status, rec.finished_at = "ok", T0 + timedelta(seconds=9)
    return rec


def test_metrics_from_run_records_read_back_by_prometheus_parser(tmp_path: Path) -> None:
    m = Metrics()
    m.observe(_cycle())
    m.observe(_cycle())
    server, port = m.serve("127.0.0.1", 0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            scraped = r.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    got = _samples(scraped)
    assert got[("lake_runs_total", (("command", "run"), ("status", "ok")))] == 2
    assert got[("lake_ods_events_total", (("table", "ods.orders"),))] == 10
    assert got[("lake_ods_rows_total", (("op", "upsert"), ("table", "ods.orders")))] == 8
    assert got[("lake_ods_rows_total", (("op", "delete"), ("table", "ods.orders")))] == 2
    assert got[("lake_dead_letter_events_total", (("table", "ods.orders"),))] == 2
    assert got[("lake_dead_letter_events_total", (("table", "(unrouted)"),))] == 4  # 3 per batch, 1 of them routed
    assert got[("lake_ods_lag_seconds", (("event", "newest"), ("table", "ods.orders")))] == 10  # 6 s before T0, committed 4 s after
    assert got[("lake_ods_lag_seconds", (("event", "oldest"), ("table", "ods.orders")))] == 64
    assert got[("lake_model_lag_seconds", (("event", "newest"), ("model", "dws.sales")))] == 16
    assert got[("lake_source_freshness_seconds", (("table", "ods.orders"),))] == 1900
    assert got[("lake_source_freshness_status", (("lake_source_freshness_status", "warn"), ("table", "ods.orders")))] == 1
    assert got[("lake_ods_batch_seconds_count", ())] == 2 and got[("lake_ods_batch_seconds_sum", ())] == 8
    assert got[("lake_model_build_seconds_sum", (("model", "dws.sales"),))] == 5
    assert got[("lake_gate_failures_total", (("table", "ods.users"),))] == 2
    assert got[("lake_check_failures_total", (("severity", "warn"), ("table", "dws.sales")))] == 2
    assert got[("lake_checkpoint_lag_commits", (("model", "dws.sales"), ("upstream", "ods.users")))] == 2
    assert not [k for k in got if k[0].endswith("_created")]
    m.write_textfile(tmp_path / "lake.prom")
    assert _samples((tmp_path / "lake.prom").read_text()) == got


def _lineage_project(tmp_path: Path) -> Path:
    (tmp_path / "layers" / "ods").mkdir(parents=True)
    (tmp_path / "layers" / "dws").mkdir(parents=True)
    (tmp_path / "layers" / "ods" / "t.yaml").write_text("tables:\n  - {source: shop.orders, key: [id]}\n")
    (tmp_path / "layers" / "dws" / "sales.sql").write_text("select o.city, count(*) as n, sum(o.amount) as total from ods.orders o group by o.city")
    (tmp_path / "lake.yaml").write_text("name: shop\nwarehouse: wh\n")
    return tmp_path


def test_lineage_events_match_the_openlineage_schema_and_carry_column_lineage(tmp_path: Path) -> None:
    project = load_project(_lineage_project(tmp_path))
    out = tmp_path / "ol" / "events.jsonl"
    em = LineageEmitter(project, LineageConfig.model_validate({"transport": {"type": "file", "path": str(out)}}), Redactor({}))
    rec = history.new_run("build", ["build"])
    em.run_started(rec)
    em.model_started(rec, "dws.sales")
    em.model_finished(rec, ModelResult(model="dws.sales", strategy="aggregate", mode="full", reason="", rows_written=4))
    em.model_finished(rec, ModelResult(model="dws.sales", strategy="-", mode="failed", reason="boom", error="AnalysisException: boom"))
    rec.status = "ok"
    em.run_finished(rec)
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(e["eventType"], e["job"]["name"]) for e in events] == [
        ("START", "build"), ("START", "dws.sales"), ("COMPLETE", "dws.sales"), ("FAIL", "dws.sales"), ("COMPLETE", "build")]
    for e in events:
        assert problems(e) == [], e
    done = events[2]
    assert done["run"]["runId"] == run_uuid(project, rec.run_id, "dws.sales") and done["job"]["namespace"] == "shop"
    assert done["run"]["facets"]["parent"]["run"]["runId"] == events[0]["run"]["runId"]
    (inp,) = done["inputs"]
    (outp,) = done["outputs"]
    assert (inp["namespace"], inp["name"]) == ("file", str(tmp_path / "wh" / "ods" / "orders"))
    assert outp["name"] == str(tmp_path / "wh" / "dws" / "sales") and outp["outputFacets"]["outputStatistics"]["rowCount"] == 4
    fields = outp["facets"]["columnLineage"]["fields"]
    assert {f: [(i["field"], i["transformations"][0]["subtype"]) for i in v["inputFields"]] for f, v in fields.items()} == {
        "city": [("city", "IDENTITY")], "n": [("city", "GROUP_BY")], "total": [("amount", "AGGREGATION"), ("city", "GROUP_BY")]}
    assert events[3]["run"]["facets"]["errorMessage"]["message"] == "AnalysisException: boom"
    assert not rec.deliveries


def test_lineage_over_http_and_a_transport_that_is_down_is_recorded(tmp_path: Path) -> None:
    project = load_project(_lineage_project(tmp_path))
    with collecting() as ol:
        em = LineageEmitter(project, LineageConfig.model_validate({"transport": {"type": "http", "url": ol.url, "api_key": "k-123"}}), Redactor({}))
        rec = history.new_run("ingest", ["ingest"])
        em.run_started(rec)
        assert [p["path"] for p in ol.posts] == ["/api/v1/lineage"] and ol.posts[0]["headers"]["Authorization"] == "Bearer k-123"
        assert problems(ol.posts[0]["body"]) == []
    down = LineageEmitter(project, LineageConfig.model_validate({"transport": {"type": "http", "url": dead_url(), "timeout_seconds": 2}}),
                          Redactor({}))
    down.run_started(rec)
    (d,) = rec.deliveries
    assert (d.channel, d.ok, d.what) == ("lineage", False, "START (ingest)") and d.error


def test_catchup_runs_latest_all_or_none_and_says_which() -> None:
    every_hour = {"name": "hourly", "cron": "0 * * * *", "what": "build"}
    last = datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc)
    now = datetime(2026, 3, 1, 12, 10, tzinfo=timezone.utc)
    assert [t.hour for t in missed(ScheduleConfig(**every_hour), last, now)] == [10, 11, 12]
    latest = plan(ScheduleConfig(**every_hour), last, now)
    assert latest.runs == 1 and "missed 3 run(s)" in str(latest.message) and "catchup: latest: running once now" in str(latest.message)
    assert plan(ScheduleConfig(**every_hour, catchup="all"), last, now).runs == 3
    skip = plan(ScheduleConfig(**every_hour, catchup=False), last, now)  # Airflow's catchup=False: the latest
    assert skip.runs == 1
    none = plan(ScheduleConfig(**every_hour, catchup="none"), last, now)
    assert none.runs == 0 and "skipping them" in str(none.message)
    assert plan(ScheduleConfig(**every_hour), None, now).message is None  # never ran here: nothing missed
    assert plan(ScheduleConfig(**every_hour), now - timedelta(minutes=5), now).message is None


def _history(tmp_path: Path, *records: RunRecord) -> Path:
    root = _lineage_project(tmp_path)
    (root / "layers" / "dws" / "top.sql").write_text("select city from dws.sales where n > 1")
    (root / "layers" / "dws" / "other.sql").write_text("select o.id from ods.orders o")
    for r in records:
        history.save(Layout(load_project(root).warehouse), r)
    return root


_CLOCK = [T0]


def _rec(command: str, args: list[str], modes: dict[str, str], status: str = "failed", error: str | None = None) -> RunRecord:
    rec = history.new_run(command, args)
    _CLOCK[0] += timedelta(minutes=1)  # run ids sort by start time (to the second)
    rec.run_id, rec.started_at = history.new_run_id(_CLOCK[0]), _CLOCK[0]
    rec.models = [ModelResult(model=m, strategy="-", mode=mode, reason="x") for m, mode in modes.items()]
    rec.status, rec.error, rec.pid = status, error, None  # type: ignore[assignment]
    return rec


def test_result_selectors_and_retry_use_the_last_build(tmp_path: Path) -> None:
    old = _rec("build", ["build"], {"dws.sales": "full", "dws.top": "full", "dws.other": "full"}, "ok")
    last = _rec("run", ["--project", "x", "run"], {"dws.sales": "failed", "dws.top": "skipped", "dws.other": "incremental"})
    root = _history(tmp_path, old, last)
    project = load_project(root)
    for sel, want in (("result:error", ["dws.sales"]), ("result:skipped", ["dws.top"]), ("result:success", ["dws.other"]),
                      ("result:error+", ["dws.sales", "dws.top"]), ("result:error result:skipped", ["dws.sales", "dws.top"])):
        assert sorted(selection(project, [sel]).chosen) == want, sel
    bad = CliRunner().invoke(main, ["--project", str(root), "build", "result:broken"])
    assert bad.exit_code == 1 and "use one of result:error, result:skipped, result:success" in bad.output
    none = CliRunner().invoke(main, ["--project", str(_history(tmp_path / "0")), "build", "result:error"])
    assert none.exit_code == 1 and "result:error needs a previous build" in none.output
    todo = plan_retry(load_project(root))
    assert todo.models == ("dws.sales", "dws.top") and todo.incremental and not todo.unit_tests
    assert "1 failed (dws.sales), 1 skipped (dws.top)" in todo.text


def test_retry_reruns_a_command_that_failed_before_any_model_and_nothing_after_success(tmp_path: Path) -> None:
    crashed = _rec("ingest", ["--project", "/old", "ingest", "--once", "--tables", "ods.orders"], {}, error="cannot reach Kafka\n  fix: start it")
    root = _history(tmp_path, crashed)
    todo = plan_retry(load_project(root))
    assert todo.argv == ("ingest", "--once", "--tables", "ods.orders") and "cannot reach Kafka" in todo.text
    root2 = _history(tmp_path / "2", _rec("build", ["build"], {"dws.sales": "full"}, "ok"))
    out = CliRunner().invoke(main, ["--project", str(root2), "retry"])
    assert out.exit_code == 0 and "nothing to retry: the last build" in out.output
    empty = _history(tmp_path / "3")
    out = CliRunner().invoke(main, ["--project", str(empty), "retry"])
    assert out.exit_code == 1 and "no ingest, build or run" in out.output


def test_version() -> None:
    from importlib import metadata

    out = CliRunner().invoke(main, ["--version"])
    assert out.exit_code == 0 and out.output.startswith(f"lake {metadata.version('lake')} (PySpark {metadata.version('pyspark')}, Hudi 1.2.0")


@pytest.mark.parametrize("policy", ["latest", "none"])
def test_lake_schedule_catches_up_and_serves_metrics(tmp_path: Path, policy: str) -> None:
    """`lake schedule` as a user runs it: missed fire times handled by `catchup:` (said on
    stderr), its children's runs (a `lake build` with nothing to build: no JVM) counted in the
    metrics it serves, read with Prometheus' parser; SIGTERM stops it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from framework.ops.catchup import remember

    root = tmp_path / "p"
    (root / "layers").mkdir(parents=True)
    with collecting() as probe:  # a free port for the metrics: taken, then released
        port = int(probe.url.rsplit(":", 1)[1])
    (root / "lake.yaml").write_text(textwrap.dedent(f"""\
        name: sched
        warehouse: wh
        metrics: {{port: {port}, host: 127.0.0.1, textfile: out/lake.prom}}
        schedules:
          - {{name: hourly, cron: '0 * * * *', what: build, catchup: {policy}}}
        """))
    # Three missed fire times whatever the clock says: the last run half past the hour, three hours
    # back (now - 3h01m counted four when the test ran in an hour's first minute). Not within
    # 20 s of the next hour, so the scheduler starts in the hour the count was made for.
    now = datetime.now(timezone.utc)
    if now.minute == 59 and now.second >= 40:
        time.sleep(61 - now.second)
        now = datetime.now(timezone.utc)
    hour = now.replace(minute=0, second=0, microsecond=0)
    remember(root / "wh" / "_lake", "hourly", hour - timedelta(hours=3) + timedelta(minutes=30))
    proc = subprocess.Popen([sys.executable, "-m", "framework.cli", "--project", str(root), "schedule"], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "250"})
    try:
        assert proc.stderr is not None
        seen: list[str] = []
        want = "hourly: ok" if policy == "latest" else "hourly: next run"
        while not any(want in line for line in seen):
            seen.append(proc.stderr.readline())
            assert seen[-1], "".join(seen)
        # The metrics follow the child's record (through the spool) a moment after the line: poll.
        expected = ([("lake_runs_total", (("command", "build"), ("status", "ok"))),
                     ("lake_schedule_runs_total", (("result", "ok"), ("schedule", "hourly")))] if policy == "latest" else
                    [("lake_schedule_runs_total", (("result", "missed"), ("schedule", "hourly")))])
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                got = _samples(r.read().decode())
            if all(e in got for e in expected) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
    text = "".join(seen) + rest
    assert proc.returncode == 0, text
    assert "hourly: missed 3 run(s) while no scheduler was running" in text
    if policy == "latest":
        assert "catchup: latest: running once now" in text and text.count("hourly: started") == 1
        assert got[("lake_runs_total", (("command", "build"), ("status", "ok")))] == 1  # the child's record, via the spool
        assert got[("lake_schedule_runs_total", (("result", "caught_up"), ("schedule", "hourly")))] == 3
        assert got[("lake_schedule_runs_total", (("result", "ok"), ("schedule", "hourly")))] == 1
        assert "lake_runs_total" in (root / "out" / "lake.prom").read_text()
    else:
        assert "catchup: none: skipping them" in text and "hourly: started" not in text
        assert got[("lake_schedule_runs_total", (("result", "missed"), ("schedule", "hourly")))] == 3
