"""Terminal printers take names, reasons and values that come from CDC, YAML and queries: text
that looks like rich markup (`[/]`, `[bold]`, `[link=x]`) is printed literally, never parsed."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from framework.runtime import terminal as report
from framework.transform.loader import Model
from framework.transform.plan import ModelPlan as Plan
from framework.transform.strategy import Analysis
from models.config import ModelConfig
from models.quality_result import CheckResult, ModelQuality
from models.records import (
    BatchResult,
    Freshness,
    IngestSummary,
    ModelResult,
    RunRecord,
    TableBatchResult,
)

# Each raised MarkupError or vanished into styling before the fix; the trailing backslash would
# escape lake's own closing tag.
NASTY = ["a[/]b", "[bold]c[/bold]", "[link=x]d", "e[/yellow]", "[red", "f\\"]
T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=2000, color_system=None, force_terminal=False), out


def _assert_literal(text: str, *pieces: str) -> None:
    for piece in pieces:
        assert piece in text, f"{piece!r} not printed literally in:\n{text}"


@pytest.mark.parametrize("nasty", NASTY)
def test_ingest_printers_print_table_names_and_reasons_literally(nasty: str) -> None:
    table = f"ods.t{nasty}"
    reason = f"column {nasty} changed type"
    tables = {
        "ok": TableBatchResult(table=table, events=3, upserts=2, deletes=1, status="ok", quarantined=1),
        "dl": TableBatchResult(table=f"ods.u{nasty}", events=1, dead_letter=1, status="dead_letter", reason=reason),
        "bl": TableBatchResult(table=f"ods.v{nasty}", events=1, status="blocked", reason=f"check {nasty} failed"),
    }
    batch = BatchResult(batch_id=0, started_at=T0, finished_at=T0 + timedelta(seconds=1), events=5, dead_letter=1,
                        dead_reasons={f"bad {nasty}": 1}, tables=tables)
    console, out = _console()
    report.batch_printer(console)(batch)
    report.print_ingest_summary(console, IngestSummary(run_id=f"r{nasty}", started_at=T0, batches=[batch]))
    with report.IngestProgress(console) as bar:
        bar.on_batch(batch)
    _assert_literal(out.getvalue(), f"{table} +2/-1", f"ods.u{nasty}: 1 events to the dead letter: {reason}",
                    f"ods.v{nasty}: not committed, check {nasty} failed", f"_quarantine.ods_t{nasty}", f"bad {nasty}",
                    f"ingest r{nasty}")


@pytest.mark.parametrize("nasty", NASTY)
def test_build_plan_check_run_printers_print_names_and_reasons_literally(nasty: str) -> None:
    result = ModelResult(model=f"dws.m{nasty}", strategy="rowwise", mode="failed", reason=f"column {nasty} not found")
    console, out = _console()
    report.model_printer(console)(result)
    report.print_build_summary(console, [result])
    with report.ModelProgress(console, 1) as bar:
        bar.on_start(result.model)
        bar.on_result(result)

    model = Model(name=f"dws.p{nasty}", layer="dws", stem="p", kind="sql", path=Path("p.sql"), config=ModelConfig(),
                  sql="select 1", upstreams=(f"ods.q{nasty}",), fingerprint="f")
    plan = Plan(model=model, analysis=Analysis(strategy="rescan", reason="r", upstreams=model.upstreams), mode="incremental",
                reason=f"upstream {nasty} changed", end={}, pending={f"ods.q{nasty}": 2})
    report.print_plan(console, [(plan, {f"ods.q{nasty}": 7})])

    check = CheckResult(name=f"not_null {nasty}", expectation="expect_column_values_to_not_be_null", kind="row", on="rows",
                        severity="error", success=False, error=f"no column {nasty}")
    report.print_checks(console, [ModelQuality(model=f"dws.c{nasty}", run_id="r", evaluated_at=T0, seconds=1.0, results=[check])])

    record = RunRecord(run_id=f"run{nasty}", command="run", started_at=T0, finished_at=T0, status="failed",
                       error=f"boom {nasty}", freshness={f"dws.f{nasty}": Freshness(events=1, oldest_event_lag_s=1, newest_event_lag_s=1)})
    report.cycle_printer(console)(record)
    report.print_runs(console, [record])
    _assert_literal(out.getvalue(), f"dws.m{nasty}: failed (rowwise)", f"column {nasty} not found",
                    f"dws.p{nasty}", f"ods.q{nasty}: 2", f"ods.q{nasty}: 7", f"upstream {nasty} changed",
                    f"dws.c{nasty}", f"not_null {nasty}", f"could not run: no column {nasty}",
                    f"run run{nasty}", f"dws.f{nasty} 1.0s", f"boom {nasty}")


def test_query_rows_print_values_and_column_names_literally(spark: Any) -> None:
    df = spark.createDataFrame([(v,) for v in NASTY], "`[b]col[/]` string")
    console, out = _console()
    report.print_rows(console, df, "table", 100)
    _assert_literal(out.getvalue(), "[b]col[/]", *NASTY)


def test_cli_messages_print_paths_literally(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from framework.cli.main import main

    root = tmp_path / "p[/]q[bold]r\\"
    out = CliRunner().invoke(main, ["init", str(root)], env={"COLUMNS": "1000"})
    assert out.exit_code == 0, out.output
    assert f"Created project in {root}:" in out.output and f"cd {root} && lake ingest" in out.output
