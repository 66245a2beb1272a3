"""A `lake verify` run's page in `lake report`: each model's comparison with a full build, the
columns that differ and sample keys with both rows, escaped; and the runs index's one-line summary."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from framework.quality.report import render_run_page, run_summary
from models.records import RunRecord
from models.verify import KeySample, ModelVerify

T0 = datetime(2026, 11, 29, 3, 30, tzinfo=timezone.utc)


def _run() -> RunRecord:
    differs = ModelVerify(model="dwd.users_rw", status="differs", reason="1 changed (score2)", key=["id"], table_rows=12, full_rows=12,
                          changed=1, columns={"score2": 1}, seconds=2.34, repaired=True,
                          samples=[KeySample(key={"id": 5}, table={"id": 5, "score2": 999, "city": "<b>bj</b>"}, full={"id": 5, "score2": 100})])
    equal = ModelVerify(model="dws.city_agg", status="equal", key=["city"], table_rows=4, full_rows=4, sampled=0.05)
    return RunRecord(run_id="r1", command="verify", args=["verify", "--repair"], started_at=T0, finished_at=T0, status="failed",
                     error="not equal to a full build: dwd.users_rw", verified=[differs, equal])


def test_the_run_page_shows_each_model_compared_and_sample_keys(tmp_path: Path) -> None:
    page = render_run_page("r1", [], {}, tmp_path, tmp_path / "gx" / "index.html", _run())
    section = page.split("<h2>Verified against a full build</h2>", 1)[1]
    first, second = section.split("<tr>")[2:4]
    assert "dwd.users_rw" in first and ">differs</span> · repaired" in first and "score2 (1)" in first
    assert [c for c in ("12", "1", "2.3") if f'<td class="n">{c}</td>' in first] == ["12", "1", "2.3"]
    assert "dws.city_agg" in second and ">equal</span>" in second and "5.00% of keys" in second
    assert "<h3>Sample keys that differ</h3>" in section and "999" in section and "&lt;b&gt;bj&lt;/b&gt;" in section
    assert "<b>bj</b>" not in page


def test_the_index_summary_counts_models_by_result() -> None:
    assert "verified: 1 differs, 1 equal" in run_summary(_run())
