"""`freshness:` config (errors before Spark, with file, line, field and fix) and the verdict from
an age (no Spark). Measuring real tables: tests/integration/test_cli_workflow.py."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from framework.errors import ConfigError
from framework.project.config import load_project
from framework.quality import freshness
from models.freshness import FreshnessConfig, parse_duration, show_duration


def _project(root: Path, lake_extra: str, tables: str) -> Path:
    (root / "lake.yaml").write_text("name: t\n" + lake_extra)
    (root / "layers" / "ods").mkdir(parents=True, exist_ok=True)
    (root / "layers" / "ods" / "shop.yaml").write_text(tables)
    return root


TABLES = """tables:
  - {source: shop.a, key: [id]}
  - {source: shop.b, key: [id], freshness: {warn_after: 1h}}
  - {source: shop.c, key: [id], freshness: null}
"""


def test_policies_per_table_or_for_all(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path, "ods: {freshness: {warn_after: 30m, error_after: 2h}}\n", TABLES))
    by = {t.qualified_name: freshness.policy(p, t) for t in p.ods_tables}
    assert by["ods.a"] == FreshnessConfig(warn_after=1800, error_after=7200)
    assert by["ods.b"] == FreshnessConfig(warn_after=3600)  # its own replaces the default whole
    assert by["ods.c"] is None  # `null`: none
    assert [t.qualified_name for t in freshness.declared(p)] == ["ods.a", "ods.b"]
    assert [t.qualified_name for t in freshness.declared(p, ["ods.b", "ods.c"])] == ["ods.b"]
    p = load_project(_project(tmp_path, "", TABLES))
    assert [t.qualified_name for t in freshness.declared(p)] == ["ods.b"]


@pytest.mark.parametrize(("text", "line", "field", "problem", "fix"), [
    ("{warn_after: 30x}", 3, "tables[0].freshness.warn_after", "'30x' is not a duration", "45s, 30m, 2h or 1d"),
    ("{warn_after: -5m}", 3, "tables[0].freshness.warn_after", "is not a duration", "45s, 30m, 2h or 1d"),
    ("{warn_after: 2h, error_after: 30m}", 3, "tables[0].freshness", "warn_after (2h) is not below error_after (30m)", "make warn_after the shorter one"),
    ("{}", 3, "tables[0].freshness", "neither warn_after nor error_after is set", "freshness: {warn_after: 30m, error_after: 2h}"),
    ("{warn_afterr: 1h}", 3, "tables[0].freshness.warn_afterr", "unknown key", "did you mean `warn_after`?"),
])
def test_bad_freshness_is_a_config_error_before_spark(tmp_path: Path, text: str, line: int, field: str, problem: str, fix: str) -> None:
    _project(tmp_path, "", f"tables:\n  - source: shop.a\n    freshness: {text}\n    key: [id]\n")
    with pytest.raises(ConfigError) as e:
        load_project(tmp_path)
    (i,) = e.value.issues
    assert (i.file, i.line, i.field) == ("layers/ods/shop.yaml", line, field), i
    assert problem in i.problem and fix in i.fix, i


def test_default_policy_errors_name_lake_yaml(tmp_path: Path) -> None:
    _project(tmp_path, "ods:\n  freshness: {error_after: soon}\n", TABLES)
    with pytest.raises(ConfigError) as e:
        load_project(tmp_path)
    (i,) = e.value.issues
    assert (i.file, i.line, i.field) == ("lake.yaml", 3, "ods.freshness.error_after") and "'soon' is not a duration" in i.problem


def test_durations() -> None:
    assert [parse_duration(v) for v in ("45s", "30m", "2h", "1d", "1.5h", 90, "90")] == [45, 1800, 7200, 86400, 5400, 90, 90]
    assert [show_duration(s) for s in (45, 1800, 7200, 86400, 5400, 90)] == ["45s", "30m", "2h", "1d", "90m", "90s"]


def test_status_from_the_age() -> None:
    both = FreshnessConfig(warn_after="30m", error_after="2h")
    assert [freshness.status(both, a) for a in (60, 1800, 1801, 7200, 7201, None)] == ["ok", "ok", "warn", "warn", "error", "error"]
    warn_only = FreshnessConfig(warn_after="30m")
    assert [freshness.status(warn_only, a) for a in (60, 99999, None)] == ["ok", "warn", "warn"]


def test_a_table_never_ingested_is_measured_from_nothing(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path, "ods: {freshness: {warn_after: 30m, error_after: 2h}}\n", TABLES))
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    a, b, c = freshness.measure(p, p.ods_tables, now)
    assert (a.table, a.status, a.measured_from, a.age_s, a.checked_at) == ("ods.a", "error", "nothing", None, now)
    assert (b.status, c.status) == ("warn", "none")  # b: warn_after only; c: no policy
