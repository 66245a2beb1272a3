"""The charts of `lake report`'s run index, from run records: build seconds and freshness per
model across runs, and events per ODS micro-batch."""

from __future__ import annotations

from framework.site.svg import bar_chart, line_chart
from models.records import BUILT_MODES, RunRecord

_MAX_SERIES = 10  # more lines than this are unreadable; the slowest models are kept


def _label(run: RunRecord) -> str:
    return f"{run.started_at:%m-%d %H:%M:%S}"


def build_seconds(runs: list[RunRecord]) -> str:
    """Seconds per model in each run that built models (gaps where a model was not built)."""
    built = [r for r in runs if any(m.mode in BUILT_MODES for m in r.models)]
    series: dict[str, list[float | None]] = {}
    for i, run in enumerate(built):
        for m in run.models:
            if m.mode in BUILT_MODES:
                series.setdefault(m.model, [None] * len(built))[i] = m.seconds
    keep = sorted(series, key=lambda k: -max(v for v in series[k] if v is not None))[:_MAX_SERIES]
    return line_chart("Build time per model", "seconds", [_label(r) for r in built], {k: series[k] for k in sorted(keep)})


def freshness(runs: list[RunRecord]) -> str:
    """Source event -> model commit (newest event of the cycle) per model, for `lake run` cycles."""
    cycles = [r for r in runs if r.freshness]
    if not cycles:
        return '<p class="empty">Freshness per model: recorded by <code>lake run</code> cycles; none in these runs.</p>'
    series: dict[str, list[float | None]] = {}
    for i, run in enumerate(cycles):
        for model, f in run.freshness.items():
            series.setdefault(model, [None] * len(cycles))[i] = f.newest_event_lag_s
    keep = sorted(series, key=lambda k: -max(v for v in series[k] if v is not None))[:_MAX_SERIES]
    return line_chart("Freshness per model (source event → commit)", "seconds", [_label(r) for r in cycles],
                      {k: series[k] for k in sorted(keep)})


def batch_events(runs: list[RunRecord]) -> str:
    """Events per ODS micro-batch, oldest first."""
    bars = [(f"{_label(r)} #{b.batch_id}", float(b.events)) for r in runs if r.ingest is not None for b in r.ingest.batches]
    return bar_chart("Events per ODS micro-batch", "events", bars[-60:])


def charts(runs: list[RunRecord]) -> str:
    """All three, each in its own block."""
    ordered = sorted(runs, key=lambda r: r.started_at)
    return "".join(f'<div class="chart-box">{c}</div>' for c in (build_seconds(ordered), freshness(ordered), batch_events(ordered)))


def overview(dag: str, runs: list[RunRecord]) -> str:
    """The top of `lake report`'s run index: the DAG by last-run state, then the charts."""
    top = f"<h2>Tables by their state in the last run</h2>{dag}" if dag else ""
    return top + f"<h2>Across these runs</h2>{charts(runs)}"
